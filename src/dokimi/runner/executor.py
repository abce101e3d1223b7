"""Where the cells of a batch run: the executor interface, and the local pool.

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
from collections.abc import Callable, Iterator
from concurrent.futures import Future, ThreadPoolExecutor
from contextlib import contextmanager
from dataclasses import dataclass
from typing import TYPE_CHECKING, Literal, Protocol

from dokimi.errors import UsageError

if TYPE_CHECKING:
    from dokimi.batch import CellKey
    from dokimi.runner.cell import CellContext, CellOutcome

__all__ = ["cluster_session", "EXECUTORS", "CellExecutor", "ExecutorName", "LocalExecutor", "open_executor"]

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
        from dokimi.runner.cell import run_cell

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
    from dokimi import process
    from dokimi.sandbox.docker import remove_batch_containers

    process.kill_all_groups()
    try:
        remove_batch_containers(batch)
    except Exception:
        pass


@dataclass(frozen=True)
class ExecutorSettings:
    """``--executor`` and what a remote executor needs to reach the batch (``repo run``'s options)."""

    name: ExecutorName = "local"
    ray_address: str | None = None
    shared_out: bool = False
    """The batch directory is on storage every node mounts at the same path."""
    source: str | None = None
    """The source as given (a node opens it again)."""
    bin_option: str | None = None
    """--bin as given (a node resolves it again)."""


@contextmanager
def cluster_session(name: ExecutorName, address: str | None) -> Iterator[None]:
    """For ``ray``: join the cluster before the batch is prepared, so that its nodes start their worker
    processes while the driver builds and checks; left on exit. Nothing for ``local``."""
    if name != "ray":
        yield
        return
    from dokimi.runner.ray_executor import join_cluster

    ray = join_cluster(address)
    try:
        yield
    finally:
        ray.shutdown()


@contextmanager
def open_executor(
    settings: ExecutorSettings,
    ctx: CellContext,
    *,
    jobs: int | None,
    cell_function: Callable[[CellContext, CellKey], CellOutcome] | None = None,
) -> Iterator[CellExecutor]:
    """The executor ``settings.name`` for a prepared batch, closed (and disconnected) on exit."""
    name, ray_address, shared_out = settings.name, settings.ray_address, settings.shared_out
    source, bin_option = settings.source, settings.bin_option
    if name == "local":
        local = LocalExecutor(ctx, jobs or 1, cell_function)
        try:
            yield local
        finally:
            local.close()
        return
    if name == "ray":
        from dokimi.runner.ray_executor import RayExecutor

        assert source is not None
        remote = RayExecutor.connect(
            ctx, source=source, address=ray_address, jobs=jobs, shared_out=shared_out, bin_option=bin_option
        )
        try:
            yield remote
        finally:
            remote.close()
        return
    raise UsageError(f"--executor {name}: unknown", hint=f"executors: {', '.join(EXECUTORS)}")
