"""The bundled example (examples/calc): deterministic build, resolvable bases, and sound tasks.

Soundness is checked by hand with git and docker, independently of dokimi's runner: for every task, the null
workspace (prepared, untouched) fails the gate and the workspace after the oracle passes it (contract §4.3).
"""

from __future__ import annotations

import io
import json
import os
import runpy
import shutil
import subprocess
import tarfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from dokimi.checks.review import review_verdict
from dokimi.support import support_dir
from tests.helpers.git import git

ROOT = Path(__file__).resolve().parents[1]
BUILD_SCRIPT = ROOT / "examples" / "build_example.py"
EVAL_DIR = ".agent-eval"
TASK_IDS = sorted(p.name for p in (ROOT / "examples" / "calc" / EVAL_DIR / "tasks").iterdir() if p.is_dir())
IMAGE = "dokimi-example-calc:test"
DOCKER_TIMEOUT_S = 120
NEUTRAL = {
    "GIT_AUTHOR_NAME": "dokimi",
    "GIT_AUTHOR_EMAIL": "dokimi@invalid",
    "GIT_COMMITTER_NAME": "dokimi",
    "GIT_COMMITTER_EMAIL": "dokimi@invalid",
}

BuildExample = Callable[[Path], dict[str, str]]


def _build_example() -> BuildExample:
    namespace = runpy.run_path(str(BUILD_SCRIPT))
    function: BuildExample = namespace["build_example"]
    return function


@pytest.fixture(scope="module")
def example(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, dict[str, str]]:
    dest = tmp_path_factory.mktemp("example") / "calc"
    return dest, _build_example()(dest)


def _tasks(repo: Path) -> dict[str, dict[str, Any]]:
    tasks = {}
    for path in sorted((repo / EVAL_DIR / "tasks").glob("*/task.json")):
        task = json.loads(path.read_text())
        assert task["id"] == path.parent.name
        tasks[task["id"]] = task
    return tasks


# --- build


@pytest.mark.slow
def test_building_the_example_twice_gives_the_same_shas(tmp_path: Path) -> None:
    build = _build_example()
    first = build(tmp_path / "one")
    second = build(tmp_path / "two")
    assert first == second
    assert list(first) == ["initial", "followup", "eval"]
    assert git(tmp_path / "one", "rev-parse", "HEAD").strip() == first["eval"]
    assert git(tmp_path / "one", "rev-parse", "HEAD~2").strip() == first["initial"]


def test_the_build_refuses_a_non_empty_destination(tmp_path: Path) -> None:
    (tmp_path / "x").write_text("")
    with pytest.raises(FileExistsError):
        _build_example()(tmp_path)


@pytest.mark.slow
def test_every_task_base_is_a_full_sha_that_resolves_to_commit_1_or_2(
    example: tuple[Path, dict[str, str]],
) -> None:
    repo, shas = example
    tasks = _tasks(repo)
    assert {"fix", "feature", "test", "review"} <= {t["family"] for t in tasks.values()}
    resolved = set()
    for task in tasks.values():
        base = task["base"]
        assert len(base.rstrip("^")) == 40, task["id"]
        resolved.add(git(repo, "rev-parse", "--verify", f"{base}^{{commit}}").strip())
    assert resolved == {shas["initial"], shas["followup"]}


def test_commit_2_is_a_real_change_and_only_commit_3_has_the_eval_dir(
    example: tuple[Path, dict[str, str]],
) -> None:
    repo, shas = example
    changed = git(repo, "diff", "--name-only", shas["initial"], shas["followup"]).split()
    assert "calc/evaluator.py" in changed
    for rev in ("initial", "followup"):
        assert git(repo, "ls-tree", "--name-only", shas[rev], EVAL_DIR).strip() == ""
    assert git(repo, "ls-tree", "--name-only", shas["eval"], EVAL_DIR).strip() == EVAL_DIR


def test_claude_md_is_a_symlink_to_agents_md_in_the_built_repo(example: tuple[Path, dict[str, str]]) -> None:
    repo, _ = example
    entry = git(repo, "ls-tree", "HEAD", "CLAUDE.md").split()
    assert entry[0] == "120000"
    assert os.readlink(repo / "CLAUDE.md") == "AGENTS.md"


@pytest.mark.slow
def test_the_public_tests_of_the_example_pass(example: tuple[Path, dict[str, str]], tmp_path: Path) -> None:
    repo, _ = example
    shutil.copytree(repo, tmp_path / "ws", ignore=shutil.ignore_patterns(".git"), symlinks=True)
    proc = subprocess.run(
        ["python3", "-m", "pytest", "-q", "-p", "no:cacheprovider", "tests"],
        cwd=tmp_path / "ws",
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
        env={**os.environ, "PYTHONDONTWRITEBYTECODE": "1"},
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr


# --- soundness with docker


def _extract(repo: Path, rev: str, dest: Path, *paths: str) -> None:
    data = subprocess.run(
        ["git", "archive", "--format=tar", rev, *paths], cwd=repo, capture_output=True, check=True, timeout=60
    ).stdout
    with tarfile.open(fileobj=io.BytesIO(data)) as tar:
        tar.extractall(dest, filter="tar")


def _prepare(repo: Path, eval_content: Path, task: dict[str, Any], run_dir: Path) -> None:
    """Contract §3, by hand: base tree, no eval dir, fresh history, setup patches, review patch."""
    workspace = run_dir / "workspace"
    workspace.mkdir(parents=True)
    _extract(repo, task["base"], workspace)
    shutil.rmtree(workspace / EVAL_DIR, ignore_errors=True)
    git(workspace, "init", "-q")
    git(workspace, "add", "-A")
    git(workspace, "commit", "-q", "--no-gpg-sign", "-m", "base")
    task_dir = eval_content / "tasks" / task["id"]
    for patch in task.get("setup_patches", []):
        git(workspace, "apply", str(task_dir / patch))
    git(workspace, "add", "-A")
    git(workspace, "commit", "-q", "--amend", "--no-gpg-sign", "-m", "base")
    if "review_patch" in task:
        env = {**os.environ, **NEUTRAL}
        subprocess.run(
            ["git", "am", "-q", "--no-gpg-sign", str(task_dir / task["review_patch"])],
            cwd=workspace,
            env=env,
            check=True,
            capture_output=True,
            timeout=60,
        )
    base_sha = git(repo, "rev-parse", f"{task['base']}^{{commit}}").strip()
    meta = {
        "arm": "guidance:raw",
        "base_rev": task["base"],
        "base_sha": base_sha,
        "start_sha": git(workspace, "rev-parse", "HEAD").strip(),
        "rep": 0,
    }
    (run_dir / "task.json").write_text(json.dumps(task))
    (run_dir / "meta.json").write_text(json.dumps(meta))
    (run_dir / "answer.txt").write_text("")
    (run_dir / "events.jsonl").write_text("")


def _entry_point(name: str, run_dir: Path, eval_content: Path) -> None:
    """Run an entry point as dokimi would: own container, fixed mounts (dokimi's helpers at /eval/support,
    which the example's grader isolates its tests with), no network, grade-home as HOME."""
    home = run_dir / "grade-home"
    shutil.rmtree(home, ignore_errors=True)
    home.mkdir()
    command = {
        "grade": "python3 /eval/content/grade.py grade --contract /eval/run",
        "oracle": "python3 /eval/content/grade.py oracle --contract /eval/run",
    }[name]
    proc = subprocess.run(
        [
            "docker",
            "run",
            "--rm",
            "--init",
            "--network",
            "none",
            "--cap-drop",
            "ALL",
            "--security-opt",
            "no-new-privileges",
            "--user",
            f"{os.getuid()}:{os.getgid()}",
            "-v",
            f"{run_dir}:/eval/run",
            "-v",
            f"{eval_content}:/eval/content:ro",
            "-v",
            f"{support_dir()}:/eval/support:ro",
            "-w",
            "/eval/run/workspace",
            "-e",
            "HOME=/eval/run/grade-home",
            "-e",
            "PYTHONNOUSERSITE=1",
            "--entrypoint",
            "",
            IMAGE,
            *command.split(),
        ],
        capture_output=True,
        text=True,
        timeout=DOCKER_TIMEOUT_S,
        check=False,
    )
    assert proc.returncode == 0, f"{name} failed ({proc.returncode}):\n{proc.stdout}\n{proc.stderr}"


def _gate_passes(task: dict[str, Any], grade: dict[str, Any], run_dir: Path) -> bool:
    """Contract §3 gate, or for a score-only task whether score.metric reached score.max, or for the clean
    diff of a review task whether its answer has no blocking finding (dokimi's review check, its rule)."""
    assert grade["schema"] == "repo_grade.v1" and grade["task"] == task["id"] and grade["errors"] == []
    assert all(v is None or isinstance(v, (bool, int, float)) for v in grade["metrics"].values())
    if "clean_diff_of" in task:
        assert grade["pass"] is None
        answer = (run_dir / "answer.txt").read_text()
        return review_verdict(answer, [], clean_diff=True).metrics["no_blocking_finding"] is True
    if "score" in task:
        assert grade["pass"] is None
        return bool(grade["metrics"][task["score"]["metric"]] >= task["score"]["max"])
    for entry in task.get("gate", ["pass"]):
        value = grade["pass"] if entry == "pass" else grade["metrics"].get(entry)
        if value is not True:
            return False
    return True


@pytest.fixture(scope="module")
def eval_setup(
    example: tuple[Path, dict[str, str]], tmp_path_factory: pytest.TempPathFactory, docker_available: bool
) -> Path:
    """The eval dir exported from the eval tree, and the image built from its Dockerfile (tasks removed)."""
    repo, _ = example
    root = tmp_path_factory.mktemp("eval")
    _extract(repo, "HEAD", root / "context")
    shutil.rmtree(root / "context" / EVAL_DIR / "tasks")
    _extract(repo, "HEAD", root / "export", EVAL_DIR)
    build = subprocess.run(
        [
            "docker",
            "build",
            "-q",
            "-t",
            IMAGE,
            "-f",
            str(root / "context" / EVAL_DIR / "Dockerfile"),
            str(root / "context"),
        ],
        capture_output=True,
        text=True,
        timeout=DOCKER_TIMEOUT_S,
        check=False,
    )
    assert build.returncode == 0, build.stderr
    return root / "export" / EVAL_DIR


@pytest.mark.docker
@pytest.mark.parametrize("task_id", TASK_IDS)
def test_a_task_fails_on_the_null_workspace_and_passes_after_the_oracle(
    task_id: str, example: tuple[Path, dict[str, str]], eval_setup: Path, tmp_path: Path
) -> None:
    repo, _ = example
    task = _tasks(repo)[task_id]

    null = tmp_path / "null"
    _prepare(repo, eval_setup, task, null)
    _entry_point("grade", null, eval_setup)
    null_grade = json.loads((null / "grade.json").read_text())
    assert not _gate_passes(task, null_grade, null), null_grade

    oracle = tmp_path / "oracle"
    _prepare(repo, eval_setup, task, oracle)
    _entry_point("oracle", oracle, eval_setup)
    _entry_point("grade", oracle, eval_setup)
    oracle_grade = json.loads((oracle / "grade.json").read_text())
    assert _gate_passes(task, oracle_grade, oracle), oracle_grade
