"""tasks check proves every guidance arm sound, in the real containers: a repository whose own test reads one
of its skills is mined with ``repo task new``; under guidance:none (which removes the skill) that test turns
red, so the oracle fails there while it passes under guidance:raw, and tasks check flags the task with the
test that changed. guidance:tree, whose workspace is the same commit as guidance:raw's at this base, is
graded once and reported as the same."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.helpers.git import commit, git, git_repo
from tests.helpers.runs import dokimi_cli

pytestmark = [pytest.mark.docker, pytest.mark.slow]

SKILL = "---\nname: release\ndescription: Cut a release.\n---\n# Release\nRun scripts/release.py.\n"
BUGGY = "def add(a, b):\n    return a - b\n\n\ndef mul(a, b):\n    return a * b\n"
TESTS = """\
from pathlib import Path

from pkg.ops import mul

ROOT = Path(__file__).resolve().parents[1]


def test_mul():
    assert mul(2, 3) == 6


def test_the_release_skill_is_documented():
    assert "Run scripts/release.py" in (ROOT / ".agents/skills/release/SKILL.md").read_text()
"""
NEW_TEST = "\n\ndef test_add():\n    from pkg.ops import add\n\n    assert add(2, 3) == 5\n"
SKILL_TEST = "tests/test_ops.py::test_the_release_skill_is_documented"


@pytest.fixture(scope="module")
def mined(docker_available: bool, tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, dict[str, object]]:
    repo = git_repo(
        tmp_path_factory.mktemp("arms") / "repo",
        {
            "AGENTS.md": "# Rules\nUse the release skill to cut a release.\n",
            ".agents/skills/release/SKILL.md": SKILL,
            "scripts/release.py": "print('release')\n",
            "pkg/__init__.py": "",
            "pkg/ops.py": BUGGY,
            "tests/test_ops.py": TESTS,
        },
    )
    fix = commit(
        repo,
        "Fix add",
        files={"pkg/ops.py": BUGGY.replace("a - b", "a + b"), "tests/test_ops.py": TESTS + NEW_TEST},
    )
    assert dokimi_cli(["repo", "init", str(repo)]).returncode == 0
    git(repo, "add", "-A")
    git(repo, "commit", "-q", "-m", "eval")
    done = dokimi_cli(["repo", "task", "new", "fix_add", "--from-commit", fix, "-C", str(repo), "--json"])
    assert done.stdout.strip(), done.stderr
    return repo, json.loads(done.stdout)


def test_task_new_finds_the_arm_that_turns_a_repository_test_red(
    mined: tuple[Path, dict[str, object]],
) -> None:
    _, summary = mined
    assert summary["fail_to_pass"] == ["tests/test_ops.py::test_add"]
    assert SKILL_TEST in summary["pass_to_pass"]  # type: ignore[operator]
    assert summary["ok"] is False and summary["removed"] is False  # kept: the task is fine, the arm is not
    problems = summary["problems"]
    assert isinstance(problems, list)
    changed = [p for p in problems if p.startswith("oracle under guidance:none as under guidance:raw")]
    assert len(changed) == 1 and f"{SKILL_TEST}: passed -> failed" in changed[0], problems
    assert any(p.startswith("oracle passes the gate (guidance:none)") for p in problems), problems
    assert not any("guidance:tree" in p for p in problems), problems


def test_tasks_check_reports_each_arm_and_the_test_that_changed(
    mined: tuple[Path, dict[str, object]],
) -> None:
    repo, _ = mined
    done = dokimi_cli(["repo", "tasks", "check", str(repo), "--json"])
    assert done.returncode == 1, done.stderr
    (task,) = json.loads(done.stdout)["tasks"]
    assert task["status"] == "broken"
    arms = {a["arm"]: a for a in task["arms"]}
    assert list(arms) == ["guidance:raw", "guidance:none", "guidance:tree"]
    assert (
        arms["guidance:raw"]["oracle"]["passed"] is True
        and arms["guidance:raw"]["oracle"]["failing_tests"] == {}
    )
    assert arms["guidance:none"]["oracle"]["passed"] is False
    assert arms["guidance:none"]["oracle"]["failing_tests"] == {SKILL_TEST: "failed"}
    assert arms["guidance:none"]["null"]["failing_tests"][SKILL_TEST] == "failed"
    assert arms["guidance:tree"]["same_workspace_as"] == "guidance:raw"
    assert arms["guidance:tree"]["oracle"] == arms["guidance:raw"]["oracle"]

    text = dokimi_cli(["repo", "tasks", "check", str(repo), "--arm", "guidance:none"])
    assert text.returncode == 1
    assert "differ: guidance:none" in text.stdout
    assert "arms: guidance:raw, guidance:none" in text.stdout

    # four units at once: whichever arm prepares the shared commit first grades it, and the isolation probe
    # still runs (only guidance:raw runs it, and guidance:raw never waits for another arm)
    only_tree = dokimi_cli(
        ["repo", "tasks", "check", str(repo), "--arm", "guidance:tree", "-j", "4", "--json"]
    )
    assert only_tree.returncode == 0, only_tree.stdout
    (tree_task,) = json.loads(only_tree.stdout)["tasks"]
    assert [a["arm"] for a in tree_task["arms"]] == ["guidance:raw", "guidance:tree"]
    assert any(c["name"] == "isolation" and c["ok"] for c in tree_task["checks"])


def test_a_run_file_names_the_arms_and_generated_is_refused(
    mined: tuple[Path, dict[str, object]], tmp_path: Path
) -> None:
    repo, _ = mined
    run_file = tmp_path / "run.yaml"
    run_file.write_text("schema: repo_run_file.v1\narms: [guidance:none, guidance:generated]\n")
    refused = dokimi_cli(["repo", "tasks", "check", str(repo), "-c", str(run_file)])
    assert refused.returncode == 2 and "cannot prove guidance:generated sound" in refused.stderr
