#!/usr/bin/env python3
"""Build the bundled example repository (examples/calc) as a real git repository.

The example is stored in dokimi as plain files, but its tasks need bases that are commits. This script
makes those commits, deterministically: fixed author, committer and dates, no host git configuration, no
templates, no signing, so the SHAs are the same on every machine and the task bases in
examples/calc/.agent-eval/tasks/ can be substituted from the placeholder @BASE@.

    commit 1  "initial"          examples/calc without .agent-eval/, with calc-history/commit2.patch reversed
    commit 2  the follow-up      calc-history/commit2.patch applied (adds min and max)
    commit 3  the eval dir       .agent-eval/ added; "@BASE@" in every task.json becomes commit 2's SHA

Usage: python examples/build_example.py DEST      (DEST must not exist or be empty)

Tests load build_example() with runpy (examples/ is not a package).
"""

from __future__ import annotations

import os
import shutil
import stat
import subprocess
import sys
from pathlib import Path

EXAMPLES = Path(__file__).resolve().parent
SOURCE = EXAMPLES / "calc"
COMMIT2_PATCH = EXAMPLES / "calc-history" / "commit2.patch"
EVAL_DIR = ".agent-eval"
BASE_PLACEHOLDER = "@BASE@"
IGNORED = {"__pycache__", ".pytest_cache", ".benchmarks", ".mypy_cache", ".ruff_cache", ".git"}
GIT_TIMEOUT_S = 60

AUTHOR = ("Calc Example", "calc@example.invalid")
COMMITS = (
    (
        "initial",
        "initial\n\nA small arithmetic expression calculator with its tests and agent guidance.\n",
        "2024-01-15T10:00:00+00:00",
    ),
    (
        "followup",
        "evaluator: add min and max\n\nBoth take any number of arguments, as Python's do.\n",
        "2024-02-01T10:00:00+00:00",
    ),
    (
        "eval",
        "add the evaluation directory .agent-eval\n\nManifest, Dockerfile, grader and seven tasks.\n",
        "2024-03-01T10:00:00+00:00",
    ),
)


def _git_env() -> dict[str, str]:
    """An environment with nothing of the host's git configuration in it."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("GIT_")}
    env.update(
        GIT_CONFIG_GLOBAL=os.devnull,
        GIT_CONFIG_NOSYSTEM="1",
        GIT_TERMINAL_PROMPT="0",
        GIT_AUTHOR_NAME=AUTHOR[0],
        GIT_AUTHOR_EMAIL=AUTHOR[1],
        GIT_COMMITTER_NAME=AUTHOR[0],
        GIT_COMMITTER_EMAIL=AUTHOR[1],
        TZ="UTC",
        LC_ALL="C",
    )
    return env


def _git(repo: Path, *args: str, env: dict[str, str] | None = None) -> str:
    argv = [
        "git",
        "-c",
        "commit.gpgsign=false",
        "-c",
        "core.autocrlf=false",
        "-c",
        "core.symlinks=true",
        "-c",
        "core.fileMode=true",
        "-c",
        "core.hooksPath=" + os.devnull,
        "-c",
        "init.defaultBranch=main",
        *args,
    ]
    proc = subprocess.run(
        argv,
        cwd=repo,
        env=env or _git_env(),
        capture_output=True,
        text=True,
        timeout=GIT_TIMEOUT_S,
        stdin=subprocess.DEVNULL,
        check=False,
    )
    if proc.returncode != 0:
        raise RuntimeError(f"git {' '.join(args)} failed in {repo}: {proc.stderr.strip()}")
    return proc.stdout


def _copy_tree(src: Path, dest: Path, *, skip: set[str]) -> None:
    """Copy src into dest with symlinks kept and modes normalised (0644 files, 0755 dirs)."""
    for entry in sorted(src.iterdir()):
        if entry.name in IGNORED or entry.name in skip or entry.suffix == ".pyc":
            continue
        target = dest / entry.name
        if entry.is_symlink():
            os.symlink(os.readlink(entry), target)
        elif entry.is_dir():
            target.mkdir(mode=0o755)
            _copy_tree(entry, target, skip=set())
        else:
            shutil.copyfile(entry, target)
            mode = 0o755 if entry.stat().st_mode & stat.S_IXUSR else 0o644
            os.chmod(target, mode)


def _commit(repo: Path, message: str, date: str) -> str:
    env = _git_env()
    env.update(GIT_AUTHOR_DATE=date, GIT_COMMITTER_DATE=date)
    _git(repo, "add", "-A", env=env)
    _git(repo, "commit", "-q", "--no-verify", "-m", message, env=env)
    return _git(repo, "rev-parse", "HEAD", env=env).strip()


def _substitute_bases(eval_dir: Path, base: str) -> None:
    for task_json in sorted(eval_dir.glob("tasks/*/task.json")):
        text = task_json.read_text(encoding="utf-8")
        task_json.write_text(text.replace(BASE_PLACEHOLDER, base), encoding="utf-8")


def build_example(dest: Path) -> dict[str, str]:
    """Create the example repository at dest and return the SHAs of its commits.

    Keys: "initial" (commit 1), "followup" (commit 2, the base of most tasks) and "eval" (commit 3, HEAD, the
    eval tree).
    """
    dest = Path(dest)
    if dest.exists() and any(dest.iterdir()):
        raise FileExistsError(f"{dest} exists and is not empty")
    dest.mkdir(parents=True, exist_ok=True)
    os.chmod(dest, 0o755)
    _git(dest, "init", "-q", "--template=")
    _copy_tree(SOURCE, dest, skip={EVAL_DIR})
    shas: dict[str, str] = {}
    _git(dest, "apply", "-R", str(COMMIT2_PATCH))
    name, message, date = COMMITS[0]
    shas[name] = _commit(dest, message, date)
    _git(dest, "apply", str(COMMIT2_PATCH))
    name, message, date = COMMITS[1]
    shas[name] = _commit(dest, message, date)
    (dest / EVAL_DIR).mkdir(mode=0o755)
    _copy_tree(SOURCE / EVAL_DIR, dest / EVAL_DIR, skip=set())
    _substitute_bases(dest / EVAL_DIR, shas["followup"])
    name, message, date = COMMITS[2]
    shas[name] = _commit(dest, message, date)
    return shas


def main(argv: list[str]) -> int:
    if len(argv) != 1 or argv[0].startswith("-"):
        print("usage: build_example.py DEST", file=sys.stderr)
        print(__doc__, file=sys.stderr)
        return 0 if argv and argv[0] in ("-h", "--help") else 2
    dest = Path(argv[0]).resolve()
    try:
        shas = build_example(dest)
    except (OSError, RuntimeError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    print(dest)
    for name, sha in shas.items():
        print(f"{name} {sha}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
