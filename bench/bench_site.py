"""How long ``repo report --html`` takes to write the report site of a 1,000-cell batch.

A synthetic batch is built on disk: ``--tasks`` tasks (default 50) x two arms x ``--reps`` reps (default 10),
each cell with what a real run leaves: result.json (with the gateway's usage), meta.json (the guidance files),
task.json (a prompt, FAIL_TO_PASS and PASS_TO_PASS ids), events.jsonl (30 events with output), answer.txt,
workspace.diff (about 3 KiB), a builtin:pytest grade.json, grade.stdout and grade.stderr.

The figure is the wall time of the whole site (load the batch, build the report, compare the arms, write the
index and every cell page), best of ``--runs``. Baseline, measured in the same run: the report alone (load the
batch and build the repo_report.v1 document, what ``repo report --json`` does), so the ratio says what the
site adds.

    python bench/bench_site.py [--tasks 50] [--reps 10] [--runs 3]

Prints the figures and the ratio; asserts nothing.
"""

from __future__ import annotations

import argparse
import json
import random
import tempfile
import time
from pathlib import Path
from typing import Any

from dokimi.analysis.report import build_report
from dokimi.analysis.site import write_report_site
from dokimi.batch import cell_dir, load_batch

ARMS = ("guidance:none", "guidance:raw")
MODEL = "claude-sonnet-4-5"
SHA = "a" * 40


def write(path: Path, data: Any) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(data if isinstance(data, str) else json.dumps(data), encoding="utf-8")


def make_batch(root: Path, tasks: int, reps: int) -> int:
    """The synthetic batch (see the module docstring); returns the number of cells."""
    rng = random.Random(1000)
    write(root / "_eval" / "batch.json", {
        "schema": "repo_batch.v1", "manifest_id": "bench", "source": "/src/bench@" + SHA, "tree": SHA,
        "eval_dir_digest": "sha256:bench", "image": "dokimi/bench:" + SHA, "image_pin": "tree",
        "image_context_digest": "sha256:ctx", "created_by": "bench",
    })  # fmt: skip
    planned = []
    diff = "".join(
        f"diff --git a/pkg/m{n}.py b/pkg/m{n}.py\n--- a/pkg/m{n}.py\n+++ b/pkg/m{n}.py\n@@ -1,6 +1,6 @@\n"
        + "".join(f" line {i}\n" for i in range(3))
        + "-    return x\n+    return x + 1\n"
        + "".join(f" line {i}\n" for i in range(3, 6))
        for n in range(12)
    )
    for t in range(tasks):
        task = f"fix_issue_{t:03d}"
        f2p = [f"tests/test_m{t}.py::test_fixed_{i}" for i in range(3)]
        p2p = [f"tests/test_m{t}.py::test_kept_{i}" for i in range(12)]
        for a, arm in enumerate(ARMS):
            for rep in range(reps):
                planned.append({"task": task, "arm": arm, "model": MODEL, "effort": None, "rep": rep})
                run_dir = cell_dir(root, task, arm, MODEL, None, rep)
                passed = rng.random() < 0.35 + 0.25 * a
                failing = {} if passed else {f2p[rng.randrange(3)]: "failed"}
                tokens = {
                    "input_tokens": rng.randrange(5000, 40000),
                    "output_tokens": rng.randrange(500, 6000),
                }
                cost = (tokens["input_tokens"] * 3 + tokens["output_tokens"] * 15) / 1e6
                write(run_dir / "result.json", {
                    "schema": "repo_result.v1", "task": task, "arm": arm, "model": MODEL, "effort": None,
                    "mode": None, "rep": rep, "harness": "claude-code", "harness_version": "2.1.328",
                    "family": "fix", "gated": True, "passed": passed, "gate_results": {"pass": passed},
                    "metrics": {}, "cost_usd": cost, "cost_source": "gateway", "turns": rng.randrange(4, 9),
                    "duration_s": rng.uniform(30, 600), "base_date": "2025-01-01T00:00:00+00:00",
                    "usage": {"requests": 10, "turns": 10, "cache_write_tokens": 0,
                              "cache_read_tokens": 20000, **tokens, "cost_usd": cost},
                })  # fmt: skip
                write(run_dir / "meta.json", {
                    "schema": "repo_meta.v1", "task": task, "batch": root.name, "arm": arm,
                    "harness": "claude-code", "harness_version": "2.1.328", "model": MODEL, "effort": None,
                    "mode": None, "rep": rep, "base_rev": SHA, "base_sha": SHA,
                    "base_date": "2025-01-01T00:00:00+00:00", "patches": [], "start_sha": SHA,
                    "agent_network": None,
                    "guidance_files": [{"path": "AGENTS.md", "sha": "b" * 40}] if a else [],
                })  # fmt: skip
                write(run_dir / "task.json", {
                    "id": task, "prompt": f"Fix issue {t}: the parser drops the last token. " * 6,
                    "fail_to_pass": f2p, "pass_to_pass": p2p,
                })  # fmt: skip
                events = [
                    {"kind": "command", "t": i * 2.0, "text": f"pytest -q tests/test_m{t}.py", "rc": i % 2,
                     "output": "F" * 40 + "\n" + "collected 15 items\n" * 20}
                    for i in range(30)
                ]  # fmt: skip
                write(run_dir / "events.jsonl", "".join(json.dumps(e) + "\n" for e in events))
                write(run_dir / "answer.txt", "I fixed the parser: the loop stopped one token early.\n" * 5)
                write(run_dir / "workspace.diff", diff)
                write(run_dir / "grade.json", {
                    "schema": "repo_grade.v1", "task": task, "grader": "builtin:pytest", "pass": passed,
                    "metrics": {"fail_to_pass": passed, "pass_to_pass": True,
                                "fail_to_pass_passed": 3 - len(failing), "pass_to_pass_broken": 0},
                    "details": {"fail_to_pass_not_passing": failing, "pass_to_pass_broken": {}}, "errors": [],
                })  # fmt: skip
                write(run_dir / "grade.stdout", "")
                write(run_dir / "grade.stderr", "." * 15 + "\n15 passed in 0.42s\n")
    write(root / "_eval" / "plan.json", {"schema": "repo_plan.v1", "cells": planned})
    return len(planned)


def best_of(runs: int, work: Any) -> tuple[float, float]:
    """(wall seconds, CPU seconds of this process), each the best of ``runs``: on a shared machine the CPU
    time is the steadier figure."""
    walls, cpus = [], []
    for _ in range(runs):
        start, cpu = time.perf_counter(), time.process_time()
        work()
        walls.append(time.perf_counter() - start)
        cpus.append(time.process_time() - cpu)
    return min(walls), min(cpus)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tasks", type=int, default=50)
    parser.add_argument("--reps", type=int, default=10)
    parser.add_argument("--runs", type=int, default=3)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="bench-site-") as tmp:
        root = Path(tmp) / "batch"
        cells = make_batch(root, args.tasks, args.reps)
        out = Path(tmp) / "site"

        def report_only() -> None:
            build_report(load_batch(root))

        def site() -> None:
            batch = load_batch(root)
            write_report_site(build_report(batch), batch, out)

        report_s, report_cpu = best_of(args.runs, report_only)
        site_s, site_cpu = best_of(args.runs, site)
        pages = len(list((out / "cells").glob("*.html")))
        size = sum(p.stat().st_size for p in out.rglob("*.html")) / 1e6
    shape = f"{args.tasks} tasks x {len(ARMS)} arms x {args.reps} reps"
    print(f"batch of {cells} cells ({shape}), best of {args.runs}")
    print(f"report site (index + {pages} cell pages, {size:.1f} MB): {site_s:.2f} s wall, {site_cpu:.2f} s "
          f"CPU ({site_cpu / cells * 1000:.1f} ms CPU per cell)")  # fmt: skip
    print(f"baseline, the report alone (repo report --json): {report_s:.2f} s wall, {report_cpu:.2f} s CPU "
          f"-> the site is {site_s / report_s:.1f}x (wall), {site_cpu / report_cpu:.1f}x (CPU)")  # fmt: skip


if __name__ == "__main__":
    main()
