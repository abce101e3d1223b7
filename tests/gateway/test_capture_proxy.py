"""The capturing proxy (dokimi.gateway.capture_proxy) and payload capture on real reach runs.

The proxy is tested against real upstreams on loopback: the scripted model server, and tiny servers written
here for what the scripted server does not do (hold a stream open, echo headers, die mid-response). The e2e
test runs `repo reach` WITHOUT --dry-run with the real Claude Code, whose "real" endpoint (the caller's
ANTHROPIC_BASE_URL) is a scripted server reached through the proxy.
"""

from __future__ import annotations

import gzip
import http.client
import json
import os
import socket
import subprocess
import sys
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest

from dokimi.checks.reach import (
    REQUESTS_FILE,
    ReachOptions,
    plan_capture,
    run_reach,
    tokens_in_payload,
    truthy,
    upstream_proxy,
)
from dokimi.errors import UsageError
from dokimi.gateway.capture_proxy import (
    CaptureProxy,
    forwarded_request_headers,
    forwarded_response_headers,
    recorded_headers,
    redacted_path,
    upstream_target,
)
from dokimi.harness.profile import load_profile
from dokimi.schemas._base import read_document
from dokimi.schemas.reach import GuidanceReach, ReachClass
from dokimi.source import open_source
from dokimi.support.mockmodel import MockModelServer, find_tokens
from tests.helpers.git import git_repo
from tests.test_process_groups import fake_dir

__all__ = ["fake_dir"]  # the fixture, imported for use here

ROOT = Path(__file__).resolve().parents[2]
SECRET = "sk-ant-not-a-real-key-7f3a9c"


# --- tiny upstreams -----------------------------------------------------------------------------------------


@contextmanager
def upstream(handle: Callable[[BaseHTTPRequestHandler], None], *, http11: bool = True) -> Iterator[str]:
    """A local HTTP server whose every request is answered by ``handle``; yields its base URL."""

    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1" if http11 else "HTTP/1.0"

        def log_message(self, format: str, *args: Any) -> None:
            pass

        def _any(self) -> None:
            handle(self)

        do_GET = do_POST = do_HEAD = _any

    httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    httpd.daemon_threads = True
    thread = threading.Thread(target=httpd.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{httpd.server_address[1]}"
    finally:
        httpd.shutdown()
        httpd.server_close()


@contextmanager
def post(
    url: str, path: str, body: bytes, headers: dict[str, str] | None = None
) -> Iterator[http.client.HTTPResponse]:
    """POST through a fresh connection, closed on exit."""
    host, port = url.removeprefix("http://").split(":")
    conn = http.client.HTTPConnection(host, int(port), timeout=30)
    try:
        conn.request("POST", path, body=body, headers=headers or {"content-type": "application/json"})
        yield conn.getresponse()
    finally:
        conn.close()


def messages_body(text: str, *, stream: bool) -> bytes:
    return json.dumps(
        {"model": "m", "max_tokens": 64, "stream": stream, "messages": [{"role": "user", "content": text}]}
    ).encode()


def dead_port() -> int:
    """A loopback port nothing listens on (bound, then closed)."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


# --- the proxy ----------------------------------------------------------------------------------------------


@pytest.mark.slow
def test_an_sse_stream_from_the_scripted_server_passes_through_byte_for_byte() -> None:
    script = [{"text": "hello RCabcdef", "tool_use": {"name": "Bash", "input": {"command": "ls"}}}]
    body = messages_body("list tokens RC123456", stream=True)
    with MockModelServer(script) as direct:
        with post(direct.url, "/v1/messages?beta=true", body) as resp:
            expected = resp.read()
    with MockModelServer(script) as mock, CaptureProxy(mock.url) as proxy:
        with post(proxy.url, "/v1/messages?beta=true", body) as resp:
            got = resp.read()
            assert resp.status == 200 and resp.getheader("content-type") == "text/event-stream"
        assert got == expected and b"event: message_stop" in got
        assert [r.raw for r in mock.requests] == [body]
    [seen] = proxy.requests  # after stop(): every request has settled
    assert (seen.method, seen.path, seen.raw, seen.status, seen.error) == (
        "POST", "/v1/messages?beta=true", body, 200, None,
    )  # fmt: skip


@pytest.mark.slow
def test_a_non_streaming_answer_keeps_its_status_and_body_and_a_404_stays_a_404() -> None:
    with MockModelServer([{"final": "done here"}]) as mock, CaptureProxy(mock.url) as proxy:
        with post(proxy.url, "/v1/messages", messages_body("hi", stream=False)) as resp:
            assert resp.status == 200 and resp.getheader("content-length") is not None
            assert json.loads(resp.read())["content"] == [{"type": "text", "text": "done here"}]
        with post(proxy.url, "/v2/nothing", b"{}") as missing:
            assert missing.status == 404 and b"not_found_error" in missing.read()
    assert [r.status for r in proxy.requests] == [200, 404]


@pytest.mark.slow
@pytest.mark.parametrize("framing", ["close-delimited", "chunked"])
def test_each_event_reaches_the_client_before_the_upstream_has_finished(framing: str) -> None:
    """The upstream sends one event, then waits until the client has seen it: a buffering proxy would leave
    the client waiting for an event that never comes (its read times out) and the test fails."""
    seen_first, finished = threading.Event(), threading.Event()

    def handle(h: BaseHTTPRequestHandler) -> None:
        h.rfile.read(int(h.headers["Content-Length"]))
        h.send_response(200)
        h.send_header("Content-Type", "text/event-stream")
        if framing == "chunked":
            h.send_header("Transfer-Encoding", "chunked")
        else:
            h.send_header("Connection", "close")
        h.end_headers()
        for i, name in enumerate(["message_start", "message_stop"]):
            event = f"event: {name}\ndata: {{}}\n\n".encode()
            h.wfile.write(b"%x\r\n%s\r\n" % (len(event), event) if framing == "chunked" else event)
            h.wfile.flush()
            if i == 0:
                seen_first.wait(timeout=30)
        if framing == "chunked":
            h.wfile.write(b"0\r\n\r\n")
        finished.set()

    with upstream(handle) as url, CaptureProxy(url) as proxy:
        with post(proxy.url, "/v1/messages", messages_body("x", stream=True)) as resp:
            assert resp.readline() == b"event: message_start\n"
            assert not finished.is_set()
            seen_first.set()
            assert resp.read() == b"data: {}\n\nevent: message_stop\ndata: {}\n\n"
            assert finished.is_set()


@pytest.mark.slow
def test_credentials_are_forwarded_upstream_but_never_recorded(tmp_path: Path) -> None:
    received: list[dict[str, str]] = []

    def handle(h: BaseHTTPRequestHandler) -> None:
        h.rfile.read(int(h.headers["Content-Length"]))
        received.append({k.lower(): v for k, v in h.headers.items()} | {":path": h.path})
        h.send_response(200)
        h.send_header("Content-Length", "2")
        h.end_headers()
        h.wfile.write(b"{}")

    secret_headers = {
        "x-api-key": SECRET,
        "authorization": f"Bearer {SECRET}",
        "cookie": f"session={SECRET}",
        "x-goog-api-key": SECRET,
        "proxy-authorization": f"Basic {SECRET}",
    }
    capture = tmp_path / "requests.jsonl"
    with upstream(handle) as url, CaptureProxy(url, capture_path=capture) as proxy:
        with post(
            proxy.url,
            f"/v1/models/m:generate?alt=sse&key={SECRET}",
            b'{"a": 1}',
            {"content-type": "application/json", "anthropic-version": "2023-06-01", **secret_headers},
        ) as resp:
            assert resp.status == 200 and resp.read() == b"{}"
    [seen] = proxy.requests
    [got] = received
    assert got["x-api-key"] == SECRET and got["authorization"] == f"Bearer {SECRET}"
    assert got["cookie"] == f"session={SECRET}" and SECRET in got[":path"]
    assert "proxy-authorization" not in got, "a hop-by-hop header is not forwarded"
    assert seen.headers == {"anthropic-version": "2023-06-01", "content-type": "application/json"}
    assert seen.path == "/v1/models/m:generate?alt=sse&key=REDACTED"
    text = capture.read_text()
    assert json.loads(text)["body"] == {"a": 1}
    assert SECRET not in text and SECRET not in repr(seen)


@pytest.mark.slow
def test_a_dead_upstream_gives_502_with_a_short_body_at_once() -> None:
    with CaptureProxy(f"http://127.0.0.1:{dead_port()}") as proxy:
        with post(proxy.url, "/v1/messages", messages_body("x", stream=True)) as resp:
            body = resp.read()
            assert resp.status == 502 and len(body) < 300
        assert "refused" in json.loads(body)["error"]["message"]
    [seen] = proxy.requests
    assert seen.status == 502 and seen.error is not None and "refused" in seen.error
    assert seen.raw == messages_body("x", stream=True), "a failed request is still captured"


@pytest.mark.slow
def test_an_upstream_that_never_answers_gives_502_after_the_read_timeout() -> None:
    release = threading.Event()

    def handle(h: BaseHTTPRequestHandler) -> None:
        release.wait(timeout=30)

    try:
        with upstream(handle) as url, CaptureProxy(url, read_timeout=0.5) as proxy:
            with post(proxy.url, "/v1/messages", b"{}") as resp:
                assert resp.status == 502 and "timed out" in json.loads(resp.read())["error"]["message"]
    finally:
        release.set()


@pytest.mark.slow
def test_an_upstream_dying_mid_response_cuts_the_client_stream_instead_of_ending_it() -> None:
    def handle(h: BaseHTTPRequestHandler) -> None:
        h.rfile.read(int(h.headers["Content-Length"]))
        h.send_response(200)
        h.send_header("Content-Length", "100")
        h.end_headers()
        h.wfile.write(b"only ten b")
        h.wfile.flush()
        h.close_connection = True

    with upstream(handle) as url, CaptureProxy(url) as proxy:
        with post(proxy.url, "/v1/messages", b"{}") as resp, pytest.raises(http.client.IncompleteRead):
            resp.read()
    [seen] = proxy.requests
    assert seen.status == 200 and seen.error is not None


@pytest.mark.slow
def test_an_upstream_path_prefix_is_kept_and_a_gzip_body_is_captured_decoded() -> None:
    paths: list[str] = []

    def handle(h: BaseHTTPRequestHandler) -> None:
        h.rfile.read(int(h.headers["Content-Length"]))
        paths.append(h.path)
        h.send_response(204)
        h.end_headers()

    raw = b'{"input": "RC00ff00"}'
    with upstream(handle) as url, CaptureProxy(url + "/v1/") as proxy:
        with post(proxy.url, "/responses?x=1", gzip.compress(raw), {"content-encoding": "gzip"}) as resp:
            assert resp.status == 204 and resp.read() == b""
    [seen] = proxy.requests
    assert paths == ["/v1/responses?x=1"]
    assert seen.raw == raw and find_tokens(seen.raw) == ["RC00ff00"]


@pytest.mark.slow
def test_the_standalone_proxy_prints_its_url_and_refuses_a_bad_upstream(tmp_path: Path) -> None:
    env = {**os.environ, "PYTHONPATH": str(ROOT / "src")}
    bad = subprocess.run(
        [sys.executable, "-m", "dokimi.gateway.capture_proxy", "--upstream", "ftp://x"],
        capture_output=True, text=True, timeout=60, env=env,
    )  # fmt: skip
    assert bad.returncode == 2 and "capture_proxy: upstream 'ftp://x'" in bad.stderr
    with MockModelServer([{"final": "via the standalone proxy"}]) as mock:
        proc = subprocess.Popen(
            [sys.executable, "-m", "dokimi.gateway.capture_proxy", "--upstream", mock.url,
             "--capture", str(tmp_path / "c.jsonl")],
            stdout=subprocess.PIPE, text=True, env=env,
        )  # fmt: skip
        assert proc.stdout is not None
        try:
            url = proc.stdout.readline().strip()
            with post(url, "/v1/messages", messages_body("hi", stream=False)) as resp:
                assert json.loads(resp.read())["content"][0]["text"] == "via the standalone proxy"
        finally:
            proc.terminate()
            returncode = proc.wait(timeout=30)
            proc.stdout.close()
    assert returncode == 0, "SIGTERM stops it cleanly"
    assert json.loads((tmp_path / "c.jsonl").read_text())["status"] == 200


def test_the_upstream_must_be_an_http_url_without_credentials() -> None:
    for bad in ("ftp://x", "api.anthropic.com", f"https://user:{SECRET}@host", "https://h/?q=1"):
        with pytest.raises(ValueError):
            CaptureProxy(bad)


# --- the proxy's rules --------------------------------------------------------------------------------------


def test_hop_by_hop_headers_and_those_connection_names_are_not_forwarded() -> None:
    headers = [
        ("Host", "127.0.0.1:1"), ("Connection", "keep-alive, X-Private"), ("X-Private", "1"),
        ("Keep-Alive", "timeout=5"), ("Transfer-Encoding", "chunked"), ("Content-Length", "3"),
        ("Expect", "100-continue"), ("X-Api-Key", "k"), ("Accept", "*/*"),
    ]  # fmt: skip
    assert forwarded_request_headers(headers) == [("X-Api-Key", "k"), ("Accept", "*/*")]
    response = [("Content-Type", "text/event-stream"), ("Transfer-Encoding", "chunked"), ("request-id", "r")]
    assert forwarded_response_headers(response) == [
        ("Content-Type", "text/event-stream"),
        ("request-id", "r"),
    ]


def test_only_allow_listed_headers_are_recorded() -> None:
    assert recorded_headers(
        [("X-Api-Key", "k"), ("Authorization", "a"), ("Cookie", "c"), ("X-Some-Token", "t"),
         ("User-Agent", "claude-cli/2"), ("X-Stainless-Lang", "js"), ("anthropic-beta", "b")]
    ) == {"user-agent": "claude-cli/2", "x-stainless-lang": "js", "anthropic-beta": "b"}  # fmt: skip


@pytest.mark.parametrize(
    ("path", "expected"),
    [
        ("/v1/messages?beta=true", "/v1/messages?beta=true"),
        ("/m:gen?key=abc&alt=sse", "/m:gen?key=REDACTED&alt=sse"),
        ("/x?api_key=1&access_token=2&sig=3", "/x?api_key=REDACTED&access_token=REDACTED&sig=REDACTED"),
    ],
)
def test_credential_like_query_parameters_are_redacted(path: str, expected: str) -> None:
    assert redacted_path(path) == expected


def test_the_upstream_prefix_joins_the_request_path() -> None:
    assert upstream_target("", "/v1/messages?beta=true") == "/v1/messages?beta=true"
    assert upstream_target("/v1", "/responses") == "/v1/responses"


# --- reach: where payload comes from ------------------------------------------------------------------------

CLAUDE = load_profile("claude-code")


def test_a_dry_run_captures_at_the_scripted_server() -> None:
    plan = plan_capture(CLAUDE, dry_run=True, capture=True, environ={})
    assert plan.kind == "scripted_server" and plan.missing is None


def test_a_real_run_captures_through_the_proxy_to_the_callers_endpoint_else_the_profile_default() -> None:
    mine = plan_capture(CLAUDE, dry_run=False, capture=True, environ={"ANTHROPIC_BASE_URL": "http://gw:8/a/"})
    assert (mine.kind, mine.upstream) == ("proxy", "http://gw:8/a")
    default = plan_capture(CLAUDE, dry_run=False, capture=True, environ={})
    assert (default.kind, default.upstream) == ("proxy", "https://api.anthropic.com")


def test_no_capture_turns_the_proxy_off_and_says_so() -> None:
    plan = plan_capture(CLAUDE, dry_run=False, capture=False, environ={})
    assert plan.kind is None and plan.missing is not None and "--no-capture" in plan.missing


@pytest.mark.parametrize("name", ["CLAUDE_CODE_USE_BEDROCK", "CLAUDE_CODE_USE_VERTEX"])
def test_bedrock_or_vertex_selected_means_no_capture_with_the_reason(name: str) -> None:
    plan = plan_capture(CLAUDE, dry_run=False, capture=True, environ={name: "1"})
    assert plan.kind is None and plan.missing is not None and name in plan.missing
    off = plan_capture(CLAUDE, dry_run=False, capture=True, environ={name: "0"})
    assert off.kind == "proxy"


def test_a_bypass_variable_counts_only_as_the_harness_would_get_it() -> None:
    not_passed = CLAUDE.model_copy(update={"env_allow": ["PATH"]})
    plan = plan_capture(not_passed, dry_run=False, capture=True, environ={"CLAUDE_CODE_USE_BEDROCK": "1"})
    assert plan.kind == "proxy", "the harness never sees a variable env_allow does not pass"
    forced = CLAUDE.model_copy(update={"env_set": {"CLAUDE_CODE_USE_VERTEX": "true"}})
    plan = plan_capture(forced, dry_run=False, capture=True, environ={})
    assert plan.kind is None and "CLAUDE_CODE_USE_VERTEX" in (plan.missing or "")


def test_a_profile_without_endpoint_env_or_any_endpoint_is_not_captured() -> None:
    bare = CLAUDE.model_copy(update={"endpoint_env": None})
    assert "no endpoint_env" in (plan_capture(bare, dry_run=False, capture=True, environ={}).missing or "")
    nowhere = CLAUDE.model_copy(update={"endpoint_default": None})
    plan = plan_capture(nowhere, dry_run=False, capture=True, environ={})
    assert plan.kind is None and "endpoint_default" in (plan.missing or "")


def test_a_callers_endpoint_that_is_not_an_http_url_is_a_usage_error() -> None:
    with pytest.raises(UsageError, match="ANTHROPIC_BASE_URL"):
        plan_capture(CLAUDE, dry_run=False, capture=True, environ={"ANTHROPIC_BASE_URL": "api.x.com"})


def test_the_proxy_reaches_the_upstream_through_the_callers_http_proxy_like_the_harness_would() -> None:
    env = {"https_proxy": "corp:3128", "no_proxy": ".internal,localhost"}
    assert upstream_proxy("https://api.anthropic.com", env) == "http://corp:3128"
    assert upstream_proxy("https://gw.internal/v1", env) is None
    assert upstream_proxy("http://127.0.0.1:9", {"http_proxy": "http://corp:3128"}) is None
    assert upstream_proxy("http://api.x.com", env) is None, "https_proxy is for https only"


@pytest.mark.parametrize(("value", "expected"), [("1", True), ("true", True), ("0", False), ("FALSE", False),
                                                 ("", False), (None, False), ("off", False)])  # fmt: skip
def test_a_switch_variable_is_true_unless_empty_or_a_false_word(value: str | None, expected: bool) -> None:
    assert truthy(value) is expected


def test_payload_tokens_are_those_in_any_captured_body_in_seeding_order() -> None:
    seeded = ["RCaaaaaa", "RCbbbbbb", "RCcccccc"]
    assert tokens_in_payload([b"x RCcccccc", b"RCaaaaaa"], seeded) == ["RCaaaaaa", "RCcccccc"]
    assert tokens_in_payload([], seeded) == []


# --- reach: a real run through the proxy --------------------------------------------------------------------

POSTING_HARNESS = """#!/usr/bin/python3
import json, os, sys, urllib.request
if sys.argv[1] == "--version":
    print("1.0.0 (posting fake)")
    sys.exit(0)
guidance = open("AGENTS.md").read() if os.path.exists("AGENTS.md") else ""
body = json.dumps({"model": "m", "max_tokens": 64, "messages": [{"role": "user", "content": guidance}]})
headers = {"content-type": "application/json", "x-api-key": os.environ["FAKE_KEY"]}
request = urllib.request.Request(os.environ["FAKE_BASE_URL"] + "/v1/messages", data=body.encode(),
                                 headers=headers)
print(json.load(urllib.request.urlopen(request, timeout=30))["content"][0]["text"])
"""

POSTING_PROFILE = """\
schema: harness_profile.v1
name: posting-fake
bin: {bin}
version_cmd: ["{{bin}}", "--version"]
invoke: ["{{bin}}", "{{prompt}}", "{{tools}}"]
tools: {{none: [], read: [], all: []}}
env_allow: [PATH, FAKE_BASE_URL, FAKE_KEY]
endpoint_env: FAKE_BASE_URL
trace: text
guidance: {{names: [AGENTS.md], resolution: cwd}}
"""


@pytest.mark.slow
def test_a_real_run_fills_payload_from_what_passed_through_the_proxy(fake_dir: Path, tmp_path: Path) -> None:
    """A harness that sends its cwd's AGENTS.md to its endpoint and prints the model's echo; the endpoint
    (the caller's FAKE_BASE_URL) is a scripted server: payload is what that server received."""
    script = fake_dir / "posting-fake"
    script.write_text(POSTING_HARNESS)
    script.chmod(0o755)
    profile = fake_dir / "posting.yaml"
    profile.write_text(POSTING_PROFILE.format(bin=script))
    repo = git_repo(tmp_path / "repo", {"AGENTS.md": "# root\n", "sub/AGENTS.md": "# sub\n"})
    out = tmp_path / "out"
    with MockModelServer([{"echo_tokens": True}, {"echo_tokens": True}]) as mock:
        environ = {"PATH": os.environ["PATH"], "FAKE_BASE_URL": mock.url, "FAKE_KEY": SECRET}
        with open_source(str(repo)) as source:
            doc = run_reach(
                source.eval_snapshot(),
                load_profile(profile),
                globs=["**/AGENTS.md"],
                eval_dir=None,
                out=out,
                options=ReachOptions(model="m", salt="s", scenarios=["root", "cwd"], environ=environ),
            )
        received, endpoint = mock.requests, mock.url
    assert (doc.dry_run, doc.capture, doc.capture_upstream, doc.capture_missing) == (
        False, "proxy", endpoint, None,
    )  # fmt: skip
    seeded = [t for f in doc.files for t in (f.head, f.tail)]
    assert [s.name for s in doc.scenarios] == ["cwd=.", "cwd=sub"] and len(received) == 2
    for scenario, request in zip(doc.scenarios, received, strict=True):
        assert scenario.error is None and scenario.payload_captured
        assert scenario.in_payload == [t for t in seeded if t in find_tokens(request.raw)] != []
        lines = (out / scenario.trace_dir / REQUESTS_FILE).read_text().splitlines()
        assert [json.loads(line)["body"] for line in lines] == [request.body]
    for record in doc.records:
        assert record.payload is not None
        assert record.class_ is (
            ReachClass.LOADED if record.payload.head and record.payload.tail else ReachClass.NOT_LOADED
        )
    assert all(SECRET not in p.read_text() for p in out.rglob("*") if p.is_file())


@pytest.mark.slow
def test_a_real_run_with_no_capture_leaves_payload_null_and_says_why(fake_dir: Path, tmp_path: Path) -> None:
    script = fake_dir / "posting-fake"
    script.write_text(POSTING_HARNESS)
    script.chmod(0o755)
    profile = fake_dir / "posting.yaml"
    profile.write_text(POSTING_PROFILE.format(bin=script))
    repo = git_repo(tmp_path / "repo", {"AGENTS.md": "# root\n"})
    with MockModelServer([{"echo_tokens": True}]) as mock:
        proc = subprocess.run(
            [sys.executable, str(ROOT / "cli.py"), "repo", "reach", str(repo), "--model", "m", "--harness",
             str(profile), "--no-capture", "--scenarios", "root", "--out", str(tmp_path / "out")],
            capture_output=True, text=True, timeout=120,
            env={**os.environ, "PYTHONPATH": str(ROOT / "src"), "FAKE_BASE_URL": mock.url, "FAKE_KEY": "k"},
        )  # fmt: skip
        assert len(mock.requests) == 1, "the harness went straight to its endpoint"
    assert proc.returncode == 0, proc.stderr
    assert "payload not captured: turned off with --no-capture" in proc.stdout
    doc = read_document(tmp_path / "out" / "reach.json", GuidanceReach)
    assert doc.capture is None and doc.capture_missing == "turned off with --no-capture"
    assert [r.class_ for r in doc.records] == [ReachClass.LOADED] and doc.records[0].payload is None
    assert not (tmp_path / "out/traces/cwd_./requests.jsonl").exists()


def test_no_capture_with_dry_run_is_refused(tmp_path: Path) -> None:
    repo = git_repo(tmp_path / "repo", {"AGENTS.md": "# root\n"})
    with open_source(str(repo)) as source, pytest.raises(UsageError, match="--no-capture"):
        run_reach(
            source.eval_snapshot(),
            CLAUDE,
            globs=["AGENTS.md"],
            eval_dir=None,
            out=tmp_path / "out",
            options=ReachOptions(model="m", dry_run=True, capture=False),
        )


# --- e2e: the real Claude Code, its endpoint a scripted server behind the proxy -----------------------------


@pytest.mark.harness
def test_reach_without_dry_run_captures_what_claude_code_sent_to_its_real_endpoint(
    claude_bin: Path, tmp_path: Path
) -> None:
    repo = git_repo(
        tmp_path / "repo", {"AGENTS.md": "# root\n", "sub/AGENTS.md": "# sub\n", "sub/a.py": "1\n"}
    )
    out = tmp_path / "out"
    env = {k: v for k, v in os.environ.items() if not k.startswith(("CLAUDE_CODE_USE_", "ANTHROPIC_"))}
    with MockModelServer([{"echo_tokens": True}, {"echo_tokens": True}]) as mock:
        env |= {"ANTHROPIC_BASE_URL": mock.url, "ANTHROPIC_API_KEY": SECRET, "PYTHONPATH": str(ROOT / "src")}
        proc = subprocess.run(
            [sys.executable, str(ROOT / "cli.py"), "repo", "reach", str(repo), "--model", "claude-haiku-4-5",
             "--bin", str(claude_bin), "--scenarios", "root,cwd", "--timeout", "120", "--salt", "e2e",
             "--out", str(out)],
            capture_output=True, text=True, timeout=600, env=env,
        )  # fmt: skip
        received, endpoint = mock.requests, mock.url
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert f"payload captured through a proxy in front of {endpoint}" in proc.stdout
    doc = read_document(out / "reach.json", GuidanceReach)
    assert (doc.dry_run, doc.capture, doc.capture_upstream) == (False, "proxy", endpoint)
    seeded = [t for f in doc.files for t in (f.head, f.tail)]
    proxied: list[list[Any]] = []
    for scenario in doc.scenarios:
        assert scenario.error is None and scenario.payload_captured, scenario
        lines = (out / scenario.trace_dir / REQUESTS_FILE).read_text().splitlines()
        proxied.append([json.loads(line)["body"] for line in lines])
    assert [body for bodies in proxied for body in bodies] == [r.body for r in received], (
        "the proxy captured exactly what reached the endpoint, scenario after scenario"
    )
    start = 0
    for scenario, bodies in zip(doc.scenarios, proxied, strict=True):
        at_mock = received[start : start + len(bodies)]
        start += len(bodies)
        assert scenario.in_payload == tokens_in_payload([r.raw for r in at_mock], seeded)
    for record in doc.records:
        assert record.payload is not None
        assert (record.class_ is ReachClass.LOADED) == (record.payload.head and record.payload.tail)
    if doc.harness_version == "2.1.328":  # nested AGENTS.md loads in its own cwd only (docs/reach.md)
        cells = {(r.scenario, r.file): (r.payload.head, r.payload.tail) for r in doc.records if r.payload}
        assert cells[("cwd=sub", "sub/AGENTS.md")] == (True, True)
        assert cells[("cwd=.", "sub/AGENTS.md")] == (False, False)
    assert all(SECRET not in p.read_text(errors="replace") for p in out.rglob("*") if p.is_file())
