"""grade.json (repo_grade.v1): what a repository's ``grade`` entry point writes to {run_dir}.

A grade.json is untrusted input: the reader validates it, and :func:`grade_problems` lists the reasons a
valid one is still a grader failure. A grader failure counts as a failure of the run on every gated metric.
"""

from __future__ import annotations

from typing import Annotated, Any, Literal, Protocol

from pydantic import Field, StrictBool, StrictInt

from dokimi.schemas._base import Document

FiniteFloat = Annotated[float, Field(strict=True, allow_inf_nan=False)]
MetricValue = StrictBool | StrictInt | FiniteFloat | None
"""A metric value: a number, a boolean, or null for "not measured" (never false)."""

OWN_TESTS_METRIC = "own_tests_fail_on_base"
"""Whether the tests the agent added pass on its tree and fail on the base (docs/agent-modes.md)."""
DECOYS_NOT_FLAGGED = "decoys_not_flagged"
NO_BLOCKING_FINDING = "no_blocking_finding"
REVIEW_METRICS = ("decoys_flagged", DECOYS_NOT_FLAGGED, "blocking_findings", NO_BLOCKING_FINDING)
"""What dokimi measures of a review task's answer: the decoys it flagged, and its blocking findings."""
FRAMEWORK_METRICS = (
    "mergeable",
    "merge_score",
    "perf_ratio",
    "perf_pass",
    "perf_scaling_ok",
    OWN_TESTS_METRIC,
    *REVIEW_METRICS,
)
"""Metrics the framework adds after grade returns; a grade.json may not contain them."""


class RepoGrade(Document):
    """grade.json: the verdict of the repository's grader for one run."""

    schema_: Literal["repo_grade.v1"] = Field(alias="schema")
    """Document type and version."""
    task: str = Field(min_length=1)
    """Id of the task graded; must equal the run's task."""
    grader: str = Field(min_length=1)
    """Name of the grader that ran (task.json's ``grader``)."""
    pass_: StrictBool | None = Field(alias="pass")
    """The verdict. Null means score-only (accepted only for a task with ``score``), or, with non-empty
    ``errors``, that the grader failed."""
    metrics: dict[str, MetricValue] = Field(default_factory=dict)
    """Named measurements: numbers, booleans or null (not measured). Only metrics are aggregated, gated and
    tested for significance."""
    details: dict[str, Any] = Field(default_factory=dict)
    """Free-form context (changed files, per-class recall, commands run): stored and shown, never
    aggregated."""
    errors: list[str] = Field(default_factory=list)
    """What went wrong in the grader; non-empty with ``pass: null`` means the grader failed."""
    threads: dict[str, StrictBool] = Field(default_factory=dict)
    """Review tasks: for each human review thread (task.json's ``threads``), whether the answer found it.
    Read by ``repo rules effect``; recall itself stays a metric."""


class ScoreLike(Protocol):
    """What :func:`grade_problems` reads of a task's ``score``."""

    @property
    def metric(self) -> str: ...


class TaskLike(Protocol):
    """What :func:`grade_problems` reads of a task (dokimi.schemas.task.Task satisfies it)."""

    @property
    def id(self) -> str: ...

    @property
    def score(self) -> ScoreLike | None: ...

    @property
    def gated_without_pass(self) -> bool: ...


def grader_reported_errors(grade: RepoGrade) -> str | None:
    """``pass: null`` with non-empty ``errors`` means the grader failed."""
    if grade.pass_ is None and grade.errors:
        return "the grader failed: " + "; ".join(grade.errors)
    return None


def null_pass_without_score(grade: RepoGrade, task: TaskLike) -> str | None:
    """``pass: null`` without errors is score-only, accepted only for a task whose task.json has ``score``, or
    a review task gated on dokimi's review checks alone (``Task.gated_without_pass``)."""
    if grade.pass_ is None and not grade.errors and task.score is None and not task.gated_without_pass:
        return "pass is null but the task has no score: only a score-only task may leave pass null"
    return None


def score_metric_missing(grade: RepoGrade, task: TaskLike) -> str | None:
    """A score-only grade must report the task's score metric as a number: it is the run's result."""
    if grade.pass_ is not None or grade.errors or task.score is None:
        return None
    value = grade.metrics.get(task.score.metric)
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return f"score-only grade has no numeric metric {task.score.metric!r} (the task's score.metric)"
    return None


def framework_metrics_claimed(grade: RepoGrade) -> str | None:
    """``mergeable``, ``merge_score`` and the other :data:`FRAMEWORK_METRICS` belong to the framework; a
    grade.json containing them failed."""
    claimed = [name for name in FRAMEWORK_METRICS if name in grade.metrics]
    if claimed:
        return f"metrics {', '.join(claimed)} belong to the framework; a grader may not report them"
    return None


def task_mismatch(grade: RepoGrade, task: TaskLike) -> str | None:
    """A grade for another task than the one run is a grader failure."""
    if grade.task != task.id:
        return f"grade.json is for task {grade.task!r}, the run is task {task.id!r}"
    return None


def grade_problems(grade: RepoGrade, task: TaskLike) -> list[str]:
    """Every reason a valid grade.json is nevertheless a grader failure; empty when it is usable."""
    found = [
        grader_reported_errors(grade),
        null_pass_without_score(grade, task),
        score_metric_missing(grade, task),
        framework_metrics_claimed(grade),
        task_mismatch(grade, task),
    ]
    return [problem for problem in found if problem is not None]
