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
