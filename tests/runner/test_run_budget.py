"""--max-batch-usd with -j N: each running cell's cap is reserved before it starts, so the batch never spends
more than its cap (execute_cells with a cell function of the test: no docker, no harness)."""

from __future__ import annotations

import threading
import time
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

from dokimi.batch import CellKey
from dokimi.runner.cell import CellOutcome
from dokimi.runner.plan import CellLimits
from dokimi.runner.run import PreparedBatch, QuietProgress, execute_cells
from dokimi.schemas.result import Result


def _result(key: CellKey, cost: float | None) -> Result:
    return Result.model_validate(
        {
            "schema": "repo_result.v1", "task": key.task, "arm": key.arm, "model": key.model, "rep": key.rep,
            "harness": "h", "family": "fix", "gated": True, "passed": False, "duration_s": 0.0,
            "cost_usd": cost,
        }
    )  # fmt: skip


class Recorder:
    """A cell function that takes a while, reports ``cost`` and records how many cells ran at once."""

    def __init__(self, cost: float | None) -> None:
        self.cost = cost
        self.running = 0
        self.most = 0
        self.started: list[CellKey] = []
        self.lock = threading.Lock()

    def __call__(self, ctx: Any, key: CellKey) -> CellOutcome:
        with self.lock:
            self.running += 1
            self.most = max(self.most, self.running)
            self.started.append(key)
        time.sleep(0.05)
        with self.lock:
            self.running -= 1
        return CellOutcome(key, "finished", result=_result(key, self.cost))


def _prepared(tmp_path: Path, cells: int, cap: float, *, dry_run: bool = False) -> PreparedBatch:
    keys = [CellKey("t", "guidance:raw", "m", None, rep) for rep in range(cells)]
    ctx = SimpleNamespace(
        root=tmp_path, force=True, cancel=threading.Event(), batch="b", dry_run=dry_run,
        limits={"t": CellLimits(timeout_s=60.0, max_turns=10, budget_usd=cap)},
    )  # fmt: skip
    return PreparedBatch(ctx=ctx, pin=None, cells=keys, warnings=[])  # type: ignore[arg-type]


@pytest.mark.slow
@pytest.mark.parametrize(
    ("max_batch", "cost", "started", "most"),
    [
        (1.5, None, 1, 1),  # unknown cost: charged the cap 1.0, so a second 1.0 never fits in 1.5
        (1.5, 0.2, 3, 1),  # 0.2 spent per cell: one at a time, until 0.6 + 1.0 > 1.5
        (2.0, None, 2, 2),  # two caps fit at once; then the budget is spent
        (None, None, 4, 2),  # no batch cap: -j 2 runs two at a time
    ],
)
def test_j2_starts_exactly_as_many_cells_as_fit_and_never_overshoots(
    tmp_path: Path, max_batch: float | None, cost: float | None, started: int, most: int
) -> None:
    cell = Recorder(cost)
    outcomes, ledger, stopped = execute_cells(
        _prepared(tmp_path, 4, 1.0), jobs=2, max_batch_usd=max_batch, budget_usd=1.0,
        progress=QuietProgress(), cell_function=cell,
    )  # fmt: skip
    assert (len(cell.started), cell.most) == (started, most)
    assert stopped is (started < 4)
    assert sum(1 for o in outcomes if o.status == "not_started") == 4 - started
    assert ledger.reserved_usd == 0.0
    if max_batch is not None:
        assert ledger.spent_usd <= max_batch


def test_a_dry_run_is_held_to_no_batch_budget_and_costs_nothing(tmp_path: Path) -> None:
    """A dry run pays nothing: --max-batch-usd does not hold back its cells (the old code charged each dry
    cell of a harness whose trace has no cost its whole cap, and stopped a codex dry run after two cells)."""

    def dry_cell(ctx: Any, key: CellKey) -> CellOutcome:
        result = _result(key, 0.0).model_copy(update={"dry_run": True, "cost_source": "dry_run"})
        return CellOutcome(key, "finished", result=result)

    outcomes, ledger, stopped = execute_cells(
        _prepared(tmp_path, 4, 1.0, dry_run=True), jobs=2, max_batch_usd=0.01, budget_usd=1.0,
        progress=QuietProgress(), cell_function=dry_cell,
    )  # fmt: skip
    assert [o.status for o in outcomes] == ["finished"] * 4 and not stopped
    assert ledger.spent_usd == 0.0
