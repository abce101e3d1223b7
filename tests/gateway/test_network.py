"""The batch network with real containers: the agent's container reaches the model gateway and, through the
egress proxy, its task's hosts, and nothing else: not a second loopback server, not a host service on the
docker bridge, not another container. Every target is on loopback or made by the test."""

from __future__ import annotations

import json
import subprocess
import threading
import uuid
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest

from dokimi.gateway import EgressProxy, ModelGateway
from dokimi.gateway.network import BatchNetwork, allow_ports, close_batch_network, open_batch_network
from dokimi.support.mockmodel import MockModelServer

BASE_IMAGE = "dokimi-base:bookworm"

PROBE = r"""
import json, os, sys, urllib.request
def get(url, proxy=True, data=None, headers=None):
    handlers = [] if proxy else [urllib.request.ProxyHandler({})]
    try:
        req = urllib.request.Request(url, data=data, headers=headers or {})
        return urllib.request.build_opener(*handlers).open(req, timeout=5).status
    except Exception as e:
        return type(e).__name__ + ":" + str(getattr(e, "code", ""))
targets = json.loads(sys.argv[1])
out = {}
body = json.dumps({"model": "claude-haiku-4-5", "max_tokens": 9,
                   "messages": [{"role": "user", "content": "hi"}]})
out["model"] = get(targets["model"], data=body.encode(),
                   headers={"x-api-key": os.environ["ANTHROPIC_API_KEY"], "content-type": "application/json"})
for name, url in targets["urls"].items():
    out[name + " via proxy"] = get(url)
    out[name + " direct"] = get(url, proxy=False)
print(json.dumps(out))
"""


class _Hello(BaseHTTPRequestHandler):
    def log_message(self, format: str, *args: Any) -> None:
        pass

    def do_GET(self) -> None:
        self.send_response(200)
        self.send_header("Content-Length", "3")
        self.end_headers()
        self.wfile.write(b"hi\n")


def _serve(host: str) -> ThreadingHTTPServer:
    httpd = ThreadingHTTPServer((host, 0), _Hello)
    threading.Thread(target=httpd.serve_forever, daemon=True).start()
    return httpd


def _docker(*args: str, check: bool = True) -> subprocess.CompletedProcess[str]:
    return subprocess.run(["docker", *args], capture_output=True, text=True, check=check, timeout=120)


@pytest.fixture
def batch_network(docker_available: bool) -> Iterator[BatchNetwork]:
    net = open_batch_network(f"test-{uuid.uuid4().hex[:8]}")
    try:
        yield net
    finally:
        close_batch_network(net)


def _chains() -> str:
    return subprocess.run(["iptables", "-S"], capture_output=True, text=True, check=True, timeout=60).stdout


@pytest.mark.slow
def test_closing_the_batch_network_removes_it_and_its_firewall_chain(docker_available: bool) -> None:
    net = open_batch_network(f"test-{uuid.uuid4().hex[:8]}")
    assert f"-N {net.chain}" in _chains() and f"-i {net.bridge} -j {net.chain}" in _chains()
    again = open_batch_network(net.name.removeprefix("dokimi-").removesuffix("-net-internal"))
    assert again == net and _chains().count(f"-j {net.chain}") == 1  # a rerun reuses, never stacks
    close_batch_network(net)
    assert net.chain not in _chains()
    assert _docker("network", "inspect", net.name, check=False).returncode != 0


@pytest.fixture
def other_container(docker_available: bool) -> Iterator[str]:
    """A container of the test's own on a network of the test's own, serving HTTP on port 8000."""
    tag = uuid.uuid4().hex[:8]
    network, name = f"dokimi-test-other-{tag}", f"dokimi-test-other-{tag}"
    _docker("network", "create", network)
    try:
        _docker("run", "-d", "--rm", "--name", name, "--network", network, BASE_IMAGE,
                "python3", "-m", "http.server", "8000")  # fmt: skip
        address = _docker("inspect", "-f", "{{range .NetworkSettings.Networks}}{{.IPAddress}}{{end}}", name)
        yield address.stdout.strip()
    finally:
        _docker("rm", "-f", name, check=False)
        _docker("network", "rm", network, check=False)


@pytest.mark.slow
def test_the_agent_container_reaches_only_the_gateway_and_its_allowed_host(
    batch_network: BatchNetwork, other_container: str, tmp_path: Path
) -> None:
    net = batch_network
    second_loopback = _serve("127.0.0.1")
    host_wide = _serve("0.0.0.0")  # a host service on every address, the docker bridge's included
    allowed = _serve("127.0.0.1")
    try:
        with MockModelServer([{"text": "hello"}]) as mock:
            gateway = ModelGateway(mock.url, credential_vars=["ANTHROPIC_API_KEY"], credentials={},
                                   host=net.address)  # fmt: skip
            proxy = EgressProxy(host=net.address, resolve={"allowed.test": "127.0.0.1"})
            with gateway, proxy:
                allow_ports(net, [gateway.port, proxy.port])
                cell = gateway.open_cell("c", tmp_path / "gateway.jsonl")
                allowed_port = allowed.server_address[1]
                egress = proxy.open_cell("c", [f"allowed.test:{allowed_port}"], tmp_path / "egress.jsonl")
                targets = {
                    "model": f"http://{net.address}:{gateway.port}/v1/messages",
                    "urls": {
                        "allowed": f"http://allowed.test:{allowed_port}/",
                        "loopback": f"http://127.0.0.1:{second_loopback.server_address[1]}/",
                        "bridge": f"http://172.17.0.1:{host_wide.server_address[1]}/",
                        "network address": f"http://{net.address}:{host_wide.server_address[1]}/",
                        "container": f"http://{other_container}:8000/",
                    },
                }
                env = {**cell.env, **proxy.cell_env(egress, net.address)}
                env_args = [arg for k, v in env.items() for arg in ("-e", f"{k}={v}")]
                name = f"dokimi-test-probe-{uuid.uuid4().hex[:8]}"
                run = _docker("run", "--rm", "--name", name, "--network", net.name, "--cap-drop", "ALL",
                              *env_args, BASE_IMAGE, "python3", "-c", PROBE, json.dumps(targets))  # fmt: skip
                usage = gateway.close_cell(cell)
                proxy.close_cell(egress)
    finally:
        for httpd in (second_loopback, host_wide, allowed):
            httpd.shutdown()
            httpd.server_close()
    seen = json.loads(run.stdout)
    assert seen["model"] == 200 and usage.turns == 1
    assert seen["allowed via proxy"] == 200
    assert not str(seen["allowed direct"]).isdigit()  # the name means nothing without the proxy
    for name in ("loopback", "bridge", "container"):
        assert seen[f"{name} via proxy"] == "HTTPError:403", (name, seen)
        assert not str(seen[f"{name} direct"]).isdigit(), (name, seen)
    # the bridge address is NO_PROXY (the gateway is reached directly): any other port there is refused
    assert not str(seen["network address direct"]).isdigit()
    records = [json.loads(line) for line in (tmp_path / "egress.jsonl").read_text().splitlines()]
    refused = {(r["host"], r["port"]) for r in records if not r["allowed"]}
    assert ("127.0.0.1", second_loopback.server_address[1]) in refused
    assert ("172.17.0.1", host_wide.server_address[1]) in refused
    assert (other_container, 8000) in refused
    assert [r["host"] for r in records if r["allowed"]] == ["allowed.test"]
