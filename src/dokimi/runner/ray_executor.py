"""``--executor ray``: the cells of a batch on a Ray cluster (docs/scale.md).

The driver (the machine that runs ``repo run``) prepares the batch as it does for the local executor (pin,
image, harness version, isolation probe, dry-run scripts), keeps the batch loop (resume, ``--max-batch-usd``,
the batch lock, cancel) and sends each cell to the cluster as one Ray task. A task gets plain data only: the
batch once (:class:`PortableBatch`: the cell context without its open source, lock and event, and the batch's
``_eval`` files as a tar) and the cell's :class:`~dokimi.batch.CellKey`.

On the node that picked it, the task

1. sets the node up for the batch, once per node (a file lock makes the node's worker processes share it):
   unpacks the ``_eval`` files, opens the source, and checks the batch pin on this node
   (:func:`check_node`): the same dokimi, the same eval tree, the same eval_dir digest, the image (built here
   from the eval tree when missing, or pulled when the user named one with ``--image``) with the pinned
   context digest, the harness executable, and the harness version inside the image;
2. runs the cell with :func:`dokimi.runner.cell.run_cell` in a private attempt directory, with this node's
   docker daemon;
3. hands back the outcome and the run directory: a tar of its files (:func:`pack_run_dir`: an entry over
   ``image.limits.workspace_mb`` stays on the node, a sparse file travels as its data), or with
   ``--shared-out`` (``--out`` is on a filesystem every node mounts at the same path) the attempt directory,
   which the driver moves into place.

A sealed real run is sealed on every node as on one machine (:mod:`dokimi.runner.ray_seal`): the model
gateway stays on the driver with the real credentials and the budget, each node seals its own cells (its
batch network, firewall chain, egress proxy, and a relay to the driver's gateway), and a cell's gateway.jsonl,
kept on the driver, is moved into its run directory when the cell comes back.

The driver installs the run directory into the batch with result.json last, so it stays the batch's only
writer. A task runs once more when its worker or its node dies (Ray's ``max_retries=1``; the cell is
idempotent and its leftover containers are removed by name). A cell whose retry dies too is ``lost``: no
result.json, so it is missing (never failed) and the next run of the batch fills it.
"""

from __future__ import annotations

import dataclasses
import fcntl
import hashlib
import io
import ipaddress
import json
import logging
import os
import shutil
import signal
import socket
import tarfile
import threading
import uuid
from concurrent.futures import Future, ThreadPoolExecutor
from concurrent.futures import wait as wait_futures
from contextlib import ExitStack
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from dokimi import __version__, process, safefs
from dokimi.batch import EVAL_DIR_NAME, CellKey, read_pin
from dokimi.errors import DokimiError, PrerequisiteError, UsageError
from dokimi.gateway.sealed import ALLOW_LIST, SealedBatch
from dokimi.harness.profile import resolve_bin
from dokimi.harness.runas import harness_identity, reachable_binary
from dokimi.rundir import (
    CONTENT_DIR,
    DRY_RUN_DIR,
    MANIFEST_COPY,
    RESULT_JSON,
    SUPPORT_DIR,
    RunDir,
)
from dokimi.runner.cell import CellContext, CellOutcome, reset_run_dir, run_cell
from dokimi.runner.executor import ExecutorName, stop_local_containers
from dokimi.runner.packing import add_tree
from dokimi.runner.ray_seal import (
    NodeSealSpec,
    RemoteSeal,
    environ_for_nodes,
    node_credentials,
    node_seal_spec,
    open_node_seal,
)
from dokimi.sandbox.docker import DOCKER, image_inspect, image_labels, remove_batch_containers
from dokimi.sandbox.harness_version import harness_version_in_image
from dokimi.sandbox.image import LABEL_CONTEXT_DIGEST, build_image, context_digest
from dokimi.sandbox.specs import workspace_cap_bytes
from dokimi.schemas._base import write_document
from dokimi.source import open_source
from dokimi.source.fetch import default_directory

if TYPE_CHECKING:
    from dokimi.schemas.batch import BatchPin

__all__ = [
    "NodeFacts",
    "NodeReturn",
    "NodeSetupError",
    "PortableBatch",
    "RayExecutor",
    "check_node",
    "install_cell",
    "make_portable",
    "pack_run_dir",
    "pin_differences",
    "run_cell_on_node",
]

#: Ray reruns a task once when its worker or node dies (a cell is idempotent).
TASK_RETRIES = 1
#: CPUs a cell reserves on its node: one cell per CPU, like ``-j`` on one machine.
CELL_CPUS = 1.0
#: CellContext fields that belong to one process (an open source, a lock, an event): made anew on the node.
RUNTIME_FIELDS = frozenset({"repo", "cancel", "prep_lock", "sealed"})
#: What of ``<batch>/_eval`` a node needs: the exported eval_dir, the support scripts, the dry-run scripts.
SHIPPED_EVAL = (CONTENT_DIR, SUPPORT_DIR, DRY_RUN_DIR, MANIFEST_COPY)
#: Where a node keeps its per-batch state (default: ``<DOKIMI_HOME or ~/.cache/dokimi>/ray-nodes``).
NODE_DIR_ENV = "DOKIMI_RAY_NODE_DIR"
ATTEMPTS_DIR = "ray-attempts"
READY_FILE = "ready.json"
#: Per node: the harness version inside an image, per (image id, harness executable).
VERSIONS_FILE = "harness-versions.json"
STOP_TIMEOUT_S = 60.0
CONNECT_TIMEOUT_S = 10.0
#: How often a driver thread waiting for a cell looks whether the executor is closing.
POLL_S = 1.0


class NodeSetupError(DokimiError):
    """A node cannot run the batch's cells: it differs from the batch pin, or lacks what a cell needs."""


@dataclass(frozen=True)
class PortableBatch:
    """A prepared batch as plain, picklable data: what a node needs to run any of its cells."""

    token: str
    """Names the batch's state on a node: a digest of the pin, the shipped files and dokimi's version."""
    source: str
    """The source as ``repo run`` got it; every node opens it (a url@rev is fetched into the node's cache)."""
    batch: str
    root: str
    """The batch directory on the driver (with --shared-out, on every node)."""
    pin: BatchPin
    dokimi_version: str
    context: dict[str, Any]
    """The CellContext's fields except RUNTIME_FIELDS, with the driver's paths."""
    eval_files: bytes
    """A tar of SHIPPED_EVAL under ``<batch>/_eval``."""
    driver_git_dir: str | None
    shared_out: bool
    bin_option: str | None = None
    """``--bin`` as given: each node finds its own harness executable with it (the same lookup as the driver:
    --bin, the harness's environment variable, the pinned install, PATH)."""
    seal: NodeSealSpec | None = None
    """A sealed run: what each node needs to seal its cells (:mod:`dokimi.runner.ray_seal`)."""


@dataclass
class NodeReturn:
    """What a cell's task hands back to the driver."""

    outcome: CellOutcome
    files: bytes | None = None
    """The run directory as a gzip tar (without result.json, which the outcome carries)."""
    attempt: str | None = None
    """With --shared-out: the attempt directory (on the shared filesystem) holding the run directory."""
    gateway_cells: list[str] = dataclasses.field(default_factory=list)
    """A sealed run: the accounts the cell opened on the driver's gateway (its gateway.jsonl is there)."""


# --- the driver side ----------------------------------------------------------------------------------------


def pack_dir(
    root: Path, names: tuple[str, ...] | None = None, *, skip: frozenset[str] = frozenset()
) -> bytes:
    """A gzip tar of ``root``'s entries (``names`` only, when given); links are stored as links, never
    followed, and sockets are left out."""
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w:gz", compresslevel=1, format=tarfile.PAX_FORMAT) as tar:
        entries = sorted(os.listdir(root)) if names is None else [n for n in names if (root / n).exists()]
        for name in entries:
            if name not in skip:
                add_tree(tar, root, name)
    return buffer.getvalue()


def pack_run_dir(run_dir: Path, cap: int) -> bytes:
    """The run directory's files for the driver. result.json stays behind (the driver writes it last), and
    so does every entry (``workspace/``, ``home/``, ``config/``, a scratch directory, a file) whose files
    add up to more than ``cap`` bytes (``image.limits.workspace_mb``), counted by their length, sparse or
    not: NOT_RETURNED in the run directory names each with its size. A sparse file within the cap travels
    as its data only (dokimi.runner.packing)."""
    skip = {RESULT_JSON}
    left: list[str] = []
    for name in sorted(os.listdir(run_dir)):
        if name == RESULT_JSON:
            continue
        size = safefs.tree_size(run_dir / name, trusted=run_dir, stop_above=cap)
        if size > cap:
            skip.add(name)
            left.append(
                f"{name}: more than {cap // (1024 * 1024)} MiB (image.limits.workspace_mb), left on node "
                f"{_safe_label()}\n"
            )
    if left:
        safefs.write_text(RunDir(run_dir).not_returned, "".join(left), trusted=run_dir)
    return pack_dir(run_dir, skip=frozenset(skip))


def _safe_member(member: tarfile.TarInfo, dest: str) -> tarfile.TarInfo | None:
    """Tar's ``data`` filter, skipping (not failing on) what it refuses: a link leaving the directory, an
    absolute path, a device or a FIFO. The run directory holds files the agent wrote: hostile input."""
    if member.name in (RESULT_JSON, f"./{RESULT_JSON}"):
        return None
    try:
        return tarfile.data_filter(member, dest)
    except tarfile.FilterError:
        return None


def unpack(data: bytes, dest: Path) -> None:
    with tarfile.open(fileobj=io.BytesIO(data), mode="r:gz") as tar:
        tar.extractall(dest, filter=_safe_member)


def make_portable(
    ctx: CellContext, *, source: str, shared_out: bool, bin_option: str | None = None
) -> PortableBatch:
    """The batch as plain data for the nodes (see the module docstring)."""
    pin, error = read_pin(ctx.root)
    if pin is None:
        raise UsageError(f"batch {ctx.batch}: no pin to check the nodes against ({error})")
    fields = {
        f.name: getattr(ctx, f.name)
        for f in dataclasses.fields(ctx)
        if f.name not in RUNTIME_FIELDS and f.init
    }
    fields["environ"] = environ_for_nodes(ctx.profile, ctx.environ, sealed=ctx.sealed is not None)
    fields["grading"] = dataclasses.replace(ctx.grading, egress=None)  # each node puts its own in
    seal = None
    if ctx.sealed is not None:
        assert isinstance(ctx.sealed, SealedBatch)
        seal = node_seal_spec(ctx.sealed)
    eval_files = pack_dir(ctx.root / EVAL_DIR_NAME, SHIPPED_EVAL)
    digest = hashlib.sha256()
    for part in (pin.model_dump_json(by_alias=True), __version__, str(ctx.root), source):
        digest.update(part.encode() + b"\0")
    digest.update(eval_files)
    git_dir = ctx.repo.git_dir
    return PortableBatch(
        token=digest.hexdigest()[:16],
        source=source,
        batch=ctx.batch,
        root=str(ctx.root),
        pin=pin,
        dokimi_version=__version__,
        context=fields,
        eval_files=eval_files,
        driver_git_dir=None if git_dir is None else str(git_dir),
        shared_out=shared_out,
        bin_option=bin_option,
        seal=seal,
    )


def install_cell(root: Path, key: CellKey, returned: NodeReturn, gateway_record: Path | None = None) -> None:
    """The run directory a node handed back, into the batch: files first, then (a sealed run) the cell's
    gateway.jsonl kept on the driver, result.json last (atomically)."""
    if returned.files is None and returned.attempt is None:
        return
    dest = key.path(root)
    reset_run_dir(dest)
    if returned.files is not None:
        unpack(returned.files, dest)
    else:
        assert returned.attempt is not None
        attempt = Path(returned.attempt)
        attempts = root / EVAL_DIR_NAME / ATTEMPTS_DIR
        if attempts not in attempt.parents:
            raise NodeSetupError(f"a node returned the attempt directory {attempt}, outside {attempts}")
        for name in os.listdir(attempt):
            if name != RESULT_JSON:
                os.replace(attempt / name, dest / name)
        shutil.rmtree(_attempt_root(attempt, attempts), ignore_errors=True)
    if gateway_record is not None:
        _move_record(gateway_record, RunDir(dest).gateway_jsonl)
    outcome = returned.outcome
    if outcome.status == "finished" and outcome.result is not None:
        write_document(RunDir(dest).result_json, outcome.result)


def _move_record(record: Path, dest: Path) -> None:
    """The driver's gateway.jsonl of a cell into its run directory, in place of whatever came back under
    that name (the node's copy of the run directory is hostile input)."""
    safefs.remove(dest, trusted=dest.parent)
    if record.is_file():  # a cell that sent no request has none, as on one machine
        os.replace(record, dest)
    shutil.rmtree(record.parent, ignore_errors=True)


def _attempt_root(cell_dir: Path, attempts: Path) -> Path:
    """``<attempts>/<id>`` of a cell directory below it."""
    return attempts / cell_dir.relative_to(attempts).parts[0]


def _lost(key: CellKey, exc: BaseException) -> CellOutcome:
    reason = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
    return CellOutcome(
        key,
        "lost",
        error=f"the cluster node running it went away and Ray's retry did not finish it ({reason})",
    )


class RayExecutor:
    """One Ray task per cell on a cluster; the batch loop stays here (see the module docstring)."""

    name: ExecutorName = "ray"

    def __init__(self, ctx: CellContext, portable: PortableBatch, slots: int) -> None:
        # Ray is an extra and takes seconds to import
        import ray

        self.ctx = ctx
        self.portable_ref = ray.put(portable)
        self._slots = slots
        self.remote = ray.remote(run_cell_on_node).options(
            num_cpus=CELL_CPUS, max_retries=TASK_RETRIES, retry_exceptions=False
        )
        self.running: dict[CellKey, Any] = {}
        self.lock = threading.Lock()
        self.closing = threading.Event()
        self.pool = ThreadPoolExecutor(max_workers=slots, thread_name_prefix="dokimi-ray")
        self.leaves_cluster = True
        """Whether :meth:`close` disconnects from the cluster (False when the caller joined it first)."""

    @classmethod
    def connect(
        cls,
        ctx: CellContext,
        *,
        source: str,
        address: str | None,
        jobs: int | None,
        shared_out: bool,
        bin_option: str | None = None,
    ) -> RayExecutor:
        """Join the cluster at ``address`` (default: RAY_ADDRESS, else the cluster this machine runs), unless
        :func:`join_cluster` did already: then whoever joined it leaves it (a sealed batch's node seals are
        stopped through it after the executor closes)."""
        joined_here = not import_ray().is_initialized()
        ray = join_cluster(address)
        try:
            portable = make_portable(ctx, source=source, shared_out=shared_out, bin_option=bin_option)
            slots = jobs or max(1, int(ray.cluster_resources().get("CPU", 1) // CELL_CPUS))
            executor = cls(ctx, portable, slots)
        except BaseException:
            if joined_here:
                ray.shutdown()
            raise
        executor.leaves_cluster = joined_here
        return executor

    @property
    def slots(self) -> int:
        return self._slots

    def submit(self, key: CellKey) -> Future[CellOutcome]:
        ref = self.remote.remote(self.portable_ref, key)
        with self.lock:
            self.running[key] = ref
        return self.pool.submit(self._collect, key, ref)

    def _collect(self, key: CellKey, ref: Any) -> CellOutcome:
        # Ray is an extra and takes seconds to import
        import ray.exceptions as rex

        returned: NodeReturn | None = None
        try:
            future = ref.future()
            while not wait_futures([future], timeout=POLL_S).done:
                if self.closing.is_set():
                    return CellOutcome(key, "interrupted")
            try:
                returned = future.result()
            except (rex.TaskCancelledError, rex.WorkerCrashedError) as exc:
                if self.ctx.cancel.is_set():
                    return CellOutcome(key, "interrupted")
                return _lost(key, exc)
            except rex.RayTaskError:
                raise  # a bug in dokimi on the node: as with the local executor, it ends the run
            except rex.RayError as exc:
                return _lost(key, exc)
        finally:
            with self.lock:
                self.running.pop(key, None)
            record = self._finish_accounts(key, returned)
        assert returned is not None
        if self.ctx.cancel.is_set() and returned.outcome.status != "finished":
            return returned.outcome
        install_cell(self.ctx.root, key, returned, record)
        return returned.outcome

    def _finish_accounts(self, key: CellKey, returned: NodeReturn | None) -> Path | None:
        """A sealed cell is back (or lost): every account its attempts opened on the gateway is closed (an
        attempt on a node that died never closed its own), and the returned attempt's record is found."""
        sealed = self.ctx.sealed
        cluster = getattr(sealed, "cluster", None)
        if cluster is None:
            return None
        owner = self.ctx.layout.rel(key.path(self.ctx.root))
        record: Path | None = cluster.finish(owner, [] if returned is None else returned.gateway_cells)
        return record

    def stop(self) -> None:
        """Cancel the running tasks (their workers are killed) and remove the batch's containers on every
        node, since a killed worker leaves its docker containers running; never raises."""
        # Ray is an extra and takes seconds to import
        import ray
        from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy

        with self.lock:
            refs = list(self.running.values())
        for ref in refs:
            try:
                ray.cancel(ref, force=True)
            except Exception:
                pass
        try:
            cleanup = ray.remote(remove_containers_on_node).options(num_cpus=0, max_retries=0)
            waits = [
                cleanup.options(
                    scheduling_strategy=NodeAffinitySchedulingStrategy(node["NodeID"], soft=False)
                ).remote(self.ctx.batch)
                for node in ray.nodes()  # type: ignore[no-untyped-call]
                if node.get("Alive")
            ]
            ray.wait(waits, num_returns=len(waits), timeout=STOP_TIMEOUT_S)
        except Exception:
            pass
        stop_local_containers(self.ctx.batch)

    def close(self) -> None:
        # Ray is an extra and takes seconds to import
        import ray

        self.closing.set()
        self.pool.shutdown(wait=True, cancel_futures=True)
        if self.leaves_cluster:
            ray.shutdown()


def join_cluster(address: str | None) -> Any:
    """``ray.init`` to the cluster at ``address`` (default: RAY_ADDRESS, else the cluster this machine runs),
    once per process, and a worker process started on every node at once (:func:`warm_worker`), so that
    starting them overlaps the batch's preparation on the driver. Returns the ``ray`` module."""
    target = address or os.environ.get("RAY_ADDRESS") or "auto"
    check_reachable(target)
    if _is_loopback(target):
        # Ray swaps a loopback address for the machine's network address before it connects, which never
        # answers for a cluster that listens on loopback only (a one-machine cluster); this keeps it.
        os.environ.setdefault("RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER", "0")
    ray = import_ray()
    if ray.is_initialized():
        return ray
    options: dict[str, Any] = {"namespace": "dokimi", "log_to_driver": False, "logging_level": logging.ERROR}
    if target == "local":
        options["include_dashboard"] = False
    keep_stdout_clean()
    handlers = {sig: signal.getsignal(sig) for sig in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP)}
    try:
        ray.init(address=target, **options)
    except (ConnectionError, RuntimeError, ValueError) as exc:
        raise PrerequisiteError(
            f"--executor ray: cannot join the Ray cluster at {target}: {exc}",
            hint="start one with `ray start --head` on this machine (docs/scale.md), pass --ray-address "
            "HOST:PORT, or --ray-address local for a throwaway one-machine cluster",
        ) from None
    finally:
        # Ray's core installs its own handlers for fatal signals, which end the process at once; dokimi's
        # (stop the cells, keep what finished, end with the signal) must stay.
        for sig, handler in handlers.items():
            if handler is not None:
                signal.signal(sig, handler)
    warm_the_nodes(ray)
    return ray


def warm_the_nodes(ray: Any) -> list[Any]:
    """One :func:`warm_worker` task per live node, not waited for (their refs are returned): Ray keeps the
    worker process it starts for the cells of this run, which then find dokimi imported."""
    # Ray is an extra and takes seconds to import
    from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy

    started = []
    try:
        warm = ray.remote(warm_worker)
        for node in ray.nodes():
            if node.get("Alive") and node.get("Resources", {}).get("CPU", 0) >= CELL_CPUS:
                on_node = NodeAffinitySchedulingStrategy(node["NodeID"], soft=True)
                # all options at once: what .options() returns has .remote() and no .options()
                options = {"num_cpus": CELL_CPUS, "max_retries": 0, "scheduling_strategy": on_node}
                started.append(warm.options(**options).remote())
    except Exception:
        pass  # only a head start: the cells start their workers themselves
    return started


def driver_address() -> str:
    """This machine's address in the Ray cluster it joined: where the nodes reach the driver's gateway."""
    import ray  # Ray is an extra and takes seconds to import

    return str(ray.util.get_node_ip_address())  # type: ignore[no-untyped-call]


def warm_worker() -> str:
    """Import what a cell runs (a node's worker process starts with Ray only); the node's id."""
    import ray  # loaded already in a worker process

    return str(ray.get_runtime_context().get_node_id())


def _host_port(address: str) -> tuple[str, int] | None:
    """HOST:PORT of a ``--ray-address`` that names one (not ``auto``, ``local`` or a ``ray://`` URL)."""
    host, sep, port = address.rpartition(":")
    if not sep or not port.isdigit() or "/" in address:
        return None
    return host.strip("[]"), int(port)


def _is_loopback(address: str) -> bool:
    parsed = _host_port(address)
    if parsed is None:
        return False
    if parsed[0] == "localhost":
        return True
    try:
        return ipaddress.ip_address(parsed[0]).is_loopback
    except ValueError:
        return False


def check_reachable(address: str, timeout_s: float = CONNECT_TIMEOUT_S) -> None:
    """Refuse at once a HOST:PORT nothing answers on (Ray itself would retry for minutes)."""
    parsed = _host_port(address)
    if parsed is None:
        return
    try:
        socket.create_connection(parsed, timeout=timeout_s).close()
    except OSError as exc:
        raise PrerequisiteError(
            f"--ray-address {address}: nothing answers there ({exc.strerror or exc})",
            hint="start the cluster's head with `ray start --head --port PORT` (docs/scale.md), or fix the "
            "address",
        ) from None


def keep_stdout_clean() -> None:
    """Ray's driver prints the cluster's error notices (a raylet that died, a worker that crashed) on stdout,
    where ``repo run --json`` writes its document: they go to stderr instead. Ray has no option for it; its
    notice printer is replaced by one that marks every notice an error (a no-op on a Ray without it)."""
    # Ray is an extra and takes seconds to import
    import ray._private.worker as ray_worker

    original = getattr(ray_worker, "print_to_stdstream", None)
    if original is None or getattr(original, "dokimi_stderr", False):
        return

    def to_stderr(data: dict[str, Any], ignore_prefix: bool) -> None:
        original({**data, "is_err": True}, ignore_prefix)

    to_stderr.dokimi_stderr = True  # type: ignore[attr-defined]
    ray_worker.print_to_stdstream = to_stderr


def import_ray() -> Any:
    try:
        # Ray is an extra and takes seconds to import
        import ray
    except ImportError:
        raise PrerequisiteError(
            "--executor ray needs Ray, which is not installed",
            hint="pip install 'dokimi-eval[ray]' on the driver and on every node of the cluster",
        ) from None
    return ray


def remove_containers_on_node(batch: str) -> int:
    """The batch's containers on this node's docker daemon, removed (a cancelled run)."""
    return len(remove_batch_containers(batch))


# --- the node side ------------------------------------------------------------------------------------------


@dataclass
class NodeState:
    """One worker process's view of a batch on its node."""

    ctx: CellContext
    """The cell context with this node's paths (its root is replaced per attempt)."""
    base: Path
    node: str
    stack: ExitStack
    seal: RemoteSeal | None = None
    """A sealed run: this node's seal (:mod:`dokimi.runner.ray_seal`)."""


_STATES: dict[str, NodeState] = {}
#: Why a batch cannot run in this process (its setup failed): later cells fail at once with the same reason
#: instead of building an image again.
_REFUSED: dict[str, str] = {}
_STATES_LOCK = threading.Lock()


def node_label() -> str:
    """``<host>/<node id prefix>``: which node ran a cell (two nodes may share a host)."""
    # Ray is an extra and takes seconds to import
    import ray

    return f"{socket.gethostname()}/{ray.get_runtime_context().get_node_id()[:8]}"


def node_base_dir() -> Path:
    configured = os.environ.get(NODE_DIR_ENV)
    if configured:
        return Path(configured)
    return default_directory() / "ray-nodes"


def relocate(value: Any, moves: list[tuple[Path, Path]]) -> Any:
    """``value`` with every path under a ``moves`` source moved to its target (dataclasses, mappings, lists
    and tuples are walked; anything else is kept as it is)."""
    if isinstance(value, Path):
        for old, new in moves:
            if value == old or old in value.parents:
                return new / value.relative_to(old)
        return value
    if isinstance(value, dict):
        return {relocate(k, moves): relocate(v, moves) for k, v in value.items()}
    if isinstance(value, list):
        return [relocate(v, moves) for v in value]
    if type(value) is tuple:
        return tuple(relocate(v, moves) for v in value)
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        changes = {}
        for f in dataclasses.fields(value):
            if f.init:
                old_value = getattr(value, f.name)
                new_value = relocate(old_value, moves)
                if new_value is not old_value:
                    changes[f.name] = new_value
        return dataclasses.replace(value, **changes) if changes else value
    return value


@dataclass(frozen=True)
class NodeFacts:
    """What a node found for the batch, to hold against its pin."""

    dokimi_version: str
    tree: str | None
    """The revision the node's source resolves to (None: a working tree)."""
    eval_dir_digest: str
    harness_version: str | None
    """The harness version inside the image on the node (None: not asked yet)."""


def pin_differences(portable: PortableBatch, facts: NodeFacts, *, harness_version: str) -> str | None:
    """What makes a node differ from the batch's pin, or None: the same dokimi, the source at the pinned
    revision, the same eval_dir, the same harness version inside the image."""
    pin = portable.pin
    if facts.dokimi_version != portable.dokimi_version:
        return f"it has dokimi {facts.dokimi_version}, the driver {portable.dokimi_version}"
    if pin.tree is not None and facts.tree != pin.tree:
        return f"it sees {portable.source} at {facts.tree}, the batch is pinned to {pin.tree}"
    if facts.eval_dir_digest != pin.eval_dir_digest:
        return f"the eval_dir it received has digest {facts.eval_dir_digest}, the pin {pin.eval_dir_digest}"
    if facts.harness_version is not None and facts.harness_version != harness_version:
        return f"the harness reports {facts.harness_version} in the image, the batch runs {harness_version}"
    return None


def check_node(portable: PortableBatch, ctx: CellContext, base: Path) -> None:
    """The batch pin, checked on this node before its first cell (see the module docstring); raises
    NodeSetupError naming what differs."""
    where = f"node {node_label()}"
    facts = NodeFacts(__version__, ctx.repo.rev, "sha256:" + context_digest(ctx.eval_content), None)
    _refuse_difference(where, pin_differences(portable, facts, harness_version=ctx.harness_version))
    _node_image(portable, ctx, base, where)
    facts = dataclasses.replace(facts, harness_version=node_harness_version(ctx, base))
    _refuse_difference(where, pin_differences(portable, facts, harness_version=ctx.harness_version))
    for cache in ctx.caches:
        cache.host.mkdir(parents=True, exist_ok=True)


def _refuse_difference(where: str, difference: str | None) -> None:
    if difference is not None:
        raise NodeSetupError(
            f"{where} differs from the batch's pin: {difference}",
            hint="every node needs the same dokimi and harness versions and must see the same source "
            "(docs/scale.md)",
        )


def node_harness_version(ctx: CellContext, base: Path) -> str:
    """The harness version inside the image on this node. It depends on the image and the executable only,
    so a node keeps it per (image id, executable path, size, mtime) and asks again only when one changes."""
    image_id = str((image_inspect(ctx.image) or {}).get("Id") or "")
    real = ctx.harness_bin.resolve()
    st = real.stat()
    key = hashlib.sha256(
        f"{ctx.profile.name}\0{image_id}\0{real}\0{st.st_size}\0{st.st_mtime_ns}".encode()
    ).hexdigest()
    known_file = base.parent / VERSIONS_FILE
    known: dict[str, str] = {}
    if image_id and known_file.is_file():
        try:
            loaded = json.loads(known_file.read_text(encoding="utf-8"))
            known = {str(k): str(v) for k, v in loaded.items()} if isinstance(loaded, dict) else {}
        except (OSError, ValueError):
            known = {}
    if key in known:
        return known[key]
    version = harness_version_in_image(
        ctx.profile,
        image=ctx.image,
        harness_bin=ctx.harness_bin,
        batch=ctx.batch,
        scratch=base,
        where=f"_eval-{base.parent.name}",
    )
    if image_id:
        known[key] = version
        staging = known_file.with_name(f".{VERSIONS_FILE}.{os.getpid()}")
        staging.write_text(json.dumps(known, sort_keys=True) + "\n", encoding="utf-8")
        os.replace(staging, known_file)
    return version


def node_harness_bin(portable: PortableBatch, profile: Any) -> Path:
    """This node's harness executable, found as the driver found its own, made executable by the container
    user."""
    try:
        return reachable_binary(resolve_bin(profile, portable.bin_option), harness_identity())
    except DokimiError as exc:
        raise NodeSetupError(
            f"node {node_label()}: {exc.message}",
            hint="install the harness on every node (the same version, at the --bin path if one is given)",
        ) from None


def _node_image(portable: PortableBatch, ctx: CellContext, base: Path, where: str) -> None:
    """The batch's image on this node: built from the eval tree when missing, or pulled when the user named
    it; its context digest must be the pinned one."""
    pin = portable.pin
    if pin.image_pin == "image":
        if image_inspect(ctx.image) is None:
            pulled = process.run([DOCKER, "pull", ctx.image], timeout=3600.0)
            if pulled.returncode != 0 or image_inspect(ctx.image) is None:
                raise NodeSetupError(
                    f"{where} has no image {ctx.image} and cannot pull it",
                    hint="push the image to a registry every node reaches and pass it as --image "
                    "REGISTRY/NAME:TAG, or load it on every node",
                )
        return
    if image_inspect(ctx.image) is None:
        built = build_image(ctx.repo, ctx.manifest, work_dir=base)
        if built.ref != ctx.image:
            raise NodeSetupError(f"{where} built {built.ref}, the batch runs {ctx.image}")
    if pin.image_context_digest is not None:
        label = image_labels(ctx.image).get(LABEL_CONTEXT_DIGEST)
        if label is not None and "sha256:" + label.removeprefix("sha256:") != pin.image_context_digest:
            raise NodeSetupError(
                f"{where}: image {ctx.image} was built from context {label}, the pin says "
                f"{pin.image_context_digest}",
                hint="remove the stale image on that node (docker rmi); the next run builds it again",
            )


def _node_state(portable: PortableBatch) -> NodeState:
    """This process's state for the batch, set up (and the node checked) on first use."""
    with _STATES_LOCK:
        state = _STATES.get(portable.token)
        if state is not None:
            return state
        # Ray is an extra and takes seconds to import
        import ray

        node_id = ray.get_runtime_context().get_node_id()
        base = node_base_dir() / node_id[:16] / portable.token
        base.mkdir(parents=True, exist_ok=True)
        stack = ExitStack()
        try:
            repo = stack.enter_context(open_source(portable.source))
            eval_root = base / EVAL_DIR_NAME
            moves = [(Path(portable.root) / EVAL_DIR_NAME, eval_root)]
            if portable.driver_git_dir is not None and repo.git_dir is not None:
                moves.append((Path(portable.driver_git_dir), repo.git_dir))
            fields = relocate(portable.context, moves)
            fields["harness_bin"] = node_harness_bin(portable, fields["profile"])
            ctx = CellContext(**fields, repo=repo, cancel=threading.Event(), prep_lock=threading.Lock())
            with open(base / "setup.lock", "w") as lock:
                fcntl.flock(lock, fcntl.LOCK_EX)
                ready = base / READY_FILE
                if not ready.is_file():
                    if eval_root.exists():
                        shutil.rmtree(eval_root)
                    eval_root.mkdir()
                    unpack(portable.eval_files, eval_root)
                    check_node(portable, ctx, base)
                    ready.write_text(json.dumps({"batch": portable.batch, "token": portable.token}) + "\n")
            seal = None
            if portable.seal is not None:
                seal = open_node_seal(portable.seal, ctx.profile, f"node {node_label()}")
                ctx = sealed_on_node(ctx, seal)
        except BaseException:
            stack.close()
            raise
        state = NodeState(ctx, base, node_label(), stack, seal)
        _STATES[portable.token] = state
        return state


def sealed_on_node(ctx: CellContext, seal: RemoteSeal) -> CellContext:
    """The cell context on a node of a sealed run: the node's network and seal for the agent and for the
    entry points of a task with egress; on the allow-list route, the harness's credentials from this node's
    own environment (they never travel through Ray)."""
    environ = dict(ctx.environ)
    if seal.route.kind == ALLOW_LIST:
        environ.update(node_credentials(ctx.profile))
    return dataclasses.replace(
        ctx,
        network=seal.network,
        sealed=seal,
        grading=dataclasses.replace(ctx.grading, egress=seal),
        environ=environ,
    )


def _attempt_dir(portable: PortableBatch, base: Path) -> Path:
    """A fresh root for one attempt of a cell: private to it, so a dead attempt's leftovers never mix in."""
    if portable.shared_out:
        parent = Path(portable.root) / EVAL_DIR_NAME / ATTEMPTS_DIR
    else:
        parent = base / ATTEMPTS_DIR
    path = parent / uuid.uuid4().hex
    path.mkdir(parents=True)
    return path


def run_cell_on_node(portable: PortableBatch, key: CellKey) -> NodeReturn:
    """The Ray task of one cell (see the module docstring). A node that cannot run the batch's cells makes
    the cell ``failed`` (missing; the next run fills it) with the reason."""
    refused = _REFUSED.get(portable.token)
    if refused is not None:
        return NodeReturn(CellOutcome(key, "failed", error=refused, node=_safe_label()))
    try:
        state = _node_state(portable)
    except (DokimiError, OSError) as exc:
        reason = exc.message if isinstance(exc, DokimiError) else f"node {_safe_label()}: {exc}"
        _REFUSED[portable.token] = reason
        return NodeReturn(CellOutcome(key, "failed", error=reason, node=_safe_label()))
    attempt = _attempt_dir(portable, state.base)
    ctx = dataclasses.replace(state.ctx, root=attempt)
    try:
        outcome = run_cell(ctx, key)
        outcome.node = state.node
        run_dir = key.path(attempt)
        accounts = [] if state.seal is None else state.seal.gateway_cells(run_dir)
        if portable.shared_out:
            return NodeReturn(outcome, attempt=str(run_dir), gateway_cells=accounts)
        cap = workspace_cap_bytes(ctx.manifest.image)
        files = pack_run_dir(run_dir, cap) if run_dir.is_dir() else None
        return NodeReturn(outcome, files=files, gateway_cells=accounts)
    finally:
        if not portable.shared_out:
            shutil.rmtree(attempt, ignore_errors=True)


def _safe_label() -> str | None:
    try:
        return node_label()
    except Exception:
        return None
