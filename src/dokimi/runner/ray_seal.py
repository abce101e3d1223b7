"""A sealed batch on a Ray cluster (docs/scale.md, "Sealed runs"): each node's seal as a Ray actor, and the
cells' side of it.

The driver's :class:`~dokimi.gateway.sealed.SealedBatch` holds the model gateway (the real credentials, the
budget) and listens for the nodes (:class:`~dokimi.gateway.cluster.ClusterGateway`). Each node gets one
:class:`~dokimi.gateway.cluster.NodeSeal` as a Ray actor (:func:`start_node_seals`, one per live node as
soon as the executor connects; a node that joins later makes its own on its first cell): its batch network,
firewall chain, egress proxy and relay to the driver's gateway, on the node's own docker daemon. A cell's
worker process reaches it through :class:`RemoteSeal`, which is the cell's
:class:`~dokimi.gateway.sealed.BatchSeal`: the agent's container gets the node's network, the proxy
variables of a cell on the node's proxy, and (the gateway route) the dummy credentials the driver's gateway
gave it. Nothing secret travels through Ray: the dummies and the batch's token do, the real key never.

On the allow-list route there is no gateway: the harness signs its own requests, so each node's cells take
the harness's credentials from that node's own environment (where ``ray start`` ran), never from the
driver's through Ray.
"""

from __future__ import annotations

import os
import threading
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from dokimi.errors import DokimiError
from dokimi.gateway.cluster import ControlClient, NodeSeal
from dokimi.gateway.sealed import (
    GATEWAY,
    CellSeal,
    EgressOpening,
    ModelRoute,
    SealAccount,
    cell_allow_list,
    passes_into_sealed_container,
)
from dokimi.rundir import RunDir

if TYPE_CHECKING:
    from dokimi.gateway.sealed import SealedBatch
    from dokimi.schemas.profile import HarnessProfile

__all__ = [
    "NodeSealSpec",
    "RemoteSeal",
    "SealRefused",
    "environ_for_nodes",
    "node_seal_spec",
    "open_node_seal",
    "seal_the_nodes",
    "start_node_seals",
    "stop_node_seals",
]

ACTOR_PREFIX = "dokimi-seal-"
#: Calls of a node's cells to its seal run side by side (opening, closing and serving are short).
ACTOR_CONCURRENCY = 32
STOP_TIMEOUT_S = 60.0


@dataclass(frozen=True)
class NodeSealSpec:
    """What a node needs to seal its cells (plain data, shipped with the batch)."""

    batch: str
    route: ModelRoute
    gateway: tuple[str, int] | None
    """The driver's gateway listener (the gateway route)."""
    token: str
    """The batch's token for that listener: it opens cells on the batch's budget (never a vendor key)."""
    resolve: Mapping[str, str] = field(default_factory=dict)
    """``--egress-resolve``."""

    def actor_name(self, node_id: str) -> str:
        return f"{ACTOR_PREFIX}{self.token[:12]}-{node_id[:16]}"


def node_seal_spec(sealed: SealedBatch) -> NodeSealSpec:
    """The driver's sealed batch as the nodes need it."""
    cluster = sealed.cluster
    if sealed.route.kind == GATEWAY and cluster is None:
        raise DokimiError("the sealed batch was started without the gateway's listener for the cluster")
    gateway = None if cluster is None else (cluster.host, cluster.port)
    return NodeSealSpec(sealed.batch, sealed.route, gateway, sealed.token, dict(sealed.resolve))


def seal_the_nodes(sealed: SealedBatch, cell_cpus: float) -> None:
    """Start a seal on every node of the cluster for a sealed batch (:func:`start_node_seals`), stopped when
    the batch is (:meth:`~dokimi.gateway.sealed.SealedBatch.on_stop`)."""
    spec = node_seal_spec(sealed)
    actors = start_node_seals(spec, cell_cpus)
    sealed.on_stop(lambda: stop_node_seals(spec, actors))


def environ_for_nodes(profile: HarnessProfile, environ: Mapping[str, str], *, sealed: bool) -> dict[str, str]:
    """The caller's variables that travel to the nodes: only those the harness profile passes to the agent
    (``env_allow``), never the whole environment; in a sealed run none that holds a credential (the gateway
    keeps the real key on the driver; on the allow-list route each node has its own)."""
    names = {*profile.env_allow, *profile.endpoint_bypass_env}
    chosen = {name: value for name, value in environ.items() if name in names}
    if sealed:
        return {k: v for k, v in chosen.items() if passes_into_sealed_container(profile, k)}
    return chosen


def node_credentials(profile: HarnessProfile) -> dict[str, str]:
    """On the allow-list route: the harness's credential variables from this node's own environment."""
    names = {*profile.env_allow, *profile.credential_env}
    return {
        k: v for k, v in os.environ.items() if k in names and not passes_into_sealed_container(profile, k)
    }


def _actor_class() -> Any:
    import ray  # Ray is an extra and takes seconds to import

    options: dict[str, Any] = {"num_cpus": 0, "max_restarts": 0, "max_concurrency": ACTOR_CONCURRENCY}
    return ray.remote(**options)(NodeSeal)


def _seal_actor(spec: NodeSealSpec, node_id: str) -> Any:
    """The node's seal actor (made when it does not exist yet), pinned to that node."""
    from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy  # Ray: an extra, slow to import

    return (
        _actor_class()
        .options(
            name=spec.actor_name(node_id),
            namespace="dokimi",
            get_if_exists=True,
            scheduling_strategy=NodeAffinitySchedulingStrategy(node_id, soft=False),
        )
        .remote(spec.batch, node_id[:8], spec.gateway, spec.token, dict(spec.resolve))
    )


def start_node_seals(spec: NodeSealSpec, cell_cpus: float) -> list[Any]:
    """One seal actor per live node that can run a cell (``cell_cpus``), each asked to seal its node at once
    (not waited for: the node's first cell waits), so that making the networks overlaps the first cells'
    start."""
    import ray  # Ray is an extra and takes seconds to import

    actors = []
    for node in ray.nodes():  # type: ignore[no-untyped-call]
        if node.get("Alive") and node.get("Resources", {}).get("CPU", 0) >= cell_cpus:
            actor = _seal_actor(spec, node["NodeID"])
            actor.ready.remote()
            actors.append(actor)
    return actors


def stop_node_seals(spec: NodeSealSpec, actors: Sequence[Any]) -> None:
    """Each node's seal stopped (its proxy and relay, its firewall chain, its network) and its actor ended,
    those a late node made itself included; never raises. A node that died took its actor with it: what it
    left (a network, a chain) goes with the next run of the batch on that node, or by hand (docs/scale.md)."""
    import ray  # Ray is an extra and takes seconds to import

    if not ray.is_initialized():  # never a new local Ray instance just to stop what was on the old one
        return
    known = list(actors)
    try:
        prefix = ACTOR_PREFIX + spec.token[:12]
        for entry in ray.util.list_named_actors(all_namespaces=True):
            name = entry.get("name", "") if isinstance(entry, dict) else str(entry)
            if name.startswith(prefix):
                try:
                    known.append(ray.get_actor(name, namespace="dokimi"))
                except ValueError:
                    pass
    except Exception:
        pass
    try:
        ray.wait([a.stop.remote() for a in known], num_returns=len(known), timeout=STOP_TIMEOUT_S)
    except Exception:
        pass
    for actor in known:
        try:
            ray.kill(actor)
        except Exception:
            pass


class RemoteSeal:
    """A cell's view of its node's seal (a :class:`~dokimi.gateway.sealed.BatchSeal`), in the cell's worker
    process."""

    def __init__(
        self, actor: Any, spec: NodeSealSpec, ready: Mapping[str, Any], profile: HarnessProfile
    ) -> None:
        self.actor = actor
        self.route = spec.route
        self._network = str(ready["network"])
        self.endpoint = ready.get("endpoint")
        self.control = None if spec.gateway is None else ControlClient(*spec.gateway, spec.token)
        self.endpoint_env = profile.endpoint_env
        self.opened: dict[str, list[str]] = {}
        """Run directory -> the gateway accounts its cells opened (returned to the driver with the cell)."""
        self._lock = threading.Lock()

    @property
    def network(self) -> str:
        return self._network

    def _open_egress(self, name: str, allow: Sequence[str], log_path: Path) -> tuple[str, dict[str, str]]:
        import ray  # Ray is an extra and takes seconds to import

        cell_id, env = ray.get(self.actor.open_egress.remote(name, list(allow), str(log_path)))
        return str(cell_id), dict(env)

    def _close_egress(self, cell_id: str) -> tuple[int, int]:
        import ray  # Ray is an extra and takes seconds to import

        attempts, refused = ray.get(self.actor.close_egress.remote(cell_id))
        return int(attempts), int(refused)

    def open_egress(self, name: str, allow: Sequence[str], log_path: Path) -> EgressOpening:
        cell_id, env = self._open_egress(name, allow, log_path)
        return EgressOpening(env, lambda: self._close_egress(cell_id))

    def open_cell(
        self,
        name: str,
        run_dir: Path,
        egress: Sequence[str],
        *,
        any_host: bool = False,
        cap_usd: float | None = None,
    ) -> CellSeal:
        """A cell on the node's proxy and, on the gateway route, its account on the driver's gateway."""
        allow = cell_allow_list(self.route, egress, any_host=any_host)
        egress_id, env = self._open_egress(name, allow, RunDir(run_dir).egress_jsonl)
        control, gateway_id = self.control, None
        if control is not None:
            try:
                gateway_id, dummies = control.open_cell(name.rpartition(":")[0], name, cap_usd)
            except BaseException:
                self._close_egress(egress_id)
                raise
            with self._lock:
                self.opened.setdefault(str(run_dir), []).append(gateway_id)
            env.update(dummies)
            if self.endpoint_env and self.endpoint:
                env[self.endpoint_env] = str(self.endpoint)

        def close() -> SealAccount:
            usage, records = None, None
            if control is not None and gateway_id is not None:
                usage, records = control.close_cell(gateway_id)
            attempts, refused = self._close_egress(egress_id)
            return SealAccount(usage, attempts, refused, records)

        return CellSeal(env, None if gateway_id is None else self.endpoint, close)

    def gateway_cells(self, run_dir: Path) -> list[str]:
        """The gateway accounts the cells of ``run_dir`` opened (forgotten here)."""
        with self._lock:
            return self.opened.pop(str(run_dir), [])


class SealRefused(DokimiError):
    """A node cannot seal its cells (no root, no iptables, no way to the driver's gateway)."""


def open_node_seal(spec: NodeSealSpec, profile: HarnessProfile, where: str) -> RemoteSeal:
    """This node's seal, started (or found started) for the batch; :class:`SealRefused` naming why when the
    node cannot seal its cells, which then fail with that reason instead of running unsealed."""
    import ray  # Ray is an extra and takes seconds to import

    node_id = ray.get_runtime_context().get_node_id()
    actor = _seal_actor(spec, node_id)
    try:
        ready = ray.get(actor.ready.remote())
    except Exception as exc:  # the actor could not start at all
        raise SealRefused(f"{where} cannot seal its cells: {exc}".splitlines()[0]) from None
    if "refused" in ready:
        raise SealRefused(
            f"{where} cannot seal its cells, so they do not run (never unsealed): {ready['refused']}",
            hint="every node of a sealed run needs root and iptables for its batch network's firewall "
            "(docs/scale.md, 'Sealed runs')",
        )
    return RemoteSeal(actor, spec, ready, profile)
