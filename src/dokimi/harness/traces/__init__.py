"""Convert a harness trace (what the harness printed) into events.jsonl and answer.txt.

One module per converter in this package, each with a ``convert(lines) -> Conversion`` function. A harness
profile names its converter with ``trace:``: a built-in one by its module's name (``claude-stream-json`` is
:mod:`dokimi.harness.traces.claude_stream_json`), a converter of your own by its module's dotted name
(``mypackage.traces.mycli``, importable where dokimi runs). Graders read events.jsonl and never a
harness-specific trace.

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

import importlib
import importlib.util
import io
import json
import pkgutil
import re
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any, Protocol

from dokimi.errors import UsageError
from dokimi.rundir import RunDir
from dokimi.schemas._base import load_json

__all__ = [
    "END_OF_RUN_MARKER",
    "OUTPUT_KEEP_BYTES",
    "OUTPUT_LIMIT_BYTES",
    "Conversion",
    "Converter",
    "Event",
    "JsonLines",
    "builtin_traces",
    "convert",
    "convert_file",
    "event_time",
    "json_objects",
    "parse_timestamp",
    "trace_problem",
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


class JsonLines:
    """(line index, object) of every JSON object line of a trace, as the lines come; ``garbage`` counts the
    other non-blank lines, skipped."""

    def __init__(self, lines: Iterable[str]) -> None:
        self.lines = lines
        self.garbage = 0

    def __iter__(self) -> Iterator[tuple[int, dict[str, Any]]]:
        loads = load_json
        for index, line in enumerate(self.lines):
            if not line or line.isspace():
                continue
            try:
                obj = loads(line)
            except ValueError:
                self.garbage += 1
                continue
            if type(obj) is not dict:
                self.garbage += 1
                continue
            yield index, obj


def json_objects(lines: Iterable[str]) -> tuple[list[tuple[int, dict[str, Any]]], int]:
    """(line index, object) for every JSON object line, and how many other non-blank lines there were."""
    stream = JsonLines(lines)
    objects = list(stream)
    return objects, stream.garbage


# --- the converter a profile names, and the files ----------------------------------------------------------


BUILTIN_NAME = re.compile(r"[a-z][a-z0-9]*(?:-[a-z0-9]+)*")
"""A built-in converter's name: its module's name in this package, ``_`` written ``-``."""
MODULE_NAME = re.compile(r"[A-Za-z_]\w*(?:\.[A-Za-z_]\w*)+")
"""A converter outside dokimi: the dotted name of a module (``mypackage.traces.mycli``)."""


def builtin_traces() -> list[str]:
    """The converters dokimi has: one module each in this package."""
    return sorted(module.name.replace("_", "-") for module in pkgutil.iter_modules(__path__))


def trace_problem(trace: str) -> str | None:
    """Why a profile's ``trace:`` names no converter (None when it names one): a built-in name, or the
    dotted name of a module that can be imported."""
    if BUILTIN_NAME.fullmatch(trace):
        if trace in builtin_traces():
            return None
        return f"unknown trace converter {trace!r}"
    if MODULE_NAME.fullmatch(trace):
        try:
            found = importlib.util.find_spec(trace) is not None
        except (ImportError, ValueError):
            found = False
        return None if found else f"trace converter module {trace!r} cannot be imported"
    return f"trace {trace!r} is neither a converter's name nor a module's dotted name"


def _converter(trace: str) -> Converter:
    """The ``convert`` function of the module the profile's ``trace:`` names."""
    hint = (
        f"use one of: {', '.join(builtin_traces())}, or the dotted name of a module with a convert function"
    )
    problem = trace_problem(trace)
    if problem is not None:
        raise UsageError(problem, key="trace", hint=hint)
    name = f"{__name__}.{trace.replace('-', '_')}" if BUILTIN_NAME.fullmatch(trace) else trace
    convert: Converter | None = getattr(importlib.import_module(name), "convert", None)
    if not callable(convert):
        raise UsageError(f"trace converter module {name} has no convert function", key="trace", hint=hint)
    return convert


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
    events_path = RunDir(run_dir).events_jsonl
    answer_path = RunDir(run_dir).answer_txt
    dumps: Callable[..., str] = json.dumps
    with open(events_path, "w", encoding="utf-8", newline="\n") as f:
        f.writelines(dumps(event, sort_keys=True, ensure_ascii=False) + "\n" for event in conversion.events)
    answer_path.write_text(conversion.answer, encoding="utf-8", newline="\n")
    return events_path, answer_path
