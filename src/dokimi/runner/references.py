"""The references of a batch's tasks (:mod:`dokimi.grading.reference`), measured before any cell runs.

For each task with a rubric among the cells to run, once per batch: a run directory under
``<batch>/_eval/reference/<task>/run/`` with a workspace prepared as a cell's (arm guidance:raw), task.json
and meta.json; then ``tests.list`` on it, the oracle and its grade. A reference stored by an earlier run of
the batch is read back, not measured again; one that could not be measured at all (a workspace that cannot
be prepared, docker refusing the container) leaves the task's rules not measured in this run and is not
stored. The result joins the batch's grade environment, so every cell
(on this machine or a cluster node) grades against the same values.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING

from dokimi.batch import CellKey
from dokimi.errors import DokimiError
from dokimi.grading.merge import load_rubric
from dokimi.grading.reference import load_references, measure_reference, not_measured
from dokimi.process import shutting_down
from dokimi.repo.arms import ARM_RAW
from dokimi.rundir import TASK_JSON, RunDir
from dokimi.runner.cell import prepare, reset_run_dir
from dokimi.sandbox.container import container_name
from dokimi.schemas._base import write_document, write_text_atomic
from dokimi.schemas.meta import no_agent_meta

if TYPE_CHECKING:
    from dokimi.runner.cell import CellContext
    from dokimi.schemas.grading import TaskReferenceDoc

__all__ = ["REFERENCE_MODEL", "measure_task_reference", "with_references"]

REFERENCE_MODEL = "reference"
"""The model named in the meta.json of a reference's run directory (no agent ran there)."""


def measure_task_reference(ctx: CellContext, task_id: str) -> TaskReferenceDoc:
    """Prepare the task's reference run directory and measure its reference there."""
    task = ctx.task(task_id)
    run_dir = ctx.layout.reference_run_dir(task_id)
    reset_run_dir(run_dir)
    prepared = prepare(ctx, CellKey(task_id, ARM_RAW, REFERENCE_MODEL, None, 0), run_dir)
    write_text_atomic(RunDir(run_dir).task_json, (ctx.task_dir(task_id) / TASK_JSON).read_text("utf-8"))
    meta = no_agent_meta(
        prepared.meta_fields(), task=task_id, mode=task.mode, batch=ctx.batch, model=REFERENCE_MODEL
    )
    write_document(RunDir(run_dir).meta_json, meta)
    write_text_atomic(RunDir(run_dir).events_jsonl, "")
    write_text_atomic(RunDir(run_dir).answer_txt, "")
    return measure_reference(
        ctx.grading,
        run_dir,
        task,
        container=lambda role: container_name(ctx.batch, f"reference-{task_id}", role),
    )


def with_references(ctx: CellContext, cells: Sequence[CellKey], note: Callable[[str], None]) -> CellContext:
    """``ctx`` with the reference of every task with a rubric among ``cells`` in its grade environment."""
    task_ids = sorted({c.task for c in cells if load_rubric(ctx.task_dir(c.task)) is not None})
    if not task_ids:
        return ctx

    unmeasured: dict[str, TaskReferenceDoc] = {}

    def measure(task_id: str) -> TaskReferenceDoc | None:
        note(f"measuring the reference of {task_id}: tests.list on the base, the oracle and its grade")
        try:
            return measure_task_reference(ctx, task_id)
        except DokimiError as exc:
            if shutting_down():
                raise
            # not stored: the next run of the batch measures it again
            why = f"the task's reference could not be measured: {exc.message}"
            note(f"{task_id}: {why}")
            unmeasured[task_id] = not_measured(task_id, why)
            return None

    references = {**load_references(ctx.layout, task_ids, measure), **unmeasured}
    grading = dataclasses.replace(ctx.grading, references={**ctx.grading.references, **references})
    return dataclasses.replace(ctx, grading=grading)
