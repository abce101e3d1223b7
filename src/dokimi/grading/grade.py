"""Grading one finished run directory, after the agent's container exited: the steps in the spec's order.

1. the workspace diff, kept for every cell (``workspace.diff``: what a reader opens first); for a task with a
   rubric also the scope check, the judge and the agent's test ids (``tests.list``), all BEFORE grade runs (a
   grader restores hidden tests, which would replace the agent's test edits in the diff and bring back a test
   it deleted);
2. the grade container (:func:`dokimi.grading.entrypoints.grade_run`);
3. for a task with a rubric: test integrity and the outcome, ``mergeable`` and ``merge_score`` (merge.json);
4. for a task with ``perf``: the perf check against the oracle variant (perf/check.json);
5. the gate, once, over the files these steps wrote (:func:`dokimi.grading.verdict.verdict_from_files`).

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
from dokimi.errors import DokimiError, UsageError
from dokimi.grading import merge
from dokimi.grading.entrypoints import GradeOutcome, grade_run, reduce_git_dir
from dokimi.grading.environment import GradeEnvironment
from dokimi.grading.evidence import EvidenceChanged
from dokimi.grading.gate import GateVerdict, MetricValue, grader_failure
from dokimi.grading.perf import PrepareWorkspace, perf_metrics
from dokimi.grading.verdict import gate_over
from dokimi.rundir import WORKSPACE
from dokimi.sandbox.specs import workspace_cap_bytes

if TYPE_CHECKING:
    from dokimi.schemas.rubric import RepoRubric
    from dokimi.schemas.task import Task

__all__ = ["CellFacts", "GradedCell", "grade_cell"]


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
    """What the rubric judge cost for this run (None when it did not run or answered from its cache)."""
    grade: GradeOutcome | None = None
    """How the grade container ended and the grade.json it wrote (None when grading never ran)."""


def check_workspace_size(environment: GradeEnvironment, run_dir: Path) -> None:
    """A workspace over ``image.limits.workspace_mb`` after the agent is not graded, diffed or copied: a
    host-side failure of the cell (a grader failure), with the size."""
    cap = workspace_cap_bytes(environment.containers.image_config)
    size = safefs.tree_size(run_dir / WORKSPACE, trusted=run_dir, stop_above=cap)
    if size > cap:
        raise UsageError(
            f"the workspace grew past image.limits.workspace_mb ({cap // (1024 * 1024)} MiB); "
            "dokimi does not grade, diff or copy it"
        )


def keep_diff_to_show(run_dir: Path, start_sha: str) -> None:
    """The agent's diff of a task without a rubric, kept for the reader only: no verdict reads it, so a diff
    that cannot be taken (a workspace git cannot read) is not kept, and the grade goes on."""
    try:
        merge.keep_workspace_diff(run_dir, start_sha, ignored_before=None)
    except (DokimiError, OSError):
        return


def grade_cell(environment: GradeEnvironment, run_dir: Path, task: Task, facts: CellFacts) -> GradedCell:
    """Grade the run directory (see the module docstring). A container that changed dokimi's evidence makes
    the run a grader failure with that reason (:mod:`dokimi.grading.evidence`). Raises on a host-side
    failure; the caller turns it into a grader-failure result."""
    try:
        return _grade_steps(environment, run_dir, task, facts)
    except EvidenceChanged as exc:
        return GradedCell(grader_failure(task, exc.message), {})


def _grade_steps(environment: GradeEnvironment, run_dir: Path, task: Task, facts: CellFacts) -> GradedCell:
    check_workspace_size(environment, run_dir)
    reduce_git_dir(run_dir)  # before dokimi's own diff reads .git on the host, and before grade
    checks = None
    judge_cost: float | None = None
    if facts.rubric is not None:
        checks = merge.after_agent(
            environment,
            run_dir,
            task,
            rubric=facts.rubric,
            start_sha=facts.start_sha,
            ignored_before=set(facts.ignored_before),
            base_date=facts.base_date,
        )
        if checks.verdict is not None and not checks.verdict.cached:
            judge_cost = checks.verdict.cost_usd
        merge.list_agent_tests(environment, run_dir, task, checks, name=facts.container("tests-list"))
    else:
        keep_diff_to_show(run_dir, facts.start_sha)
    outcome = grade_run(environment, run_dir, task, name=facts.container("grade"))
    merged = perf = None
    if checks is not None and not outcome.grader_failure:
        merged = merge.merge_metrics(environment, run_dir, task, checks=checks, grade=outcome.grade)
    if not outcome.grader_failure:
        perf = perf_metrics(
            environment, run_dir, task, prepare=facts.prepare, container=facts.container, seed=facts.seed
        )
    found = gate_over(task, outcome.grade, outcome.verdict.grader_error, merged, perf)
    return GradedCell(found.verdict, found.metrics, judge_cost, outcome)
