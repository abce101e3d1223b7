"""The perf check in real containers (agent-modes §3): a toy benchmark sleeps in proportion to a cost written
in the workspace, so the candidate's tree decides its speed. A 3x slowdown fails, equal speed passes."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from dokimi.checks.perf.spec import TaskPerf
from dokimi.constants import BASE_IMAGE
from dokimi.grading.environment import GradeEnvironment
from dokimi.grading.perf import PerfCheck, oracle_variant_dir, perf_argv, run_perf_check
from dokimi.sandbox.specs import ContainerSettings
from dokimi.schemas.manifest import EntryPoints
from dokimi.schemas.task import Task

BENCH = """\
import argparse, json, os, time
parser = argparse.ArgumentParser()
parser.add_argument("--variant", required=True)
parser.add_argument("--out", required=True)
args = parser.parse_args()
cost = float(open("cost.txt").read())
size = json.loads(os.environ.get("DOKIMI_PERF_SIZE", "null"))
scale = size["n"] if size else 1
values = []
for _ in range(int(os.environ["DOKIMI_PERF_REPEATS"])):
    started = time.perf_counter()
    time.sleep(0.04 * cost * scale)
    values.append(time.perf_counter() - started)
with open(args.out, "w") as out:
    json.dump({"schema": "repo_perf.v1", "metric": "time", "unit": "s", "variant": args.variant,
               "values": values, "size": size}, out)
"""
COMMAND = "python3 {eval_dir}/bench.py --variant {variant} --out {out}"
PERF = TaskPerf(metric="time", tolerance=1.5, repeats=3, rounds=2)


def cell(tmp_path: Path, candidate_cost: float) -> tuple[Path, Path, Path]:
    content = tmp_path / "content"
    content.mkdir(parents=True)
    (content / "bench.py").write_text(BENCH)
    run_dir = tmp_path / "cell"
    (run_dir / "workspace").mkdir(parents=True)
    (run_dir / "workspace" / "cost.txt").write_text(str(candidate_cost))
    oracle = oracle_variant_dir(run_dir)
    (oracle / "workspace").mkdir(parents=True)
    (oracle / "workspace" / "cost.txt").write_text("1")
    return content, run_dir, oracle


def check(
    tmp_path: Path, candidate_cost: float, perf: TaskPerf = PERF, command: str = COMMAND
) -> tuple[PerfCheck, Path]:
    content, run_dir, oracle = cell(tmp_path, candidate_cost)
    task = Task.model_validate(
        {"id": "toy", "family": "fix", "base": "b" * 40, "prompt": "p", "grader": "g",
         "perf": perf.model_dump(mode="json", exclude_none=True)}
    )  # fmt: skip
    environment = GradeEnvironment(
        containers=ContainerSettings(BASE_IMAGE, None, "none"),
        eval_content=content,
        source_dir=None,
        entry_points=EntryPoints(grade="true", oracle="true", perf=command),
    )
    result = run_perf_check(
        environment,
        run_dir,
        task,
        oracle_run_dir=oracle,
        name=f"dokimi-test-perf-{tmp_path.name}",
        seed=1,
        noise_floor=0.25,  # a shared test machine; the protocol's default is 5%
    )
    return result, run_dir


@pytest.mark.docker
def test_a_3x_slower_candidate_fails_the_perf_check(docker_available: bool, tmp_path: Path) -> None:
    result, run_dir = check(tmp_path, candidate_cost=3)
    assert result.invocations == 6
    assert result.metrics["perf_pass"] is False, result.report.reason
    ratio = result.metrics["perf_ratio"]
    # 3x nominal; a loaded machine oversleeps (the host decides how much), which narrows it
    assert isinstance(ratio, float) and PERF.tolerance < ratio < 6
    stored = json.loads((run_dir / "perf" / "check.json").read_text())
    assert stored["passed"] is False and len(stored["plan"]) == 2 and stored["metrics"]["perf_pass"] is False
    assert "== r0-s-candidate (candidate) ==" in (run_dir / "perf.stdout").read_text()


@pytest.mark.docker
def test_a_candidate_as_fast_as_the_oracle_passes(docker_available: bool, tmp_path: Path) -> None:
    result, _ = check(tmp_path, candidate_cost=1)
    assert result.metrics["perf_pass"] is True, result.report.reason
    assert all(r.valid for s in result.report.sizes for r in s.rounds)


@pytest.mark.docker
def test_a_candidate_whose_benchmark_crashes_fails_and_a_wrong_document_is_named(
    docker_available: bool, tmp_path: Path
) -> None:
    result, _ = check(tmp_path / "a", candidate_cost=float("nan"), perf=PERF)  # sleep(nan) raises
    assert result.metrics["perf_pass"] is False and "candidate cannot be measured" in result.report.reason
    wrong = TaskPerf(metric="objective_ratio", tolerance=1.5, repeats=3, rounds=1)
    result, _ = check(tmp_path / "b", candidate_cost=1, perf=wrong)
    assert result.report.error is not None and "metric 'time', but the task measures" in result.report.error


def test_the_perf_command_gets_variant_and_out_and_refuses_source_dir() -> None:
    from pathlib import PurePosixPath

    from dokimi.errors import UsageError

    argv = perf_argv(
        COMMAND + " --task {task}", variant="oracle", out=PurePosixPath("/eval/run/perf/out/x.json"), task="t"
    )
    assert argv == [
        "python3",
        "/eval/content/bench.py",
        "--variant",
        "oracle",
        "--out",
        "/eval/run/perf/out/x.json",
        "--task",
        "t",
    ]
    with pytest.raises(UsageError):
        perf_argv("bench {source_dir}", variant="oracle", out=PurePosixPath("/o"), task="t")
