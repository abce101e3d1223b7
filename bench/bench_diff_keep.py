"""What keeping the agent's diff costs per cell: ``workspace.diff`` and ``workspace_diff.json``, taken on
the host before grade runs (dokimi.grading.merge.keep_workspace_diff), now for every cell and not only those
with a mergeability rubric.

A repository of ``--files`` files (default 2000, about 3 KiB each, in 40 directories: a mid-size project) is
committed once; each cell is a fresh clone of it (what a prepared workspace is) in which an agent-like
change is made: three files edited, one added, one deleted. The figure is the wall time of keeping the diff,
per cell.

Baselines, measured in the same run: ``git status --porcelain`` in the same workspace (the least any look at
the working tree costs: one git process that reads the index and stats every file), and, when docker is
running, a bare ``docker run --rm dokimi-base:bookworm true`` (the least one of a cell's two containers
costs). The ratios say what the diff adds to a cell.

    python bench/bench_diff_keep.py [--cells 10] [--files 2000]

Prints the figures and the ratios; asserts nothing.
"""

from __future__ import annotations

import argparse
import resource
import shutil
import statistics
import subprocess
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

from dokimi.grading.merge import keep_workspace_diff
from dokimi.rundir import WORKSPACE, WORKSPACE_DIFF

BASE_IMAGE = "dokimi-base:bookworm"
GIT = ["git", "-c", "user.name=bench", "-c", "user.email=bench@dokimi.invalid", "-c", "commit.gpgsign=false"]


def make_repository(root: Path, files: int) -> str:
    """A committed repository of ``files`` text files; returns the commit."""
    root.mkdir(parents=True)
    subprocess.run([*GIT, "init", "-q", str(root)], check=True)
    for i in range(files):
        path = root / f"pkg{i % 40}" / f"module_{i}.py"
        path.parent.mkdir(exist_ok=True)
        path.write_text("".join(f"def function_{i}_{n}(x):\n    return x + {n}\n\n" for n in range(80)))
    subprocess.run([*GIT, "-C", str(root), "add", "-A"], check=True)
    subprocess.run([*GIT, "-C", str(root), "commit", "-q", "-m", "base"], check=True)
    out = subprocess.run(
        [*GIT, "-C", str(root), "rev-parse", "HEAD"], check=True, capture_output=True, text=True
    )
    return out.stdout.strip()


def make_cell(origin: Path, run_dir: Path) -> Path:
    """A run directory whose workspace is a clone of ``origin`` with an agent's change in it."""
    workspace = run_dir / WORKSPACE
    subprocess.run([*GIT, "clone", "-q", str(origin), str(workspace)], check=True)
    for i in (1, 2, 3):
        path = workspace / f"pkg{i}" / f"module_{i}.py"
        path.write_text(path.read_text().replace("return x + 7", "return x + 7  # fixed", 1) + "# end\n")
    (workspace / "pkg0" / "new_module.py").write_text("def added():\n    return 1\n")
    (workspace / "pkg5" / "module_5.py").unlink()
    return run_dir


def timed(fn: Callable[[], object]) -> tuple[float, float]:
    """(wall seconds, CPU seconds of the git processes it ran): on a shared machine the CPU time is the
    steadier figure."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    start = time.perf_counter()
    fn()
    wall = time.perf_counter() - start
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    return wall, (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)


def git_status(run_dir: Path) -> None:
    subprocess.run(
        [*GIT, "-C", str(run_dir / WORKSPACE), "status", "--porcelain"], check=True, capture_output=True
    )


def docker_floor(runs: int) -> float | None:
    if shutil.which("docker") is None:
        return None
    probe = subprocess.run(["docker", "image", "inspect", BASE_IMAGE], capture_output=True, check=False)
    if probe.returncode != 0:
        return None
    times = []
    for _ in range(runs):
        start = time.perf_counter()
        subprocess.run(["docker", "run", "--rm", BASE_IMAGE, "true"], capture_output=True, check=True)
        times.append(time.perf_counter() - start)
    return statistics.median(times)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--cells", type=int, default=10)
    parser.add_argument("--files", type=int, default=2000)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="bench-diff-") as tmp:
        root = Path(tmp)
        start_sha = make_repository(root / "origin", args.files)
        keep, status, sizes = [], [], []
        for n in range(args.cells):
            run_dir = make_cell(root / "origin", root / f"cell{n}")
            status.append(timed(lambda d=run_dir: git_status(d)))
            keep.append(timed(lambda d=run_dir: keep_workspace_diff(d, start_sha, ignored_before=None)))
            sizes.append((run_dir / WORKSPACE_DIFF).stat().st_size)
            shutil.rmtree(run_dir)
        floor = docker_floor(min(args.cells, 5))
    median_keep = statistics.median(w for w, _ in keep)
    cpu_keep = statistics.median(c for _, c in keep)
    median_status = statistics.median(w for w, _ in status)
    cpu_status = statistics.median(c for _, c in status)
    size = statistics.median(sizes)
    print(f"workspace of {args.files} files, {args.cells} cells, diff of {size:.0f} bytes")
    print(f"keep workspace.diff + workspace_diff.json: median {median_keep * 1000:.1f} ms wall, "
          f"{cpu_keep * 1000:.1f} ms CPU per cell")  # fmt: skip
    print(f"baseline git status --porcelain: median {median_status * 1000:.1f} ms wall, "
          f"{cpu_status * 1000:.1f} ms CPU -> keeping the diff is {median_keep / median_status:.1f}x (wall), "
          f"{cpu_keep / max(cpu_status, 1e-6):.1f}x (CPU) one git status")  # fmt: skip
    if floor is not None:
        print(f"baseline docker run --rm {BASE_IMAGE} true: median {floor * 1000:.0f} ms -> keeping the "
              f"diff is {median_keep / floor:.2f}x one bare container (a cell starts two)")  # fmt: skip
    else:
        print("docker not available: no container baseline")


if __name__ == "__main__":
    main()
