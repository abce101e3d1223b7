"""A task's reference: what every run of the task in a batch is compared with by the test-integrity check,
measured once per batch, before the cells, in the batch's own image.

- **the base test list**: the manifest's ``tests.list`` on the base workspace (prepared as a cell's, before
  any change), so the agent's list can be compared with it ("no test case removed");
- **the oracle's skipped tests**: the repository's ``oracle`` entry point on that same workspace, then
  ``grade``; grade.json's ``tests_skipped`` is what a run may not exceed ("no more tests skipped or
  deselected than on the oracle run of the same task").

A part that cannot be measured (no ``tests.list``, the command or the oracle failed, a grader failure, a
grade.json without ``tests_skipped``) is null with a note: its rule is not measured in the batch, never
failed. The document is ``<batch>/_eval/reference/<task>/reference.json`` (repo_task_reference.v1); a
resumed batch and ``repo regrade`` read it back (the batch is pinned to its eval tree, so the oracle is the
same).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from pathlib import Path
from typing import TYPE_CHECKING

from dokimi.errors import DocumentError
from dokimi.grading.entrypoints import grade_run, run_entry_point
from dokimi.grading.environment import GradeEnvironment
from dokimi.grading.testlist import list_command, run_tests_list
from dokimi.rundir import REFERENCE_JSON, BatchLayout
from dokimi.schemas._base import read_document, write_document
from dokimi.schemas.grading import TaskReferenceDoc

if TYPE_CHECKING:
    from dokimi.schemas.task import Task

__all__ = [
    "load_references",
    "measure_reference",
    "not_measured",
    "oracle_tests_skipped",
    "read_reference",
    "stored_references",
]


ContainerName = Callable[[str], str]
"""The container name of a role (``tests-list``, ``oracle``, ``grade``)."""


def oracle_tests_skipped(
    environment: GradeEnvironment, run_dir: Path, task: Task, *, container: ContainerName
) -> tuple[float | None, str | None]:
    """The oracle on the run directory's workspace, then grade: (grade.json's ``tests_skipped``, None), or
    (None, why it was not measured)."""
    oracle = run_entry_point(environment, run_dir, task, "oracle", name=container("oracle"))
    failure = oracle.failure(environment.grade_timeout_s)
    if failure is not None:
        return None, f"the oracle failed: {failure}"
    graded = grade_run(environment, run_dir, task, name=container("grade"))
    if graded.grade is None:
        return None, f"the oracle's grade failed: {graded.verdict.grader_error}"
    skipped = graded.grade.metrics.get("tests_skipped")
    if isinstance(skipped, bool) or not isinstance(skipped, (int, float)):
        return None, "the oracle's grade.json reports no tests_skipped"
    return float(skipped), None


def measure_reference(
    environment: GradeEnvironment, run_dir: Path, task: Task, *, container: ContainerName
) -> TaskReferenceDoc:
    """The reference of ``task`` measured on ``run_dir``, whose workspace the caller prepared as a cell's
    (with task.json and meta.json beside it): first ``tests.list`` on the untouched workspace, then the
    oracle and its grade."""
    base_tests: list[str] | None = None
    base_note: str | None = "the manifest has no tests.list"
    if list_command(environment) is not None:
        listed = run_tests_list(environment, run_dir, task, name=container("tests-list"))
        base_tests, base_note = listed.ids, listed.failure
    skipped, skipped_note = oracle_tests_skipped(environment, run_dir, task, container=container)
    return TaskReferenceDoc(
        task=task.id,
        oracle_tests_skipped=skipped,
        oracle_note=skipped_note,
        base_tests=base_tests,
        base_tests_note=base_note,
    )


def read_reference(layout: BatchLayout, task_id: str) -> TaskReferenceDoc | None:
    """The stored reference of a task, or None when there is none (or it cannot be read: measured again)."""
    path = layout.reference_json(task_id)
    if path.is_symlink() or not path.is_file():
        return None
    try:
        doc = read_document(path, TaskReferenceDoc)
    except DocumentError:
        return None
    return doc if doc.task == task_id else None


def not_measured(task_id: str, why: str) -> TaskReferenceDoc:
    """A reference with neither part measured, for ``why``."""
    return TaskReferenceDoc(
        task=task_id, oracle_tests_skipped=None, oracle_note=why, base_tests=None, base_tests_note=why
    )


def load_references(
    layout: BatchLayout,
    task_ids: Iterable[str],
    measure: Callable[[str], TaskReferenceDoc | None] | None = None,
) -> dict[str, TaskReferenceDoc]:
    """The reference of every task in ``task_ids``: the stored one, else (with ``measure``) measured and
    stored. A task with no stored reference and none measured (``measure`` returned None, or there is no
    ``measure``: ``repo regrade``) is left out."""
    found: dict[str, TaskReferenceDoc] = {}
    for task_id in task_ids:
        doc = read_reference(layout, task_id)
        if doc is None and measure is not None:
            doc = measure(task_id)
            if doc is not None:
                write_document(layout.reference_json(task_id), doc)
        if doc is not None:
            found[task_id] = doc
    return found


def stored_references(layout: BatchLayout) -> dict[str, TaskReferenceDoc]:
    """Every reference the batch stored, by task id (what ``repo regrade`` grades with)."""
    found: dict[str, TaskReferenceDoc] = {}
    if layout.references.is_symlink() or not layout.references.is_dir():
        return found
    for entry in sorted(layout.references.iterdir()):
        path = entry / REFERENCE_JSON
        if entry.is_symlink() or path.is_symlink() or not path.is_file():
            continue
        try:
            doc = read_document(path, TaskReferenceDoc)
        except DocumentError:
            continue
        if layout.reference_json(doc.task) == path:
            found[doc.task] = doc
    return found
