"""The agent's own tests, pure: which files of a change are its tests, and ``tests.run`` as an argv."""

from __future__ import annotations

import pytest

from dokimi.checks.merge.diff import ChangedFile, WorkspaceDiff
from dokimi.checks.own_tests import agent_test_files, own_tests_argv
from dokimi.errors import UsageError
from dokimi.schemas import manifest


def test_the_agents_tests_are_the_files_it_added_or_changed_under_tests_globs() -> None:
    diff = WorkspaceDiff(
        "a" * 40,
        (
            ChangedFile("A", None, "tests/test_new.py", 5, 0),
            ChangedFile("M", "tests/test_old.py", "tests/test_old.py", 2, 1),
            ChangedFile("D", "tests/test_gone.py", None, 0, 9),  # a deleted test tests nothing
            ChangedFile("M", "calc/evaluator.py", "calc/evaluator.py", 3, 1),
            ChangedFile("A", None, "src/pkg/test_inline.py", 1, 0),
        ),
        "",
    )
    tests = manifest.TestsBlock(globs=["tests/**", "**/test_*.py"])
    assert agent_test_files(diff, tests) == [
        "src/pkg/test_inline.py",
        "tests/test_new.py",
        "tests/test_old.py",
    ]


def test_tests_run_gets_one_word_per_file_and_the_task_id() -> None:
    argv = own_tests_argv(
        "python3 -m pytest -q {tests} --junit-prefix={task}", ["tests/a b.py", "t.py"], task="t1"
    )
    assert argv == ["python3", "-m", "pytest", "-q", "tests/a b.py", "t.py", "--junit-prefix=t1"]


@pytest.mark.parametrize(
    ("command", "fragment"),
    [
        ("python3 -m pytest", "does not name {tests} as a word of its own"),
        ("python3 -m pytest --files={tests}", "does not name {tests} as a word of its own"),
        ("python3 -m pytest {tests} {run_dir}", "placeholder {run_dir} has no value here"),
        ("python3 -m pytest '{tests}", "cannot split"),
    ],
)
def test_a_tests_run_that_cannot_name_the_files_is_refused(command: str, fragment: str) -> None:
    with pytest.raises(UsageError, match=fragment.replace("{", r"\{").replace("}", r"\}")):
        own_tests_argv(command, ["t.py"], task="t1")
