"""Per-cell overhead of ``--executor ray`` against the local executor at ``-j 2``, on the same batch.

The batch is bench_cell_overhead.py's: a tiny repository, a harness that only prints its answer and a grader
that only writes a passing grade.json, so a cell's time is dokimi's own work and its two containers. It runs
twice, prepared the same way (image, harness version and isolation probe once per batch, not counted):

- locally with ``-j 2``;
- on a Ray cluster of this machine, a head and one extra worker node of one CPU each (two cells at once, as
  ``-j 2``), started before the clock starts (Ray's own start, about 10-15 s, is not counted).

The ray figure counts everything else: joining the cluster (``ray.init``), each node's setup for the batch
(unpacking the eval files, opening the source, checking the pin: the image, the harness version in a
container), shipping every run directory back as a tar and installing it on the driver. The join is also
timed on its own, so the figure without it can be read off.

    python bench/bench_ray.py [--cells 16] [--rounds 2]

Needs docker, the base image (scripts/setup.sh) and Ray (pip install -e '.[ray]'). Prints the figures and
the ratio (target <= 1.3x); asserts nothing.
"""

from __future__ import annotations

import argparse
import shutil
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from bench_cell_overhead import HARNESS, PROFILE, make_repo  # noqa: E402
from tests.helpers.raycluster import start_cluster  # noqa: E402

from dokimi.runner.executor import ExecutorSettings  # noqa: E402
from dokimi.runner.run import QuietProgress, RunOptions, execute_cells, prepare_batch  # noqa: E402
from dokimi.source import open_source  # noqa: E402


def seconds_per_cell(
    repo: Path, root: Path, *, cells: int, batch: str, executor: str, address: str | None
) -> tuple[float, int, int]:
    """Wall time of the cells / their number, how many passed, and on how many nodes they ran."""
    harness = root / "trivial"
    harness.write_text(HARNESS)
    harness.chmod(0o755)
    profile = root / "trivial.yaml"
    profile.write_text(PROFILE)
    opts = RunOptions(
        source=f"{repo}@HEAD",
        arms=("guidance:raw",),
        models=("m",),
        reps=cells,
        batch=batch,
        out=root / "runs",
        manifest=".agent-eval/repo-eval.yaml",
        harness=str(profile),
        bin=str(harness),
        jobs=2,
        executor="ray" if executor == "ray" else "local",
        ray_address=address,
    )
    with open_source(opts.source) as source:
        prepared = prepare_batch(opts, source, cancel=threading.Event(), progress=QuietProgress())
        start = time.monotonic()
        outcomes, _, _ = execute_cells(
            prepared,
            jobs=2,
            max_batch_usd=None,
            budget_usd=None,
            progress=QuietProgress(),
            executor=ExecutorSettings(opts.executor, address, source=opts.source, bin_option=opts.bin),
        )
        elapsed = time.monotonic() - start
    passed = sum(1 for o in outcomes if o.result is not None and o.result.passed)
    nodes = len({o.node for o in outcomes if o.node})
    return elapsed / cells, passed, nodes


def join_seconds(address: str) -> float:
    """ray.init to a running cluster and ray.shutdown, as execute_cells does once per batch."""
    import logging

    import ray

    start = time.monotonic()
    ray.init(address=address, namespace="dokimi", log_to_driver=False, logging_level=logging.ERROR)
    ray.shutdown()
    return time.monotonic() - start


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--cells", type=int, default=16)
    parser.add_argument("--rounds", type=int, default=2, help="batches per executor (the median is kept)")
    args = parser.parse_args()
    root = Path(tempfile.mkdtemp(prefix="dokimi-bench-ray."))
    cluster = None
    try:
        repo = make_repo(root)
        print("starting a Ray cluster on this machine (head + one worker node, one CPU each) ...", flush=True)
        started = time.monotonic()
        cluster = start_cluster(root / "cluster")
        print(f"cluster up in {time.monotonic() - started:.1f} s (not counted)")
        import os

        os.environ.setdefault("RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER", "0")  # the cluster listens on loopback
        local: list[float] = []
        remote: list[float] = []
        joins: list[float] = []
        for round_ in range(args.rounds):  # interleaved, so both see the same load on a shared machine
            per_cell, passed, _ = seconds_per_cell(
                repo, root, cells=args.cells, batch=f"local{round_}", executor="local", address=None
            )
            local.append(per_cell)
            print(f"round {round_}: local -j 2: {per_cell:.3f} s per cell ({passed}/{args.cells} passed)")
            per_cell, passed, nodes = seconds_per_cell(
                repo, root, cells=args.cells, batch=f"ray{round_}", executor="ray", address=cluster.address
            )
            remote.append(per_cell)
            print(
                f"round {round_}: ray, 2 nodes x 1 CPU: {per_cell:.3f} s per cell ({passed}/{args.cells} "
                f"passed, on {nodes} node(s))"
            )
            joins.append(join_seconds(cluster.address))
        base, ray_cell, join = statistics.median(local), statistics.median(remote), statistics.median(joins)
        without_join = ray_cell - join / args.cells
        print(f"local -j 2: {base:.3f} s per cell (median of {args.rounds})")
        print(f"ray:        {ray_cell:.3f} s per cell, {ray_cell / base:.2f}x local -j 2 (target <= 1.3x)")
        print(
            f"joining the cluster: {join:.2f} s per batch; without it {without_join:.3f} s per cell, "
            f"{without_join / base:.2f}x"
        )
    finally:
        if cluster is not None:
            cluster.stop()
        shutil.rmtree(root, ignore_errors=True)
        built = subprocess.run(
            ["docker", "images", "-q", "--filter", "label=dokimi.manifest-id=bench"],
            capture_output=True,
            text=True,
            check=False,
        ).stdout.split()
        if built:
            subprocess.run(["docker", "rmi", "-f", *sorted(set(built))], capture_output=True, check=False)


if __name__ == "__main__":
    main()
