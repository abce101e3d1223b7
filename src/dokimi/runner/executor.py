"""Where the cells of a batch run: the executor interface, and the local pool (:mod:`dokimi.runner.dispatch`
opens one by name).

The batch loop (:func:`dokimi.runner.run.execute_cells`) stays on the machine that ran ``repo run`` (the
driver). It decides which cell starts and when (resume, ``--max-batch-usd``, cancel) and hands each one to an
executor, which only runs it somewhere and hands back its :class:`~dokimi.runner.cell.CellOutcome`. The
interface is three calls, so that another engine (a Ray cluster, later Kubernetes Jobs) is one more class:

- ``slots``: how many cells may run at once;
- ``submit(key)``: start one cell; a future of its outcome, resolved once its run directory is in the batch;
- ``stop()``: kill every running cell and its containers, wherever they run (Ctrl-C, SIGTERM).

A cell is done only when its result.json is in the batch directory on the driver: an executor whose cells
run elsewhere brings the run directory back before it resolves the future (:mod:`dokimi.runner.ray_executor`).
"""

from __future__ import annotations

import socket
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor
from typing import TYPE_CHECKING, Literal, Protocol

from dokimi import process
from dokimi.runner.cell import run_cell
from dokimi.sandbox.docker import remove_batch_containers

if TYPE_CHECKING:
    from dokimi.batch import CellKey
    from dokimi.runner.cell import CellContext, CellOutcome

__all__ = ["EXECUTORS", "CellExecutor", "ExecutorName", "LocalExecutor", "stop_local_containers"]

ExecutorName = Literal["local", "ray"]
EXECUTORS: tuple[ExecutorName, ...] = ("local", "ray")


class CellExecutor(Protocol):
    """Runs the cells the batch loop hands it (see the module docstring)."""

    name: ExecutorName

    @property
    def slots(self) -> int:
        """How many cells may run at once."""
        ...

    def submit(self, key: CellKey) -> Future[CellOutcome]:
        """Start one cell; the future resolves once its run directory is in the batch on the driver."""
        ...

    def stop(self) -> None:
        """Kill every running cell and its containers; never raises."""
        ...


class LocalExecutor:
    """``-j N``: N threads on this machine, each running :func:`dokimi.runner.cell.run_cell`."""

    name: ExecutorName = "local"

    def __init__(
        self,
        ctx: CellContext,
        jobs: int,
        cell_function: Callable[[CellContext, CellKey], CellOutcome] | None = None,
    ) -> None:
        self.ctx = ctx
        self.jobs = jobs
        self.cell_function = cell_function or run_cell
        self.node = socket.gethostname()
        self.pool = ThreadPoolExecutor(max_workers=jobs, thread_name_prefix="dokimi-cell")

    @property
    def slots(self) -> int:
        return self.jobs

    def submit(self, key: CellKey) -> Future[CellOutcome]:
        return self.pool.submit(self._run, key)

    def _run(self, key: CellKey) -> CellOutcome:
        outcome = self.cell_function(self.ctx, key)
        if outcome.node is None:
            outcome.node = self.node
        return outcome

    def stop(self) -> None:
        stop_local_containers(self.ctx.batch)

    def close(self) -> None:
        self.pool.shutdown(wait=True, cancel_futures=True)


def stop_local_containers(batch: str) -> None:
    """Kill this machine's children and the batch's containers on its docker daemon; never raises."""
    process.kill_all_groups()
    try:
        remove_batch_containers(batch)
    except Exception:
        pass
