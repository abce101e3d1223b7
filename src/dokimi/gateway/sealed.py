"""A sealed batch: the batch network, the model gateway and the egress proxy, started together for one
``repo run`` and stopped together; and per cell, the environment its agent container gets and the account
it leaves.

:class:`SealedBatch` is what the runner holds. For each cell, :meth:`SealedBatch.open_cell` gives a
:class:`CellSeal` whose ``env`` goes to the agent's container (the harness's endpoint variable at the
gateway, a dummy per credential variable, the egress proxy's variables), and whose :meth:`CellSeal.close`,
called once the container has exited, returns the :class:`SealAccount`: the gateway's usage and the egress
attempts.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from types import TracebackType
from typing import TYPE_CHECKING, Self

from dokimi.errors import UsageError
from dokimi.gateway.budget import Budget
from dokimi.gateway.egress import ANY_HOST, EGRESS_LOG, EgressCell, EgressProxy
from dokimi.gateway.model import RECORD_FILE, CellUsage, GatewayCell, ModelGateway
from dokimi.gateway.network import BatchNetwork, allow_ports, close_batch_network, open_batch_network
from dokimi.gateway.prices import PRICES, Price, price_for

if TYPE_CHECKING:
    from dokimi.schemas.profile import HarnessProfile

__all__ = [
    "passes_into_sealed_container",
    "CellSeal",
    "Observed",
    "SealAccount",
    "SealedBatch",
    "gateway_upstream",
    "observed_usage",
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


def unpriced_models(models: Sequence[str], prices: Mapping[str, Price]) -> list[str]:
    """The models a sealed run cannot price (neither the price table nor ``--price`` knows them)."""
    return [m for m in models if price_for(m, prices) is None]


_SECRET_NAME = re.compile(r"KEY|TOKEN|SECRET|PASSWORD|CREDENTIAL|HEADERS|AUTH", re.IGNORECASE)
_PROXY_NAMES = frozenset({"http_proxy", "https_proxy", "all_proxy", "no_proxy"})


def passes_into_sealed_container(profile: HarnessProfile, name: str) -> bool:
    """Whether a caller's variable may reach a sealed cell's harness: not a credential variable of the
    profile, not a name that looks like a secret (KEY, TOKEN, SECRET, PASSWORD, CREDENTIAL, HEADERS, AUTH:
    AWS keys, a GitHub token, extra auth headers), not the endpoint variable (the gateway's goes in instead)
    and not a proxy setting of the host. Non-secret settings the harness needs (a provider type, a region, a
    locale) still pass."""
    return not (
        name in profile.credential_env
        or name == profile.endpoint_env
        or name.lower() in _PROXY_NAMES
        or _SECRET_NAME.search(name) is not None
    )


@dataclass(frozen=True)
class SealAccount:
    """What a cell left with the gateway and the egress proxy."""

    usage: CellUsage
    egress_attempts: int
    egress_refused: int


@dataclass
class CellSeal:
    """One cell's opening on the sealed batch."""

    env: dict[str, str]
    """Variables for the agent's container: endpoint, dummy credentials, proxy."""
    endpoint: str
    """The gateway's URL as the container reaches it (what ``{endpoint}`` becomes in a config file)."""
    _batch: SealedBatch
    _gateway_cell: GatewayCell
    _egress_cell: EgressCell
    _account: SealAccount | None = None

    def close(self) -> SealAccount:
        """Stop serving the cell and return its account (idempotent)."""
        if self._account is None:
            usage = self._batch.gateway.close_cell(self._gateway_cell)
            egress = self._batch.proxy.close_cell(self._egress_cell)
            self._account = SealAccount(usage, egress.attempts, egress.refused)
        return self._account


class SealedBatch:
    """The batch network with the model gateway and the egress proxy on its bridge address."""

    def __init__(
        self,
        batch: str,
        *,
        profile: HarnessProfile,
        environ: Mapping[str, str],
        log_dir: Path,
        resolve: Mapping[str, str] | None = None,
        prices: Mapping[str, Price] = PRICES,
        budget: Budget | None = None,
    ) -> None:
        self.batch = batch
        self.profile = profile
        self.prices = prices
        self.budget = budget
        self.upstream = gateway_upstream(profile, environ)
        self._credentials = {v: environ[v] for v in profile.credential_env if environ.get(v)}
        self._via = environ.get("HTTPS_PROXY") or environ.get("https_proxy") or None
        self.log_dir = log_dir
        self.resolve = dict(resolve or {})
        self._net: BatchNetwork | None = None
        self._gateway: ModelGateway | None = None
        self._proxy: EgressProxy | None = None

    def start(self) -> Self:
        self._net = open_batch_network(self.batch)
        try:
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
            self._proxy = EgressProxy(
                host=self._net.address,
                resolve=self.resolve,
                unattributed_path=self.log_dir / EGRESS_UNATTRIBUTED,
            ).start()
            allow_ports(self._net, [self._gateway.port, self._proxy.port])
        except BaseException:
            self.stop()
            raise
        return self

    def stop(self) -> None:
        """Stop the gateway and the proxy, remove the firewall chain and the network (never raises)."""
        for server in (self._gateway, self._proxy):
            if server is not None:
                try:
                    server.stop()
                except Exception:
                    pass
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
        assert self._gateway is not None, "the sealed batch is not started"
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
        ``run_dir``/egress.jsonl; ``egress`` is its allow-list (``any_host``: image.network public)."""
        gateway_cell = self.gateway.open_cell(name, run_dir / RECORD_FILE, cap_usd=cap_usd)
        allow = [ANY_HOST] if any_host else list(egress)
        egress_cell = self.proxy.open_cell(name, allow, run_dir / EGRESS_LOG)
        endpoint = f"http://{self.address}:{self.gateway.port}"
        env = {
            **self.proxy.cell_env(egress_cell, self.address),
            **gateway_cell.env,
        }
        if self.profile.endpoint_env:
            env[self.profile.endpoint_env] = endpoint
        return CellSeal(env, endpoint, self, gateway_cell, egress_cell)


@dataclass(frozen=True)
class Observed:
    """A cell's cost and turns as dokimi observed them."""

    cost_usd: float | None
    cost_source: str | None
    """``gateway`` (priced by the gateway), ``harness`` (the harness's own figure) or None (unknown)."""
    turns: int | None


def observed_usage(
    account: SealAccount | None, harness_cost: float | None, harness_turns: int | None
) -> Observed:
    """The one place that decides a cell's cost and turns: the model gateway's account when the cell ran
    sealed (it forwards only what it can price, so its cost is the whole cost), else what the harness
    reported. A harness's figure is untrusted (the agent can write to what it prints); the gateway's is
    not, and a sealed cell never falls back to it."""
    if account is None:
        return Observed(harness_cost, None if harness_cost is None else "harness", harness_turns)
    return Observed(account.usage.cost_usd, "gateway", account.usage.turns)
