"""Tokens of one model response, read from the bytes the gateway relayed.

One reader for every wire format a harness speaks, because each names its counters differently:

- Anthropic Messages: ``usage`` with ``input_tokens``, ``output_tokens``, ``cache_creation_input_tokens``
  and ``cache_read_input_tokens`` (input excludes the cached tokens). A stream carries it in
  ``message_start`` and, cumulative, in ``message_delta``.
- OpenAI Responses and Chat Completions: ``usage`` with ``input_tokens``/``prompt_tokens`` and
  ``output_tokens``/``completion_tokens``; cached tokens (``*_tokens_details.cached_tokens``) are inside the
  input total and are moved out of it. A stream carries it in its last event.
- Gemini: ``usageMetadata`` with ``promptTokenCount`` (cached inside), ``candidatesTokenCount``,
  ``thoughtsTokenCount`` (billed as output) and ``cachedContentTokenCount``.

Streamed counters are cumulative, so a response's usage is the largest value of each counter over its
events. A response with no usage object is not a model response (``/api/hello``, ``count_tokens``, an error
body): :func:`response_usage` returns None for it.

The gateway reads the usage of a response while it relays it (:class:`UsageMeter`), event by event, so the
count never depends on how much of a long answer is kept for the record. Every JSON the gateway reads, the
answers here and the requests in :mod:`dokimi.gateway.model`, goes through one bounded reader
(:func:`read_json`): an upstream that echoes a hostile request, or answers one of its own, can neither crash
a gateway thread nor be counted wrong. An answer whose usage is over the reader's limits, or holds a counter
that is not a count of tokens, has unreadable usage (:class:`UnreadableUsage`): the gateway charges it its
worst case.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from typing import Any

from dokimi.gateway.prices import Usage
from dokimi.schemas._base import JsonOverLimit, load_json

__all__ = [
    "JSON_VALUES_LIMIT",
    "UnreadableUsage",
    "UsageMeter",
    "read_json",
    "response_model",
    "response_usage",
    "sse_payloads",
]

SSE_LINE_LIMIT = 4 * 1024 * 1024
"""The longest event-stream line read for usage (a usage event is a few hundred bytes); a longer one is
skipped."""
JSON_BODY_LIMIT = 32 * 1024 * 1024
"""The largest non-streamed body read for usage; a larger one has no readable usage."""
JSON_VALUES_LIMIT = 1_000_000
"""The most values one request body, answer body or event the gateway reads may hold (a model request holds
some thousands). Read, each value is a Python object: a 32 MB body of ``{},{},...`` would otherwise take
800 MB of the host's memory."""


class UnreadableUsage(ValueError):
    """An answer whose usage the gateway cannot count: its JSON is over the bounded reader's limits, or a
    token counter is not a count. The message says why; the request is charged its worst case."""


def read_json(data: bytes | str) -> Any:
    """The gateway's one JSON reader, for requests and answers alike: dokimi's bounded reader
    (:func:`dokimi.schemas._base.load_json`): nested at most 64 levels, at most :data:`JSON_VALUES_LIMIT`
    values, integers of at most 20 digits. :class:`~dokimi.schemas._base.JsonOverLimit` (a ValueError) names
    the limit passed; any other ValueError means the data is not JSON (or not UTF-8)."""
    return load_json(data, max_values=JSON_VALUES_LIMIT)


def _read_payload(data: bytes | str) -> Any:
    """:func:`read_json` for usage: JSON over a limit is UnreadableUsage; text that is not JSON, a
    ValueError."""
    try:
        return read_json(data)
    except JsonOverLimit as e:
        raise UnreadableUsage(f"is not JSON the gateway reads: {e}") from None


def sse_payloads(text: str) -> Iterator[Any]:
    """The JSON value of every ``data:`` line of a Server-Sent Events body (non-JSON data is skipped; data
    over the reader's limits raises :class:`UnreadableUsage`)."""
    for line in text.splitlines():
        if not line.startswith("data:"):
            continue
        data = line[5:].strip()
        if not data or data == "[DONE]":
            continue
        try:
            payload = _read_payload(data)
        except UnreadableUsage:
            raise
        except ValueError:
            continue
        yield payload


def _payloads(body: bytes, content_type: str | None) -> Iterator[Any]:
    text = body.decode("utf-8", "replace")
    if "event-stream" in (content_type or "") or text.lstrip().startswith(("event:", "data:")):
        yield from sse_payloads(text)
        return
    try:
        value = _read_payload(text)
    except UnreadableUsage:
        raise
    except ValueError:
        return
    if isinstance(value, list):  # Gemini's non-SSE streaming answer: a JSON array of chunks
        yield from value
    else:
        yield value


def _usage_objects(value: Any, depth: int = 0) -> Iterator[tuple[str, Mapping[str, Any]]]:
    """Every ``usage`` / ``usageMetadata`` mapping in a payload (searched a few levels deep)."""
    if depth > 4 or not isinstance(value, Mapping):
        return
    for key in ("usage", "usageMetadata"):
        found = value.get(key)
        if isinstance(found, Mapping):
            yield key, found
    for child in value.values():
        if isinstance(child, Mapping):
            yield from _usage_objects(child, depth + 1)


def _int(mapping: Mapping[str, Any], *names: str) -> int:
    """The first of ``names`` the usage object has (absent or null: 0); UnreadableUsage when it is not a count
    of tokens (negative, fractional, text): the answer cannot be counted, so it is not counted as nothing."""
    for name in names:
        value = mapping.get(name)
        if value is None:
            continue
        if isinstance(value, float) and value.is_integer():
            value = int(value)
        if isinstance(value, bool) or not isinstance(value, int) or value < 0:
            raise UnreadableUsage(f"has a usage counter {name} of {str(value)[:40]!r}, not a count of tokens")
        return value
    return 0


def _cached(mapping: Mapping[str, Any]) -> int:
    for name in ("input_tokens_details", "prompt_tokens_details"):
        details = mapping.get(name)
        if isinstance(details, Mapping):
            return _int(details, "cached_tokens")
    return 0


def normal_usage(kind: str, raw: Mapping[str, Any]) -> Usage | None:
    """One usage object in the normal form; None when it holds no token counter at all."""
    if kind == "usageMetadata":
        prompt = _int(raw, "promptTokenCount")
        cached = _int(raw, "cachedContentTokenCount")
        output = _int(raw, "candidatesTokenCount") + _int(raw, "thoughtsTokenCount")
        if not (prompt or output or cached) and "promptTokenCount" not in raw:
            return None
        return Usage(input=max(0, prompt - cached), output=output, cache_read=cached)
    if "cache_creation_input_tokens" in raw or "cache_read_input_tokens" in raw:  # Anthropic
        return Usage(
            input=_int(raw, "input_tokens"),
            output=_int(raw, "output_tokens"),
            cache_write=_int(raw, "cache_creation_input_tokens"),
            cache_read=_int(raw, "cache_read_input_tokens"),
        )
    known = ("input_tokens", "output_tokens", "prompt_tokens", "completion_tokens")
    if not any(name in raw for name in known):
        return None
    if "prompt_tokens" in raw or "completion_tokens" in raw or _cached(raw):  # OpenAI
        total_in = _int(raw, "input_tokens", "prompt_tokens")
        cached = _cached(raw)
        return Usage(
            input=max(0, total_in - cached),
            output=_int(raw, "output_tokens", "completion_tokens"),
            cache_read=cached,
        )
    return Usage(input=_int(raw, "input_tokens"), output=_int(raw, "output_tokens"))


def _largest(best: Usage | None, payload: Any) -> Usage | None:
    """``best`` with each counter raised to that of the payload's usage objects (streamed counters are
    cumulative)."""
    for kind, raw in _usage_objects(payload):
        usage = normal_usage(kind, raw)
        if usage is None:
            continue
        best = usage if best is None else Usage(
            max(best.input, usage.input),
            max(best.output, usage.output),
            max(best.cache_write, usage.cache_write),
            max(best.cache_read, usage.cache_read),
        )  # fmt: skip
    return best


def response_usage(body: bytes, content_type: str | None) -> Usage | None:
    """The tokens of one response (largest of each counter over a stream's events); None when the response
    carries no usage, so was not produced by a model. UnreadableUsage when it has usage the gateway cannot
    count, or JSON over the reader's limits."""
    best: Usage | None = None
    for payload in _payloads(body, content_type):
        best = _largest(best, payload)
    return best


class UsageMeter:
    """The usage of one response, read from its (decoded) bytes as they are relayed, in bounded memory: an
    event stream line by line, any other body whole up to :data:`JSON_BODY_LIMIT`."""

    def __init__(self, content_type: str | None) -> None:
        self._stream = "event-stream" in (content_type or "")
        self._pending = bytearray()
        self._skipping = False
        self._too_large = False
        self.usage: Usage | None = None
        self.unreadable: str | None = None
        """Why the answer's usage cannot be counted (see :class:`UnreadableUsage`); None when it can."""

    def feed(self, data: bytes) -> None:
        if not self._stream:
            if not self._too_large:
                self._pending += data
                if len(self._pending) > JSON_BODY_LIMIT:
                    self._too_large, self._pending = True, bytearray()
            return
        self._pending += data
        while True:
            end = self._pending.find(b"\n")
            if end == -1:
                if len(self._pending) > SSE_LINE_LIMIT:
                    self._skipping, self._pending = True, bytearray()
                return
            line = bytes(self._pending[:end])
            del self._pending[: end + 1]
            if self._skipping:
                self._skipping = False
                continue
            self._line(line)

    def _line(self, line: bytes) -> None:
        if not line.startswith(b"data:"):
            return
        data = line[5:].strip()
        if not data or data == b"[DONE]":
            return
        try:
            self.usage = _largest(self.usage, _read_payload(data))
        except UnreadableUsage as e:
            self.unreadable = self.unreadable or f"an event of the answer {e}"
        except ValueError:  # not JSON: not an event the usage is in
            return

    def finish(self) -> Usage | None:
        """The response's usage once it has ended; None when it carried none, or when it cannot be counted
        (:attr:`unreadable` says why)."""
        if self._stream:
            if self._pending and not self._skipping:
                self._line(bytes(self._pending))
        elif self._too_large:
            self.unreadable = f"the answer is over {JSON_BODY_LIMIT} bytes, more than the gateway reads"
        else:
            try:
                self.usage = response_usage(bytes(self._pending), None)
            except UnreadableUsage as e:
                self.unreadable = f"the answer {e}"
        self._pending = bytearray()
        return None if self.unreadable else self.usage


def response_model(body: bytes, content_type: str | None) -> str | None:
    """The model a response names (``model``, ``message.model``, ``response.model``, ``modelVersion``)."""
    for payload in _payloads(body, content_type):
        if not isinstance(payload, Mapping):
            continue
        for holder in (payload, payload.get("message"), payload.get("response")):
            if isinstance(holder, Mapping):
                for key in ("model", "modelVersion"):
                    value = holder.get(key)
                    if isinstance(value, str) and value:
                        return value
    return None
