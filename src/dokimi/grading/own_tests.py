"""``own_tests_fail_on_base``: do the tests the agent added test its change? (docs/agent-modes.md)

Measured for a task whose gate names the metric (an autonomous task's rule does), before grade runs (grade
may put test files back as they were):

1. **the agent's tests**: the files of the workspace diff that match the manifest's ``tests.globs`` and that
   the change added or modified (a deleted test is no test of the change). None is ``false``: the change
   tests nothing.
2. **on the agent's tree**: a copy of its workspace, with ``tests.run`` given those files; they must pass,
   since a test that fails everywhere shows nothing.
3. **on the base**: the workspace prepared again exactly as the agent got it (from dokimi's own source,
   never the agent's ``.git``), with the agent's test files copied in; they must fail.

``own_tests_fail_on_base`` is true when 2 passes and 3 fails; false otherwise; null (not measured) when the
manifest has no ``tests.globs`` or no ``tests.run``, or the files cannot be run (a bad command, a test file
that is not a regular file or a link). Each run is a container of its own (:func:`own_tests_spec`) holding
only its tree and a fresh HOME: no {eval_dir}, no {source_dir}, none of dokimi's files. Both trees are
removed once run; own_tests.json keeps the commands, their exit status and the end of their output.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from dokimi import safefs
from dokimi.checks.merge import take_workspace_diff
from dokimi.checks.own_tests import MAX_TEST_FILES, agent_test_files, own_tests_argv
from dokimi.errors import DokimiError, UsageError
from dokimi.grading.checks import framework_document
from dokimi.grading.merge import stored_diff
from dokimi.rundir import TESTS_HOME, TESTS_TREE, RunDir
from dokimi.sandbox.container import give_to_container_user, run_container
from dokimi.sandbox.specs import NEUTRAL_GLOBAL_GIT_CONFIG, own_tests_spec, workspace_cap_bytes
from dokimi.schemas._base import write_document
from dokimi.schemas.grade import OWN_TESTS_METRIC
from dokimi.schemas.grading import OwnTestsDoc, OwnTestsRunDoc

if TYPE_CHECKING:
    from dokimi.grading.environment import GradeEnvironment
    from dokimi.grading.grade import CellFacts  # grade imports this module
    from dokimi.schemas.grade import RepoGrade
    from dokimi.schemas.task import Task

__all__ = ["OWN_TESTS", "measure_own_tests", "own_tests_wanted", "read_own_tests"]

MAX_TEST_FILE_BYTES = 16 * 1024 * 1024
OUTPUT_TAIL = 4000
NO_COMMAND = "not measured: the manifest's tests block needs globs and run"


def own_tests_wanted(task: Task) -> bool:
    """Whether the task's gate names ``own_tests_fail_on_base``."""
    return OWN_TESTS_METRIC in task.gate_names


@dataclass(frozen=True)
class _Run:
    document: OwnTestsRunDoc

    @property
    def passed(self) -> bool:
        return self.document.passed


def _tail(text: str) -> str:
    return text[-OUTPUT_TAIL:]


def _run(
    environment: GradeEnvironment, task: Task, work: Path, argv: list[str], *, tree: str, name: str
) -> _Run:
    """One run in its own container (``work`` holds tree/ and home/)."""
    home = work / TESTS_HOME
    safefs.makedirs(home, trusted=work.parent)
    safefs.write_text(home / ".gitconfig", NEUTRAL_GLOBAL_GIT_CONFIG, trusted=work.parent)
    give_to_container_user(work)
    spec = own_tests_spec(environment.containers_for(task), name=name, work=work, argv=argv, task=task.id)
    ran = run_container(spec, timeout=environment.grade_timeout_s, kill_grace_s=environment.kill_grace)
    output = ran.stdout + ("\n" if ran.stdout and ran.stderr else "") + ran.stderr
    if ran.timed_out:
        output += f"\n[stopped after {environment.grade_timeout_s:g} s]"
    document = OwnTestsRunDoc(
        tree="agent" if tree == "agent" else "base",
        argv=argv,
        returncode=ran.returncode,
        passed=ran.ok,
        output=_tail(output),
    )
    return _Run(document)


def _copy_test_files(run_dir: Path, files: Sequence[str], tree: Path, trusted: Path) -> str | None:
    """The agent's test files copied over the base tree; why not, or None."""
    for rel in files:
        try:
            why = safefs.copy_entry(
                RunDir(run_dir).workspace / rel,
                tree / rel,
                trusted=run_dir,
                target_trusted=trusted,
                limit=MAX_TEST_FILE_BYTES,
            )
        except DokimiError as exc:
            return f"{rel}: {exc.message}"
        if why is not None:
            return f"{rel} is {why}, not a file dokimi copies"
    return None


def measure_own_tests(
    environment: GradeEnvironment, run_dir: Path, task: Task, *, facts: CellFacts
) -> OwnTestsDoc:
    """Measure ``own_tests_fail_on_base`` for one run (see the module docstring); own_tests.json is written
    and returned. The workspace diff is the one mergeability kept, taken again when there is none."""
    tests = environment.tests
    if tests is None or not tests.globs or not tests.run:
        return _written(run_dir, task, None, [], [], NO_COMMAND)
    diff = stored_diff(run_dir) or take_workspace_diff(RunDir(run_dir).workspace, facts.start_sha)
    files = agent_test_files(diff, tests)
    if not files:
        return _written(run_dir, task, False, [], [], "the change adds or changes no test file (tests.globs)")
    if len(files) > MAX_TEST_FILES:
        why = f"not measured: the change touches {len(files)} test files, more than {MAX_TEST_FILES}"
        return _written(run_dir, task, None, files, [], why)
    try:
        argv = own_tests_argv(tests.run, files, task=task.id)
    except UsageError as exc:
        return _written(run_dir, task, None, files, [], f"not measured: {exc.message}")
    work = RunDir(run_dir).own_tests_dir
    safefs.remove(work, trusted=run_dir)
    safefs.makedirs(work, trusted=run_dir)
    try:
        return _measure(environment, run_dir, task, facts=facts, files=files, argv=argv)
    finally:
        safefs.remove(work, trusted=run_dir)


def _measure(
    environment: GradeEnvironment,
    run_dir: Path,
    task: Task,
    *,
    facts: CellFacts,
    files: list[str],
    argv: list[str],
) -> OwnTestsDoc:
    work = RunDir(run_dir).own_tests_dir
    agent, base = work / "agent", work / "base"
    safefs.makedirs(agent, trusted=run_dir)
    try:
        safefs.copy_tree(
            RunDir(run_dir).workspace,
            agent / TESTS_TREE,
            trusted=run_dir,
            target_trusted=run_dir,
            max_bytes=workspace_cap_bytes(environment.containers.image_config),
        )
    except DokimiError as exc:
        why = f"not measured: the workspace cannot be copied: {exc.message}"
        return _written(run_dir, task, None, files, [], why)
    on_agent = _run(environment, task, agent, argv, tree="agent", name=facts.container("own-tests-agent"))
    safefs.remove(agent, trusted=run_dir)
    if not on_agent.passed:
        why = "the agent's tests fail on its own tree, so they show nothing about the change (base not run)"
        return _written(run_dir, task, False, files, [on_agent.document], why)
    facts.prepare(base / TESTS_TREE)
    problem = _copy_test_files(run_dir, files, base / TESTS_TREE, run_dir)
    if problem is not None:
        return _written(run_dir, task, None, files, [on_agent.document], f"not measured: {problem}")
    on_base = _run(environment, task, base, argv, tree="base", name=facts.container("own-tests-base"))
    runs = [on_agent.document, on_base.document]
    if on_base.passed:
        return _written(run_dir, task, False, files, runs, "the agent's tests pass on the base as well")
    why = "the agent's tests pass on its tree and fail on the base"
    return _written(run_dir, task, True, files, runs, why)


def _written(
    run_dir: Path,
    task: Task,
    value: bool | None,
    files: list[str],
    runs: list[OwnTestsRunDoc],
    reason: str,
) -> OwnTestsDoc:
    document = OwnTestsDoc(
        task=task.id, own_tests_fail_on_base=value, test_files=files, runs=runs, reason=reason
    )
    write_document(RunDir(run_dir).own_tests_json, document)
    return document


def read_own_tests(run_dir: Path) -> OwnTestsDoc | None:
    """own_tests.json of a finished run directory; None when absent or unreadable."""
    return framework_document(RunDir(run_dir).own_tests_json, OwnTestsDoc)


@dataclass(frozen=True)
class _Measured:
    document: OwnTestsDoc
    cost_usd: float | None = None
    judges: tuple[str, ...] = ()

    def finish(self, grade: RepoGrade | None) -> OwnTestsDoc:
        return self.document


class OwnTests:
    """The framework check of a task whose gate names ``own_tests_fail_on_base``: the agent's tests on its
    tree and on the base, before grade (own_tests.json)."""

    name = "own_tests"

    def start(
        self, environment: GradeEnvironment, run_dir: Path, task: Task, facts: CellFacts
    ) -> _Measured | None:
        if not own_tests_wanted(task):
            return None
        return _Measured(measure_own_tests(environment, run_dir, task, facts=facts))

    def read(self, run_dir: Path) -> OwnTestsDoc | None:
        return read_own_tests(run_dir)


OWN_TESTS = OwnTests()
"""The agent's own tests as a framework check (:mod:`dokimi.grading.checks`)."""
