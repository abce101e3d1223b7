"""The egress allow-list proxy on loopback: CONNECT and plain HTTP, allowed and refused, all logged."""

from __future__ import annotations

import base64
import http.client
import json
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest

from dokimi.gateway.egress import EgressProxy, address_refusal, host_allowed, parse_target


@contextmanager
def server(text: bytes = b"from the allowed host\n") -> Iterator[int]:
    class Handler(BaseHTTPRequestHandler):
        def log_message(self, format: str, *args: Any) -> None:
            pass

        def do_GET(self) -> None:
            self.send_response(200)
            self.send_header("Content-Length", str(len(text)))
            self.end_headers()
            self.wfile.write(text)

    httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=httpd.serve_forever, daemon=True).start()
    try:
        yield int(httpd.server_address[1])
    finally:
        httpd.shutdown()
        httpd.server_close()


def auth(token: str) -> dict[str, str]:
    return {"Proxy-Authorization": "Basic " + base64.b64encode(f"cell:{token}".encode()).decode()}


def tunnel_get(proxy_port: int, host: str, port: int, headers: dict[str, str]) -> tuple[int, bytes]:
    conn = http.client.HTTPConnection("127.0.0.1", proxy_port, timeout=10)
    conn.set_tunnel(host, port, headers=headers)
    try:
        conn.request("GET", "/")
        resp = conn.getresponse()
        return resp.status, resp.read()
    except OSError as e:  # http.client raises OSError("Tunnel connection failed: 403 ...")
        return int(str(e).split("failed: ")[1].split()[0]), b""
    finally:
        conn.close()


def plain_get(proxy_port: int, url: str, headers: dict[str, str]) -> int:
    conn = http.client.HTTPConnection("127.0.0.1", proxy_port, timeout=10)
    try:
        conn.request("GET", url, headers=headers)
        return conn.getresponse().status
    finally:
        conn.close()


def read_log(path: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in path.read_text().splitlines()]


def test_an_allowed_name_is_reached_through_connect_and_another_host_is_refused_and_logged(
    tmp_path: Path,
) -> None:
    log = tmp_path / "egress.jsonl"
    with server() as allowed_port, server(b"secret\n") as other_port:
        with EgressProxy(resolve={"allowed.test": "127.0.0.1"}) as proxy:
            cell = proxy.open_cell("c", [f"allowed.test:{allowed_port}"], log)
            headers = auth(cell.token)
            assert tunnel_get(proxy.port, "allowed.test", allowed_port, headers) == (
                200,
                b"from the allowed host\n",
            )
            assert tunnel_get(proxy.port, "127.0.0.1", other_port, headers)[0] == 403
            assert tunnel_get(proxy.port, "allowed.test", other_port, headers)[0] == 403
            assert plain_get(proxy.port, f"http://allowed.test:{allowed_port}/", headers) == 200
            assert plain_get(proxy.port, f"http://127.0.0.1:{other_port}/", headers) == 403
            proxy.close_cell(cell)
    records = sorted(read_log(log), key=lambda r: r["t"])  # written as they end, ordered by arrival
    assert [(r["host"], r["allowed"]) for r in records] == [
        ("allowed.test", True),
        ("127.0.0.1", False),
        ("allowed.test", False),
        ("allowed.test", True),
        ("127.0.0.1", False),
    ]
    assert records[0]["bytes_down"] > 0 and records[0]["entry"] == f"allowed.test:{allowed_port}"
    assert "not on the task's egress list" in records[1]["reason"]
    assert cell.refused == 3 and cell.attempts == 5


def test_a_request_without_a_cell_token_is_refused_407_and_logged_unattributed(tmp_path: Path) -> None:
    with server() as port:
        with EgressProxy(
            resolve={"allowed.test": "127.0.0.1"}, unattributed_path=tmp_path / "u.jsonl"
        ) as proxy:
            proxy.open_cell("c", [f"allowed.test:{port}"], tmp_path / "egress.jsonl")
            assert tunnel_get(proxy.port, "allowed.test", port, {})[0] == 407
            assert tunnel_get(proxy.port, "allowed.test", port, auth("0" * 32))[0] == 407
    assert len(read_log(tmp_path / "u.jsonl")) == 2
    assert not (tmp_path / "egress.jsonl").exists()


def test_an_allowed_name_that_resolves_to_loopback_is_refused_unless_mapped(tmp_path: Path) -> None:
    with server() as port:
        with EgressProxy() as proxy:
            cell = proxy.open_cell(
                "c", [f"localhost.localdomain:{port}", f"localhost:{port}"], tmp_path / "e.jsonl"
            )
            assert tunnel_get(proxy.port, "localhost", port, auth(cell.token))[0] == 403
    (record,) = read_log(tmp_path / "e.jsonl")
    assert "not a public address" in record["reason"]


@pytest.mark.parametrize(
    ("allow", "host", "port", "plain", "entry"),
    [
        (["pypi.org"], "pypi.org", 443, False, "pypi.org"),
        (["pypi.org"], "pypi.org", 80, False, None),
        (["pypi.org"], "pypi.org", 80, True, "pypi.org"),
        (["*.pythonhosted.org"], "files.pythonhosted.org", 443, False, "*.pythonhosted.org"),
        (["*.pythonhosted.org"], "a.b.pythonhosted.org", 443, False, None),
        (["allowed.test:8080"], "allowed.test", 8080, False, "allowed.test:8080"),
        (["allowed.test:8080"], "allowed.test", 443, False, None),
        (["pypi.org"], "evil-pypi.org", 443, False, None),
    ],
)
def test_an_entry_matches_whole_labels_and_its_port(
    allow: list[str], host: str, port: int, plain: bool, entry: str | None
) -> None:
    assert host_allowed(allow, host, port, plain_http=plain) == entry


def test_targets_and_addresses() -> None:
    assert parse_target("Example.ORG:443", 443) == ("example.org", 443)
    assert parse_target("[::1]:8080", 443) == ("::1", 8080)
    assert parse_target("host:notaport", 443) is None
    assert address_refusal("127.0.0.1") is not None
    assert address_refusal("172.17.0.1") is not None
    assert address_refusal("169.254.169.254") is not None
    assert address_refusal("151.101.0.223") is None
