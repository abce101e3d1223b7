"""OpenCode ``run --format json``: one JSON event per line."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from dokimi.harness.traces import (
    Conversion,
    Event,
    json_objects,
    truncate_output,
)

OPENCODE_COMMAND_TOOLS = frozenset({"bash"})
OPENCODE_READ_TOOLS = frozenset({"read"})
OPENCODE_EDIT_TOOLS = frozenset({"edit", "write", "patch", "multiedit"})


def convert(lines: Iterable[str]) -> Conversion:
    """OpenCode ``run --format json`` (1.18.33) → Conversion.

    ``tool_use`` records (one per finished tool call, its ``state`` holding input, output and status): bash →
    command (``rc`` = ``metadata.exit``), read → read, edit/write/patch → edit, anything else → tool
    (``denied`` when its status is ``error``, or when OpenCode answered a call of a tool the agent lacks with
    its ``invalid`` tool). The answer is the last ``text`` part; ``turns`` counts
    ``step_finish`` records (one per model call); ``t`` comes from the millisecond timestamps. The run ended
    cleanly when its last ``step_finish`` has reason ``stop``; an ``error`` record is an error.
    """
    objects, garbage = json_objects(lines)
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
