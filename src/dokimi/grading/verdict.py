"""The gate evaluated once, over what grading wrote, and the one reading of a finished cell's result.json
that report, compare and regrade share.

:func:`gate_over` takes grade.json (untrusted: the grader wrote it) and the framework checks' documents
(merge.json: mergeable, merge_score; perf/check.json: perf_ratio, perf_pass, perf_scaling_ok). The cell calls
it with the documents as it wrote them (never read back: a later container of the cell, the perf check's,
runs the agent's code with the run directory mounted); ``repo regrade --from-files`` calls it through
:func:`dokimi.grading.grade.verdict_from_files` on a finished run directory with no container.

:class:`CellReading` is how a result.json counts: passed (a gated cell with a true verdict and no grader
failure), score (a score-only cell), mergeable, the test-pass gate beside it (the gate without ``mergeable``),
and any metric by name, with a grader failure failing every gated metric.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

from dokimi.grading.gate import GateVerdict, MetricValue, evaluate_gate

if TYPE_CHECKING:
    from dokimi.grading.checks import CheckDocument
    from dokimi.schemas.grade import RepoGrade
    from dokimi.schemas.result import Result
    from dokimi.schemas.task import Task

__all__ = [
    "MERGEABLE",
    "CellReading",
    "FileVerdict",
    "gate_over",
    "read_cell",
]

MERGEABLE = "mergeable"


@dataclass(frozen=True)
class FileVerdict:
    """The verdict of one run and every metric measured (grade.json's and the framework's)."""

    verdict: GateVerdict
    metrics: dict[str, MetricValue]
    grade: RepoGrade | None = None
    """grade.json when it could be read (also on a grader failure that breaks a rule of grade.json)."""


def gate_over(
    task: Task, grade: RepoGrade | None, error: str | None, checks: Sequence[CheckDocument]
) -> FileVerdict:
    """The gate, once, over grading's documents: ``error`` is why grade.json cannot be used (the container
    failed, no file, an invalid one); a grader failure fails every gated entry, and the framework checks'
    metrics (merge.json, own_tests.json, perf/check.json, review.json, in
    :data:`dokimi.grading.grade.FRAMEWORK_CHECKS` order) count only
    when grading did not fail."""
    metrics: dict[str, MetricValue] = dict(grade.metrics) if grade is not None else {}
    verdict = evaluate_gate(task, grade, error=error)
    if verdict.grader_failure:
        return FileVerdict(verdict, metrics, grade)
    extra: dict[str, MetricValue] = {}
    for document in checks:
        extra.update(document.metrics)
    if extra:
        verdict = evaluate_gate(task, grade, extra_metrics=extra)
        metrics.update(extra)
    return FileVerdict(verdict, metrics, grade)


# --- reading a finished cell -------------------------------------------------------------------------------


@dataclass(frozen=True)
class CellReading:
    """How one result.json counts in reports and comparisons."""

    result: Result

    @property
    def gated(self) -> bool:
        return self.result.gated

    @property
    def passed(self) -> bool:
        """A gated cell passes only with a true verdict and no grader failure."""
        r = self.result
        return bool(r.gated and r.passed and not r.grader_failure)

    @property
    def score(self) -> float | None:
        """The score of a score-only cell, or of a review cell gated with its score; None for another gated
        cell or a score that was not measured. A scored cell whose grader failed scores 0: a failure, never
        left out."""
        r = self.result
        if r.gated and not r.gated_with_score:
            return None
        if r.grader_failure:
            return 0.0
        return r.score

    @property
    def mergeable(self) -> bool | None:
        """``mergeable`` (a grader failure is not mergeable); None when not measured."""
        value = self.result.metrics.get(MERGEABLE)
        if isinstance(value, bool):
            return value and not self.result.grader_failure
        return False if self.result.grader_failure else None

    @property
    def test_pass(self) -> bool | None:
        """The gate without ``mergeable``: pass and every other gate entry (what the tests say). None for a
        score-only cell."""
        r = self.result
        if not r.gated:
            return None
        if r.grader_failure:
            return False
        others = {k: v for k, v in r.gate_results.items() if k != MERGEABLE}
        return all(v is True for v in others.values())

    def metric(self, name: str) -> float | None:
        """A metric as a number (booleans 0/1); None when the cell does not report it (null or absent). A
        grader failure fails every gated metric and ``mergeable``: 0, never left out, which would favour the
        arm whose agent broke its workspace."""
        r = self.result
        if r.grader_failure and (r.gate_results.get(name) is False or name == MERGEABLE):
            return 0.0
        return self.reported(name)

    def reported(self, name: str) -> float | None:
        """A metric as the cell's grade reported it, as a number (booleans 0/1); None when not measured."""
        value = self.result.metrics.get(name)
        if value is None:
            return None
        number = float(value)
        return number if math.isfinite(number) else None


def read_cell(result: Result) -> CellReading:
    """The one reading of a finished cell."""
    return CellReading(result)
