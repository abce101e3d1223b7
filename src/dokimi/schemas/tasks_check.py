"""repo_tasks_check.v1: the result of ``repo tasks check`` (printed by --json, written to
<out>/tasks-check.json; dokimi.runner.taskcheck builds it)."""

from __future__ import annotations

from typing import Literal

from pydantic import Field

from dokimi.schemas._base import Document
from dokimi.schemas.grade import MetricValue

Status = Literal["ok", "broken", "unsupported"]


class CheckItem(Document):
    """One rule of the self-check for one task."""

    name: str
    """``workspace``, ``isolation``, ``null fails the gate``, ``oracle passes the gate``, ..."""
    ok: bool
    """Whether the rule holds."""
    detail: str | None = None
    """Why it failed (or what was measured)."""


class PhaseReport(Document):
    """What grading the null or the oracle workspace gave."""

    gated: bool
    """The task has a gate for this run (false for a score-only result)."""
    passed: bool | None
    """The gate verdict; null for score-only."""
    score: float | None
    """score.metric's value for a task with score."""
    gate_results: dict[str, bool | None]
    """Each gate entry's metric: true, false, or null (not measured)."""
    metrics: dict[str, MetricValue] = Field(default_factory=dict)
    """grade.json's metrics and the framework's (mergeable, merge_score, perf_*)."""
    grader_failure: bool
    """The grader failed (a bug in the grader on the null or oracle workspace)."""
    grader_error: str | None = None
    """Why, when it did."""
    grade_stderr: str | None = None
    """The last lines of grade's stderr (kept for a grader failure)."""
    failing_tests: dict[str, str] = Field(default_factory=dict)
    """Test id -> outcome of every test a built-in grader lists as not passing (a FAIL_TO_PASS test not
    passing, a PASS_TO_PASS test broken); empty for a repository grader."""
    duration_s: float
    """Seconds grading took."""


class ArmCheck(Document):
    """The null and oracle workspaces of one task under one guidance arm."""

    arm: str
    """The arm (guidance:raw, the baseline, first)."""
    null: PhaseReport | None = None
    """What grading the untouched workspace gave under this arm."""
    oracle: PhaseReport | None = None
    """What grading the oracle's workspace gave under this arm."""
    same_workspace_as: str | None = None
    """Another arm whose prepared workspace was the same commit (no guidance file differs at this base): its
    grade is this arm's, graded once."""


class GraderIsolation(Document):
    """What the grader isolation probe found: can the code under test reach the reference when the grader
    runs it? (A probe workspace whose Python modules, when imported by the grader's tests, try to read every
    file under /eval/content and /eval/source and to write dokimi's files.)"""

    measured: bool
    """The probe's code ran in a process of the grader's and reported (false: no Python module in the
    workspace, a grader that imports none, or one that isolates its tests without dokimi's helper)."""
    reference_exposed: bool | None
    """The code under test could read or list a file under /eval/content (every task's oracle patch and
    hidden tests) or /eval/source (the upstream history); null when not measured. A warning, an error under
    --strict."""
    modules: int
    """Python modules of the workspace the probe was appended to."""
    readable: dict[str, int] = Field(default_factory=dict)
    """/eval/content, /eval/source -> files the code under test could read there."""
    listable: list[str] = Field(default_factory=list)
    """Of those two, the ones it could list."""
    examples: list[str] = Field(default_factory=list)
    """Some of the files it read."""
    writable: list[str] = Field(default_factory=list)
    """dokimi's files in the run directory it could open for writing (dokimi mounts them read-only)."""
    planted: list[str] = Field(default_factory=list)
    """Directories it could make a file in: /eval/run, the real workspace /eval/run/workspace."""
    error: str | None = None
    """Why the probe could not run to its end."""


class TaskReport(Document):
    """The verdict on one task."""

    task: str
    """The task id."""
    status: Status
    """``ok``: ready for paid runs; ``broken``: fix it first; ``unsupported``: needs a missing feature."""
    problems: list[str] = Field(default_factory=list)
    """One line per failed check, for people."""
    warnings: list[str] = Field(default_factory=list)
    """What does not stop the task, for people: a task.json key that spells like a framework key (a key the
    framework does not read belongs to the repository's grader), a grader that exposes the reference to the
    code under test (an error under --strict)."""
    grader_isolation: GraderIsolation | None = None
    """What the grader isolation probe found (null for a task that could not run)."""
    checks: list[CheckItem] = Field(default_factory=list)
    """Every rule checked, in order."""
    null: PhaseReport | None = None
    """What grading the untouched workspace gave."""
    oracle: PhaseReport | None = None
    """What grading the oracle's workspace gave."""
    arms: list[ArmCheck] = Field(default_factory=list)
    """The same, under every guidance arm checked (guidance:raw first; ``null`` and ``oracle`` above are its).
    A task whose tests say something else under another arm is broken: that arm's agent would see another
    suite."""


class TasksCheck(Document):
    """repo_tasks_check.v1: the result of ``repo tasks check``."""

    schema_: Literal["repo_tasks_check.v1"] = Field(default="repo_tasks_check.v1", alias="schema")
    """The document type."""
    source: str
    """The source as given on the command line."""
    manifest_id: str
    """The manifest's id."""
    tree: str | None
    """The eval tree's commit; null for a working tree."""
    image: str
    """The image every container ran (built from the eval tree, or --image)."""
    image_pin: Literal["tree", "digest", "image"]
    """What the image is pinned by: the eval tree, a context digest, or a given image."""
    warm: bool
    """A --warm run (with network and writable caches, to fill the caches)."""
    network: str
    """The docker network of every container: image.network's (``none``, ``bridge``), or --warm's."""
    tasks: list[TaskReport]
    """One report per task checked."""
    ok: bool
    """True when every task checked is ``ok`` (the exit code is 1 otherwise)."""
