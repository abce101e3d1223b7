"""repo_regrade.v1: what ``repo regrade --json`` prints (grading must be deterministic)."""

from __future__ import annotations

from typing import Literal

from pydantic import Field

from dokimi.schemas._base import Document

Scalar = bool | int | float | str | None


class RegradeMismatch(Document):
    """One value that moved between the stored result and the regrade."""

    what: str
    """``passed``, ``score``, ``grader_failure``, ``gated``, ``gate:<metric>`` or ``metric:<name>``."""
    original: Scalar
    """The value in the cell's result.json."""
    regraded: Scalar
    """The value the regrade gave."""


class RegradedCellDoc(Document):
    """One sampled cell."""

    cell: str
    """The cell's path relative to the batch (task/arm/model/effort/repN)."""
    matches: bool
    """Regraded to the same verdict and metrics."""
    error: str | None
    """Why the cell could not be regraded at all (not a mismatch); null otherwise."""
    grader_error: str | None
    """The regrade's grader error when the regrade was a grader failure."""
    mismatches: list[RegradeMismatch]
    """Every value that moved."""


class RegradeDoc(Document):
    """repo_regrade.v1: the outcome of ``repo regrade``."""

    schema_: Literal["repo_regrade.v1"] = Field("repo_regrade.v1", alias="schema")
    """Document type and version."""
    batch: str
    """The batch directory."""
    sample: int | None = Field(ge=1)
    """--sample; null: every finished cell."""
    seed: int
    """--seed of the sample."""
    finished: int = Field(ge=0)
    """Finished cells of the batch (what the sample was drawn from)."""
    regraded: int = Field(ge=0)
    """Cells regraded."""
    mismatched: int = Field(ge=0)
    """Cells with at least one mismatch."""
    errors: int = Field(ge=0)
    """Cells that could not be regraded."""
    cells: list[RegradedCellDoc]
    """Each sampled cell, by path."""
