"""repo_task_new.v1: what ``repo task new --json`` prints about the task it mined."""

from __future__ import annotations

from typing import Literal

from pydantic import Field

from dokimi.schemas._base import Document


class CollectionError(Document):
    """A test file pytest could not collect (import) in one of the two discovery runs."""

    phase: Literal["null", "oracle"]
    """``null``: at the base, before the fix; ``oracle``: with the fix applied."""
    file: str
    """The test file (its pytest node id)."""
    error: str
    """The first error line pytest printed for it (``ModuleNotFoundError: No module named 'x'``)."""


class TaskNew(Document):
    """repo_task_new.v1: a task mined from a fix, its tests classified and (with a built-in grade) checked."""

    schema_: Literal["repo_task_new.v1"] = Field(default="repo_task_new.v1", alias="schema")
    """Document type and version."""
    task: str
    """The task id (its directory name)."""
    directory: str
    """The task directory that was written."""
    fix: str
    """Full SHA of the fix commit (or of the pull request's merge commit)."""
    base: str
    """task.json's ``base``: the fix's parent (``<sha>^``)."""
    test_files: list[str]
    """Changed files that became the hidden tests (tests.patch)."""
    code_files: list[str]
    """Changed files that became the reference solution (oracle.patch)."""
    prompt: str
    """The draft prompt: the commit message minus what gives the fix away. Edit it in task.json."""
    fail_to_pass: list[str]
    """Tests that fail before the fix and pass after it: every one must pass for a run to pass."""
    pass_to_pass: list[str]
    """Tests that pass before and after: none may break."""
    failing_with_fix: list[str]
    """Tests the test patch touches that fail even with the fix; left out of both lists."""
    checked: bool
    """Whether tasks check ran on the task (needs a built-in grade and at least one FAIL_TO_PASS id)."""
    ok: bool | None
    """tasks check's verdict (null when it did not run)."""
    problems: list[str]
    """Why the task is not sound, one line each."""
    collection_errors: list[CollectionError] = Field(default_factory=list)
    """Test files pytest could not collect, per phase: reported apart from "no test fails before the fix",
    which they can cause."""
    evidence: str | None = None
    """Where the null and oracle run directories (grade.json, grade.stderr) are kept; null when the task came
    out sound (they are removed)."""
    removed: bool = False
    """Whether the task directory was removed again: no test fails before the fix and passes after it."""


SkipReason = Literal["no_test", "only_tests", "no_failing_test", "flaky", "not_sound", "mined", "error"]
"""Why a commit of a range made no task (``repo task new --from-log``)."""


class MinedCommit(Document):
    """One commit of the range and what became of it."""

    sha: str
    """Full SHA of the commit."""
    subject: str
    """The first line of its message."""
    task: str | None
    """The task made from it (its directory name); null when it was skipped."""
    skipped: SkipReason | None
    """Why it made no task: it changes no test (``no_test``), only tests (``only_tests``); no test fails
    before it and passes after it (``no_failing_test``); a test it touches changed outcome between two runs of
    the same workspace (``flaky``); tasks check found the task unsound (``not_sound``); a task of the tasks
    directory is mined from it already (``mined``); its grade recorded no outcome (``error``). Null for a
    task made."""
    detail: str
    """The skip's reason in a line (the tests that changed outcome, tasks check's problems, ...); empty for a
    task made."""
    fail_to_pass: list[str] = Field(default_factory=list)
    """A task made: the tests that fail before the fix and pass after it."""
    pass_to_pass: list[str] = Field(default_factory=list)
    """A task made: the tests that pass before and after."""


class TaskMining(Document):
    """repo_task_mining.v1: what ``repo task new --from-log RANGE`` did with each commit of the range."""

    schema_: Literal["repo_task_mining.v1"] = Field(default="repo_task_mining.v1", alias="schema")
    """Document type and version."""
    range: str
    """The range as given (``v1.2..main``); merges are left out."""
    tasks_dir: str
    """The tasks directory the tasks were written to."""
    made: int
    """Tasks made (each proven sound by tasks check)."""
    skipped: dict[str, int]
    """Commits skipped, by reason (the keys of ``commits[].skipped``)."""
    commits: list[MinedCommit]
    """Every commit of the range, oldest first."""
    image: str | None = None
    """The image the candidates were graded in; null when no commit needed a grade."""
    jobs: int = 1
    """Candidates graded side by side (``--jobs``)."""
    evidence: str | None = None
    """Where the run directories and patches of the graded skips are kept; null when nothing is kept."""
