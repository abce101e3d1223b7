"""_eval/plan.json (repo_plan.v1): the cells a batch is meant to have, written by ``repo run`` first.

``repo report`` reads it to tell a missing cell (planned, no result.json) from one that was never asked for. A
batch run several times with more arms or reps gets the union of its plans.
"""

from __future__ import annotations

from typing import Literal

from pydantic import Field

from dokimi.schemas._base import Document


class PlannedCell(Document):
    """One planned cell: the dimensions of a cell."""

    task: str = Field(min_length=1)
    """Task id."""
    arm: str = Field(min_length=1)
    """Arm, for example ``guidance:none``."""
    model: str = Field(min_length=1)
    """Model id as passed to the harness."""
    effort: str | None = None
    """Reasoning effort; null for the harness default."""
    rep: int = Field(ge=0)
    """Repetition index."""
    prompt: Literal["spec", "issue"] | None = None
    """The prompt variant the run chose (``--prompt-style``); null: the task's own prompt."""


class Plan(Document):
    """plan.json under <out>/<batch>/_eval/."""

    schema_: Literal["repo_plan.v1"] = Field("repo_plan.v1", alias="schema")
    """Document type and version."""
    cells: list[PlannedCell]
    """Every planned cell, sorted."""
