"""git commands started ahead of need (what the scan's entry point does with a working tree's listing) give
what the same command run when asked gives, and start no second process."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from dokimi import process
from dokimi.checks.scan import scan_result
from dokimi.source import git
from tests.helpers.git import git_repo


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    return git_repo(tmp_path / "repo", {"AGENTS.md": "Read `src/app.py`.\n", "src/app.py": "x = 1\n"})


@pytest.fixture
def started(monkeypatch: pytest.MonkeyPatch) -> Iterator[list[list[str]]]:
    """The commands started from here on (ahead or not)."""
    calls: list[list[str]] = []
    real = process.start_bytes

    def counting(argv, **kwargs):  # type: ignore[no-untyped-def]
        calls.append(list(argv))
        return real(argv, **kwargs)

    monkeypatch.setattr(process, "start_bytes", counting)
    yield calls
    git.stop_ahead()


def test_a_command_started_ahead_is_collected_not_run_again(repo: Path, started: list[list[str]]) -> None:
    expected = git.run_git(git.LS_FILES_WORKTREE_ARGS, cwd=repo)
    started.clear()
    git.start_ahead(git.LS_FILES_WORKTREE_ARGS, cwd=repo)
    assert len(started) == 1
    assert git.run_git(git.LS_FILES_WORKTREE_ARGS, cwd=repo) == expected
    assert len(started) == 1  # collected, not started again
    assert git.run_git(git.LS_FILES_WORKTREE_ARGS, cwd=repo) == expected
    assert len(started) == 2  # once only: the next call runs it anew


def test_a_scan_of_a_working_tree_collects_its_listing(repo: Path, started: list[list[str]]) -> None:
    expected = scan_result(str(repo)).result
    started.clear()
    git.start_worktree_listing(repo.resolve())
    assert scan_result(str(repo)).result == expected
    # rev-parse, ls-files and config started ahead and collected; nothing else started this way (the grep
    # streams through a process of its own)
    assert [argv[argv.index("core.quotePath=false") + 1 :][:1] for argv in started] == [
        ["rev-parse"],
        ["ls-files"],
        ["--git-dir"],
    ]
    assert not git._AHEAD


def test_a_command_started_ahead_in_another_environment_is_run_anew(
    repo: Path, started: list[list[str]], monkeypatch: pytest.MonkeyPatch
) -> None:
    git.start_ahead(("rev-parse", "--show-toplevel"), cwd=repo)
    monkeypatch.setenv("GIT_CONFIG_GLOBAL", "/dev/null")  # a variable git keeps: a different command
    assert git.run_git(("rev-parse", "--show-toplevel"), cwd=repo).strip() == str(repo).encode()
    assert len(started) == 2


def test_commands_nothing_asked_for_are_stopped(repo: Path, started: list[list[str]]) -> None:
    git.start_worktree_listing(repo / "src")  # a subdirectory: opening the source would refuse it
    assert len(git._AHEAD) == 2
    procs = [proc for proc, _ in git._AHEAD.values()]
    git.stop_ahead()
    assert not git._AHEAD
    assert all(proc.returncode is not None for proc in procs)
