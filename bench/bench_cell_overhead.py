"""Framework overhead per cell of ``repo run``: everything but the agent's and the grader's commands.

A tiny repository (one file, one task) runs with a harness that only prints its answer and a grader that only
writes a passing grade.json, so a cell's wall time is dokimi's own work: workspace preparation, the agent's
container (mounts, env file, --init, removal), trace conversion, task.json/meta.json, the grade container and
result.json. Batch preparation (image, harness version, isolation probe) happens once per batch and is not
counted.

Baseline, measured in the same run: a bare ``docker run --rm IMAGE true`` (the least any container costs
here).
A cell starts two containers, so 2x is the floor; the target is at most 3x. With ``-j 2`` the figure is the
wall time of the cells divided by their number (throughput), against the same serial baseline.

    python bench/bench_cell_overhead.py [--cells 8] [--jobs 1 2]

Needs docker and the base image (scripts/setup.sh). Prints the figures and the ratios; asserts nothing.
"""

from __future__ import annotations

import argparse
import json
import os
import shlex
import shutil
import statistics
import subprocess
import tempfile
import threading
import time
from pathlib import Path

from dokimi.repo.arms import ARM_RAW
from dokimi.runner.run import QuietProgress, RunOptions, execute_cells, prepare_batch
from dokimi.source import open_source

HARNESS = '#!/bin/sh\nif [ "$1" = "--version" ]; then echo 1.0.0; exit 0; fi\necho done\n'
PROFILE = """\
schema: harness_profile.v1
name: trivial
bin: trivial
version_cmd: ["{bin}", "--version"]
invoke: ["{bin}", "{prompt}", "{tools}"]
tools: {none: [], read: [], all: []}
trace: text
guidance: {names: [AGENTS.md], resolution: none}
"""
GRADE_JSON = '{"schema":"repo_grade.v1","task":"{task}","grader":"g","pass":true}'
GRADE = "sh -c " + shlex.quote(f"printf '%s' '{GRADE_JSON}' > {{run_dir}}/grade.json")
MANIFEST = f"""\
schema: repo_manifest.v1
id: bench
eval_dir: .agent-eval
image: {{dockerfile: .agent-eval/Dockerfile, network: none}}
entry_points:
  grade: {json.dumps(GRADE)}
  oracle: "true"
tasks: .agent-eval/tasks
"""


def git(repo: Path, *args: str) -> str:
    env = {
        "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
        "GIT_CONFIG_GLOBAL": os.devnull,
        "GIT_CONFIG_NOSYSTEM": "1",
        "GIT_AUTHOR_NAME": "bench",
        "GIT_AUTHOR_EMAIL": "bench@dokimi.invalid",
        "GIT_COMMITTER_NAME": "bench",
        "GIT_COMMITTER_EMAIL": "bench@dokimi.invalid",
    }
    done = subprocess.run(["git", *args], cwd=repo, env=env, capture_output=True, text=True, check=True)
    return done.stdout.strip()


def make_repo(root: Path) -> Path:
    repo = root / "repo"
    repo.mkdir()
    git(repo, "init", "-q", "-b", "main")
    (repo / "f.txt").write_text("before\n")
    git(repo, "add", "-A")
    git(repo, "commit", "-q", "-m", "base")
    base = git(repo, "rev-parse", "HEAD")
    task = repo / ".agent-eval" / "tasks" / "bench_task"
    task.mkdir(parents=True)
    (repo / ".agent-eval" / "repo-eval.yaml").write_text(MANIFEST)
    (repo / ".agent-eval" / "Dockerfile").write_text("FROM dokimi-base:bookworm\n")
    (task / "task.json").write_text(
        json.dumps({"id": "bench_task", "family": "fix", "base": base, "prompt": "go", "grader": "g"})
    )
    git(repo, "add", "-A")
    git(repo, "commit", "-q", "-m", "eval")
    return repo


def bare_docker_run(image: str, count: int) -> list[float]:
    times = []
    for _ in range(count):
        start = time.monotonic()
        subprocess.run(["docker", "run", "--rm", image, "true"], check=True, capture_output=True)
        times.append(time.monotonic() - start)
    return times


def cells_per_second(repo: Path, root: Path, *, cells: int, jobs: int, batch: str) -> tuple[float, int]:
    """Seconds per cell (wall time of the cells / their number) and how many passed."""
    harness = root / "trivial"
    harness.write_text(HARNESS)
    os.chmod(harness, 0o755)
    profile = root / "trivial.yaml"
    profile.write_text(PROFILE)
    opts = RunOptions(
        source=f"{repo}@HEAD",
        arms=(ARM_RAW,),
        models=("m",),
        reps=cells,
        batch=batch,
        out=root / "runs",
        manifest=".agent-eval/repo-eval.yaml",
        harness=str(profile),
        bin=str(harness),
        jobs=jobs,
    )
    with open_source(opts.source) as source:
        prepared = prepare_batch(opts, source, cancel=threading.Event(), progress=QuietProgress())
        start = time.monotonic()
        outcomes, _, _ = execute_cells(
            prepared, jobs=jobs, max_batch_usd=None, budget_usd=None, progress=QuietProgress()
        )
        elapsed = time.monotonic() - start
    passed = sum(1 for o in outcomes if o.result is not None and o.result.passed)
    return elapsed / cells, passed


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--cells", type=int, default=8)
    parser.add_argument("--jobs", type=int, nargs="+", default=[1, 2])
    args = parser.parse_args()
    root = Path(tempfile.mkdtemp(prefix="dokimi-bench-cell."))
    try:
        repo = make_repo(root)
        image = "dokimi-base:bookworm"
        bare_docker_run(image, 2)  # warm up
        results = {}
        for jobs in args.jobs:
            per_cell, passed = cells_per_second(repo, root, cells=args.cells, jobs=jobs, batch=f"j{jobs}")
            results[jobs] = (per_cell, passed)
        bare = statistics.median(bare_docker_run(image, max(5, args.cells)))
        print(f"bare `docker run --rm {image} true`: {bare:.3f} s (median)")
        for jobs, (per_cell, passed) in results.items():
            print(
                f"-j {jobs}: {per_cell:.3f} s per cell ({passed}/{args.cells} passed), "
                f"{per_cell / bare:.2f}x the bare container (target <= 3x; a cell runs two containers)"
            )
    finally:
        shutil.rmtree(root, ignore_errors=True)
        built = subprocess.run(
            ["docker", "images", "-q", "--filter", "label=dokimi.repo.manifest-id=bench"],
            capture_output=True,
            text=True,
            check=False,
        ).stdout.split()
        if built:
            subprocess.run(["docker", "rmi", "-f", *sorted(set(built))], capture_output=True, check=False)


if __name__ == "__main__":
    main()
