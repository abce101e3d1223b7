"""Reading a batch directory: its pin, its plan and its cells. Pure file reading, no git, no docker.

Layout (the runner writes it, report and compare read it)::

    <out>/<batch>/_eval/batch.json      the pin (repo_batch.v1): tree, eval_dir digest, image, ...
    <out>/<batch>/_eval/plan.json       the planned cells: [{task, arm, model, effort, rep}, ...]
    <out>/<batch>/<task>/<arm>/<model>/<effort>/rep<N>/      one cell = one run_dir

Every path component of a cell is :func:`slug` of the real value (``effort`` is ``default`` when no effort is
set); the real values live in the cell's result.json and meta.json. result.json is written last: its presence
is the only proof that a cell is done. A cell is

- ``finished``: result.json validates against :class:`dokimi.schemas.result.Result` and names this cell;
- ``invalid``: result.json exists but does not validate (or names another cell): reported, never counted;
- ``missing``: planned (plan.json) or started (its directory exists) but without result.json.
"""

from __future__ import annotations

import fcntl
import json
import os
import socket
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from glob import escape as glob_escape
from pathlib import Path
from typing import Any, Literal, NamedTuple

from dokimi import safefs
from dokimi.errors import DocumentError, UsageError
from dokimi.home import runs_root
from dokimi.rundir import (
    BATCH_JSON,
    DEFAULT_EFFORT_SLUG,
    EVAL_DIR_NAME,
    LOCK_FILE,
    PLAN_JSON,
    REP_DIR,
    BatchLayout,
    RunDir,
    cell_dir,
    effort_slug,
    slug,
)
from dokimi.schemas._base import (
    MAX_DOCUMENT_BYTES,
    decode_text,
    make_output_dir,
    parse_json,
    read_document,
    validate_marked,
    write_document,
)
from dokimi.schemas.batch import BatchPin
from dokimi.schemas.meta import Meta
from dokimi.schemas.plan import Plan, PlannedCell
from dokimi.schemas.result import Result

__all__ = [
    "BATCH_JSON",
    "DEFAULT_EFFORT_SLUG",
    "EVAL_DIR_NAME",
    "PLAN_JSON",
    "Batch",
    "Cell",
    "CellKey",
    "Dimensions",
    "cell_dir",
    "dimensions",
    "effort_slug",
    "load_batch",
    "load_cell",
    "read_pin",
    "read_plan",
    "slug",
    "write_plan",
]

CellStatus = Literal["finished", "invalid", "missing", "infra_error"]


class Dimensions(NamedTuple):
    """What no report pools across: a finished cell's task, arm, model, effort (None: the harness's default)
    and agent mode (None when the task declares none). Each reader groups by the ones it needs."""

    task: str
    arm: str
    model: str
    effort: str | None
    mode: str | None


def dimensions(result: Result) -> Dimensions:
    """The dimensions of a finished cell, read once from its result.json."""
    mode = None if result.mode is None else str(result.mode.value)
    return Dimensions(result.task, result.arm, result.model, result.effort, mode)


@dataclass(frozen=True)
class CellKey:
    """The identity of a cell: the dimensions the runner iterates over."""

    task: str
    arm: str
    model: str
    effort: str | None
    rep: int
    prompt: str | None = None
    """The prompt variant a run chose (``--prompt-style spec|issue``); None: the task's own prompt."""

    def path(self, batch_root: Path) -> Path:
        return cell_dir(
            batch_root, self.task, self.arm, self.model, self.effort, self.rep, prompt=self.prompt
        )

    def sort_key(self) -> tuple[str, str, bool, str, str, bool, str, int]:
        """Sorts cells deterministically; no effort (no prompt variant) sorts before any."""
        return (
            self.task, self.arm, self.prompt is not None, self.prompt or "", self.model,
            self.effort is not None, self.effort or "", self.rep,
        )  # fmt: skip


@dataclass
class Cell:
    """One run_dir of a batch and what its result.json says."""

    dir: Path
    rel: str
    """The cell's path relative to the batch root (``task/arm/model/effort/repN``)."""
    status: CellStatus
    result: Result | None = None
    """The validated result.json of a finished cell."""
    error: str | None = None
    """Why an invalid cell is invalid."""
    key: CellKey | None = None
    """From result.json when finished, else from plan.json when planned; None for an unplanned cell."""
    _meta: Meta | None = field(default=None, repr=False)
    _meta_read: bool = field(default=False, repr=False)

    def meta(self) -> Meta | None:
        """meta.json of the cell, or None when it is absent or does not validate (read once, on demand)."""
        if not self._meta_read:
            self._meta_read = True
            try:
                self._meta = _read_model(RunDir(self.dir).meta_json, Meta, trusted=self.dir)
            except DocumentError:
                self._meta = None
        return self._meta


@dataclass
class Batch:
    """A batch directory read from disk: pin, plan and every cell (finished, invalid, missing)."""

    root: Path
    pin: BatchPin | None
    pin_error: str | None
    plan: list[CellKey] | None
    """The planned cells from _eval/plan.json, or None when the batch has no plan file."""
    plan_error: str | None
    cells: list[Cell]

    @property
    def name(self) -> str:
        return self.root.name

    def finished(self) -> list[Cell]:
        return [c for c in self.cells if c.status == "finished"]

    def invalid(self) -> list[Cell]:
        return [c for c in self.cells if c.status == "invalid"]

    def missing(self) -> list[Cell]:
        return [c for c in self.cells if c.status == "missing"]

    def infra_errors(self) -> list[Cell]:
        """Cells whose result.json says they never reached their model: left out of every rate and
        comparison, counted apart, and run again by the next run like missing cells."""
        return [c for c in self.cells if c.status == "infra_error"]

    def results(self) -> Iterator[Result]:
        """The results of the finished cells (infra errors excluded): what rates and comparisons use."""
        for cell in self.cells:
            if cell.result is not None and cell.status == "finished":
                yield cell.result

    def all_results(self) -> Iterator[Result]:
        """Every valid result.json, infra errors included (what the batch has spent)."""
        for cell in self.cells:
            if cell.result is not None:
                yield cell.result

    @property
    def dry_run(self) -> bool:
        """The batch is a dry run: its pin says so, or (a batch pinned before dokimi recorded it) one of its
        cells played the scripted model. A dry batch's pass rates are the script's and its costs are zero,
        which every report and comparison of it says first."""
        return (self.pin is not None and self.pin.dry_run) or any(r.dry_run for r in self.all_results())

    def reps(self) -> int:
        """The batch's repetitions: the most reps planned (plan.json) for one (task, arm, model, effort), else
        the most finished; 1 for a batch without either."""
        keys = self.plan or [c.key for c in self.finished() if c.key is not None]
        reps: dict[tuple[str, str, str, str | None], set[int]] = {}
        for key in keys:
            reps.setdefault((key.task, key.arm, key.model, key.effort), set()).add(key.rep)
        return max((len(found) for found in reps.values()), default=1)


def _read_model(path: Path, model: Any, trusted: Path | None = None) -> Any:
    return read_document(path, model, trusted=trusted)


def _read_json(path: Path) -> Any:
    try:
        raw = safefs.read_plain(path, limit=MAX_DOCUMENT_BYTES)
    except safefs.UnsafePathError as exc:
        raise DocumentError(exc.message, path=str(path)) from None
    except OSError as exc:
        raise DocumentError(f"cannot read: {exc.strerror}", path=str(path)) from None
    return parse_json(decode_text(raw, str(path)), str(path))


def read_pin(root: Path) -> tuple[BatchPin | None, str | None]:
    """The batch pin (_eval/batch.json) and, when it is absent or does not validate, why."""
    path = BatchLayout(root).pin
    if not path.is_file():
        return None, f"{path}: no batch pin"
    try:
        pin: BatchPin = _read_model(path, BatchPin)
    except DocumentError as exc:
        return None, str(exc)
    return pin, None


def read_plan(root: Path) -> tuple[list[CellKey] | None, str | None]:
    """_eval/plan.json (repo_plan.v1); a bare list of cells is accepted too. (None, None) without a plan."""
    path = BatchLayout(root).plan
    if not path.is_file():
        return None, None
    try:
        marked = _read_json(path)
        if isinstance(marked.data, list):
            marked.data = {"schema": "repo_plan.v1", "cells": marked.data}
        plan: Plan = validate_marked(marked, Plan)
    except DocumentError as exc:
        return None, str(exc)
    keys = {CellKey(c.task, c.arm, c.model, c.effort, c.rep, c.prompt) for c in plan.cells}
    return sorted(keys, key=CellKey.sort_key), None


def _cell_dirs(root: Path) -> Iterator[Path]:
    """Every ``<task>/<arm>/<model>/<effort>/rep<N>`` directory under the batch root, sorted."""
    for task in sorted(p for p in root.iterdir() if p.is_dir() and p.name != EVAL_DIR_NAME):
        if task.name.startswith("."):
            continue
        for arm in sorted(p for p in task.iterdir() if p.is_dir()):
            for model in sorted(p for p in arm.iterdir() if p.is_dir()):
                for effort in sorted(p for p in model.iterdir() if p.is_dir()):
                    for rep in sorted(p for p in effort.iterdir() if p.is_dir()):
                        if REP_DIR.match(rep.name):
                            yield rep


def load_cell(root: Path, path: Path, planned: CellKey | None = None) -> Cell:
    """One cell: finished when its result.json validates and names this cell, invalid when it does not."""
    rel = path.relative_to(root).as_posix()
    result_path = RunDir(path).result_json
    if not os.path.lexists(result_path):
        return Cell(dir=path, rel=rel, status="missing", key=planned)
    try:
        result: Result = _read_model(result_path, Result, trusted=root)
    except DocumentError as exc:
        return Cell(dir=path, rel=rel, status="invalid", error=str(exc), key=planned)
    key = CellKey(result.task, result.arm, result.model, result.effort, result.rep, result.prompt_variant)
    if key.path(root) != path:
        return Cell(
            dir=path,
            rel=rel,
            status="invalid",
            error=f"{result_path}: names the cell {key.path(root).relative_to(root).as_posix()}, not {rel}",
            key=planned,
        )
    status: CellStatus = "infra_error" if result.infra_error else "finished"
    return Cell(dir=path, rel=rel, status=status, result=result, key=key)


def locate_batch(given: str | Path) -> Path:
    """The batch directory a user named: ``given`` itself when it is a directory; else, for a relative
    ``NAME`` or ``REPO_ID/NAME``, the batch of that name under ``<DOKIMI_HOME>/runs/`` (where ``repo run``
    puts batches without ``--out``), when exactly one repository has one; else ``given`` as it is (the
    caller says it is no batch). A name several repositories' batches share is a UsageError naming them."""
    path = Path(given)
    if path.is_dir() or path.is_absolute() or not path.parts or path.parts[0] in (".", ".."):
        return path
    runs = runs_root()
    if len(path.parts) == 2 and (runs / path).is_dir():
        return runs / path
    if len(path.parts) != 1:
        return path
    found = sorted(p for p in runs.glob(f"*/{glob_escape(path.name)}") if p.is_dir()) if runs.is_dir() else []
    if len(found) > 1:
        raise UsageError(
            f"batch {path.name!r} exists for several repositories under {runs}",
            hint="give one of: " + ", ".join(f"{p.parent.name}/{p.name}" for p in found),
        )
    return found[0] if found else path


def load_batch(root: str | Path) -> Batch:
    """Read a batch directory (:func:`locate_batch` finds a bare batch name under ``<DOKIMI_HOME>/runs``).
    Raises DocumentError only when there is no such directory."""
    root = locate_batch(root)
    if not root.is_dir():
        raise DocumentError(
            "no such batch directory",
            path=str(root),
            hint=f"give <out>/<batch>, or the name of a batch under {runs_root()}/<repo id>/",
        )
    pin, pin_error = read_pin(root)
    plan, plan_error = read_plan(root)
    planned = {key.path(root): key for key in plan or []}
    cells = [load_cell(root, path, planned.get(path)) for path in _cell_dirs(root)]
    seen = {cell.dir for cell in cells}
    for path, key in sorted(planned.items()):
        if path not in seen:
            cells.append(Cell(dir=path, rel=path.relative_to(root).as_posix(), status="missing", key=key))
    cells.sort(key=lambda c: c.rel)
    return Batch(root=root, pin=pin, pin_error=pin_error, plan=plan, plan_error=plan_error, cells=cells)


def why_not_a_batch(batch: Batch) -> str | None:
    """Why a directory with no cell, no readable pin and no readable plan is not a batch, naming what it does
    hold (a corrupt _eval/batch.json is not "no _eval/ directory"); None when it is a batch."""
    if batch.cells or batch.pin is not None or batch.plan is not None:
        return None
    layout = BatchLayout(batch.root)
    if layout.pin.exists() and batch.pin_error:
        return f"no cells, and its _eval/batch.json cannot be read: {batch.pin_error}"
    if batch.plan_error:
        return f"no cells, and its _eval/plan.json cannot be read: {batch.plan_error}"
    if layout.eval_root.is_dir():
        return "no cells, and its _eval/ directory holds neither a batch.json nor a plan.json"
    return "no cells and no _eval/ directory: not a batch"


class BatchLocked(UsageError):
    """Another dokimi process writes this batch (a second ``repo run`` would delete its cells in flight)."""


def _holder_text(root: Path) -> str:
    try:
        data = json.loads(
            (root / LOCK_FILE).read_text(encoding="utf-8", errors="replace")[:4096] or "{}"
        )  # the holder wrote it; it is ours
        who = f"pid {data.get('pid')} on {data.get('host')}"
        return f"{who} ({data.get('command')}, started {data.get('started')})"
    except (OSError, ValueError, AttributeError):
        return "another dokimi process"


@contextmanager
def batch_writer(root: Path, command: str) -> Iterator[None]:
    """Hold the batch's writer lock for the duration: one ``repo run`` or ``repo regrade`` per batch at a
    time. A second one fails at once with :class:`BatchLocked` (exit 2) naming the holder. The lock is an
    ``flock`` on ``<batch>/.dokimi-writer.lock``, released by the kernel when the holder exits, even by
    SIGKILL, so a crashed run never leaves the batch locked. ``repo report`` and ``repo compare`` take no
    lock: result.json is written atomically and last, so they see finished cells only."""
    make_output_dir(root)
    path = root / LOCK_FILE
    try:
        fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW | os.O_CLOEXEC, 0o644)
    except OSError as exc:
        raise UsageError(f"cannot open the batch lock: {exc.strerror}", path=path) from None
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            raise BatchLocked(
                f"batch {root.name} is being written by {_holder_text(root)}",
                path=root,
                hint="wait for that run to end or stop it; repo report and repo compare can read the batch "
                "meanwhile",
            ) from None
        holder = {
            "pid": os.getpid(),
            "host": socket.gethostname(),
            "command": command,
            "started": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
            "argv": sys.argv[1:8],
        }
        os.ftruncate(fd, 0)
        os.pwrite(fd, (json.dumps(holder, sort_keys=True) + "\n").encode(), 0)
        yield
    finally:
        os.close(fd)


def write_plan(root: Path, cells: list[CellKey]) -> None:
    """Write _eval/plan.json (repo_plan.v1) for the runner: every planned cell, sorted, once."""
    items = [
        PlannedCell.model_validate(
            {
                "task": k.task,
                "arm": k.arm,
                "model": k.model,
                "effort": k.effort,
                "rep": k.rep,
                "prompt": k.prompt,
            }
        )
        for k in sorted(set(cells), key=CellKey.sort_key)
    ]
    write_document(BatchLayout(root).plan, Plan(schema="repo_plan.v1", cells=items))
