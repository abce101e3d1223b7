"""Convert a harness trace (what the harness printed) into events.jsonl and answer.txt.

A harness profile names its converter with ``trace:``; :data:`TRACE_CONVERTERS` maps that name to a function
from the trace's lines to a :class:`Conversion`. Graders read events.jsonl and never a harness-specific trace.

Rules every converter keeps (each is one named function below, with a test):

* ``truncate_output``: output over 8 KB keeps its first and last 4 KB around a ``[... N bytes omitted ...]``
  line, and the event says ``output_truncated: true``.
* ``event_time``: ``t`` is seconds since the first timestamp in the trace. A trace without timestamps gives
  each event the index of the trace line it came from instead (order is kept, durations are not).
* A line that is not a JSON object is counted in ``garbage_lines`` and skipped; conversion never fails on it.
* A trace cut short (a run killed at its timeout) converts: commands whose result never came back have
  ``rc: null``, and ``complete`` is false.
"""

from __future__ import annotations

import io
import json
import posixpath
import re
import shlex
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any, Protocol

from dokimi.errors import UsageError
from dokimi.rundir import ANSWER_TXT, EVENTS_JSONL
from dokimi.schemas._base import load_json

__all__ = [
    "OUTPUT_KEEP_BYTES",
    "OUTPUT_LIMIT_BYTES",
    "TRACE_CONVERTERS",
    "Conversion",
    "Converter",
    "command_rc",
    "convert",
    "convert_aider_text",
    "convert_claude_stream_json",
    "convert_codex_json",
    "convert_copilot_json",
    "convert_gemini_stream_json",
    "convert_opencode_json",
    "convert_qwen_stream_json",
    "convert_file",
    "convert_text",
    "event_kind",
    "event_time",
    "is_refusal",
    "qwen_command_rc",
    "relative_path",
    "truncate_output",
    "write_conversion",
]

OUTPUT_LIMIT_BYTES = 8 * 1024
"""Output longer than this (in UTF-8 bytes) is truncated."""
OUTPUT_KEEP_BYTES = 4 * 1024
"""Bytes kept at each end of a truncated output."""

Event = dict[str, Any]


@dataclass
class Conversion:
    """What a converter makes of one trace."""

    events: list[Event] = field(default_factory=list)
    """events.jsonl records in the order the harness called the tools."""
    answer: str = ""
    """The agent's final message (answer.txt)."""
    cost_usd: float | None = None
    turns: int | None = None
    usage: dict[str, Any] = field(default_factory=dict)
    is_error: bool = False
    """True when the harness reported an error, or the trace has no final result (killed, garbage only)."""
    complete: bool = False
    """True when the trace carries the harness's final result record (it was not cut short)."""
    garbage_lines: int = 0
    """Lines that were not JSON objects; skipped."""
    result_subtype: str | None = None
    """The harness's own word for how the run ended (Claude Code: success, error_max_turns, ...)."""
    late_lines: int = 0
    """Lines that arrived after the run ended (after the end-of-run marker, or after the harness's own final
    result record): written by something the agent left behind, never by the harness. Dropped, counted."""


class Converter(Protocol):
    """Turns the lines of a harness trace into a Conversion. Must not raise on malformed input."""

    def __call__(self, lines: Iterable[str], /) -> Conversion: ...


# --- rules shared by converters -----------------------------------------------------------------------------


def truncate_output(output: str) -> tuple[str, bool]:
    """Over 8 KB, keep the first and last 4 KB around one omission line.

    Returns (text, truncated).

    Sizes are UTF-8 bytes; a multi-byte character cut at either boundary is dropped rather than mangled, and
    its bytes are counted among the N omitted.
    """
    if len(output) * 4 <= OUTPUT_LIMIT_BYTES:  # cannot exceed the limit even if every char took 4 bytes
        return output, False
    data = output.encode("utf-8", "surrogatepass")
    if len(data) <= OUTPUT_LIMIT_BYTES:
        return output, False
    head = data[:OUTPUT_KEEP_BYTES].decode("utf-8", "ignore")
    tail = data[-OUTPUT_KEEP_BYTES:].decode("utf-8", "ignore")
    # N counts every byte not shown, including the pieces of a character cut at either boundary.
    omitted = (
        len(data) - len(head.encode("utf-8", "surrogatepass")) - len(tail.encode("utf-8", "surrogatepass"))
    )
    return f"{head}\n[... {omitted} bytes omitted ...]\n{tail}", True


def parse_timestamp(value: Any) -> float | None:
    """Seconds since the epoch from an ISO 8601 timestamp (``2026-11-30T12:38:38.527Z``), or None."""
    if not isinstance(value, str):
        return None
    try:
        return datetime.fromisoformat(value).timestamp()
    except ValueError:
        return None


def event_time(timestamp: float | None, first_timestamp: float | None, line_index: int) -> float:
    """``t`` of an event: seconds since the trace's first timestamp, else (no timestamps) the line index."""
    if first_timestamp is None:
        return float(line_index)
    if timestamp is None:
        return 0.0
    return round(max(0.0, timestamp - first_timestamp), 3)


# --- Claude Code stream-json --------------------------------------------------------------------------------

COMMAND_TOOLS = frozenset({"Bash"})
READ_TOOLS = frozenset({"Read"})
EDIT_TOOLS = frozenset({"Edit", "Write", "MultiEdit", "NotebookEdit"})
STOPPED_TASK_STATUSES = frozenset({"stopped", "killed"})
"""task_notification statuses: the harness stopped a command before it finished (it has no rc of its own)."""
PATH_KEYS = ("file_path", "notebook_path", "path")

# What Claude Code (2.1.x) says when it refuses a tool call rather than running it. Checked on error results.
_REFUSAL_RE = re.compile(
    r"haven't granted|needs approval|requested permissions? to|no such tool available"
    r"|is disabled for this session"
    r"|permission to use|hook (?:error|denied|blocked)|denied this tool|blocked by (?:a )?hook|was blocked"
    r"|<tool_use_error>Blocked:",
    re.IGNORECASE,
)
REFUSAL_SCAN_CHARS = 1000
# For tools other than commands, an error that only says "permission denied" is a refusal too. A command's own
# output saying so (cat: x: Permission denied) is not: the command ran.
_TOOL_DENIED_RE = re.compile(r"permission denied|not permitted|not allowed", re.IGNORECASE)


def event_kind(tool_name: str) -> str:
    """Which events.jsonl kind a Claude Code tool call becomes."""
    if tool_name in COMMAND_TOOLS:
        return "command"
    if tool_name in READ_TOOLS:
        return "read"
    if tool_name in EDIT_TOOLS:
        return "edit"
    return "tool"


def command_rc(result: Mapping[str, Any] | None) -> int | None:
    """rc of a command from its tool_result: Claude Code reports failure (1) or success (0); None if none."""
    if result is None:
        return None
    return 1 if result.get("is_error") else 0


def is_refusal(kind: str, result: Mapping[str, Any], text: str) -> bool:
    """Whether a tool_result says the harness refused the call (permission, disabled tool, a blocking hook).

    A refusal is a short message, so only the head of the text is searched (not a failing build's 60 KB log).
    """
    if not result.get("is_error"):
        return False
    head = text[:REFUSAL_SCAN_CHARS]
    if _REFUSAL_RE.search(head):
        return True
    return kind != "command" and _TOOL_DENIED_RE.search(head) is not None


def _interrupted(tool_use_result: Any) -> bool:
    return isinstance(tool_use_result, Mapping) and tool_use_result.get("interrupted") is True


def _result_text(content: Any) -> str:
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "".join(
            b.get("text", "") for b in content if isinstance(b, Mapping) and b.get("type") == "text"
        )
    return "" if content is None else json.dumps(content)


def relative_path(raw: Any, cwd_prefix: str | None) -> str | None:
    """A tool's path relative to the session cwd if under it (``cwd_prefix`` ends in ``/``), else as is."""
    if not isinstance(raw, str) or not raw:
        return None
    if cwd_prefix is not None and raw.startswith(cwd_prefix):
        return posixpath.normpath(raw[len(cwd_prefix) :])
    return raw


class _ClaudeStreamJson:
    """State of one stream-json conversion; one instance per trace."""

    def __init__(self) -> None:
        self.out = Conversion()
        self.cwd_prefix: str | None = None
        self.pending: dict[str, Event] = {}
        self.denied_ids: set[str] = set()
        self.stopped_ids: set[str] = set()
        self.first_ts: float | None = None
        self.first_ts_raw: str | None = None
        self.last_ts_raw: str | None = None
        self.line_index_events: list[tuple[Event, int]] = []
        self.message_id: str | None = None
        self.message_text: list[str] = []
        self.last_text = ""
        self.result: Mapping[str, Any] | None = None

    def kind_of(self, tool_name: str) -> str:
        return event_kind(tool_name)

    def rc_of(self, result: Mapping[str, Any], text: str) -> int | None:
        return command_rc(result)

    def refused(self, kind: str, result: Mapping[str, Any], text: str) -> bool:
        return is_refusal(kind, result, text)

    def feed(self, index: int, obj: Mapping[str, Any]) -> None:
        ts = obj.get("timestamp")
        if isinstance(ts, str):
            self.last_ts_raw = ts
            if self.first_ts_raw is None:
                self.first_ts = parse_timestamp(ts)
                self.first_ts_raw = ts if self.first_ts is not None else None
        kind = obj.get("type")
        if kind == "assistant":
            self._assistant(index, obj)
        elif kind == "user":
            self._user(obj)
        elif kind == "result":
            self.result = obj
        elif kind == "system":
            self._system(obj)

    def late(self) -> bool:
        """After the first result record nothing is the harness's: Claude Code prints it last. A second
        result (a forged cost, a forged answer) and everything else after it is counted and dropped."""
        if self.result is None:
            return False
        self.out.late_lines += 1
        return True

    def _system(self, obj: Mapping[str, Any]) -> None:
        subtype = obj.get("subtype")
        if subtype == "init" and isinstance(obj.get("cwd"), str):
            self.cwd_prefix = posixpath.normpath(obj["cwd"]).rstrip("/") + "/"
        elif subtype == "permission_denied" and isinstance(obj.get("tool_use_id"), str):
            self.denied_ids.add(obj["tool_use_id"])
        elif (
            subtype == "task_notification"
            and obj.get("status") in STOPPED_TASK_STATUSES
            and isinstance(obj.get("tool_use_id"), str)
        ):  # the harness stopped the command itself (on SIGTERM, Ctrl-C)
            self.stopped_ids.add(obj["tool_use_id"])

    def _assistant(self, index: int, obj: Mapping[str, Any]) -> None:
        message = obj.get("message")
        if not isinstance(message, Mapping):
            return
        msg_id = message.get("id")
        if msg_id != self.message_id:  # Claude Code prints each content block of a message as its own line
            self.message_id = msg_id if isinstance(msg_id, str) else None
            self.message_text = []
        content = message.get("content")
        if not isinstance(content, list):
            return
        for block in content:
            if not isinstance(block, Mapping):
                continue
            btype = block.get("type")
            if btype == "text" and isinstance(block.get("text"), str):
                self.message_text.append(block["text"])
                self.last_text = "".join(self.message_text)
            elif btype == "tool_use":
                self._tool_use(index, block)

    def _tool_use(self, index: int, block: Mapping[str, Any]) -> None:
        name = block.get("name") if isinstance(block.get("name"), str) else "?"
        assert isinstance(name, str)
        tool_input = block.get("input") if isinstance(block.get("input"), Mapping) else {}
        assert isinstance(tool_input, Mapping)
        kind = self.kind_of(name)
        event: Event = {"t": 0.0, "kind": kind}
        if kind == "command":
            command = tool_input.get("command")
            event["text"] = command if isinstance(command, str) else ""
            event["rc"] = None
        elif kind in ("read", "edit"):
            path = next((tool_input[k] for k in PATH_KEYS if isinstance(tool_input.get(k), str)), None)
            event["path"] = relative_path(path, self.cwd_prefix) or ""
        else:
            event["name"] = name
            event["denied"] = False
        self.line_index_events.append((event, index))
        event["t"] = parse_timestamp(self.last_ts_raw) if self.last_ts_raw is not None else None
        self.out.events.append(event)
        tool_id = block.get("id")
        if isinstance(tool_id, str):
            self.pending[tool_id] = event

    def _user(self, obj: Mapping[str, Any]) -> None:
        message = obj.get("message")
        content = message.get("content") if isinstance(message, Mapping) else None
        if not isinstance(content, list):
            return
        for block in content:
            if not isinstance(block, Mapping) or block.get("type") != "tool_result":
                continue
            tool_id = block.get("tool_use_id")
            event = self.pending.pop(tool_id, None) if isinstance(tool_id, str) else None
            if event is None:
                continue
            text = _result_text(block.get("content"))
            denied = tool_id in self.denied_ids or self.refused(event["kind"], block, text)
            if event["kind"] == "command":
                stopped = tool_id in self.stopped_ids or _interrupted(obj.get("tool_use_result"))
                event["rc"] = None if denied or stopped else self.rc_of(block, text)
                event["output"], event["output_truncated"] = truncate_output(text)
            if event["kind"] == "tool":
                event["denied"] = denied
            elif denied:
                event["denied"] = True

    def finish(self) -> Conversion:
        out = self.out
        for event, index in self.line_index_events:
            event["t"] = event_time(event["t"], self.first_ts, index)
        for tool_id in self.denied_ids & set(self.pending):  # denied, and the result line never came
            self.pending[tool_id]["denied"] = True
        result = self.result
        out.answer = self.last_text
        if result is None:
            out.is_error = True
            return out
        out.complete = True
        if isinstance(result.get("result"), str):
            out.answer = result["result"]
        cost = result.get("total_cost_usd")
        out.cost_usd = float(cost) if isinstance(cost, (int, float)) else None
        turns = result.get("num_turns")
        out.turns = turns if isinstance(turns, int) else None
        usage = result.get("usage")
        out.usage = dict(usage) if isinstance(usage, Mapping) else {}
        subtype = result.get("subtype")
        out.result_subtype = subtype if isinstance(subtype, str) else None
        out.is_error = bool(result.get("is_error")) or (out.result_subtype not in (None, "success"))
        return out


def convert_claude_stream_json(lines: Iterable[str]) -> Conversion:
    """Claude Code ``--output-format stream-json --verbose`` → Conversion.

    Bash → command (rc 0/1 from the tool_result's is_error; null when no result came back, when the call was
    refused, or when the harness itself stopped the command, as Claude Code does on SIGTERM at a timeout);
    Read → read; Edit, Write, MultiEdit, NotebookEdit → edit; anything else → tool with ``denied``.
    Paths under the session's cwd (from the init record) are made relative to it.
    """
    return _convert_stream_json(lines, _ClaudeStreamJson())


def _convert_stream_json(lines: Iterable[str], state: _ClaudeStreamJson) -> Conversion:
    garbage = 0
    loads = load_json
    for index, line in enumerate(lines):
        if not line or line.isspace():
            continue
        try:
            obj = loads(line)
        except ValueError:
            garbage += 1
            continue
        if type(obj) is not dict:
            garbage += 1
            continue
        if state.late():
            continue
        state.feed(index, obj)
    out = state.finish()
    out.garbage_lines = garbage
    return out


QWEN_COMMAND_TOOLS = frozenset({"run_shell_command"})
QWEN_READ_TOOLS = frozenset({"read_file"})
QWEN_EDIT_TOOLS = frozenset({"edit", "write_file", "notebook_edit"})
_QWEN_EXIT_CODE_RE = re.compile(r"^Exit Code: (-?\d+)$", re.MULTILINE)
# What Qwen Code 0.24.x says when a tool is off: outside --core-tools, or denied (--exclude-tools, a rule).
_QWEN_REFUSAL_RE = re.compile(r"is not listed in the active core tools allowlist|requires permission to use")


def qwen_command_rc(result: Mapping[str, Any], text: str) -> int | None:
    """rc of a Qwen Code shell command: 0 for a result that is no error (its text is then the bare output),
    else the last "Exit Code: N" line of its report (the command's own output comes before that line, so a
    forged one in the output never wins), else null (a signal, a timeout: no exit code)."""
    if not result.get("is_error"):
        return 0
    codes = _QWEN_EXIT_CODE_RE.findall(text)
    return int(codes[-1]) if codes else None


class _QwenStreamJson(_ClaudeStreamJson):
    """Qwen Code prints Claude Code's stream-json records, with its own tool names and exit codes."""

    def kind_of(self, tool_name: str) -> str:
        if tool_name in QWEN_COMMAND_TOOLS:
            return "command"
        if tool_name in QWEN_READ_TOOLS:
            return "read"
        if tool_name in QWEN_EDIT_TOOLS:
            return "edit"
        return "tool"

    def rc_of(self, result: Mapping[str, Any], text: str) -> int | None:
        return qwen_command_rc(result, text)

    def refused(self, kind: str, result: Mapping[str, Any], text: str) -> bool:
        if result.get("is_error") and _QWEN_REFUSAL_RE.search(text[:REFUSAL_SCAN_CHARS]):
            return True
        return is_refusal(kind, result, text)


def convert_qwen_stream_json(lines: Iterable[str]) -> Conversion:
    """Qwen Code ``--output-format stream-json`` → Conversion: Claude Code's record shapes (no timestamps, so
    ``t`` is the line index). run_shell_command → command with ``rc`` from its report's "Exit Code: N" (0 when
    the result is no error); read_file → read; edit, write_file, notebook_edit → edit; anything else → tool
    with ``denied`` (a denied or disabled tool's result says it "requires permission to use" it)."""
    return _convert_stream_json(lines, _QwenStreamJson())


# --- JSON-lines helper ----------------------------------------------------------------------------------


def _json_objects(lines: Iterable[str]) -> tuple[list[tuple[int, dict[str, Any]]], int]:
    """(line index, object) for every JSON object line, and how many other non-blank lines there were."""
    objects: list[tuple[int, dict[str, Any]]] = []
    garbage = 0
    for index, line in enumerate(lines):
        if not line or line.isspace():
            continue
        try:
            obj = load_json(line)
        except ValueError:
            garbage += 1
            continue
        if type(obj) is not dict:
            garbage += 1
            continue
        objects.append((index, obj))
    return objects, garbage


# --- Codex CLI exec --json ----------------------------------------------------------------------------------

_SHELL_WRAPPERS = ("/bin/bash", "/bin/sh", "/usr/bin/bash", "/usr/bin/sh", "bash", "sh", "/bin/zsh", "zsh")


def unwrap_shell(command: str) -> str:
    """The script of a ``/bin/bash -lc 'SCRIPT'`` command line (how Codex reports what it ran), else as is."""
    try:
        argv = shlex.split(command)
    except ValueError:
        return command
    if len(argv) == 3 and argv[0] in _SHELL_WRAPPERS and argv[1] in ("-c", "-lc", "-lic"):
        return argv[2]
    return command


def convert_codex_json(lines: Iterable[str]) -> Conversion:
    """Codex ``exec --json`` (0.169.0) → Conversion.

    ``command_execution`` items → command (``text``: the script inside Codex's ``/bin/bash -lc`` wrapper,
    ``rc`` its ``exit_code``; null when the item never completed); ``file_change`` → one edit per changed
    path; ``mcp_tool_call`` and ``web_search`` → tool. The answer is the last ``agent_message``. The trace
    has no timestamps (``t`` is the line index) and no cost; ``turns`` counts ``turn.completed`` records. A
    ``turn.failed`` or top-level ``error`` record, or no ``turn.completed`` at all, is an error.
    """
    objects, garbage = _json_objects(lines)
    out = Conversion(garbage_lines=garbage)
    by_id: dict[str, Event] = {}
    turns = 0
    failed = False
    usage: dict[str, Any] = {}
    for index, obj in objects:
        kind = obj.get("type")
        if kind == "turn.completed":
            turns += 1
            if isinstance(obj.get("usage"), Mapping):
                for key, value in obj["usage"].items():
                    if isinstance(value, int):
                        usage[key] = usage.get(key, 0) + value
            continue
        if kind in ("turn.failed", "error"):
            failed = True
            continue
        if kind not in ("item.started", "item.updated", "item.completed"):
            continue
        item = obj.get("item")
        if not isinstance(item, Mapping):
            continue
        item_type = item.get("type")
        item_id = item.get("id") if isinstance(item.get("id"), str) else None
        if item_type == "agent_message" and kind == "item.completed" and isinstance(item.get("text"), str):
            out.answer = item["text"]
        elif item_type == "command_execution":
            event = by_id.get(item_id) if item_id is not None else None
            if event is None:
                command = item.get("command")
                event = {"t": float(index), "kind": "command", "rc": None}
                event["text"] = unwrap_shell(command) if isinstance(command, str) else ""
                out.events.append(event)
                if item_id is not None:
                    by_id[item_id] = event
            if kind == "item.completed":
                rc = item.get("exit_code")
                event["rc"] = rc if isinstance(rc, int) and not isinstance(rc, bool) else None
                output = item.get("aggregated_output")
                event["output"], event["output_truncated"] = truncate_output(
                    output if isinstance(output, str) else ""
                )
        elif item_type == "file_change" and kind == "item.completed":
            changes = item.get("changes")
            for change in changes if isinstance(changes, list) else []:
                if isinstance(change, Mapping) and isinstance(change.get("path"), str):
                    out.events.append({"t": float(index), "kind": "edit", "path": change["path"]})
        elif item_type in ("mcp_tool_call", "web_search") and kind == "item.completed":
            name = item.get("tool") if item_type == "mcp_tool_call" else "web_search"
            status = item.get("status")
            out.events.append(
                {
                    "t": float(index),
                    "kind": "tool",
                    "name": name if isinstance(name, str) else item_type,
                    "denied": status == "declined",
                }
            )
    out.turns = turns or None
    out.usage = usage
    out.complete = turns > 0
    out.is_error = failed or turns == 0
    out.result_subtype = "error" if failed else ("success" if turns else None)
    return out


# --- Gemini CLI stream-json ---------------------------------------------------------------------------------

GEMINI_COMMAND_TOOLS = frozenset({"run_shell_command"})
GEMINI_READ_TOOLS = frozenset({"read_file", "read_many_files"})
GEMINI_EDIT_TOOLS = frozenset({"replace", "write_file"})


def convert_gemini_stream_json(lines: Iterable[str]) -> Conversion:
    """Gemini CLI ``--output-format stream-json`` (0.61.0) → Conversion.

    ``tool_use`` records: run_shell_command → command (``rc`` null: the CLI's ``tool_result`` carries no exit
    code); read_file, read_many_files → read; replace, write_file → edit; anything else → tool, ``denied``
    when its result is an error. The answer is the assistant text after the last tool call (``delta`` messages
    concatenated). ``t`` comes from the records' timestamps. The ``result`` record ends the run: ``status``
    other than ``success`` is an error; it reports no cost and no turn count.
    """
    objects, garbage = _json_objects(lines)
    out = Conversion(garbage_lines=garbage)
    first_ts: float | None = None
    pending: dict[str, Event] = {}
    text: list[str] = []
    result: Mapping[str, Any] | None = None
    for index, obj in objects:
        ts = parse_timestamp(obj.get("timestamp"))
        if first_ts is None and ts is not None:
            first_ts = ts
        t = event_time(ts, first_ts, index)
        kind = obj.get("type")
        if kind == "message" and obj.get("role") == "assistant" and isinstance(obj.get("content"), str):
            text = [*text, obj["content"]] if obj.get("delta") else [obj["content"]]
            out.answer = "".join(text)
        elif kind == "tool_use":
            text = []
            name = obj.get("tool_name") if isinstance(obj.get("tool_name"), str) else "?"
            params = obj.get("parameters") if isinstance(obj.get("parameters"), Mapping) else {}
            assert isinstance(name, str) and isinstance(params, Mapping)
            event: Event = {"t": t}
            if name in GEMINI_COMMAND_TOOLS:
                command = params.get("command")
                event.update(kind="command", text=command if isinstance(command, str) else "", rc=None)
            elif name in GEMINI_READ_TOOLS or name in GEMINI_EDIT_TOOLS:
                path = params.get("file_path") or params.get("absolute_path") or params.get("path")
                event.update(
                    kind="read" if name in GEMINI_READ_TOOLS else "edit",
                    path=path if isinstance(path, str) else "",
                )
            else:
                event.update(kind="tool", name=name, denied=False)
            out.events.append(event)
            if isinstance(obj.get("tool_id"), str):
                pending[obj["tool_id"]] = event
        elif kind == "tool_result":
            found = pending.pop(obj["tool_id"], None) if isinstance(obj.get("tool_id"), str) else None
            if found is None:
                continue
            failed = obj.get("status") not in (None, "success")
            if found["kind"] == "command":
                output = obj.get("output")
                if not isinstance(output, str):
                    error = obj.get("error")
                    output = error.get("message", "") if isinstance(error, Mapping) else ""
                found["output"], found["output_truncated"] = truncate_output(output)
            elif found["kind"] == "tool":
                found["denied"] = failed
        elif kind == "result":
            result = obj
    if result is None:
        out.is_error = True
        return out
    out.complete = True
    status = result.get("status")
    out.result_subtype = status if isinstance(status, str) else None
    out.is_error = status != "success"
    stats = result.get("stats")
    if isinstance(stats, Mapping):
        out.usage = {k: v for k, v in stats.items() if isinstance(v, int) and not isinstance(v, bool)}
    return out


# --- GitHub Copilot CLI --output-format json --------------------------------------------------------

COPILOT_COMMAND_TOOLS = frozenset({"bash"})
COPILOT_READ_TOOLS = frozenset({"view"})
COPILOT_EDIT_TOOLS = frozenset({"create", "edit"})


def convert_copilot_json(lines: Iterable[str]) -> Conversion:
    """GitHub Copilot CLI ``-p ... --output-format json`` (1.0.102) → Conversion.

    ``tool.execution_start`` records: bash → command (``rc`` from ``tool.execution_complete``'s
    ``shellExecution.exitCode``, null when it never completed or reported none), view → read, create and
    edit → edit, anything else → tool (``denied`` when it did not succeed). The answer is the last non-empty
    ``assistant.message``; ``turns`` counts ``assistant.turn_start``; ``t`` comes from the timestamps. The
    ``result`` record ends the run; an ``exitCode`` other than 0 is an error.
    """
    objects, garbage = _json_objects(lines)
    out = Conversion(garbage_lines=garbage)
    first_ts: float | None = None
    pending: dict[str, Event] = {}
    turns = 0
    result: Mapping[str, Any] | None = None
    for index, obj in objects:
        ts = parse_timestamp(obj.get("timestamp"))
        if first_ts is None and ts is not None:
            first_ts = ts
        kind = obj.get("type")
        data = obj.get("data") if isinstance(obj.get("data"), Mapping) else {}
        assert isinstance(data, Mapping)
        if kind == "assistant.turn_start":
            turns += 1
        elif kind == "assistant.message" and isinstance(data.get("content"), str) and data["content"]:
            out.answer = data["content"]
        elif kind == "tool.execution_start":
            name = data.get("toolName") if isinstance(data.get("toolName"), str) else "?"
            args = data.get("arguments") if isinstance(data.get("arguments"), Mapping) else {}
            assert isinstance(name, str) and isinstance(args, Mapping)
            event: Event = {"t": event_time(ts, first_ts, index)}
            if name in COPILOT_COMMAND_TOOLS:
                command = args.get("command")
                event.update(kind="command", text=command if isinstance(command, str) else "", rc=None)
            elif name in COPILOT_READ_TOOLS or name in COPILOT_EDIT_TOOLS:
                path = args.get("path")
                event.update(
                    kind="read" if name in COPILOT_READ_TOOLS else "edit",
                    path=path if isinstance(path, str) else "",
                )
            else:
                event.update(kind="tool", name=name, denied=False)
            out.events.append(event)
            if isinstance(data.get("toolCallId"), str):
                pending[data["toolCallId"]] = event
        elif kind == "tool.execution_complete":
            found = pending.pop(data["toolCallId"], None) if isinstance(data.get("toolCallId"), str) else None
            if found is None:
                continue
            content = (
                data.get("result", {}).get("content") if isinstance(data.get("result"), Mapping) else None
            )
            if found["kind"] == "command":
                shell = data.get("shellExecution")
                rc = shell.get("exitCode") if isinstance(shell, Mapping) else None
                found["rc"] = rc if isinstance(rc, int) and not isinstance(rc, bool) else None
                found["output"], found["output_truncated"] = truncate_output(
                    content if isinstance(content, str) else ""
                )
            elif found["kind"] == "tool":
                found["denied"] = data.get("success") is not True
        elif kind == "result":
            result = obj
    out.turns = turns or None
    if result is None:
        out.is_error = True
        return out
    out.complete = True
    code = result.get("exitCode")
    out.is_error = code != 0
    out.result_subtype = "success" if code == 0 else f"exit {code}"
    usage = result.get("usage")
    if isinstance(usage, Mapping):
        out.usage = {k: v for k, v in usage.items() if isinstance(v, int) and not isinstance(v, bool)}
    return out


# --- OpenCode run --format json -----------------------------------------------------------------------------

OPENCODE_COMMAND_TOOLS = frozenset({"bash"})
OPENCODE_READ_TOOLS = frozenset({"read"})
OPENCODE_EDIT_TOOLS = frozenset({"edit", "write", "patch", "multiedit"})


def convert_opencode_json(lines: Iterable[str]) -> Conversion:
    """OpenCode ``run --format json`` (1.18.33) → Conversion.

    ``tool_use`` records (one per finished tool call, its ``state`` holding input, output and status): bash →
    command (``rc`` = ``metadata.exit``), read → read, edit/write/patch → edit, anything else → tool
    (``denied`` when its status is ``error``, or when OpenCode answered a call of a tool the agent lacks with
    its ``invalid`` tool). The answer is the last ``text`` part; ``turns`` counts
    ``step_finish`` records (one per model call); ``t`` comes from the millisecond timestamps. The run ended
    cleanly when its last ``step_finish`` has reason ``stop``; an ``error`` record is an error.
    """
    objects, garbage = _json_objects(lines)
    out = Conversion(garbage_lines=garbage)
    first_ms: float | None = None
    steps = 0
    last_reason: Any = None
    failed = False
    for index, obj in objects:
        stamp = obj.get("timestamp")
        ms = float(stamp) if isinstance(stamp, (int, float)) and not isinstance(stamp, bool) else None
        if first_ms is None and ms is not None:
            first_ms = ms
        t = round((ms - first_ms) / 1000, 3) if ms is not None and first_ms is not None else float(index)
        kind = obj.get("type")
        part = obj.get("part") if isinstance(obj.get("part"), Mapping) else {}
        assert isinstance(part, Mapping)
        if kind == "text" and isinstance(part.get("text"), str):
            out.answer = part["text"]
        elif kind == "step_finish":
            steps += 1
            last_reason = part.get("reason")
        elif kind == "error":
            failed = True
        elif kind == "tool_use":
            name = part.get("tool") if isinstance(part.get("tool"), str) else "?"
            state = part.get("state") if isinstance(part.get("state"), Mapping) else {}
            assert isinstance(name, str) and isinstance(state, Mapping)
            args = state.get("input") if isinstance(state.get("input"), Mapping) else {}
            meta = state.get("metadata") if isinstance(state.get("metadata"), Mapping) else {}
            assert isinstance(args, Mapping) and isinstance(meta, Mapping)
            event: Event = {"t": t}
            if name in OPENCODE_COMMAND_TOOLS:
                command, rc, output = args.get("command"), meta.get("exit"), state.get("output")
                event.update(
                    kind="command",
                    text=command if isinstance(command, str) else "",
                    rc=rc if isinstance(rc, int) and not isinstance(rc, bool) else None,
                )
                event["output"], event["output_truncated"] = truncate_output(
                    output if isinstance(output, str) else ""
                )
            elif name in OPENCODE_READ_TOOLS or name in OPENCODE_EDIT_TOOLS:
                path = args.get("filePath")
                event.update(
                    kind="read" if name in OPENCODE_READ_TOOLS else "edit",
                    path=path if isinstance(path, str) else "",
                )
            elif name == "invalid":  # a call of a tool the agent does not have, refused by OpenCode
                wanted = args.get("tool")
                event.update(kind="tool", name=wanted if isinstance(wanted, str) else name, denied=True)
            else:
                event.update(kind="tool", name=name, denied=state.get("status") == "error")
            out.events.append(event)
    out.turns = steps or None
    out.complete = last_reason == "stop"
    out.is_error = failed or not out.complete
    out.result_subtype = "error" if failed else (str(last_reason) if last_reason is not None else None)
    return out


# --- Aider (plain text on stdout) ---------------------------------------------------------------------------

AIDER_BANNER_RE = re.compile(r"^Aider v\d")
AIDER_TOKENS_RE = re.compile(r"^Tokens: .* sent, .*received\.")
AIDER_COST_RE = re.compile(r"Cost: \$([0-9.]+) message, \$([0-9.]+) session\.$")
AIDER_EDIT_RE = re.compile(r"^(Applied edit to|Did not apply edit to) (.+?)( \(--dry-run\))?$")
AIDER_PATH_RE = re.compile(r"^[\w.+@-]*[\w-]\.[A-Za-z][A-Za-z0-9]*$|^[\w.+@-]+(/[\w.+@-]+)+$")
"""A line that is only a repository path (with a directory or an extension: "3.14" is no path, and neither
is a bare "Makefile", which then stays in the reply): what Aider prints as the subject of a confirmation it
answered itself (--yes-always), a file the model named (added to the chat) or a file an edit creates."""
AIDER_ERROR_PREFIXES = ("litellm.", "The LLM did not conform to the edit format.", "Exception while updating")


def _aider_gap(lines: list[tuple[int, str]]) -> tuple[list[tuple[int, str]], list[tuple[int, str]]]:
    """Split what follows a usage line into Aider's own lines (blank, a confirmation's path, an edit report)
    and the next reply, which starts at the first other line."""
    for at, (_, text) in enumerate(lines):
        if text.strip() and not AIDER_PATH_RE.match(text) and not AIDER_EDIT_RE.match(text):
            return lines[:at], lines[at:]
    return lines, []


def convert_aider_text(lines: Iterable[str]) -> Conversion:
    """Aider ``--no-pretty --message`` stdout (0.86.2) → Conversion.

    Aider prints no structured trace and calls no tools: each model call is its reply as text, then a usage
    line (``Tokens: ... sent, ... received.`` with ``Cost: $X message, $Y session.`` when the model's price is
    known). ``turns`` counts usage lines and ``cost_usd`` is the last session cost. After a usage line Aider
    prints the subjects of the confirmations it answered itself (a path per line: a file the reply named,
    which it adds to the chat and asks again, or a file an edit creates) and its edit reports: ``Applied edit
    to PATH`` (``Did not apply edit to PATH (--dry-run)``) → edit; a named file added to the chat (a path
    line before a reply: named by the prompt, before the first, or by a reply, before the next) → read. The
    answer is the last reply (the text before the last usage line; a reply's first line that is only a path
    cannot be told from Aider's and is left out, and Aider's report of an edit it could not apply stays at the
    head of the reply that follows it). No timestamps (``t`` is the line index) and no exit code:
    the run is complete when a usage line came after the banner, an error when none did or Aider reported a
    model or edit-format error after the last one (one it recovered from, asking the model again, is not).
    """
    out = Conversion()
    rows = [(i, line.rstrip("\n").rstrip("\r")) for i, line in enumerate(lines)]
    banner = next((k for k, (_, text) in enumerate(rows) if AIDER_BANNER_RE.match(text)), None)
    if banner is None:
        out.is_error = True
        return out
    start = next((k + 1 for k in range(banner, len(rows)) if not rows[k][1].strip()), len(rows))
    usage = [k for k in range(start, len(rows)) if AIDER_TOKENS_RE.match(rows[k][1])]
    # an error Aider recovered from (a malformed edit it asked again about) is followed by a further reply
    last = usage[-1] + 1 if usage else start
    failed = any(text.startswith(AIDER_ERROR_PREFIXES) for _, text in rows[last:])
    for _, text in rows[start:]:
        cost = AIDER_COST_RE.search(text)
        if cost is not None:
            out.cost_usd = float(cost.group(2))
    replies: list[str] = []
    cursor = start
    for number, end in enumerate([*usage, len(rows)]):
        own, segment = _aider_gap(rows[cursor:end])
        last_gap = number == len(usage)
        for index, text in own:
            edit = AIDER_EDIT_RE.match(text)
            if edit is not None:
                out.events.append({"t": float(index), "kind": "edit", "path": edit.group(2)})
            elif text.strip() and not last_gap:  # a file the prompt or a reply named, added to the chat
                out.events.append({"t": float(index), "kind": "read", "path": text.strip()})
        if number < len(usage):
            replies.append("\n".join(text for _, text in segment).strip("\n"))
        cursor = end + 1
    out.turns = len(usage) or None
    out.answer = replies[-1] if replies else ""
    out.complete = bool(usage)
    out.is_error = failed or not out.complete
    out.result_subtype = "error" if failed else ("success" if out.complete else None)
    return out


def convert_text(lines: Iterable[str]) -> Conversion:
    """For harnesses without a structured trace: the whole stdout is the answer, and there are no events.

    An empty answer is an error (the run produced nothing usable); there is no cost, turn count or usage.
    """
    answer = "".join(lines).strip()
    return Conversion(answer=answer, is_error=not answer, complete=True)


TRACE_CONVERTERS: dict[str, Converter] = {
    "aider-text": convert_aider_text,
    "claude-stream-json": convert_claude_stream_json,
    "codex-json": convert_codex_json,
    "copilot-json": convert_copilot_json,
    "gemini-stream-json": convert_gemini_stream_json,
    "opencode-json": convert_opencode_json,
    "qwen-stream-json": convert_qwen_stream_json,
    "text": convert_text,
}
"""Converters by the profile's ``trace:`` name."""


# --- files --------------------------------------------------------------------------------------------------


def _converter(trace: str) -> Converter:
    try:
        return TRACE_CONVERTERS[trace]
    except KeyError:
        known = ", ".join(sorted(TRACE_CONVERTERS))
        raise UsageError(
            f"unknown trace converter {trace!r}", key="trace", hint=f"use one of: {known}"
        ) from None


def convert(trace: str, stdout_text: str) -> Conversion:
    """Convert a harness's whole stdout, held in memory, with the converter named ``trace``.

    Lines end at ``\\n`` only, as when reading the file (a JSON string may hold a raw U+2028)."""
    return _converter(trace)(io.StringIO(stdout_text, newline="\n"))


#: The line the end-of-run wrapper (dokimi/support/end_of_run.sh) prints after the harness exited and every
#: other process of the agent's uid was ended: ``<marker> <rc>``.
END_OF_RUN_MARKER = "DOKIMI-END-OF-RUN"


class _UntilEndOfRun:
    """The lines of a trace up to the first end-of-run marker; the non-blank lines after it are counted."""

    def __init__(self, lines: Iterable[str]) -> None:
        self.lines = lines
        self.late = 0
        self.ended = False

    def __iter__(self) -> Iterator[str]:
        for line in self.lines:
            if self.ended:
                self.late += bool(line.strip())
            elif line.startswith(END_OF_RUN_MARKER + " "):
                self.ended = True
            else:
                yield line


def convert_file(path: str | Path, trace: str) -> Conversion:
    """Convert a stored trace (a harness's raw stdout) with the converter the profile names, up to the
    end-of-run marker: what came after it is not the harness's (counted in ``late_lines``)."""
    converter = _converter(trace)
    with open(path, encoding="utf-8", errors="replace", newline="\n") as f:
        lines = _UntilEndOfRun(f)
        conversion = converter(lines)
        for _ in lines:  # the rest, if the converter stopped early
            pass
        conversion.late_lines += lines.late
        return conversion


def write_conversion(conversion: Conversion, run_dir: str | Path) -> tuple[Path, Path]:
    """Write ``events.jsonl`` (one sorted-key JSON object per line) and ``answer.txt`` into run_dir."""
    run_dir = Path(run_dir)
    run_dir.mkdir(parents=True, exist_ok=True)
    events_path = run_dir / EVENTS_JSONL
    answer_path = run_dir / ANSWER_TXT
    dumps: Callable[..., str] = json.dumps
    with open(events_path, "w", encoding="utf-8", newline="\n") as f:
        f.writelines(dumps(event, sort_keys=True, ensure_ascii=False) + "\n" for event in conversion.events)
    answer_path.write_text(conversion.answer, encoding="utf-8", newline="\n")
    return events_path, answer_path
