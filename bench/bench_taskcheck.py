"""``repo tasks check`` of the bundled example with ``-j 2`` against ``-j 1``, and workspace preparation
against a plain ``git archive | tar -x`` of the same base, measured in the same run.

- tasks check: the example (examples/build_example.py, four tasks: eight null/oracle units, each a prepared
  workspace and two or three containers) with its image already built; best of ``--runs`` for each -j, run
  alternately so that both see the same machine load. Ratio = time(-j 2) / time(-j 1); below 1 is a speed-up.
- workspace: prepare_workspace (all eight steps of contract §3, arm guidance:none so the arm and the prune
  have work to do) against ``git archive BASE | tar -x`` into an empty directory, on the example's base and on
  a larger tree (this dokimi checkout's HEAD, when the bench runs inside one). Best of ``--runs`` each.
  Ratio = prepare / archive.

    python bench/bench_taskcheck.py [--runs 3]
"""

from __future__ import annotations

import argparse
import runpy
import shutil
import subprocess
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from types import SimpleNamespace

from dokimi.repo.arms import ARM_NONE
from dokimi.repo.manifest import load_manifest
from dokimi.repo.workspace import WorkspaceSource, prepare_workspace
from dokimi.runner.taskcheck import CheckOptions, check_tasks
from dokimi.source import Repo, open_source

HERE = Path(__file__).resolve().parent.parent
EXAMPLES = HERE / "examples"
GUIDANCE = ["**/AGENTS.md", "**/CLAUDE.md", ".github/instructions/*.md"]


def best(runs: int, fn: Callable[[], object]) -> float:
    times = []
    for _ in range(runs):
        start = time.perf_counter()
        fn()
        times.append(time.perf_counter() - start)
    return min(times)


def tasks_check(repo: Repo, jobs: int) -> None:
    loaded = load_manifest(repo.eval_snapshot(), manifest=None, manifest_file=None, required=True)
    report = check_tasks(repo, loaded, CheckOptions(jobs=jobs))
    if not report.ok:
        raise SystemExit(f"the example does not pass tasks check: {[t.problems for t in report.tasks]}")


def bench_tasks_check(root: Path, runs: int) -> None:
    shas = runpy.run_path(str(EXAMPLES / "build_example.py"))["build_example"](root / "calc")
    with open_source(f"{root / 'calc'}@{shas['eval']}") as repo:
        tasks_check(repo, 1)  # builds (or finds) the image; not timed
        one: list[float] = []
        two: list[float] = []
        for _ in range(runs):
            one.append(best(1, lambda: tasks_check(repo, 1)))
            two.append(best(1, lambda: tasks_check(repo, 2)))
    j1, j2 = min(one), min(two)
    print(f"tasks check, example (4 tasks): -j 1 {j1:.2f} s, -j 2 {j2:.2f} s, ratio j2/j1 = {j2 / j1:.2f}")


def archive(git_dir: Path, sha: str, dest: Path) -> None:
    dest.mkdir()
    git = subprocess.Popen(["git", "--git-dir", str(git_dir), "archive", sha], stdout=subprocess.PIPE)
    subprocess.run(["tar", "-x", "-C", str(dest)], stdin=git.stdout, check=True)
    assert git.stdout is not None
    git.stdout.close()
    if git.wait() != 0:
        raise SystemExit("git archive failed")


def bench_workspace(label: str, source: str, sha: str, root: Path, runs: int) -> None:
    counter = iter(range(10**6))
    with open_source(source) as repo:
        assert repo.git_dir is not None
        git_dir = repo.git_dir
        files = len(repo.snapshot(sha).entries)
        task = SimpleNamespace(base=sha, setup_patches=[], review_patch=None)

        def prepare() -> None:
            dest = root / f"ws-{next(counter)}"
            prepare_workspace(
                WorkspaceSource(repo, ".agent-eval", GUIDANCE),
                task,
                arm=ARM_NONE,
                dest=dest,
                patches_root=root,
            )
            shutil.rmtree(dest)

        def plain() -> None:
            dest = root / f"ar-{next(counter)}"
            archive(git_dir, sha, dest)
            shutil.rmtree(dest)

        prepare()  # warm the object cache once
        prep_s, arch_s = best(runs, prepare), best(runs, plain)
    print(
        f"workspace, {label} ({files} files): prepare {prep_s * 1000:.0f} ms, git archive | tar -x "
        f"{arch_s * 1000:.0f} ms, ratio = {prep_s / arch_s:.2f}"
    )


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--runs", type=int, default=3)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="dokimi-bench-taskcheck.") as tmp:
        root = Path(tmp)
        bench_tasks_check(root, args.runs)
        followup = subprocess.run(
            ["git", "-C", str(root / "calc"), "rev-parse", "HEAD^"],
            capture_output=True,
            text=True,
            check=True,
        ).stdout.strip()
        bench_workspace("example base", str(root / "calc"), followup, root, args.runs)
        if (HERE / ".git").exists():
            head = subprocess.run(
                ["git", "-C", str(HERE), "rev-parse", "HEAD"], capture_output=True, text=True, check=True
            ).stdout.strip()
            bench_workspace("dokimi HEAD", str(HERE), head, root, args.runs)


if __name__ == "__main__":
    main()
