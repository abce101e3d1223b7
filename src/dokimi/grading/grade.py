"""Grading one finished run directory, after the agent's container exited: the steps in the spec's order.

1. the workspace diff, kept for every cell (``workspace.diff``: what a reader opens first); for a task with a
   rubric also the scope check, the judge and the agent's test ids (``tests.list``), all BEFORE grade runs (a
   grader restores hidden tests, which would replace the agent's test edits in the diff and bring back a test
   it deleted);
2. for a task whose gate names ``own_tests_fail_on_base``: the agent's own tests on its tree and on the base,
   each in a container of its own, also before grade (own_tests.json, :mod:`dokimi.grading.own_tests`);
3. the grade container (:func:`dokimi.grading.entrypoints.grade_run`);
4. for a task with a rubric: test integrity and the outcome, ``mergeable`` and ``merge_score`` (merge.json);
5. for a task with ``perf``: the perf check against the oracle variant (perf/check.json);
6. for a review task: the review checks of its answer (review.json, :mod:`dokimi.grading.review`);
7. the gate, once, over the documents these steps wrote (:func:`dokimi.grading.verdict.gate_over`).

Steps 1, 2, 4, 5 and 6 are the framework checks (:mod:`dokimi.grading.checks`), :data:`FRAMEWORK_CHECKS` in
the order they run; :func:`verdict_from_files` reads what every step left in a finished run directory.

The function takes the grade environment, the run directory and the task; what the agent's side knows that
grading needs (the ignored files before the run, how to prepare a workspace like the cell's, the container
names) comes in a :class:`CellFacts`.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from dokimi import safefs
from dokimi.errors import UsageError
from dokimi.grading.checks import CheckDocument, FrameworkCheck, framework_document
from dokimi.grading.entrypoints import (
    GradeOutcome,
    grade_run,
    hand_back_workspace,
    read_grade,
    reduce_git_dir,
)
from dokimi.grading.environment import GradeEnvironment
from dokimi.grading.evidence import EvidenceChanged
from dokimi.grading.gate import GateVerdict, MetricValue, grader_failure
from dokimi.grading.merge import MERGEABILITY
from dokimi.grading.own_tests import OWN_TESTS
from dokimi.grading.perf import PERF, PrepareWorkspace
from dokimi.grading.review import REVIEW
from dokimi.grading.validation import VALIDATION
from dokimi.grading.verdict import FileVerdict, gate_over
from dokimi.rundir import RunDir
from dokimi.sandbox.specs import workspace_cap_bytes
from dokimi.schemas.grading import GradeRun

if TYPE_CHECKING:
    from dokimi.schemas.grade import RepoGrade
    from dokimi.schemas.rubric import RepoRubric
    from dokimi.schemas.task import Task

__all__ = [
    "FRAMEWORK_CHECKS",
    "CellFacts",
    "GradedCell",
    "grade_cell",
    "read_grade_run",
    "verdict_from_files",
]

FRAMEWORK_CHECKS: tuple[FrameworkCheck, ...] = (MERGEABILITY, OWN_TESTS, PERF, REVIEW, VALIDATION)
"""The framework's own checks of a cell, in the order they run (:mod:`dokimi.grading.checks`)."""


@dataclass(frozen=True)
class CellFacts:
    """What the agent's side of a cell hands to grading."""

    start_sha: str
    base_date: str | None
    rubric: RepoRubric | None
    ignored_before: frozenset[str]
    """The ignored files of the prepared workspace before the agent ran (mergeability)."""
    prepare: PrepareWorkspace
    """Prepares a workspace exactly as the cell's (the perf check's oracle variant)."""
    container: Callable[[str], str]
    """The container name of a role (``grade``, ``perf``, ``perf-oracle``)."""
    seed: int = 0
    """The perf check's seed (the cell's repetition)."""


@dataclass(frozen=True)
class GradedCell:
    """The verdict of one run and every metric measured (grade.json's and the framework's)."""

    verdict: GateVerdict
    metrics: dict[str, MetricValue]
    judge_cost_usd: float | None = None
    """What the framework checks paid a model for this run: the rubric judges (None when none ran or they
    answered from the cache)."""
    judges: tuple[str, ...] = ()
    """The model ids of the judges that judged the run's diff, the primary first."""
    grade: GradeOutcome | None = None
    """How the grade container ended and the grade.json it wrote (None when grading never ran)."""


def check_workspace_size(environment: GradeEnvironment, run_dir: Path) -> None:
    """A workspace over ``image.limits.workspace_mb`` after the agent is not graded, diffed or copied: a
    host-side failure of the cell (a grader failure), with the size."""
    cap = workspace_cap_bytes(environment.containers.image_config)
    size = safefs.tree_size(RunDir(run_dir).workspace, trusted=run_dir, stop_above=cap)
    if size > cap:
        raise UsageError(
            f"the workspace grew past image.limits.workspace_mb ({cap // (1024 * 1024)} MiB); "
            "dokimi does not grade, diff or copy it"
        )


def grade_cell(environment: GradeEnvironment, run_dir: Path, task: Task, facts: CellFacts) -> GradedCell:
    """Grade the run directory (see the module docstring). A container that changed dokimi's evidence makes
    the run a grader failure with that reason (:mod:`dokimi.grading.evidence`). Raises on a host-side
    failure; the caller turns it into a grader-failure result."""
    try:
        return _grade_steps(environment, run_dir, task, facts)
    except EvidenceChanged as exc:
        return GradedCell(grader_failure(task, exc.message), {})
    finally:  # grade's containers are gone: the workspace goes back to the user, its .git dokimi's again
        hand_back_workspace(run_dir)


def _grade_steps(environment: GradeEnvironment, run_dir: Path, task: Task, facts: CellFacts) -> GradedCell:
    check_workspace_size(environment, run_dir)
    reduce_git_dir(run_dir)  # before dokimi's own diff reads .git on the host, and before grade
    started = [s for c in FRAMEWORK_CHECKS if (s := c.start(environment, run_dir, task, facts)) is not None]
    outcome = grade_run(environment, run_dir, task, name=facts.container("grade"))
    documents: list[CheckDocument] = []
    if not outcome.grader_failure:
        documents = [d for s in started if (d := s.finish(outcome.grade)) is not None]
    found = gate_over(task, outcome.grade, outcome.verdict.grader_error, documents)
    costs = [s.cost_usd for s in started if s.cost_usd is not None]
    judges = tuple(model for s in started for model in s.judges)
    return GradedCell(found.verdict, found.metrics, sum(costs) if costs else None, judges, outcome)


def read_grade_run(run_dir: Path) -> GradeRun | None:
    """grade_run.json (how the grade container ended) of a finished run directory; None when unreadable."""
    return framework_document(RunDir(run_dir).grade_run_json, GradeRun)


def verdict_from_files(run_dir: Path, task: Task) -> FileVerdict:
    """:func:`gate_over` the files grading left in ``run_dir``: grade_run.json, then grade.json (untrusted)
    and every framework check's document."""
    ran = read_grade_run(run_dir)
    grade: RepoGrade | None = None
    error = ran.failure if ran is not None else None
    if error is None:
        grade, error = read_grade(RunDir(run_dir).grade_json)
    documents = [d for check in FRAMEWORK_CHECKS if (d := check.read(run_dir)) is not None]
    return gate_over(task, grade, error, documents)
