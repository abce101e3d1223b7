"""The merge outcome: ``mergeable`` and ``merge_score``, added to a run's metrics after
grade returns, next to grade.json's own, so that a gate can name them.

- ``mergeable`` is true when ``pass`` is true and every entry of the task's gate other than ``mergeable``
  (and ``merge_score``) holds; the scope check and the test-integrity check pass; and no blocker fails.
- ``merge_score`` is the weighted share of non-blockers that pass; 0 when ``mergeable`` is false.
- A task without a rubric reports both as null: not measured, never false.
- When everything deterministic holds but the judge failed (or was not run), both are null: the judge's
  failure is counted and reported, not turned into a verdict on the agent. When something deterministic
  already fails, the outcome is ``false`` and 0 whatever the judge did.

A grade.json that already reports ``mergeable`` or ``merge_score`` is a grader failure
(:func:`dokimi.schemas.grade.framework_metrics_claimed`); :func:`merge_outcome` refuses such metrics.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from dokimi.checks.merge.integrity import IntegrityVerdict
from dokimi.checks.merge.judge import JudgeVerdict
from dokimi.checks.merge.scope import ScopeVerdict
from dokimi.schemas.grade import FRAMEWORK_METRICS

MetricValue = bool | int | float | None


@dataclass(frozen=True)
class MergeOutcome:
    mergeable: bool | None
    merge_score: float | None
    reasons: list[str] = field(default_factory=list)
    """Why the change is not mergeable (or why it was not measured)."""

    @property
    def metrics(self) -> dict[str, MetricValue]:
        return {"mergeable": self.mergeable, "merge_score": self.merge_score}


def _gate_key(entry: Any) -> str:
    return entry if isinstance(entry, str) else str(entry.metric)


def _entry_holds(entry: Any, metrics: Mapping[str, MetricValue]) -> bool:
    if isinstance(entry, str):
        return metrics.get(entry) is True
    value = metrics.get(entry.metric)
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return False
    return float(value) >= float(entry.min)


def grade_metrics_of(grade: Any) -> dict[str, MetricValue]:
    """grade.json's metrics with ``pass`` added (what :func:`merge_outcome` reads)."""
    return {**grade.metrics, "pass": grade.pass_}


def gate_other_than_mergeable(task_gate: Sequence[Any], metrics: Mapping[str, MetricValue]) -> list[str]:
    """``pass`` and every gate entry other than the framework's own metrics must hold;
    the ones that do not."""
    failing = [] if metrics.get("pass") is True else ["pass"]
    for entry in task_gate:
        key = _gate_key(entry)
        if key in FRAMEWORK_METRICS or key == "pass":
            continue
        if not _entry_holds(entry, metrics):
            failing.append(key)
    return failing


def non_blocker_score(verdict: JudgeVerdict) -> float:
    """The weighted share of non-blockers that pass; 1 when the rubric has none."""
    items = [i for i in verdict.items if i.kind == "non_blocker"]
    total = sum(i.weight for i in items)
    if total == 0:
        return 1.0
    return sum(i.weight for i in items if i.verdict == "pass") / total


def explain_merge(
    grade_metrics: Mapping[str, MetricValue] | None,
    task_gate: Sequence[Any],
    scope: ScopeVerdict | None,
    integrity: IntegrityVerdict | None,
    verdict: JudgeVerdict | None,
    *,
    has_rubric: bool = True,
) -> MergeOutcome:
    """:func:`merge_outcome` with its reasons. ``grade_metrics`` None means grading failed (not mergeable).
    ``grade_metrics`` holding ``pass`` and the grade.json metrics; see :func:`grade_metrics_of`."""
    if not has_rubric:
        return MergeOutcome(None, None, ["the task has no rubric"])
    if grade_metrics is not None:
        claimed = [name for name in FRAMEWORK_METRICS if name in grade_metrics]
        if claimed:
            raise ValueError(
                f"grade.json reports {', '.join(claimed)}: a grader failure (grade_problems), not a metric"
            )
    reasons: list[str] = []
    if grade_metrics is None:
        reasons.append("grading failed")
    else:
        reasons += [
            f"gate entry {key} does not hold" for key in gate_other_than_mergeable(task_gate, grade_metrics)
        ]
    if scope is None:
        reasons.append("scope not checked")
    elif not scope.passed:
        reasons += [f"scope: {p}" for p in scope.problems]
    if integrity is not None and not integrity.passed:
        reasons += [f"test integrity: {p}" for p in integrity.problems]
    if verdict is not None and verdict.ok:
        reasons += [f"blocker {b} fails" for b in verdict.blockers_failed()]
    if reasons:
        return MergeOutcome(False, 0.0, reasons)
    if verdict is None or not verdict.ok:
        why = "the judge was not run" if verdict is None else f"judge failure: {verdict.failure}"
        return MergeOutcome(None, None, [why])
    return MergeOutcome(True, non_blocker_score(verdict), [])


def merge_outcome(
    grade_metrics: Mapping[str, MetricValue] | None,
    task_gate: Sequence[Any],
    scope: ScopeVerdict | None,
    integrity: IntegrityVerdict | None,
    verdict: JudgeVerdict | None,
    *,
    has_rubric: bool = True,
) -> dict[str, MetricValue]:
    """``{"mergeable": bool | None, "merge_score": float | None}`` for one run."""
    return explain_merge(grade_metrics, task_gate, scope, integrity, verdict, has_rubric=has_rubric).metrics
