"""A tiny evaluated repository and a fake harness, for runner tests that need real containers but no model.

The repository ``tiny`` has one file, ``f.txt`` ("before"), and an eval dir whose grader (``grade.py``)
decides by the task's ``grader`` key:

- ``file``: pass when the agent changed f.txt to "after";
- ``crash``: exits 3 without writing grade.json (a grader failure);
- ``random``: passes, with a metric that differs on every run (a nondeterministic grader);
- ``true``: passes at once (the overhead benchmark's trivial grader).

The fake harness is a POSIX shell script (mounted at /eval/harness like any harness) whose prompt says what
it does: ``EDIT`` writes "after" to f.txt, ``SLEEP`` sleeps 600 s (a harness past its timeout), ``SLOW``
sleeps 2 s; it prints its answer as plain text (the ``text`` trace), so it reports no cost and no turns.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from tests.helpers.git import commit, git_repo

GRADE_PY = r"""
import json, os, random, sys
run_dir = sys.argv[1]
task = json.load(open(os.path.join(run_dir, "task.json")))
kind = task["grader"]
if kind == "crash":
    print("grader crashed on purpose", file=sys.stderr)
    sys.exit(3)
metrics = {}
if kind == "file":
    try:
        text = open(os.path.join(run_dir, "workspace", "f.txt")).read()
    except OSError:
        text = ""
    passed = text == "after\n"
    metrics["changed"] = passed
elif kind == "random":
    passed = True
    metrics["noise"] = random.random()
else:
    passed = True
doc = {"schema": "repo_grade.v1", "task": task["id"], "grader": kind, "pass": passed, "metrics": metrics}
with open(os.path.join(run_dir, "grade.json"), "w") as out:
    json.dump(doc, out)
"""

ORACLE_PY = r"""
import os, sys
with open(os.path.join(sys.argv[1], "workspace", "f.txt"), "w") as out:
    out.write("after\n")
"""

MANIFEST = """\
schema: repo_manifest.v1
id: runner-tiny
eval_dir: .agent-eval
image:
  dockerfile: .agent-eval/Dockerfile
  network: none
entry_points:
  grade: "python3 {eval_dir}/grade.py {run_dir}"
  oracle: "python3 {eval_dir}/oracle.py {run_dir}"
tasks: .agent-eval/tasks
"""

FAKE_HARNESS = """\
#!/bin/sh
if [ "$1" = "--version" ]; then echo "fake-harness 1.0.0"; exit 0; fi
case "$1" in
  *SLEEP*) exec sleep 600 ;;
  *SLOW*) sleep 2 ;;
esac
case "$1" in
  *EDIT*) echo after > f.txt ;;
esac
echo "done: $1"
"""

FAKE_PROFILE = """\
schema: harness_profile.v1
name: fake
bin: fake-harness
version_cmd: ["{bin}", "--version"]
invoke: ["{bin}", "{prompt}", "{tools}"]
tools: {none: [], read: [], all: []}
trace: text
guidance: {names: [AGENTS.md], resolution: ancestors-of-cwd}
"""


@dataclass(frozen=True)
class Tiny:
    path: Path
    base: str
    """The commit every task starts from."""
    eval_sha: str
    """The commit that added the eval dir (the eval tree)."""

    def source(self, rev: str | None = None) -> str:
        return f"{self.path}@{rev or self.eval_sha}"


def task_json(task_id: str, base: str, *, grader: str = "file", prompt: str = "EDIT", **extra: Any) -> str:
    data = {"id": task_id, "family": "fix", "base": base, "prompt": prompt, "grader": grader, **extra}
    return json.dumps(data, indent=2) + "\n"


def tiny_repo(
    path: Path, tasks: Mapping[str, Mapping[str, Any]] | None = None, *, manifest_id: str = "runner-tiny"
) -> Tiny:
    """The tiny repository: commit 1 holds f.txt, commit 2 adds the eval dir with ``tasks`` (id -> task.json
    keys besides id/family/base; default: one task ``fix_f`` that the EDIT harness passes). ``manifest_id``
    names its images: one of its own keeps other test sessions on this daemon, which remove the runner-tiny
    images when they end, from removing the image of a batch still running."""
    git_repo(path, {"f.txt": "before\n", "README.md": "# tiny\n"})
    base = subprocess.run(
        ["git", "rev-parse", "HEAD"], cwd=path, capture_output=True, text=True, check=True
    ).stdout.strip()
    tasks = tasks if tasks is not None else {"fix_f": {}}
    files: dict[str, str] = {
        ".agent-eval/repo-eval.yaml": MANIFEST.replace("id: runner-tiny", f"id: {manifest_id}"),
        ".agent-eval/Dockerfile": "FROM dokimi-base:bookworm\n",
        ".agent-eval/grade.py": GRADE_PY,
        ".agent-eval/oracle.py": ORACLE_PY,
    }
    for task_id, keys in tasks.items():
        files[f".agent-eval/tasks/{task_id}/task.json"] = task_json(task_id, base, **keys)
    eval_sha = commit(path, "add the eval dir", files=files)
    return Tiny(path, base, eval_sha)


def remove_tiny_images(manifest_id: str = "runner-tiny") -> None:
    """Remove the images the tiny repository's batches built (one per eval commit, so one per test), unless
    DOKIMI_TEST_KEEP_IMAGES=1: concurrent test sessions on one daemon build and use the same tags."""
    if os.environ.get("DOKIMI_TEST_KEEP_IMAGES") == "1":
        return
    listed = subprocess.run(
        ["docker", "images", "-q", "--filter", f"label=dokimi.repo.manifest-id={manifest_id}"],
        capture_output=True, text=True, check=False,
    )  # fmt: skip
    ids = sorted(set(listed.stdout.split()))
    if ids:
        subprocess.run(["docker", "rmi", "-f", *ids], capture_output=True, check=False)


def fake_harness(directory: Path) -> tuple[Path, Path]:
    """(profile path, executable) of the fake harness, written into ``directory``."""
    directory.mkdir(parents=True, exist_ok=True)
    binary = directory / "fake-harness"
    binary.write_text(FAKE_HARNESS)
    os.chmod(binary, 0o755)
    profile = directory / "fake.yaml"
    profile.write_text(FAKE_PROFILE)
    return profile, binary


def dokimi_cli(args: Sequence[str], *, timeout: float = 600) -> subprocess.CompletedProcess[str]:
    """``python -m dokimi ARGS`` as a user runs it (its own process: signal handlers stay its own)."""
    return subprocess.run(
        [sys.executable, "-m", "dokimi", *args], capture_output=True, text=True, timeout=timeout, check=False
    )


def run_args(
    tiny: Tiny,
    out: Path,
    batch: str,
    profile: Path,
    binary: Path,
    *extra: str,
    arms: str = "guidance:raw",
    reps: int = 1,
    rev: str | None = None,
    checked: bool = False,
) -> list[str]:
    """``repo run`` arguments for the tiny repository with the fake harness; unless ``checked``, with
    ``--allow-unchecked`` (the test is not about the tasks check a real run otherwise needs)."""
    return [
        "repo", "run", tiny.source(rev), "--manifest", ".agent-eval/repo-eval.yaml",
        "--arm", arms, "--model", "m", "--reps", str(reps), "--batch", batch, "--out", str(out),
        "--harness", str(profile), "--bin", str(binary), *([] if checked else ["--allow-unchecked"]), *extra,
    ]  # fmt: skip
