"""The review checks of one run of a review task, written to ``{run_dir}/review.json``.

dokimi reads the agent's final answer (answer.txt, which dokimi itself wrote from the trace) with
:mod:`dokimi.checks.review`: the decoys its findings flag, and its blocking findings on a clean diff. The
metrics go next to grade.json's, so the review rule of docs/agent-modes.md can gate on them. No container
runs: nothing of the workspace is executed.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from dokimi import safefs
from dokimi.checks.review import MAX_ANSWER_CHARS, MAX_FINDINGS_KEPT, review_verdict
from dokimi.errors import DokimiError
from dokimi.grading.checks import framework_document
from dokimi.rundir import RunDir
from dokimi.schemas._base import write_document
from dokimi.schemas.grade import REVIEW_METRICS
from dokimi.schemas.grading import ReviewCheckDoc, ReviewFindingDoc

if TYPE_CHECKING:
    from dokimi.grading.environment import GradeEnvironment
    from dokimi.grading.grade import CellFacts  # grade imports this module
    from dokimi.schemas.grade import RepoGrade
    from dokimi.schemas.task import Task

__all__ = ["REVIEW", "check_review", "read_review", "review_checked"]

MAX_FINDING_TEXT = 500


def review_checked(task: Task) -> bool:
    """Whether dokimi reads the task's answer for the review checks: a review task, or a task that declares
    decoys or a clean diff, or whose gate names a review metric."""
    return (
        task.mode == "review"
        or bool(task.decoys)
        or task.clean_diff_of is not None
        or bool(set(task.gate_names) & set(REVIEW_METRICS))
    )


def _answer(run_dir: Path) -> str:
    """The agent's final answer (empty when there is none). An answer too large to read is a DokimiError."""
    try:
        data = safefs.read_bytes(RunDir(run_dir).answer_txt, trusted=run_dir, limit=4 * MAX_ANSWER_CHARS)
    except FileNotFoundError:
        return ""
    return data.decode("utf-8", errors="replace")


def check_review(run_dir: Path, task: Task) -> ReviewCheckDoc:
    """The review checks of the run's answer; review.json is written and returned. An answer dokimi cannot
    read measures nothing: every review metric is null, so a gate on them fails."""
    unreadable = None
    try:
        answer = _answer(run_dir)
    except DokimiError as exc:
        answer, unreadable = "", f"the answer cannot be read: {exc.message}"
    verdict = review_verdict(answer, task.decoys, clean_diff=task.clean_diff_of is not None)
    findings = [
        ReviewFindingDoc(
            path=f.path, lines=[f.first, f.last], blocking=f.blocking, text=f.text[:MAX_FINDING_TEXT]
        )
        for f in verdict.findings[:MAX_FINDINGS_KEPT]
    ]
    document = ReviewCheckDoc(
        task=task.id,
        answered=verdict.answered or unreadable is not None,
        clean_diff=verdict.clean_diff,
        decoys=verdict.decoys,
        flagged=verdict.flagged,
        findings=findings,
        findings_total=len(verdict.findings),
        reasons=[unreadable] if unreadable else verdict.reasons(),
        metrics=dict.fromkeys(REVIEW_METRICS) if unreadable else dict(verdict.metrics),
    )
    write_document(RunDir(run_dir).review_json, document)
    return document


def read_review(run_dir: Path) -> ReviewCheckDoc | None:
    """review.json of a finished run directory; None when absent or unreadable."""
    return framework_document(RunDir(run_dir).review_json, ReviewCheckDoc)


@dataclass(frozen=True)
class _StartedReview:
    run_dir: Path
    task: Task
    cost_usd: float | None = None
    judges: tuple[str, ...] = ()

    def finish(self, grade: RepoGrade | None) -> ReviewCheckDoc:
        return check_review(self.run_dir, self.task)


class Review:
    """The framework check of a review task: its answer read after grade (review.json). Nothing runs before
    grade, and no container at all."""

    name = "review"

    def start(
        self, environment: GradeEnvironment, run_dir: Path, task: Task, facts: CellFacts
    ) -> _StartedReview | None:
        return _StartedReview(run_dir, task) if review_checked(task) else None

    def read(self, run_dir: Path) -> ReviewCheckDoc | None:
        return read_review(run_dir)


REVIEW = Review()
"""The review checks as a framework check (:mod:`dokimi.grading.checks`)."""
