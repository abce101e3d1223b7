"""What the model gateway does to an answer on its way back to the agent, chunk by chunk, in bounded memory.

- :class:`Decoder`: the gateway asks the upstream for an uncompressed answer (``Accept-Encoding: identity``);
  an upstream that compresses anyway (gzip, deflate) is decoded here, so the answer can be scrubbed and its
  usage read. An encoding the gateway cannot decode is not relayed (:class:`UnreadableEncoding`).
- :class:`Scrubber`: the real credential never reaches the agent, whatever the upstream quotes back: every
  occurrence in the answer's headers and body is replaced by :data:`SCRUBBED`, including one split across
  two chunks of a stream. It is the last line of defence: the gateway puts the real credential in the
  profile's credential headers only, so an upstream can quote it only from there.
"""

from __future__ import annotations

import zlib
from collections.abc import Iterator, Sequence

__all__ = ["SCRUBBED", "Decoder", "Scrubber", "UnreadableEncoding", "scrub_text"]

SCRUBBED = "[credential removed by dokimi]"
PIECE = 256 * 1024
"""The most one decoding step produces: a compressed chunk is expanded piece by piece (a gzip bomb costs
time, never memory)."""


class UnreadableEncoding(Exception):
    """An answer compressed in an encoding the gateway cannot decode (br, zstd, a chain of several)."""


class Decoder:
    """A compressed body decoded as it streams; ``identity`` (or none) passes through."""

    def __init__(self, encoding: str | None) -> None:
        enc = (encoding or "").strip().lower()
        self.encoding = enc
        self._z: zlib._Decompress | None = None
        self._raw_deflate_tried = False
        if enc in ("gzip", "x-gzip"):
            self._z = zlib.decompressobj(16 + zlib.MAX_WBITS)
        elif enc == "deflate":
            self._z = zlib.decompressobj()
        elif enc not in ("", "identity"):
            raise UnreadableEncoding(f"the upstream answered in an encoding the gateway cannot read ({enc})")

    @property
    def decodes(self) -> bool:
        return self._z is not None

    def feed(self, data: bytes) -> Iterator[bytes]:
        if self._z is None:
            if data:
                yield data
            return
        try:
            out = self._z.decompress(data, PIECE)
        except zlib.error:
            if self.encoding != "deflate" or self._raw_deflate_tried:
                raise
            self._raw_deflate_tried = True  # "deflate" sent as a raw stream, as some servers do
            self._z = zlib.decompressobj(-zlib.MAX_WBITS)
            out = self._z.decompress(data, PIECE)
        while True:
            if out:
                yield out
            if not self._z.unconsumed_tail:
                return
            out = self._z.decompress(self._z.unconsumed_tail, PIECE)

    def end(self) -> Iterator[bytes]:
        if self._z is not None:
            yield from self.feed(b"")
            tail = self._z.flush()
            if tail:
                yield tail


def scrub_text(text: str, secrets: Sequence[str]) -> str:
    """``text`` with every secret replaced (a header value, a line of a log)."""
    for secret in secrets:
        if secret:
            text = text.replace(secret, SCRUBBED)
    return text


class Scrubber:
    """Replaces every secret in a byte stream; holds back the end of a chunk that could be the start of a
    secret until the next chunk (or the end) says whether it is."""

    def __init__(self, secrets: Sequence[str]) -> None:
        self._secrets = sorted({s.encode() for s in secrets if s}, key=len, reverse=True)
        self._held = b""

    def _replace(self, data: bytes) -> bytes:
        for secret in self._secrets:
            data = data.replace(secret, SCRUBBED.encode())
        return data

    def _partial(self, data: bytes) -> int:
        """The length of the longest end of ``data`` that a secret starts with (a proper prefix)."""
        longest = 0
        for secret in self._secrets:
            for n in range(min(len(secret) - 1, len(data)), longest, -1):
                if data.endswith(secret[:n]):
                    longest = n
                    break
        return longest

    def feed(self, data: bytes) -> bytes:
        if not self._secrets:
            return data
        data = self._replace(self._held + data)
        keep = self._partial(data)
        self._held = data[len(data) - keep :] if keep else b""
        return data[: len(data) - keep] if keep else data

    def end(self) -> bytes:
        held, self._held = self._held, b""
        return self._replace(held)
