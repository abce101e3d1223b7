"""Codex CLI ``exec --json``: thread, turn and item events, one JSON object per line."""

from __future__ import annotations

import shlex
from collections.abc import Iterable, Mapping
from typing import Any

from dokimi.harness.traces import (
    Conversion,
    Event,
    json_objects,
    truncate_output,
)

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


def convert(lines: Iterable[str]) -> Conversion:
    """Codex ``exec --json`` (0.169.0) → Conversion.

    ``command_execution`` items → command (``text``: the script inside Codex's ``/bin/bash -lc`` wrapper,
    ``rc`` its ``exit_code``; null when the item never completed); ``file_change`` → one edit per changed
    path; ``mcp_tool_call`` and ``web_search`` → tool. The answer is the last ``agent_message``. The trace
    has no timestamps (``t`` is the line index) and no cost; ``turns`` counts ``turn.completed`` records. A
    ``turn.failed`` or top-level ``error`` record, or no ``turn.completed`` at all, is an error.
    """
    objects, garbage = json_objects(lines)
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
