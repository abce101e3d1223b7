"""Per-cell overhead of ``--executor ray`` against the local executor at ``-j 2``, on the same batches.

The batch is bench_cell_overhead.py's: a tiny repository, a harness that only prints its answer and a grader
that only writes a passing grade.json, so a cell's time is dokimi's own work and its two containers. Each
batch is prepared the same way (image, harness version and isolation probe once per batch, not counted) and
runs

- locally with ``-j 2``;
- on a Ray cluster of this machine, a head and one extra worker node of one CPU each (two cells at once, as
  ``-j 2``), started before any clock starts (Ray's own start, about 10-15 s, is not counted).

Batches of N and of 2N cells run on both, interleaved, so three figures come out:

- the whole batch of 2N cells, per cell (the medians of the rounds, and the median of each round's ratio
  of its two batches, which ran back to back under the same load): each node's setup (unpacking the eval
  files, opening the source, checking the pin), the cells, and shipping every run directory back as a tar
  to be installed on the driver. As in ``repo run``, the cluster is joined (``ray.init``) and each node
  starts its worker process while the batch is prepared, so that part is outside the clock (joining alone is
  timed and printed);
- per extra cell, (T(2N) - T(N)) / N: the cost of one more cell once the batch runs, fixed costs cancelled;
- the fixed cost per batch, T(N) - N x that.

With ``--sealed`` the same batches run sealed, as a real run is (docs/network.md, docs/scale.md): the harness
makes one model call through the model gateway (dokimi's scripted model server on this machine is the
vendor, ``ANTHROPIC_BASE_URL``), on the batch network behind its firewall chain with a cell on the egress
proxy. Locally one network, gateway and proxy serve the batch; on the cluster the gateway stays on the
driver and each node has its own network, proxy and relay (a Ray actor). Both are started while the batch is
prepared, outside the clock (the nodes' seals may still be starting when the first cells arrive: that wait is
inside it). Needs root and iptables.

    python bench/bench_ray.py [--cells 12] [--rounds 2] [--sealed]

Needs docker, the base image (scripts/setup.sh) and Ray (pip install -e '.[ray]'). Prints the figures and
the ratios (target <= 1.3x); asserts only that every sealed cell reached its model through the gateway (else
the figure would be of something else).
"""

from __future__ import annotations

import argparse
import os
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

from dokimi.repo.arms import ARM_RAW  # noqa: E402
from dokimi.runner.dispatch import ExecutorSettings, cluster_session  # noqa: E402
from dokimi.runner.run import QuietProgress, RunOptions, execute_cells, prepare_batch  # noqa: E402
from dokimi.source import open_source  # noqa: E402
from dokimi.support.mockmodel import MockModelServer  # noqa: E402

SEALED_MODEL = "claude-haiku-4-5"
#: One model call through the gateway (the container's endpoint variable and dummy key), then the answer.
SEALED_HARNESS = """#!/bin/sh
if [ "$1" = "--version" ]; then echo 1.0.0; exit 0; fi
exec python3 -c '
import json, os, urllib.request
body = json.dumps({"model": "MODEL", "max_tokens": 16, "messages": [{"role": "user", "content": "hi"}]})
headers = {"content-type": "application/json", "x-api-key": os.environ["ANTHROPIC_API_KEY"],
           "anthropic-version": "2023-06-01"}
request = urllib.request.Request(os.environ["ANTHROPIC_BASE_URL"] + "/v1/messages", body.encode(), headers)
print(json.load(urllib.request.urlopen(request, timeout=120))["content"][0]["text"])
'
""".replace("MODEL", SEALED_MODEL)
SEALED_PROFILE = PROFILE.replace("name: trivial\n", "name: trivial-sealed\n") + (
    "endpoint_env: ANTHROPIC_BASE_URL\ncredential_env: [ANTHROPIC_API_KEY]\napi: [anthropic]\n"
)


def seconds_per_cell(
    repo: Path,
    root: Path,
    *,
    cells: int,
    batch: str,
    executor: str,
    address: str | None,
    sealed: bool = False,
) -> tuple[float, int, int]:
    """Wall time of the cells / their number, how many passed, and on how many nodes they ran."""
    harness = root / ("sealed-harness" if sealed else "trivial")
    harness.write_text(SEALED_HARNESS if sealed else HARNESS)
    harness.chmod(0o755)
    profile = root / ("sealed.yaml" if sealed else "trivial.yaml")
    profile.write_text(SEALED_PROFILE if sealed else PROFILE)
    opts = RunOptions(
        source=f"{repo}@HEAD",
        arms=(ARM_RAW,),
        models=(SEALED_MODEL if sealed else "m",),
        reps=cells,
        batch=batch,
        out=root / "runs",
        manifest=".agent-eval/repo-eval.yaml",
        harness=str(profile),
        bin=str(harness),
        jobs=2,
        executor="ray" if executor == "ray" else "local",
        ray_address=address,
        allow_unchecked=True,  # a benchmark's trivial task: no tasks check to admit it
    )
    # as repo run does: the cluster is joined (and its nodes start their worker processes) while the batch is
    # prepared, before the clock starts
    with open_source(opts.source) as source, cluster_session(opts.executor, address):
        prepared = prepare_batch(opts, source, cancel=threading.Event(), progress=QuietProgress())
        try:
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
        finally:
            if prepared.sealed is not None:
                prepared.sealed.stop()
    if sealed:  # every cell reached its model through the gateway, or the figure is of something else
        sealed_ok = [o.result for o in outcomes if o.result is not None and o.result.cost_source == "gateway"]
        assert len(sealed_ok) == cells and all(r.turns == 1 for r in sealed_ok), outcomes
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
    parser.add_argument("--cells", type=int, default=12, help="N: batches of N and of 2N cells run")
    parser.add_argument("--rounds", type=int, default=2, help="batches per executor and size (medians kept)")
    parser.add_argument("--sealed", action="store_true", help="sealed cells (model calls via the gateway)")
    args = parser.parse_args()
    root = Path(tempfile.mkdtemp(prefix="dokimi-bench-ray."))
    cluster = None
    vendor = None
    try:
        repo = make_repo(root)
        if args.sealed:
            vendor = MockModelServer([], per_conversation=True, api_key="sk-bench-" + "0" * 24).start()
            os.environ.update({"ANTHROPIC_BASE_URL": vendor.url, "ANTHROPIC_API_KEY": vendor.api_key or ""})
            for name in ("ANTHROPIC_AUTH_TOKEN", "CLAUDE_CODE_USE_BEDROCK", "CLAUDE_CODE_USE_VERTEX"):
                os.environ.pop(name, None)
        print("starting a Ray cluster on this machine (head + one worker node, one CPU each) ...", flush=True)
        started = time.monotonic()
        cluster = start_cluster(root / "cluster")
        print(f"cluster up in {time.monotonic() - started:.1f} s (not counted)")
        os.environ.setdefault("RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER", "0")  # the cluster listens on loopback
        small, large = args.cells, 2 * args.cells
        times: dict[tuple[str, int], list[float]] = {}
        joins: list[float] = []
        for round_ in range(args.rounds):  # interleaved, so both see the same load on a shared machine
            for size in (small, large):
                for executor in ("local", "ray"):
                    address = cluster.address if executor == "ray" else None
                    per_cell, passed, nodes = seconds_per_cell(
                        repo, root, cells=size, batch=f"{executor}{size}r{round_}", executor=executor,
                        address=address, sealed=args.sealed,
                    )  # fmt: skip
                    times.setdefault((executor, size), []).append(per_cell * size)
                    print(
                        f"round {round_}: {executor:5} {size:3} cells: {per_cell:.3f} s per cell "
                        f"({passed}/{size} passed, {nodes} node(s))",
                        flush=True,
                    )
            joins.append(join_seconds(cluster.address))
        total = {key: statistics.median(values) for key, values in times.items()}
        local_cell, ray_cell = total["local", large] / large, total["ray", large] / large
        local_marginal = (total["local", large] - total["local", small]) / (large - small)
        ray_marginal = (total["ray", large] - total["ray", small]) / (large - small)
        ray_fixed = total["ray", small] - small * ray_marginal
        local_fixed = total["local", small] - small * local_marginal
        join = statistics.median(joins)
        kind = "sealed " if args.sealed else ""
        print(
            f"whole {kind}batch of {large}: local -j 2 {local_cell:.3f} s per cell, ray {ray_cell:.3f} s per "
            f"cell: {ray_cell / local_cell:.2f}x (target <= 1.3x)"
        )
        # each round's two batches ran back to back, under the same load: their ratio moves less with it
        paired = [r / lo for r, lo in zip(times["ray", large], times["local", large], strict=True)]
        print(
            f"  the same, round by round: {', '.join(f'{x:.2f}x' for x in paired)}; "
            f"median {statistics.median(paired):.2f}x"
        )
        print(
            f"per extra cell ({small} -> {large}): local -j 2 {local_marginal:.3f} s, "
            f"ray {ray_marginal:.3f} s: {ray_marginal / local_marginal:.2f}x"
        )
        print(
            f"fixed per batch: local {local_fixed:.1f} s, ray {ray_fixed:.1f} s (the node's setup; the "
            f"cluster is joined and its worker processes started while the batch is prepared, outside the "
            f"clock, as in repo run: joining alone takes {join:.2f} s)"
        )
    finally:
        if cluster is not None:
            cluster.stop()
        if vendor is not None:
            vendor.stop()
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
