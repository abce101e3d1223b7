"""``repo tasks check`` end to end on the real daemon (contract §4.3): sound tasks pass, each kind of broken
task is reported with its reason, --warm has a network and writable caches, and the bundled example passes."""

from __future__ import annotations

import json
import runpy
import subprocess
import tempfile
from pathlib import Path
from typing import Any

import pytest

from dokimi.cli.main import main
from dokimi.errors import UsageError
from dokimi.repo.manifest import load_manifest
from dokimi.runner.static import run_static
from dokimi.runner.taskcheck import CheckOptions, TasksCheck, check_tasks
from dokimi.schemas._base import read_document
from dokimi.schemas.static import RepoStatic
from dokimi.source import open_source
from tests.helpers.evalrepo import CODE, MANIFEST, ORACLE_PATCH, TASKS, make_eval_repo

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"

BROKEN_TASKS: dict[str, tuple[str, dict[str, Any], dict[str, str]]] = {
    **TASKS,
    "null_passes": ("always_pass", {}, {}),
    "crash_grader": ("crash", {}, {}),
    "invalid_grader": ("invalid", {}, {}),
    "oracle_does_nothing": ("calc", {}, {}),
    "review_short": (
        "recall",
        {"family": "review", "score": {"metric": "recall", "max": 1.0}},
        {"gold.txt": "app/calc.py:2\napp/calc.py:1\n", "gold_answer.txt": "app/calc.py:2: wrong operator\n"},
    ),
    "needs_egress": ("calc", {"egress": ["pypi.org"]}, {"oracle.patch": ORACLE_PATCH}),
    "missing_patch": ("calc", {"setup_patches": ["nope.patch"]}, {"oracle.patch": ORACLE_PATCH}),
    "bad_task_json": ("calc", {"timeout_s": -1}, {}),
}


def _check(source: str, **options: Any) -> TasksCheck:
    with open_source(source) as repo:
        loaded = load_manifest(repo.eval_snapshot(), manifest=None, manifest_file=None, required=True)
        return check_tasks(repo, loaded, CheckOptions(**options))


def _by_task(report: TasksCheck) -> dict[str, Any]:
    return {task.task: task for task in report.tasks}


@pytest.mark.docker
def test_sound_tasks_pass_and_the_cli_exits_0_with_a_table(
    docker_available: bool, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path, _, head = make_eval_repo(tmp_path / "repo")
    out = tmp_path / "out"
    assert main(["repo", "tasks", "check", f"{path}@{head}", "--out", str(out), "-j", "2"]) == 0
    printed = capsys.readouterr().out
    assert "fix_add" in printed and "review_recall" in printed and "all tasks ok" in printed
    report = read_document(out / "tasks-check.json", TasksCheck)
    tasks = _by_task(report)
    assert report.ok and report.network == "none" and report.image.endswith(f":{head}")
    assert tasks["fix_add"].null.passed is False and tasks["fix_add"].oracle.passed is True
    assert tasks["review_recall"].null.score == 0 and tasks["review_recall"].oracle.score == 1
    assert all(check.ok for check in tasks["fix_add"].checks)
    assert {c.name for c in tasks["fix_add"].checks} >= {
        "isolation",
        "null fails the gate",
        "oracle passes the gate",
    }
    # the run directories are kept: the §4 inputs a grader read, and what it wrote
    null_dir = out / "fix_add" / "null"
    for name in ("task.json", "meta.json", "events.jsonl", "answer.txt", "grade.json", "workspace"):
        assert (null_dir / name).exists(), name
    meta = json.loads((null_dir / "meta.json").read_text())
    assert meta["arm"] == "guidance:raw" and len(meta["start_sha"]) == 40
    # a tree-pinned tag is new each session (the toy's SHAs carry the date): do not let them pile up
    subprocess.run(["docker", "rmi", report.image], capture_output=True, check=False)


@pytest.mark.docker
def test_each_broken_task_is_reported_with_its_reason_and_the_cli_exits_1(
    docker_available: bool, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path, _, _ = make_eval_repo(tmp_path / "repo", tasks=BROKEN_TASKS)
    code = main(["repo", "tasks", "check", str(path), "-j", "2", "--json"])
    assert code == 1
    report = TasksCheck.model_validate(json.loads(capsys.readouterr().out))
    tasks = _by_task(report)
    problems = {task_id: "\n".join(task.problems) for task_id, task in tasks.items()}
    status = {task_id: task.status for task_id, task in tasks.items()}
    assert status["fix_add"] == "ok" and status["review_recall"] == "ok"
    assert status["null_passes"] == "broken" and "the untouched workspace passes" in problems["null_passes"]
    assert "grader bug" in problems["crash_grader"] and "the toy grader exploded" in problems["crash_grader"]
    assert tasks["crash_grader"].null.grader_failure and tasks["crash_grader"].null.grade_stderr
    assert "invalid grade.json" in problems["invalid_grader"]
    assert "oracle passes the gate" in problems["oracle_does_nothing"]
    assert "oracle reaches score.max: recall = 0.5 (max 1)" in problems["review_short"]
    assert status["needs_egress"] == "ok"  # its entry points ran on the sealed network (tasks check egress)
    assert "workspace" in problems["missing_patch"] and "nope.patch not found" in problems["missing_patch"]
    assert status["bad_task_json"] == "broken" and "timeout_s" in problems["bad_task_json"]
    assert not report.ok


@pytest.mark.docker
def test_a_grader_key_spelled_like_a_framework_key_validates_with_a_warning_and_checks_sound(
    docker_available: bool, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """oracle_paths is the repository grader's key (it spells like oracle_patch): the contract passes it
    through unread, so validate warns with its did-you-mean and tasks check finds the task sound."""
    grader, extra, files = TASKS["fix_add"]
    tasks = {"fix_add": (grader, {**extra, "oracle_paths": ["app/calc.py"]}, files)}
    path, _, head = make_eval_repo(tmp_path / "repo", tasks=tasks)
    assert main(["repo", "validate", str(path)]) == 0
    printed = capsys.readouterr().out
    assert "warning:" in printed and "oracle_paths" in printed and "did you mean 'oracle_patch'?" in printed
    assert main(["repo", "validate", str(path), "--strict"]) == 1
    capsys.readouterr()
    out = tmp_path / "out"
    assert main(["repo", "tasks", "check", f"{path}@{head}", "--out", str(out)]) == 0
    assert "warning:" in capsys.readouterr().out
    (task,) = read_document(out / "tasks-check.json", TasksCheck).tasks
    assert task.status == "ok" and "oracle_paths" in task.warnings[0]
    subprocess.run(["docker", "rmi", read_document(out / "tasks-check.json", TasksCheck).image],
                   capture_output=True, check=False)  # fmt: skip


@pytest.mark.docker
def test_a_task_whose_name_the_agent_can_reach_fails_isolation(
    docker_available: bool, tmp_path: Path
) -> None:
    code = {**CODE, "notes/fix_add": "a file named like the task, in the base tree\n"}
    path, _, _ = make_eval_repo(tmp_path / "repo", tasks={"fix_add": TASKS["fix_add"]}, code=code)
    task = _by_task(_check(str(path)))["fix_add"]
    assert task.status == "broken"
    assert any("/eval/run/workspace/notes/fix_add" in problem for problem in task.problems)


@pytest.mark.docker
def test_warm_runs_with_a_network_and_writable_caches(docker_available: bool, tmp_path: Path) -> None:
    manifest = MANIFEST.replace(
        "  network: none\n", "  network: none\n  caches: [{name: toycache, path: /cache/toy}]\n"
    )
    path, _, _ = make_eval_repo(tmp_path / "repo", tasks={"fix_add": TASKS["fix_add"]}, manifest=manifest)
    cache = tmp_path / "cache"
    report = _check(str(path), warm=True, caches={"toycache": cache})
    assert report.ok and report.warm and report.network == "bridge"
    assert (cache / "fix_add.txt").read_text() == "filled by grade\n"
    with pytest.raises(UsageError, match="no cache named 'other'"):
        _check(str(path), caches={"other": cache})


@pytest.mark.slow
def test_a_guidance_only_manifest_cannot_be_checked(tmp_path: Path) -> None:
    path, _, _ = make_eval_repo(tmp_path / "repo", manifest="schema: repo_manifest.v1\nid: toy\n")
    with pytest.raises(UsageError, match="guidance-only"):
        _check(str(path))


@pytest.mark.docker
def test_an_unknown_task_is_a_usage_error(docker_available: bool, tmp_path: Path) -> None:
    path, _, _ = make_eval_repo(tmp_path / "repo")
    with pytest.raises(UsageError, match="--task nope"):
        _check(str(path), task_ids=["nope"])


@pytest.mark.docker
def test_the_static_entry_point_writes_a_repo_static_document(docker_available: bool, tmp_path: Path) -> None:
    path, _, _ = make_eval_repo(tmp_path / "repo")
    with open_source(str(path)) as repo:
        loaded = load_manifest(repo.eval_snapshot(), manifest=None, manifest_file=None, required=True)
        written = run_static(repo, loaded, out_dir=tmp_path / "static")
    document = read_document(written, RepoStatic)
    assert document.claims[0].file == "AGENTS.md" and document.claims[0].status == "ok"
    assert written == tmp_path / "static" / "static.json"


@pytest.mark.docker
def test_the_bundled_example_passes_tasks_check(docker_available: bool, tmp_path: Path) -> None:
    build = runpy.run_path(str(EXAMPLES / "build_example.py"))["build_example"]
    shas = build(tmp_path / "calc")
    report = _check(f"{tmp_path / 'calc'}@{shas['eval']}", jobs=2)
    assert [task.problems for task in report.tasks if task.status != "ok"] == []
    assert report.ok and len(report.tasks) >= 4


@pytest.mark.docker
def test_an_unknown_cache_is_refused_before_the_image_is_built(
    docker_available: bool, tmp_path: Path
) -> None:
    # a Dockerfile that cannot build: the --cache typo must be what the user hears about, at once
    path, _, _ = make_eval_repo(
        tmp_path / "repo",
        tasks={"fix_add": TASKS["fix_add"]},
        dockerfile="FROM dokimi-base:bookworm\nRUN exit 3\n",
    )
    with pytest.raises(UsageError, match="no cache named 'typo'"):
        _check(str(path), caches={"typo": tmp_path / "cache"})


@pytest.mark.docker
def test_scan_run_static_merges_the_entry_points_claims_and_refuses_an_invalid_document(
    docker_available: bool,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    path, _, head = make_eval_repo(tmp_path / "repo")
    scratch = tmp_path / "tmp"
    scratch.mkdir()
    monkeypatch.setenv("TMPDIR", str(scratch))
    monkeypatch.setattr(tempfile, "tempdir", None)  # read TMPDIR again
    out = tmp_path / "readiness.json"
    assert main(["repo", "scan", f"{path}@{head}", "--run-static", "--json", "--out", str(out)]) == 0
    assert list(scratch.iterdir()) == []  # the entry point's scratch directories are gone
    kept = json.loads((tmp_path / "readiness.static.json").read_text())  # the repository's own document
    assert kept["schema"] == "repo_static.v1"
    merged = json.loads(capsys.readouterr().out)
    assert merged["by_source"]["repository"] == {"fail": 0, "ok": 1, "unresolved": 0}
    assert merged["static"]["merged"] is True and merged["static"]["top_level"] == {"checker": "toy"}
    assert [(c["file"], c["claim"], c["source"]) for c in merged["claims"]] == [
        ("AGENTS.md", "app/calc.py", "repository")
    ]
    # a static entry point that writes something that is not repo_static.v1: not merged, exit 1
    bad = MANIFEST.replace(
        'static: "python3 {eval_dir}/static.py --out {out}"', "static: \"sh -c 'echo {{}} > {out}'\""
    )
    bad_path, _, bad_head = make_eval_repo(tmp_path / "bad", manifest=bad)
    assert main(["repo", "scan", f"{bad_path}@{bad_head}", "--run-static", "--json"]) == 1
    refused = json.loads(capsys.readouterr().out)
    assert "repository" not in refused["by_source"] and refused["static"]["merged"] is False
    for image in (head, bad_head):
        subprocess.run(["docker", "rmi", f"dokimi/toy:{image}"], capture_output=True, check=False)
