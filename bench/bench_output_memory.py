"""Peak memory of dokimi while a container prints a gigabyte: the output cap at work.

A grade container prints SIZE bytes to stdout (and SIZE/4 to stderr) through ``run_container``, the way
``grade`` runs; a fresh Python process does it and reports its peak RSS (``ru_maxrss``). Baseline, measured in
the same run: the same process running a container that prints one line. Before the cap, 1 GiB of grader
stdout cost 2.1 GB of RSS; the target is under 100 MB.

    python bench/bench_output_memory.py [--mib 1024] [--image dokimi-base:bookworm]

Needs docker and the base image (scripts/setup.sh). Prints the figures and the ratio; asserts nothing.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import uuid

CHILD = """
import json, resource, sys, time
from pathlib import Path
from dokimi.sandbox.container import ContainerSpec, run_container
size, image, out = int(sys.argv[1]), sys.argv[2], Path(sys.argv[3])
script = f"head -c {size} /dev/zero | tr '\\\\0' x; head -c {size // 4} /dev/zero | tr '\\\\0' y >&2"
spec = ContainerSpec(name=sys.argv[4], image=image, argv=["sh", "-c", script])
start = time.monotonic()
result = run_container(spec, timeout=600, stdout_file=out / "grade.stdout")
print(json.dumps({"rss_kb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss,
                  "seconds": time.monotonic() - start, "file_bytes": (out / "grade.stdout").stat().st_size,
                  "stdout_omitted": result.stdout_omitted, "stderr_omitted": result.stderr_omitted}))
"""


def measure(size: int, image: str) -> dict[str, float]:
    with tempfile.TemporaryDirectory() as out:
        name = f"dokimi-bench-output-{uuid.uuid4().hex[:8]}"
        done = subprocess.run(
            [sys.executable, "-c", CHILD, str(size), image, out, name],
            capture_output=True, text=True, check=True, env={**os.environ},
        )  # fmt: skip
        data: dict[str, float] = json.loads(done.stdout.strip().splitlines()[-1])
        return data


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--mib", type=int, default=1024)
    parser.add_argument("--image", default="dokimi-base:bookworm")
    args = parser.parse_args()
    base = measure(16, args.image)
    big = measure(args.mib * 1024 * 1024, args.image)
    print(f"baseline (one line of output): peak RSS {base['rss_kb'] / 1024:.1f} MiB")
    print(
        f"{args.mib} MiB stdout + {args.mib // 4} MiB stderr: peak RSS {big['rss_kb'] / 1024:.1f} MiB "
        f"({big['rss_kb'] / base['rss_kb']:.2f}x baseline), {big['seconds']:.1f} s; "
        f"grade.stdout kept {big['file_bytes'] / 1024 / 1024:.1f} MiB, "
        f"omitted {big['stdout_omitted']:.0f} stdout and {big['stderr_omitted']:.0f} stderr bytes"
    )


if __name__ == "__main__":
    main()
