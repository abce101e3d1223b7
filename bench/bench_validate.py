"""Benchmark: `repo validate` on 50 tasks over 10 bases of a 20,000-file repository.

Baseline, measured in the same run: one plain `git ls-tree -r <base>` per base (10 subprocesses).
Target: validate costs at most 3x that baseline. Prints the ratios of the in-process library call (best of N)
and of the CLI (one subprocess, imports included).

    python bench/bench_validate.py [--files 20000] [--bases 10] [--tasks 50] [--repeat 5] [--keep]
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ENV = {
    **{k: v for k, v in os.environ.items() if not k.startswith("GIT_")},
    "GIT_CONFIG_NOSYSTEM": "1",
    "GIT_CONFIG_GLOBAL": os.devnull,
    "GIT_AUTHOR_NAME": "bench",
    "GIT_AUTHOR_EMAIL": "bench@dokimi.invalid",
    "GIT_COMMITTER_NAME": "bench",
    "GIT_COMMITTER_EMAIL": "bench@dokimi.invalid",
}
MANIFEST = ".agent-eval/repo-eval.yaml"


def git(repo: Path, *args: str, input: bytes | None = None) -> bytes:
    return subprocess.run(
        ["git", "-c", "gc.auto=0", *args], cwd=repo, env=ENV, input=input, capture_output=True, check=True
    ).stdout


def build(root: Path, n_files: int, n_bases: int, n_tasks: int) -> tuple[Path, list[str]]:
    """``n_files`` tracked files and ``n_bases`` commits, then one commit adding the eval dir."""
    repo = root / "repo"
    repo.mkdir(parents=True)
    git(repo, "init", "-q", "-b", "main")
    for i in range(n_files):
        d = repo / f"pkg{i % 40:02d}" / f"mod{i % 500:03d}"
        d.mkdir(parents=True, exist_ok=True)
        name = "AGENTS.md" if i % 997 == 0 else f"f{i:05d}.py"
        (d / name).write_text(f"# file {i}\n")
    (repo / "AGENTS.md").write_text("root guidance\n")
    git(repo, "add", "-A")
    bases = []
    for b in range(n_bases):
        if b:
            (repo / f"pkg{b:02d}" / "changed.py").write_text(f"base {b}\n")
            if b == n_bases // 2:  # a guidance file deleted after the early bases
                (repo / "pkg00" / "mod000" / "AGENTS.md").unlink()
            git(repo, "add", "-A")
        git(repo, "commit", "-q", "--no-gpg-sign", "-m", f"base {b}")
        bases.append(git(repo, "rev-parse", "HEAD").decode().strip())
    eval_dir = repo / ".agent-eval"
    (eval_dir / "tasks").mkdir(parents=True)
    (eval_dir / "Dockerfile").write_text("FROM dokimi-base:bookworm\n")
    (repo / MANIFEST).write_text(
        "schema: repo_manifest.v1\nid: bench\nsource: {url: https://example.invalid/bench.git}\n"
        "eval_dir: .agent-eval\nguidance:\n  globs: ['**/AGENTS.md', '**/CLAUDE.md', 'pkg0*/*/AGENTS.md']\n"
        "image: {dockerfile: .agent-eval/Dockerfile, env: {OB: '{run_dir}/ob'}}\n"
        "entry_points: {grade: 'python3 {eval_dir}/g.py {run_dir} {source_dir}',\n"
        "  oracle: 'python3 {eval_dir}/o.py'}\n"
        "tasks: .agent-eval/tasks\nbuild_systems: [make]\n"
    )
    for t in range(n_tasks):
        task_dir = eval_dir / "tasks" / f"task{t:03d}"
        task_dir.mkdir()
        base = bases[t % n_bases] + ("^" if t % 7 == 3 and t % n_bases else "")
        task = {
            "id": f"task{t:03d}",
            "family": "fix",
            "base": base,
            "prompt": "fix it",
            "grader": "tests",
            "gate": ["strict_pass", {"metric": "recall", "min": 0.5}],
            "timeout_s": 600,
            "egress": ["pypi.org", "*.pythonhosted.org"],
            "setup_patch": "bug.patch",
        }
        (task_dir / "task.json").write_text(json.dumps(task, indent=2))
        (task_dir / "bug.patch").write_text("diff\n")
    git(repo, "add", "-A")
    git(repo, "commit", "-q", "--no-gpg-sign", "-m", "eval")
    # a real repository is packed; loose objects would make every git call slower than it would be
    git(repo, "gc", "-q")
    return repo, bases


def best(fn: object, repeat: int) -> float:
    times = []
    for _ in range(repeat):
        start = time.perf_counter()
        fn()  # type: ignore[operator]
        times.append(time.perf_counter() - start)
    return min(times)


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--files", type=int, default=20_000)
    parser.add_argument("--bases", type=int, default=10)
    parser.add_argument("--tasks", type=int, default=50)
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--keep", action="store_true", help="keep the repository under /tmp")
    args = parser.parse_args()

    root = Path(tempfile.mkdtemp(prefix="dokimi-bench-validate-", dir="/tmp"))
    try:
        t0 = time.perf_counter()
        repo, bases = build(root, args.files, args.bases, args.tasks)
        print(
            f"built {args.files} files, {args.bases} bases, {args.tasks} tasks "
            f"in {time.perf_counter() - t0:.1f}s"
        )
        os.environ.update(ENV)
        for key in [k for k in os.environ if k.startswith("GIT_") and k not in ENV]:
            del os.environ[key]

        from dokimi.checks.validate import validate_repo
        from dokimi.source import open_source

        def baseline() -> None:
            for sha in bases:
                subprocess.run(
                    ["git", "ls-tree", "-r", sha], cwd=repo, env=ENV, capture_output=True, check=True
                )

        def library() -> None:
            with open_source(f"{repo}@HEAD") as opened:
                report = validate_repo(opened, manifest=MANIFEST)
            assert report.valid and report.tasks == args.tasks and report.bases == args.bases, report.errors

        def cli() -> None:
            proc = subprocess.run(
                [
                    sys.executable,
                    "-m",
                    "dokimi",
                    "repo",
                    "validate",
                    f"{repo}@HEAD",
                    "--manifest",
                    MANIFEST,
                    "--json",
                ],
                env=ENV,
                capture_output=True,
                check=False,
            )
            assert proc.returncode == 0, proc.stderr.decode()

        library()  # warm: imports and the OS page cache, for both sides
        baseline()
        base_t = best(baseline, args.repeat)
        lib_t = best(library, args.repeat)
        base_t = min(base_t, best(baseline, args.repeat))  # interleave so load spikes hit both sides
        cli_t = best(cli, 3)
        print(f"baseline: {args.bases} x `git ls-tree -r <base>`      {base_t * 1000:8.1f} ms")
        print(
            f"validate, in-process (best of {args.repeat}):       {lib_t * 1000:8.1f} ms"
            f"   ratio {lib_t / base_t:.2f}x"
        )
        print(
            f"validate, CLI subprocess (best of 3):     {cli_t * 1000:8.1f} ms   ratio {cli_t / base_t:.2f}x"
        )
        print("target: ratio <= 3x")
    finally:
        if args.keep:
            print(f"kept {root}")
        else:
            shutil.rmtree(root, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
