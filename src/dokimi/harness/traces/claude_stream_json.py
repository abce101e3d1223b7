"""Claude Code ``--output-format stream-json --verbose``: one JSON record per line (system, assistant, user,
result)."""

from __future__ import annotations

import json
import posixpath
import re
from collections.abc import Iterable, Mapping
from typing import Any

from dokimi.harness.traces import (
    Conversion,
    Event,
    JsonLines,
    event_time,
    parse_timestamp,
    truncate_output,
)

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


class ClaudeStreamJson:
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


def convert(lines: Iterable[str]) -> Conversion:
    """Claude Code ``--output-format stream-json --verbose`` → Conversion.

    Bash → command (rc 0/1 from the tool_result's is_error; null when no result came back, when the call was
    refused, or when the harness itself stopped the command, as Claude Code does on SIGTERM at a timeout);
    Read → read; Edit, Write, MultiEdit, NotebookEdit → edit; anything else → tool with ``denied``.
    Paths under the session's cwd (from the init record) are made relative to it.
    """
    return convert_stream_json(lines, ClaudeStreamJson())


def convert_stream_json(lines: Iterable[str], state: ClaudeStreamJson) -> Conversion:
    stream = JsonLines(lines)
    for index, obj in stream:
        if not state.late():
            state.feed(index, obj)
    out = state.finish()
    out.garbage_lines = stream.garbage
    return out
