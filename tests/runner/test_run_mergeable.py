"""repo run's framework metrics: mergeable for tasks with a rubric.json (the diff taken before grade, scope)
and perf_* for tasks with a perf object, each a metric a gate can name.

Real containers and the fake harness of tests/helpers/runs.py (its EDIT prompt writes "after" to f.txt); no
judge model, so a run that passes every deterministic check is not measured (mergeable null), never true.
"""

from __future__ import annotations

import json
import subprocess
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from dokimi.batch import cell_dir
from tests.helpers.git import commit
from tests.helpers.runs import dokimi_cli, fake_harness, remove_tiny_images, run_args, tiny_repo

pytestmark = pytest.mark.docker


def rubric(task: str, allowed: list[str]) -> str:
    doc: dict[str, Any] = {
        "schema": "repo_rubric.v1",
        "task": task,
        "intent": "f.txt says after",
        "scope": {"allowed_globs": allowed, "denied_globs": [".agent-eval/**"], "max_files": 2},
        "blockers": [{"id": "B1", "criterion": "f.txt holds exactly 'after'", "rationale": "the task",
                      "evidence": "f.txt:1"}],
        "non_blockers": [],
        "hack_report": {"lazy_solution": "none", "alt_valid_solution": "none"},
    }  # fmt: skip
    return json.dumps(doc, indent=2) + "\n"


@pytest.fixture
def name() -> Iterator[str]:
    yield f"merge-{uuid.uuid4().hex[:10]}"
    remove_tiny_images()


def test_mergeable_is_measured_from_the_agent_diff_and_gates_the_run(
    docker_available: bool, tmp_path: Path, name: str
) -> None:
    gate = ["pass", "mergeable"]
    tiny = tiny_repo(tmp_path / "tiny", {"out_of_scope": {"gate": gate}, "in_scope": {"gate": gate}})
    eval_sha = commit(
        tiny.path,
        "rubrics",
        files={
            ".agent-eval/tasks/out_of_scope/rubric.json": rubric("out_of_scope", ["docs/**"]),
            ".agent-eval/tasks/in_scope/rubric.json": rubric("in_scope", ["*.txt"]),
        },
    )
    profile, binary = fake_harness(tmp_path / "harness")
    proc = dokimi_cli(run_args(tiny, tmp_path / "out", name, profile, binary, "--json", rev=eval_sha))
    assert proc.returncode == 0, proc.stderr
    batch = tmp_path / "out" / name

    out_dir = cell_dir(batch, "out_of_scope", "guidance:raw", "m", None, 0)
    result = json.loads((out_dir / "result.json").read_text())
    assert result["metrics"]["changed"] is True  # the tests pass ...
    assert result["metrics"]["mergeable"] is False and result["metrics"]["merge_score"] == 0.0
    assert result["gate_results"] == {"pass": True, "mergeable": False}
    assert result["passed"] is False  # ... and the change is still not mergeable: it left its scope
    merge = json.loads((out_dir / "merge.json").read_text())
    assert any("f.txt" in reason and "scope" in reason for reason in merge["reasons"]), merge["reasons"]
    assert "+after" in (out_dir / "workspace.diff").read_text()
    changed = json.loads((out_dir / "workspace_diff.json").read_text())["files"]
    assert [f["new_path"] for f in changed] == ["f.txt"]

    in_dir = cell_dir(batch, "in_scope", "guidance:raw", "m", None, 0)
    result = json.loads((in_dir / "result.json").read_text())
    assert result["metrics"]["mergeable"] is None  # no judge: not measured, never true
    assert result["passed"] is False
    assert json.loads((in_dir / "merge.json").read_text())["reasons"] == ["the judge was not run"]

    # regrade tests the grader alone: the framework's mergeable is carried over, so nothing moved
    regrade = dokimi_cli(["repo", "regrade", str(batch), "--json"])
    assert regrade.returncode == 0, regrade.stdout + regrade.stderr


def test_a_task_without_a_rubric_reports_no_mergeable_and_still_keeps_the_diff(
    docker_available: bool, tmp_path: Path, name: str
) -> None:
    tiny = tiny_repo(tmp_path / "tiny")
    profile, binary = fake_harness(tmp_path / "harness")
    proc = dokimi_cli(run_args(tiny, tmp_path / "out", name, profile, binary, "--json"))
    assert proc.returncode == 0, proc.stderr
    run_dir = cell_dir(tmp_path / "out" / name, "fix_f", "guidance:raw", "m", None, 0)
    result = json.loads((run_dir / "result.json").read_text())
    assert result["passed"] is True and "mergeable" not in result["metrics"]
    assert not (run_dir / "merge.json").exists()
    # the agent's diff is kept for every cell: it is the first thing a reader of the report opens
    assert "diff --git" in (run_dir / "workspace.diff").read_text()


def test_the_judge_model_must_be_a_full_id(docker_available: bool, tmp_path: Path, name: str) -> None:
    tiny = tiny_repo(tmp_path / "tiny")
    profile, binary = fake_harness(tmp_path / "harness")
    proc = dokimi_cli(run_args(tiny, tmp_path / "out", name, profile, binary, "--judge-model", "sonnet"))
    assert proc.returncode == 2
    assert "sonnet" in proc.stderr and "full model id" in proc.stderr


PERF_BENCH = """\
import argparse, json, os, time
parser = argparse.ArgumentParser()
parser.add_argument("--variant", required=True)
parser.add_argument("--out", required=True)
args = parser.parse_args()
values = []
for _ in range(int(os.environ["DOKIMI_PERF_REPEATS"])):
    started = time.perf_counter()
    time.sleep(0.03)
    values.append(time.perf_counter() - started)
with open(args.out, "w") as out:
    json.dump({"schema": "repo_perf.v1", "metric": "time", "unit": "s", "variant": args.variant,
               "values": values}, out)
"""


def test_a_task_with_a_perf_object_gets_perf_metrics_it_can_gate_on(
    docker_available: bool, tmp_path: Path, name: str
) -> None:
    perf = {"metric": "time", "tolerance": 1.5, "repeats": 3, "rounds": 2}
    tiny = tiny_repo(tmp_path / "tiny", {"fast": {"gate": ["pass", "perf_pass"], "perf": perf}})
    manifest = (tiny.path / ".agent-eval" / "repo-eval.yaml").read_text()
    manifest = manifest.replace(
        "entry_points:\n",
        'entry_points:\n  perf: "python3 {eval_dir}/bench.py --variant {variant} --out {out}"\n',
    )
    eval_sha = commit(
        tiny.path,
        "perf entry point",
        files={".agent-eval/repo-eval.yaml": manifest, ".agent-eval/bench.py": PERF_BENCH},
    )
    profile, binary = fake_harness(tmp_path / "harness")
    proc = dokimi_cli(run_args(tiny, tmp_path / "out", name, profile, binary, "--json", rev=eval_sha))
    assert proc.returncode == 0, proc.stderr
    run_dir = cell_dir(tmp_path / "out" / name, "fast", "guidance:raw", "m", None, 0)
    result = json.loads((run_dir / "result.json").read_text())
    assert result["metrics"]["perf_pass"] is True, (run_dir / "perf" / "check.json").read_text()
    ratio = result["metrics"]["perf_ratio"]
    assert isinstance(ratio, float) and 0.5 < ratio < 1.5
    assert result["gate_results"] == {"pass": True, "perf_pass": True} and result["passed"] is True
    assert (run_dir / "perf" / "check.json").is_file()


def test_tasks_check_passes_tasks_gated_on_mergeable_and_on_perf_pass(
    docker_available: bool, tmp_path: Path, name: str
) -> None:
    """tasks check grades the null and oracle workspaces as a cell is graded, so mergeable (scope and test
    integrity; no model call) and perf_pass are measured: the oracle passes both gates, the null fails."""
    perf = {"metric": "time", "tolerance": 1.5, "repeats": 3, "rounds": 2}
    tiny = tiny_repo(
        tmp_path / "tiny",
        {
            "merge_gated": {"gate": ["pass", "mergeable"]},
            "perf_gated": {"gate": ["pass", "perf_pass"], "perf": perf},
        },
    )
    manifest = (tiny.path / ".agent-eval" / "repo-eval.yaml").read_text()
    manifest = manifest.replace(
        "entry_points:\n",
        'entry_points:\n  perf: "python3 {eval_dir}/bench.py --variant {variant} --out {out}"\n',
    )
    # an image of its own: other test sessions on this daemon remove the runner-tiny images when they end
    manifest = manifest.replace("id: runner-tiny", f"id: tasks-check-{name}")
    eval_sha = commit(
        tiny.path,
        "rubric and perf",
        files={
            ".agent-eval/tasks/merge_gated/rubric.json": rubric("merge_gated", ["*.txt"]),
            ".agent-eval/repo-eval.yaml": manifest,
            ".agent-eval/bench.py": PERF_BENCH,
        },
    )
    out = tmp_path / "check"
    proc = dokimi_cli(
        ["repo", "tasks", "check", tiny.source(eval_sha), "--manifest", ".agent-eval/repo-eval.yaml",
         "--out", str(out), "--json"]
    )  # fmt: skip
    assert proc.returncode == 0, proc.stdout + proc.stderr
    reports = {t["task"]: t for t in json.loads(proc.stdout)["tasks"]}
    merge_gated, perf_gated = reports["merge_gated"], reports["perf_gated"]
    assert merge_gated["status"] == "ok" and perf_gated["status"] == "ok", (merge_gated, perf_gated)
    assert merge_gated["oracle"]["gate_results"] == {"pass": True, "mergeable": True}
    assert merge_gated["null"]["passed"] is False and merge_gated["null"]["metrics"]["mergeable"] is False
    assert perf_gated["oracle"]["gate_results"] == {"pass": True, "perf_pass": True}
    oracle_merge = json.loads((out / "merge_gated" / "oracle" / "merge.json").read_text())
    assert oracle_merge["schema"] == "repo_merge.v1" and oracle_merge["mergeable"] is True
    assert json.loads((out / "perf_gated" / "oracle" / "perf" / "check.json").read_text())["passed"] is True
    subprocess.run(
        ["docker", "rmi", "-f", json.loads(proc.stdout)["image"]], capture_output=True, check=False
    )


def test_tasks_check_breaks_a_task_with_a_rubric_whose_tests_list_fails_on_the_base(
    docker_available: bool, tmp_path: Path, name: str
) -> None:
    """A batch compares every run's test ids with the base's: tasks check runs tests.list on the untouched
    workspace, and a command that fails there (or lists nothing) is a repository bug, reported before any
    paid run."""
    tiny = tiny_repo(tmp_path / "tiny", {"merge_gated": {"gate": ["pass", "mergeable"]}})
    manifest = (tiny.path / ".agent-eval" / "repo-eval.yaml").read_text()
    manifest = manifest.replace("id: runner-tiny", f"id: tasks-check-{name}")
    failing = manifest + "tests:\n  list: \"python3 -c 'import sys; sys.exit(3)'\"\n"
    listing = manifest + 'tests:\n  list: "python3 -c \'print(\\"case_a\\")\'"\n'
    rubric_file = {".agent-eval/tasks/merge_gated/rubric.json": rubric("merge_gated", ["*.txt"])}
    check = ["repo", "tasks", "check", "--manifest", ".agent-eval/repo-eval.yaml", "--json"]
    images: list[str] = []
    try:
        eval_sha = commit(
            tiny.path, "failing list", files={**rubric_file, ".agent-eval/repo-eval.yaml": failing}
        )
        proc = dokimi_cli([*check[:3], tiny.source(eval_sha), *check[3:]])
        assert proc.returncode == 1, proc.stdout + proc.stderr
        images.append(json.loads(proc.stdout)["image"])
        (report,) = json.loads(proc.stdout)["tasks"]
        assert report["status"] == "broken"
        assert report["problems"] == ["null: tests.list: tests.list exited 3"], report["problems"]

        eval_sha = commit(tiny.path, "listing", files={".agent-eval/repo-eval.yaml": listing})
        proc = dokimi_cli([*check[:3], tiny.source(eval_sha), *check[3:]])
        assert proc.returncode == 0, proc.stdout + proc.stderr
        images.append(json.loads(proc.stdout)["image"])
        (report,) = json.loads(proc.stdout)["tasks"]
        listed = next(c for c in report["checks"] if c["name"] == "null: tests.list")
        assert listed == {"name": "null: tests.list", "ok": True, "detail": "1 test id"}
    finally:
        if images:
            subprocess.run(["docker", "rmi", "-f", *images], capture_output=True, check=False)
