"""Aider ``--no-pretty --message``: plain text on stdout, no structured trace."""

from __future__ import annotations

import re
from collections.abc import Iterable

from dokimi.harness.traces import (
    Conversion,
)

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


def convert(lines: Iterable[str]) -> Conversion:
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
