"""repo_power.v1: what ``dokimi repo plan --json`` prints: the tasks and reps a paired comparison needs.

(``repo_plan.v1`` is another document: the cells a batch is meant to have, ``_eval/plan.json``.)
"""

from __future__ import annotations

from typing import Literal

from pydantic import Field

from dokimi.schemas._base import Document


class PilotSummary(Document):
    """What the simulation took from the pilot batch."""

    kind: Literal["binary", "continuous"]
    """``binary`` for pass/fail cells (the gate, boolean metrics), ``continuous`` for numbers."""
    tasks: int
    """Pilot tasks with finished baseline cells."""
    paired_tasks: int
    """Of those, tasks with finished treatment cells too."""
    reps: float
    """Median baseline cells per task."""
    baseline_mean: float
    """Mean of the per-task baseline values."""
    between_task_sd: float | None = None
    """Standard deviation of the per-task baseline means."""
    icc: float | None = None
    """binary: intraclass correlation of one task's cells (beta-binomial fit): how alike its reps are."""
    within_task_sd: float | None = None
    """continuous: pooled standard deviation of one cell around its task's mean."""
    heterogeneity_sd: float
    """Task-to-task standard deviation of the arm's effect the simulation uses (logit scale for binary);
    0 unless the pilot's per-task deltas vary more than a uniform effect explains (one-sided, 5%)."""
    observed_delta: float | None = None
    """The pilot's own mean per-task delta (treatment - baseline), when it has both arms."""


class PowerRow(Document):
    """One number of reps per (task, arm) and the fewest tasks that reach the target power with it."""

    reps: int
    """Reps per (task, arm)."""
    tasks: int | None
    """Fewest tasks reaching the target power; null when not reached by 5000 tasks."""
    power: float | None
    """Simulated power at that size."""
    cells: int | None
    """Cells of the study: 2 arms x tasks x reps."""


class RepoPower(Document):
    """The plan for a paired comparison of two arms."""

    schema_: Literal["repo_power.v1"] = Field("repo_power.v1", alias="schema")
    """Document type and version."""
    batches: list[str]
    """The pilot batch directories read."""
    dry_run_pilot: bool = False
    """The pilot is a dry run, planned from anyway (--allow-dry-pilot): its scripted agents have none of a
    model's variance, so the plan fits the script."""
    baseline: str
    """The baseline arm."""
    treatment: str | None
    """The treatment arm of the pilot, when it has one (its per-task deltas give the heterogeneity)."""
    model: str
    """The model whose cells were read."""
    measure: str
    """``gate``, ``score``, ``cost``, ``turns`` or ``metric:NAME``."""
    effect: float
    """The target: the mean per-task delta to detect."""
    alpha: float
    """Two-sided significance level of the sign-flip test."""
    target_power: float
    """The power asked for."""
    simulations: int
    """Simulated studies per evaluated size."""
    seed: int
    """Seed of every simulation (the same pilot gives the same plan)."""
    pilot: PilotSummary
    """What the simulation took from the pilot."""
    rows: list[PowerRow]
    """Per number of reps, sorted."""
    tasks_available: int | None = None
    """--tasks-available: how many tasks the repository has."""
    recommended: PowerRow | None = None
    """The cheapest row (fewest cells) whose tasks fit the tasks available; null when none does."""
    notes: list[str] = Field(default_factory=list)
    """What the plan assumes, in words."""
