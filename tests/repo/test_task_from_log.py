"""``repo task new --from-log RANGE`` on a repository built here, in the real containers: five fixes, one
without a test and one whose tests are flaky, make three tasks and report the two skips with their reasons;
a commit with only tests and one whose test passes before the fix too are skipped as such; a rerun skips what
is mined already; Ctrl-C while candidates are graded leaves no task directory behind."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from dokimi.cli.main import main
from dokimi.errors import UsageError
from dokimi.repo.mining import LogCommit, log_commits, log_task_id, outcome_changes
from tests.helpers.git import commit, git, git_repo
from tests.helpers.runs import dokimi_cli

BUGGY = {
    "add": "def add(a, b):\n    return a - b\n",
    "sub": "def sub(a, b):\n    return a + b\n",
    "mul": "def mul(a, b):\n    return a + b\n",
    "neg": "def neg(a):\n    return a\n",
}
FIXED = {
    "add": "def add(a, b):\n    return a + b\n",
    "sub": "def sub(a, b):\n    return a - b\n",
    "mul": "def mul(a, b):\n    return a * b\n",
    "neg": "def neg(a):\n    return -a\n",
}
CALLS = {
    "add": ("add(2, 3)", "5"),
    "sub": ("sub(5, 3)", "2"),
    "mul": ("mul(2, 3)", "6"),
    "neg": ("neg(4)", "-4"),
}
FLAKY_TESTS = "".join(f"\n\ndef test_lucky_{i}():\n    assert random.random() < 0.5\n" for i in range(12))
"""Twelve tests that pass half the time: two runs of a workspace give each the same outcome with odds of one
in 2**24."""


def _module(fixed: set[str]) -> str:
    return "\n\n".join(FIXED[name] if name in fixed else BUGGY[name] for name in BUGGY)


def _test(name: str, *, extra: str = "", head: str = "") -> str:
    call, want = CALLS[name]
    return f"{head}from pkg.ops import {name}\n\n\ndef test_{name}():\n    assert {call} == {want}\n{extra}"


def _repository(root: Path) -> tuple[Path, list[str]]:
    """A package with four bugs, then five commits: fix add (with a test), tidy a comment (no test), fix sub
    (with a test), fix mul (with flaky tests), fix neg (with a test); then the eval dir (repo init)."""
    repo = git_repo(
        root / "ops",
        {"pkg/__init__.py": "", "pkg/ops.py": _module(set()), "tests/test_import.py": "import pkg\n\n\n"
         "def test_import():\n    assert pkg\n"},
    )  # fmt: skip
    fixed: set[str] = set()
    shas = []
    for name, files in (
        ("add", {"tests/test_add.py": _test("add")}),
        ("tidy", {"README.md": "# ops\n\nArithmetic, badly.\n"}),
        ("sub", {"tests/test_sub.py": _test("sub")}),
        ("mul", {"tests/test_mul.py": _test("mul", head="import random\n\n", extra=FLAKY_TESTS)}),
        ("neg", {"tests/test_neg.py": _test("neg")}),
    ):
        if name in FIXED:
            fixed.add(name)
            files = {**files, "pkg/ops.py": _module(fixed)}
        subject = f"Fix {name} for every input" if name in FIXED else "Say what the package is"
        shas.append(commit(repo, f"{subject}\n\nIt gave the wrong answer.", files=files))
    assert dokimi_cli(["repo", "init", str(repo)]).returncode == 0
    git(repo, "add", "-A")
    git(repo, "commit", "-q", "-m", "Evaluate the package")
    return repo, shas


def _mine(repo: Path, rev_range: str, *extra: str) -> tuple[int, dict, str]:  # type: ignore[type-arg]
    done = dokimi_cli(
        ["repo", "task", "new", "--from-log", rev_range, "-C", str(repo), "--json", *extra], timeout=1800
    )
    return done.returncode, json.loads(done.stdout) if done.stdout.strip() else {}, done.stderr


# --- git only ---------------------------------------------------------------------------------------------


def test_a_range_is_read_oldest_first_without_merges_and_ids_stay_unique(tmp_path: Path) -> None:
    repo = git_repo(tmp_path / "r", {"a.py": "A = 1\n"})
    first = commit(repo, "Fix A", files={"a.py": "A = 2\n"})
    git(repo, "checkout", "-q", "-b", "side")
    side = commit(repo, "Fix A", files={"b.py": "B = 1\n"})
    git(repo, "checkout", "-q", "main")
    last = commit(repo, "Fix A: the \x1b[31mcolour\x1b[0m too", files={"a.py": "A = 3\n"})
    git(repo, "merge", "-q", "--no-ff", "--no-edit", "side")
    commits = log_commits(repo / ".git", f"{first}^..HEAD")
    assert [c.sha for c in commits] == [first, side, last]  # the merge left out
    assert "\x1b" not in commits[2].subject
    taken: set[str] = set()
    ids = [log_task_id(c, taken) or "" for c in commits]
    for task_id in ids:
        assert task_id not in taken
        taken.add(task_id)
    assert ids[0] == f"fix-a-{first[:7]}"
    assert log_task_id(LogCommit(first, "Fix A"), {f"fix-a-{first[:7]}"}) == f"fix-a-{first[:8]}"
    with pytest.raises(UsageError, match="no commit in that range"):
        log_commits(repo / ".git", "HEAD..HEAD")
    with pytest.raises(UsageError, match="git cannot read that range"):
        log_commits(repo / ".git", "nowhere..HEAD")
    with pytest.raises(UsageError, match="a range, not an option"):
        log_commits(repo / ".git", "--all")


def test_outcome_changes_name_each_test_that_moved() -> None:
    assert outcome_changes({"t::a": "passed", "t::b": "failed"}, {"t::a": "passed", "t::b": "passed"}) == [
        "t::b: failed then passed"
    ]
    assert outcome_changes({"t::a": "passed"}, {}) == ["t::a: passed then absent"]


def test_from_log_refuses_an_id_a_second_source_and_jobs_without_it(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    repo = git_repo(tmp_path / "r", {"a.py": "A = 1\n"})
    assert main(["repo", "task", "new", "x", "--from-log", "HEAD~1..HEAD", "-C", str(repo)]) == 2
    assert "give no ID" in capsys.readouterr().err
    assert main(["repo", "task", "new", "--from-log", "a..b", "--from-commit", "HEAD", "-C", str(repo)]) == 2
    assert "one of them" in capsys.readouterr().err
    assert main(["repo", "task", "new", "x", "--from-commit", "HEAD", "-j", "2", "-C", str(repo)]) == 2
    assert "-j/--jobs is for --from-log" in capsys.readouterr().err


# --- in containers ----------------------------------------------------------------------------------------


@pytest.mark.docker
@pytest.mark.slow
def test_five_fixes_one_without_a_test_and_one_flaky_make_three_tasks(
    docker_available: bool, tmp_path: Path
) -> None:
    repo, shas = _repository(tmp_path)
    code, mined, err = _mine(repo, f"{shas[0]}^..{shas[-1]}", "-j", "2")
    assert code == 0, err
    by_sha = {c["sha"]: c for c in mined["commits"]}
    assert [c["sha"] for c in mined["commits"]] == shas
    assert mined["made"] == 3 and mined["skipped"] == {"no_test": 1, "flaky": 1}
    assert by_sha[shas[1]]["skipped"] == "no_test" and by_sha[shas[1]]["task"] is None
    flaky = by_sha[shas[3]]
    assert flaky["skipped"] == "flaky" and "tests/test_mul.py::test_lucky_" in flaky["detail"], flaky
    assert " then " in flaky["detail"]
    tasks = repo / ".agent-eval" / "tasks"
    made = {c["task"]: c for c in mined["commits"] if c["task"]}
    assert sorted(p.name for p in tasks.iterdir()) == sorted(made)
    for index, name in ((0, "add"), (2, "sub"), (4, "neg")):
        task_id = by_sha[shas[index]]["task"]
        assert task_id == f"fix-{name}-for-every-input-{shas[index][:7]}"
        task = json.loads((tasks / task_id / "task.json").read_text())
        assert task["base"] == f"{shas[index]}^"
        assert task["fail_to_pass"] == [f"tests/test_{name}.py::test_{name}"] == made[task_id]["fail_to_pass"]
        assert "tests/test_import.py::test_import" not in task["fail_to_pass"]
        assert task["prompt"].startswith(f"Fix {name} for every input")
    evidence = Path(mined["evidence"])  # kept for the flaky skip, its patches with it
    assert (evidence / "patches" / f"fix-mul-for-every-input-{shas[3][:7]}" / "tests.patch").is_file()

    again = f"{shas[0][:10]}^..{shas[1][:10]}"  # a rerun skips what is mined already
    text = dokimi_cli(["repo", "task", "new", "--from-log", again, "-C", str(repo)])
    assert text.returncode == 0, text.stderr
    lines = text.stdout.splitlines()
    assert lines[0].startswith(f"--from-log {again}: 0 task(s) made")
    assert any(line.startswith(f"  {shas[0][:10]} already a task: task fix-add") for line in lines), lines
    assert any(line.startswith(f"  {shas[1][:10]} no test: ") for line in lines), lines


@pytest.mark.docker
@pytest.mark.slow
def test_only_tests_and_a_test_that_passes_before_the_fix_are_skipped_as_such(
    docker_available: bool, tmp_path: Path
) -> None:
    repo, shas = _repository(tmp_path)
    only_tests = commit(repo, "Test neg", files={"tests/test_neg_more.py": _test("neg").replace("(4)", "(5)")
                                               .replace("-4", "-5")})  # fmt: skip
    no_failing = commit(  # a code change, and a test that passes before it already
        repo,
        "Say that add adds",
        files={"pkg/ops.py": _module(set(FIXED)) + "\n# add adds\n", "tests/test_add_again.py": _test("add")},
    )
    code, mined, err = _mine(repo, f"{only_tests}^..{no_failing}")
    assert code == 0, err
    assert [(c["sha"], c["skipped"]) for c in mined["commits"]] == [
        (only_tests, "only_tests"), (no_failing, "no_failing_test")
    ]  # fmt: skip
    assert mined["made"] == 0 and list((repo / ".agent-eval" / "tasks").iterdir()) == []
    assert "no test fails before the fix and passes after it" in mined["commits"][1]["detail"]


@pytest.mark.docker
@pytest.mark.slow
def test_ctrl_c_while_candidates_are_graded_leaves_no_task_directory(
    docker_available: bool, tmp_path: Path
) -> None:
    repo, shas = _repository(tmp_path)
    tasks = repo / ".agent-eval" / "tasks"
    proc = subprocess.Popen(
        [sys.executable, "-m", "dokimi", "repo", "task", "new", "--from-log", f"{shas[0]}^..{shas[-1]}", "-C",
         str(repo)],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )  # fmt: skip
    deadline = time.monotonic() + 300
    while time.monotonic() < deadline and not (tasks.is_dir() and len(list(tasks.iterdir())) >= 4):
        time.sleep(0.2)
    time.sleep(3)  # into the first grading
    assert proc.poll() is None, proc.communicate()
    os.kill(proc.pid, signal.SIGINT)
    out, err = proc.communicate(timeout=120)
    assert proc.returncode == 130, err
    assert list(tasks.iterdir()) == []
    assert "removed 4 half-made task directories" in err, err
    assert "Traceback" not in err
