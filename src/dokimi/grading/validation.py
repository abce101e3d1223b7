"""A task's validation commands, run after the agent for the human raters (validation/commands.json).

task.json may list ``validation_commands`` (public: what a contributor runs before a review) and
``hidden_validation_commands`` (the locked evaluator checks). Raters score ``validation_passed`` from their
output (``repo rate export`` puts it in the blinded package); the gate never reads it: a task gates on what
its grader reports. They run the way a built-in grader's tests run (:mod:`dokimi.grading.builtin`):

1. **the trees**, in the grade container (the run directory with dokimi's files read-only, {eval_dir}): the
   support script's ``validation`` step copies the agent's files (without ``.git``) to
   ``validation/public/tree``, and makes ``validation/hidden/tree`` as a built-in grade makes its tree under
   test: every test file as it was at the base, the hidden tests (``test_patch``) applied. No code of the
   workspace runs in this step.
2. **each command**, in a container of its own that holds only its tree, a fresh HOME, an empty
   ``/eval/out``, the caches and dokimi's support scripts (:func:`dokimi.sandbox.specs.builtin_tests_spec`):
   no {eval_dir}, no {source_dir}, no run directory. It runs through the support script's ``command`` step
   (no shell; PYTHONPATH and the like dropped), stdout and stderr together, within the grade timeout.

Both run after the agent and before ``grade`` (a grader may restore hidden tests in the workspace), so the
public tree is the agent's change as it left it. commands.json is dokimi's (every later container sees it
read-only); the trees are removed once the commands ran.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Literal

from dokimi import safefs
from dokimi.errors import DokimiError
from dokimi.grading.checks import framework_document
from dokimi.grading.entrypoints import give_top_level
from dokimi.grading.evidence import run_sealed
from dokimi.repo.builtin_graders import validation_command_argv, validation_prepare_argv
from dokimi.rundir import (
    BUILTIN_OUT,
    BUILTIN_PREPARED,
    TESTS_HOME,
    TESTS_TREE,
    RunDir,
)
from dokimi.sandbox.container import give_to_container_user, run_container
from dokimi.sandbox.specs import GradeMounts, builtin_tests_spec, fresh_grade_home, grade_spec
from dokimi.schemas._base import write_document
from dokimi.schemas.grading import ValidationCommandRun, ValidationCommandsDoc
from dokimi.support.builtin_grade import NOT_RUN, NOT_RUN_EXIT

if TYPE_CHECKING:
    from dokimi.grading.environment import GradeEnvironment
    from dokimi.grading.grade import CellFacts
    from dokimi.schemas.grade import RepoGrade
    from dokimi.schemas.task import Task

__all__ = ["VALIDATION", "read_validation", "run_validation"]

Kind = Literal["public", "hidden"]
MAX_OUTPUT_CHARS = 256 * 1024
"""What commands.json keeps of one command's output: its end."""
MAX_PREPARED_BYTES = 1024 * 1024


def commands_of(task: Task) -> list[tuple[Kind, str]]:
    """The task's validation commands, public ones first, each in task.json's order."""
    public: list[tuple[Kind, str]] = [("public", c) for c in task.validation_commands]
    hidden: list[tuple[Kind, str]] = [("hidden", c) for c in task.hidden_validation_commands]
    return public + hidden


def _fresh_dir(path: Path, trusted: Path) -> None:
    safefs.remove(path, trusted=trusted)
    safefs.makedirs(path, trusted=trusted)
    give_to_container_user(path)


def _failure(what: str, returncode: int | None, timed_out: bool, stderr: str, timeout: float) -> str:
    if timed_out:
        return f"{what} ran past {timeout:g} s and was stopped"
    tail = stderr.strip().splitlines()[-1:] if stderr.strip() else []
    return f"{what} exited {returncode}" + (f": {tail[0][:300]}" if tail else "")


def _prepared_error(work: Path, run_dir: Path) -> str | None:
    """prepared.json's ``error`` (read as untrusted input), or why the file cannot be read."""
    try:
        data = json.loads(
            safefs.read_bytes(work / BUILTIN_PREPARED, trusted=run_dir, limit=MAX_PREPARED_BYTES)
        )
    except FileNotFoundError:
        return "the validation step wrote no prepared.json"
    except (DokimiError, ValueError, RecursionError) as exc:
        return f"the validation step's prepared.json cannot be read: {exc}"
    error = data.get("error") if isinstance(data, dict) else "prepared.json is not a JSON object"
    return error if isinstance(error, str) else None


def make_trees(environment: GradeEnvironment, run_dir: Path, task: Task, *, name: str) -> str | None:
    """Step 1 (module docstring): the trees, in the grade container; why they could not be made, or None."""
    kinds = {kind for kind, _ in commands_of(task)}
    work = RunDir(run_dir).validation
    _fresh_dir(work, run_dir)
    fresh_grade_home(run_dir)
    argv = validation_prepare_argv(task.id, public="public" in kinds, hidden="hidden" in kinds)
    mounts = GradeMounts(environment.eval_content)
    spec = grade_spec(
        environment.containers_for(task), mounts, name=name, run_dir=run_dir, argv=argv, task=task.id
    )
    give_top_level(run_dir)
    timeout = environment.grade_timeout_s
    ran = run_sealed(
        spec, run_dir, what="the validation step", timeout=timeout, kill_grace_s=environment.kill_grace
    )
    if not ran.ok:
        return _failure("the validation step", ran.returncode, ran.timed_out, ran.stderr, timeout)
    return _prepared_error(work, run_dir)


def run_command(
    environment: GradeEnvironment, run_dir: Path, task: Task, kind: Kind, command: str, *, name: str
) -> ValidationCommandRun:
    """Step 2 (module docstring): one command in a container holding only its tree."""
    work = RunDir(run_dir).validation / kind
    if safefs.kind(work / TESTS_TREE, trusted=run_dir) != "a directory":
        return ValidationCommandRun(kind=kind, command=command, exit_code=None, not_run=f"no {kind} tree")
    for sub in (TESTS_HOME, BUILTIN_OUT):
        _fresh_dir(work / sub, run_dir)
    spec = builtin_tests_spec(
        environment.containers_for(task),
        name=name,
        run_dir=run_dir,
        argv=validation_command_argv(command),
        task=task.id,
        work=work,
    )
    ran = run_container(spec, timeout=environment.grade_timeout_s, kill_grace_s=environment.kill_grace)
    output = ran.stdout + ran.stderr
    missing = [line for line in ran.stderr.splitlines() if line.startswith(NOT_RUN)]
    not_run = (
        missing[-1].removeprefix("builtin:command ") if ran.returncode == NOT_RUN_EXIT and missing else None
    )
    return ValidationCommandRun(
        kind=kind,
        command=command,
        exit_code=None if ran.timed_out or not_run else ran.returncode,
        timed_out=ran.timed_out,
        not_run=not_run,
        output=output[-MAX_OUTPUT_CHARS:],
        truncated=len(output) > MAX_OUTPUT_CHARS or bool(ran.stdout_omitted or ran.stderr_omitted),
    )


def run_validation(
    environment: GradeEnvironment, run_dir: Path, task: Task, *, container: Callable[[str], str]
) -> ValidationCommandsDoc:
    """Make the trees, run every command, write validation/commands.json and remove the trees."""
    error = make_trees(environment, run_dir, task, name=container("validation"))
    runs = []
    for number, (kind, command) in enumerate(commands_of(task), 1):
        if error is not None:
            runs.append(ValidationCommandRun(kind=kind, command=command, exit_code=None, not_run=error))
            continue
        runs.append(
            run_command(environment, run_dir, task, kind, command, name=container(f"validation-{number}"))
        )
    document = ValidationCommandsDoc(commands=runs, error=error)
    where = RunDir(run_dir)
    for kind in ("public", "hidden"):
        safefs.remove(where.validation / kind, trusted=run_dir)
    safefs.remove(where.validation_commands_json, trusted=run_dir)  # whatever a container left in its place
    write_document(where.validation_commands_json, document)
    return document


def read_validation(run_dir: Path) -> ValidationCommandsDoc | None:
    """validation/commands.json of a finished run directory; None when absent or unreadable."""
    return framework_document(RunDir(run_dir).validation_commands_json, ValidationCommandsDoc)


@dataclass
class _StartedValidation:
    document: ValidationCommandsDoc
    cost_usd: float | None = None
    judges: tuple[str, ...] = ()

    def finish(self, grade: RepoGrade | None) -> ValidationCommandsDoc:
        return self.document


class Validation:
    """The framework check of a task with validation commands (module docstring): it runs them before grade,
    and its document gives the gate nothing."""

    name = "validation"

    def start(
        self, environment: GradeEnvironment, run_dir: Path, task: Task, facts: CellFacts
    ) -> _StartedValidation | None:
        if not commands_of(task):
            return None
        return _StartedValidation(run_validation(environment, run_dir, task, container=facts.container))

    def read(self, run_dir: Path) -> ValidationCommandsDoc | None:
        return read_validation(run_dir)


VALIDATION = Validation()
"""A task's validation commands as a framework check (:mod:`dokimi.grading.checks`)."""
