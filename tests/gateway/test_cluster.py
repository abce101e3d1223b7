"""The driver's model gateway as a cluster's nodes reach it (dokimi.gateway.cluster), on loopback: a node's
relay and control calls against a real gateway in front of the scripted model server.

- a cell opened through the control connection gets dummies; a request through the relay reaches the
  upstream with the real key, is recorded on the driver, and the account comes back whole;
- the batch budget and the cell's cap are the driver's: a node's cell is refused once its cap is spent;
- a connection without the batch's preamble (no line, another token, a control call from a container's
  side) is closed unanswered and reaches nothing;
- the per-client bound keys by the container the relay names, not by the relay's one address.
"""

from __future__ import annotations

import http.client
import json
import socket
import time
from pathlib import Path

import pytest

from dokimi.gateway.budget import Budget
from dokimi.gateway.cluster import (
    CONTROL,
    ClusterGateway,
    ControlClient,
    GatewayRelay,
    preamble,
    usage_from_wire,
    usage_to_wire,
)
from dokimi.gateway.model import ModelGateway
from dokimi.support.mockmodel import MockModelServer

REAL_KEY = "sk-ant-cluster-" + "q" * 24
MESSAGE = {"model": "claude-haiku-4-5", "max_tokens": 50, "messages": [{"role": "user", "content": "hi"}]}


def _post(port: int, path: str, body: dict[str, object], headers: dict[str, str]) -> tuple[int, bytes]:
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=20)
    try:
        conn.request("POST", path, json.dumps(body), {"content-type": "application/json", **headers})
        resp = conn.getresponse()
        return resp.status, resp.read()
    finally:
        conn.close()


@pytest.fixture
def cluster(tmp_path: Path):  # type: ignore[no-untyped-def]
    script = [{"final": f"answer {i}"} for i in range(20)]
    with MockModelServer(script, api_key=REAL_KEY) as vendor:
        gateway = ModelGateway(
            vendor.url,
            credential_vars=["ANTHROPIC_API_KEY"],
            credentials={"ANTHROPIC_API_KEY": REAL_KEY},
            apis=["anthropic"],
            budget=Budget(5.0, name="the batch"),
        ).start()
        listener = ClusterGateway(gateway, host="127.0.0.1", staging=tmp_path / "staging").start()
        relay = GatewayRelay("127.0.0.1", ("127.0.0.1", listener.port), token=listener.token, node="n1")
        try:
            yield vendor, gateway, listener, relay
        finally:
            relay.stop()
            listener.stop()
            gateway.stop()


def test_a_node_cell_reaches_the_upstream_with_the_real_key_and_its_account_comes_back(cluster, tmp_path):  # type: ignore[no-untyped-def]
    vendor, _gateway, listener, relay = cluster
    control = ControlClient("127.0.0.1", listener.port, listener.token)
    cell_id, env = control.open_cell("t/arm/m/default/rep0", "t/arm/m/default/rep0:agent", 1.0)
    dummy = env["ANTHROPIC_API_KEY"]
    assert dummy.startswith("dokimi-gw-") and REAL_KEY not in json.dumps(env)

    for _ in range(2):
        status, body = _post(relay.port, "/v1/messages", MESSAGE, {"x-api-key": dummy})
        assert status == 200, body
    assert [r.authenticated for r in vendor.requests] == [True, True]

    usage, records = control.close_cell(cell_id)
    assert records is None  # a model answered: the boundary needs no record
    assert usage.turns == 2 and usage.cost_usd > 0 and usage.statuses == {200: 2}
    assert usage_from_wire(usage_to_wire(usage)) == usage
    # the dummy is dead once the cell is closed, and the record waits on the driver for the run directory
    status, _ = _post(relay.port, "/v1/messages", MESSAGE, {"x-api-key": dummy})
    assert status == 401
    record = listener.finish("t/arm/m/default/rep0", [cell_id])
    assert record is not None and record.is_file()
    lines = [json.loads(line) for line in record.read_text().splitlines()]
    assert len(lines) == 2 and REAL_KEY not in record.read_text()


def test_the_cap_of_a_node_cell_is_held_on_the_driver(cluster):  # type: ignore[no-untyped-def]
    _vendor, gateway, listener, relay = cluster
    control = ControlClient("127.0.0.1", listener.port, listener.token)
    cell_id, env = control.open_cell("c", "c:agent", 1e-9)
    key = {"x-api-key": env["ANTHROPIC_API_KEY"]}
    statuses = [_post(relay.port, "/v1/messages", MESSAGE, key)[0] for _ in range(3)]
    assert statuses[0] == 200 and statuses[1:] == [429, 429]
    assert control.close_cell(cell_id)[0].turns == 1
    assert gateway.budget.spent_usd > 0  # the batch's budget counted it


def _raw(port: int, data: bytes) -> bytes:
    with socket.create_connection(("127.0.0.1", port), timeout=15) as sock:
        sock.sendall(data)
        chunks = []
        while True:
            try:
                chunk = sock.recv(65536)
            except OSError:
                break
            if not chunk:
                break
            chunks.append(chunk)
        return b"".join(chunks)


@pytest.mark.parametrize(
    "first_line",
    [
        b"",  # straight to HTTP
        b"DOKIMI-SEAL/1 " + b"0" * 32 + b" n1/10.0.0.2\r\n",  # another batch's token
        b"DOKIMI-SEAL/1 x\r\n",  # malformed
        b"DOKIMI-SEAL/1 " + b"a" * 400 + b"\r\n",  # too long
    ],
)
def test_a_connection_without_the_batch_preamble_is_closed_unanswered(cluster, first_line):  # type: ignore[no-untyped-def]
    vendor, _gateway, listener, _relay = cluster
    request = b"POST /cells HTTP/1.1\r\nHost: x\r\nContent-Length: 2\r\n\r\n{}"
    assert _raw(listener.port, first_line + request) == b""
    assert vendor.requests == []


def test_the_control_calls_need_the_control_preamble_which_no_container_can_send(cluster):  # type: ignore[no-untyped-def]
    _vendor, _gateway, listener, relay = cluster
    # through the relay a container's bytes come after the relay's own preamble: a control line is data
    forged = preamble(listener.token, CONTROL) + b"POST /cells HTTP/1.1\r\nContent-Length: 2\r\n\r\n{}"
    answer = _raw(relay.port, forged)
    assert b'"cell"' not in answer
    # and the real control connection opens a cell
    control = ControlClient("127.0.0.1", listener.port, listener.token)
    assert control.open_cell("o", "o:agent", None)[0]


def test_connections_are_bounded_per_container_not_per_relay(cluster):  # type: ignore[no-untyped-def]
    from dokimi.gateway.capture_proxy import MAX_CONNECTIONS_PER_CLIENT

    _vendor, _gateway, listener, _relay = cluster
    held = []
    try:
        for _ in range(MAX_CONNECTIONS_PER_CLIENT):
            sock = socket.create_connection(("127.0.0.1", listener.port), timeout=10)
            sock.sendall(preamble(listener.token, "n1/10.0.0.2"))
            held.append(sock)
        deadline = time.monotonic() + 10
        while sum(listener._clients.values()) < MAX_CONNECTIONS_PER_CLIENT and time.monotonic() < deadline:
            time.sleep(0.05)
        # one more from the same container is turned away; another container of the same node is served
        assert _raw(listener.port, preamble(listener.token, "n1/10.0.0.2")).startswith(b"HTTP/1.1 503")
        assert listener.turned_away == 1
        other = preamble(listener.token, "n1/10.0.0.3") + b"GET /v1/models HTTP/1.1\r\nHost: x\r\n\r\n"
        assert _raw(listener.port, other).startswith(b"HTTP/1.1 401")
    finally:
        for sock in held:
            sock.close()


def test_a_node_decides_an_infra_error_from_what_the_driver_sends_back(tmp_path: Path) -> None:
    """The record stays on the driver; the boundary's view of it travels back when no model answered."""
    from dokimi.gateway.boundary import infra_only_when_upstream_failed

    overloaded = {"error": {"status": 529, "type": "overloaded_error", "message": "Overloaded"}}
    with MockModelServer([overloaded] * 3, api_key=REAL_KEY) as vendor:
        gateway = ModelGateway(
            vendor.url,
            credential_vars=["ANTHROPIC_API_KEY"],
            credentials={"ANTHROPIC_API_KEY": REAL_KEY},
            apis=["anthropic"],
        ).start()
        listener = ClusterGateway(gateway, host="127.0.0.1", staging=tmp_path / "staging").start()
        relay = GatewayRelay("127.0.0.1", ("127.0.0.1", listener.port), token=listener.token, node="n1")
        try:
            control = ControlClient("127.0.0.1", listener.port, listener.token)
            cell_id, env = control.open_cell("c", "c:agent", 1.0)
            for _ in range(2):
                assert (
                    _post(relay.port, "/v1/messages", MESSAGE, {"x-api-key": env["ANTHROPIC_API_KEY"]})[0]
                    == 529
                )
            usage, records = control.close_cell(cell_id)
        finally:
            relay.stop()
            listener.stop()
            gateway.stop()
    assert usage.turns == 0 and records is not None and [r["status"] for r in records] == [529, 529]
    reach = infra_only_when_upstream_failed(records, agent_rc=1, timed_out=False, model_turns=0)
    assert reach.verdict == "infra" and "529" in (reach.reason or "")
