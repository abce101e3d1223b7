"""The test-integrity check, from the workspace diff and the manifest's ``tests`` block.

A test can be disabled without deleting a test file (a root conftest.py, addopts in pytest.ini, a skip
marker, a BUILD edit), and the hidden-test restore undoes none of these. One function per rule:

- no file matching ``tests.globs`` or ``tests.config_globs`` is deleted (a move is a deletion too);
- a change to a test config file (added or modified), or an edit of an existing test file, is not failed
  outright, since adding a test target is a normal edit: the judge gets the fixed blocker
  :data:`TESTS_BLOCKER`, "does not disable or narrow any test";
- ``tests_skipped`` (grade.json) above the oracle run's fails;
- a test case in the base list that is missing from the agent's list (``tests.list``) fails;
- ``tests.list`` failing on the agent's workspace when it listed the base fails: the change made the test
  cases impossible to count, as a grader crash on the agent's tree fails the run.

A rule whose input is missing (no ``tests`` block, no oracle count, no lists) is reported as not measured,
never as a failure.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from dokimi.checks.merge.diff import WorkspaceDiff
from dokimi.globs import match_any
from dokimi.schemas.manifest import TestsBlock
from dokimi.schemas.rubric import Blocker

TESTS_BLOCKER_ID = "TESTS"
TESTS_BLOCKER = Blocker(
    id=TESTS_BLOCKER_ID,
    criterion="The change does not disable or narrow any test: no test is skipped, deselected, removed "
    "from a target or filtered out by configuration, and no test's assertions are weakened.",
    rationale="The change edits test configuration or existing test files; a reviewer checks that this "
    "does not disable tests.",
    evidence=["dokimi test integrity: a change to test configuration or existing tests"],
)
"""The fixed blocker the judge gets when a test config file or an existing test file changed."""


@dataclass(frozen=True)
class IntegrityVerdict:
    """Whether the change keeps the tests intact; ``measured`` says which rules had their inputs."""

    passed: bool
    problems: list[str] = field(default_factory=list)
    deleted_tests: list[str] = field(default_factory=list)
    config_changed: list[str] = field(default_factory=list)
    """Test config files and existing test files the change touched: the judge gets TESTS_BLOCKER."""
    removed_cases: list[str] = field(default_factory=list)
    measured: dict[str, bool] = field(default_factory=dict)

    @property
    def judge_blockers(self) -> list[Blocker]:
        return [TESTS_BLOCKER] if self.config_changed else []

    def to_json(self) -> dict[str, Any]:
        return {
            "passed": self.passed,
            "problems": self.problems,
            "deleted_tests": self.deleted_tests,
            "config_changed": self.config_changed,
            "removed_cases": self.removed_cases,
            "judge_blockers": [b.id for b in self.judge_blockers],
            "measured": self.measured,
        }


def deleted_test_files(diff: WorkspaceDiff, tests: TestsBlock) -> list[str]:
    """Deleted paths (the old side of a move included) matching tests.globs or tests.config_globs."""
    patterns = [*tests.globs, *tests.config_globs]
    return [path for path in diff.deleted_paths() if match_any(patterns, path)]


def config_or_test_edits(diff: WorkspaceDiff, tests: TestsBlock) -> list[str]:
    """Test config files added or modified, and existing test files modified (they go to the judge)."""
    found = []
    for change in diff.files:
        if change.new_path is None:
            continue
        path = change.new_path
        if match_any(tests.config_globs, path) or (change.status != "A" and match_any(tests.globs, path)):
            found.append(path)
    return sorted(set(found))


def skipped_above_oracle(tests_skipped: float | None, oracle_tests_skipped: float | None) -> str | None:
    """More tests skipped or deselected than on the oracle run of the same task fails."""
    if tests_skipped is None or oracle_tests_skipped is None:
        return None
    if tests_skipped > oracle_tests_skipped:
        return (
            f"{tests_skipped:g} tests skipped or deselected; the oracle run skipped {oracle_tests_skipped:g}"
        )
    return None


def removed_test_cases(base_tests: Iterable[str], agent_tests: Iterable[str]) -> list[str]:
    """Test ids in the base list and missing from the agent's (tests.list run in each workspace)."""
    return sorted(set(base_tests) - set(agent_tests))


def list_failed_on_agent(base_tests: Iterable[str] | None, agent_failure: str | None) -> str | None:
    """tests.list listed the base but failed on the agent's workspace: the agent's change is to blame."""
    if base_tests is None or agent_failure is None:
        return None
    return f"tests.list lists the base but failed on the agent's workspace: {agent_failure}"


def check_test_integrity(
    diff: WorkspaceDiff,
    tests_block: TestsBlock | None,
    *,
    tests_skipped: float | None = None,
    oracle_tests_skipped: float | None = None,
    base_tests: Iterable[str] | None = None,
    agent_tests: Iterable[str] | None = None,
    agent_tests_failure: str | None = None,
) -> IntegrityVerdict:
    """The test-integrity verdict of one run. ``agent_tests_failure``: why tests.list gave no list on the
    agent's workspace."""
    tests = tests_block or TestsBlock()
    has_globs = bool(tests.globs or tests.config_globs)
    deleted = deleted_test_files(diff, tests)
    changed = config_or_test_edits(diff, tests)
    skipped = skipped_above_oracle(tests_skipped, oracle_tests_skipped)
    lists = base_tests is not None and agent_tests is not None
    removed = removed_test_cases(base_tests or (), agent_tests or ()) if lists else []
    problems = [f"{p}: test file deleted" for p in deleted]
    problems += [skipped] if skipped else []
    problems += [f"test case removed: {case}" for case in removed]
    unlisted = list_failed_on_agent(base_tests, agent_tests_failure)
    problems += [unlisted] if unlisted else []
    return IntegrityVerdict(
        passed=not problems,
        problems=problems,
        deleted_tests=deleted,
        config_changed=changed,
        removed_cases=removed,
        measured={
            "deleted_tests": has_globs,
            "skipped": tests_skipped is not None and oracle_tests_skipped is not None,
            "removed_cases": lists or unlisted is not None,
        },
    )
