"""What a rule decides about one claim: a status, the reason, and for a fail the closest thing in the tree."""

from __future__ import annotations

from dataclasses import dataclass

OK = "ok"
OK_SUFFIX = "ok_suffix"
OK_BASENAME = "ok_basename"
UNRESOLVED = "unresolved"
FAIL = "fail"


@dataclass(frozen=True)
class Verdict:
    status: str
    why: str
    fix: str | None = None


def ok(why: str) -> Verdict:
    return Verdict(OK, why)


def unresolved(why: str) -> Verdict:
    return Verdict(UNRESOLVED, why)


def fail(why: str, fix: str | None = None) -> Verdict:
    return Verdict(FAIL, why, fix)


@dataclass(frozen=True)
class Draft:
    """A claim as the scan builds it, before it becomes a readiness Claim."""

    file: str
    line: int
    kind: str
    claim: str
    verdict: Verdict
