"""events.jsonl: the harness-independent trace of one run, one JSON object per line.

Graders read these events and never a harness-specific trace. ``kind`` decides the other keys:

* ``command``: ``text``, ``rc`` and optionally ``output`` / ``output_truncated``;
* ``read`` and ``edit``: ``path``;
* ``tool``: ``name`` and ``denied``.

``rc`` is null when no result came back (a run stopped at its turn or budget limit): a grader must not
count null as a failure. Output over 8 KB keeps its first and last 4 KB around a ``[... N bytes omitted
...]`` line.
"""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path
from typing import Annotated, Literal

from pydantic import Field, RootModel, StrictBool, StrictInt, ValidationError

from dokimi.errors import DocumentError
from dokimi.schemas._base import Document, decode_text, format_loc, parse_json, read_raw

Seconds = Annotated[float, Field(strict=True, allow_inf_nan=False)]


class CommandEvent(Document):
    """A shell command the agent ran."""

    t: Seconds
    """Seconds since the first timestamp of the trace (or the trace line index when it has none)."""
    kind: Literal["command"]
    """Event kind."""
    text: str
    """The command line as the agent wrote it."""
    rc: StrictInt | None = None
    """Exit status as the harness reports it: 0 or 1 where it reports only success or failure (Claude
    Code); null when no result came back. Null is not a failure."""
    output: str | None = None
    """The command's output as the harness returned it (stdout and stderr may be merged); optional."""
    output_truncated: StrictBool = False
    """True when ``output`` kept only its first and last 4 KB."""
    denied: StrictBool = False
    """True when the harness refused to run the command (permissions, a blocking hook)."""


class ReadEvent(Document):
    """A file the agent read with a tool."""

    t: Seconds
    """Seconds since the first timestamp of the trace (or the trace line index when it has none)."""
    kind: Literal["read"]
    """Event kind."""
    path: str
    """Path relative to the workspace root when it lies inside it, else as the agent wrote it."""
    denied: StrictBool = False
    """True when the harness refused the read."""


class EditEvent(Document):
    """A file the agent wrote or edited with a tool."""

    t: Seconds
    """Seconds since the first timestamp of the trace (or the trace line index when it has none)."""
    kind: Literal["edit"]
    """Event kind."""
    path: str
    """Path relative to the workspace root when it lies inside it, else as the agent wrote it."""
    denied: StrictBool = False
    """True when the harness refused the edit."""


class ToolEvent(Document):
    """Any other tool call (web fetch, search, sub-agents, MCP tools)."""

    t: Seconds
    """Seconds since the first timestamp of the trace (or the trace line index when it has none)."""
    kind: Literal["tool"]
    """Event kind."""
    name: str
    """The harness's name of the tool, for example ``WebFetch``."""
    denied: StrictBool = False
    """True when the harness refused the call."""


KINDS = ("command", "read", "edit", "tool")
"""The four event kinds."""

AnyEvent = Annotated[CommandEvent | ReadEvent | EditEvent | ToolEvent, Field(discriminator="kind")]


class Event(RootModel[AnyEvent]):
    """One line of events.jsonl; ``kind`` selects the shape (command, read, edit or tool)."""


def parse_event(line: str, *, path: str = "events.jsonl", line_number: int | None = None) -> AnyEvent:
    """One events.jsonl line as its event model; a DocumentError names the line and the key."""
    marked = parse_json(line, path)
    try:
        return Event.model_validate(marked.data).root
    except ValidationError as exc:
        err = exc.errors(include_url=False)[0]
        # drop the discriminator tag pydantic inserts into the location
        loc = list(err["loc"])
        if loc and loc[0] in KINDS:
            loc = loc[1:]
        message = "unknown key" if err["type"] == "extra_forbidden" else err["msg"]
        raise DocumentError(message, path=path, line=line_number, key=format_loc(loc) or None) from None


def parse_events(lines: Iterable[str], *, path: str = "events.jsonl") -> list[AnyEvent]:
    """Every non-blank line of an events.jsonl text, validated."""
    return [
        parse_event(line, path=path, line_number=number)
        for number, line in enumerate(lines, 1)
        if line.strip()
    ]


def read_events(path: str | Path, *, trusted: Path | None = None) -> list[AnyEvent]:
    """Read and validate an events.jsonl file (a regular file, never a link below ``trusted``)."""
    text = decode_text(read_raw(path, trusted=trusted), str(path))
    return parse_events(text.splitlines(), path=str(path))
