"""The documents grading writes into a run directory besides grade.json: how the grade container ended
(grade_run.json), the workspace diff's record (workspace_diff.json), the mergeability outcome (merge.json) and
the perf check (perf/check.json), the agent's test list (tests_list.json), the task's validation commands
(validation/commands.json); and the batch's reference of each task with a rubric (its oracle's grade and its
base's test list). The gate over files reads them
(:mod:`dokimi.grading.verdict`)."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import Field

from dokimi.schemas._base import Document

MetricValue = bool | int | float | None


class GradeRun(Document):
    """repo_grade_run.v1: how the grade container ended, written by the framework after it exited (the grader
    cannot write it: it is replaced after the container is gone)."""

    schema_: Literal["repo_grade_run.v1"] = Field(default="repo_grade_run.v1", alias="schema")
    """The document type."""
    returncode: int | None
    """grade's exit code; null when it was killed at its timeout."""
    timed_out: bool
    """grade ran past its timeout and was stopped."""
    failure: str | None
    """Why the run of grade failed (a timeout, a non-zero exit with the end of its stderr); null when it
    exited 0. A failure makes the run a grader failure whatever grade.json says."""


class ChangedFileDoc(Document):
    """One changed path of the workspace diff (renames show as a deletion and an addition)."""

    status: Literal["A", "M", "D", "T"]
    """git's status letter: added, modified, deleted, type changed."""
    old_path: str | None
    """The path before the change; null for an addition."""
    new_path: str | None
    """The path after the change; null for a deletion."""
    added: int
    """Lines added (0 for a binary file)."""
    deleted: int
    """Lines deleted (0 for a binary file)."""


class WorkspaceDiffDoc(Document):
    """repo_workspace_diff.v1: the agent's change from start_sha, taken before grade ran (the text is
    workspace.diff beside it)."""

    schema_: Literal["repo_workspace_diff.v1"] = Field(default="repo_workspace_diff.v1", alias="schema")
    """The document type."""
    start_sha: str
    """The workspace commit the agent started from."""
    files: list[ChangedFileDoc]
    """Every changed path, the old and the new path of each change."""
    changed_lines: int
    """Lines added plus lines deleted."""
    ignored_created: list[str] | None
    """Ignored files the run created (null when they were not measured)."""


class MergeDoc(Document):
    """repo_merge.v1: the mergeability of one run and why (mergeability)."""

    schema_: Literal["repo_merge.v1"] = Field(default="repo_merge.v1", alias="schema")
    """The document type."""
    mergeable: bool | None
    """null: not measured (no judge, or a judge failure), never false for that reason."""
    merge_score: float | None
    """The weighted share of non-blockers that pass; 0 when not mergeable."""
    reasons: list[str]
    """Why the run is not mergeable, or why it was not measured."""
    scope: dict[str, Any] | None
    """The scope check: passed and its problems."""
    integrity: dict[str, Any] | None
    """The test-integrity check: passed, its problems, and the blockers it gives the judge."""
    judge: dict[str, Any] | None
    """The primary judge's verdict per rubric item; null when the judge did not run."""
    second_judge: dict[str, Any] | None = None
    """The second judge's verdict (agreement only, never the score); null when there is none."""

    @property
    def metrics(self) -> dict[str, MetricValue]:
        """``mergeable`` and ``merge_score`` for the run's metrics."""
        return {"mergeable": self.mergeable, "merge_score": self.merge_score}


class ReviewFindingDoc(Document):
    """One finding of a review answer, as dokimi read it."""

    path: str
    """The file the finding cites."""
    lines: list[int]
    """``[first, last]`` line the finding cites."""
    blocking: bool
    """False when its text starts with a non-blocking marker (``nit:``, ``non-blocking``, ...)."""
    text: str
    """What the reviewer wrote after the location (at most 500 characters)."""


class ReviewCheckDoc(Document):
    """repo_review_check.v1: the review checks of one run of a review task (review.json): the findings of its
    answer, the decoys they flag, and whether a clean diff drew a blocking finding."""

    schema_: Literal["repo_review_check.v1"] = Field(default="repo_review_check.v1", alias="schema")
    """The document type."""
    task: str
    """The task id."""
    answered: bool
    """Whether the agent's final answer holds any text."""
    clean_diff: bool
    """Whether the diff under review is a clean one (the task's ``clean_diff_of``)."""
    decoys: list[str]
    """The task's decoy ids."""
    flagged: list[str]
    """The decoys some finding flags."""
    findings: list[ReviewFindingDoc]
    """The findings of the answer, in order (at most 200)."""
    findings_total: int = Field(ge=0)
    """How many findings the answer holds (also those past the first 200)."""
    reasons: list[str]
    """Why the review checks fail, for people; empty when they hold."""
    metrics: dict[str, MetricValue]
    """``decoys_flagged``, ``decoys_not_flagged``, ``blocking_findings`` and ``no_blocking_finding`` for the
    run's metrics (null: not measured)."""


class OwnTestsRunDoc(Document):
    """One run of the agent's own tests, in a container of its own."""

    tree: Literal["agent", "base"]
    """``agent``: the agent's workspace; ``base``: the workspace as the agent got it, with the agent's test
    files copied in."""
    argv: list[str]
    """The command run (``tests.run`` with ``{tests}`` replaced by the test files)."""
    returncode: int | None
    """Its exit status; null when it ran past the timeout."""
    passed: bool
    """Exit status 0 within the timeout."""
    output: str
    """The end of what it printed (stdout and stderr)."""


class OwnTestsDoc(Document):
    """repo_own_tests.v1: whether the tests the agent added test its change (own_tests.json): they pass on the
    agent's tree and fail on the base."""

    schema_: Literal["repo_own_tests.v1"] = Field(default="repo_own_tests.v1", alias="schema")
    """The document type."""
    task: str
    """The task id."""
    own_tests_fail_on_base: bool | None
    """True when the agent's test files pass on its tree and fail on the base; false when they do not, or
    when the change adds no test; null when not measured (see ``reason``)."""
    test_files: list[str]
    """The agent's test files: added or changed files matching the manifest's ``tests.globs``."""
    runs: list[OwnTestsRunDoc]
    """The runs, the agent's tree first."""
    reason: str
    """Why the metric has its value, for people."""

    @property
    def metrics(self) -> dict[str, MetricValue]:
        """``own_tests_fail_on_base`` for the run's metrics."""
        return {"own_tests_fail_on_base": self.own_tests_fail_on_base}


class TestsListDoc(Document):
    """repo_tests_list.v1: the test ids the manifest's ``tests.list`` command printed in one workspace (the
    agent's, after its run and before grade: tests_list.json of the run directory)."""

    schema_: Literal["repo_tests_list.v1"] = Field(default="repo_tests_list.v1", alias="schema")
    """The document type."""
    command: str
    """``tests.list`` as the manifest gives it."""
    ids: list[str] | None
    """The test ids, one per printed line (sorted, without duplicates or blank lines); null when the
    command failed."""
    failure: str | None
    """Why there is no list: a non-zero exit (with the end of its stderr), a timeout, too much output."""


class TaskReferenceDoc(Document):
    """repo_task_reference.v1: what the runs of one task of a batch are compared with, measured once per
    batch before its cells (``<batch>/_eval/reference/<task>/reference.json``): the oracle run's
    ``tests_skipped`` and the test ids ``tests.list`` prints on the base workspace."""

    schema_: Literal["repo_task_reference.v1"] = Field(default="repo_task_reference.v1", alias="schema")
    """The document type."""
    task: str
    """The task id."""
    oracle_tests_skipped: float | None
    """grade.json's ``tests_skipped`` on the oracle run; null when it was not measured."""
    oracle_note: str | None
    """Why ``oracle_tests_skipped`` is null (the oracle or its grade failed, or no such metric)."""
    base_tests: list[str] | None
    """The test ids ``tests.list`` printed on the base workspace; null when it was not measured."""
    base_tests_note: str | None
    """Why ``base_tests`` is null (no ``tests.list`` in the manifest, or the command failed)."""


class PerfCheckDoc(Document):
    """repo_perf_check.v1: one cell's performance check (agent-modes), written to perf/check.json."""

    schema_: Literal["repo_perf_check.v1"] = Field(default="repo_perf_check.v1", alias="schema")
    """The document type."""
    task: str
    """The task id."""
    seed: int
    """The seed of the plan (the cell's repetition)."""
    plan: list[list[str]]
    """The order of the slots of each round."""
    tolerance: float
    """The largest candidate/oracle ratio that passes."""
    metric: str
    """The measured metric (repo_perf.v1 metric)."""
    noise_floor: float
    """The narrowest noise band (a share)."""
    invocations: int
    """How many times the perf entry point ran."""
    metrics: dict[str, MetricValue]
    """perf_ratio, perf_pass and perf_scaling_ok for the run's metrics."""
    passed: bool | None
    """perf_pass: null when not measured (the oracle's own run failed), never false for that reason."""
    ratio: float | None
    """The worst (largest) median ratio over the sizes."""
    complexity_regression: bool | None
    """The candidate scales worse than the oracle across sizes; null with fewer than two sizes."""
    reason: str
    """The verdict in words."""
    error: str | None
    """Why the check could not be completed (a run failed), when it could not."""
    sizes: list[dict[str, Any]]
    """One result per size: its rounds, the measured noise band and the verdict."""


class ValidationCommandRun(Document):
    """One validation command of a task, as it ran after the agent."""

    kind: Literal["public", "hidden"]
    """``public`` (task.json ``validation_commands``: on the agent's tree as it left it) or ``hidden``
    (``hidden_validation_commands``: the locked evaluator checks, with the base's test files and the hidden
    tests put back)."""
    command: str
    """The command as task.json gives it."""
    exit_code: int | None
    """Its exit code; null when it did not run or was stopped at its timeout."""
    timed_out: bool = False
    """It ran past the grade timeout and was stopped."""
    not_run: str | None = None
    """Why it did not run (its tree could not be made, the image lacks the program); null when it ran."""
    output: str = ""
    """What it printed (stdout and stderr together), the last 256 KiB of it."""
    truncated: bool = False
    """The output was longer and its beginning was cut."""

    @property
    def passed(self) -> bool:
        return self.exit_code == 0 and not self.timed_out and self.not_run is None


class ValidationCommandsDoc(Document):
    """repo_validation_commands.v1: a task's validation and hidden validation commands, run after the agent
    in containers of their own (validation/commands.json). Raters read the output (``repo rate export``); the
    gate does not: a task gates on what its grader reports."""

    schema_: Literal["repo_validation_commands.v1"] = Field(
        default="repo_validation_commands.v1", alias="schema"
    )
    """The document type."""
    commands: list[ValidationCommandRun]
    """Every command, public ones first, in task.json's order."""
    error: str | None = None
    """Why the trees the commands run on could not be made (a task whose hidden tests do not apply, a
    workspace whose .git the agent removed); each command then has ``not_run``."""

    @property
    def metrics(self) -> dict[str, MetricValue]:
        """None for the gate: validation output is for raters."""
        return {}

    def passed(self, kind: Literal["public", "hidden"]) -> bool | None:
        """Every command of ``kind`` ran and exited 0; None when the task has none."""
        runs = [c for c in self.commands if c.kind == kind]
        return all(c.passed for c in runs) if runs else None
