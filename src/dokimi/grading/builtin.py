"""A built-in grade (``builtin:pytest``, ``builtin:command``): the tests never run beside the reference, and
the verdict is never decided in a process the code under test shares.

1. **prepare**, in the grade container (the run directory, dokimi's files read-only, {eval_dir}):
   dokimi.support.builtin_grade makes the tree under test in ``{run_dir}/builtin-tests/tree`` (the agent's
   files, every test file put back as it was at start_sha, the hidden tests applied) and says which tests run
   (``prepared.json``). No code of the workspace runs in it.
2. **the tests**, in a container of their own (:func:`dokimi.sandbox.specs.builtin_tests_spec`): the tree, a
   fresh HOME, an empty report directory; no {eval_dir}, no {source_dir}, no run directory. Their output is
   grade.stderr.
3. **the verdict**, here on the host, from the report the test process left: the stream of
   dokimi.support.pytest_stream (builtin:pytest) or the JUnit XML at ``{report}`` and the exit code
   (builtin:command), read as untrusted input (a size limit, no link followed). grade.json is written by
   dokimi.

A prepare step that fails (a broken task, the workspace's .git removed or rewritten) is a grader failure with
its reason. Tests that run past the grade timeout, or that leave no complete report (a process that ended
early), fail the run: they are not a grader failure. So does a report that says a plugin was registered
during the run by code that is not pytest's or a conftest.py of the tree (``details.tampered``).
"""

from __future__ import annotations

import dataclasses
import json
import xml.etree.ElementTree as ET
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from dokimi import safefs
from dokimi.errors import DokimiError
from dokimi.grading.egress import entry_egress
from dokimi.repo.builtin_graders import (
    builtin_tests_argv,
    junit_outcomes,
    parse_builtin,
    uses_report,
    verdict,
)
from dokimi.rundir import (
    BUILTIN_OUT,
    BUILTIN_PREPARE_LOGS,
    BUILTIN_PREPARED,
    JUNIT_REPORT,
    PYTEST_STREAM,
    TESTS_HOME,
    TESTS_TREE,
    RunDir,
    entry_stderr,
    entry_stdout,
)
from dokimi.sandbox.container import give_to_container_user, run_container
from dokimi.sandbox.specs import builtin_tests_spec
from dokimi.support.builtin_grade import NOT_RUN, NOT_RUN_EXIT
from dokimi.support.pytest_stream import MAX_STREAM_BYTES, Stream, parse_stream

if TYPE_CHECKING:
    from dokimi.grading.environment import GradeEnvironment
    from dokimi.sandbox.container import ContainerResult
    from dokimi.schemas.task import Task

__all__ = ["BuiltinRun", "after_prepare", "begin"]

MAX_PREPARED_BYTES = 16 * 1024 * 1024
MAX_JUNIT_BYTES = 64 * 1024 * 1024
MAX_IDS_IN_DETAILS = 200


@dataclass(frozen=True)
class Prepared:
    """What the prepare step did (prepared.json)."""

    restored: list[str] = field(default_factory=list)
    targets: list[str] = field(default_factory=list)
    roots: list[str] = field(default_factory=list)
    """builtin:pytest's import roots, relative to the tree."""
    discovery: bool = False
    fail_to_pass: list[str] = field(default_factory=list)
    pass_to_pass: list[str] = field(default_factory=list)
    error: str | None = None


def _strings(value: object) -> list[str] | None:
    if isinstance(value, list) and all(isinstance(v, str) for v in value):
        return list(value)
    return None


def read_prepared(path: Path, trusted: Path) -> Prepared | str:
    """prepared.json, or why it cannot be used."""
    try:
        data = json.loads(safefs.read_bytes(path, trusted=trusted, limit=MAX_PREPARED_BYTES))
    except FileNotFoundError:
        return f"the prepare step wrote no {BUILTIN_PREPARED}"
    except (DokimiError, ValueError, RecursionError) as exc:
        return f"{BUILTIN_PREPARED} cannot be read: {exc}"
    if not isinstance(data, dict):
        return f"{BUILTIN_PREPARED} is not a JSON object"
    keys = ("restored", "targets", "roots", "fail_to_pass", "pass_to_pass")
    lists = {key: _strings(data.get(key, [])) for key in keys}
    error = data.get("error")
    if any(v is None for v in lists.values()) or not isinstance(data.get("discovery", False), bool):
        return f"{BUILTIN_PREPARED} has a key of the wrong type"
    return Prepared(
        restored=lists["restored"] or [],
        targets=lists["targets"] or [],
        roots=lists["roots"] or [],
        discovery=bool(data.get("discovery", False)),
        fail_to_pass=lists["fail_to_pass"] or [],
        pass_to_pass=lists["pass_to_pass"] or [],
        error=error if isinstance(error, str) else None,
    )


def _fresh_dir(path: Path, trusted: Path) -> None:
    safefs.remove(path, trusted=trusted)
    safefs.makedirs(path, trusted=trusted)
    give_to_container_user(path)


def _write_grade(run_dir: Path, task: Task, grader: str, document: dict[str, Any]) -> None:
    full = {"schema": "repo_grade.v1", "task": task.id, "grader": grader, "pass": None, "metrics": {},
            "details": {}, "errors": [], **document}  # fmt: skip
    safefs.write_text(
        RunDir(run_dir).grade_json, json.dumps(full, indent=2, sort_keys=True) + "\n", trusted=run_dir
    )


@dataclass(frozen=True)
class BuiltinRun:
    """How a built-in grade's tests ran: their argv and container (None when they did not run: the prepare
    step failed), and why grading failed, or None."""

    argv: tuple[str, ...] = ()
    container: ContainerResult | None = None
    error: str | None = None


def begin(run_dir: Path) -> None:
    """An empty ``builtin-tests/`` for the prepare step (the container user's)."""
    _fresh_dir(RunDir(run_dir).builtin_tests, run_dir)


def after_prepare(
    environment: GradeEnvironment, run_dir: Path, task: Task, *, prepare_failure: str | None, name: str
) -> BuiltinRun:
    """Steps 2 and 3 (module docstring), once the prepare step ran in the grade container (``prepare_failure``
    is why it failed, or None): the tests in their own container, then the verdict; grade.json is written
    here. The prepare step's logs move to builtin-tests/; grade.stdout and grade.stderr are the tests' (all
    of their output is in grade.stderr)."""
    command = str(environment.entry_points.grade)
    grader = f"builtin:{parse_builtin(command, 'grade').name}"
    work = RunDir(run_dir).builtin_tests
    for log, kept in zip((entry_stdout("grade"), entry_stderr("grade")), BUILTIN_PREPARE_LOGS, strict=True):
        if safefs.kind(run_dir / log, trusted=run_dir) is not None:
            safefs.rename(run_dir / log, work / kept, trusted=run_dir)
    if prepare_failure is not None:
        return BuiltinRun(error=f"the prepare step of {grader} failed: {prepare_failure}")
    prepared = read_prepared(work / BUILTIN_PREPARED, run_dir)
    if isinstance(prepared, str):
        return BuiltinRun(error=prepared)
    if prepared.error is not None:
        _write_grade(run_dir, task, grader, {"errors": [prepared.error]})
        return BuiltinRun()
    for sub in (TESTS_HOME, BUILTIN_OUT):
        _fresh_dir(work / sub, run_dir)
    argv = builtin_tests_argv(command, task=task.id, targets=prepared.targets, roots=prepared.roots)
    with entry_egress(environment, task, run_dir, by="grade", name=f"{name}-tests") as (settings, extra):
        spec = builtin_tests_spec(
            settings,
            name=f"{name}-tests",
            run_dir=run_dir,
            argv=argv,
            task=task.id,
            probe=environment.probe_dir,
        )
        ran = run_container(
            dataclasses.replace(spec, env={**spec.env, **extra}),
            timeout=environment.grade_timeout_s,
            stdout_file=run_dir / entry_stdout("grade"),
            kill_grace_s=environment.kill_grace,
        )
    safefs.write_text(run_dir / entry_stderr("grade"), ran.stderr, trusted=run_dir)
    missing = _command_not_run(ran)
    if missing is not None:  # the image lacks the command: the task cannot be graded in it
        _write_grade(run_dir, task, grader, {"errors": [missing]})
        return BuiltinRun(tuple(argv), ran)
    document = _decide(run_dir, prepared, ran, command, timeout=environment.grade_timeout_s)
    _write_grade(run_dir, task, grader, document)
    for sub in (TESTS_TREE, TESTS_HOME):
        safefs.remove(work / sub, trusted=run_dir)
    return BuiltinRun(tuple(argv), ran)


def _command_not_run(ran: ContainerResult) -> str | None:
    """builtin:command's step saying the image has no such command, or None."""
    if ran.returncode != NOT_RUN_EXIT:
        return None
    lines = [line for line in ran.stderr.splitlines() if line.startswith(NOT_RUN)]
    return lines[-1].removeprefix("builtin:command ") if lines else None


@dataclass
class Report:
    """What the tests' report says: the outcome of each test (None: no usable report), a note for people,
    the plugins a run registered of its own, and the test files pytest could not collect."""

    outcomes: dict[str, str] | None
    note: str
    tampered: list[str] = field(default_factory=list)
    collection_errors: dict[str, str] = field(default_factory=dict)


def _pytest_report(out: Path, trusted: Path, code: int | None) -> Report:
    """builtin:pytest's stream, read as untrusted input."""
    try:
        data = safefs.read_bytes(out / PYTEST_STREAM, trusted=trusted, limit=MAX_STREAM_BYTES)
    except FileNotFoundError:
        return Report(
            None, f"the test process exited {code} without writing its report (it ended early or crashed)"
        )
    except DokimiError as exc:
        return Report(None, f"the report cannot be read: {exc.message}")
    stream: Stream | str = parse_stream(data)
    if isinstance(stream, str):
        return Report(None, f"{stream} (pytest exited {code})")
    errors = dict(sorted(stream.collect_errors.items())[:MAX_IDS_IN_DETAILS])
    note = f"pytest exited {code}" + (
        f"; collection errors in {', '.join(list(errors)[:5])}" if errors else ""
    )
    if stream.tampered:
        note += "; the run registered plugins of its own, so its report is not trusted"
        return Report(None, note, stream.tampered[:MAX_IDS_IN_DETAILS], errors)
    return Report(stream.outcomes, note, [], errors)


def _junit_report(out: Path, trusted: Path, code: int | None, *, aliases: bool) -> Report:
    """builtin:command's JUnit report at ``{report}``, read as untrusted input."""
    try:
        data = safefs.read_bytes(out / JUNIT_REPORT, trusted=trusted, limit=MAX_JUNIT_BYTES)
        return Report(junit_outcomes(data, aliases=aliases), f"the command exited {code}")
    except (OSError, DokimiError, ET.ParseError) as exc:
        return Report(
            None, f"the command exited {code} without a readable JUnit report ({type(exc).__name__})"
        )


def _decide(
    run_dir: Path, prepared: Prepared, entry: ContainerResult, command: str, *, timeout: float
) -> dict[str, Any]:
    """grade.json's pass, metrics and details from the report the tests left (step 3 of the module
    docstring)."""
    out = RunDir(run_dir).builtin_tests / BUILTIN_OUT
    pytest = parse_builtin(command, "grade").name == "pytest"
    code = entry.returncode
    if entry.timed_out:
        report = Report(None, f"the tests ran past {timeout:g} s")
    elif pytest:
        report = _pytest_report(out, run_dir, code)
    elif uses_report(command):
        report = _junit_report(out, run_dir, code, aliases=not prepared.discovery)
    else:
        report = Report(None, f"the command exited {code}")
    details: dict[str, Any] = {"run": report.note, "tests_restored": prepared.restored[:MAX_IDS_IN_DETAILS]}
    if report.collection_errors:
        details["collection_errors"] = report.collection_errors
    if report.tampered:
        details["tampered"] = report.tampered
    if prepared.discovery:
        details.update(outcomes=report.outcomes, exit_code=None if pytest else code)
        return {"pass": False, "metrics": {"discovery": True}, "details": details}
    if not pytest and not uses_report(command):
        passed = code == 0 and not entry.timed_out
        return {"pass": passed, "metrics": {"exit_zero": code == 0}, "details": details}
    ok, metrics, found = verdict(report.outcomes, prepared.fail_to_pass, prepared.pass_to_pass)
    if not pytest:
        ok = ok and code == 0
        metrics["exit_zero"] = code == 0
    details.update(found)
    return {"pass": ok, "metrics": metrics, "details": details}
