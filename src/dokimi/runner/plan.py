"""The pure rules of a batch: planning, per-cell caps, pins and the budget.

No docker, no git, no subprocess: every function here takes plain values and is tested with literal data.

- :func:`plan_cells`: one cell per (task, arm, model, effort, rep). ``--effort`` values apply to every task;
  without them a task runs at its own ``effort`` (null: the harness default). Reps are numbered from 0.
- :func:`cell_limits`: ``timeout_s``, ``max_turns`` and ``budget_usd`` of task.json override the run's
  defaults.
- :func:`pin_conflicts`: a batch stays on the eval tree it started with: the same revision, or for a working
  tree the same eval_dir and image-context digests; the same manifest and the same image.
- :class:`SpendLedger`: ``--max-batch-usd`` holds with any ``-j``: a cell starts only when what the batch has
  spent, plus the caps reserved by the cells running, plus its own cap, fit in it; a cell whose cost is
  unknown is charged its cap, and the judge's spend is charged with its cell.
"""

from __future__ import annotations

import re
import threading
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from dokimi.batch import EVAL_DIR_NAME, CellKey
from dokimi.constants import MAX_CELLS, MAX_REPS
from dokimi.errors import UsageError
from dokimi.gateway.budget import Budget
from dokimi.repo.arms import Arm

if TYPE_CHECKING:
    from dokimi.schemas.batch import BatchPin
    from dokimi.schemas.result import Result
    from dokimi.schemas.task import Task

__all__ = [
    "DEFAULT_BUDGET_USD",
    "DEFAULT_MAX_TURNS",
    "DEFAULT_TIMEOUT_S",
    "CellLimits",
    "SpendLedger",
    "cell_efforts",
    "cell_limits",
    "charge_of",
    "check_batch_name",
    "check_cell_paths",
    "egress_refusal",
    "parse_list",
    "pin_conflicts",
    "plan_cells",
]

DEFAULT_TIMEOUT_S = 1800.0
"""Wall-clock cap of one agent run when neither --timeout nor the task's timeout_s is given."""
DEFAULT_MAX_TURNS = 100
"""Turn cap when neither --max-turns nor the task's max_turns is given."""
DEFAULT_BUDGET_USD = 1.0
"""Cost cap of one agent run when neither --budget nor the task's budget_usd is given."""

_BATCH_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]*$")


def parse_list(values: Iterable[str]) -> list[str]:
    """``["a,b", "c"]`` -> ``["a", "b", "c"]``: repeated or comma-separated options, in order, once each."""
    out: list[str] = []
    for value in values:
        for item in value.split(","):
            item = item.strip()
            if item and item not in out:
                out.append(item)
    return out


def check_batch_name(name: str) -> str:
    """A batch name is one path component: letters, digits, ``.``, ``_``, ``-``; not ``_eval``."""
    if not _BATCH_NAME.match(name) or name == EVAL_DIR_NAME:
        raise UsageError(
            f"batch name {name!r} is not a plain directory name",
            hint="use letters, digits, '.', '_' and '-', starting with a letter or digit",
        )
    return name


def cell_efforts(task: Task, efforts: Sequence[str]) -> list[str | None]:
    """The efforts a task runs at: every ``--effort`` value, else the task's own (None: the default)."""
    if efforts:
        return list(efforts)
    return [task.effort]


def cell_prompts(task: Task, prompts: Sequence[str]) -> list[str | None]:
    """The prompt variants a task runs with: every ``--prompt-style`` value (each one the task must carry:
    its ``prompt``'s style, or ``issue`` with ``prompt_issue``), else its own prompt (None)."""
    if not prompts:
        return [None]
    missing = [p for p in prompts if p not in task.prompt_styles()]
    if missing:
        raise UsageError(
            f"--prompt-style {missing[0]}: task {task.id} has no {missing[0]}-style prompt (it carries "
            f"{', '.join(task.prompt_styles())})",
            hint="add prompt_issue to its task.json for the issue variant, or leave the task out (--task)",
        )
    return list(prompts)


def plan_cells(
    tasks: Sequence[Task],
    arms: Sequence[Arm],
    models: Sequence[str],
    efforts: Sequence[str],
    reps: int,
    prompts: Sequence[str] = (),
) -> list[CellKey]:
    """Every cell of the batch, sorted: tasks x arms x prompt variants x models x efforts x reps
    (0 .. reps-1), where an arm restricted to one mode (``ARM@MODE``) runs on that mode's tasks only."""
    check_cell_count(tasks, arms, models, efforts, reps, prompts)
    cells = {
        CellKey(task.id, arm, model, effort, rep, prompt)
        for task in tasks
        for arm in arms
        if arm.runs_task(task.mode)
        for prompt in cell_prompts(task, prompts)
        for model in models
        for effort in cell_efforts(task, efforts)
        for rep in range(reps)
    }
    return check_cell_paths(sorted(cells, key=CellKey.sort_key))


def check_cell_count(
    tasks: Sequence[Task],
    arms: Sequence[Arm],
    models: Sequence[str],
    efforts: Sequence[str],
    reps: int,
    prompts: Sequence[str] = (),
) -> int:
    """The number of cells a batch plans, refused before anything is planned when ``reps`` is not 1 to
    :data:`MAX_REPS`, a task lacks a prompt variant asked for, or the product is over :data:`MAX_CELLS` (a
    typo must not become a plan that never ends)."""
    if not 1 <= reps <= MAX_REPS:
        raise UsageError(f"--reps {reps}: give 1 to {MAX_REPS} repetitions per cell")
    check_arm_modes(tasks, arms)
    per_task = sum(
        len(cell_efforts(task, efforts)) * len(cell_prompts(task, prompts))
        for task in tasks
        for arm in arms
        if arm.runs_task(task.mode)
    )
    count = per_task * len(models) * reps
    if count > MAX_CELLS:
        raise UsageError(
            f"{count} cells planned ({len(tasks)} tasks x {len(arms)} arms x {len(models)} models x "
            f"efforts x {reps} reps): more than {MAX_CELLS} in one batch",
            hint="run fewer reps, tasks, arms or models per batch",
        )
    return count


def check_arm_modes(tasks: Sequence[Task], arms: Sequence[Arm]) -> None:
    """An arm restricted to one mode (``ARM@MODE``) that no task of the batch has would run nothing: refused
    before anything is planned."""
    for arm in arms:
        mode = arm.mode
        if mode is not None and not any(task.mode == mode for task in tasks):
            found = sorted({task.mode or "none" for task in tasks})
            raise UsageError(
                f"arm {arm} runs on {mode} tasks only, and no task of the batch is one (modes: "
                f"{', '.join(found) or 'none'})",
                hint="give the task's mode in its task.json, or choose tasks of that mode (--task)",
            )


def check_cell_paths(cells: Sequence[CellKey]) -> list[CellKey]:
    """Refuse two different cells with one run directory: path components are slugs (``a:b`` and ``a_b``
    are both ``a_b``; no effort and the effort ``default`` are both ``default``)."""
    seen: dict[Path, CellKey] = {}
    for key in cells:
        other = seen.setdefault(key.path(Path()), key)
        if other != key:
            for field in ("task", "arm", "model", "effort", "prompt"):
                a, b = getattr(other, field), getattr(key, field)
                if a != b:
                    raise UsageError(
                        f"{field} {a!r} and {b!r} would share one cell directory "
                        f"({key.path(Path()).parent.as_posix()})",
                        hint="cell directories replace every character outside [A-Za-z0-9._-] with '_'; "
                        "run one of them in another batch",
                    )
    return list(cells)


@dataclass(frozen=True)
class CellLimits:
    """The caps of one agent run."""

    timeout_s: float
    max_turns: int
    budget_usd: float


def cell_limits(
    task: Task, *, timeout_s: float | None, max_turns: int | None, budget_usd: float | None
) -> CellLimits:
    """task.json's timeout_s / max_turns / budget_usd, else the run's option, else the default."""
    return CellLimits(
        timeout_s=task.timeout_s or timeout_s or DEFAULT_TIMEOUT_S,
        max_turns=task.max_turns or max_turns or DEFAULT_MAX_TURNS,
        budget_usd=task.budget_usd or budget_usd or DEFAULT_BUDGET_USD,
    )


def egress_refusal(task: Task, agent_network: str | None, *, sealed: bool) -> str | None:
    """Why a task cannot run: it names egress hosts and the run is neither sealed (whose egress proxy opens
    them) nor given --agent-network: a dry run, or a harness that declares no model route, has no way to
    them. None when it can run."""
    if task.egress and not sealed and agent_network is None:
        return (
            f"task {task.id} needs egress ({', '.join(task.egress)}), which only a sealed real run opens "
            "(through the egress proxy); this run is a dry run or its harness declares no model route. Run "
            "it for real, pass --agent-network NET (unsealed), or leave the task out with --task"
        )
    return None


# --- pins ------------------------------------------------------------------------------------------------


def _describe(pin: BatchPin, *, image_known: bool = True) -> str:
    where = f"tree {pin.tree}" if pin.tree else "a working tree"
    parts = [f"manifest {pin.manifest_id}", where, f"eval_dir {pin.eval_dir_digest}"]
    if not image_known:
        parts.append("image not built yet")
        return ", ".join(parts)
    parts.append(f"image {pin.image} ({pin.image_pin})")
    if pin.image_context_digest:
        parts.append(f"context {pin.image_context_digest}")
    if pin.dry_run:
        parts.append("dry run")
    return ", ".join(parts)


def pin_conflicts(old: BatchPin, new: BatchPin) -> list[str]:
    """How ``new`` differs from the batch's pin ``old``: empty when the run may join the batch.

    Two revisions are different eval trees even with identical content; a working tree (no revision) on
    either side is compared by its eval_dir and image-context digests. One revision with another eval_dir
    digest is the same tree with other held-out rubrics (``--rubrics DIR``, or none). The manifest id and
    the image must match too, so one batch never mixes images.
    """
    found: list[str] = []
    if old.manifest_id != new.manifest_id:
        found.append(f"manifest id {old.manifest_id!r} != {new.manifest_id!r}")
    if old.tree and new.tree:
        if old.tree != new.tree:
            found.append(f"eval tree {old.tree} != {new.tree}")
        elif old.eval_dir_digest != new.eval_dir_digest:
            found.append(
                f"eval_dir digest {old.eval_dir_digest} != {new.eval_dir_digest} (other held-out rubrics: "
                "--rubrics)"
            )
    else:
        if old.eval_dir_digest != new.eval_dir_digest:
            found.append(f"eval_dir digest {old.eval_dir_digest} != {new.eval_dir_digest}")
        if old.image_context_digest != new.image_context_digest:
            found.append(f"image context digest {old.image_context_digest} != {new.image_context_digest}")
    if old.image != new.image:
        found.append(f"image {old.image} != {new.image}")
    if old.dry_run != new.dry_run:
        found.append(dry_run_conflict(old.dry_run))
    return found + guidance_conflicts(old, new)


GUIDANCE_CHANGED = "guidance of "
"""How a guidance conflict starts (:func:`guidance_conflicts`)."""


def guidance_conflicts(old: BatchPin, new: BatchPin) -> list[str]:
    """Per arm pinned in both, the guidance files that differ (changed, added or removed, by path and blob
    SHA): a batch never mixes two versions of an arm's guidance, as it never mixes two versions of a
    prompt. An arm the batch has not run yet joins the pin."""
    found = []
    for arm in sorted(set(old.guidance) & set(new.guidance)):
        before = {f.path: f for f in old.guidance[arm]}
        after = {f.path: f for f in new.guidance[arm]}
        changes = []
        for path in sorted(set(before) | set(after)):
            a, b = before.get(path), after.get(path)
            if a is None:
                changes.append(f"{path} added")
            elif b is None:
                changes.append(f"{path} removed")
            elif (a.sha, a.mode) != (b.sha, b.mode):
                changes.append(f"{path} changed (blob {a.sha[:12]} -> {b.sha[:12]})")
        if changes:
            found.append(f"{GUIDANCE_CHANGED}{arm}: {', '.join(changes)}")
    return found


def dry_run_conflict(batch_is_dry: bool) -> str:
    """A batch never mixes dry and real cells: a scripted agent's pass rates and zero costs pooled with a
    real model's would be a number that is neither."""
    if batch_is_dry:
        return "the batch is a dry run (--dry-run: the scripted model) and this run is real"
    return "the batch is a real run and this run is a dry run (--dry-run)"


def pin_refusal(old: BatchPin, new: BatchPin, batch: str, *, image_known: bool = True) -> UsageError | None:
    """The error that refuses a run from another eval tree into batch ``batch``, naming both pins.

    ``image_known`` False: ``new`` is provisional, refused before its image was built (its image fields are a
    copy of the batch's and are neither compared nor shown as this run's)."""
    conflicts = pin_conflicts(old, new)
    if not image_known:
        conflicts = [c for c in conflicts if not c.startswith(("image ", "image context "))]
    if not conflicts:
        return None
    dry = dry_run_conflict(old.dry_run)
    if all(c.startswith(GUIDANCE_CHANGED) for c in conflicts):
        return UsageError(
            f"batch {batch} is pinned to the guidance its arms started with, and this run's differs:\n"
            + "\n".join(f"  {c}" for c in conflicts),
            hint="a batch never mixes two versions of an arm's guidance: restore the files, or start a new "
            "batch with another --batch name (repo compare OLD/ARM --baseline NEW/ARM then compares them)",
        )
    what = "another eval tree" if conflicts != [dry] else "a dry run" if old.dry_run else "a real run"
    return UsageError(
        f"batch {batch} is pinned to {what} ({'; '.join(conflicts)})\n"
        f"  batch pin: {_describe(old)}\n"
        f"  this run:  {_describe(new, image_known=image_known)}",
        hint="a batch never mixes dry and real cells: start a new batch with another --batch name"
        if conflicts == [dry]
        else "run from the batch's eval tree, or start a new batch with another --batch name",
    )


# --- the batch budget ------------------------------------------------------------------------------------


def charge_of(cost_usd: float | None, cap_usd: float) -> float:
    """What a cell costs the batch: its reported cost, or its cap when the harness reported none."""
    return cap_usd if cost_usd is None else cost_usd


class SpendLedger:
    """What a batch has spent and what its running cells may still spend, shared by the workers of one run
    (thread-safe).

    The spend is the batch's :class:`dokimi.gateway.budget.Budget`: in a sealed run the model gateway settles
    every request into it as it is answered (and holds each request to it, so the batch never spends more
    than its cap plus one request), and the ledger charges it what the gateway does not see (the judge, the
    cost of an unsealed cell, or its cap when unknown). A cell reserves its cap before it starts
    (:meth:`reserve`), and the reservation is released when it ends (:meth:`release`). With a batch cap a
    reservation is refused unless spent + reserved + the cell's cap <= the batch cap, so no cell starts that
    the cap cannot pay for. The spend starts at what the batch's earlier cells cost (a rerun continues the
    same budget).
    """

    def __init__(
        self, cap_usd: float | None, spent_usd: float = 0.0, *, budget: Budget | None = None
    ) -> None:
        self.budget = budget if budget is not None else batch_budget(cap_usd, spent_usd)
        self.cap_usd = self.budget.cap_usd
        self._reserved: dict[object, float] = {}
        self._lock = threading.Lock()

    @property
    def spent_usd(self) -> float:
        return self.budget.spent_usd

    @property
    def reserved_usd(self) -> float:
        with self._lock:
            return sum(self._reserved.values())

    def charge(self, cost_usd: float | None, cap_usd: float, extra_usd: float = 0.0) -> float:
        amount = charge_of(cost_usd, cap_usd) + extra_usd
        self.budget.charge(amount)
        return amount

    def charge_result(self, result: Result, cap_usd: float, *, metered: bool = False) -> float:
        """The cell's cost (its cap when unknown) plus its judge's; ``metered``: the model gateway already
        settled the cell's own cost into the budget, so only the judge's is charged here. Returns what the
        cell cost the batch."""
        if metered:
            self.charge(0.0, cap_usd, result.judge_cost_usd or 0.0)
            return (result.cost_usd or 0.0) + (result.judge_cost_usd or 0.0)
        return self.charge(result.cost_usd, cap_usd, result.judge_cost_usd or 0.0)

    def reserve(self, cell: object, cap_usd: float) -> bool:
        """Hold ``cap_usd`` for ``cell`` if it fits in the batch cap beside what is spent and reserved."""
        with self._lock:
            if self.cap_usd is not None:
                committed = self.budget.spent_usd + sum(self._reserved.values())
                if committed + cap_usd > self.cap_usd + 1e-12:
                    return False
            self._reserved[cell] = cap_usd
            return True

    def release(self, cell: object) -> None:
        with self._lock:
            self._reserved.pop(cell, None)

    def may_start(self) -> bool:
        """Whether any spend is left (a cell of zero cap would still fit)."""
        if self.cap_usd is None:
            return True
        with self._lock:
            return self.budget.spent_usd + sum(self._reserved.values()) < self.cap_usd


def batch_budget(cap_usd: float | None, spent_usd: float = 0.0) -> Budget:
    """The batch's budget: ``--max-batch-usd`` (None: no cap), starting at what earlier runs spent."""
    return Budget(cap_usd, spent_usd=spent_usd, name="the batch budget (--max-batch-usd)")
