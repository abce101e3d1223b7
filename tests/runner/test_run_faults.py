"""repo run with real containers and a fake harness: faults, resume, pins, the batch budget, the layout.

The tiny repository and the fake harness are in tests/helpers/runs.py: no model, no Claude Code.
"""

from __future__ import annotations

import dataclasses
import json
import os
import signal
import subprocess
import sys
import threading
import time
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from dokimi.analysis.report import build_report
from dokimi.batch import cell_dir, load_batch
from dokimi.repo.arms import ARM_RAW
from dokimi.runner.run import QuietProgress, RunOptions, execute_cells, prepare_batch
from dokimi.sandbox.docker import container_names
from dokimi.source import open_source
from tests.helpers.git import commit
from tests.helpers.runs import dokimi_cli, fake_harness, remove_tiny_images, run_args, tiny_repo

pytestmark = pytest.mark.docker


@pytest.fixture
def name() -> Iterator[str]:
    """A batch name of this test only: containers are labelled with it on a daemon other tests share. The
    images the test built are removed afterwards."""
    yield f"run-{uuid.uuid4().hex[:10]}"
    remove_tiny_images()


def containers_gone(batch: str, wait_s: float = 15.0) -> bool:
    """No container of the batch is left (``--rm`` removal is asynchronous: give it a moment)."""
    deadline = time.monotonic() + wait_s
    while container_names(label=f"dokimi.batch={batch}"):
        if time.monotonic() > deadline:
            return False
        time.sleep(0.2)
    return True


def summary(proc: subprocess.CompletedProcess[str]) -> dict[str, object]:
    assert proc.stdout, proc.stderr
    data: dict[str, object] = json.loads(proc.stdout)
    return data


def result_of(batch: Path, task: str, arm: str = "guidance:raw", rep: int = 0) -> dict[str, object]:
    data: dict[str, object] = json.loads(
        (cell_dir(batch, task, arm, "m", None, rep) / "result.json").read_text()
    )
    return data


def test_a_cell_writes_the_contract_files_and_a_passing_verdict(
    docker_available: bool, tmp_path: Path, name: str
) -> None:
    tiny = tiny_repo(tmp_path / "tiny")
    profile, binary = fake_harness(tmp_path / "harness")
    proc = dokimi_cli(run_args(tiny, tmp_path / "out", name, profile, binary, "--json"))
    assert proc.returncode == 0, proc.stderr
    batch = tmp_path / "out" / name
    run_dir = cell_dir(batch, "fix_f", "guidance:raw", "m", None, 0)
    for entry in ("task.json", "meta.json", "events.jsonl", "answer.txt", "agent.stdout", "grade.json"):
        assert (run_dir / entry).is_file(), entry
    result = result_of(batch, "fix_f")
    assert result["passed"] is True and result["harness_version"] == "1.0.0"
    assert result["cost_usd"] is None and result["agent_rc"] == 0
    meta = json.loads((run_dir / "meta.json").read_text())
    assert meta["base_sha"] == tiny.base and meta["batch"] == name and meta["agent_network"] is None
    assert (run_dir / "answer.txt").read_text().startswith("done: EDIT")
    pin = json.loads((batch / "_eval" / "batch.json").read_text())
    assert pin["tree"] == tiny.eval_sha and pin["image"] == f"dokimi/runner-tiny:{tiny.eval_sha}"
    plan = json.loads((batch / "_eval" / "plan.json").read_text())
    assert plan["cells"] == [
        {"task": "fix_f", "arm": "guidance:raw", "model": "m", "effort": None, "rep": 0, "prompt": None}
    ]
    assert (batch / "_eval" / "content" / "grade.py").is_file()
    assert not (batch / "_eval" / "content" / "tasks" / "fix_f" / "task.json").is_symlink()
    assert containers_gone(name)


def test_a_harness_past_its_timeout_is_still_graded(
    docker_available: bool, tmp_path: Path, name: str
) -> None:
    tiny = tiny_repo(tmp_path / "tiny", {"fix_f": {"prompt": "SLEEP", "timeout_s": 2}})
    profile, binary = fake_harness(tmp_path / "harness")
    proc = dokimi_cli(run_args(tiny, tmp_path / "out", name, profile, binary, "--json"))
    assert proc.returncode == 0, proc.stderr
    result = result_of(tmp_path / "out" / name, "fix_f")
    assert result["agent_timed_out"] is True and result["agent_rc"] is None
    assert result["grader_failure"] is False and result["passed"] is False  # graded: f.txt unchanged
    assert (cell_dir(tmp_path / "out" / name, "fix_f", "guidance:raw", "m", None, 0) / "grade.json").is_file()
    assert containers_gone(name)


def test_a_crashing_grader_is_a_grader_failure_counted_as_a_failure(
    docker_available: bool, tmp_path: Path, name: str
) -> None:
    tiny = tiny_repo(tmp_path / "tiny", {"fix_f": {"grader": "crash"}})
    profile, binary = fake_harness(tmp_path / "harness")
    proc = dokimi_cli(run_args(tiny, tmp_path / "out", name, profile, binary, "--json"))
    assert proc.returncode == 0, proc.stderr
    result = result_of(tmp_path / "out" / name, "fix_f")
    assert result["grader_failure"] is True and result["passed"] is False
    assert "grade exited 3" in str(result["grader_error"])
    assert result["gate_results"] == {"pass": False}
    report = build_report(load_batch(tmp_path / "out" / name))
    (row,) = report.rows
    assert (row.finished, row.gated, row.passes, row.grader_failures) == (1, 1, 0, 1)


def test_a_host_side_failure_after_the_agent_ran_is_a_grader_failure_charged_its_cap(
    docker_available: bool, tmp_path: Path, name: str
) -> None:
    # contract §4.2: a failure on the host after the agent ran (here its trace cannot be converted) gets a
    # grader-failure result.json, a failure on every gated metric, and the batch is charged the cell's cap.
    tiny = tiny_repo(tmp_path / "tiny")
    profile, binary = fake_harness(tmp_path / "harness")
    opts = RunOptions(
        source=tiny.source(), manifest=".agent-eval/repo-eval.yaml", arms=(ARM_RAW,), models=("m",),
        reps=1, batch=name, out=tmp_path / "out", harness=str(profile), bin=str(binary), budget_usd=0.75,
        allow_unchecked=True,
    )  # fmt: skip
    with open_source(opts.source) as repo:
        prepared = prepare_batch(opts, repo, cancel=threading.Event(), progress=QuietProgress())
        unconvertible = prepared.ctx.profile.model_copy(update={"trace": "no-such-converter"})
        broken = dataclasses.replace(prepared, ctx=dataclasses.replace(prepared.ctx, profile=unconvertible))
        (outcome,), ledger, _ = execute_cells(
            broken, jobs=1, max_batch_usd=None, budget_usd=0.75, progress=QuietProgress()
        )
    assert outcome.status == "finished" and outcome.result is not None
    result = result_of(tmp_path / "out" / name, "fix_f")
    assert result["grader_failure"] is True and result["passed"] is False
    assert result["gate_results"] == {"pass": False} and result["agent_rc"] == 0
    assert str(result["grader_error"]).startswith("host-side failure after the agent ran: unknown trace")
    assert (outcome.charged_usd, ledger.spent_usd) == (0.75, 0.75)
    assert containers_gone(name)


@pytest.mark.parametrize(("signum", "returncode"), [(signal.SIGTERM, -signal.SIGTERM), (signal.SIGINT, 130)])
def test_a_killed_batch_keeps_its_finished_cells_and_a_rerun_fills_only_the_missing(
    docker_available: bool, tmp_path: Path, name: str, signum: signal.Signals, returncode: int
) -> None:
    tiny = tiny_repo(tmp_path / "tiny", {"fix_f": {"prompt": "SLOW EDIT"}})
    profile, binary = fake_harness(tmp_path / "harness")
    args = run_args(tiny, tmp_path / "out", name, profile, binary, "--json", reps=4)
    batch = tmp_path / "out" / name
    proc = subprocess.Popen(
        [sys.executable, "-m", "dokimi", *args], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
    )
    deadline = time.monotonic() + 300
    while not list(batch.glob("fix_f/*/*/*/rep*/result.json")):
        assert proc.poll() is None, proc.communicate()
        assert time.monotonic() < deadline
        time.sleep(0.2)
    proc.send_signal(signum)  # SIGINT: what Ctrl-C sends; SIGTERM: timeout(1), a CI cancel
    _, stderr = proc.communicate(timeout=120)
    assert proc.returncode == returncode, stderr
    assert "Run the same command again" in stderr
    done = sorted(p.parent for p in batch.glob("fix_f/*/*/*/rep*/result.json"))
    assert 1 <= len(done) < 4
    assert containers_gone(name)
    stamps = {p: (p / "result.json").stat().st_mtime_ns for p in done}

    rerun = dokimi_cli(args)
    assert rerun.returncode == 0, rerun.stderr
    data = summary(rerun)
    assert (data["skipped"], data["ran"]) == (len(done), 4 - len(done))
    assert {p: (p / "result.json").stat().st_mtime_ns for p in done} == stamps
    assert len(load_batch(batch).finished()) == 4


def test_a_batch_started_from_another_eval_tree_is_refused(
    docker_available: bool, tmp_path: Path, name: str
) -> None:
    tiny = tiny_repo(tmp_path / "tiny")
    profile, binary = fake_harness(tmp_path / "harness")
    first = dokimi_cli(run_args(tiny, tmp_path / "out", name, profile, binary))
    assert first.returncode == 0, first.stderr
    newer = commit(tiny.path, "grader change", files={".agent-eval/oracle.py": "# changed\n"})
    refused = dokimi_cli(run_args(tiny, tmp_path / "out", name, profile, binary, rev=newer, reps=2))
    assert refused.returncode == 2
    assert tiny.eval_sha in refused.stderr and newer in refused.stderr
    content = tmp_path / "out" / name / "_eval" / "content"
    assert (content / "oracle.py").read_text() != "# changed\n"  # the batch's eval content is untouched
    assert not list((tmp_path / "out" / name / "_eval").glob(".content*"))
    assert not cell_dir(tmp_path / "out" / name, "fix_f", "guidance:raw", "m", None, 1).exists()
    args = run_args(tiny, tmp_path / "out", name, profile, binary, reps=2)
    args[2] = str(tiny.path)  # the working tree (at the newer commit): compared by digests
    worktree = dokimi_cli(args)
    assert worktree.returncode == 2 and "pinned to another eval tree" in worktree.stderr


def test_a_real_run_refuses_a_broken_task_whose_tasks_check_wrote_to_another_out(
    docker_available: bool, tmp_path: Path, name: str
) -> None:
    """tasks check keeps its verdicts in dokimi's cache, keyed by what it checked, so a real run with another
    --out (or after a check whose report went to a temporary directory) still refuses the broken task and
    runs the sound one; --allow-unchecked runs it anyway, and batch.json says so. (A dry run is not held
    back: tests/e2e/test_batch_e2e.py dry-runs tasks no check ever saw.)"""
    tiny = tiny_repo(tmp_path / "tiny", {"fix_f": {}, "always_f": {"grader": "always"}})
    check = dokimi_cli(["repo", "tasks", "check", tiny.source(), "--out", str(tmp_path / "check"), "--json"])
    assert check.returncode == 1, check.stderr  # always_f: the untouched workspace passes
    assert {t["task"]: t["status"] for t in json.loads(check.stdout)["tasks"]} == {
        "fix_f": "ok", "always_f": "broken"
    }  # fmt: skip
    profile, binary = fake_harness(tmp_path / "harness")
    out = tmp_path / "runs"  # not the check's --out
    refused = dokimi_cli(run_args(tiny, out, name, profile, binary, checked=True))
    assert refused.returncode == 2, refused.stderr
    broken = "always_f: broken in repo tasks check: null fails the gate: the untouched workspace"
    assert broken in refused.stderr
    assert f"dokimi repo tasks check {tiny.source()} --task always_f" in refused.stderr
    assert "fix_f" not in refused.stderr.split("check them with")[0]  # the sound task is admitted
    assert not (out / name / "_eval" / "batch.json").exists()  # a refused batch pins nothing

    sound = dokimi_cli([*run_args(tiny, out, name, profile, binary, checked=True), "--task", "fix_f"])
    assert sound.returncode == 0, sound.stderr
    assert json.loads((out / name / "_eval" / "batch.json").read_text())["unchecked"] == {}

    anyway = dokimi_cli(run_args(tiny, out, f"{name}-anyway", profile, binary))  # --allow-unchecked
    assert anyway.returncode == 0, anyway.stderr
    assert "--allow-unchecked: running 1 task(s)" in anyway.stderr
    pin = json.loads((out / f"{name}-anyway" / "_eval" / "batch.json").read_text())
    assert list(pin["unchecked"]) == ["always_f"] and "broken" in pin["unchecked"]["always_f"]


def test_a_task_carrying_both_prompt_variants_runs_either_as_a_cell_dimension(
    docker_available: bool, tmp_path: Path, name: str
) -> None:
    """prompt (spec style, it names the edit) and prompt_issue (as an issue is filed, it does not): repo run
    --prompt-style spec,issue runs both, each cell in its own directory, and the report splits them. A task
    that lacks a variant asked for is refused before anything runs."""
    tiny = tiny_repo(
        tmp_path / "tiny",
        {"fix_f": {"prompt": "EDIT f.txt to read after", "prompt_issue": "f.txt says the wrong thing"},
         "only_spec": {}},
    )  # fmt: skip
    profile, binary = fake_harness(tmp_path / "harness")
    args = run_args(tiny, tmp_path / "out", name, profile, binary, "--prompt-style", "spec,issue")
    refused = dokimi_cli(args)
    assert refused.returncode == 2 and "task only_spec has no issue-style prompt" in refused.stderr

    done = dokimi_cli([*args, "--task", "fix_f", "--json"])
    assert done.returncode == 0, done.stderr
    groups = {g["prompt"]: (g["passed"], g["graded"]) for g in json.loads(done.stdout)["groups"]}
    assert groups == {"spec": (1, 1), "issue": (0, 1)}
    batch = tmp_path / "out" / name
    for style, passed in (("spec", True), ("issue", False)):
        run_dir = cell_dir(batch, "fix_f", "guidance:raw", "m", None, 0, prompt=style)
        assert run_dir.name == "rep0" and run_dir.parents[2].name == f"guidance_raw.prompt-{style}"
        result = json.loads((run_dir / "result.json").read_text())
        assert (result["prompt_variant"], result["prompt_style"], result["passed"]) == (style, style, passed)
        assert json.loads((run_dir / "meta.json").read_text())["prompt_variant"] == style
    rows = {r.prompt_style: r.passes for r in build_report(load_batch(batch)).rows}
    assert rows == {"spec": 1, "issue": 0}


def test_a_guidance_edit_is_refused_in_an_existing_batch_naming_the_file_and_the_way_out(
    docker_available: bool, tmp_path: Path, name: str
) -> None:
    """guidance:tree puts today's guidance onto every base: editing AGENTS.md and running the same batch again
    would mix two versions of the arm. It is refused as a prompt change is, naming the file that changed
    (the old run accepted it silently: only "distinct files 2" in the report showed it)."""
    tiny = tiny_repo(tmp_path / "tiny")
    commit(tiny.path, "guidance", files={"AGENTS.md": "# rules\nRun the tests.\n"})
    profile, binary = fake_harness(tmp_path / "harness")
    args = run_args(tiny, tmp_path / "out", name, profile, binary, arms="guidance:tree")
    args[2] = str(tiny.path)  # the working tree: what a user edits
    first = dokimi_cli(args)
    assert first.returncode == 0, first.stderr
    pin = json.loads((tmp_path / "out" / name / "_eval" / "batch.json").read_text())
    assert [f["path"] for f in pin["guidance"]["guidance:tree"]] == ["AGENTS.md"]

    (tiny.path / "AGENTS.md").write_text("# rules\nRun the tests twice.\n")
    refused = dokimi_cli([*args, "--reps", "2"])
    assert refused.returncode == 2, refused.stderr
    assert "pinned to the guidance its arms started with" in refused.stderr
    assert "guidance of guidance:tree: AGENTS.md changed (blob" in refused.stderr
    assert "start a new batch" in refused.stderr
    assert not cell_dir(tmp_path / "out" / name, "fix_f", "guidance_tree", "m", None, 1).exists()


def test_a_batch_whose_agent_container_could_see_a_task_name_is_refused_before_any_cell(
    docker_available: bool, tmp_path: Path, name: str
) -> None:
    # contract §9: the isolation probe runs with the agent's mounts before the batch; an image that holds an
    # entry named like a task (here /opt/fix_f) fails it, and no cell starts.
    tiny = tiny_repo(tmp_path / "tiny")
    leaky = commit(
        tiny.path,
        "leak a task name",
        files={".agent-eval/Dockerfile": "FROM dokimi-base:bookworm\nRUN mkdir /opt/fix_f\n"},
    )
    profile, binary = fake_harness(tmp_path / "harness")
    proc = dokimi_cli(run_args(tiny, tmp_path / "out", name, profile, binary, rev=leaky))
    assert proc.returncode == 2, proc.stderr
    assert "isolation probe failed" in proc.stderr and "fix_f" in proc.stderr
    assert not (tmp_path / "out" / name / "fix_f").exists()
    assert containers_gone(name)


def test_the_batch_budget_starts_no_cell_whose_cap_does_not_fit(
    docker_available: bool, tmp_path: Path, name: str
) -> None:
    tiny = tiny_repo(tmp_path / "tiny")
    profile, binary = fake_harness(tmp_path / "harness")
    # The fake harness reports no cost, so each cell is charged its cap (--budget 1): after one cell the
    # batch has spent 1, another cap of 1 would make 2 > 1.5, and the last three cells never start.
    args = run_args(tiny, tmp_path / "out", name, profile, binary, "--json", "--budget", "1", reps=4)
    proc = dokimi_cli([*args, "--max-batch-usd", "1.5", "-j", "2"])
    assert proc.returncode == 1, proc.stderr
    data = summary(proc)
    assert (data["ran"], data["not_started"], data["stopped_by_budget"]) == (1, 3, True)
    assert data["spent_usd"] == 1.0
    again = dokimi_cli([*args, "--max-batch-usd", "1.5"])
    assert again.returncode == 1 and summary(again)["ran"] == 0  # the batch spent its budget already


def test_a_task_with_egress_is_refused_when_the_run_is_not_sealed(
    docker_available: bool, tmp_path: Path, name: str
) -> None:
    tiny = tiny_repo(tmp_path / "tiny", {"fix_f": {"egress": ["pypi.org"]}})
    profile, binary = fake_harness(tmp_path / "harness")
    proc = dokimi_cli(run_args(tiny, tmp_path / "out", name, profile, binary))
    assert proc.returncode == 2 and "--agent-network" in proc.stderr
    assert not (tmp_path / "out" / name / "_eval").exists()  # refused before any work (the lock file aside)


def test_the_agent_network_is_recorded_and_warned_about(
    docker_available: bool, tmp_path: Path, name: str
) -> None:
    tiny = tiny_repo(tmp_path / "tiny")
    profile, binary = fake_harness(tmp_path / "harness")
    proc = dokimi_cli(run_args(tiny, tmp_path / "out", name, profile, binary, "--agent-network", "bridge"))
    assert proc.returncode == 0, proc.stderr
    assert "warning: --agent-network bridge" in proc.stderr
    run_dir = cell_dir(tmp_path / "out" / name, "fix_f", "guidance:raw", "m", None, 0)
    assert json.loads((run_dir / "meta.json").read_text())["agent_network"] == "bridge"
    assert result_of(tmp_path / "out" / name, "fix_f")["agent_network"] == "bridge"


def test_regrade_flags_the_metric_a_nondeterministic_grader_moved(
    docker_available: bool, tmp_path: Path, name: str
) -> None:
    tiny = tiny_repo(tmp_path / "tiny", {"steady_task": {}, "noisy_task": {"grader": "random"}})
    profile, binary = fake_harness(tmp_path / "harness")
    assert dokimi_cli(run_args(tiny, tmp_path / "out", name, profile, binary)).returncode == 0
    batch = tmp_path / "out" / name
    originals = {p: p.read_bytes() for p in batch.glob("*/*/*/*/rep0/*.json")}
    proc = dokimi_cli(["repo", "regrade", str(batch), "--json"])
    assert proc.returncode == 1, proc.stderr
    data = json.loads(proc.stdout)
    cells = {c["cell"].split("/")[0]: c for c in data["cells"]}
    assert cells["steady_task"]["matches"] is True, cells
    assert [m["what"] for m in cells["noisy_task"]["mismatches"]] == ["metric:noise"]
    assert {p: p.read_bytes() for p in batch.glob("*/*/*/*/rep0/*.json")} == originals
    assert (batch / "_eval" / "regrade" / cells["noisy_task"]["cell"] / "grade.json").is_file()
    one = dokimi_cli(["repo", "regrade", str(batch), "--sample", "1", "--seed", "7", "--json"])
    assert json.loads(one.stdout)["regraded"] == 1


def test_regrade_from_files_recomputes_every_verdict_without_a_container_and_flags_an_edited_grade(
    docker_available: bool, tmp_path: Path, name: str
) -> None:
    tiny = tiny_repo(tmp_path / "tiny", {"steady_task": {}, "noisy_task": {"grader": "random"}})
    profile, binary = fake_harness(tmp_path / "harness")
    assert dokimi_cli(run_args(tiny, tmp_path / "out", name, profile, binary)).returncode == 0
    batch = tmp_path / "out" / name
    same = dokimi_cli(["repo", "regrade", str(batch), "--from-files", "--json"])
    assert same.returncode == 0, same.stdout + same.stderr
    data = json.loads(same.stdout)
    assert (data["regraded"], data["mismatched"], data["errors"]) == (2, 0, 0)
    assert not (batch / "_eval" / "regrade").exists()  # no scratch copy: nothing ran
    steady = cell_dir(batch, "steady_task", "guidance:raw", "m", None, 0)
    grade = json.loads((steady / "grade.json").read_text())
    assert json.loads((steady / "grade_run.json").read_text())["failure"] is None
    grade["pass"] = not grade["pass"]
    (steady / "grade.json").write_text(json.dumps(grade))
    moved = dokimi_cli(["repo", "regrade", str(batch), "--from-files", "--json"])
    assert moved.returncode == 1
    cells = {c["cell"].split("/")[0]: c for c in json.loads(moved.stdout)["cells"]}
    assert "passed" in [m["what"] for m in cells["steady_task"]["mismatches"]]
    assert cells["noisy_task"]["matches"] is True


def test_a_working_tree_batch_is_pinned_by_its_digests_and_refuses_an_edited_eval_dir(
    docker_available: bool, tmp_path: Path, name: str
) -> None:
    tiny = tiny_repo(tmp_path / "tiny", {"fix_f": {}})
    profile, binary = fake_harness(tmp_path / "harness")
    args = run_args(tiny, tmp_path / "out", "w", profile, binary, "--json")
    args[2] = str(tiny.path)  # the working tree, no revision: pinned by digests
    proc = dokimi_cli(args)
    assert proc.returncode == 0, proc.stderr
    pin = json.loads((tmp_path / "out" / "w" / "_eval" / "batch.json").read_text())
    assert pin["tree"] is None and pin["image_pin"] == "digest" and pin["image_context_digest"]
    (tiny.path / ".agent-eval" / "grade.py").write_text("# edited, not committed\n" + os.linesep)
    refused = dokimi_cli(args)
    assert refused.returncode == 2 and "eval_dir digest" in refused.stderr
