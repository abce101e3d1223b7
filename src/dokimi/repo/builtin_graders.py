"""The built-in graders a manifest can name instead of writing its own: the host side.

``entry_points.grade: builtin:pytest`` or ``builtin:command CMD`` grades every task the way SWE-bench does
(the agent's tree with the task's tests put back, tests isolated from the tree, pass only when every
``fail_to_pass`` id passes and no ``pass_to_pass`` id breaks); ``entry_points.oracle`` then defaults to
``builtin:oracle``, which applies the task's ``oracle_patch``. A built-in grade is a prepare step in the
grade container, the tests in a container of their own, and the verdict on the host
(:mod:`dokimi.grading.builtin`; the container side is :mod:`dokimi.support.builtin_grade`, mounted read-only
at /eval/support). This module recognises the names, builds the argv of both containers, and decides the
verdict from the report the test process left.

``builtin:command`` takes a command line (split like shell words, never run by a shell). ``{report}`` in it is
replaced by /eval/out/report.xml, for a runner that writes JUnit XML there; the ids are then
``classname::name`` as the report spells them. Its tests run without {eval_dir} and {source_dir}: neither is
a placeholder of a built-in grade.
"""

from __future__ import annotations

import posixpath
import shlex
import xml.etree.ElementTree as ET
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal

from dokimi.constants import (
    CONTAINER_EVAL_DIR,
    CONTAINER_RUN_DIR,
    CONTAINER_SUPPORT,
    CONTAINER_TEST_OUT,
    CONTAINER_WORKSPACE,
)
from dokimi.errors import UsageError
from dokimi.rundir import JUNIT_REPORT, PYTEST_STREAM, RunDir
from dokimi.sandbox.specs import command_argv, substitute
from dokimi.schemas._base import did_you_mean

PREFIX = "builtin:"
SCRIPT = "builtin_grade.py"
STREAM_RUNNER = "pytest_stream.py"
ORACLE = "builtin:oracle"
REPORT_PLACEHOLDER = "report"
#: Placeholders a built-in grade's tests cannot use: their container mounts neither.
NOT_IN_TESTS = ("eval_dir", "source_dir")
MAX_IDS_IN_DETAILS = 200

Runner = Literal["pytest", "command", "oracle"]
#: builtin name -> the entry point it serves
BUILTINS: dict[str, Literal["grade", "oracle"]] = {"pytest": "grade", "command": "grade", "oracle": "oracle"}


@dataclass(frozen=True)
class Builtin:
    """A parsed ``builtin:NAME [ARGS]`` entry point."""

    name: Runner
    words: tuple[str, ...] = ()
    """builtin:command's command, as shell-like words."""


def is_builtin(command: str | None) -> bool:
    """Whether an entry point names a built-in grader (``builtin:...``)."""
    return command is not None and command.strip().startswith(PREFIX)


def builtin_problem(command: str, kind: str) -> str | None:
    """Why ``command`` (an entry point of ``kind``) is not a valid built-in, or None."""
    text = command.strip()[len(PREFIX) :]
    name, _, rest = text.partition(" ")
    if name not in BUILTINS:
        close = did_you_mean(name, list(BUILTINS))
        known = ", ".join(f"builtin:{n}" for n in BUILTINS)
        return f"unknown built-in {PREFIX}{name}" + (
            f" (did you mean {PREFIX}{close}?)" if close else f"; the built-ins are {known}"
        )
    if BUILTINS[name] != kind:
        return f"{PREFIX}{name} is a {BUILTINS[name]} entry point, not {kind}"
    try:
        words = shlex.split(rest)
    except ValueError as exc:
        return f"cannot split the command: {exc}"
    if name == "command" and not words:
        return "builtin:command needs the command to run, for example `builtin:command make test`"
    for placeholder in NOT_IN_TESTS:
        if "{" + placeholder + "}" in rest:
            return (
                f"{{{placeholder}}} is not mounted where a built-in grader runs its tests "
                "(their container holds the tree under test only)"
            )
    if name == "pytest" and not plugin_options(words):
        return "builtin:pytest takes only -p NAME (a pytest plugin to load: plugin autoload is off)"
    if name == "oracle" and words:
        return f"{PREFIX}{name} takes no arguments"
    return None


def plugin_options(words: Sequence[str]) -> bool:
    """Whether ``words`` are ``-p NAME`` pairs only (builtin:pytest's arguments)."""
    pairs = list(zip(words[::2], words[1::2], strict=False))
    return len(words) % 2 == 0 and all(
        flag == "-p" and name and not name.startswith("-") for flag, name in pairs
    )


def parse_builtin(command: str, kind: str) -> Builtin:
    """The built-in an entry point names; UsageError when it is not a valid one."""
    problem = builtin_problem(command, kind)
    if problem is not None:
        raise UsageError(f"entry_points.{kind}: {problem}")
    name, _, rest = command.strip()[len(PREFIX) :].partition(" ")
    runner: Runner = "pytest" if name == "pytest" else "command" if name == "command" else "oracle"
    return Builtin(runner, tuple(shlex.split(rest)))


def builtin_argv(
    command: str, kind: Literal["grade", "oracle"], *, task: str, values: Mapping[str, str] | None = None
) -> list[str]:
    """The grade container's argv for a built-in: the support script under ``python3 -I`` (no PYTHON*
    variables, no user site, nothing of the workspace on sys.path). For ``grade`` it is the prepare step
    (the tests run in a container of their own: :func:`builtin_tests_argv`). ``values`` are unused."""
    builtin = parse_builtin(command, kind)
    argv = ["python3", "-I", str(CONTAINER_SUPPORT / SCRIPT), "prepare" if kind == "grade" else "oracle"]
    argv += ["--contract", str(CONTAINER_RUN_DIR), "--eval-dir", str(CONTAINER_EVAL_DIR), "--task", task]
    if kind == "grade":
        argv += ["--out", str(RunDir(CONTAINER_RUN_DIR).builtin_tests)]
        if uses_report(command):
            argv.append("--uses-report")
        argv.append(builtin.name)
    return argv


def builtin_tests_argv(
    command: str, *, task: str, targets: Sequence[str], roots: Sequence[str] = ()
) -> list[str]:
    """The test container's argv: builtin:pytest runs dokimi's pytest runner on ``targets`` (its report the
    stream /eval/out/report.jsonl; ``roots`` its import roots relative to the tree; the manifest's ``-p``
    plugins); builtin:command runs the command (``{run_dir}`` and ``{task}`` substituted, ``{report}``
    becoming /eval/out/report.xml) in place of builtin_grade.py's ``command`` step, which cleans its
    environment."""
    builtin = parse_builtin(command, "grade")
    if builtin.name == "pytest":
        runner = str(CONTAINER_SUPPORT / STREAM_RUNNER)
        argv = ["python3", "-I", "-B", runner, "--stream", str(CONTAINER_TEST_OUT / PYTEST_STREAM)]
        argv += ["--root", str(CONTAINER_WORKSPACE)]
        for root in roots:
            argv += ["--path", posixpath.normpath(str(CONTAINER_WORKSPACE / root))]
        return [*argv, *builtin.words, "--", *targets]
    values = {"run_dir": str(CONTAINER_RUN_DIR), "task": task}
    words = [substitute(w, values, where="entry_points.grade") for w in builtin.words]
    report = str(CONTAINER_TEST_OUT / JUNIT_REPORT)
    return ["python3", "-I", str(CONTAINER_SUPPORT / SCRIPT), "command", "--report", report, "--", *words]


def validation_prepare_argv(task: str, *, public: bool, hidden: bool) -> list[str]:
    """The grade container's argv that makes the trees of a task's validation commands (the support script's
    ``validation`` step: public/tree and hidden/tree under ``{run_dir}/validation``)."""
    argv = ["python3", "-I", str(CONTAINER_SUPPORT / SCRIPT), "validation"]
    argv += ["--contract", str(CONTAINER_RUN_DIR), "--eval-dir", str(CONTAINER_EVAL_DIR), "--task", task]
    argv += ["--out", str(RunDir(CONTAINER_RUN_DIR).validation)]
    return argv + (["--public"] if public else []) + (["--hidden"] if hidden else [])


def validation_command_argv(command: str) -> list[str]:
    """A validation command's container argv: its words (split like an entry point, no placeholders), run in
    place of the support script's ``command`` step, which cleans the environment as for builtin:command."""
    words = command_argv(command, {}, where="a validation command")
    report = str(CONTAINER_TEST_OUT / JUNIT_REPORT)
    return ["python3", "-I", str(CONTAINER_SUPPORT / SCRIPT), "command", "--report", report, "--", *words]


def uses_report(command: str) -> bool:
    """Whether builtin:command names ``{report}`` (then its JUnit report decides, not only its exit code)."""
    return "{" + REPORT_PLACEHOLDER + "}" in command


# --- the verdict (on the host, from the report the test process left) --------------------------------------


def verdict(
    outcomes: Mapping[str, str] | None, f2p: Sequence[str], p2p: Sequence[str]
) -> tuple[bool, dict[str, Any], dict[str, Any]]:
    """(pass, metrics, details): every fail_to_pass id passed, no pass_to_pass id failed or went missing."""
    seen = outcomes or {}
    f2p_failing = [t for t in f2p if seen.get(t) != "passed"]
    p2p_broken = [t for t in p2p if seen.get(t) != "passed"]
    ok = outcomes is not None and not f2p_failing and not p2p_broken
    metrics = {
        "fail_to_pass": outcomes is not None and not f2p_failing,
        "pass_to_pass": outcomes is not None and not p2p_broken,
        "fail_to_pass_passed": len(f2p) - len(f2p_failing),
        "pass_to_pass_broken": len(p2p_broken),
    }
    details = {
        "fail_to_pass_not_passing": {t: seen.get(t, "not run") for t in f2p_failing[:MAX_IDS_IN_DETAILS]},
        "pass_to_pass_broken": {t: seen.get(t, "not run") for t in p2p_broken[:MAX_IDS_IN_DETAILS]},
    }
    return ok, metrics, details


NamedTest = tuple[str, str, str]
"""(which list: FAIL_TO_PASS or PASS_TO_PASS, test id, outcome)."""


def named_test_outcomes(task: Mapping[str, Any], grade: Mapping[str, Any] | None) -> list[NamedTest]:
    """The outcome of every test task.json names (``fail_to_pass``, then ``pass_to_pass``), read back from a
    built-in grader's grade.json (:func:`verdict`): a test it lists as not passing has the outcome it
    recorded there, every other one passed when the counts say the list is whole. A grade that failed ran
    nothing; a test beyond the listed :data:`MAX_IDS_IN_DETAILS` is said to be unknown, never guessed."""
    metrics = grade.get("metrics") if isinstance(grade, Mapping) else None
    details = grade.get("details") if isinstance(grade, Mapping) else None
    metrics = metrics if isinstance(metrics, Mapping) else {}
    details = details if isinstance(details, Mapping) else {}
    out: list[NamedTest] = []
    for which, key, listed_key, count_key in (
        ("FAIL_TO_PASS", "fail_to_pass", "fail_to_pass_not_passing", "fail_to_pass_passed"),
        ("PASS_TO_PASS", "pass_to_pass", "pass_to_pass_broken", "pass_to_pass_broken"),
    ):
        ids = [str(t) for t in task.get(key) or [] if isinstance(t, str)]
        listed = details.get(listed_key)
        listed = listed if isinstance(listed, Mapping) else {}
        count = metrics.get(count_key)
        failing = len(ids) - count if which == "FAIL_TO_PASS" and type(count) is int else count
        whole = type(failing) is int and failing == len(listed)
        for test in ids:
            if not isinstance(grade, Mapping):
                outcome = "not graded (no grade.json)"
            elif grade.get("pass") is None and grade.get("errors"):
                outcome = "not run (the grader failed)"
            elif test in listed:
                outcome = str(listed[test])
            elif whole:
                outcome = "passed"
            else:
                outcome = f"unknown (grade.json lists at most {MAX_IDS_IN_DETAILS} tests that did not pass)"
            out.append((which, test, outcome))
    return out


def junit_ids(classname: str, name: str) -> list[str]:
    """Every id a JUnit test case answers to: ``classname::name``, ``classname.name``, and the pytest node ids
    the dotted class name can stand for (``tests.test_ops`` + ``test_add`` -> ``tests/test_ops.py::test_add``;
    ``tests.test_ops.TestX`` -> ``tests/test_ops.py::TestX::test_add`` too)."""
    if not classname:
        return [name]
    ids = [f"{classname}::{name}", f"{classname}.{name}"]
    parts = classname.split(".")
    for cut in range(1, len(parts) + 1):
        module = "/".join(parts[:cut]) + ".py"
        ids.append("::".join([module, *parts[cut:], name]))
    return ids


def junit_outcomes(data: bytes, *, aliases: bool = True) -> dict[str, str]:
    """test id -> passed / failed / skipped, from a JUnit XML report: each case under every id of
    :func:`junit_ids` (``aliases``), or only under its first, ``classname::name`` (what discovery records).
    Raises ``xml.etree.ElementTree.ParseError`` for a report that is not XML (expat refuses entity expansion
    bombs and never fetches an external entity)."""
    root = ET.fromstring(data)
    outcomes: dict[str, str] = {}
    for case in root.iter("testcase"):
        if case.find("failure") is not None or case.find("error") is not None:
            outcome = "failed"
        elif case.find("skipped") is not None:
            outcome = "skipped"
        else:
            outcome = "passed"
        ids = junit_ids(case.get("classname") or "", case.get("name") or "")
        for test_id in ids if aliases else ids[:1]:
            if outcomes.get(test_id) in (None, "passed"):
                outcomes[test_id] = outcome
    return outcomes
