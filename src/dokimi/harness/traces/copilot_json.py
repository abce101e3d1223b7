"""GitHub Copilot CLI ``--output-format json``: one JSON event per line."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from dokimi.harness.traces import (
    Conversion,
    Event,
    event_time,
    json_objects,
    parse_timestamp,
    truncate_output,
)

COPILOT_COMMAND_TOOLS = frozenset({"bash"})
COPILOT_READ_TOOLS = frozenset({"view"})
COPILOT_EDIT_TOOLS = frozenset({"create", "edit"})


def convert(lines: Iterable[str]) -> Conversion:
    """GitHub Copilot CLI ``-p ... --output-format json`` (1.0.102) → Conversion.

    ``tool.execution_start`` records: bash → command (``rc`` from ``tool.execution_complete``'s
    ``shellExecution.exitCode``, null when it never completed or reported none), view → read, create and
    edit → edit, anything else → tool (``denied`` when it did not succeed). The answer is the last non-empty
    ``assistant.message``; ``turns`` counts ``assistant.turn_start``; ``t`` comes from the timestamps. The
    ``result`` record ends the run; an ``exitCode`` other than 0 is an error.
    """
    objects, garbage = json_objects(lines)
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
