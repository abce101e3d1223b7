"""repo_rubric_check.v1: what ``repo rubric check --json`` prints: each calibration row of each rubric and
whether it met its expectation (dokimi.checks.merge.calibrate builds it)."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import Field

from dokimi.schemas._base import Document
from dokimi.schemas.report import BlockerAgreement


class RubricCheckRow(Document):
    """One calibration row: a workspace judged against the rubric."""

    task: str
    """The task id."""
    kind: Literal["null", "oracle", "lazy", "lazy+comment", "alt"]
    """The row's workspace: untouched, the oracle's, a lazy diff (also with a persuasive comment), an
    alternative."""
    name: str
    """The row's name as the table shows it (with its diff file)."""
    expectation: str
    """What the row must give (not mergeable on the blockers, mergeable, failing a blocker, ...)."""
    ok: bool | None
    """Whether it did; null when the row could not run (no oracle)."""
    detail: str | None
    """Why not, or what was measured."""
    mergeable: bool | None
    """The row's mergeable (scope, deleted tests, blockers); null on a judge failure."""
    targets: list[str]
    """The blockers a lazy diff was written to break."""
    scope: dict[str, Any] | None
    """The scope check of the row's diff."""
    verdict: dict[str, Any] | None
    """The primary judge's verdict."""
    second: dict[str, Any] | None
    """The second judge's verdict, when one was asked for."""


class RubricAgreement(Document):
    """The second judge against the primary (agreement only; it never decides a row)."""

    model: str
    """The second judge's full model id."""
    kappa_mergeable: float | None
    """Cohen's kappa on mergeable over the rows; null when undefined."""
    kappa_blockers: float | None
    """Cohen's kappa on the blocker items, pooled over every task and blocker."""
    items: int
    """Blocker items both judges decided."""
    disagreements: list[str]
    """The rows and items where the judges disagree, for human review."""
    blockers: list[BlockerAgreement] = Field(default_factory=list)
    """Per task and blocker: the rows both judged (``cells``), how many they agreed on, kappa, and the rows
    they disagreed on."""


class RubricCheckDoc(Document):
    """repo_rubric_check.v1: the calibration of every rubric checked."""

    schema_: Literal["repo_rubric_check.v1"] = Field(default="repo_rubric_check.v1", alias="schema")
    """The document type."""
    model: str
    """The primary judge's full model id."""
    ok: bool
    """Every row met its expectation: the rubrics are admitted."""
    tasks: list[str]
    """The tasks whose rubric was checked."""
    skipped: list[str]
    """Tasks without a rubric.json."""
    rows: list[RubricCheckRow]
    """Every calibration row."""
    agreement: RubricAgreement | None
    """The second judge's agreement, when one was asked for."""
    tree: str | None = None
    """The eval tree's commit the rubrics were checked at; null for a working tree."""
    admitted: list[str] = Field(default_factory=list)
    """The tasks whose every row met its expectation: admitted, their rubric may gate paid runs (``repo run``
    refuses a task gated on mergeable that a rubric check of the same tree did not admit)."""
