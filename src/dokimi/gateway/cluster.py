"""A sealed batch on a cluster (docs/scale.md): one model gateway, on the driver, for the cells of every node.

The rules a cluster adds to a sealed run, and where each is kept:

* **The real credentials stay on the driver.** The model gateway runs where ``repo run`` runs, with the
  caller's environment; a node never holds the real key, and nothing of it travels through Ray (its object
  store, its logs). The nodes reach the gateway over the cluster network: :class:`ClusterGateway` is a second
  listener of the driver's :class:`~dokimi.gateway.model.ModelGateway` on an address the nodes reach.
* **Only the batch's nodes talk to it.** Every connection to that listener opens with a preamble line,
  ``DOKIMI-SEAL/1 <token> <client>`` (:func:`preamble`), holding the batch's random token; a connection
  without it is closed unanswered. The token is a capability to spend the batch's budget, not a vendor
  credential; it travels to the nodes with the batch.
* **Limits per cell, not per node.** A node's containers reach the gateway through one relay per node
  (:class:`GatewayRelay`, on the node's batch network), so every connection of a node comes from one address;
  the relay names the container it serves in the preamble (``<node>/<container address>``), and the gateway
  keys its per-client limits (connections, request bodies in memory) by that name: one container is one cell.
* **One account.** A node opens and closes each cell's gateway account through the same listener
  (:class:`ControlClient`, a connection whose preamble names ``control``): the cell's dummy credentials come
  back from :meth:`ClusterGateway.open`, its account (:class:`~dokimi.gateway.model.CellUsage`) from
  :meth:`ClusterGateway.close`. The batch budget and each cell's cap are held on the driver, in the one
  :class:`~dokimi.gateway.budget.Budget` tree, exactly as on one machine.
* **The record stays on the driver.** A cell's gateway.jsonl is written on the driver (under
  ``_eval/ray-gateway/``) and moved into the cell's run directory when the node hands the cell back
  (:meth:`ClusterGateway.finish`); the cells of a node that died are closed then too.

:class:`NodeSeal` is the other half, one per node: that node's batch network with its firewall chain, the
egress proxy, and the relay to the driver's gateway, on the node's own docker daemon. A node that cannot seal
(no root, no iptables) says why (:meth:`NodeSeal.ready`), and its cells fail with that reason.
"""

from __future__ import annotations

import hmac
import http.client
import json
import re
import secrets
import socket
import threading
from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler
from pathlib import Path
from socketserver import BaseRequestHandler
from typing import Any, Self

from dokimi.errors import DokimiError
from dokimi.gateway.boundary import read_gateway_records
from dokimi.gateway.capture_proxy import (
    MAX_CONNECTIONS,
    MAX_CONNECTIONS_PER_CLIENT,
    BoundedHTTPServer,
    ServedHTTP,
)
from dokimi.gateway.egress import EgressCell, EgressProxy, pipe
from dokimi.gateway.model import RECORD_FILE, CellUsage, GatewayCell, ModelGateway
from dokimi.gateway.network import BatchNetwork, allow_ports, close_batch_network, open_batch_network
from dokimi.gateway.prices import Usage

__all__ = [
    "CONTROL",
    "ClusterGateway",
    "ControlClient",
    "GatewayRelay",
    "NodeSeal",
    "SealUnavailable",
    "preamble",
    "read_preamble",
    "usage_from_wire",
    "usage_to_wire",
]

PREAMBLE_TAG = "DOKIMI-SEAL/1"
PREAMBLE_LIMIT = 256
"""The longest preamble line read (a longer one closes the connection)."""
PREAMBLE_TIMEOUT_S = 10.0
"""How long a new connection may take to send its preamble."""
CONTROL = "control"
"""The client name of a node's control connection (open and close a cell's account)."""
_CLIENT = re.compile(r"[A-Za-z0-9._:/\[\]-]{1,160}")
CONTROL_BODY_LIMIT = 64 * 1024
CONTROL_TIMEOUT_S = 120.0
"""A control call's longest wait (closing a cell waits for its requests in flight to settle)."""
RELAY_CONNECT_TIMEOUT_S = 15.0
RELAY_IDLE_TIMEOUT_S = 660.0
"""A relayed connection silent both ways this long is closed: longer than the gateway waits for the
upstream's first byte (a model can think for minutes)."""
RECORDS_DIR = "ray-gateway"
"""Under ``<batch>/_eval``: the gateway.jsonl of each cell a node runs, until the cell is handed back."""


class SealUnavailable(DokimiError):
    """The driver's gateway cannot be reached, or refused a control call."""


def preamble(token: str, client: str) -> bytes:
    """The first line of every connection to the cluster listener."""
    return f"{PREAMBLE_TAG} {token} {client}\r\n".encode("ascii")


def read_preamble(rfile: Any, token: str) -> str | None:
    """The client a connection names in its preamble, or None when the line is missing, too long, malformed,
    or holds another token (compared in constant time)."""
    try:
        line = rfile.readline(PREAMBLE_LIMIT + 1)
    except (OSError, ValueError):
        return None
    if len(line) > PREAMBLE_LIMIT or not line.endswith(b"\n"):
        return None
    try:
        tag, given, client = line.decode("ascii").strip().split(" ")
    except (UnicodeDecodeError, ValueError):
        return None
    if tag != PREAMBLE_TAG or not hmac.compare_digest(given.encode(), token.encode()):
        return None
    return client if _CLIENT.fullmatch(client) else None


# --- the account on the wire --------------------------------------------------------------------------------


BOUNDARY_RECORDS = 1000
"""The most records of a cell that never got a model answer sent back for the boundary (its first ones)."""
BOUNDARY_RESPONSE_BYTES = 64 * 1024
"""A record's response body is sent back for the boundary (its error message) up to this size."""


def boundary_records(path: Path) -> list[dict[str, Any]]:
    """What :func:`dokimi.gateway.boundary.infra_only_when_upstream_failed` reads of a cell's gateway.jsonl
    (status, usage, how it was charged, the error and a response body small enough to carry an error
    message), up to the first model response: a node decides a cell's infra error the same way as one
    machine, while the record itself stays on the driver."""
    kept: list[dict[str, Any]] = []
    for record in read_gateway_records(path):
        entry = {k: record.get(k) for k in ("status", "usage", "cost_basis", "error")}
        response = record.get("response")
        if len(json.dumps(response)) <= BOUNDARY_RESPONSE_BYTES:
            entry["response"] = response
        kept.append(entry)
        model_answered = isinstance(entry["status"], int) and 200 <= entry["status"] < 300
        if (model_answered and (entry["usage"] is not None or entry["cost_basis"])) or len(
            kept
        ) >= BOUNDARY_RECORDS:
            break
    return kept


def usage_to_wire(usage: CellUsage) -> dict[str, Any]:
    """A cell's account as JSON, whole (what :func:`usage_from_wire` reads back on the node)."""
    return {
        "requests": usage.requests,
        "turns": usage.turns,
        "usage": [usage.usage.input, usage.usage.output, usage.usage.cache_write, usage.usage.cache_read],
        "cost_usd": usage.cost_usd,
        "refused": usage.refused,
        "worst_case": usage.worst_case,
        "models": sorted(usage.models),
        "statuses": {str(k): v for k, v in usage.statuses.items()},
        "upstream_errors": list(usage.upstream_errors),
        "first_response_s": usage.first_response_s,
    }


def usage_from_wire(data: Mapping[str, Any]) -> CellUsage:
    tokens = [int(n) for n in data["usage"]]
    return CellUsage(
        requests=int(data["requests"]),
        turns=int(data["turns"]),
        usage=Usage(*tokens),
        cost_usd=float(data["cost_usd"]),
        refused=int(data["refused"]),
        worst_case=int(data["worst_case"]),
        models={str(m) for m in data["models"]},
        statuses=Counter({int(k): int(v) for k, v in data["statuses"].items()}),
        upstream_errors=[str(e) for e in data["upstream_errors"]],
        first_response_s=None if data["first_response_s"] is None else float(data["first_response_s"]),
    )


# --- the driver: the gateway's listener for the nodes -------------------------------------------------------


@dataclass
class _RemoteCell:
    cell: GatewayCell
    owner: str
    """The cell's run directory relative to the batch (one owner may open several cells: Ray's retry)."""
    usage: CellUsage | None = None


class ClusterGateway:
    """The driver's model gateway as the nodes reach it (see the module docstring). ``staging``: where the
    cells' records wait for their run directories (``<batch>/_eval/ray-gateway``)."""

    def __init__(
        self, gateway: ModelGateway, *, host: str, port: int = 0, staging: Path, token: str | None = None
    ) -> None:
        self.gateway = gateway
        self.token = token or secrets.token_hex(16)
        self.host = host
        self._port = port
        self.staging = staging
        self._cells: dict[str, _RemoteCell] = {}
        self._lock = threading.Lock()
        self._clients: Counter[str] = Counter()
        self.turned_away = 0
        """Relayed connections closed at once because their container held too many."""
        self._server: ServedHTTP | None = None

    def start(self) -> Self:
        if self._server is None:
            self.staging.mkdir(parents=True, exist_ok=True)
            # every node's connections come from its one address: the bound per container is kept below
            self._server = ServedHTTP(
                self.host, self._port, _cluster_handler(self), "cluster-gateway", per_client=MAX_CONNECTIONS
            )
        return self

    def stop(self) -> None:
        """Stop listening and close every cell still open (a node that never handed its cell back)."""
        server, self._server = self._server, None
        if server is not None:
            server.close()
        with self._lock:
            open_ = [c for c in self._cells.values() if c.usage is None]
        for remote in open_:
            self._close(remote)

    @property
    def port(self) -> int:
        if self._server is None:
            raise RuntimeError("the cluster gateway is not running")
        return self._server.port

    # per relayed client (one container): at most MAX_CONNECTIONS_PER_CLIENT connections at once

    def take_client(self, client: str) -> bool:
        with self._lock:
            if self._clients[client] >= MAX_CONNECTIONS_PER_CLIENT:
                self.turned_away += 1
                return False
            self._clients[client] += 1
            return True

    def release_client(self, client: str) -> None:
        with self._lock:
            self._clients[client] -= 1
            if self._clients[client] <= 0:
                del self._clients[client]

    def record_path(self, cell_id: str) -> Path:
        """Where a node's cell's gateway.jsonl is written on the driver, until the cell comes back."""
        return self.staging / cell_id / RECORD_FILE

    # the control calls

    def open(self, owner: str, name: str, cap_usd: float | None) -> tuple[str, dict[str, str]]:
        """Open a cell's account for a node: its id and the dummy credentials for its container."""
        cell_id = secrets.token_hex(8)
        record = self.record_path(cell_id)
        cell = self.gateway.open_cell(name, record, cap_usd=cap_usd)
        with self._lock:
            self._cells[cell_id] = _RemoteCell(cell, owner)
        return cell_id, dict(cell.env)

    def close(self, cell_id: str) -> CellUsage:
        """Stop serving a cell and return its account (idempotent)."""
        with self._lock:
            remote = self._cells.get(cell_id)
        if remote is None:
            raise KeyError(cell_id)
        return self._close(remote)

    def _close(self, remote: _RemoteCell) -> CellUsage:
        if remote.usage is None:
            remote.usage = self.gateway.close_cell(remote.cell)
        return remote.usage

    def finish(self, owner: str, kept: Sequence[str]) -> Path | None:
        """A cell is handed back (or lost): every account its attempts opened is closed, and the record of
        ``kept`` (the attempt whose run directory came back) is returned to be moved into it. The records of
        attempts that died stay under the staging directory."""
        with self._lock:
            mine = {i: c for i, c in self._cells.items() if c.owner == owner}
        for remote in mine.values():
            self._close(remote)
        with self._lock:
            for cell_id in mine:
                if cell_id not in kept:
                    continue
                self._cells.pop(cell_id, None)
        for cell_id in kept:
            if cell_id in mine:
                return self.record_path(cell_id)
        return None

    def control(self, method: str, path: str, body: Mapping[str, Any]) -> tuple[int, dict[str, Any]]:
        """One control request of a node: ``POST /cells`` ({owner, name, cap_usd}) opens a cell,
        ``POST /cells/<id>/close`` closes it."""
        if method != "POST":
            return 405, {"error": "control requests are POST"}
        if path == "/cells":
            owner, name, cap = body.get("owner"), body.get("name"), body.get("cap_usd")
            if not isinstance(owner, str) or not isinstance(name, str):
                return 400, {"error": "owner and name are strings"}
            if cap is not None and not isinstance(cap, (int, float)):
                return 400, {"error": "cap_usd is a number or null"}
            cell_id, env = self.open(owner, name, None if cap is None else float(cap))
            return 200, {"cell": cell_id, "env": env}
        match = re.fullmatch(r"/cells/([0-9a-f]{16})/close", path)
        if match:
            try:
                usage = self.close(match.group(1))
            except KeyError:
                return 404, {"error": f"no cell {match.group(1)}"}
            record = self.record_path(match.group(1))
            records = None if usage.turns > 0 else boundary_records(record)
            return 200, {"usage": usage_to_wire(usage), "records": records}
        return 404, {"error": f"no control path {path}"}


def _cluster_handler(cluster: ClusterGateway) -> type[BaseHTTPRequestHandler]:
    """The gateway's own request handler behind the preamble: a relayed connection is served as any client
    of the gateway (keyed by the container the relay names), a control connection by
    :meth:`ClusterGateway.control`."""
    base: Any = cluster.gateway.handler_class()

    class Handler(base):  # type: ignore[misc]
        is_control = False

        def handle(self) -> None:
            self.connection.settimeout(PREAMBLE_TIMEOUT_S)
            client = read_preamble(self.rfile, cluster.token)
            if client is None:
                self.close_connection = True
                return
            self.connection.settimeout(self.timeout)
            self.client_address = (client, 0)  # the gateway's per-client limits key by it
            if client == CONTROL:
                self.is_control = True
                super().handle()
                return
            if not cluster.take_client(client):
                try:
                    self.wfile.write(b"HTTP/1.1 503 Service Unavailable\r\nContent-Length: 0\r\n\r\n")
                except OSError:
                    pass
                return
            try:
                super().handle()
            finally:
                cluster.release_client(client)

        def _dispatch(self) -> None:
            if self.is_control:
                self._control()
            else:
                base._serve(self)

        def _control(self) -> None:
            try:
                length = int(self.headers.get("Content-Length") or "0")
            except ValueError:
                length = -1
            status, answer = 400, {"error": "a control request has a JSON body of at most 64 KB"}
            if 0 <= length <= CONTROL_BODY_LIMIT:
                try:
                    body = json.loads(self.rfile.read(length) or b"{}")
                    if isinstance(body, dict):
                        status, answer = cluster.control(self.command, self.path, body)
                except (ValueError, RecursionError):
                    pass
            data = json.dumps(answer).encode()
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        do_GET = do_POST = do_PUT = do_DELETE = do_PATCH = do_HEAD = do_OPTIONS = _dispatch

    return Handler


# --- the node: control calls and the relay ------------------------------------------------------------------


class _Preambled(http.client.HTTPConnection):
    def __init__(self, host: str, port: int, line: bytes, timeout: float) -> None:
        super().__init__(host, port, timeout=timeout)
        self._line = line

    def connect(self) -> None:
        super().connect()
        assert self.sock is not None
        self.sock.sendall(self._line)


@dataclass(frozen=True)
class ControlClient:
    """A node's calls to the driver's gateway: open and close a cell's account."""

    host: str
    port: int
    token: str

    def _call(self, path: str, body: Mapping[str, Any]) -> dict[str, Any]:
        conn = _Preambled(self.host, self.port, preamble(self.token, CONTROL), CONTROL_TIMEOUT_S)
        try:
            data = json.dumps(body).encode()
            conn.request("POST", path, body=data, headers={"Content-Type": "application/json"})
            response = conn.getresponse()
            answer = json.loads(response.read(CONTROL_BODY_LIMIT * 16) or b"{}")
        except (OSError, http.client.HTTPException, ValueError) as exc:
            raise SealUnavailable(
                f"the model gateway on the driver ({self.host}:{self.port}) cannot be reached: {exc}",
                hint="the nodes must reach the driver's gateway port (docs/scale.md, 'Sealed runs')",
            ) from None
        finally:
            conn.close()
        if response.status != 200 or not isinstance(answer, dict):
            raise SealUnavailable(f"the model gateway on the driver refused {path}: {answer}")
        return answer

    def open_cell(self, owner: str, name: str, cap_usd: float | None) -> tuple[str, dict[str, str]]:
        answer = self._call("/cells", {"owner": owner, "name": name, "cap_usd": cap_usd})
        return str(answer["cell"]), {str(k): str(v) for k, v in answer["env"].items()}

    def close_cell(self, cell_id: str) -> tuple[CellUsage, list[Mapping[str, Any]] | None]:
        """The cell's account, and (when no model answered it) the records the boundary reads."""
        answer = self._call(f"/cells/{cell_id}/close", {})
        records = answer.get("records")
        return usage_from_wire(answer["usage"]), records if isinstance(records, list) else None


class GatewayRelay:
    """On a node: the one way from its batch network to the driver's gateway. It listens on the network's
    bridge address (the node's firewall chain opens its port) and forwards each connection as it is, after
    a preamble naming the container (``<node>/<address>``). At most :data:`MAX_CONNECTIONS_PER_CLIENT`
    connections per container, :data:`MAX_CONNECTIONS` in all."""

    def __init__(self, host: str, target: tuple[str, int], *, token: str, node: str) -> None:
        self.target = target
        self.token = token
        self.node = node
        relay = self

        class Handler(BaseRequestHandler):
            def handle(self) -> None:
                relay._serve(self.request, str(self.client_address[0]))

        self._server = BoundedHTTPServer((host, 0), Handler)  # type: ignore[arg-type]
        self._thread = threading.Thread(target=self._server.serve_forever, name="gateway-relay", daemon=True)
        self._thread.start()

    @property
    def port(self) -> int:
        return int(self._server.server_address[1])

    def _serve(self, client: socket.socket, address: str) -> None:
        try:
            upstream = socket.create_connection(self.target, timeout=RELAY_CONNECT_TIMEOUT_S)
        except OSError:
            return  # the harness sees the connection closed: an upstream it could not reach
        with upstream:
            try:
                upstream.sendall(preamble(self.token, f"{self.node}/{address}"))
            except OSError:
                return
            upstream.settimeout(None)
            client.settimeout(None)
            pipe(client, upstream, RELAY_IDLE_TIMEOUT_S)

    def stop(self) -> None:
        self._server.shutdown()
        self._server.server_close()
        self._thread.join(timeout=5)


# --- the node's seal ----------------------------------------------------------------------------------------


@dataclass
class NodeSeal:
    """One node's part of a sealed batch (see the module docstring): its batch network and firewall chain,
    its egress proxy, and (on the gateway route) the relay to the driver's gateway. Made once per node and
    batch; :meth:`ready` starts it on first use and says why it cannot."""

    batch: str
    node: str
    """A short name of the node (its id's head): the network and the relay's clients are named by it."""
    gateway: tuple[str, int] | None
    """The driver's cluster listener (None: the allow-list route, no gateway)."""
    token: str
    resolve: Mapping[str, str] = field(default_factory=dict)
    _net: BatchNetwork | None = None
    _proxy: EgressProxy | None = None
    _relay: GatewayRelay | None = None
    _refused: str | None = None
    _cells: dict[str, EgressCell] = field(default_factory=dict)
    _lock: threading.Lock = field(default_factory=threading.Lock)

    def ready(self) -> dict[str, Any]:
        """Start the seal on first call; ``{"network", "endpoint"}`` of the node's cells, or
        ``{"refused": why}`` (no root, no iptables, docker refusing the network)."""
        with self._lock:
            if self._net is None and self._refused is None:
                try:
                    self._start()
                except DokimiError as exc:
                    self._refused = exc.message
                    self._stop()
            if self._refused is not None:
                return {"refused": self._refused}
            assert self._net is not None
            endpoint = None
            if self._relay is not None:
                endpoint = f"http://{self._net.address}:{self._relay.port}"
            return {"network": self._net.name, "endpoint": endpoint}

    def _start(self) -> None:
        self._net = open_batch_network(self.batch, where=self.node)
        self._proxy = EgressProxy(host=self._net.address, resolve=self.resolve).start()
        ports = [self._proxy.port]
        if self.gateway is not None:
            self._relay = GatewayRelay(self._net.address, self.gateway, token=self.token, node=self.node)
            ports.append(self._relay.port)
        allow_ports(self._net, ports)

    def open_egress(self, name: str, allow: Sequence[str], log_path: str) -> tuple[str, dict[str, str]]:
        """A container's cell on the node's egress proxy: its id and the proxy variables for it."""
        assert self._proxy is not None and self._net is not None, "the node's seal is not ready"
        cell = self._proxy.open_cell(name, allow, Path(log_path))
        with self._lock:
            self._cells[cell.token] = cell
        return cell.token, self._proxy.cell_env(cell, self._net.address)

    def close_egress(self, cell_id: str) -> tuple[int, int]:
        """Stop serving a container's cell; its attempts and refusals."""
        with self._lock:
            cell = self._cells.pop(cell_id, None)
        if cell is None or self._proxy is None:
            return 0, 0
        self._proxy.close_cell(cell)
        return cell.attempts, cell.refused

    def stop(self) -> None:
        with self._lock:
            self._stop()

    def _stop(self) -> None:
        for server in (self._relay, self._proxy):
            if server is not None:
                try:
                    server.stop()
                except Exception:
                    pass
        self._relay = self._proxy = None
        if self._net is not None:
            close_batch_network(self._net)
            self._net = None
