"""What a rule decides about one claim: a status, the reason, and for a fail the closest thing in the tree."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Literal, NamedTuple

OK = "ok"
OK_SUFFIX = "ok_suffix"
OK_BASENAME = "ok_basename"
UNRESOLVED = "unresolved"
FAIL = "fail"


# The scan's records are named tuples where they are values (immutable, compared field by field): a frozen
# dataclass costs about 0.4 ms to create at import, a named tuple a fifth of that, and every scan in
# pre-commit imports them.


class Verdict(NamedTuple):
    status: str
    why: str
    fix: str | None = None


def ok(why: str) -> Verdict:
    return Verdict(OK, why)


def unresolved(why: str) -> Verdict:
    return Verdict(UNRESOLVED, why)


def fail(why: str, fix: str | None = None) -> Verdict:
    return Verdict(FAIL, why, fix)


class Draft(NamedTuple):
    """A claim as the scan builds it, before it becomes a readiness Claim."""

    file: str
    line: int
    kind: str
    claim: str
    verdict: Verdict
    suppressed: str | None = None
    """What silenced it (dokimi.checks.scan.suppress): it keeps its status but counts nowhere."""


# The scan's own records of the guidance files, warnings and adapters: plain data with the fields of the
# repo_readiness.v1 models of the same meaning (dokimi.schemas.readiness), which are built from them only when
# a document is written. The text output needs no pydantic, so a scan in pre-commit starts fast.


class FileRecord(NamedTuple):
    """A guidance file the scan considered (readiness ``GuidanceFile``)."""

    path: str
    origin: Literal["glob", "also_scan"]
    scanned_as: str | None
    state: Literal["scanned", "alias", "unreadable"]
    reason: str | None = None
    claims: int = 0


class WarningRecord(NamedTuple):
    """Guidance the manifest names but the tree lacks, or cannot be read (readiness ``Warning_``)."""

    kind: Literal[
        "glob_no_match", "also_scan_missing", "no_guidance", "unreadable", "static", "suppression_unused"
    ]
    message: str
    gate: bool
    path: str | None = None


@dataclass(frozen=True, kw_only=True)
class AdapterChoice:
    """Which claim-check adapters ran, and why (readiness ``BuildSystems``)."""

    adapters: list[str]
    selected_by: Literal["manifest", "detected"]
    why: dict[str, str] = field(default_factory=dict)
