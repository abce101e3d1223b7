"""The egress allow-list proxy on loopback: CONNECT and plain HTTP, allowed and refused, all logged."""

from __future__ import annotations

import base64
import http.client
import json
import socket
import time
from collections.abc import Iterator
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler
from pathlib import Path
from typing import Any

import pytest

from dokimi.gateway.egress import EgressProxy, address_refusal, host_allowed, parse_target
from tests.helpers.http import serving


@contextmanager
def server(text: bytes = b"from the allowed host\n") -> Iterator[int]:
    """An allowed host on loopback: a GET gets ``text``, a POST the number of body bytes it sent."""

    class Handler(BaseHTTPRequestHandler):
        def log_message(self, format: str, *args: Any) -> None:
            pass

        def _answer(self, data: bytes) -> None:
            self.send_response(200)
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def do_GET(self) -> None:
            self._answer(text)

        def do_POST(self) -> None:
            self._answer(str(len(self.rfile.read(int(self.headers.get("Content-Length") or 0)))).encode())

    with serving(Handler) as port:
        yield port


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


@pytest.mark.slow
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
    assert "not on this container's egress list" in records[1]["reason"]
    assert cell.refused == 3 and cell.attempts == 5


@pytest.mark.slow
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


@pytest.mark.slow
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


def raw_request(proxy_port: int, request: bytes) -> bytes:
    """Send ``request`` as it is (no client library tidies it) and return the status line of the answer."""
    import socket

    with socket.create_connection(("127.0.0.1", proxy_port), timeout=10) as sock:
        sock.sendall(request)
        answer = b""
        while b"\r\n" not in answer:
            data = sock.recv(4096)
            if not data:
                break
            answer += data
    return answer.split(b"\r\n", 1)[0]


#: name -> (request line and headers before the token, expected status). Every one of them was a traceback on
#: the batch's stderr and no egress.jsonl line, or reached the resolver with a name that is no host name.
MALFORMED: dict[str, tuple[bytes, int]] = {
    "port-out-of-range": (b"GET http://allowed.test:99999/ HTTP/1.1\r\n", 400),
    "port-not-a-number": (b"GET http://allowed.test:abc/ HTTP/1.1\r\n", 400),
    "port-negative": (b"GET http://allowed.test:-1/ HTTP/1.1\r\n", 400),
    "port-zero": (b"GET http://allowed.test:0/ HTTP/1.1\r\n", 400),
    "ipv6-unclosed": (b"GET http://[::1/ HTTP/1.1\r\n", 400),
    "no-host": (b"GET http://:80/ HTTP/1.1\r\n", 400),
    "connect-superscript-port": ("CONNECT allowed.test:\u00b2 HTTP/1.1\r\n".encode("latin-1"), 400),
    "connect-5000-digit-port": (b"CONNECT allowed.test:" + b"9" * 5000 + b" HTTP/1.1\r\n", 400),
    "connect-label-too-long": (b"CONNECT " + b"a" * 70 + b".test:443 HTTP/1.1\r\n", 400),
    "get-label-too-long": (b"GET http://" + b"a" * 70 + b".test/ HTTP/1.1\r\n", 400),
    "connect-nul-in-host": (b"CONNECT a\x00b.test:443 HTTP/1.1\r\n", 400),
    "get-raw-non-ascii-host": ("GET http://\u00e9.test/ HTTP/1.1\r\n".encode("latin-1"), 400),
    "content-length-not-a-number": (
        b"POST http://allowed.test:{port}/ HTTP/1.1\r\nContent-Length: abc\r\n",
        400,
    ),
    "content-length-negative": (b"POST http://allowed.test:{port}/ HTTP/1.1\r\nContent-Length: -5\r\n", 400),
    "content-length-twice": (
        b"POST http://allowed.test:{port}/ HTTP/1.1\r\nContent-Length: 1\r\nContent-Length: 2\r\n",
        400,
    ),
    "content-length-huge": (
        b"POST http://allowed.test:{port}/ HTTP/1.1\r\nContent-Length: " + b"9" * 30 + b"\r\n",
        400,
    ),
    "chunked-body": (
        b"POST http://allowed.test:{port}/ HTTP/1.1\r\nTransfer-Encoding: chunked\r\n",
        400,
    ),
    "unknown-method": (b"TRACE http://allowed.test:{port}/ HTTP/1.1\r\n", 501),
}


@pytest.mark.slow
@pytest.mark.parametrize("name", sorted(MALFORMED))
def test_a_malformed_request_gets_a_clean_answer_and_one_log_line_never_a_traceback(
    name: str, tmp_path: Path, capfd: pytest.CaptureFixture[str]
) -> None:
    request, status = MALFORMED[name]
    log = tmp_path / "egress.jsonl"
    with server() as port:
        with EgressProxy(resolve={"allowed.test": "127.0.0.1"}) as proxy:
            cell = proxy.open_cell("c", [f"allowed.test:{port}", "*"], log)
            token = base64.b64encode(f"cell:{cell.token}".encode())
            head = request.replace(b"{port}", str(port).encode())
            answer = raw_request(proxy.port, head + b"Proxy-Authorization: Basic " + token + b"\r\n\r\n")
            assert plain_get(proxy.port, f"http://allowed.test:{port}/", auth(cell.token)) == 200  # serves on
            proxy.close_cell(cell)
    assert answer.startswith(b"HTTP/1.1 %d" % status), answer
    records = sorted(read_log(log), key=lambda r: r["t"])
    assert [(r["status"], r["allowed"]) for r in records] == [(status, False), (200, True)]
    assert "Traceback" not in capfd.readouterr().err


@pytest.mark.slow
def test_what_the_standard_library_refuses_before_the_headers_is_logged_unattributed(tmp_path: Path) -> None:
    with EgressProxy(unattributed_path=tmp_path / "u.jsonl") as proxy:
        too_many = b"GET http://a.test/ HTTP/1.1\r\n" + b"X: y\r\n" * 101 + b"\r\n"
        assert raw_request(proxy.port, too_many).startswith(b"HTTP/1.1 431")
        too_large = b"GET http://a.test/ HTTP/1.1\r\n" + (b"X: " + b"y" * 1000 + b"\r\n") * 70 + b"\r\n"
        assert raw_request(proxy.port, too_large).startswith(b"HTTP/1.1 431")
        too_long = b"GET http://a.test/" + b"a" * 70_000 + b" HTTP/1.1\r\n\r\n"
        assert raw_request(proxy.port, too_long).startswith(b"HTTP/1.1 414")
        assert raw_request(proxy.port, b"GET http://a.test/ HTTP/x.y\r\n\r\n").startswith(b"HTTP/1.1 400")
    records = read_log(tmp_path / "u.jsonl")
    assert [(r["status"], r["reason"]) for r in records] == [
        (431, "got more than 100 headers"),
        (431, "request headers over 65536 bytes"),
        (414, "request line over 65536 bytes"),
        (400, "Bad request version ('HTTP/x.y')"),
    ]


@pytest.mark.slow
def test_a_plain_http_body_is_streamed_through_and_one_cut_short_is_refused_and_logged(
    tmp_path: Path,
) -> None:
    log = tmp_path / "egress.jsonl"
    with server() as port:
        with EgressProxy(resolve={"allowed.test": "127.0.0.1"}) as proxy:
            cell = proxy.open_cell("c", [f"allowed.test:{port}"], log)
            conn = http.client.HTTPConnection("127.0.0.1", proxy.port, timeout=30)
            conn.request("POST", f"http://allowed.test:{port}/", b"x" * 5_000_000, auth(cell.token))
            resp = conn.getresponse()
            assert (resp.status, resp.read()) == (200, b"5000000")
            conn.close()
            head = f"POST http://allowed.test:{port}/ HTTP/1.1\r\nContent-Length: 1000\r\n".encode()
            token = base64.b64encode(f"cell:{cell.token}".encode())
            with socket.create_connection(("127.0.0.1", proxy.port), timeout=10) as sock:
                sock.sendall(head + b"Proxy-Authorization: Basic " + token + b"\r\n\r\n" + b"y" * 10)
                sock.shutdown(socket.SHUT_WR)
                answer = sock.recv(4096).split(b"\r\n")[0]
            proxy.close_cell(cell)
    assert answer.startswith(b"HTTP/1.1 400")
    records = sorted(read_log(log), key=lambda r: r["t"])
    assert [(r["status"], r.get("bytes_up")) for r in records] == [(200, 5_000_000), (400, None)]
    assert records[1]["reason"] == "the request body ended after 10 of its 1000 bytes"


@pytest.mark.slow
def test_a_client_holds_at_most_32_connections_and_an_idle_one_is_closed(tmp_path: Path) -> None:
    unattributed = tmp_path / "u.jsonl"
    with EgressProxy(unattributed_path=unattributed, client_timeout=5.0) as proxy:
        socks = [socket.create_connection(("127.0.0.1", proxy.port), timeout=10) for _ in range(40)]
        time.sleep(0.5)
        turned_away = [s for s in socks if _closed(s)]  # about 2 s: 0.05 s for each that is still open
        time.sleep(5)
        idle_closed = [s for s in socks if _closed(s)]
        for s in socks:
            s.close()
        assert plain_get(proxy.port, "http://a.test/", {}) == 407  # served again
    assert (len(turned_away), len(idle_closed)) == (8, 40)
    reasons = [r["reason"] for r in read_log(unattributed) if r["status"] == 503]
    assert reasons == [
        "8 connection(s) from 127.0.0.1 turned away at once (past 32 from one address or 1024 in all)"
    ]


def _closed(sock: socket.socket) -> bool:
    """Whether the peer closed ``sock`` (read to its end, without waiting)."""
    sock.settimeout(0.05)
    try:
        while sock.recv(65536):
            pass
        return True
    except TimeoutError:
        return False
    except OSError:
        return True


def test_targets_and_addresses_refuse_what_is_no_host_or_port() -> None:
    assert parse_target("allowed.test:\u00b2", 443) is None
    assert parse_target("allowed.test:" + "9" * 5000, 443) is None
    assert parse_target("a\x00b:443", 443) is None
    assert parse_target("[::1]:443\n", 443) is None
    assert parse_target("[not-v6]:443", 443) is None
    assert parse_target("-bad.test:443", 443) is None
    assert parse_target("files.pythonhosted.org", 443) == ("files.pythonhosted.org", 443)
    assert parse_target("10.0.0.1:80", 443) == ("10.0.0.1", 80)


@pytest.mark.slow
def test_attempts_past_the_logs_limit_are_counted_not_written(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from dokimi.gateway import capture_proxy, egress

    for module in (capture_proxy, egress):
        monkeypatch.setattr(module, "REFUSAL_LOG_BYTES", 1000)
    unattributed, log = tmp_path / "u.jsonl", tmp_path / "egress.jsonl"
    with EgressProxy(unattributed_path=unattributed) as proxy:
        cell = proxy.open_cell("c", [], log)
        for _ in range(30):
            assert plain_get(proxy.port, "http://a.test/", {}) == 407
            assert plain_get(proxy.port, "http://a.test/", auth(cell.token)) == 403
        proxy.close_cell(cell)
    *logged, last = read_log(unattributed)
    assert 0 < len(logged) < 30
    assert (
        last["reason"] == f"{30 - len(logged)} more refusals past the log's 1000 bytes: counted, not logged"
    )
    assert 0 < len(read_log(log)) < 30 and (cell.attempts, cell.refused) == (30, 30)
