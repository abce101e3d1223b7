#!/usr/bin/env python3
"""Grader of the calc example: the grade and oracle entry points of repo-eval.yaml.

    python3 {eval_dir}/grade.py grade  --contract {run_dir}
    python3 {eval_dir}/grade.py oracle --contract {run_dir}

The eval dir is the directory of this file (dokimi mounts it read-only, outside the workspace); the workspace is
{run_dir}/workspace. grade reads task.json, meta.json and answer.txt from {run_dir} and writes
{run_dir}/grade.json (repo_grade.v1). oracle applies tasks/<id>/oracle.patch to the workspace, or, for a review
task, writes the gold answer to {run_dir}/answer.txt.

Everything in the workspace is the agent's and untrusted: hidden tests run from a temporary directory outside it,
with the workspace only on PYTHONPATH, so a conftest.py or pytest configuration in the workspace is not loaded by
them. Standard library only; pytest is run as a subprocess.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

EVAL_DIR = Path(__file__).resolve().parent
SCHEMA = "repo_grade.v1"
TIMEOUT_S = 300
OUTPUT_TAIL = 4000
# Git overrides of the contract (§1.1): nothing the agent configured runs here.
GIT = ["git", "-c", "core.hooksPath=/dev/null", "-c", "core.fsmonitor=false", "-c", "safe.directory=*"]
PYTEST = [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider"]

Metrics = dict[str, bool | int | float | None]


class GraderError(Exception):
    """The grader cannot grade: a bad task or a missing input. Recorded in grade.json errors."""


@dataclass(frozen=True)
class Contract:
    run_dir: Path
    eval_dir: Path
    task: dict[str, Any]
    meta: dict[str, Any]

    @property
    def workspace(self) -> Path:
        return self.run_dir / "workspace"

    @property
    def task_id(self) -> str:
        return str(self.task["id"])

    @property
    def task_dir(self) -> Path:
        return self.eval_dir / "tasks" / self.task_id

    def answer(self) -> str:
        path = self.run_dir / "answer.txt"
        return path.read_text(encoding="utf-8", errors="replace") if path.is_file() else ""


@dataclass(frozen=True)
class Outcome:
    passed: bool | None
    metrics: Metrics
    details: dict[str, Any]


def load_contract(run_dir: Path, eval_dir: Path) -> Contract:
    try:
        task = json.loads((run_dir / "task.json").read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        raise GraderError(f"cannot read {run_dir / 'task.json'}: {exc}") from None
    if not isinstance(task, dict) or not isinstance(task.get("id"), str):
        raise GraderError(f"{run_dir / 'task.json'}: no string id")
    meta: dict[str, Any] = {}
    meta_path = run_dir / "meta.json"
    if meta_path.is_file():
        try:
            loaded = json.loads(meta_path.read_text(encoding="utf-8"))
        except ValueError as exc:
            raise GraderError(f"cannot read {meta_path}: {exc}") from None
        meta = loaded if isinstance(loaded, dict) else {}
    contract = Contract(run_dir=run_dir, eval_dir=eval_dir, task=task, meta=meta)
    if not contract.task_dir.is_dir():
        raise GraderError(f"no task directory {contract.task_dir}")
    return contract


def task_file(contract: Contract, key: str) -> Path:
    """The file named by task.json key `key`, relative to the task directory."""
    name = contract.task.get(key)
    if not isinstance(name, str):
        raise GraderError(f"task {contract.task_id}: task.json has no string {key!r}")
    path = (contract.task_dir / name).resolve()
    if contract.task_dir.resolve() not in path.parents or not path.is_file():
        raise GraderError(f"task {contract.task_id}: {key} {name!r} is not a file in the task directory")
    return path


# --- subprocesses -----------------------------------------------------------------------------------------------


def clean_env(pythonpath: Path | None = None) -> dict[str, str]:
    env = {k: os.environ[k] for k in ("PATH", "HOME", "LANG", "TMPDIR") if k in os.environ}
    env.update(PYTHONDONTWRITEBYTECODE="1", PYTHONNOUSERSITE="1", PYTHONHASHSEED="0")
    if pythonpath is not None:
        env["PYTHONPATH"] = str(pythonpath)
    return env


@dataclass(frozen=True)
class Run:
    rc: int | None  # None: timed out
    output: str

    @property
    def ok(self) -> bool:
        return self.rc == 0


def run(argv: list[str], cwd: Path, env: dict[str, str]) -> Run:
    try:
        proc = subprocess.run(
            argv,
            cwd=cwd,
            env=env,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            timeout=TIMEOUT_S,
            check=False,
        )
    except subprocess.TimeoutExpired as exc:
        out = exc.stdout or b""
        return Run(None, out.decode("utf-8", "replace")[-OUTPUT_TAIL:] + f"\n[timed out after {TIMEOUT_S}s]")
    return Run(proc.returncode, proc.stdout.decode("utf-8", "replace")[-OUTPUT_TAIL:])


def pytest_counts(output: str) -> dict[str, int]:
    """Counts from pytest's summary line: {"passed": 3, "failed": 1, ...}."""
    counts: dict[str, int] = {}
    for line in reversed(output.splitlines()):
        found = re.findall(r"(\d+) (passed|failed|errors?|skipped)", line)
        if found:
            for number, word in found:
                counts["error" if word.startswith("error") else word] = int(number)
            break
    return counts


def run_tests_outside(tests: Path, code: Path) -> Run:
    """Run a copy of `tests` from a temporary directory, importing the code under `code`."""
    with tempfile.TemporaryDirectory(prefix="calc-grade-") as tmp:
        copy = Path(tmp) / "hidden_tests"
        shutil.copytree(tests, copy)
        return run([*PYTEST, "--rootdir", tmp, str(copy)], cwd=Path(tmp), env=clean_env(code))


def git_apply(patch: Path, cwd: Path) -> Run:
    return run([*GIT, "apply", "--whitespace=nowarn", str(patch)], cwd=cwd, env=clean_env())


def changed_files(contract: Contract) -> list[str] | None:
    """Files changed in the workspace since start_sha (meta.json), committed or not; None if unknown."""
    start = contract.meta.get("start_sha")
    if not isinstance(start, str) or not re.fullmatch(r"[0-9a-f]{40}", start):
        return None
    diff = run(
        [*GIT, "diff", "--no-ext-diff", "--no-textconv", "--name-only", start, "--"],
        contract.workspace,
        clean_env(),
    )
    others = run([*GIT, "ls-files", "--others", "--exclude-standard"], contract.workspace, clean_env())
    if not (diff.ok and others.ok):
        return None
    return sorted(set(diff.output.split()) | set(others.output.split()))


# --- graders ----------------------------------------------------------------------------------------------------


def grade_hidden_tests(contract: Contract) -> Outcome:
    """fix and feature: the hidden tests and the repository's own tests must both pass."""
    hidden = run_tests_outside(contract.task_dir / "hidden_tests", contract.workspace)
    public = run([*PYTEST, "tests"], contract.workspace, clean_env(contract.workspace))
    counts = pytest_counts(hidden.output)
    metrics: Metrics = {
        "hidden_pass": hidden.ok,
        "public_pass": public.ok,
        "hidden_passed": counts.get("passed", 0),
        "hidden_failed": counts.get("failed", 0) + counts.get("error", 0),
    }
    details = {
        "hidden_output": hidden.output,
        "public_output": public.output,
        "changed_files": changed_files(contract),
    }
    return Outcome(hidden.ok and public.ok, metrics, details)


def grade_mutant_kill(contract: Contract) -> Outcome:
    """test: the workspace's tests pass on its code and fail once tasks/<id>/<mutant> is applied to a copy."""
    mutant = task_file(contract, "mutant")
    ignore = shutil.ignore_patterns(".git", "__pycache__", ".pytest_cache")
    with tempfile.TemporaryDirectory(prefix="calc-mutant-") as tmp:
        good = Path(tmp) / "good"
        bad = Path(tmp) / "mutant"
        shutil.copytree(contract.workspace, good, symlinks=True, ignore=ignore)
        shutil.copytree(contract.workspace, bad, symlinks=True, ignore=ignore)
        on_good = run([*PYTEST, "tests"], good, clean_env(good))
        applied = git_apply(mutant, bad)
        on_mutant = run([*PYTEST, "tests"], bad, clean_env(bad)) if applied.ok else None
    killed = on_mutant is not None and on_mutant.rc not in (0, None)
    metrics: Metrics = {
        "tests_pass": on_good.ok,
        "mutant_applied": applied.ok,
        "mutant_killed": killed if applied.ok else None,
        "tests_passed": pytest_counts(on_good.output).get("passed", 0),
    }
    details = {
        "tests_output": on_good.output,
        "mutant_output": on_mutant.output if on_mutant else applied.output,
        "changed_files": changed_files(contract),
    }
    return Outcome(on_good.ok and killed, metrics, details)


def finding_found(finding: dict[str, Any], file: str, answer: str) -> bool:
    """One answer line names the problem (a word of why) and the subject (a word of what, or file:N in lines)."""
    low, high = finding["lines"]
    for line in answer.lower().splitlines():
        if not any(word.lower() in line for word in finding["why"]):
            continue
        if any(word.lower() in line for word in finding["what"]):
            return True
        cited = re.findall(re.escape(file.lower()) + r":(\d+)", line)
        if any(low <= int(n) <= high for n in cited):
            return True
    return False


def grade_review_recall(contract: Contract) -> Outcome:
    """review: score-only; recall of the gold findings in answer.txt."""
    try:
        gold = json.loads(task_file(contract, "gold").read_text(encoding="utf-8"))
        findings = gold["findings"]
        file = gold["file"]
    except (ValueError, KeyError, TypeError) as exc:
        raise GraderError(f"task {contract.task_id}: bad gold file: {exc}") from None
    answer = contract.answer()
    found = sorted(f["id"] for f in findings if finding_found(f, file, answer))
    missed = sorted(f["id"] for f in findings if f["id"] not in found)
    metrics: Metrics = {
        "recall": len(found) / len(findings) if findings else None,
        "found": len(found),
        "gold": len(findings),
        "answered": bool(answer.strip()),
    }
    return Outcome(None, metrics, {"found": found, "missed": missed})


GRADERS: dict[str, Callable[[Contract], Outcome]] = {
    "hidden_tests": grade_hidden_tests,
    "mutant_kill": grade_mutant_kill,
    "review_recall": grade_review_recall,
}


# --- entry points -----------------------------------------------------------------------------------------------


def write_grade(run_dir: Path, task: str, grader: str, outcome: Outcome | None, errors: list[str]) -> None:
    document = {
        "schema": SCHEMA,
        "task": task,
        "grader": grader,
        "pass": outcome.passed if outcome else None,
        "metrics": outcome.metrics if outcome else {},
        "details": outcome.details if outcome else {},
        "errors": errors,
    }
    tmp = run_dir / "grade.json.tmp"
    tmp.write_text(json.dumps(document, indent=2, sort_keys=True) + "\n", encoding="utf-8")
    os.replace(tmp, run_dir / "grade.json")


def grade(run_dir: Path, eval_dir: Path) -> int:
    task_id, grader = "", ""
    try:
        contract = load_contract(run_dir, eval_dir)
        task_id, grader = contract.task_id, str(contract.task.get("grader", ""))
        function = GRADERS.get(grader)
        if function is None:
            raise GraderError(
                f"task {task_id}: unknown grader {grader!r}; known: {', '.join(sorted(GRADERS))}"
            )
        outcome = function(contract)
    except GraderError as exc:
        write_grade(run_dir, task_id, grader, None, [str(exc)])
        return 1
    write_grade(run_dir, task_id, grader, outcome, [])
    return 0


def oracle(run_dir: Path, eval_dir: Path) -> int:
    try:
        contract = load_contract(run_dir, eval_dir)
        if contract.task.get("grader") == "review_recall":
            gold = contract.task_dir / "gold_answer.txt"
            shutil.copyfile(gold, run_dir / "answer.txt")
            return 0
        applied = git_apply(contract.task_dir / "oracle.patch", contract.workspace)
        if not applied.ok:
            raise GraderError(
                f"task {contract.task_id}: oracle.patch does not apply: {applied.output.strip()}"
            )
    except (GraderError, OSError) as exc:
        print(f"oracle: {exc}", file=sys.stderr)
        return 1
    return 0


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("command", choices=["grade", "oracle"])
    parser.add_argument("--contract", required=True, type=Path, help="the run directory ({run_dir})")
    parser.add_argument("--eval-dir", type=Path, default=EVAL_DIR, help="default: this file's directory")
    args = parser.parse_args(argv)
    run_dir = args.contract.resolve()
    eval_dir = args.eval_dir.resolve()
    return grade(run_dir, eval_dir) if args.command == "grade" else oracle(run_dir, eval_dir)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
