"""``--executor local|ray``: the executor a batch's cells run on, opened by name, and the cluster session a
remote one needs (:mod:`dokimi.runner.executor` is the interface; :mod:`dokimi.runner.ray_executor` the Ray
engine)."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import TYPE_CHECKING

from dokimi.errors import UsageError
from dokimi.runner.executor import EXECUTORS, CellExecutor, ExecutorName, LocalExecutor
from dokimi.runner.ray_executor import RayExecutor, join_cluster

if TYPE_CHECKING:
    from dokimi.batch import CellKey
    from dokimi.runner.cell import CellContext, CellOutcome

__all__ = ["ExecutorSettings", "cluster_session", "open_executor"]


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
