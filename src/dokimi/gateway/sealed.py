"""A sealed batch: the batch network, the model gateway and the egress proxy, started together for one
``repo run`` and stopped together; and per cell, the environment its agent container gets and the account
it leaves.

:class:`SealedBatch` is what the runner holds. For each cell, :meth:`SealedBatch.open_cell` gives a
:class:`CellSeal` whose ``env`` goes to the agent's container (the harness's endpoint variable at the
gateway, a dummy per credential variable, the egress proxy's variables), and whose :meth:`CellSeal.close`,
called once the container has exited, returns the :class:`SealAccount`: the gateway's usage and the egress
attempts. :meth:`SealedBatch.open_egress` does the same for an entry point (grade, oracle, static) of a task
with ``egress``: the proxy only, limited to the task's hosts.

The model is reached one of two ways (:func:`model_route`): through the **gateway** (the harness's endpoint
variable at it; it holds the real key, prices and caps every request), or, for a vendor the harness does not
reach by a base URL (Bedrock, Vertex), through the **allow-list**: the egress proxy opens the profile's
``egress`` hosts to the harness, which then holds its own credentials and reports its own cost.

A cell on a cluster node gets the same from that node's seal (:mod:`dokimi.gateway.cluster`); both are a
:class:`BatchSeal`.
"""

from __future__ import annotations

import re
import secrets
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from types import TracebackType
from typing import TYPE_CHECKING, Any, Literal, Protocol, Self

from dokimi.errors import UsageError
from dokimi.gateway.budget import Budget
from dokimi.gateway.cluster import RECORDS_DIR, ClusterGateway
from dokimi.gateway.egress import ANY_HOST, EgressProxy
from dokimi.gateway.model import CellUsage, ModelGateway
from dokimi.gateway.network import BatchNetwork, allow_ports, close_batch_network, open_batch_network
from dokimi.gateway.prices import PRICES, Price, price_for
from dokimi.rundir import RunDir

if TYPE_CHECKING:
    from dokimi.schemas.profile import HarnessProfile

__all__ = [
    "ALLOW_LIST",
    "ALLOW_LIST_COST",
    "GATEWAY",
    "BatchSeal",
    "CellSeal",
    "EgressOpening",
    "EgressRoute",
    "ModelRoute",
    "Observed",
    "SealAccount",
    "SealedBatch",
    "gateway_upstream",
    "is_proxy_setting",
    "model_route",
    "observed_usage",
    "passes_into_sealed_container",
    "unpriced_models",
]

GATEWAY_UNATTRIBUTED = "gateway-refused.jsonl"
EGRESS_UNATTRIBUTED = "egress-refused.jsonl"
_FALSY = {"", "0", "false", "no", "off"}


def gateway_upstream(profile: HarnessProfile, environ: Mapping[str, str]) -> str:
    """Where the gateway forwards: the profile's endpoint variable as set on the host, else the vendor's
    default URL. Refused when the harness would not use the endpoint variable at all (Bedrock, Vertex)."""
    if not profile.endpoint_env:
        raise UsageError(
            f"harness {profile.name} names no endpoint variable (endpoint_env), so its model calls cannot "
            "be sent through the model gateway",
            hint="add endpoint_env to the profile, or pass --agent-network NET (unsealed)",
        )
    bypass = [v for v in profile.endpoint_bypass_env if environ.get(v, "").strip().lower() not in _FALSY]
    if bypass:
        raise UsageError(
            f"{bypass[0]} is set, so {profile.name} ignores {profile.endpoint_env} and its model calls "
            "cannot go through the model gateway",
            hint=f"unset {bypass[0]} and set {profile.endpoint_env} to your endpoint, or pass "
            "--agent-network NET (unsealed)",
        )
    upstream = environ.get(profile.endpoint_env) or profile.endpoint_default
    if not upstream:
        raise UsageError(
            f"harness {profile.name}: {profile.endpoint_env} is not set and the profile has no "
            "endpoint_default, so the model gateway has nowhere to forward",
            hint=f"set {profile.endpoint_env} to the model API's base URL",
        )
    if not profile.credential_env:
        raise UsageError(
            f"harness {profile.name} names no credential variable (credential_env), so the model gateway "
            "cannot tell its cells apart",
            hint="add credential_env to the profile (the variable its API key is read from)",
        )
    if not profile.api:
        raise UsageError(
            f"harness {profile.name} names no model API (api), so the model gateway does not know which "
            "paths to forward or where its key goes",
            hint="add api to the profile: anthropic, openai-responses, openai-chat or gemini",
        )
    return upstream


RouteKind = Literal["gateway", "allow_list"]
GATEWAY: RouteKind = "gateway"
ALLOW_LIST: RouteKind = "allow_list"


@dataclass(frozen=True)
class ModelRoute:
    """How a sealed cell's harness reaches its model."""

    kind: RouteKind
    """``gateway``: the harness's endpoint variable at the model gateway, which holds the real credentials;
    ``allow_list``: the egress proxy opens the profile's ``egress`` hosts (Bedrock, Vertex, a gateway no base
    URL addresses), and the harness holds its own credentials."""
    allow: tuple[str, ...] = ()
    """The profile's hosts the proxy opens to the agent's container (the allow-list route)."""
    why: str | None = None
    """Why the gateway cannot serve the profile (the allow-list route)."""


def model_route(profile: HarnessProfile, environ: Mapping[str, str]) -> ModelRoute:
    """The route of a sealed run: the model gateway when it can serve the profile
    (:func:`gateway_upstream`), else the allow-list of the profile's ``egress`` hosts; refused when neither
    can, naming what is missing."""
    try:
        gateway_upstream(profile, environ)
    except UsageError as exc:
        if not profile.egress:
            raise UsageError(
                f"{exc.message}; and harness {profile.name} lists no egress hosts, so its model cannot be "
                "reached through the egress proxy's allow-list either",
                hint=f"{exc.hint}; or add the model API's hosts to the profile's egress list",
            ) from None
        return ModelRoute(ALLOW_LIST, tuple(profile.egress), exc.message)
    return ModelRoute(GATEWAY)


def unpriced_models(models: Sequence[str], prices: Mapping[str, Price]) -> list[str]:
    """The models a sealed run cannot price (neither the price table nor ``--price`` knows them)."""
    return [m for m in models if price_for(m, prices) is None]


_SECRET_NAME = re.compile(r"KEY|TOKEN|SECRET|PASSWORD|CREDENTIAL|HEADERS|AUTH", re.IGNORECASE)
_PROXY_NAMES = frozenset({"http_proxy", "https_proxy", "all_proxy", "no_proxy"})


def is_proxy_setting(name: str) -> bool:
    """A proxy variable of the host (HTTPS_PROXY, no_proxy, ...): never passed to a sealed container."""
    return name.lower() in _PROXY_NAMES


def passes_into_sealed_container(profile: HarnessProfile, name: str) -> bool:
    """Whether a caller's variable may reach a sealed cell's harness: not a credential variable of the
    profile, not a name that looks like a secret (KEY, TOKEN, SECRET, PASSWORD, CREDENTIAL, HEADERS, AUTH:
    AWS keys, a GitHub token, extra auth headers), not the endpoint variable (the gateway's goes in instead)
    and not a proxy setting of the host. Non-secret settings the harness needs (a provider type, a region, a
    locale) still pass."""
    return not (
        name in profile.credential_env
        or name == profile.endpoint_env
        or is_proxy_setting(name)
        or _SECRET_NAME.search(name) is not None
    )


@dataclass(frozen=True)
class SealAccount:
    """What a cell left with the gateway and the egress proxy."""

    usage: CellUsage | None
    """The gateway's account; None on the allow-list route (no gateway saw the model calls)."""
    egress_attempts: int
    egress_refused: int
    records: list[Mapping[str, Any]] | None = None
    """On a cluster node, whose gateway.jsonl stays on the driver: the records the boundary between an infra
    error and a failure reads (:func:`dokimi.gateway.cluster.boundary_records`); None: read the run
    directory's gateway.jsonl."""


@dataclass
class CellSeal:
    """One cell's opening on a sealed batch (on this machine, or on a cluster node)."""

    env: dict[str, str]
    """Variables for the agent's container: endpoint, dummy credentials, proxy."""
    endpoint: str | None
    """The gateway's URL as the container reaches it (what ``{endpoint}`` becomes in a config file); None on
    the allow-list route."""
    _close: Callable[[], SealAccount]
    _account: SealAccount | None = None

    def close(self) -> SealAccount:
        """Stop serving the cell and return its account (idempotent)."""
        if self._account is None:
            self._account = self._close()
        return self._account


@dataclass
class EgressOpening:
    """An entry point's opening on the egress proxy: the proxy variables for its container."""

    env: dict[str, str]
    _close: Callable[[], tuple[int, int]]

    def close(self) -> tuple[int, int]:
        """Stop serving it; its attempts and refusals."""
        return self._close()


class EgressRoute(Protocol):
    """Where a container reaches a task's egress hosts: a sealed network and a cell on its egress proxy."""

    @property
    def network(self) -> str: ...

    def open_egress(self, name: str, allow: Sequence[str], log_path: Path) -> EgressOpening: ...


class BatchSeal(EgressRoute, Protocol):
    """A sealed batch as a cell sees it: :class:`SealedBatch` here, a node's seal on a cluster."""

    route: ModelRoute

    def open_cell(
        self, name: str, run_dir: Path, egress: Sequence[str], *, any_host: bool = False,
        cap_usd: float | None = None,
    ) -> CellSeal: ...  # fmt: skip


def cell_allow_list(route: ModelRoute, egress: Sequence[str], *, any_host: bool) -> list[str]:
    """What the proxy opens to a cell's agent: its task's egress hosts (any public host for a manifest with
    ``image.network: public``), and on the allow-list route the profile's model hosts."""
    allow = [ANY_HOST] if any_host else list(egress)
    return [*allow, *(h for h in route.allow if h not in allow)]


class SealedBatch:
    """The batch network with the model gateway and the egress proxy on its bridge address.

    ``profile`` None: no model route at all, only the network and the proxy (``tasks check`` of a task with
    ``egress``: its entry points reach the task's hosts through the proxy). On the allow-list route no
    gateway is started. ``cluster``: also listen for the nodes of a Ray cluster on ``(host, port)``
    (:class:`dokimi.gateway.cluster.ClusterGateway`; the gateway route only)."""

    def __init__(
        self,
        batch: str,
        *,
        profile: HarnessProfile | None,
        environ: Mapping[str, str],
        log_dir: Path,
        resolve: Mapping[str, str] | None = None,
        prices: Mapping[str, Price] = PRICES,
        budget: Budget | None = None,
        cluster: tuple[str, int] | None = None,
    ) -> None:
        self.batch = batch
        self.profile = profile
        self.prices = prices
        self.budget = budget
        self.route = ModelRoute(ALLOW_LIST) if profile is None else model_route(profile, environ)
        gateway = profile is not None and self.route.kind == GATEWAY
        self.upstream = gateway_upstream(profile, environ) if gateway and profile is not None else None
        self._credentials = {
            v: environ[v] for v in (profile.credential_env if profile else ()) if environ.get(v)
        }
        self._via = environ.get("HTTPS_PROXY") or environ.get("https_proxy") or None
        self.log_dir = log_dir
        self.resolve = dict(resolve or {})
        self._cluster_address = cluster if gateway else None
        self._net: BatchNetwork | None = None
        self._gateway: ModelGateway | None = None
        self._proxy: EgressProxy | None = None
        self.cluster: ClusterGateway | None = None
        """The gateway's listener for the nodes of a cluster (``cluster`` given, the gateway route)."""
        self.token = secrets.token_hex(16)
        """The batch's token on a cluster: what every connection of a node to the gateway's listener opens
        with, and what names the nodes' seals."""
        self._on_stop: list[Callable[[], None]] = []

    def start(self) -> Self:
        self._net = open_batch_network(self.batch)
        try:
            ports = []
            if self.upstream is not None:
                assert self.profile is not None
                self._gateway = ModelGateway(
                    self.upstream,
                    credential_vars=self.profile.credential_env,
                    credentials=self._credentials,
                    apis=self.profile.api,
                    prices=self.prices,
                    budget=self.budget,
                    host=self._net.address,
                    via=self._via if self.upstream.startswith("https://") else None,
                    unattributed_path=self.log_dir / GATEWAY_UNATTRIBUTED,
                ).start()
                ports.append(self._gateway.port)
                if self._cluster_address is not None:
                    host, port = self._cluster_address
                    staging = self.log_dir / RECORDS_DIR
                    self.cluster = ClusterGateway(
                        self._gateway, host=host, port=port, staging=staging, token=self.token
                    )
                    self.cluster.start()
            self._proxy = EgressProxy(
                host=self._net.address,
                resolve=self.resolve,
                unattributed_path=self.log_dir / EGRESS_UNATTRIBUTED,
            ).start()
            ports.append(self._proxy.port)
            allow_ports(self._net, ports)
        except BaseException:
            self.stop()
            raise
        return self

    def on_stop(self, action: Callable[[], None]) -> None:
        """Run ``action`` first when the batch stops (a cluster's node seals: their networks, chains, proxies
        and relays go before the gateway they relay to)."""
        self._on_stop.append(action)

    def stop(self) -> None:
        """Stop what :meth:`on_stop` registered, the gateway and the proxy, remove the firewall chain and the
        network (never raises)."""
        actions, self._on_stop = self._on_stop, []
        for action in reversed(actions):
            try:
                action()
            except Exception:
                pass
        for server in (self.cluster, self._gateway, self._proxy):
            if server is not None:
                try:
                    server.stop()
                except Exception:
                    pass
        self.cluster = None
        self._gateway = self._proxy = None
        if self._net is not None:
            close_batch_network(self._net)
            self._net = None

    def __enter__(self) -> Self:
        return self.start()

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.stop()

    @property
    def network(self) -> str:
        """The docker network the agent's containers join."""
        assert self._net is not None, "the sealed batch is not started"
        return self._net.name

    @property
    def gateway(self) -> ModelGateway:
        assert self._gateway is not None, "the sealed batch has no model gateway"
        return self._gateway

    @property
    def proxy(self) -> EgressProxy:
        assert self._proxy is not None, "the sealed batch is not started"
        return self._proxy

    @property
    def address(self) -> str:
        assert self._net is not None, "the sealed batch is not started"
        return self._net.address

    def open_cell(
        self,
        name: str,
        run_dir: Path,
        egress: Sequence[str],
        *,
        any_host: bool = False,
        cap_usd: float | None = None,
    ) -> CellSeal:
        """Open a cell: its gateway record goes to ``run_dir``/gateway.jsonl and its egress log to
        ``run_dir``/egress.jsonl; ``egress`` is its allow-list (``any_host``: image.network public), to which
        the allow-list route adds the profile's model hosts."""
        allow = cell_allow_list(self.route, egress, any_host=any_host)
        egress_cell = self.proxy.open_cell(name, allow, RunDir(run_dir).egress_jsonl)
        env = self.proxy.cell_env(egress_cell, self.address)
        if self._gateway is None:

            def close_egress_only() -> SealAccount:
                closed = self.proxy.close_cell(egress_cell)
                return SealAccount(None, closed.attempts, closed.refused)

            return CellSeal(env, None, close_egress_only)
        gateway_cell = self.gateway.open_cell(name, RunDir(run_dir).gateway_jsonl, cap_usd=cap_usd)
        endpoint = f"http://{self.address}:{self.gateway.port}"
        env.update(gateway_cell.env)
        if self.profile is not None and self.profile.endpoint_env:
            env[self.profile.endpoint_env] = endpoint

        def close() -> SealAccount:
            usage = self.gateway.close_cell(gateway_cell)
            closed = self.proxy.close_cell(egress_cell)
            return SealAccount(usage, closed.attempts, closed.refused)

        return CellSeal(env, endpoint, close)

    def open_egress(self, name: str, allow: Sequence[str], log_path: Path) -> EgressOpening:
        """An entry point's cell on the proxy: ``allow`` (its task's egress hosts) only, logged to
        ``log_path``."""
        cell = self.proxy.open_cell(name, list(allow), log_path)

        def close() -> tuple[int, int]:
            closed = self.proxy.close_cell(cell)
            return closed.attempts, closed.refused

        return EgressOpening(self.proxy.cell_env(cell, self.address), close)


@dataclass(frozen=True)
class Observed:
    """A cell's cost and turns as dokimi observed them."""

    cost_usd: float | None
    cost_source: str | None
    """``gateway`` (priced by the gateway), ``harness`` (the harness's own figure), ``harness_allow_list``
    (the harness's own figure on the allow-list route, where no gateway can read the model calls) or None
    (unknown)."""
    turns: int | None


def observed_usage(
    account: SealAccount | None, harness_cost: float | None, harness_turns: int | None
) -> Observed:
    """The one place that decides a cell's cost and turns: the model gateway's account when the cell ran
    sealed through it (it forwards only what it can price, so its cost is the whole cost), else what the
    harness reported. A harness's figure is untrusted (the agent can write to what it prints); the gateway's
    is not, and a cell sealed through the gateway never falls back to it. On the allow-list route the
    harness's figure is all there is, and ``cost_source`` says so."""
    if account is None:
        return Observed(harness_cost, None if harness_cost is None else "harness", harness_turns)
    if account.usage is None:
        return Observed(harness_cost, None if harness_cost is None else ALLOW_LIST_COST, harness_turns)
    return Observed(account.usage.cost_usd, "gateway", account.usage.turns)


ALLOW_LIST_COST = "harness_allow_list"
"""``cost_source`` of a cell on the allow-list route: the harness's own figure."""
