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
"""

from __future__ import annotations

import json
from collections.abc import Iterator, Mapping
from typing import Any

from dokimi.gateway.prices import Usage

__all__ = ["response_model", "response_usage", "sse_payloads"]


def sse_payloads(text: str) -> Iterator[Any]:
    """The JSON value of every ``data:`` line of a Server-Sent Events body (non-JSON data is skipped)."""
    for line in text.splitlines():
        if not line.startswith("data:"):
            continue
        data = line[5:].strip()
        if not data or data == "[DONE]":
            continue
        try:
            yield json.loads(data)
        except ValueError:
            continue


def _payloads(body: bytes, content_type: str | None) -> Iterator[Any]:
    text = body.decode("utf-8", "replace")
    if "event-stream" in (content_type or "") or text.lstrip().startswith(("event:", "data:")):
        yield from sse_payloads(text)
        return
    try:
        value = json.loads(text)
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
    for name in names:
        value = mapping.get(name)
        if isinstance(value, int) and not isinstance(value, bool) and value >= 0:
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


def response_usage(body: bytes, content_type: str | None) -> Usage | None:
    """The tokens of one response (largest of each counter over a stream's events); None when the response
    carries no usage, so was not produced by a model."""
    best: dict[str, int] | None = None
    for payload in _payloads(body, content_type):
        for kind, raw in _usage_objects(payload):
            usage = normal_usage(kind, raw)
            if usage is None:
                continue
            fields = {
                "input": usage.input,
                "output": usage.output,
                "cache_write": usage.cache_write,
                "cache_read": usage.cache_read,
            }
            best = fields if best is None else {k: max(best[k], v) for k, v in fields.items()}
    return None if best is None else Usage(**best)


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
