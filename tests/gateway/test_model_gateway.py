"""The model gateway on loopback, in front of the scripted model server and of small upstreams of the test."""

from __future__ import annotations

import http.client
import json
import socket
import struct
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import pytest

from dokimi.gateway.apis import apis_named
from dokimi.gateway.boundary import infra_only_when_upstream_failed, read_gateway_records
from dokimi.gateway.model import (
    ModelGateway,
    credential_problem,
    find_cell_key,
    swap_credentials,
)
from dokimi.support.mockmodel import DEFAULT_INPUT_TOKENS, DEFAULT_OUTPUT_TOKENS, MockModelServer


@contextmanager
def upstream(handle: Callable[[BaseHTTPRequestHandler], None]) -> Iterator[str]:
    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def log_message(self, format: str, *args: Any) -> None:
            pass

        def do_POST(self) -> None:
            length = int(self.headers.get("Content-Length") or 0)
            self.rfile.read(length)
            handle(self)

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()


def post(url: str, path: str, body: dict[str, Any], headers: dict[str, str]) -> tuple[int, bytes]:
    parts = urlsplit(url)
    conn = http.client.HTTPConnection(parts.hostname, parts.port, timeout=10)
    try:
        conn.request("POST", path, json.dumps(body), {"content-type": "application/json", **headers})
        resp = conn.getresponse()
        return resp.status, resp.read()
    finally:
        conn.close()


MESSAGE = {"model": "claude-haiku-4-5", "max_tokens": 50, "messages": [{"role": "user", "content": "hi"}]}


@pytest.mark.slow
def test_the_real_key_replaces_the_cell_dummy_upstream_and_is_never_recorded(tmp_path: Path) -> None:
    seen: list[dict[str, str]] = []

    def handle(h: BaseHTTPRequestHandler) -> None:
        seen.append({k.lower(): v for k, v in h.headers.items()})
        seen[-1]["path"] = h.path
        data = json.dumps({"model": "claude-haiku-4-5", "usage": {"input_tokens": 3, "output_tokens": 2}})
        h.send_response(200)
        h.send_header("Content-Type", "application/json")
        h.send_header("Content-Length", str(len(data)))
        h.end_headers()
        h.wfile.write(data.encode())

    with upstream(handle) as up:
        gateway = ModelGateway(
            up,
            credential_vars=["ANTHROPIC_API_KEY", "ANTHROPIC_AUTH_TOKEN"],
            credentials={"ANTHROPIC_API_KEY": "sk-real-secret"},
        )
        with gateway:
            cell = gateway.open_cell("c1", tmp_path / "gateway.jsonl")
            assert list(cell.env) == ["ANTHROPIC_API_KEY"]
            dummy = cell.env["ANTHROPIC_API_KEY"]
            status, _ = post(gateway.url, "/v1/messages?key=" + dummy, MESSAGE, {"x-api-key": dummy})
            assert status == 200
            usage = gateway.close_cell(cell)
    assert seen[0]["x-api-key"] == "sk-real-secret"
    assert "sk-real-secret" in seen[0]["path"]
    recorded = (tmp_path / "gateway.jsonl").read_text()
    assert "sk-real-secret" not in recorded and dummy not in recorded
    assert usage.turns == 1 and usage.usage.input == 3 and usage.cost_usd > 0


@pytest.mark.slow
def test_a_request_without_a_cell_key_or_with_an_ended_cells_key_is_refused_unforwarded(
    tmp_path: Path,
) -> None:
    with MockModelServer([{"text": "x"}]) as mock:
        with ModelGateway(mock.url, credential_vars=["ANTHROPIC_API_KEY"], credentials={}) as gateway:
            status, body = post(gateway.url, "/v1/messages", MESSAGE, {"x-api-key": "sk-anything"})
            assert status == 401 and b"cell key" in body
            cell = gateway.open_cell("c1", tmp_path / "g.jsonl")
            gateway.close_cell(cell)
            status, _ = post(
                gateway.url, "/v1/messages", MESSAGE, {"x-api-key": cell.env["ANTHROPIC_API_KEY"]}
            )
            assert status == 401
            assert gateway.refused == 2
        assert mock.requests == []


@pytest.mark.slow
def test_two_cells_are_accounted_apart_and_a_stream_is_recorded_with_its_usage(tmp_path: Path) -> None:
    with MockModelServer([{"text": "one"}, {"text": "two"}, {"text": "three"}]) as mock:
        with ModelGateway(mock.url, credential_vars=["ANTHROPIC_API_KEY"], credentials={}) as gateway:
            a = gateway.open_cell("a", tmp_path / "a.jsonl")
            b = gateway.open_cell("b", tmp_path / "b.jsonl")
            key_a, key_b = a.env["ANTHROPIC_API_KEY"], b.env["ANTHROPIC_API_KEY"]
            assert key_a != key_b
            status, body = post(
                gateway.url, "/v1/messages", {**MESSAGE, "stream": True}, {"x-api-key": key_a}
            )
            assert status == 200 and b"message_stop" in body
            post(gateway.url, "/v1/messages", MESSAGE, {"x-api-key": key_a})
            post(gateway.url, "/v1/messages", MESSAGE, {"x-api-key": key_b})
            usage_a, usage_b = gateway.close_cell(a), gateway.close_cell(b)
    assert (usage_a.turns, usage_b.turns) == (2, 1)
    lines = [json.loads(line) for line in (tmp_path / "a.jsonl").read_text().splitlines()]
    assert len(lines) == 2
    assert lines[0]["response"][-1] == {"type": "message_stop"}
    assert lines[0]["usage"]["output_tokens"] == DEFAULT_OUTPUT_TOKENS and lines[0]["cost_usd"] > 0


@pytest.mark.slow
def test_a_server_answering_only_529_leaves_a_cell_with_no_turn_and_an_infra_reason(tmp_path: Path) -> None:
    overloaded = {"error": {"status": 529, "type": "overloaded_error", "message": "Overloaded"}}
    with MockModelServer([overloaded] * 3) as mock:
        with ModelGateway(mock.url, credential_vars=["ANTHROPIC_API_KEY"], credentials={}) as gateway:
            cell = gateway.open_cell("c", tmp_path / "g.jsonl")
            for _ in range(3):
                status, _ = post(
                    gateway.url, "/v1/messages", MESSAGE, {"x-api-key": cell.env["ANTHROPIC_API_KEY"]}
                )
                assert status == 529
            usage = gateway.close_cell(cell)
    assert usage.turns == 0 and usage.statuses[529] == 3
    reach = infra_only_when_upstream_failed(
        read_gateway_records(tmp_path / "g.jsonl"), agent_rc=1, timed_out=False
    )
    assert reach.verdict == "infra" and "only errors" in str(reach.reason) and "3x 529" in str(reach.reason)


@pytest.mark.slow
def test_a_request_the_api_refuses_as_too_long_is_the_cells_failure_with_the_apis_reason(
    tmp_path: Path,
) -> None:
    """A 4xx the request caused (a guidance file made the prompt too long) is no outage: excusing it would
    favour the arm that breaks its own requests."""
    too_long = {
        "error": {
            "status": 400,
            "type": "invalid_request_error",
            "message": "prompt is too long: 210000 tokens > 200000 maximum",
        }
    }
    with MockModelServer([too_long]) as mock:
        with ModelGateway(mock.url, credential_vars=["ANTHROPIC_API_KEY"], credentials={}) as gateway:
            cell = gateway.open_cell("c", tmp_path / "g.jsonl")
            status, _ = post(
                gateway.url, "/v1/messages", MESSAGE, {"x-api-key": cell.env["ANTHROPIC_API_KEY"]}
            )
            gateway.close_cell(cell)
    assert status == 400
    reach = infra_only_when_upstream_failed(
        read_gateway_records(tmp_path / "g.jsonl"), agent_rc=1, timed_out=False
    )
    assert reach.verdict == "failure" and "400: prompt is too long" in str(reach.reason)


@pytest.mark.slow
def test_an_unreachable_upstream_is_an_infra_error_that_says_so(tmp_path: Path) -> None:
    with ModelGateway(
        "http://127.0.0.1:9", credential_vars=["K"], credentials={}, connect_timeout=2
    ) as gateway:
        cell = gateway.open_cell("c", tmp_path / "g.jsonl")
        status, _ = post(gateway.url, "/v1/messages", MESSAGE, {"authorization": "Bearer " + cell.env["K"]})
        usage = gateway.close_cell(cell)
    assert status == 502 and usage.turns == 0
    reach = infra_only_when_upstream_failed(
        read_gateway_records(tmp_path / "g.jsonl"), agent_rc=1, timed_out=False
    )
    assert reach.verdict == "infra" and "could not be reached" in str(reach.reason)


def test_dummy_keys_are_found_and_swapped_only_in_the_apis_credential_headers_and_query() -> None:
    dummy = "dokimi-gw-" + "ab" * 16
    headers = [
        ("Authorization", f"Bearer {dummy}"),
        ("x-goog-api-key", dummy),
        ("anthropic-beta", dummy),
        ("Accept-Encoding", "gzip, br"),
    ]
    gemini, anthropic = apis_named(["gemini"]), apis_named(["anthropic"])
    assert find_cell_key(gemini, f"/v1/x?key={dummy}", [("anthropic-beta", dummy)]) == {dummy}
    assert find_cell_key(anthropic, f"/v1/x?key={dummy}", [("anthropic-beta", dummy)]) == set()
    path, swapped = swap_credentials(gemini, f"/v1/x?key={dummy}&a=1", headers, {dummy: "REAL"})
    assert path == "/v1/x?key=REAL&a=1"
    assert swapped == [
        ("Authorization", f"Bearer {dummy}"),  # not a Gemini credential header: untouched
        ("x-goog-api-key", "REAL"),
        ("anthropic-beta", dummy),  # never swapped outside a credential header
        ("Accept-Encoding", "identity"),
    ]
    path, swapped = swap_credentials(anthropic, f"/v1/x?key={dummy}", headers, {dummy: "REAL"})
    assert path == f"/v1/x?key={dummy}" and swapped[0] == ("Authorization", "Bearer REAL")


def test_a_credential_header_holds_the_cells_dummy_and_nothing_else() -> None:
    dummy = "dokimi-gw-" + "cd" * 16
    anthropic = apis_named(["anthropic"])
    assert credential_problem(anthropic, "/", [("x-api-key", dummy)], [dummy]) is None
    assert credential_problem(anthropic, "/", [("Authorization", f"bearer  {dummy}")], [dummy]) is None
    assert (
        credential_problem(anthropic, "/", [("x-api-key", ""), ("Authorization", f"Bearer {dummy}")], [dummy])
        is None
    )
    for value in (f"{dummy} {dummy}", f"sk-other {dummy}", f"Bearer {dummy}"):
        assert credential_problem(anthropic, "/", [("x-api-key", value)], [dummy]) is not None


@pytest.mark.slow
def test_a_cell_that_spent_its_cap_gets_no_more_requests_forwarded(tmp_path: Path) -> None:
    with MockModelServer([{"text": "a"}, {"text": "b"}]) as mock:
        with ModelGateway(mock.url, credential_vars=["K"], credentials={}) as gateway:
            cell = gateway.open_cell("c", tmp_path / "g.jsonl", cap_usd=1e-9)
            first, _ = post(gateway.url, "/v1/messages", MESSAGE, {"x-api-key": cell.env["K"]})
            second, body = post(gateway.url, "/v1/messages", MESSAGE, {"x-api-key": cell.env["K"]})
            usage = gateway.close_cell(cell)
        assert len(mock.requests) == 1
    assert (first, second) == (200, 429) and b"budget" in body
    assert usage.turns == 1 and usage.statuses[429] == 1 and usage.requests == 2
    lines = [json.loads(line) for line in (tmp_path / "g.jsonl").read_text().splitlines()]
    assert [line["status"] for line in lines] == [200, 429]


@pytest.mark.slow
def test_a_huge_request_is_refused_unread_and_a_large_body_is_recorded_by_its_head(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from dokimi.gateway import model

    monkeypatch.setattr(model, "RECORD_BODY_LIMIT", 1000)
    with MockModelServer([{"text": "a"}]) as mock:
        with ModelGateway(mock.url, credential_vars=["K"], credentials={}) as gateway:
            cell = gateway.open_cell("c", tmp_path / "g.jsonl")
            parts = urlsplit(gateway.url)
            conn = http.client.HTTPConnection(parts.hostname, parts.port, timeout=10)
            conn.putrequest("POST", "/v1/messages")
            conn.putheader("x-api-key", cell.env["K"])
            conn.putheader("Content-Length", str(10 * 1024**3))  # claims 10 GB, sends nothing
            conn.endheaders()
            assert conn.getresponse().status == 413
            conn.close()
            big = {**MESSAGE, "system": "x" * 5000}
            status, _ = post(gateway.url, "/v1/messages", big, {"x-api-key": cell.env["K"]})
            gateway.close_cell(cell)
        assert len(mock.requests) == 1 and status == 200
    refused, line = [json.loads(text) for text in (tmp_path / "g.jsonl").read_text().splitlines()]
    assert refused["status"] == 413 and "request body over" in refused["error"]
    assert line["body"]["omitted"] == "body over the record limit" and line["body"]["bytes"] > 5000
    assert line["usage"]["input_tokens"] == DEFAULT_INPUT_TOKENS


def _answer(h: BaseHTTPRequestHandler, data: bytes, *, length: int | None = None, **headers: str) -> None:
    h.send_response(200)
    h.send_header("Content-Type", "application/json")
    for name, value in headers.items():
        h.send_header(name.replace("_", "-"), value)
    h.send_header("Content-Length", str(len(data) if length is None else length))
    h.end_headers()
    h.wfile.write(data)
    h.close_connection = True  # a short body then ends with the connection


@pytest.mark.slow
def test_an_answer_cut_short_or_unreadable_is_charged_its_worst_case(tmp_path: Path) -> None:
    full = json.dumps(
        {"model": "claude-haiku-4-5", "usage": {"input_tokens": 3, "output_tokens": 2}}
    ).encode()
    answers = iter([
        lambda h: _answer(h, full[:10], length=len(full)),  # the upstream hangs up mid-answer
        lambda h: _answer(h, b"\x8b\x00", Content_Encoding="br"),  # an encoding the gateway cannot read
        lambda h: _answer(h, full),
    ])  # fmt: skip
    with upstream(lambda h: next(answers)(h)) as up:
        with ModelGateway(up, credential_vars=["K"], credentials={"K": "sk-real"}) as gateway:
            cell = gateway.open_cell("c", tmp_path / "g.jsonl", cap_usd=5.0)
            with pytest.raises(http.client.IncompleteRead):
                post(gateway.url, "/v1/messages", MESSAGE, {"x-api-key": cell.env["K"]})
            statuses = [
                post(gateway.url, "/v1/messages", MESSAGE, {"x-api-key": cell.env["K"]}) for _ in "bc"
            ]
            usage = gateway.close_cell(cell)
    # the first reaches the harness cut short (http.client raises), the second is refused with 502
    assert [status for status, _ in statuses] == [502, 200]
    lines = [json.loads(line) for line in (tmp_path / "g.jsonl").read_text().splitlines()]
    assert [line["cost_basis"].split(":")[0] for line in lines] == ["worst case", "worst case", "usage"]
    assert lines[0]["cost_usd"] == lines[0]["reserved_usd"] > lines[2]["cost_usd"]
    assert usage.worst_case == 2 and usage.turns == 2
    assert usage.cost_usd == pytest.approx(sum(line["cost_usd"] for line in lines))


@pytest.mark.slow
def test_the_real_key_an_upstream_quotes_back_is_scrubbed_from_headers_body_and_record(
    tmp_path: Path,
) -> None:
    def handle(h: BaseHTTPRequestHandler) -> None:
        quoted = json.dumps({"error": {"message": f"bad key {h.headers['x-api-key']}"}}).encode()
        h.send_response(401)
        h.send_header("x-echo", h.headers["x-api-key"])
        h.send_header("Content-Length", str(len(quoted)))
        h.end_headers()
        h.wfile.write(quoted)

    with upstream(handle) as up:
        with ModelGateway(up, credential_vars=["K"], credentials={"K": "sk-real-secret"}) as gateway:
            cell = gateway.open_cell("c", tmp_path / "g.jsonl")
            parts = urlsplit(gateway.url)
            conn = http.client.HTTPConnection(parts.hostname, parts.port, timeout=10)
            conn.request("POST", "/v1/messages", json.dumps(MESSAGE), {"x-api-key": cell.env["K"]})
            resp = conn.getresponse()
            body, echo = resp.read(), resp.getheader("x-echo")
            conn.close()
            gateway.close_cell(cell)
    assert resp.status == 401 and b"sk-real-secret" not in body and b"credential removed" in body
    assert echo is not None and "sk-real-secret" not in echo
    assert "sk-real-secret" not in (tmp_path / "g.jsonl").read_text()


#: name -> (the request as sent, the status it gets, the reason logged)
HOSTILE_HEADS = {
    "absolute-form-target": (
        b"GET http://[x/ HTTP/1.1\r\nHost: a\r\n\r\n",
        400,
        "the request target 'http://[x/' is not a path: the model gateway is no proxy",
    ),
    "request-line-over-64-kib": (
        b"GET /" + b"a" * 70_000 + b" HTTP/1.1\r\n\r\n",
        414,
        "refused by the HTTP parser: request line over 65536 bytes",
    ),
    "headers-over-64-kib": (
        b"POST /v1/messages HTTP/1.1\r\n" + (b"X-A: " + b"a" * 1000 + b"\r\n") * 70 + b"\r\n",
        431,
        "refused by the HTTP parser: request headers over 65536 bytes",
    ),
    "101-headers": (
        b"POST /v1/messages HTTP/1.1\r\n" + b"X-A: a\r\n" * 101 + b"\r\n",
        431,
        "refused by the HTTP parser: got more than 100 headers",
    ),
    "no-version": (b"GARBAGE\r\n\r\n", 400, "refused by the HTTP parser: Bad request syntax ('GARBAGE')"),
    "unknown-method": (
        b"FOO /v1/messages HTTP/1.1\r\n\r\n",
        501,
        "refused by the HTTP parser: Unsupported method ('FOO')",
    ),
}


@pytest.mark.slow
@pytest.mark.parametrize("name", sorted(HOSTILE_HEADS))
def test_a_hostile_request_head_gets_a_status_line_and_one_unattributed_line_never_a_traceback(
    name: str, tmp_path: Path, capfd: pytest.CaptureFixture[str]
) -> None:
    request, status, reason = HOSTILE_HEADS[name]
    log = tmp_path / "gateway-refused.jsonl"
    with MockModelServer([{"text": "x"}]) as mock:
        with ModelGateway(mock.url, credential_vars=["K"], credentials={}, unattributed_path=log) as gateway:
            cell = gateway.open_cell("c", tmp_path / "g.jsonl")
            port = urlsplit(gateway.url).port
            with socket.create_connection(("127.0.0.1", port), timeout=10) as sock:
                sock.sendall(request)
                answer = sock.recv(4096).split(b"\r\n")[0]
            assert post(gateway.url, "/v1/messages", MESSAGE, {"x-api-key": cell.env["K"]})[0] == 200
            gateway.close_cell(cell)
    assert answer.startswith(b"HTTP/1.1 %d" % status), answer
    (line,) = [json.loads(text) for text in log.read_text().splitlines()]
    assert (line["status"], line["reason"]) == (status, reason)
    assert capfd.readouterr().err == ""


@pytest.mark.slow
def test_connections_past_32_of_a_client_are_turned_away_at_once_and_counted_in_the_log(
    tmp_path: Path,
) -> None:
    log = tmp_path / "gateway-refused.jsonl"
    with MockModelServer([]) as mock:
        with ModelGateway(mock.url, credential_vars=["K"], credentials={}, unattributed_path=log) as gateway:
            port = urlsplit(gateway.url).port
            socks = [socket.create_connection(("127.0.0.1", port), timeout=10) for _ in range(40)]
            answers = []
            for sock in socks[32:]:
                answers.append(sock.recv(4096).split(b"\r\n")[0])
            for sock in socks:
                sock.close()
    assert answers == [b"HTTP/1.1 503 Service Unavailable"] * 8
    (line,) = [json.loads(text) for text in log.read_text().splitlines()]
    assert line["status"] == 503
    assert line["reason"] == (
        "8 connection(s) from 127.0.0.1 turned away at once (past 32 from one address or 1024 in all)"
    )


@pytest.mark.slow
def test_refusals_past_the_logs_limit_are_counted_not_written(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from dokimi.gateway import capture_proxy, model

    for module in (capture_proxy, model):
        monkeypatch.setattr(module, "REFUSAL_LOG_BYTES", 1000)
    monkeypatch.setattr(model, "CELL_RECORD_LIMIT", 1000)
    log = tmp_path / "gateway-refused.jsonl"
    with MockModelServer([]) as mock:
        with ModelGateway(mock.url, credential_vars=["K"], credentials={}, unattributed_path=log) as gateway:
            cell = gateway.open_cell("c", tmp_path / "g.jsonl")
            for _ in range(30):
                assert post(gateway.url, "/v1/messages", MESSAGE, {})[0] == 401
                assert post(gateway.url, "/v1/files", MESSAGE, {"x-api-key": cell.env["K"]})[0] == 403
            usage = gateway.close_cell(cell)
    lines = [json.loads(text) for text in log.read_text().splitlines()]
    *logged, last = lines
    assert 0 < len(logged) < 30 and sum(len(json.dumps(line)) + 1 for line in logged[:-1]) < 1000
    assert (
        last["reason"] == f"{30 - len(logged)} more refusals past the log's 1000 bytes: counted, not logged"
    )
    assert gateway.refused == 30
    kept = (tmp_path / "g.jsonl").read_text().splitlines()
    assert 0 < len(kept) < 30 and usage.refused == 30


@pytest.mark.slow
def test_a_client_that_resets_is_silent_and_a_failure_of_the_gateway_is_one_line_never_a_traceback(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capfd: pytest.CaptureFixture[str]
) -> None:
    def broken(*args: Any) -> None:
        raise RuntimeError("a bug of the gateway")

    with MockModelServer([]) as mock:
        with ModelGateway(mock.url, credential_vars=["K"], credentials={}) as gateway:
            port = urlsplit(gateway.url).port
            with socket.create_connection(("127.0.0.1", port), timeout=10) as sock:
                sock.sendall(b"POST /v1/messages HTTP/1.1\r\nX-A: a")
                sock.setsockopt(
                    socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0)
                )  # closes with RST
            time.sleep(0.5)
            assert capfd.readouterr().err == ""
            monkeypatch.setattr(gateway, "_screen", broken)
            with socket.create_connection(("127.0.0.1", port), timeout=10) as sock:
                sock.sendall(b"POST /v1/messages HTTP/1.1\r\nContent-Length: 0\r\n\r\n")
                assert sock.recv(100) == b""  # no answer: the request failed
    err = capfd.readouterr().err
    assert "Traceback" not in err and err.count("\n") == 1
    assert "failed: RuntimeError: a bug of the gateway" in err
