"""The gate: a pure function from a task and its grade to a verdict. No files, no docker.

- A task is gated unless it is score-only: its grader returns ``pass: null`` (without errors) and the task has
  ``score``; the result is then ``score.metric``. A review task gated on dokimi's review checks alone
  (``Task.gated_without_pass``) is gated whatever its grader says of ``pass``, and keeps its score beside the
  gate (recall of the human review threads).
- Each gate entry (default ``["pass"]``) is a boolean metric that must be true (``pass`` is grade.json's own
  ``pass``), or ``{"metric", "min"}``, a numeric metric that must reach ``min``. A metric that was not
  measured (null or absent) gives ``None`` for that entry, and the gate is not passed: only ``True`` passes.
- A grader failure (no grade.json, an invalid one, a non-zero exit, a timeout, a valid one that breaks a
  rule of grade.json) counts as a failure on every gated metric: each gate entry is ``False``. A score-only
  task keeps ``score`` None with ``grader_failure`` set; reports count that cell as failed, never drop it.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from dokimi.schemas.grade import grade_problems

if TYPE_CHECKING:
    from dokimi.schemas.grade import RepoGrade
    from dokimi.schemas.task import Task

MetricValue = bool | int | float | None


@dataclass(frozen=True)
class GateVerdict:
    """What result.json records about the gate (its fields have the same names)."""

    gated: bool
    """True when the task has a pass/gate for this run; False for a score-only result."""
    passed: bool | None
    """The gate verdict; None for score-only."""
    score: float | None
    """score.metric's value when the task has ``score``; None otherwise or on a grader failure."""
    gate_results: dict[str, bool | None] = field(default_factory=dict)
    """Each gate entry's metric -> True, False, or None (not measured)."""
    grader_failure: bool = False
    grader_error: str | None = None


def gate_key(entry: Any) -> str:
    """The metric name of a gate entry (a string, or a GateMin)."""
    return entry if isinstance(entry, str) else str(entry.metric)


def _number(value: MetricValue) -> float | None:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return None
    return float(value)


def score_only(task: Task) -> bool:
    """Whether the task's result is its score alone when its grader leaves ``pass`` null."""
    return task.score is not None and not task.gated_without_pass


def not_graded(task: Task) -> GateVerdict:
    """The verdict of a cell that never reached its model (an infra error): not graded, never a pass."""
    if score_only(task):
        return GateVerdict(False, None, None, {})
    return GateVerdict(True, False, None, {gate_key(entry): None for entry in task.gate})


def grader_failure(task: Task, reason: str) -> GateVerdict:
    """The verdict of a run whose grader failed: a failure on every gated metric."""
    if score_only(task):
        return GateVerdict(False, None, None, {}, grader_failure=True, grader_error=reason)
    results: dict[str, bool | None] = {gate_key(entry): False for entry in task.gate}
    return GateVerdict(True, False, None, results, grader_failure=True, grader_error=reason)


def entry_result(entry: Any, grade: RepoGrade, metrics: Mapping[str, MetricValue]) -> bool | None:
    """One gate entry: True (passes), False (fails), None (its metric was not measured)."""
    if isinstance(entry, str):
        value = grade.pass_ if entry == "pass" else metrics.get(entry)
        if value is None:
            return None
        return value is True
    value = metrics.get(entry.metric)
    if value is None:
        return None
    number = _number(value)
    return number is not None and number >= float(entry.min)


def evaluate_gate(
    task: Task,
    grade: RepoGrade | None,
    *,
    error: str | None = None,
    extra_metrics: Mapping[str, MetricValue] | None = None,
) -> GateVerdict:
    """The verdict of one run. ``error`` is why grading failed before a grade.json could be used (exit code,
    timeout, invalid document); ``extra_metrics`` are framework metrics (mergeable, merge_score) that gate
    entries may name."""
    if error is not None or grade is None:
        return grader_failure(task, error or "the grader wrote no grade.json")
    problems = grade_problems(grade, task)
    if problems:
        return grader_failure(task, "; ".join(problems))
    metrics: dict[str, MetricValue] = {**grade.metrics, **(extra_metrics or {})}
    score = _number(metrics.get(task.score.metric)) if task.score is not None else None
    if grade.pass_ is None and score_only(task):
        # grade_problems checked the task has score and the metric is a number
        return GateVerdict(False, None, score, {})
    results = {gate_key(entry): entry_result(entry, grade, metrics) for entry in task.gate}
    return GateVerdict(True, all(value is True for value in results.values()), score, results)


def reaches_score_max(task: Task, verdict: GateVerdict) -> bool:
    """Whether a score-only run reached ``score.max`` (what tasks check requires of the oracle)."""
    return task.score is not None and verdict.score is not None and verdict.score >= float(task.score.max)
