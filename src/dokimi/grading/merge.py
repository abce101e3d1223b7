"""Mergeability inside a cell, for a task with ``tasks/<id>/rubric.json``.

The order is the spec's:

1. before the agent runs, the ignored files of the prepared workspace (:func:`before_agent`);
2. after the agent, BEFORE grade runs (a grader restores hidden tests, which would replace the agent's test
   edits in the diff): the workspace diff, stored as ``workspace.diff`` and ``workspace_diff.json``, the scope
   check, and the judge when a judge model is configured (:func:`after_agent`);
   then, when the manifest has ``tests.list`` and it listed the base, the agent's test ids
   (:func:`list_agent_tests`, ``tests_list.json``);
3. after grade: test integrity and the outcome, ``mergeable`` and ``merge_score``, added to the run's metrics
   so a gate can name them (:func:`merge_metrics`). Integrity compares grade.json's ``tests_skipped`` with the
   oracle run's and the agent's test ids with the base's, both from the task's reference in the grade
   environment (:mod:`dokimi.grading.reference`). The reasons go to ``merge.json``.

Without a judge model the judge is not run: a run that fails a deterministic check is not mergeable, any other
is ``mergeable: null`` (not measured), never true.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from dokimi.checks.merge import (
    IntegrityVerdict,
    JudgeVerdict,
    ScopeVerdict,
    WorkspaceDiff,
    check_scope,
    check_test_integrity,
    explain_merge,
    grade_metrics_of,
    list_ignored,
    render_judge_input,
    run_judge,
    take_workspace_diff,
)
from dokimi.checks.merge.diff import ChangedFile
from dokimi.errors import DocumentError, DokimiError
from dokimi.grading.checks import framework_document
from dokimi.grading.environment import GradeEnvironment, JudgeSettings
from dokimi.grading.testlist import list_command, run_tests_list
from dokimi.repo.rules import rules_for_judge
from dokimi.rundir import (
    RUBRIC_JSON,
    RunDir,
)
from dokimi.schemas._base import read_document, write_document, write_text_atomic
from dokimi.schemas.grade import RepoGrade
from dokimi.schemas.grading import MergeDoc, TestsListDoc, WorkspaceDiffDoc
from dokimi.schemas.rubric import RepoRubric
from dokimi.schemas.task import Task

if TYPE_CHECKING:
    from dokimi.grading.grade import CellFacts

__all__ = [
    "MERGEABILITY",
    "JudgeSettings",
    "MergeChecks",
    "after_agent",
    "before_agent",
    "checks_of_diff",
    "keep_workspace_diff",
    "list_agent_tests",
    "load_rubric",
    "merge_metrics",
    "read_merge",
    "stored_diff",
    "stored_tests_list",
]

MetricValue = bool | int | float | None


@dataclass
class MergeChecks:
    """What a cell measured of its diff before grade ran."""

    rubric: RepoRubric
    diff: WorkspaceDiff
    scope: ScopeVerdict
    verdict: JudgeVerdict | None
    second: JudgeVerdict | None = None
    """The second judge's verdict (agreement only)."""
    agent_tests: TestsListDoc | None = None
    """What ``tests.list`` printed in the agent's workspace before grade; None when it was not run."""


def load_rubric(task_dir: Path) -> RepoRubric | None:
    """The task's rubric.json from the exported eval_dir, or None when the task has none."""
    path = task_dir / RUBRIC_JSON
    return read_document(path, RepoRubric) if path.is_file() else None


def before_agent(workspace: Path, start_sha: str) -> set[str]:
    """The ignored files that exist before the run, so the diff lists only those the run created. The
    workspace's own .git is not read (the agent's uid owns it): ``start_sha`` is known."""
    return list_ignored(workspace, start_sha)


def after_agent(
    environment: GradeEnvironment,
    run_dir: Path,
    task: Task,
    *,
    rubric: RepoRubric,
    start_sha: str,
    ignored_before: set[str],
    base_date: str | None,
) -> MergeChecks:
    """The diff (stored in the run directory), scope, and the judge's verdict, all before grade runs."""
    diff = keep_workspace_diff(run_dir, start_sha, ignored_before=ignored_before)
    return checks_of_diff(environment, task, rubric=rubric, diff=diff, base_date=base_date)


def keep_workspace_diff(run_dir: Path, start_sha: str, *, ignored_before: set[str] | None) -> WorkspaceDiff:
    """The agent's change from ``start_sha``, taken before grade runs and kept in the run directory as
    ``workspace.diff`` and ``workspace_diff.json``: what scope, test integrity and the judge read, and the
    first thing a reader of the cell opens. ``ignored_before`` None: the ignored files the run created are not
    measured (only mergeability needs them)."""
    rd = RunDir(run_dir)
    diff = take_workspace_diff(rd.workspace, start_sha, ignored_before=ignored_before)
    write_text_atomic(rd.workspace_diff, diff.text)
    write_document(rd.workspace_diff_json, WorkspaceDiffDoc.model_validate(diff.to_json()))
    return diff


def checks_of_diff(
    environment: GradeEnvironment,
    task: Task,
    *,
    rubric: RepoRubric,
    diff: WorkspaceDiff,
    base_date: str | None,
) -> MergeChecks:
    """Scope and the judge's verdict on one diff (the judge when the environment has one). Team rules reach
    the judge only when the task's base is on or after their cut date."""
    scope = check_scope(diff, rubric.scope)
    verdict = None
    judge = environment.judge
    if judge is not None:
        # The config-edit blocker depends on the diff only, so the judge can run before grade.
        edits = check_test_integrity(diff, environment.tests)
        judge_input = render_judge_input(
            task.prompt,
            rubric,
            diff,
            rules_for_judge(environment.review_rules, base_date),
            extra_blockers=edits.judge_blockers,
        )
        verdict = run_judge(judge_input, model=judge.model, options=judge.options)
        second = environment.second_judge
        if second is not None:
            checks = MergeChecks(rubric, diff, scope, verdict)
            checks.second = run_judge(judge_input, model=second.model, options=second.options)
            return checks
    return MergeChecks(rubric=rubric, diff=diff, scope=scope, verdict=verdict)


def stored_diff(run_dir: Path) -> WorkspaceDiff | None:
    """The workspace diff a cell stored before its grade (workspace_diff.json and workspace.diff), or None
    when it has none or they cannot be read."""
    rd = RunDir(run_dir)
    record, text = rd.workspace_diff_json, rd.workspace_diff
    if record.is_symlink() or text.is_symlink() or not record.is_file() or not text.is_file():
        return None
    try:
        doc = read_document(record, WorkspaceDiffDoc)
        diff_text = text.read_text(encoding="utf-8", errors="surrogateescape")
    except (DocumentError, OSError):
        return None
    files = tuple(ChangedFile(f.status, f.old_path, f.new_path, f.added, f.deleted) for f in doc.files)
    ignored = doc.ignored_created
    return WorkspaceDiff(
        doc.start_sha, files, diff_text, tuple(ignored or ()), ignored_measured=ignored is not None
    )


def list_agent_tests(
    environment: GradeEnvironment, run_dir: Path, task: Task, checks: MergeChecks, *, name: str
) -> None:
    """The agent's test ids (``tests.list`` in its workspace, before grade restores the hidden tests), into
    ``checks``; run only when the manifest has the command and it listed the task's base."""
    reference = environment.references.get(task.id)
    if list_command(environment) is None or reference is None or reference.base_tests is None:
        return
    checks.agent_tests = run_tests_list(environment, run_dir, task, name=name)


def stored_tests_list(run_dir: Path) -> TestsListDoc | None:
    """The agent's test list a cell stored before its grade (tests_list.json), or None."""
    path = RunDir(run_dir).tests_list_json
    if path.is_symlink() or not path.is_file():
        return None
    try:
        return read_document(path, TestsListDoc)
    except DocumentError:
        return None


def merge_metrics(
    environment: GradeEnvironment, run_dir: Path, task: Task, *, checks: MergeChecks, grade: RepoGrade | None
) -> MergeDoc:
    """merge.json: ``mergeable`` and ``merge_score`` for the run's metrics, with the reasons."""
    grade_metrics = grade_metrics_of(grade) if grade is not None else None
    integrity = integrity_of_run(environment, task, checks, grade)
    outcome = explain_merge(grade_metrics, task.gate, checks.scope, integrity, checks.verdict)
    mergeable, score, reasons = outcome.mergeable, outcome.merge_score, list(outcome.reasons)
    if mergeable is None and checks.verdict is None and environment.mergeable_without_judge:
        mergeable = True
        reasons = ["mergeable on the deterministic checks; the judge's part is repo rubric check's"]
    document = MergeDoc(
        mergeable=mergeable,
        merge_score=score,
        reasons=reasons,
        scope=checks.scope.to_json(),
        integrity=integrity.to_json(),
        judge=checks.verdict.to_json() if checks.verdict is not None else None,
        second_judge=_second_judge(checks, grade_metrics, task, integrity),
    )
    write_document(RunDir(run_dir).merge_json, document)
    return document


def integrity_of_run(
    environment: GradeEnvironment, task: Task, checks: MergeChecks, grade: RepoGrade | None
) -> IntegrityVerdict:
    """Test integrity of one run: its diff, grade.json's ``tests_skipped`` against the oracle run's, and the
    agent's test ids against the base's (both from the task's reference, when the batch measured one)."""
    skipped = grade.metrics.get("tests_skipped") if grade is not None else None
    if isinstance(skipped, bool) or not isinstance(skipped, (int, float)):
        skipped = None
    reference = environment.references.get(task.id)
    listed = checks.agent_tests
    return check_test_integrity(
        checks.diff,
        environment.tests,
        tests_skipped=skipped,
        oracle_tests_skipped=reference.oracle_tests_skipped if reference is not None else None,
        base_tests=reference.base_tests if reference is not None else None,
        agent_tests=listed.ids if listed is not None else None,
        agent_tests_failure=listed.failure if listed is not None else None,
    )


def _second_judge(
    checks: MergeChecks,
    grade_metrics: dict[str, MetricValue] | None,
    task: Task,
    integrity: IntegrityVerdict,
) -> dict[str, Any] | None:
    """The second judge's verdicts and the mergeable they would give (for the judges' agreement only)."""
    if checks.second is None:
        return None
    outcome = explain_merge(grade_metrics, task.gate, checks.scope, integrity, checks.second)
    return {**checks.second.to_json(), "mergeable": outcome.mergeable}


def keep_diff_to_show(run_dir: Path, start_sha: str) -> None:
    """The agent's diff of a task without a rubric, kept for the reader only: no verdict reads it, so a diff
    that cannot be taken (a workspace git cannot read) is not kept, and the grade goes on."""
    try:
        keep_workspace_diff(run_dir, start_sha, ignored_before=None)
    except (DokimiError, OSError):
        return


def read_merge(run_dir: Path) -> MergeDoc | None:
    """merge.json of a finished run directory; None when absent or unreadable."""
    return framework_document(RunDir(run_dir).merge_json, MergeDoc)


@dataclass
class _StartedMergeability:
    environment: GradeEnvironment
    run_dir: Path
    task: Task
    checks: MergeChecks

    @property
    def cost_usd(self) -> float | None:
        """The judges' calls for this run (the second judge's too: it is paid like the first); None when
        neither called its model (not run, or answered from the cache)."""
        spent = [v.cost_usd for v in self._verdicts() if not v.cached]
        known = [cost for cost in spent if cost is not None]
        return sum(known) if known else None

    @property
    def judges(self) -> tuple[str, ...]:
        return tuple(v.model for v in self._verdicts())

    def _verdicts(self) -> list[JudgeVerdict]:
        return [v for v in (self.checks.verdict, self.checks.second) if v is not None]

    def finish(self, grade: RepoGrade | None) -> MergeDoc:
        return merge_metrics(self.environment, self.run_dir, self.task, checks=self.checks, grade=grade)


class Mergeability:
    """The framework check of a task with a rubric: the diff, scope, the judge and the agent's test ids
    before grade; test integrity and the outcome after it (merge.json). For any other task only the diff,
    kept for the reader."""

    name = "merge"

    def start(
        self, environment: GradeEnvironment, run_dir: Path, task: Task, facts: CellFacts
    ) -> _StartedMergeability | None:
        if facts.rubric is None:
            keep_diff_to_show(run_dir, facts.start_sha)
            return None
        checks = after_agent(
            environment,
            run_dir,
            task,
            rubric=facts.rubric,
            start_sha=facts.start_sha,
            ignored_before=set(facts.ignored_before),
            base_date=facts.base_date,
        )
        list_agent_tests(environment, run_dir, task, checks, name=facts.container("tests-list"))
        return _StartedMergeability(environment, run_dir, task, checks)

    def read(self, run_dir: Path) -> MergeDoc | None:
        return read_merge(run_dir)


MERGEABILITY = Mergeability()
"""Mergeability as a framework check (:mod:`dokimi.grading.checks`)."""
