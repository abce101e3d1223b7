"""Plain-text tables that fit the terminal: no line wider than the width, no name cut or wrapped.

Every command that prints a table goes through :func:`render_table`:

- a column whose value is the same in every row (``model``, ``effort``, a count that is 0 everywhere) is
  dropped and said once above the table (``model claude-haiku-4-5, effort default``);
- a header of several words may take two lines, so a column is as wide as its widest value or its longest
  header word;
- when the columns still do not fit, the table is split into parts that each repeat the key columns (task,
  arm, ...): a name is never cut, a line never wraps.

The width is the terminal's (``COLUMNS`` wins), or 100 when stdout is not a terminal. :func:`print_lines`
shows every control character as an escape (:func:`dokimi.controls.escape_controls`), whatever built the
line: the only colour it prints is :func:`colored`'s, marked with a secret of this process that no text read
from a file can hold.
"""

from __future__ import annotations

import os
import re
import secrets
import shutil
import sys
from collections.abc import Sequence
from dataclasses import dataclass

from dokimi.controls import escape_controls

DEFAULT_WIDTH = 100
GAP = "  "

#: ANSI colours for a status word on a terminal (fail/missing red, warn/unresolved yellow, ok green).
STATUS_COLORS = {
    "fail": "31",
    "missing": "31",
    "failed": "31",
    "error": "31",
    "warn": "33",
    "unresolved": "33",
    "ok": "32",
}


#: A number column that holds one of these in every row says nothing row by row: it is said once above.
EMPTY_NUMBERS = frozenset({"0", "-", "0/0", "0.000", "0.00"})


@dataclass(frozen=True)
class Col:
    name: str
    right: bool = False
    """Right-aligned (numbers)."""
    key: bool = False
    """A name that identifies the row (task, arm): repeated in every part of a split table."""
    droppable: bool = True
    """Dropped and said once above the table when every row holds the same value (a number column only when
    that value is 0 or -)."""


def terminal_width() -> int:
    """The width tables fit: $COLUMNS, else the terminal's, else :data:`DEFAULT_WIDTH`."""
    columns = os.environ.get("COLUMNS", "")
    if columns.isdigit() and int(columns) > 20:
        return int(columns)
    if sys.stdout.isatty():
        return shutil.get_terminal_size((DEFAULT_WIDTH, 24)).columns
    return DEFAULT_WIDTH


def color_on(stream: object = None) -> bool:
    """Colour only on a terminal, never with NO_COLOR set or TERM=dumb."""
    stream = sys.stdout if stream is None else stream
    if os.environ.get("NO_COLOR") or os.environ.get("TERM") == "dumb":
        return False
    isatty = getattr(stream, "isatty", None)
    return bool(isatty and isatty())


_MARK = f"\ue000{secrets.token_hex(8)}"
_COLOR_MARK = re.compile(re.escape(_MARK) + r"(\d+)\ue001")


def colored(text: str, status: str, *, color: bool) -> str:
    """``text`` in the colour of ``status`` on a terminal: marked here, made an ANSI colour by
    :func:`print_lines` only (so no text read from a file can print a colour or any other escape)."""
    code = STATUS_COLORS.get(status)
    return f"{_MARK}{code}\ue001{text}{_MARK}0\ue001" if color and code else text


def _header_lines(name: str, width: int) -> list[str]:
    """The header in at most as many lines as it has words, each at most ``width`` wide (greedy)."""
    lines: list[str] = []
    for word in name.split(" "):
        if lines and len(lines[-1]) + 1 + len(word) <= width:
            lines[-1] += " " + word
        else:
            lines.append(word)
    return lines


def _visible(text: str) -> int:
    """Printed width of a cell (colour marks take none)."""
    return len(_COLOR_MARK.sub("", text)) if _MARK in text else len(text)


def render_table(
    columns: Sequence[Col],
    rows: Sequence[Sequence[str]],
    *,
    width: int | None = None,
    title: str | None = None,
) -> list[str]:
    """The lines of a table that fits ``width`` (see the module's docstring)."""
    width = terminal_width() if width is None else width
    cols = list(columns)
    body = [[escape_controls(value) for value in r] for r in rows]
    lines: list[str] = []
    if title:
        lines.extend(fit_line(title, width))
    if len(body) > 1:
        constant = [
            i
            for i, c in enumerate(cols)
            if c.droppable
            and not c.key
            and len({r[i] for r in body}) == 1
            and (not c.right or body[0][i] in EMPTY_NUMBERS)
        ]
        if constant:
            lines.extend(_wrapped("every row: ", [f"{cols[i].name} {body[0][i]}" for i in constant], width))
            keep = [i for i in range(len(cols)) if i not in constant]
            cols = [cols[i] for i in keep]
            body = [[r[i] for i in keep] for r in body]
    if not cols:
        return lines
    widths = []
    for i, c in enumerate(cols):
        values = max((_visible(r[i]) for r in body), default=0)
        widths.append(max(values, max(len(w) for w in c.name.split(" "))))
    keys = [i for i, c in enumerate(cols) if c.key]
    rest = [i for i in range(len(cols)) if i not in keys]
    parts: list[list[int]] = []
    current = list(keys)
    for i in rest:
        trial = [*current, i]
        if len(trial) > len(keys) and _width(trial, widths) > width and len(current) > len(keys):
            parts.append(current)
            current = [*keys, i]
        else:
            current = trial
    parts.append(current)
    for n, part in enumerate(parts):
        if n:
            lines.append("")
        lines.extend(_render_part(part, cols, body, widths))
    return lines


def _wrapped(lead: str, items: list[str], width: int) -> list[str]:
    """``lead`` and the items joined by ``, ``, broken between items into lines of at most ``width``."""
    lines = [lead.rstrip()]
    for n, item in enumerate(items):
        piece = item + ("," if n < len(items) - 1 else "")
        if len(lines[-1]) + 1 + len(piece) <= width or lines[-1] in ("", lead.rstrip()):
            lines[-1] += " " + piece
        else:
            lines.append("  " + piece)
    return lines


def _width(indexes: Sequence[int], widths: Sequence[int]) -> int:
    return sum(widths[i] for i in indexes) + len(GAP) * (len(indexes) - 1)


def _render_part(part: list[int], cols: list[Col], body: list[list[str]], widths: list[int]) -> list[str]:
    heads = [_header_lines(cols[i].name, widths[i]) for i in part]
    height = max(len(h) for h in heads)
    out = []
    for level in range(height):
        cells = []
        for h, i in zip(heads, part, strict=True):
            text = h[level - (height - len(h))] if level >= height - len(h) else ""
            cells.append(_pad(text, widths[i], cols[i].right))
        out.append(GAP.join(cells).rstrip())
    for row in body:
        out.append(GAP.join(_pad(row[i], widths[i], cols[i].right) for i in part).rstrip())
    return out


def _pad(text: str, width: int, right: bool) -> str:
    space = " " * (width - _visible(text))
    return space + text if right else text + space


def fit_line(text: str, width: int | None = None, *, indent: str = "  ") -> list[str]:
    """A line of prose broken to ``width``: between the parts of a list (after ``, `` or ``; ``) where it can,
    else at spaces; a word (a name, a path) is never cut."""
    # here, not at the top: a command's --help loads no library code (bench/bench_cli_start.py)
    import re
    import textwrap

    width = terminal_width() if width is None else width
    text = escape_controls(text)
    if len(text) <= width:
        return [text]
    lead = text[: len(text) - len(text.lstrip(" "))] + indent
    lines: list[str] = [""]
    for chunk in re.split(r"(?<=[,;]) ", text):
        joined = f"{lines[-1]} {chunk}" if lines[-1].strip() else lines[-1] + chunk
        if len(joined) <= width:
            lines[-1] = joined
        elif len(lead + chunk) <= width:
            lines.append(lead + chunk)
        else:
            start = lines[-1] + " " if lines[-1].strip() else lines[-1]
            wrapped = textwrap.wrap(
                start + chunk,
                width,
                subsequent_indent=lead,
                break_long_words=False,
                break_on_hyphens=False,
            )
            lines[-1:] = wrapped
    return [line.rstrip() for line in lines if line.strip()]


def print_lines(lines: Sequence[str]) -> None:
    """Print ``lines``: every control character as an escape, :func:`colored`'s marks as colours."""
    text = "".join(escape_controls(line) + "\n" for line in lines)
    sys.stdout.write(_COLOR_MARK.sub(lambda m: f"\033[{m.group(1)}m", text))
