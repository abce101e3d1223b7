"""``repo task new`` keeps its evidence when a task does not come out sound, in the real containers: a test
file that cannot be collected is reported with its first error line per phase (apart from "no failing-before
test", in text and under --json) and the task directory leaves the tasks directory; a grader that records no
outcome at all (pytest missing from the image) removes the half-made task directory and keeps the grader's
output it points to."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.helpers.git import commit, git, git_repo
from tests.helpers.runs import dokimi_cli

pytestmark = [pytest.mark.docker, pytest.mark.slow]

BUGGY = "def add(a, b):\n    return a - b\n"
TESTS = "import pkg\n\n\ndef test_import():\n    assert pkg\n"
NEW_TEST = "\n\ndef test_add():\n    from pkg.ops import add\n\n    assert add(2, 3) == 5\n"
NO_PYTEST = (
    "FROM dokimi-base:bookworm\n"
    "RUN rm -rf /usr/lib/python3/dist-packages/pytest /usr/lib/python3/dist-packages/_pytest\n"
)


def _repository(root: Path, *, test_head: str = "", dockerfile: str | None = None) -> tuple[Path, str]:
    repo = git_repo(
        root / "repo",
        {"pkg/__init__.py": "", "pkg/ops.py": BUGGY, "tests/test_ops.py": test_head + TESTS},
    )
    fix = commit(
        repo,
        "Fix add",
        files={
            "pkg/ops.py": BUGGY.replace("a - b", "a + b"),
            "tests/test_ops.py": test_head + TESTS + NEW_TEST,
        },
    )
    assert dokimi_cli(["repo", "init", str(repo)]).returncode == 0
    if dockerfile is not None:
        (repo / ".agent-eval" / "Dockerfile").write_text(dockerfile)
    git(repo, "add", "-A")
    git(repo, "commit", "-q", "-m", "eval")
    return repo, fix


def _mine(repo: Path, fix: str, *extra: str) -> tuple[int, str, str]:
    done = dokimi_cli(["repo", "task", "new", "fix_add", "--from-commit", fix, "-C", str(repo), *extra])
    return done.returncode, done.stdout, done.stderr


def test_a_test_file_that_cannot_be_collected_is_reported_apart_and_the_task_leaves(
    docker_available: bool, tmp_path: Path
) -> None:
    repo, fix = _repository(tmp_path, test_head="import lockfile_only_dependency  # noqa\n")
    code, out, err = _mine(repo, fix, "--json")
    assert code == 1, err
    summary = json.loads(out)
    errors = {(e["phase"], e["file"]): e["error"] for e in summary["collection_errors"]}
    expected = "ModuleNotFoundError: No module named 'lockfile_only_dependency'"
    assert errors == {("null", "tests/test_ops.py"): expected, ("oracle", "tests/test_ops.py"): expected}
    assert summary["fail_to_pass"] == [] and summary["ok"] is False and summary["removed"] is True
    assert [p.split(":")[0] for p in summary["problems"]] == [
        "no test fails before the fix and passes after it"
    ]
    assert not (repo / ".agent-eval" / "tasks" / "fix_add").exists()
    evidence = Path(summary["evidence"])
    assert (evidence / "tests.patch").is_file() and (evidence / "oracle.patch").is_file()
    assert expected in (evidence / "fix_add" / "null" / "grade.stderr").read_text()

    code, out, _ = _mine(repo, fix)  # the same in text: a rerun is possible, the directory left
    assert code == 1
    assert f"  before the fix: tests/test_ops.py: {expected}" in out.splitlines()
    assert f"  with the fix: tests/test_ops.py: {expected}" in out.splitlines()


def test_a_grader_that_records_nothing_removes_the_half_made_task_and_keeps_its_output(
    docker_available: bool, tmp_path: Path
) -> None:
    repo, fix = _repository(tmp_path, dockerfile=NO_PYTEST)
    code, _, err = _mine(repo, fix)
    assert code == 2, err
    assert "the null run recorded no test outcomes" in err
    assert "No module named 'pytest'" in err  # the grader's output, printed
    assert "removed the half-made task directory" in err
    assert not (repo / ".agent-eval" / "tasks" / "fix_add").exists()
    kept = err.split("are kept in ")[1].split()[0]
    stderr = Path(kept) / "fix_add" / "null" / "grade.stderr"
    assert stderr.is_file() and str(stderr) in err  # the file the message points to exists
    assert (Path(kept) / "tests.patch").is_file()
