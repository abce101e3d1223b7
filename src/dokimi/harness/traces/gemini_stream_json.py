"""Gemini CLI ``--output-format stream-json``: one JSON event per line."""

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

GEMINI_COMMAND_TOOLS = frozenset({"run_shell_command"})
GEMINI_READ_TOOLS = frozenset({"read_file", "read_many_files"})
GEMINI_EDIT_TOOLS = frozenset({"replace", "write_file"})


def convert(lines: Iterable[str]) -> Conversion:
    """Gemini CLI ``--output-format stream-json`` (0.61.0) → Conversion.

    ``tool_use`` records: run_shell_command → command (``rc`` null: the CLI's ``tool_result`` carries no exit
    code); read_file, read_many_files → read; replace, write_file → edit; anything else → tool, ``denied``
    when its result is an error. The answer is the assistant text after the last tool call (``delta`` messages
    concatenated). ``t`` comes from the records' timestamps. The ``result`` record ends the run: ``status``
    other than ``success`` is an error; it reports no cost and no turn count.
    """
    objects, garbage = json_objects(lines)
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
