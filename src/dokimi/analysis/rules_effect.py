"""``repo rules effect``: review recall with the team rules in the reviewer's prompt and without, from a
finished batch that ran an arm with the rules (``<arm>+rules``) beside the same arm without them.

The spec's warning is the reason for the split: the whole list helps on threads a rule covers and hurts on
threads none covers. So each human review thread of a review task (task.json's ``threads``, each with the
rules that cover it) is one trial per run, found or not as the task's grader says (grade.json's
``threads``), and the threads are reported in two classes:

- **covered**: some rule covers the thread; the rules should raise the share found;
- **uncovered**: no rule covers it; ``loss_on_uncovered`` (the share found without the rules minus the share
  with them) is what giving rules costs there.

A thread-run the grader did not report is not counted. Each class's change has a Newcombe 95% interval; a
class with fewer than :data:`MIN_THREAD_RUNS` runs in an arm is marked underpowered.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from dokimi.batch import Batch, Cell, load_batch
from dokimi.errors import DocumentError, UsageError
from dokimi.repo.arms import Arm
from dokimi.repo.rules import Share, share_doc
from dokimi.rundir import RunDir
from dokimi.schemas._base import read_document
from dokimi.schemas.grade import RepoGrade
from dokimi.schemas.rules_reports import RulesEffect
from dokimi.schemas.task import Task
from dokimi.stats import mean, newcombe_interval

__all__ = ["MIN_THREAD_RUNS", "rules_effect"]

MIN_THREAD_RUNS = 20
"""Fewer thread-runs than this in a class of either arm: the change is a hint, not a measurement."""


@dataclass
class _Runs:
    """What one arm's cells of the compared tasks found."""

    scores: list[float] = field(default_factory=list)
    covered: list[bool] = field(default_factory=list)
    uncovered: list[bool] = field(default_factory=list)
    threads: dict[str, set[str]] = field(default_factory=lambda: {"covered": set(), "uncovered": set()})


def _read_threads(cell: Cell) -> tuple[Task, dict[str, bool]] | None:
    """The task as the run saw it and the grader's threads; None when either cannot be read."""
    try:
        task = read_document(RunDir(cell.dir).task_json, Task, trusted=cell.dir)
        grade = read_document(RunDir(cell.dir).grade_json, RepoGrade, trusted=cell.dir)
    except DocumentError:
        return None
    return task, grade.threads


def _collect(cells: Iterable[Cell], tasks: set[str]) -> _Runs:
    runs = _Runs()
    for cell in cells:
        result = cell.result
        if result is None or result.task not in tasks:
            continue
        if result.score is not None:
            runs.scores.append(result.score)
        read = _read_threads(cell)
        if read is None:
            continue
        task, found = read
        for thread in task.threads:
            if thread.id not in found:
                continue
            kind = "covered" if thread.rules else "uncovered"
            (runs.covered if thread.rules else runs.uncovered).append(found[thread.id])
            runs.threads[kind].add(f"{task.id}/{thread.id}")
    return runs


def _class(with_runs: list[bool], without_runs: list[bool], threads: int) -> dict[str, Any]:
    a = Share(sum(with_runs), len(with_runs))
    b = Share(sum(without_runs), len(without_runs))
    change = None if a.value is None or b.value is None else a.value - b.value
    interval = newcombe_interval(b.k, b.n, a.k, a.n) if a.n and b.n else None  # of a - b
    return {
        "threads": threads,
        "with_rules": share_doc(a),
        "without_rules": share_doc(b),
        "change": change,
        "interval": interval,
    }


def _review_tasks(cells: list[Cell]) -> set[str]:
    """Tasks whose runs declare review threads or are review tasks."""
    found = set()
    for cell in cells:
        read = _read_threads(cell)
        if cell.result is not None and read is not None and (read[0].threads or read[0].mode == "review"):
            found.add(cell.result.task)
    return found


def _pair(batch: Batch, with_arm: str, without_arm: str, model: str, effort: str | None) -> dict[str, Any]:
    def cells(arm: str) -> list[Cell]:
        return [
            c
            for c in batch.finished()
            if c.result is not None
            and (c.result.arm, c.result.model, c.result.effort) == (arm, model, effort)
        ]

    with_cells, without_cells = cells(with_arm), cells(without_arm)
    tasks = sorted(_review_tasks(with_cells) & _review_tasks(without_cells))
    on, off = _collect(with_cells, set(tasks)), _collect(without_cells, set(tasks))
    covered = _class(on.covered, off.covered, len(on.threads["covered"] | off.threads["covered"]))
    uncovered = _class(on.uncovered, off.uncovered, len(on.threads["uncovered"] | off.threads["uncovered"]))
    runs = [len(on.covered), len(off.covered), len(on.uncovered), len(off.uncovered)]
    note = None
    if not tasks:
        note = "no review task has finished cells in both arms"
    elif not any(runs):
        note = "the grader reported no thread (grade.json threads) for the tasks' declared threads"
    on_share, off_share = uncovered["with_rules"]["value"], uncovered["without_rules"]["value"]
    loss = None if on_share is None or off_share is None else off_share - on_share
    return {
        "with_arm": with_arm,
        "without_arm": without_arm,
        "model": model,
        "effort": effort,
        "tasks": tasks,
        "recall_with": mean(on.scores),
        "recall_without": mean(off.scores),
        "covered": covered,
        "uncovered": uncovered,
        "loss_on_uncovered": loss,
        "underpowered": min(runs) < MIN_THREAD_RUNS,
        "note": note,
    }


def rules_effect(root: Path, *, with_arm: str | None = None, without_arm: str | None = None) -> RulesEffect:
    """repo_rules_effect.v1 of a batch: one pair per (arm with rules, model, effort) whose partner without
    rules ran too, or the one pair named."""
    batch = load_batch(root)
    combos = sorted(
        {(r.arm, r.model, r.effort) for r in batch.results()}, key=lambda c: (c[0], c[1], c[2] or "")
    )
    arms = {arm for arm, _, _ in combos}
    if with_arm is not None:
        partner = without_arm or Arm(with_arm).without_rules
        missing = [a for a in (with_arm, partner) if a not in arms]
        if missing:
            raise UsageError(
                f"the batch has no finished cell of {', '.join(missing)}",
                hint=f"its arms: {', '.join(sorted(arms)) or 'none'}",
            )
        wanted = [(with_arm, partner)]
    else:
        wanted = [
            (a, Arm(a).without_rules) for a in sorted(arms) if Arm(a).rules and Arm(a).without_rules in arms
        ]
        if not wanted:
            raise UsageError(
                "the batch has no arm with the rules (ARM+rules) beside the same arm without them",
                hint="run both, for example --arm guidance:raw,guidance:raw+rules",
            )
    pairs = [
        _pair(batch, on, off, model, effort)
        for on, off in wanted
        for arm, model, effort in combos
        if arm == on and (off, model, effort) in combos
    ]
    return RulesEffect.model_validate({"batch": str(root), "dry_run": batch.dry_run, "pairs": pairs})
