"""The manifest's ``tests.list`` command: the test ids of one workspace, for the test-integrity rule "no test
case removed".

How to list test cases is language- and build-specific, so it is the repository's job: ``tests.list`` prints
one test id per line, run in a grade container with the workspace as its cwd (the placeholders {eval_dir},
{run_dir} and {task}, as for an entry point; no shell unless the command starts one). It runs on the base
workspace once per batch (:mod:`dokimi.grading.reference`) and on the agent's workspace after its run and
before grade, since grade restores the hidden test files and would put back a test the agent deleted.

The printed ids are untrusted: at most :data:`MAX_LIST_BYTES` are read, blank lines are dropped, and each id
is kept as text (no line is interpreted). A command that exits non-zero, runs past the grade timeout or prints
more than that has no list, with the reason.
"""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import TYPE_CHECKING

from dokimi import safefs
from dokimi.constants import CONTAINER_EVAL_DIR, CONTAINER_RUN_DIR, CONTAINER_WORKSPACE
from dokimi.grading.egress import entry_egress
from dokimi.grading.environment import GradeEnvironment
from dokimi.grading.evidence import run_sealed
from dokimi.rundir import RunDir
from dokimi.sandbox.container import Mount
from dokimi.sandbox.specs import GradeMounts, command_argv, fresh_grade_home, grade_spec
from dokimi.schemas._base import write_document
from dokimi.schemas.grading import TestsListDoc

if TYPE_CHECKING:
    from dokimi.schemas.task import Task

__all__ = ["MAX_LIST_BYTES", "list_command", "parse_test_ids", "run_tests_list", "tests_list_argv"]

MAX_LIST_BYTES = 16 * 1024 * 1024
"""The most a ``tests.list`` command may print (about 200,000 test ids of 80 characters)."""
STDERR_TAIL_LINES = 10


def list_command(environment: GradeEnvironment) -> str | None:
    """The manifest's ``tests.list`` command; None when the manifest has none."""
    tests = environment.tests
    return tests.list_ if tests is not None and tests.list_ else None


def tests_list_argv(command: str, *, task: str) -> list[str]:
    """``tests.list`` as an argv: shell-like words, each with {eval_dir}, {run_dir} and {task} substituted
    once."""
    values = {"eval_dir": str(CONTAINER_EVAL_DIR), "run_dir": str(CONTAINER_RUN_DIR), "task": task}
    return command_argv(command, values, where="tests.list")


def parse_test_ids(stdout: str) -> list[str]:
    """One id per line, surrounding white space stripped, blank lines dropped; sorted, without duplicates."""
    return sorted({line.strip() for line in stdout.splitlines() if line.strip()})


def run_tests_list(environment: GradeEnvironment, run_dir: Path, task: Task, *, name: str) -> TestsListDoc:
    """Run ``tests.list`` on the workspace of ``run_dir`` in a grade container, the workspace read-only (the
    agent's code it imports cannot change the tree grade sees next); the list (or why there is none) is
    written to ``{run_dir}/tests_list.json`` and returned. The caller checks that the manifest has the command
    (:func:`list_command`)."""
    command = list_command(environment)
    assert command is not None
    fresh_grade_home(run_dir)
    with entry_egress(environment, task, run_dir, by="tests.list", name=name) as (settings, egress_env):
        spec = grade_spec(
            settings,
            GradeMounts(environment.eval_content),
            name=name,
            run_dir=run_dir,
            argv=tests_list_argv(command, task=task.id),
            task=task.id,
            env=egress_env,
        )
        # read-only: listing imports the agent's code, which must not change the tree grade is about to see
        spec = dataclasses.replace(
            spec, mounts=[*spec.mounts, Mount(RunDir(run_dir).workspace, CONTAINER_WORKSPACE, read_only=True)]
        )
        result = run_sealed(
            spec,
            run_dir,
            what="tests.list",
            timeout=environment.grade_timeout_s,
            kill_grace_s=environment.kill_grace,
            max_output=MAX_LIST_BYTES,
        )
    failure = None
    if result.timed_out:
        failure = f"tests.list ran past its timeout of {environment.grade_timeout_s:g} s and was stopped"
    elif result.returncode != 0:
        tail = "\n".join(result.stderr.rstrip().splitlines()[-STDERR_TAIL_LINES:])
        failure = f"tests.list exited {result.returncode}" + (f":\n{tail}" if tail else "")
    elif result.stdout_omitted:
        failure = f"tests.list printed more than {MAX_LIST_BYTES} bytes"
    doc = TestsListDoc(
        command=command, ids=None if failure else parse_test_ids(result.stdout), failure=failure
    )
    safefs.remove(RunDir(run_dir).tests_list_json, trusted=run_dir)  # whatever the command left in its place
    write_document(RunDir(run_dir).tests_list_json, doc)
    return doc
