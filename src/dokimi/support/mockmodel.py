"""A scripted model server on loopback that speaks the Anthropic Messages API, the OpenAI Responses and Chat
Completions APIs and the Gemini generateContent API (streaming and not).

It lets a real harness CLI (Claude Code, Codex, Gemini CLI, anything pointed at its base URL) run end to end
with no model behind it: every "main loop" request is answered with the next turn of a script, every request
body is recorded (payload capture), and side requests the harness makes on its own (title generation, quota
checks) get a short canned answer without consuming the script.

This module is deliberately a single file that imports only the standard library, so it can be copied into a
read-only support directory and run inside a minimal container::

    python3 mockmodel.py --script turns.json [--port 0] [--capture requests.jsonl]
    python3 -m dokimi.support.mockmodel --script turns.json

Script format (JSON; YAML too when ruamel.yaml is importable): a list of turns, each a mapping with one of

    {"text": "..."}                                   a text answer that ends the turn (stop_reason end_turn)
    {"final": "..."}                                  the same; marks the intended last answer
    {"tool_use": {"name": "Bash", "input": {...}}}    one tool call (stop_reason tool_use)
    {"tool_uses": [{"name": ..., "input": ...}, ...]} several tool calls in one response
    {"echo_tokens": true}                             answer with every RC token in this request's body
    {"error": {"status": 529, "type": "overloaded_error", "message": "..."}}   an HTTP error answer

and optionally ``"usage": {"input": N, "output": M}``: the token counts that answer reports. Usage is fixed
(DEFAULT_INPUT_TOKENS and DEFAULT_OUTPUT_TOKENS per answer unless a turn says otherwise), never derived from
the request: a harness's request carries text its host decides (OS version, date), so a count taken from its
size would make every cost a harness computes from it differ from machine to machine. The request's size is in
the capture (``bytes``) for whoever wants it.

In a text, ``{{match:REGEX}}`` is replaced by the first match of REGEX in the request's body (empty when there
is none): how a scripted judge copies the verdict marker, whose nonce is drawn per call.
``text`` may also accompany ``tool_use``/``tool_uses``/``echo_tokens`` as a preamble block. Once the script is
exhausted every main-loop request is answered with the final text ``done``. One script plays in every wire
format: a ``tool_use`` becomes an Anthropic ``tool_use`` block, an OpenAI ``function_call`` item or
``tool_calls`` entry, or a Gemini ``functionCall`` part, whichever API the request came in on. See
docs/mock-model.md.
"""

from __future__ import annotations

import argparse
import itertools
import json
import os
import re
import signal
import stat
import sys
import threading
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from types import TracebackType
from typing import IO, Any, Self
from urllib.parse import parse_qsl, urlsplit

__all__ = [
    "DEFAULT_INPUT_TOKENS",
    "DEFAULT_OUTPUT_TOKENS",
    "DONE_TEXT",
    "NO_TOKENS_TEXT",
    "SIDE_TEXT",
    "TOKEN_RE",
    "api_of",
    "asks_for_structured_output",
    "CapturedRequest",
    "APIS",
    "MockModelServer",
    "Route",
    "ScriptError",
    "Turn",
    "TurnUsage",
    "find_tokens",
    "is_main_loop_request",
    "load_script",
    "main",
    "parse_script",
]

TOKEN_RE = re.compile(rb"RC[0-9a-f]{6}")
"""A reach-probe token: RC plus six lowercase hex digits."""

DONE_TEXT = "done"
"""The answer to every main-loop request once the script is exhausted."""

SIDE_TEXT = "ok"

NO_TOKENS_TEXT = "NONE"
"""An ``echo_tokens`` answer when the request holds no token: what the reach probe asks a model to answer
then, so the probe counts no prose words in it."""
"""The canned answer to side requests, which never consume the script."""

CAPTURED_HEADERS = (
    "anthropic-beta",
    "anthropic-version",
    "content-type",
    "openai-beta",
    "originator",
    "user-agent",
    "x-app",
    "x-goog-api-client",
    "x-stainless-lang",
    "x-stainless-package-version",
    "x-stainless-retry-count",
)
"""Request headers kept in the capture. Credentials (x-api-key, authorization, x-goog-api-key) are never
recorded."""

ANTHROPIC = "anthropic"
RESPONSES = "openai-responses"
CHAT = "openai-chat"
GEMINI = "gemini"
APIS = (ANTHROPIC, RESPONSES, CHAT, GEMINI)
"""The wire formats the server speaks; a request's path decides which one answers it (:func:`api_of`)."""

_GEMINI_ROUTE = re.compile(r"^(?:/[^/]+)*/models/(?P<model>[^/:]+):(?P<method>[A-Za-z]+)$")

TURN_KINDS = ("text", "final", "tool_use", "tool_uses", "echo_tokens", "error")
TURN_KEYS = (*TURN_KINDS, "usage")

DEFAULT_INPUT_TOKENS = 1000
"""Input tokens every answer reports unless its turn sets ``usage``: fixed, never the request's size."""
DEFAULT_OUTPUT_TOKENS = 100
"""Output tokens every answer reports unless its turn sets ``usage``."""


class ScriptError(ValueError):
    """A script file that cannot be played: names the file, the turn index and what is wrong."""


@dataclass(frozen=True)
class ToolCall:
    name: str
    input: Mapping[str, Any]


@dataclass(frozen=True)
class TurnUsage:
    """The token counts an answer reports: the script's, else the defaults; never the request's size."""

    input: int = DEFAULT_INPUT_TOKENS
    output: int = DEFAULT_OUTPUT_TOKENS

    def to_json(self) -> dict[str, int]:
        """Anthropic's usage object; the OpenAI and Gemini shapes are rendered from it (:class:`_Reply`)."""
        return {
            "input_tokens": self.input,
            "output_tokens": self.output,
            "cache_creation_input_tokens": 0,
            "cache_read_input_tokens": 0,
        }


@dataclass(frozen=True)
class Turn:
    """One scripted model response."""

    text: str | None = None
    tool_calls: tuple[ToolCall, ...] = ()
    echo_tokens: bool = False
    error: Mapping[str, Any] | None = None
    usage: TurnUsage = TurnUsage()

    @property
    def stop_reason(self) -> str:
        return "tool_use" if self.tool_calls else "end_turn"


@dataclass
class CapturedRequest:
    """One request as the server received it."""

    index: int
    method: str
    path: str
    headers: dict[str, str]
    raw: bytes
    body: Any
    """The parsed JSON body, or the body as text when it is not JSON, or None when empty."""
    main_loop: bool = False
    turn: int | None = None
    """Index of the script turn that answered it; None for side requests, unknown paths, exhausted scripts."""
    known: bool = True
    """False for a path the server does not implement (answered 404)."""
    authenticated: bool | None = None
    """With ``api_key``: whether the request carried that key (never the key itself); None without."""

    def tokens(self) -> list[str]:
        """Every reach-probe token in the raw request bytes, in order of first appearance."""
        return find_tokens(self.raw)

    def to_json(self) -> dict[str, Any]:
        return {
            "index": self.index,
            "method": self.method,
            "path": self.path,
            "headers": self.headers,
            "body": self.body,
            "bytes": len(self.raw),
            "main_loop": self.main_loop,
            "turn": self.turn,
            "known": self.known,
            "authenticated": self.authenticated,
        }


_MATCH = re.compile(r"\{\{match:(.+?)\}\}")


def _substitute_matches(text: str, raw: bytes) -> str:
    """``{{match:REGEX}}`` -> the first match of REGEX in the request body (see the module docstring)."""
    if "{{match:" not in text:
        return text
    body = raw.decode("utf-8", "replace")

    def one(found: re.Match[str]) -> str:
        hit = re.search(found.group(1), body)
        return hit.group(0) if hit else ""

    return _MATCH.sub(one, text)


def find_tokens(data: bytes | str) -> list[str]:
    """Reach-probe tokens found anywhere in data, deduplicated, in order of first appearance."""
    raw = data.encode("utf-8", "surrogateescape") if isinstance(data, str) else data
    return list(dict.fromkeys(m.decode("ascii") for m in TOKEN_RE.findall(raw)))


# --- the script ---------------------------------------------------------------------------------------------


def _tool_call(value: Any, where: str) -> ToolCall:
    if not isinstance(value, Mapping) or not isinstance(value.get("name"), str) or not value["name"]:
        raise ScriptError(f"{where}: a tool call needs a non-empty string 'name'")
    tool_input = value.get("input", {})
    if not isinstance(tool_input, Mapping):
        raise ScriptError(f"{where}: 'input' of tool call {value['name']!r} must be a mapping")
    unknown = sorted(set(value) - {"name", "input"})
    if unknown:
        raise ScriptError(f"{where}: unknown key(s) {unknown} in tool call; allowed: name, input")
    return ToolCall(name=value["name"], input=dict(tool_input))


def _turn_usage(value: Any, where: str) -> TurnUsage:
    """A turn's ``usage``: a mapping of ``input`` and/or ``output`` to token counts (whole numbers >= 0)."""
    if not isinstance(value, Mapping):
        raise ScriptError(f"{where}: 'usage' must be a mapping like {{input: 1200, output: 80}}")
    unknown = sorted(set(value) - {"input", "output"})
    if unknown:
        raise ScriptError(f"{where}: unknown key(s) {unknown} in usage; allowed: input, output")
    for key, count in value.items():
        if isinstance(count, bool) or not isinstance(count, int) or count < 0:
            raise ScriptError(f"{where}: usage.{key} must be a whole number of tokens, 0 or more")
    return TurnUsage(**{str(k): int(v) for k, v in value.items()})


def _parse_turn(raw: Any, where: str) -> Turn:
    if not isinstance(raw, Mapping):
        raise ScriptError(f"{where}: a turn must be a mapping with one of {', '.join(TURN_KINDS)}")
    unknown = sorted(set(raw) - set(TURN_KEYS))
    if unknown:
        kinds = ", ".join(TURN_KINDS)
        raise ScriptError(f"{where}: unknown key(s) {unknown}; a turn has one of {kinds}, and may have usage")
    if "text" in raw and "final" in raw:
        raise ScriptError(f"{where}: 'text' and 'final' are the same kind of answer; use one")
    actions = [k for k in ("final", "tool_use", "tool_uses", "echo_tokens", "error") if k in raw]
    if len(actions) > 1:
        raise ScriptError(
            f"{where}: a turn has one of final, tool_use, tool_uses, echo_tokens, error; got {actions}"
        )
    text = raw.get("final", raw.get("text"))
    if text is not None and not isinstance(text, str):
        raise ScriptError(f"{where}: text must be a string")
    usage = _turn_usage(raw["usage"], where) if "usage" in raw else TurnUsage()
    if "error" in raw:
        err = raw["error"]
        if not isinstance(err, Mapping) or not isinstance(err.get("status", 500), int):
            raise ScriptError(f"{where}: 'error' must be a mapping with an integer 'status'")
        if "usage" in raw:
            raise ScriptError(f"{where}: an error answer reports no usage; drop 'usage'")
        return Turn(text=text, error=dict(err))
    calls: tuple[ToolCall, ...] = ()
    if "tool_use" in raw:
        calls = (_tool_call(raw["tool_use"], f"{where}.tool_use"),)
    elif "tool_uses" in raw:
        if not isinstance(raw["tool_uses"], Sequence) or not raw["tool_uses"]:
            raise ScriptError(f"{where}: 'tool_uses' must be a non-empty list")
        calls = tuple(_tool_call(c, f"{where}.tool_uses[{i}]") for i, c in enumerate(raw["tool_uses"]))
    echo = raw.get("echo_tokens", False)
    if not isinstance(echo, bool):
        raise ScriptError(f"{where}: 'echo_tokens' must be true or false")
    if text is None and not calls and not echo:
        raise ScriptError(f"{where}: an empty turn; give text, final, tool_use, tool_uses or echo_tokens")
    return Turn(text=text, tool_calls=calls, echo_tokens=echo, usage=usage)


def parse_script(data: Any, *, source: str = "<script>") -> list[Turn]:
    """Turn the decoded script document (a list of turns, or {"turns": [...]}) into Turns."""
    if isinstance(data, Mapping) and "turns" in data:
        data = data["turns"]
    if not isinstance(data, list):
        raise ScriptError(f"{source}: a script is a list of turns (or a mapping with a 'turns' list)")
    return [_parse_turn(t, f"{source}: turns[{i}]") for i, t in enumerate(data)]


def _load_yaml(text: str, path: Path) -> Any:
    """YAML through ruamel.yaml (dokimi's YAML library); the standalone server needs JSON scripts only."""
    try:
        # ruamel.yaml costs a start ~30 ms; only YAML input needs it
        from ruamel.yaml import YAML
        from ruamel.yaml.error import YAMLError
    except ImportError as e:
        raise ScriptError(f"{path}: YAML scripts need ruamel.yaml; write the script as JSON") from e
    try:
        return YAML(typ="safe", pure=True).load(text)
    except YAMLError as e:
        raise ScriptError(f"{path}: not valid YAML: {e}") from e


MAX_SCRIPT_BYTES = 64 * 1024 * 1024


def _read_script(p: Path) -> str:
    """The script's text: a regular file only (a FIFO would block forever), at most MAX_SCRIPT_BYTES."""
    try:
        fd = os.open(p, os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC)
    except OSError as e:
        raise ScriptError(f"{p}: cannot read script: {e.strerror}") from e
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            raise ScriptError(f"{p}: not a regular file (a directory, FIFO or device); give a JSON file")
        if st.st_size > MAX_SCRIPT_BYTES:
            raise ScriptError(f"{p}: {st.st_size} bytes, over the {MAX_SCRIPT_BYTES} byte limit")
        os.set_blocking(fd, True)
        chunks = []
        while chunk := os.read(fd, 1 << 20):
            chunks.append(chunk)
        data = b"".join(chunks)
    finally:
        os.close(fd)
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as e:
        raise ScriptError(f"{p}: not UTF-8 text (byte {e.start})") from e


def load_script(path: str | Path) -> list[Turn]:
    """Read a JSON script (or YAML, when the file ends in .yaml/.yml and a YAML library is importable)."""
    p = Path(path)
    text = _read_script(p)
    try:
        if p.suffix in (".yaml", ".yml"):
            data = _load_yaml(text, p)
        else:
            try:
                data = json.loads(text)
            except json.JSONDecodeError as e:
                raise ScriptError(f"{p}:{e.lineno}: not valid JSON: {e.msg}") from e
        return parse_script(data, source=str(p))
    except RecursionError:
        raise ScriptError(f"{p}: nested too deeply") from None
    except ScriptError:
        raise
    except ValueError as e:  # a number with more digits than Python converts (4300), in JSON or YAML
        raise ScriptError(f"{p}: {e}") from None


# --- which requests play the script -------------------------------------------------------------------------


def _system_text(body: Mapping[str, Any]) -> str:
    system = body.get("system")
    if isinstance(system, str):
        return system
    if isinstance(system, list):
        return "\n".join(b.get("text", "") for b in system if isinstance(b, Mapping))
    return ""


MAIN_LOOP_MARKERS = ("You are Claude Code", "Claude Agent SDK")
"""Phrases of Claude Code's agent-loop system prompt. 2.1.328 in -p mode sends "You are a Claude agent, built
on Anthropic's Claude Agent SDK."; its interactive prompt starts "You are Claude Code". Side requests carry
neither."""


@dataclass(frozen=True)
class Route:
    """Which API a request speaks, what it asks for, and whether the answer streams by its path."""

    api: str
    action: str
    """``generate`` (a model turn), ``count`` (token counting) or ``models`` (a model listing)."""
    model: str | None = None
    """The model named in the path (Gemini), else None (it is in the body)."""
    stream: bool | None = None
    """Streaming decided by the path (Gemini ``:streamGenerateContent``), else None (body ``stream``)."""


def api_of(method: str, route: str) -> Route | None:
    """The API of a request by method and path (query removed, no trailing slash), or None when unknown.

    Anthropic ``POST .../messages``; OpenAI ``POST .../responses`` and ``POST .../chat/completions`` under any
    base path (``/v1``, none, a gateway's prefix), ``GET .../models``; Gemini
    ``POST .../models/M:generateContent|streamGenerateContent|countTokens``.
    """
    if method == "POST":
        gemini = _GEMINI_ROUTE.match(route)
        if gemini is not None:
            verb = gemini.group("method")
            if verb in ("generateContent", "streamGenerateContent"):
                return Route(GEMINI, "generate", gemini.group("model"), verb == "streamGenerateContent")
            if verb == "countTokens":
                return Route(GEMINI, "count", gemini.group("model"))
            return None
        if route.endswith("/messages/count_tokens"):
            return Route(ANTHROPIC, "count")
        if route.endswith("/messages"):
            return Route(ANTHROPIC, "generate")
        if route.endswith("/chat/completions"):
            return Route(CHAT, "generate")
        if route.endswith("/responses"):
            return Route(RESPONSES, "generate")
    if method in ("GET", "HEAD") and (route.endswith("/models") or route == "/models"):
        return Route(RESPONSES, "models")
    return None


def asks_for_structured_output(api: str, body: Mapping[str, Any]) -> bool:
    """Whether an OpenAI or Gemini request asks for a JSON (schema) answer: a harness's own side question
    (Gemini CLI's next-speaker check, a router's classification), never an agent-loop turn."""
    if api == RESPONSES:
        text = body.get("text")
        fmt = text.get("format") if isinstance(text, Mapping) else None
        return isinstance(fmt, Mapping) and fmt.get("type") in ("json_schema", "json_object")
    if api == CHAT:
        fmt = body.get("response_format")
        return isinstance(fmt, Mapping) and fmt.get("type") in ("json_schema", "json_object")
    if api == GEMINI:
        config = body.get("generationConfig")
        if not isinstance(config, Mapping):
            return False
        return config.get("responseMimeType") == "application/json" or bool(
            config.get("responseSchema") or config.get("responseJsonSchema")
        )
    return False


SIDE_MARKERS = ("You are a title generator",)
"""Phrases that open a harness's own side question sent without tools (OpenCode 1.18's session title)."""


def _head_text(body: Mapping[str, Any]) -> str:
    """The start of an OpenAI or Gemini request's instructions: the first message, or the system prompt."""
    parts: list[Any] = [body.get("instructions"), body.get("systemInstruction")]
    for key in ("messages", "input", "contents"):
        items = body.get(key)
        if isinstance(items, list) and items:
            parts.append(items[0])
    return json.dumps(parts)[:2000]


def is_main_loop_request(
    body: Any, *, main_model: str | None = None, api: str = ANTHROPIC, model: str | None = None
) -> bool:
    """Whether a model request is a turn of the agent's main loop (and so plays the next script turn).

    For the OpenAI and Gemini APIs (``api``), first match wins: a request for another model than
    ``main_model`` (the body's ``model``, or ``model`` from a Gemini path) is a side request; a request that
    asks for a structured JSON answer (:func:`asks_for_structured_output`) is a side request; a request
    without tools whose first message or system prompt holds a :data:`SIDE_MARKERS` phrase is a side request;
    anything else is a main-loop turn. For Anthropic Messages:

    The rule, first match wins:
      1. a request asking for at most 1 output token (a quota or reachability check) is a side request;
      2. with ``main_model`` configured, a request for any other model is a side request;
      3. a request that offers tools is a main-loop turn;
      4. a request without tools is a main-loop turn when its system prompt carries an agent-loop marker
         (Claude Code with ``--tools ""`` sends no tools), or when it has no system prompt at all (a plain
         client: curl, an SDK script); anything else (title or topic generation) is a side request.
    Side requests are answered with SIDE_TEXT and leave the script where it was.
    """
    if not isinstance(body, Mapping):
        return False
    if api != ANTHROPIC:
        asked = model if model is not None else body.get("model")
        if main_model is not None and asked != main_model:
            return False
        if asks_for_structured_output(api, body):
            return False
        return bool(body.get("tools")) or not any(m in _head_text(body) for m in SIDE_MARKERS)
    max_tokens = body.get("max_tokens")
    if isinstance(max_tokens, int) and max_tokens <= 1:
        return False
    if main_model is not None and body.get("model") != main_model:
        return False
    if body.get("tools"):
        return True
    system = _system_text(body)
    return not system or any(marker in system for marker in MAIN_LOOP_MARKERS)


# --- the Messages API wire format ---------------------------------------------------------------------------


@dataclass
class _Reply:
    """A resolved answer: content blocks plus stop reason, ready for either wire format."""

    blocks: list[dict[str, Any]]
    stop_reason: str
    usage: dict[str, int]

    def message(self, msg_id: str, model: str) -> dict[str, Any]:
        return {
            "id": msg_id,
            "type": "message",
            "role": "assistant",
            "model": model,
            "content": self.blocks,
            "stop_reason": self.stop_reason,
            "stop_sequence": None,
            "usage": self.usage,
        }

    def sse_events(self, msg_id: str, model: str) -> Iterator[tuple[str, dict[str, Any]]]:
        start = self.message(msg_id, model)
        start.update(content=[], stop_reason=None, usage={**self.usage, "output_tokens": 1})
        yield "message_start", {"type": "message_start", "message": start}
        yield "ping", {"type": "ping"}
        for i, block in enumerate(self.blocks):
            if block["type"] == "text":
                yield (
                    "content_block_start",
                    {
                        "type": "content_block_start",
                        "index": i,
                        "content_block": {"type": "text", "text": ""},
                    },
                )
                yield (
                    "content_block_delta",
                    {
                        "type": "content_block_delta",
                        "index": i,
                        "delta": {"type": "text_delta", "text": block["text"]},
                    },
                )
            else:
                yield (
                    "content_block_start",
                    {
                        "type": "content_block_start",
                        "index": i,
                        "content_block": {
                            "type": "tool_use",
                            "id": block["id"],
                            "name": block["name"],
                            "input": {},
                        },
                    },
                )
                yield (
                    "content_block_delta",
                    {
                        "type": "content_block_delta",
                        "index": i,
                        "delta": {"type": "input_json_delta", "partial_json": json.dumps(block["input"])},
                    },
                )
            yield "content_block_stop", {"type": "content_block_stop", "index": i}
        yield (
            "message_delta",
            {
                "type": "message_delta",
                "delta": {"stop_reason": self.stop_reason, "stop_sequence": None},
                "usage": {"output_tokens": self.usage["output_tokens"]},
            },
        )
        yield "message_stop", {"type": "message_stop"}

    # --- OpenAI Responses ---------------------------------------------------------------------------------

    def responses_items(self) -> list[dict[str, Any]]:
        items: list[dict[str, Any]] = []
        for block in self.blocks:
            if block["type"] == "text":
                items.append(
                    {
                        "type": "message",
                        "id": f"msg_{block.get('id', 'mock')}",
                        "role": "assistant",
                        "status": "completed",
                        "content": [{"type": "output_text", "text": block["text"], "annotations": []}],
                    }
                )
            else:
                items.append(
                    {
                        "type": "function_call",
                        "id": f"fc_{block['id']}",
                        "call_id": f"call_{block['id']}",
                        "name": block["name"],
                        "arguments": json.dumps(block["input"]),
                        "status": "completed",
                    }
                )
        return items

    def responses_usage(self) -> dict[str, Any]:
        return {
            "input_tokens": self.usage["input_tokens"],
            "input_tokens_details": {"cached_tokens": 0},
            "output_tokens": self.usage["output_tokens"],
            "output_tokens_details": {"reasoning_tokens": 0},
            "total_tokens": self.usage["input_tokens"] + self.usage["output_tokens"],
        }

    def response(self, resp_id: str, model: str, *, status: str = "completed") -> dict[str, Any]:
        done = status == "completed"
        return {
            "id": resp_id,
            "object": "response",
            "created_at": 0,
            "status": status,
            "model": model,
            "output": self.responses_items() if done else [],
            "usage": self.responses_usage() if done else None,
            "error": None,
            "incomplete_details": None,
        }

    def responses_sse(self, resp_id: str, model: str) -> Iterator[tuple[str, dict[str, Any]]]:
        seq = itertools.count()
        yield (
            "response.created",
            {
                "type": "response.created",
                "sequence_number": next(seq),
                "response": self.response(resp_id, model, status="in_progress"),
            },
        )
        for index, item in enumerate(self.responses_items()):
            added = dict(item, status="in_progress")
            if item["type"] == "message":
                added["content"] = []
            else:
                added["arguments"] = ""
            yield (
                "response.output_item.added",
                {
                    "type": "response.output_item.added",
                    "sequence_number": next(seq),
                    "output_index": index,
                    "item": added,
                },
            )
            if item["type"] == "message":
                text = item["content"][0]["text"]
                common = {"item_id": item["id"], "output_index": index, "content_index": 0}
                yield (
                    "response.output_text.delta",
                    {
                        "type": "response.output_text.delta",
                        "sequence_number": next(seq),
                        **common,
                        "delta": text,
                    },
                )
                yield (
                    "response.output_text.done",
                    {
                        "type": "response.output_text.done",
                        "sequence_number": next(seq),
                        **common,
                        "text": text,
                    },
                )
            else:
                yield (
                    "response.function_call_arguments.done",
                    {
                        "type": "response.function_call_arguments.done",
                        "sequence_number": next(seq),
                        "item_id": item["id"],
                        "output_index": index,
                        "arguments": item["arguments"],
                    },
                )
            yield (
                "response.output_item.done",
                {
                    "type": "response.output_item.done",
                    "sequence_number": next(seq),
                    "output_index": index,
                    "item": item,
                },
            )
        yield (
            "response.completed",
            {
                "type": "response.completed",
                "sequence_number": next(seq),
                "response": self.response(resp_id, model),
            },
        )

    # --- OpenAI Chat Completions ---------------------------------------------------------------------------

    def chat_message(self) -> tuple[dict[str, Any], str]:
        text = "".join(b["text"] for b in self.blocks if b["type"] == "text")
        calls = [
            {
                "id": f"call_{b['id']}",
                "type": "function",
                "function": {"name": b["name"], "arguments": json.dumps(b["input"])},
            }
            for b in self.blocks
            if b["type"] == "tool_use"
        ]
        message: dict[str, Any] = {"role": "assistant", "content": text or None}
        if calls:
            message["tool_calls"] = calls
        return message, "tool_calls" if calls else "stop"

    def chat_usage(self) -> dict[str, int]:
        return {
            "prompt_tokens": self.usage["input_tokens"],
            "completion_tokens": self.usage["output_tokens"],
            "total_tokens": self.usage["input_tokens"] + self.usage["output_tokens"],
        }

    def chat_completion(self, chat_id: str, model: str) -> dict[str, Any]:
        message, finish = self.chat_message()
        return {
            "id": chat_id,
            "object": "chat.completion",
            "created": 0,
            "model": model,
            "choices": [{"index": 0, "message": message, "finish_reason": finish, "logprobs": None}],
            "usage": self.chat_usage(),
        }

    def chat_chunks(self, chat_id: str, model: str) -> Iterator[dict[str, Any]]:
        message, finish = self.chat_message()

        def chunk(delta: dict[str, Any], finish_reason: str | None = None) -> dict[str, Any]:
            return {
                "id": chat_id,
                "object": "chat.completion.chunk",
                "created": 0,
                "model": model,
                "choices": [{"index": 0, "delta": delta, "finish_reason": finish_reason, "logprobs": None}],
            }

        yield chunk({"role": "assistant", "content": ""})
        if message["content"]:
            yield chunk({"content": message["content"]})
        for i, call in enumerate(message.get("tool_calls", [])):
            yield chunk({"tool_calls": [{"index": i, **call}]})
        yield chunk({}, finish)
        yield {**chunk({}), "choices": [], "usage": self.chat_usage()}

    # --- Gemini generateContent ----------------------------------------------------------------------------

    def gemini_response(self, model: str) -> dict[str, Any]:
        parts: list[dict[str, Any]] = []
        for block in self.blocks:
            if block["type"] == "text":
                parts.append({"text": block["text"]})
            else:
                parts.append({"functionCall": {"name": block["name"], "args": block["input"]}})
        return {
            "candidates": [
                {"content": {"role": "model", "parts": parts}, "finishReason": "STOP", "index": 0}
            ],
            "usageMetadata": {
                "promptTokenCount": self.usage["input_tokens"],
                "candidatesTokenCount": self.usage["output_tokens"],
                "totalTokenCount": self.usage["input_tokens"] + self.usage["output_tokens"],
            },
            "modelVersion": model,
        }


def _text_reply(text: str) -> _Reply:
    """A canned text answer (a side request's, or ``done`` after the script), with the default usage."""
    return _Reply([{"type": "text", "text": text}], "end_turn", TurnUsage().to_json())


# --- the server ---------------------------------------------------------------------------------------------


def answers_in(body: Mapping[str, Any], api: str) -> int:
    """How many model answers a request's conversation already holds: its assistant messages (Anthropic,
    Chat Completions), its model contents (Gemini), its function calls and assistant messages (Responses)."""
    if api == GEMINI:
        items = body.get("contents")
        return sum(1 for c in items or () if isinstance(c, Mapping) and c.get("role") == "model")
    if api == RESPONSES:
        items = body.get("input")
        if not isinstance(items, list):
            return 0
        return sum(
            1 for i in items
            if isinstance(i, Mapping) and (i.get("type") == "function_call" or i.get("role") == "assistant")
        )  # fmt: skip
    items = body.get("messages")
    return sum(1 for m in items or () if isinstance(m, Mapping) and m.get("role") == "assistant")


def _credentials(headers: Mapping[str, str], path: str) -> set[str]:
    """Every credential a request carries where an API expects one."""
    found = {headers.get("x-api-key", ""), headers.get("x-goog-api-key", "")}
    authorization = headers.get("authorization", "")
    if authorization.lower().startswith("bearer "):
        found.add(authorization[7:].strip())
    found.update(v for k, v in parse_qsl(urlsplit(path).query) if k == "key")
    return found - {""}


class MockModelServer:
    """A scripted Anthropic Messages API server on 127.0.0.1.

    Use as a context manager (or start()/stop()); ``url`` is the base URL for ANTHROPIC_BASE_URL, ``requests``
    every request received so far (a copy), ``capture_path`` a JSONL file that gets one line per request.
    """

    def __init__(
        self,
        script: Sequence[Turn] | Sequence[Mapping[str, Any]] | str | Path = (),
        *,
        capture_path: str | Path | None = None,
        main_model: str | None = None,
        host: str = "127.0.0.1",
        port: int = 0,
        api_key: str | None = None,
        per_conversation: bool = False,
    ) -> None:
        """``api_key``: the one key it accepts, as a vendor does: a request carrying another (or none, in
        x-api-key, ``Authorization: Bearer``, x-goog-api-key or the ``key`` query parameter) is answered 401,
        and every request records whether it carried it (:attr:`CapturedRequest.authenticated`).
        ``per_conversation``: play the script to every conversation from its start, the turn of a request
        being the number of model answers already in its history (:func:`answers_in`), so several agents
        can share one server; by default the turns are played in arrival order, once."""
        self.api_key = api_key
        self.per_conversation = per_conversation
        if isinstance(script, (str, Path)):
            self._turns = load_script(script)
        else:
            self._turns = [
                t if isinstance(t, Turn) else _parse_turn(t, f"turns[{i}]") for i, t in enumerate(script)
            ]
        self.capture_path = Path(capture_path) if capture_path is not None else None
        self.main_model = main_model
        self._host = host
        self._port = port
        self._lock = threading.Lock()
        self._next_turn = 0
        self._requests: list[CapturedRequest] = []
        self._ids = itertools.count(1)
        self._capture_file: IO[str] | None = None
        self._httpd: ThreadingHTTPServer | None = None
        self._thread: threading.Thread | None = None

    # lifecycle

    def start(self) -> Self:
        if self._httpd is not None:
            return self
        if self.capture_path is not None:
            self.capture_path.parent.mkdir(parents=True, exist_ok=True)
            self._capture_file = self.capture_path.open("a", encoding="utf-8")
        httpd = ThreadingHTTPServer((self._host, self._port), _make_handler(self))
        httpd.daemon_threads = True
        self._httpd = httpd
        self._thread = threading.Thread(target=httpd.serve_forever, name="mockmodel", daemon=True)
        self._thread.start()
        return self

    def stop(self) -> None:
        httpd, self._httpd = self._httpd, None
        if httpd is not None:
            httpd.shutdown()
            httpd.server_close()
        if self._thread is not None:
            self._thread.join(timeout=5)
            self._thread = None
        with self._lock:
            if self._capture_file is not None:
                self._capture_file.close()
                self._capture_file = None

    def __enter__(self) -> Self:
        return self.start()

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.stop()

    # state

    @property
    def port(self) -> int:
        if self._httpd is None:
            raise RuntimeError("the mock model server is not running")
        return int(self._httpd.server_address[1])

    @property
    def url(self) -> str:
        return f"http://{self._host}:{self.port}"

    @property
    def requests(self) -> list[CapturedRequest]:
        with self._lock:
            return list(self._requests)

    @property
    def turns_played(self) -> int:
        with self._lock:
            return self._next_turn

    @property
    def turns_left(self) -> int:
        with self._lock:
            return len(self._turns) - self._next_turn

    # request handling (called from handler threads)

    def _record(self, req: CapturedRequest) -> None:
        """Append to memory and the capture file; caller holds the lock."""
        self._requests.append(req)
        if self._capture_file is not None:
            self._capture_file.write(json.dumps(req.to_json(), sort_keys=True) + "\n")
            self._capture_file.flush()

    def _handle(self, method: str, path: str, headers: Mapping[str, str], raw: bytes) -> _Answer:
        """Answer one request (called from handler threads)."""
        try:
            body: Any = json.loads(raw) if raw else None
        except (ValueError, RecursionError):  # not JSON, not UTF-8, or nested past the parser
            body = raw.decode("utf-8", "replace")
        route = urlsplit(path).path.rstrip("/")
        kept = {k: v for k, v in ((h, headers.get(h)) for h in CAPTURED_HEADERS) if v is not None}
        with self._lock:
            req = CapturedRequest(len(self._requests), method, path, kept, raw, body)
            if self.api_key is not None:
                req.authenticated = self.api_key in _credentials(headers, path)
            if req.authenticated is False:
                refused = _error_body(ANTHROPIC, 401, "authentication_error", "invalid x-api-key")
                answer = _Answer(401, refused)
            else:
                answer = self._route(req, route, body, raw)
            self._record(req)
        return answer

    def _route(self, req: CapturedRequest, route: str, body: Any, raw: bytes) -> _Answer:
        if route == "/api/hello" and req.method in ("GET", "HEAD"):
            return _Answer(200, {"message": "hello"})
        found = api_of(req.method, route)
        if found is None:
            req.known = False
            return _Answer(
                404,
                _error_body(
                    ANTHROPIC,
                    404,
                    "not_found_error",
                    f"the mock model server does not serve {req.method} {route}",
                ),
            )
        if found.action == "models":
            return _Answer(200, {"object": "list", "data": []})
        if found.action == "count":
            count = DEFAULT_INPUT_TOKENS  # fixed like usage: a count from the request's size is the host's
            return _Answer(200, {"totalTokens": count} if found.api == GEMINI else {"input_tokens": count})
        if not isinstance(body, Mapping):
            return _Answer(
                400,
                _error_body(found.api, 400, "invalid_request_error", "request body must be a JSON object"),
            )
        stream = found.stream if found.stream is not None else bool(body.get("stream"))
        model = found.model or str(body.get("model") or "mock-model")
        if not is_main_loop_request(body, main_model=self.main_model, api=found.api, model=found.model):
            side = "{}" if asks_for_structured_output(found.api, body) else SIDE_TEXT
            return _Answer(200, _text_reply(side), stream, found.api, model)
        req.main_loop = True
        index = answers_in(body, found.api) if self.per_conversation else self._next_turn
        if index >= len(self._turns):
            return _Answer(200, _text_reply(DONE_TEXT), stream, found.api, model)
        req.turn = index
        turn = self._turns[index]
        self._next_turn = max(self._next_turn, index + 1)
        return self._play(turn, raw, stream, found.api, model)

    def _play(self, turn: Turn, raw: bytes, stream: bool, api: str, model: str) -> _Answer:
        if turn.error is not None:
            status = int(turn.error.get("status", 500))
            kind = str(turn.error.get("type", "api_error"))
            return _Answer(
                status, _error_body(api, status, kind, str(turn.error.get("message", "scripted error")))
            )
        blocks: list[dict[str, Any]] = []
        if turn.echo_tokens:
            echoed = " ".join(find_tokens(raw))
            text = f"{turn.text}\n{echoed}" if turn.text else echoed
            blocks.append({"type": "text", "text": text or NO_TOKENS_TEXT})
        elif turn.text is not None:
            blocks.append({"type": "text", "text": _substitute_matches(turn.text, raw)})
        for call in turn.tool_calls:
            tool_id = f"toolu_mock{next(self._ids):08d}"
            blocks.append({"type": "tool_use", "id": tool_id, "name": call.name, "input": dict(call.input)})
        return _Answer(200, _Reply(blocks, turn.stop_reason, turn.usage.to_json()), stream, api, model)

    def _next_message_id(self) -> str:
        return f"msg_mock{next(self._ids):08d}"


@dataclass
class _Answer:
    """What the handler sends: a status and a JSON body, or a _Reply rendered in ``api``'s wire format."""

    status: int
    payload: Any
    stream: bool = False
    api: str = ANTHROPIC
    model: str = "mock-model"


_GEMINI_STATUS = {400: "INVALID_ARGUMENT", 404: "NOT_FOUND", 429: "RESOURCE_EXHAUSTED", 503: "UNAVAILABLE"}


def _error_body(api: str, status: int, kind: str, message: str) -> dict[str, Any]:
    """An error body in the shape each API uses."""
    if api == GEMINI:
        return {"error": {"code": status, "message": message, "status": _GEMINI_STATUS.get(status, kind)}}
    if api in (RESPONSES, CHAT):
        return {"error": {"message": message, "type": kind, "param": None, "code": kind}}
    return {"type": "error", "error": {"type": kind, "message": message}}


def _render(reply: _Reply, api: str, msg_id: str, model: str) -> dict[str, Any]:
    """A whole (non-streamed) answer in ``api``'s wire format."""
    if api == RESPONSES:
        return reply.response(msg_id.replace("msg_", "resp_"), model)
    if api == CHAT:
        return reply.chat_completion(msg_id.replace("msg_", "chatcmpl-"), model)
    if api == GEMINI:
        return reply.gemini_response(model)
    return reply.message(msg_id, model)


def _sse_frames(reply: _Reply, api: str, msg_id: str, model: str) -> Iterator[bytes]:
    """A streamed answer as server-sent-event frames in ``api``'s wire format: named events for Anthropic and
    Responses, ``data:`` chunks ended by ``data: [DONE]`` for Chat Completions, one ``data:`` chunk for Gemini
    (``alt=sse``)."""
    if api == CHAT:
        for chunk in reply.chat_chunks(msg_id.replace("msg_", "chatcmpl-"), model):
            yield f"data: {json.dumps(chunk)}\n\n".encode()
        yield b"data: [DONE]\n\n"
        return
    if api == GEMINI:
        yield f"data: {json.dumps(reply.gemini_response(model))}\r\n\r\n".encode()
        return
    events = (
        reply.responses_sse(msg_id.replace("msg_", "resp_"), model)
        if api == RESPONSES
        else reply.sse_events(msg_id, model)
    )
    for name, data in events:
        yield f"event: {name}\ndata: {json.dumps(data)}\n\n".encode()


def _make_handler(server: MockModelServer) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"
        server_version = "dokimi-mockmodel"

        def log_message(self, format: str, *args: Any) -> None:
            pass  # requests are recorded in the capture, not on stderr

        def _serve(self) -> None:
            length = int(self.headers.get("Content-Length") or 0)
            raw = self.rfile.read(length) if length > 0 else b""
            headers = {k.lower(): v for k, v in self.headers.items()}
            answer = server._handle(self.command, self.path, headers, raw)
            payload = answer.payload
            if isinstance(payload, _Reply):
                msg_id = server._next_message_id()
                if answer.stream:
                    self._send_stream(payload, answer.api, msg_id, answer.model)
                    return
                payload = _render(payload, answer.api, msg_id, answer.model)
            data = json.dumps(payload).encode()
            self.send_response(answer.status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            self.send_header("request-id", f"req_mock{answer.status}")
            self.end_headers()
            if self.command != "HEAD":
                self.wfile.write(data)

        def _send_stream(self, reply: _Reply, api: str, msg_id: str, model: str) -> None:
            self.send_response(200)
            self.send_header("Content-Type", "text/event-stream")
            self.send_header("Cache-Control", "no-cache")
            self.send_header("Connection", "close")
            self.end_headers()
            self.close_connection = True
            for frame in _sse_frames(reply, api, msg_id, model):
                self.wfile.write(frame)
            self.wfile.flush()

        do_GET = do_POST = do_PUT = do_DELETE = do_PATCH = do_HEAD = _serve

    return Handler


# --- standalone entry point ---------------------------------------------------------------------------------


def main(argv: Sequence[str] | None = None) -> int:
    """Serve a script until SIGINT/SIGTERM. Prints the base URL as the first line of stdout."""
    parser = argparse.ArgumentParser(
        prog="python -m dokimi.support.mockmodel", description=__doc__.split("\n\n")[0]
    )
    parser.add_argument("--script", required=True, help="JSON (or YAML) list of turns")
    parser.add_argument("--port", type=int, default=0, help="port on 127.0.0.1 (default: any free port)")
    parser.add_argument("--host", default="127.0.0.1", help="address to bind (default: 127.0.0.1)")
    parser.add_argument("--capture", help="append one JSON line per request to this file")
    parser.add_argument("--main-model", help="only requests for this model play the script (default: any)")
    args = parser.parse_args(argv)
    try:
        server = MockModelServer(
            args.script, capture_path=args.capture, main_model=args.main_model, host=args.host, port=args.port
        )
        server.start()
    except (ScriptError, OSError) as e:
        print(f"mockmodel: {e}", file=sys.stderr)
        return 2

    stop_requested = threading.Event()

    def _stop(signum: int, frame: object) -> None:
        stop_requested.set()

    signal.signal(signal.SIGTERM, _stop)
    print(server.url, flush=True)
    try:
        while not stop_requested.wait(0.5):
            pass
    except KeyboardInterrupt:
        return 130
    finally:
        server.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main())
