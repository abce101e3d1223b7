"""The built-in graders a manifest can name instead of writing its own: the host side.

``entry_points.grade: builtin:pytest`` or ``builtin:command CMD`` grades every task the way SWE-bench does
(the agent's tree with the task's tests put back, tests isolated from the tree, pass only when every
``fail_to_pass`` id passes and no ``pass_to_pass`` id breaks); ``entry_points.oracle`` then defaults to
``builtin:oracle``, which applies the task's ``oracle_patch``. The grading itself runs in the grade container
(:mod:`dokimi.support.builtin_grade`, mounted read-only at /eval/support); this module recognises the names,
turns them into that script's argv, and lists the task.json keys they read.

``builtin:command`` takes a command line (split like shell words, never run by a shell). ``{report}`` in it is
replaced, in the container, by a path the tree cannot predict, for a runner that writes JUnit XML there; the
ids are then ``classname::name`` as the report spells them.
"""

from __future__ import annotations

import shlex
from dataclasses import dataclass
from typing import Literal

from dokimi.constants import CONTAINER_EVAL_DIR, CONTAINER_RUN_DIR, CONTAINER_SUPPORT
from dokimi.errors import UsageError

PREFIX = "builtin:"
SCRIPT = "builtin_grade.py"
ORACLE = "builtin:oracle"
REPORT_PLACEHOLDER = "report"

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
        from dokimi.schemas._base import did_you_mean

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
    if name != "command" and words:
        return f"{PREFIX}{name} takes no arguments"
    return None


def parse_builtin(command: str, kind: str) -> Builtin:
    """The built-in an entry point names; UsageError when it is not a valid one."""
    problem = builtin_problem(command, kind)
    if problem is not None:
        raise UsageError(f"entry_points.{kind}: {problem}")
    name, _, rest = command.strip()[len(PREFIX) :].partition(" ")
    runner: Runner = "pytest" if name == "pytest" else "command" if name == "command" else "oracle"
    return Builtin(runner, tuple(shlex.split(rest)))


def builtin_argv(
    command: str, kind: Literal["grade", "oracle"], *, task: str, values: dict[str, str]
) -> list[str]:
    """The grade container's argv for a built-in: the support script under ``python3 -I`` (no PYTHON*
    variables, no user site, nothing of the workspace on sys.path). ``values`` are the placeholders of the
    entry point (builtin:command's words get them; ``{report}`` is left for the script)."""
    from dokimi.sandbox.specs import substitute

    builtin = parse_builtin(command, kind)
    argv = [
        "python3", "-I", str(CONTAINER_SUPPORT / SCRIPT), kind,
        "--contract", str(CONTAINER_RUN_DIR), "--eval-dir", str(CONTAINER_EVAL_DIR), "--task", task,
    ]  # fmt: skip
    if kind == "grade":
        argv.append(builtin.name)
        if builtin.words:
            argv += ["--", *(substitute(w, values, where=f"entry_points.{kind}") for w in builtin.words)]
    return argv


def uses_report(command: str) -> bool:
    """Whether builtin:command names ``{report}`` (then its JUnit report decides, not only its exit code)."""
    return "{" + REPORT_PLACEHOLDER + "}" in command
