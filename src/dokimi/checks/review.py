"""The review checks: what a review task's answer flags, read by dokimi from answer.txt. Pure functions, one
per rule (docs/agent-modes.md).

- A **finding** is a line of the answer that starts with ``path:line`` (after an optional list marker or
  backquote), then the reviewer's text: ``calc/evaluator.py:77: the cache ignores env``. A line range
  (``path:12-14``) cites every line of it. Lines that cite no location are prose, not findings.
- A finding is **blocking** unless its text starts with ``nit``, ``non-blocking``, ``optional`` or
  ``suggestion`` (``nit: a clearer name``, ``[nit] ...``, ``(non-blocking) ...``).
- A **decoy** is flagged by any finding, blocking or not, whose path names the decoy's file (the same path,
  or one of them a ``/``-suffix of the other) and whose lines meet the decoy's ``[first, last]``: a nit on a
  decoy is still a false alarm about code that is right.
- On a clean diff the rule asks for **no blocking finding**, and for an answer: an empty answer (the agent
  gave up or crashed) is no review.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass, field

from dokimi.schemas.grade import DECOYS_NOT_FLAGGED, NO_BLOCKING_FINDING
from dokimi.schemas.task import Decoy

__all__ = [
    "Finding",
    "ReviewVerdict",
    "decoys_flagged",
    "is_blocking",
    "parse_findings",
    "review_verdict",
]

#: At most this many characters of an answer are read (a finding past them is not one).
MAX_ANSWER_CHARS = 1_000_000
MAX_FINDINGS_KEPT = 200
_FINDING = re.compile(
    r"""^\s*(?:[-*+]\s+|\d+[.)]\s+)?      # a list marker
        [`*_]*(?P<path>[^\s:`*]+?)        # the path (no spaces, no colon)
        :(?P<first>\d+)(?:\s*[-\u2013]\s*(?P<last>\d+))?   # :line or :first-last
        [`*_]*(?=[\s:,.;)]|$)\s*[:,.;)-]?\s*(?P<text>.*)$""",
    re.VERBOSE,
)
_NON_BLOCKING = re.compile(
    r"^[\[(*_`]*\s*(nit|non-blocking|nonblocking|optional|suggestion)\b", re.IGNORECASE
)


@dataclass(frozen=True)
class Finding:
    """One finding of a review answer."""

    path: str
    first: int
    last: int
    text: str
    blocking: bool


def is_blocking(text: str) -> bool:
    """A finding blocks the merge unless its text starts with a non-blocking marker (``nit:`` and so on)."""
    return _NON_BLOCKING.match(text.strip()) is None


def parse_findings(answer: str) -> list[Finding]:
    """Every finding of an answer, in order (see the module docstring)."""
    found = []
    for line in answer[:MAX_ANSWER_CHARS].splitlines():
        match = _FINDING.match(line)
        if match is None:
            continue
        first = int(match["first"])
        last = int(match["last"]) if match["last"] else first
        text = match["text"].strip()
        found.append(Finding(match["path"], min(first, last), max(first, last), text, is_blocking(text)))
    return found


def same_file(cited: str, path: str) -> bool:
    """Whether a cited path names the file ``path``: equal, or one a ``/``-suffix of the other
    (``evaluator.py`` and ``./calc/evaluator.py`` both name ``calc/evaluator.py``)."""
    cited, path = cited.removeprefix("./"), path.removeprefix("./")
    return cited == path or path.endswith("/" + cited) or cited.endswith("/" + path)


def flags(finding: Finding, decoy: Decoy) -> bool:
    """Whether a finding cites the decoy: its file, at a line the decoy spans."""
    first, last = decoy.lines
    return same_file(finding.path, decoy.path) and finding.first <= last and first <= finding.last


def decoys_flagged(findings: Sequence[Finding], decoys: Sequence[Decoy]) -> list[str]:
    """The ids of the decoys some finding flags, in the task's order."""
    return [decoy.id for decoy in decoys if any(flags(f, decoy) for f in findings)]


@dataclass(frozen=True)
class ReviewVerdict:
    """What dokimi measured of one review answer: review.json and the metrics it adds."""

    answered: bool
    findings: list[Finding] = field(default_factory=list)
    decoys: list[str] = field(default_factory=list)
    """The task's decoy ids (empty when it declares none)."""
    flagged: list[str] = field(default_factory=list)
    clean_diff: bool = False

    @property
    def blocking(self) -> list[Finding]:
        return [f for f in self.findings if f.blocking]

    @property
    def metrics(self) -> dict[str, bool | int | None]:
        """``decoys_flagged`` and ``decoys_not_flagged`` (null without decoys), ``blocking_findings``, and
        ``no_blocking_finding`` (on a clean diff only: an answer with no blocking finding)."""
        with_decoys = bool(self.decoys)
        return {
            "decoys_flagged": len(self.flagged) if with_decoys else None,
            DECOYS_NOT_FLAGGED: not self.flagged if with_decoys else None,
            "blocking_findings": len(self.blocking),
            NO_BLOCKING_FINDING: (self.answered and not self.blocking) if self.clean_diff else None,
        }

    def reasons(self) -> list[str]:
        """Why the review checks fail, for people."""
        out = [f"flags decoy {d}" for d in self.flagged]
        if self.clean_diff and not self.answered:
            out.append("no answer: a clean diff still needs a review that says it can be merged")
        if self.clean_diff:
            out += [f"blocking finding on a clean diff: {f.path}:{f.first}" for f in self.blocking]
        return out


def review_verdict(answer: str, decoys: Sequence[Decoy], *, clean_diff: bool) -> ReviewVerdict:
    """The review checks of one answer."""
    findings = parse_findings(answer)
    return ReviewVerdict(
        answered=bool(answer.strip()),
        findings=findings,
        decoys=[d.id for d in decoys],
        flagged=decoys_flagged(findings, decoys),
        clean_diff=clean_diff,
    )
