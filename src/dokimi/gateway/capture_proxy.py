"""A capturing reverse proxy on loopback: payload capture in front of a real model endpoint.

The reach probe settles its cells with the request bytes a harness sent. Against the scripted
model server (``--dry-run``) those bytes are captured by the server itself; against a real endpoint this proxy
sits between the harness and the endpoint: the harness's ``endpoint_env`` points at :attr:`CaptureProxy.url`,
and every request is forwarded to the upstream base URL as it came (method, path and query, body, headers
except hop-by-hop ones), its response streamed back as it arrives (Server-Sent Events chunk by chunk), and its
body recorded in memory and, optionally, as one JSON line per request.

Rules, one function each:

* :func:`forwarded_request_headers` / :func:`forwarded_response_headers`: hop-by-hop headers (RFC 9110
  section 7.6.1, plus any named in ``Connection``) are dropped; Host and the framing headers are set for
  the new hop.
* :func:`recorded_headers`: only an allow-list of descriptive headers is recorded, so credentials
  (``x-api-key``, ``authorization``, ``cookie``, any other) never reach memory or the capture file;
  :func:`redacted_path` blanks credential-like query parameters (``?key=...``) the same way.
* :func:`upstream_target`: the upstream's path prefix joins the request path (``https://host/v1`` +
  ``/responses`` = ``/v1/responses``).
* Upstream failures (refused, unresolvable, TLS, timeout) become ``502`` with a short JSON body; every socket
  operation has a timeout, so the proxy never hangs on a dead peer.
* :func:`read_request_body`: a request body is read only as far as its framing allows, strictly (a
  Content-Length of digits, chunk sizes of hex digits, never both framings), up to
  :data:`MAX_REQUEST_BYTES`, and a compressed body is decoded no further than that either
  (:func:`decoded_body`), and one client's bodies in memory at once are held to :data:`CLIENT_BODY_BYTES`
  (:class:`BodyAllowance`); :class:`BoundedHTTPServer` holds at most :data:`MAX_CONNECTIONS_PER_CLIENT`
  connections per client address (and :data:`MAX_CONNECTIONS` in all), and a client silent for
  :data:`CLIENT_TIMEOUT_S` is disconnected, so no client can make the proxy hold unbounded memory or threads.

Credentials pass through (the harness's own key goes to the endpoint that expects it); the proxy never adds
any. Like :mod:`dokimi.support.mockmodel` this file imports only the standard library, so it can be copied
into a container's support directory and run there::

    python3 capture_proxy.py --upstream https://api.anthropic.com [--capture requests.jsonl]
"""

from __future__ import annotations

import argparse
import http.client
import json
import re
import signal
import socket
import ssl
import sys
import threading
import time
import zlib
from collections import Counter
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from types import TracebackType
from typing import IO, Any, Protocol, Self
from urllib.parse import parse_qsl, urlencode, urlsplit

__all__ = [
    "CLIENT_TIMEOUT_S",
    "DEFAULT_CONNECT_TIMEOUT_S",
    "DEFAULT_READ_TIMEOUT_S",
    "HOP_BY_HOP",
    "RECORDED_HEADERS",
    "Admission",
    "BodyAllowance",
    "BodyFilter",
    "BoundedHTTPServer",
    "CaptureProxy",
    "ProxiedRequest",
    "Refusal",
    "forwarded_request_headers",
    "forwarded_response_headers",
    "decoded_body",
    "BoundedRequestHandler",
    "main",
    "parser_refusal",
    "read_request_body",
    "recorded_headers",
    "redacted_path",
    "unlogged",
    "upstream_target",
]

DEFAULT_CONNECT_TIMEOUT_S = 30.0
"""Connecting to the upstream (TCP and TLS handshake)."""
DEFAULT_READ_TIMEOUT_S = 600.0
"""The longest silence tolerated from the upstream, or from the client, on one socket read: a model can think
for minutes before its first byte, but a peer silent for this long is dead."""
CLIENT_TIMEOUT_S = 30.0
"""The longest a client may stay silent while the proxy waits for it (a request, the rest of a body, room to
write the answer): an idle connection is closed after it. Harnesses keep idle connections for a few seconds
and open a new one when the proxy has closed theirs."""
CHUNK = 64 * 1024
MAX_REQUEST_BYTES = 32 * 1024 * 1024
"""The largest request body accepted, before and after decoding (413 beyond): Anthropic's own limit for a
Messages request; the body is held in memory, so a client (an agent's command) must not make the host process
hold more."""
KEPT_RESPONSE_LIMIT = 32 * 1024 * 1024
"""The most of one response body kept with ``keep_responses`` (the client still gets all of it)."""
MAX_CONNECTIONS_PER_CLIENT = 32
"""Connections one client address may hold at once (each is a thread); more are answered 503 and closed. A
cell's container has an address of its own on the batch network, so this is a bound per cell."""
MAX_CONNECTIONS = 1024
"""Connections the proxy holds at once, all clients together."""
CLIENT_BODY_BYTES = 2 * MAX_REQUEST_BYTES
"""Request-body bytes (as sent, and decoded) one client address may have in memory at once: two of the largest
requests. Another request past it is answered 503 until one of them is done."""

HOP_BY_HOP = frozenset(
    {
        "connection",
        "keep-alive",
        "proxy-authenticate",
        "proxy-authorization",
        "proxy-connection",
        "te",
        "trailer",
        "transfer-encoding",
        "upgrade",
    }
)
"""Headers that describe one connection, not the message (RFC 9110 section 7.6.1): never forwarded."""

RECORDED_HEADERS = frozenset(
    {
        "accept",
        "anthropic-beta",
        "anthropic-version",
        "content-encoding",
        "content-type",
        "openai-beta",
        "user-agent",
        "x-app",
        "x-goog-api-client",
    }
)
"""The request headers a capture keeps, besides ``x-stainless-*``; an allow-list, so no credential header
(``x-api-key``, ``authorization``, ``cookie``, ``x-goog-api-key``, a vendor's next one) is ever recorded."""
RECORDED_HEADER_PREFIXES = ("x-stainless-",)

_SECRET_PARAM = re.compile(r"key|token|secret|signature|password|auth|sig$", re.IGNORECASE)
REDACTED = "REDACTED"


# --- rules --------------------------------------------------------------------------------------------------


def _connection_tokens(headers: Iterable[tuple[str, str]]) -> set[str]:
    named: set[str] = set()
    for name, value in headers:
        if name.lower() == "connection":
            named |= {t.strip().lower() for t in value.split(",") if t.strip()}
    return named


def forwarded_request_headers(headers: Sequence[tuple[str, str]]) -> list[tuple[str, str]]:
    """The client's headers as sent upstream: hop-by-hop ones (and those ``Connection`` names) dropped, and
    Host and Content-Length too, which the proxy sets for the new hop (Host from the upstream URL), and
    Expect (the proxy already holds the whole body)."""
    drop = HOP_BY_HOP | _connection_tokens(headers) | {"host", "content-length", "expect"}
    return [(k, v) for k, v in headers if k.lower() not in drop]


def forwarded_response_headers(headers: Sequence[tuple[str, str]]) -> list[tuple[str, str]]:
    """The upstream's response headers as sent to the client: hop-by-hop ones and the framing
    (Content-Length, Transfer-Encoding) dropped; the proxy frames the body itself."""
    drop = HOP_BY_HOP | _connection_tokens(headers) | {"content-length"}
    return [(k, v) for k, v in headers if k.lower() not in drop]


def recorded_headers(headers: Iterable[tuple[str, str]]) -> dict[str, str]:
    """The allow-listed headers of a request, lower-cased: what a capture may keep."""
    kept: dict[str, str] = {}
    for name, value in headers:
        low = name.lower()
        if low in RECORDED_HEADERS or low.startswith(RECORDED_HEADER_PREFIXES):
            kept[low] = value
    return kept


def redacted_path(path: str) -> str:
    """The request path with the value of every credential-like query parameter (``key``, ``api_key``,
    ``access_token``, ``sig`` ...) replaced by REDACTED: some APIs take the key in the query string."""
    base, _, query = path.partition("#")[0].partition("?")  # not urlsplit: "http://[x/" is a ValueError
    if not query:
        return path
    pairs = parse_qsl(query, keep_blank_values=True)
    if not any(_SECRET_PARAM.search(k) for k, _ in pairs):
        return path
    query = urlencode([(k, REDACTED if _SECRET_PARAM.search(k) else v) for k, v in pairs], safe="/:")
    return f"{base}?{query}"


@dataclass(frozen=True)
class Upstream:
    scheme: str
    host: str
    port: int
    prefix: str


def parse_upstream(url: str) -> Upstream:
    """The upstream base URL: http or https, a host, an optional path prefix; no query, no user info."""
    parts = urlsplit(url)
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise ValueError(f"upstream {url!r} is not an http:// or https:// URL with a host")
    if parts.username is not None or parts.password is not None:
        raise ValueError("the upstream URL must not hold credentials; the harness sends its own")
    if parts.query or parts.fragment:
        raise ValueError(f"upstream {url!r} must not have a query or fragment")
    port = parts.port or (443 if parts.scheme == "https" else 80)
    return Upstream(parts.scheme, parts.hostname, port, parts.path.rstrip("/"))


def upstream_target(prefix: str, path: str) -> str:
    """The request target upstream: the upstream's path prefix, then the client's path and query."""
    if not path.startswith("/"):
        path = "/" + path
    return prefix + path


class BadBody(Exception):
    """A request body whose framing is broken or ambiguous (400)."""


class TooLarge(Exception):
    """A request body over :data:`MAX_REQUEST_BYTES`, sent or decoded (413)."""


class Busy(Exception):
    """A client already holds :data:`CLIENT_BODY_BYTES` of request bodies in the proxy's memory (503)."""


class BodyAllowance:
    """The request-body bytes each client address may have in the proxy's memory at once, all its
    connections together (:data:`CLIENT_BODY_BYTES`)."""

    def __init__(self, per_client: int) -> None:
        self.per_client = per_client
        self._held: dict[str, int] = {}
        self._lock = threading.Lock()

    def take(self, client: str, n: int) -> None:
        """Hold ``n`` more bytes for ``client``; Busy when that would pass its allowance."""
        with self._lock:
            held = self._held.get(client, 0)
            if held + n > self.per_client:
                raise Busy
            self._held[client] = held + n

    def give_back(self, client: str, n: int) -> None:
        with self._lock:
            left = self._held.get(client, 0) - n
            if left > 0:
                self._held[client] = left
            else:
                self._held.pop(client, None)


def _inflate(raw: bytes, wbits: int, limit: int) -> bytes:
    decompressor = zlib.decompressobj(wbits)
    out = decompressor.decompress(raw, limit + 1)
    if len(out) > limit:
        raise TooLarge
    return out


def decoded_body(raw: bytes, encoding: str | None, limit: int = MAX_REQUEST_BYTES) -> bytes:
    """The body as the client meant it: gzip/deflate undone, never past ``limit`` bytes (TooLarge: a
    compressed body that expands beyond it); other encodings, and a body that does not decode, as they are."""
    enc = (encoding or "").strip().lower()
    try:
        if enc in ("gzip", "x-gzip"):
            return _inflate(raw, 16 + zlib.MAX_WBITS, limit)
        if enc == "deflate":
            try:
                return _inflate(raw, zlib.MAX_WBITS, limit)
            except zlib.error:
                return _inflate(raw, -zlib.MAX_WBITS, limit)
    except zlib.error:
        return raw
    return raw


REQUEST_LINE_LIMIT = 65536
"""The longest request line read (414 beyond): the standard library's bound (``http.server``)."""
HEADER_LINES_LIMIT = 100
"""The most header lines a request may have (431 beyond): the standard library's bound (``http.client``)."""
HEADER_BYTES = 64 * 1024
"""The most bytes of a request's header lines, all together (431 beyond). The standard library holds each line
to 64 KiB and a request to 100 of them, so without this a client that has not yet shown who it is could make
each of its connections hold 6.4 MB (32 connections of one cell: 210 MB); harnesses send a few KB."""


class HeadersTooLarge(http.client.HTTPException):
    """A request's header lines passed :data:`HEADER_BYTES` (the standard library answers it 431)."""


class _HeadReader:
    """A connection's reader that holds each request's header lines to :data:`HEADER_BYTES` in all, while
    ``left`` is set (during the parse of a request's head); bodies are read through it unbounded (their own
    framing bounds them)."""

    def __init__(self, raw: Any) -> None:
        self._raw = raw
        self.left: int | None = None

    def readline(self, size: int = -1) -> bytes:
        line: bytes = self._raw.readline(size)
        if self.left is not None:
            self.left -= len(line)
            if self.left < 0:
                raise HeadersTooLarge(f"request headers over {HEADER_BYTES} bytes")
        return line

    def __getattr__(self, name: str) -> Any:
        return getattr(self._raw, name)


def parser_refusal(code: int, message: str | None, explain: str | None) -> str:
    """Why the standard library's HTTP parser refused a request, from what it passes ``send_error``."""
    if code == 414:
        return f"request line over {REQUEST_LINE_LIMIT} bytes"
    return (explain or message or "malformed request")[:300]


class BoundedRequestHandler(BaseHTTPRequestHandler):
    """What the capture proxy (and the model gateway) and the egress proxy handle requests with: a request
    line of at most :data:`REQUEST_LINE_LIMIT` bytes, at most :data:`HEADER_LINES_LIMIT` header lines of
    :data:`HEADER_BYTES` in all; anything past them is answered 431 (414 for the line) through
    ``send_error``, which each proxy overrides to log the refusal."""

    protocol_version = "HTTP/1.1"
    default_request_version = "HTTP/1.0"
    """A request line without a version is answered with a status line, not as HTTP/0.9 (a bare body)."""

    def setup(self) -> None:
        super().setup()
        self._head = _HeadReader(self.rfile)
        self.rfile = self._head  # type: ignore[assignment]

    def parse_request(self) -> bool:
        self._head.left = HEADER_BYTES
        try:
            return super().parse_request()
        finally:
            self._head.left = None


LOGGED_PATH_CHARS = 2048
"""The most of a refused request's path (and of its reason) logged (a request line can be 64 KiB)."""
REFUSAL_LOG_BYTES = 64 * 1024 * 1024
"""The most bytes of refusal lines a batch's refused log (and the egress proxy's log of a cell) is given:
a refusal costs a client nothing, so a loop of them must not fill the host's disk. Past it, refusals are
counted, not written, and the log's last line says how many (:func:`unlogged`)."""


def unlogged(n: int) -> str:
    """The last line's reason in a log that stopped at :data:`REFUSAL_LOG_BYTES`."""
    return f"{n} more refusals past the log's {REFUSAL_LOG_BYTES} bytes: counted, not logged"


LENGTH_DIGITS = 18
"""The most digits of a ``Content-Length`` (a larger number is 413 anyway)."""
CHUNK_SIZE_DIGITS = 64
"""The most hexadecimal digits of a chunk size (leading zeros are allowed, so more than 16)."""
_DIGITS = re.compile(rf"[0-9]{{1,{LENGTH_DIGITS}}}")
_HEX = re.compile(rb"[0-9A-Fa-f]{1,%d}" % CHUNK_SIZE_DIGITS)
LINE_LIMIT = 8 * 1024
"""The longest chunk-size or trailer line accepted."""
MAX_TRAILERS = 64


def _read_chunked(rfile: Any, limit: int, take: Callable[[int], None]) -> bytes:
    parts: list[bytes] = []
    total = 0
    while True:
        line = rfile.readline(LINE_LIMIT + 1)
        if not line.endswith(b"\n"):
            raise BadBody("a chunk-size line is cut short or too long")
        size_text = line.split(b";", 1)[0].strip()
        if not _HEX.fullmatch(size_text):
            raise BadBody(f"chunk size {size_text[:20]!r} is not a hexadecimal number")
        size = int(size_text, 16)
        if total + size > limit:
            raise TooLarge
        take(size)
        if size == 0:
            for _ in range(MAX_TRAILERS + 1):
                trailer = rfile.readline(LINE_LIMIT + 1)
                if not trailer.endswith(b"\n"):
                    raise BadBody("a trailer line is cut short or too long")
                if not trailer.strip():
                    return b"".join(parts)
            raise BadBody(f"more than {MAX_TRAILERS} trailer lines")
        total += size
        data = rfile.read(size)
        if len(data) != size:
            raise BadBody("the body ended inside a chunk")
        parts.append(data)
        if rfile.readline(3).strip():
            raise BadBody("a chunk is longer than its size")


def read_request_body(
    rfile: Any, headers: Any, limit: int = MAX_REQUEST_BYTES, take: Callable[[int], None] = lambda n: None
) -> bytes:
    """The request body by its framing; BadBody for a broken or ambiguous one (both framings, a length that
    is not digits, conflicting lengths, a chunk size that is not hex, a body cut short), TooLarge past
    ``limit`` (declared or sent). ``take(n)`` is called before each ``n`` bytes are read (it may raise
    Busy). ``headers`` is the request's ``email.message.Message``."""
    encodings = [v for v in headers.get_all("Transfer-Encoding") or []]
    lengths = {v.strip() for v in headers.get_all("Content-Length") or []}
    if encodings:
        if lengths:
            raise BadBody("a request with both Transfer-Encoding and Content-Length")
        if [t.strip().lower() for t in ",".join(encodings).split(",")] != ["chunked"]:
            raise BadBody(f"Transfer-Encoding {','.join(encodings)!r} is not supported (chunked only)")
        return _read_chunked(rfile, limit, take)
    if not lengths:
        return b""
    if len(lengths) > 1:
        raise BadBody("conflicting Content-Length headers")
    (text,) = lengths
    if not _DIGITS.fullmatch(text):
        raise BadBody(f"Content-Length {text[:20]!r} is not a number")
    length = int(text)
    if length > limit:
        raise TooLarge
    take(length)
    data = rfile.read(length) if length else b""
    if len(data) != length:
        raise BadBody("the body ended before its Content-Length")
    return data


# --- the capture --------------------------------------------------------------------------------------------


@dataclass
class ProxiedRequest:
    """One request as the proxy forwarded it. Holds no credential: headers are allow-listed and the path's
    credential-like query parameters are redacted."""

    index: int
    method: str
    path: str
    """Path and query as the client sent them (credential-like parameters REDACTED)."""
    headers: dict[str, str]
    """Only RECORDED_HEADERS (and x-stainless-*)."""
    raw: bytes
    """The request body, decoded when the client sent it gzip- or deflate-encoded; empty when none."""
    status: int | None = None
    """The status the client got: the upstream's, or 502 when the upstream failed; None while in flight."""
    error: str | None = None
    """Why the upstream failed (before or during the response), or None."""
    tag: Any = None
    """What :meth:`CaptureProxy._admit` attached to the request (the model gateway: its cell)."""
    response: bytearray | None = None
    """The response body as relayed, when the proxy keeps responses (``keep_responses``); else None."""
    response_type: str | None = None
    """The response's Content-Type."""
    response_bytes: int = 0
    """Bytes of the response body relayed to the client (``response`` keeps at most the proxy's limit)."""
    started: float = 0.0
    """time.monotonic() when the request arrived."""
    duration_s: float | None = None
    """Seconds from arrival to the last byte relayed."""

    @property
    def body(self) -> Any:
        """The body parsed as JSON, or the text when it is not JSON, or None when empty."""
        return self.parsed_body(json.loads)

    def parsed_body(self, loads: Callable[[bytes], Any]) -> Any:
        """The body parsed by ``loads`` (the model gateway's is its bounded reader), or the text when that
        refuses it, or None when empty."""
        if not self.raw:
            return None
        try:
            return loads(self.raw)
        except (ValueError, RecursionError):  # not JSON, not UTF-8, or nested past the parser
            return self.raw.decode("utf-8", "replace")

    def to_json(self, loads: Callable[[bytes], Any] = json.loads) -> dict[str, Any]:
        """The request as a capture (or a gateway.jsonl) line; ``loads`` reads its body."""
        return {
            "index": self.index,
            "method": self.method,
            "path": self.path,
            "headers": self.headers,
            "body": self.parsed_body(loads),
            "status": self.status,
            "error": self.error,
        }


class _UpstreamFailed(Exception):
    pass


class Refusal(Exception):
    """Raised by :meth:`CaptureProxy._screen`, :meth:`CaptureProxy._admit` or
    :meth:`CaptureProxy._body_filter` to answer a request itself, without forwarding it (or without relaying
    its answer). ``tag``: what the request was attributed to, when it was (the model gateway: its cell)."""

    def __init__(self, status: int, message: str, tag: Any = None) -> None:
        super().__init__(message)
        self.status = status
        self.message = message
        self.tag = tag


class BodyFilter(Protocol):
    """What a proxy does to a response body on its way to the client, chunk by chunk (decoding, scrubbing):
    each call returns the pieces to send. A filtered body is sent chunked (its length may change)."""

    def feed(self, data: bytes) -> Iterable[bytes]: ...

    def end(self) -> Iterable[bytes]: ...


@dataclass(frozen=True)
class Admission:
    """How an admitted request goes upstream: its path and headers (possibly rewritten), and a tag."""

    path: str
    headers: Sequence[tuple[str, str]]
    tag: Any = None


_BUSY = b"HTTP/1.1 503 Service Unavailable\r\nContent-Length: 0\r\nConnection: close\r\n\r\n"


class BoundedHTTPServer(ThreadingHTTPServer):
    """A ``ThreadingHTTPServer`` that holds at most ``per_client`` connections per client address and
    ``total`` in all: a connection past either is answered 503 and closed at once, without a thread."""

    daemon_threads = True
    request_queue_size = 128
    """The listen backlog: a burst of connections waits there to be accepted (or turned away)."""

    def __init__(
        self,
        address: tuple[str, int],
        handler: type[BaseHTTPRequestHandler],
        *,
        per_client: int = MAX_CONNECTIONS_PER_CLIENT,
        total: int = MAX_CONNECTIONS,
    ) -> None:
        super().__init__(address, handler)
        self.per_client = per_client
        self.total = total
        self.turned_away = 0
        """Connections closed at once because a bound was reached."""
        self.turned_away_from: Counter[str] = Counter()
        """The same, by client address."""
        self._count_lock = threading.Lock()
        self._by_client: dict[str, int] = {}
        self._open = 0

    def process_request(self, request: Any, client_address: Any) -> None:
        client = str(client_address[0])
        with self._count_lock:
            if self._open >= self.total or self._by_client.get(client, 0) >= self.per_client:
                self.turned_away += 1
                self.turned_away_from[client] += 1
                admitted = False
            else:
                self._by_client[client] = self._by_client.get(client, 0) + 1
                self._open += 1
                admitted = True
        if not admitted:
            try:
                request.setblocking(False)
                request.send(_BUSY)
            except OSError:
                pass
            self.shutdown_request(request)
            return
        try:
            super().process_request(request, client_address)
        except BaseException:
            self._release(client)
            raise

    def process_request_thread(self, request: Any, client_address: Any) -> None:
        try:
            super().process_request_thread(request, client_address)
        finally:
            self._release(str(client_address[0]))

    def handle_error(self, request: Any, client_address: Any) -> None:
        """A request that ended in an exception the handler did not catch: a client that reset or dropped its
        connection (an OSError) is no news; anything else is one line on stderr, never the standard library's
        traceback (a hostile client must not be able to fill the batch's stderr)."""
        error = sys.exc_info()[1]
        if isinstance(error, OSError):
            return
        print(
            f"dokimi: {type(self).__name__} on port {self.server_address[1]}: a request from "
            f"{client_address[0]} failed: {type(error).__name__}: {error}"[:500],
            file=sys.stderr,
        )

    def _release(self, client: str) -> None:
        with self._count_lock:
            self._open -= 1
            left = self._by_client.get(client, 1) - 1
            if left > 0:
                self._by_client[client] = left
            else:
                self._by_client.pop(client, None)


class ServedHTTP:
    """A :class:`BoundedHTTPServer` answering on a daemon thread from the moment it is made: what the capture
    proxy (and with it the model gateway) and the egress proxy each listen with."""

    def __init__(
        self,
        host: str,
        port: int,
        handler: type[BaseHTTPRequestHandler],
        name: str,
        *,
        per_client: int = MAX_CONNECTIONS_PER_CLIENT,
    ) -> None:
        self._httpd = BoundedHTTPServer((host, port), handler, per_client=per_client)
        self._thread = threading.Thread(target=self._httpd.serve_forever, name=name, daemon=True)
        self._thread.start()

    @property
    def port(self) -> int:
        return int(self._httpd.server_address[1])

    def close(self) -> None:
        """Stop listening and wait (up to 5 s) for the serving thread."""
        self._httpd.shutdown()
        self._httpd.server_close()
        self._thread.join(timeout=5)

    def turned_away(self) -> list[str]:
        """One sentence per client address whose connections were turned away at once, for a log."""
        with self._httpd._count_lock:
            counts = sorted(self._httpd.turned_away_from.items())
        bounds = f"{self._httpd.per_client} from one address or {self._httpd.total} in all"
        return [
            f"{n} connection(s) from {client} turned away at once (past {bounds})" for client, n in counts
        ]


class CaptureProxy:
    """A recording reverse proxy on ``host`` (127.0.0.1), port 0 (any free port) by default.

    Use as a context manager (or start()/stop()). ``url`` is the base URL to give the harness, ``requests``
    every request so far (a copy, in arrival order), ``capture_path`` a JSONL file with one line per finished
    request. ``via`` is an HTTP proxy URL (``http://host:port``) to reach the upstream through, for callers
    behind one; ``cafile`` extra trusted CA certificates for an https upstream.
    """

    def __init__(
        self,
        upstream: str,
        *,
        capture_path: str | Path | None = None,
        host: str = "127.0.0.1",
        port: int = 0,
        connect_timeout: float = DEFAULT_CONNECT_TIMEOUT_S,
        read_timeout: float = DEFAULT_READ_TIMEOUT_S,
        via: str | None = None,
        cafile: str | None = None,
    ) -> None:
        self.upstream_url = upstream
        self._upstream = parse_upstream(upstream)
        self._via = parse_upstream(via) if via else None
        self.capture_path = Path(capture_path) if capture_path is not None else None
        self.connect_timeout = connect_timeout
        self.read_timeout = read_timeout
        self._ssl = ssl.create_default_context(cafile=cafile) if self._upstream.scheme == "https" else None
        self.client_timeout = CLIENT_TIMEOUT_S
        """The longest silence tolerated from a client (see :data:`CLIENT_TIMEOUT_S`)."""
        self.kept_response_limit = KEPT_RESPONSE_LIMIT
        """The most of a response body kept on its ProxiedRequest (``keep_responses``)."""
        self.body_allowance = BodyAllowance(CLIENT_BODY_BYTES)
        """Request-body bytes each client address may have in memory at once."""
        self.keep_requests = True
        """Keep every request in memory (:attr:`requests`); the model gateway records to files instead."""
        self.keep_responses = False
        """Keep each response body on its ProxiedRequest (the model gateway reads usage from it)."""
        self._host = host
        self._port = port
        self._lock = threading.Lock()
        self._settled = threading.Condition(self._lock)
        self._in_flight = 0
        self._requests: list[ProxiedRequest] = []
        self._capture_file: IO[str] | None = None
        self._server: ServedHTTP | None = None

    # lifecycle

    def start(self) -> Self:
        if self._server is not None:
            return self
        if self.capture_path is not None:
            self.capture_path.parent.mkdir(parents=True, exist_ok=True)
            self._capture_file = self.capture_path.open("a", encoding="utf-8")
        self._server = ServedHTTP(self._host, self._port, self.handler_class(), "capture-proxy")
        return self

    def handler_class(self) -> type[BaseHTTPRequestHandler]:
        """The request handler this proxy serves with (another listener of the same proxy subclasses it)."""
        return _make_handler(self)

    def stop(self, *, settle: float = 5.0) -> None:
        """Stop listening, give requests still in flight up to ``settle`` seconds to finish (a client has
        its last byte a moment before the proxy records the request as done), then close the capture."""
        server, self._server = self._server, None
        if server is not None:
            server.close()
            for reason in server.turned_away():
                self._refused("-", "-", Refusal(503, reason))
            self._stopped()
        with self._settled:
            self._settled.wait_for(lambda: self._in_flight == 0, timeout=settle)
            if self._capture_file is not None:
                self._capture_file.close()
                self._capture_file = None

    def __enter__(self) -> Self:
        return self.start()

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.stop()

    @property
    def port(self) -> int:
        if self._server is None:
            raise RuntimeError("the capture proxy is not running")
        return self._server.port

    @property
    def url(self) -> str:
        return f"http://{self._host}:{self.port}"

    @property
    def requests(self) -> list[ProxiedRequest]:
        with self._lock:
            return list(self._requests)

    # called from handler threads

    def _screen(self, method: str, path: str, headers: Sequence[tuple[str, str]]) -> Any:
        """Whether a request may be read at all, from its request line and headers, before its body is read;
        raise :class:`Refusal` to answer it here (its body is then never read). Returns what :meth:`_admit`
        gets as ``screened``. The capture proxy screens nothing; the model gateway overrides this."""
        return None

    def _admit(
        self, method: str, path: str, headers: Sequence[tuple[str, str]], body: bytes, screened: Any
    ) -> Admission:
        """Whether and how a request goes upstream, given its (decoded) body; raise :class:`Refusal` to
        answer it here instead. The capture proxy forwards everything as it came."""
        return Admission(path, headers)

    def _refused(self, method: str, path: str, refusal: Refusal) -> None:
        """A request the proxy answered itself (the capture proxy records nothing of it)."""

    def _stopped(self) -> None:
        """The proxy has stopped listening (the model gateway closes its refused log)."""

    def _body_filter(self, req: ProxiedRequest, response: http.client.HTTPResponse) -> BodyFilter | None:
        """What the response body goes through on its way to the client (None: relayed as it is); raise
        :class:`Refusal` when it cannot be relayed."""
        return None

    def _relayed_headers(
        self, req: ProxiedRequest, headers: list[tuple[str, str]], filtered: bool
    ) -> list[tuple[str, str]]:
        """The response headers sent to the client (after the hop-by-hop ones are dropped)."""
        return headers

    def _begin(
        self, method: str, path: str, headers: Sequence[tuple[str, str]], body: bytes, tag: Any = None
    ) -> ProxiedRequest:
        with self._lock:
            req = ProxiedRequest(
                index=len(self._requests),
                method=method,
                path=redacted_path(path),
                headers=recorded_headers(headers),
                raw=body,
                tag=tag,
                response=bytearray() if self.keep_responses else None,
                started=time.monotonic(),
            )
            if self.keep_requests:
                self._requests.append(req)
            self._in_flight += 1
        return req

    def _respond(self, req: ProxiedRequest, status: int, content_type: str | None = None) -> None:
        with self._lock:
            req.status = status
            req.response_type = content_type

    def _finish(self, req: ProxiedRequest, status: int, error: str | None) -> None:
        req.duration_s = time.monotonic() - req.started
        with self._settled:
            req.status, req.error = status, error
            try:
                self._completed(req)
            finally:
                self._in_flight -= 1
                self._settled.notify_all()

    def _completed(self, req: ProxiedRequest) -> None:
        """A request is done (called with the lock held): the capture proxy writes its capture line."""
        if self._capture_file is not None:
            self._capture_file.write(json.dumps(req.to_json(), sort_keys=True) + "\n")
            self._capture_file.flush()

    def _connect(self) -> http.client.HTTPConnection:
        up, via = self._upstream, self._via
        host, port = (via.host, via.port) if via else (up.host, up.port)
        conn: http.client.HTTPConnection
        if up.scheme == "https":
            conn = http.client.HTTPSConnection(host, port, timeout=self.connect_timeout, context=self._ssl)
            if via:
                conn.set_tunnel(up.host, up.port)
        else:
            conn = http.client.HTTPConnection(host, port, timeout=self.connect_timeout)
        conn.connect()
        if conn.sock is not None:
            conn.sock.settimeout(self.read_timeout)
        return conn

    def _opened(self, conn: http.client.HTTPConnection) -> None:
        """An upstream connection was opened for the request of this thread (the model gateway keeps it, to
        cut it short when the request's cell ends)."""

    def _target(self, path: str) -> str:
        up = self._upstream
        target = upstream_target(up.prefix, path)
        if self._via is not None and up.scheme == "http":  # a plain-http proxy takes the absolute URI
            return f"http://{up.host}:{up.port}{target}"
        return target

    def _open(
        self, method: str, path: str, headers: Sequence[tuple[str, str]], raw: bytes
    ) -> tuple[http.client.HTTPConnection, http.client.HTTPResponse]:
        """Send the request upstream and read the status line and headers; raise _UpstreamFailed."""
        conn: http.client.HTTPConnection | None = None
        try:
            conn = self._connect()
            self._opened(conn)
            conn.putrequest(method, self._target(path), skip_accept_encoding=True)
            for name, value in forwarded_request_headers(headers):
                conn.putheader(name, value)
            if raw or method in ("POST", "PUT", "PATCH"):
                conn.putheader("Content-Length", str(len(raw)))
            conn.endheaders(raw or None)
            return conn, conn.getresponse()
        except (OSError, http.client.HTTPException, ssl.SSLError) as e:
            if conn is not None:
                conn.close()
            raise _UpstreamFailed(_describe(e, self.upstream_url)) from e


def _describe(error: BaseException, upstream: str) -> str:
    if isinstance(error, (TimeoutError, socket.timeout)):
        return f"upstream {upstream} timed out"
    if isinstance(error, ConnectionRefusedError):
        return f"upstream {upstream} refused the connection"
    if isinstance(error, socket.gaierror):
        return f"upstream {upstream}: host not found ({error.strerror})"
    if isinstance(error, ssl.SSLError):
        return f"upstream {upstream}: TLS failed ({error.reason or error})"
    return f"upstream {upstream} failed: {type(error).__name__}: {error}"[:300]


def _content_length(value: str | None) -> int | None:
    try:
        return int(value) if value is not None and int(value) >= 0 else None
    except ValueError:
        return None


def _error_body(message: str) -> bytes:
    """A short JSON body in the Anthropic error shape (harnesses print its message)."""
    return json.dumps({"type": "error", "error": {"type": "proxy_error", "message": message}}).encode()


def _make_handler(proxy: CaptureProxy) -> type[BaseHTTPRequestHandler]:
    class Handler(BoundedRequestHandler):
        server_version = "dokimi-capture-proxy"
        timeout = proxy.client_timeout  # a silent client cannot hold a thread for long

        def log_message(self, format: str, *args: Any) -> None:
            pass  # requests are recorded in the capture, not on stderr

        def send_error(self, code: int, message: str | None = None, explain: str | None = None) -> None:
            """What the standard library refuses before a ``do_`` method runs (a request line over 64 KiB,
            header lines over their bounds, a malformed request line, an unknown method): refused like any
            request the proxy answers itself (the model gateway logs it to the batch's unattributed log: no
            cell key has been read), in the API's error shape, and the connection closed."""
            reason = parser_refusal(code, message, explain)
            method = getattr(self, "command", None) or "-"
            path = (getattr(self, "path", None) or "-")[:LOGGED_PATH_CHARS]
            self.close_connection = True
            proxy._refused(method, path, Refusal(code, f"refused by the HTTP parser: {reason}"))
            self._send_error(code, reason)

        def _refuse(self, refusal: Refusal, *, close: bool = False) -> None:
            proxy._refused(self.command, self.path, refusal)
            if close:
                self.close_connection = True  # the body (or the rest of it) is never read
            self._send_error(refusal.status, refusal.message)

        def _take(self, n: int) -> None:
            proxy.body_allowance.take(self.client_address[0], n)
            self._held += n

        _held = 0
        """Bytes of this request's body held in the client's allowance (given back when it is done)."""

        def _body(self, headers: Sequence[tuple[str, str]], screened: Any) -> tuple[bytes, bytes] | None:
            """The request body as sent and decoded, or None when it was refused (answered here)."""
            encoding = next((v for k, v in headers if k.lower() == "content-encoding"), None)
            try:
                raw = read_request_body(self.rfile, self.headers, take=self._take)
                if (encoding or "identity").strip().lower() != "identity":
                    self._take(MAX_REQUEST_BYTES)  # what decoding may hold
                return raw, decoded_body(raw, encoding)
            except Busy:
                message = "this client already has too much request data in flight; retry when it is answered"
                self._refuse(Refusal(503, message, screened), close=True)
            except TooLarge:
                self._refuse(
                    Refusal(413, f"request body over {MAX_REQUEST_BYTES} bytes", screened), close=True
                )
            except BadBody as e:
                self._refuse(Refusal(400, f"unreadable request body: {e}", screened), close=True)
            except (ValueError, OSError) as e:
                self._refuse(Refusal(400, f"unreadable request body: {e}"[:300], screened), close=True)
            return None

        def _serve(self) -> None:
            try:
                self._serve_request()
            finally:
                proxy.body_allowance.give_back(self.client_address[0], self._held)
                self._held = 0

        def _serve_request(self) -> None:
            headers = list(self.headers.items())
            try:
                screened = proxy._screen(self.command, self.path, headers)
            except Refusal as refusal:
                self._refuse(refusal, close=True)
                return
            bodies = self._body(headers, screened)
            if bodies is None:
                return
            raw, decoded = bodies
            try:
                admission = proxy._admit(self.command, self.path, headers, decoded, screened)
            except Refusal as refusal:
                self._refuse(refusal)
                return
            req = proxy._begin(self.command, self.path, headers, decoded, admission.tag)
            try:
                conn, resp = proxy._open(self.command, admission.path, admission.headers, raw)
            except _UpstreamFailed as e:
                proxy._finish(req, 502, str(e))
                self._send_error(502, str(e))
                return
            proxy._respond(req, resp.status, resp.getheader("Content-Type"))
            error: str | None = "the proxy failed while relaying the response"
            status = resp.status
            try:
                try:
                    body_filter = proxy._body_filter(req, resp)
                except Refusal as refusal:
                    status, error = refusal.status, refusal.message
                    self.close_connection = True
                    self._send_error(refusal.status, refusal.message)
                    return
                error = self._relay(resp, req, body_filter)
            finally:
                conn.close()
                proxy._finish(req, status, error)

        def _relay(
            self, resp: http.client.HTTPResponse, req: ProxiedRequest, body_filter: BodyFilter | None
        ) -> str | None:
            """Stream the response to the client as it arrives; the error that cut it short, or None."""
            self.send_response_only(resp.status, resp.reason)
            headers = proxy._relayed_headers(
                req, forwarded_response_headers(resp.getheaders()), body_filter is not None
            )
            for name, value in headers:
                self.send_header(name, value)
            bodiless = self.command == "HEAD" or resp.status in (204, 304) or 100 <= resp.status < 200
            upstream_length = _content_length(resp.getheader("Content-Length"))
            length = None if body_filter is not None else upstream_length  # a filter may change the length
            chunked = not bodiless and length is None and self.request_version != "HTTP/1.0"
            if length is not None:
                self.send_header("Content-Length", str(length))
            elif chunked:
                self.send_header("Transfer-Encoding", "chunked")
            elif not bodiless:  # an HTTP/1.0 client: the body ends when the connection closes
                self.send_header("Connection", "close")
            self.end_headers()
            if bodiless:
                return None
            received = 0
            while True:
                try:
                    data = resp.read1(CHUNK)
                    received += len(data)
                    if not data and upstream_length is not None and received < upstream_length:
                        raise http.client.IncompleteRead(b"", upstream_length - received)
                    pieces = [data] if body_filter is None else list(
                        body_filter.feed(data) if data else body_filter.end()
                    )  # fmt: skip
                except (OSError, http.client.HTTPException, zlib.error) as e:
                    self.close_connection = True  # the client sees a cut stream, never a made-up end
                    return _describe(e, proxy.upstream_url)
                try:
                    for piece in pieces:
                        if not piece:
                            continue
                        if req.response is not None and len(req.response) < proxy.kept_response_limit:
                            req.response += piece[: proxy.kept_response_limit - len(req.response)]
                        req.response_bytes += len(piece)
                        self.wfile.write(b"%x\r\n%s\r\n" % (len(piece), piece) if chunked else piece)
                    if not data and chunked:
                        self.wfile.write(b"0\r\n\r\n")
                    self.wfile.flush()
                except OSError as e:
                    self.close_connection = True
                    return f"the client went away: {e}"[:300]
                if not data:
                    return None

        def _send_error(self, status: int, message: str) -> None:
            data = _error_body(message)
            try:
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                if self.command != "HEAD":
                    self.wfile.write(data)
            except OSError:
                self.close_connection = True

        do_GET = do_POST = do_PUT = do_DELETE = do_PATCH = do_HEAD = do_OPTIONS = _serve

    return Handler


# --- standalone entry point ---------------------------------------------------------------------------------


def main(argv: Sequence[str] | None = None) -> int:
    """Proxy until SIGINT/SIGTERM. Prints the proxy's base URL as the first line of stdout."""
    parser = argparse.ArgumentParser(
        prog="python -m dokimi.gateway.capture_proxy", description=__doc__.split("\n\n")[0]
    )
    parser.add_argument("--upstream", required=True, help="base URL to forward to (http or https)")
    parser.add_argument("--port", type=int, default=0, help="port on 127.0.0.1 (default: any free port)")
    parser.add_argument("--capture", help="append one JSON line per request to this file")
    args = parser.parse_args(argv)
    try:
        proxy = CaptureProxy(args.upstream, capture_path=args.capture, port=args.port).start()
    except (ValueError, OSError) as e:
        print(f"capture_proxy: {e}", file=sys.stderr)
        return 2
    stop_requested = threading.Event()
    signal.signal(signal.SIGTERM, lambda signum, frame: stop_requested.set())
    print(proxy.url, flush=True)
    try:
        while not stop_requested.wait(0.5):
            pass
    except KeyboardInterrupt:
        return 130
    finally:
        proxy.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main())
