"""Suppressions: a claim the guidance's authors looked at and decided the scan has wrong.

Two ways, each reported as such (the claim keeps its status and says what silenced it; it no longer counts in
the status counts or the gate):

- :func:`inline_rules`: an HTML comment in the guidance, invisible once rendered. ``<!-- dokimi: ignore -->``
  at the end of a line silences that line's claims; alone on its line, the next line's (a whole fence when
  the next line opens one); ``<!-- dokimi: ignore-start -->`` ... ``<!-- dokimi: ignore-end -->`` every line
  between. Words after ``ignore`` narrow it to claims of that kind or text (``*`` matches anything):
  ``<!-- dokimi: ignore path docs/* -->``.
- :func:`manifest_rules`: the manifest's ``scan.ignore`` list, each entry a claim text (``*`` matches
  anything), optionally a file glob, a kind and a line, and why.

:func:`apply_suppressions` marks the claims; a rule that silences nothing is reported (a stale suppression
hides the next real problem on its line).
"""

from __future__ import annotations

import re
from collections.abc import Collection, Iterable
from typing import NamedTuple

from dokimi.checks.scan.markdown import CODE_SPAN
from dokimi.checks.scan.verdict import Draft, WarningRecord
from dokimi.globs import match_glob

MARKER = re.compile(r"<!--\s*dokimi:\s*ignore(-start|-end)?(?:\s+(.*?))?\s*-->")
FENCE_OPEN = re.compile(r"^ {0,3}(`{3,}|~{3,})")


class IgnoreEntry(NamedTuple):
    """One entry of the manifest's ``scan.ignore`` (dokimi.schemas.manifest.ScanIgnore), as plain data."""

    claim: str
    file: str | None = None
    kind: str | None = None
    line: int | None = None
    why: str | None = None


class Rule(NamedTuple):
    """Which claims one suppression silences, and how to name it in the report."""

    origin: str
    """How the report names it: ``inline comment at AGENTS.md:12`` or ``scan.ignore[0] in the manifest``."""
    file: str | None = None
    """The guidance file (inline) or a glob of files (``file_glob``); None: any file."""
    lines: range | None = None
    """Lines silenced; None: any line."""
    words: tuple[str, ...] = ()
    """Inline: kinds or claim texts, any of which may match (``*`` matches anything); empty: every claim."""
    kind: str | None = None
    """Manifest: the claim's kind must be this."""
    claim: str | None = None
    """Manifest: the claim's text must match this (``*`` matches anything)."""
    why: str | None = None
    file_glob: bool = False


def inline_rules(path: str, text: str, fenced: Collection[int]) -> list[Rule]:
    """The ``<!-- dokimi: ignore ... -->`` comments of one guidance text (1-based lines; a comment inside
    fenced code or a code span is code, not a suppression)."""
    if "dokimi:" not in text:
        return []
    lines = text.split("\n")
    rules: list[Rule] = []
    start: tuple[int, tuple[str, ...]] | None = None
    for number, line in enumerate(lines, 1):
        if number in fenced:
            continue
        line = re.sub(CODE_SPAN, " ", line) if "`" in line else line  # a comment in a code span is code
        for match in MARKER.finditer(line):
            variant, words = match.group(1), tuple((match.group(2) or "").split())
            if variant == "-start":
                start = (number, words)
            elif variant == "-end":
                if start is not None:
                    rules.append(_inline(path, start[0], range(start[0], number + 1), start[1]))
                    start = None
            elif MARKER.sub("", line).strip():
                rules.append(_inline(path, number, range(number, number + 1), words))
            else:
                rules.append(_inline(path, number, _next_block(lines, number), words))
    if start is not None:  # an ignore-start never ended: to the end of the file
        rules.append(_inline(path, start[0], range(start[0], len(lines) + 1), start[1]))
    return rules


def _inline(path: str, number: int, lines: range, words: tuple[str, ...]) -> Rule:
    return Rule(f"inline comment at {path}:{number}", file=path, lines=lines, words=words)


def _next_block(lines: list[str], number: int) -> range:
    """The line after ``number`` (1-based), or the whole fence it opens."""
    if number >= len(lines):
        return range(number + 1, number + 2)
    opening = FENCE_OPEN.match(lines[number])
    if not opening:
        return range(number + 1, number + 2)
    mark = opening.group(1)
    for end in range(number + 1, len(lines)):
        if lines[end].strip().startswith(mark[0] * len(mark)) and not lines[end].strip().strip(mark[0]):
            return range(number + 1, end + 2)
    return range(number + 1, len(lines) + 1)


def manifest_rules(entries: Iterable[IgnoreEntry]) -> list[Rule]:
    """The manifest's ``scan.ignore`` entries as rules."""
    return [
        Rule(
            f"scan.ignore[{i}] in the manifest",
            file=entry.file,
            lines=range(entry.line, entry.line + 1) if entry.line is not None else None,
            kind=entry.kind,
            claim=entry.claim,
            why=entry.why,
            file_glob=True,
        )
        for i, entry in enumerate(entries)
    ]


def matches_word(word: str, text: str) -> bool:
    """``text`` is ``word``, where each ``*`` of ``word`` matches anything."""
    if "*" not in word:
        return word == text
    return re.fullmatch(".*".join(re.escape(part) for part in word.split("*")), text, re.S) is not None


def silences(rule: Rule, draft: Draft) -> bool:
    """Whether ``rule`` silences ``draft``: its file, its lines, and its words (inline: any names the kind
    or the claim) or its kind and claim (manifest: both)."""
    if rule.file is not None:
        if rule.file_glob:
            if not match_glob(rule.file, draft.file):
                return False
        elif rule.file != draft.file:
            return False
    if rule.lines is not None and draft.line not in rule.lines:
        return False
    if rule.kind is not None and rule.kind != draft.kind:
        return False
    if rule.claim is not None and not matches_word(rule.claim, draft.claim):
        return False
    return not rule.words or any(w == draft.kind or matches_word(w, draft.claim) for w in rule.words)


def apply_suppressions(drafts: list[Draft], rules: list[Rule]) -> tuple[list[Draft], list[WarningRecord]]:
    """Each fail or unresolved draft a rule silences, marked with the first such rule (an ok claim needs no
    silencing); and a warning per rule that silenced nothing."""
    if not rules:
        return drafts, []
    used = [False] * len(rules)
    out = []
    for draft in drafts:
        if draft.verdict.status.split("_", 1)[0] != "ok":
            for i, rule in enumerate(rules):
                if silences(rule, draft):
                    used[i] = True
                    draft = draft._replace(suppressed=rule.origin + (f": {rule.why}" if rule.why else ""))
                    break
        out.append(draft)
    warnings = [
        WarningRecord(
            kind="suppression_unused",
            path=rule.file,
            message=f"the {rule.origin} silences no fail or unresolved claim; remove it, or it will hide the "
            "next problem it matches",
            gate=False,
        )
        for rule, hit in zip(rules, used, strict=True)
        if not hit
    ]
    return out, warnings
