#!/usr/bin/env python3
"""Grader of the calc example: the grade and oracle entry points of repo-eval.yaml.

    python3 {eval_dir}/grade.py grade  --contract {run_dir}
    python3 {eval_dir}/grade.py oracle --contract {run_dir}

The eval dir is the directory of this file (dokimi mounts it read-only, outside the workspace); the workspace is
{run_dir}/workspace. grade reads task.json, meta.json and answer.txt from {run_dir} and writes
{run_dir}/grade.json (repo_grade.v1). oracle applies tasks/<id>/oracle.patch to the workspace, or, for a review
task, writes the gold answer to {run_dir}/answer.txt.

Everything in the workspace is the agent's and untrusted, and the tests import it, so the code under test never
runs in this process or beside the reference, and a pass is proved, never inferred from an exit code (see
docs/running.md, "What a grader must not trust"):

- every test run goes through dokimi's isolation helper (/eval/support/isolated.py): a private copy of the
  workspace, run by a process that Landlock keeps from reading /eval (this task's oracle patch, every task's
  hidden tests, the run directory with dokimi's files) and /tmp (this grader's own files), and from writing
  anywhere but its copy; it cannot signal or trace this process either. The workspace itself is never run or
  changed here, so a regrade grades what the agent left;
- the hidden tests run under dokimi's pytest runner (/eval/support/pytest_stream.py): an isolated
  interpreter (``python3 -I``: no PYTHONPATH, no user site, so a ``sitecustomize.py`` or ``pytest.py`` of the
  workspace is never imported at start-up), plugin autoload off (a ``pytest11`` entry point in the workspace
  is never loaded), the workspace's copy on ``sys.path`` after the standard library, and each outcome
  streamed to a report this process reads afterwards: a process that ends early (``os._exit(0)``) leaves no
  end of session, and a plugin the code under test registers (through ``gc``, say) is reported and fails the
  run;
- every expected test ran and passed: the expected test ids come from the hidden test files themselves (read
  here, never run), and each must appear in the report exactly once with no failure, error or skip.

What the test process can still forge is the outcome of its own tests (code that patches pytest's internals,
or returns objects that compare equal to anything): no grader can stop code from lying about itself from
inside the process that measures it.

Standard library only, and dokimi's helpers in /eval/support; the tests run as subprocesses.
"""

from __future__ import annotations

import argparse
import ast
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

EVAL_DIR = Path(__file__).resolve().parent
SCHEMA = "repo_grade.v1"
TIMEOUT_S = 300
OUTPUT_TAIL = 4000
# Git overrides of the contract (§1.1): nothing the agent configured runs here.
GIT = ["git", "-c", "core.hooksPath=/dev/null", "-c", "core.fsmonitor=false", "-c", "safe.directory=*"]
PYTEST = [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider"]
HIDDEN = "hidden_tests"
SUPPORT = Path(os.environ.get("DOKIMI_SUPPORT", "/eval/support"))

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
    threads: dict[str, bool] = field(default_factory=dict)
    """Review tasks: each human review thread (gold finding) and whether the answer found it."""


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


@dataclass(frozen=True)
class HiddenRun:
    """The hidden tests' outcome as proved by the report: every expected id passed, or what went wrong."""

    run: Run
    expected: list[str]
    passed: list[str]
    problems: list[str]

    @property
    def ok(self) -> bool:
        return not self.problems


def expected_test_ids(tests: Path) -> list[str]:
    """``file::function`` of every test function (and ``[n]`` per case of a literal parametrize list) in the
    hidden tests, read from their source, never by running them: the workspace cannot change this list."""
    ids: list[str] = []
    for path in sorted(tests.rglob("test_*.py")):
        tree = ast.parse(path.read_text(encoding="utf-8"))
        for node in tree.body:
            if isinstance(node, ast.FunctionDef) and node.name.startswith("test"):
                cases = 1
                for decorator in node.decorator_list:
                    if (
                        isinstance(decorator, ast.Call)
                        and ast.unparse(decorator.func).endswith("parametrize")
                        and len(decorator.args) >= 2
                        and isinstance(decorator.args[1], (ast.List, ast.Tuple))
                    ):
                        cases *= len(decorator.args[1].elts)
                name = f"{path.relative_to(tests).as_posix()}::{node.name}"
                ids += [name] if cases == 1 else [f"{name}[{i}]" for i in range(cases)]
    return ids


def isolation() -> Any:
    """dokimi's isolation helper (/eval/support/isolated.py); a GraderError without it."""
    helper = SUPPORT / "isolated.py"
    if not helper.is_file():
        raise GraderError(f"dokimi's isolation helper {helper} is missing: run this grader under dokimi")
    if str(SUPPORT) not in sys.path:
        sys.path.insert(0, str(SUPPORT))
    import isolated

    return isolated


def boxed(workspace: Path, tmp: str, name: str, add: dict[str, Path] | None = None) -> Any:
    """A private copy of the workspace (and of ``add``), to run the code under test on."""
    return isolation().Box.make(Path(tmp) / name, workspace, add=add)


def confined(box: Any, argv: list[str], cwd: Path, env: dict[str, str] | None = None) -> Run:
    """``argv`` run confined to ``box``; a GraderError when this kernel cannot confine it (nothing ran)."""
    helper = isolation()
    try:
        ran = box.run(argv, cwd=cwd, timeout=TIMEOUT_S, env=env)
    except helper.IsolationUnavailable as exc:
        raise GraderError(f"the tests cannot be isolated here: {exc}") from None
    return Run(ran.returncode, ran.output[-OUTPUT_TAIL:])


def stream_results(stream: Any) -> dict[str, list[str]]:
    """``file::function`` -> the outcome of each of its cases in the runner's report, in order."""
    results: dict[str, list[str]] = {}
    for node_id, outcome in stream.outcomes.items():
        path, _, name = node_id.partition("::")
        base = f"{path.removeprefix(HIDDEN + '/')}::{name.split('[', 1)[0]}"
        results.setdefault(base, []).append(outcome)
    return results


def run_tests_outside(tests: Path, workspace: Path) -> HiddenRun:
    """Run the hidden ``tests`` against a private copy of ``workspace``, confined (module docstring), and prove
    the outcome from the report of dokimi's pytest runner."""
    expected = expected_test_ids(tests)
    helper = isolation()
    problems: list[str] = []
    with tempfile.TemporaryDirectory(prefix="calc-grade-") as tmp:
        box = boxed(workspace, tmp, "hidden", {HIDDEN: tests})
        try:
            ran, stream = box.pytest([HIDDEN], paths=[box.tree], timeout=TIMEOUT_S)
        except helper.IsolationUnavailable as exc:
            raise GraderError(f"the tests cannot be isolated here: {exc}") from None
    result = Run(ran.returncode, ran.output[-OUTPUT_TAIL:])
    results: dict[str, list[str]] = {}
    if isinstance(stream, str):
        problems.append(stream)
    elif stream.tampered:
        problems.append(f"the test run registered plugins of its own: {', '.join(stream.tampered)}")
    else:
        results = stream_results(stream)
    counts: dict[str, int] = {}
    passed: list[str] = []
    for test_id in expected:
        base = test_id.split("[", 1)[0]
        index = counts.get(base, 0)
        counts[base] = index + 1
        outcomes = results.get(base, [])
        if index >= len(outcomes):
            problems.append(f"{test_id} did not run")
        elif outcomes[index] != "passed":
            problems.append(f"{test_id} {outcomes[index]}")
        else:
            passed.append(test_id)
    for base, outcomes in results.items():
        if len(outcomes) > counts.get(base, 0):
            problems.append(f"{base} ran {len(outcomes)} times, expected {counts.get(base, 0)}")
    if result.rc != 0 and not problems:
        problems.append(f"pytest exited {result.rc}")
    return HiddenRun(result, expected, passed, problems)


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
    """fix and feature: every hidden test proved passed, and the repository's own tests pass."""
    hidden = run_tests_outside(contract.task_dir / "hidden_tests", contract.workspace)
    with tempfile.TemporaryDirectory(prefix="calc-public-") as tmp:
        box = boxed(contract.workspace, tmp, "public")
        public = confined(box, [*PYTEST, "tests"], box.tree, {"PYTHONPATH": str(box.tree)})
    metrics: Metrics = {
        "hidden_pass": hidden.ok,
        "public_pass": public.ok,
        "hidden_passed": len(hidden.passed),
        "hidden_failed": len(hidden.expected) - len(hidden.passed),
    }
    details = {
        "hidden_output": hidden.run.output,
        "hidden_problems": hidden.problems,
        "public_output": public.output,
        "changed_files": changed_files(contract),
    }
    return Outcome(hidden.ok and public.ok, metrics, details)


def grade_mutant_kill(contract: Contract) -> Outcome:
    """test: the workspace's tests pass on its code and fail once tasks/<id>/<mutant> is applied to a copy."""
    mutant = task_file(contract, "mutant")
    with tempfile.TemporaryDirectory(prefix="calc-mutant-") as tmp:
        good = boxed(contract.workspace, tmp, "good")
        bad = boxed(contract.workspace, tmp, "mutant")
        on_good = confined(good, [*PYTEST, "tests"], good.tree, {"PYTHONPATH": str(good.tree)})
        applied = git_apply(mutant, bad.tree)
        on_mutant = (
            confined(bad, [*PYTEST, "tests"], bad.tree, {"PYTHONPATH": str(bad.tree)}) if applied.ok else None
        )
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
    threads = {f["id"]: f["id"] in found for f in findings}
    return Outcome(None, metrics, {"found": found, "missed": missed}, threads)


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
        "threads": outcome.threads if outcome else {},
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
