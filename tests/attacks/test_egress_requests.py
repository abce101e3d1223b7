"""Malformed requests to the egress proxy from inside a sealed cell, through ``repo run`` on the real daemon:
each gets a clean answer and an egress.jsonl line, the proxy serves the cell's next request, and nothing
reaches ``repo run``'s stderr as a traceback.

The attacker is a harness whose agent is a shell script (tests/attacks/conftest.py); its profile names an
endpoint and a credential variable, so the run is sealed (the batch network, the model gateway and the egress
proxy) without any model: the agent speaks raw HTTP to the proxy with its cell's token.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from dokimi.batch import cell_dir
from tests.attacks.conftest import PROFILE, attacker, dokimi
from tests.attacks.test_gateway_attacks import MODEL, Sampled, run_sampled, sealed_attacker
from tests.gateway.test_egress import server
from tests.helpers.runs import tiny_repo

pytestmark = pytest.mark.docker

SEALED = PROFILE + "api: [anthropic]\nendpoint_env: ATTACKER_BASE_URL\ncredential_env: [ATTACKER_API_KEY]\n"

#: request line (and headers) -> the status the proxy must answer
REQUESTS = {
    "GET http://allowed.test:99999/ HTTP/1.1": 400,
    "GET http://allowed.test:abc/ HTTP/1.1": 400,
    "GET http://[::1/ HTTP/1.1": 400,
    "CONNECT allowed.test:\u00b2 HTTP/1.1": 400,
    "CONNECT " + "a" * 70 + ".test:443 HTTP/1.1": 400,
    "POST http://allowed.test:{port}/ HTTP/1.1\r\nContent-Length: abc": 400,
    "GET http://allowed.test:{port}/ HTTP/1.1": 200,
}

AGENT = r"""python3 - <<'PY'
import base64, json, os, socket, urllib.parse
proxy = urllib.parse.urlsplit(os.environ["HTTP_PROXY"])
token = base64.b64encode(f"{proxy.username}:{proxy.password}".encode()).decode()
for line in json.loads(%r):
    with socket.create_connection((proxy.hostname, proxy.port), timeout=20) as s:
        s.sendall(line.encode("latin-1") + b"\r\nProxy-Authorization: Basic " + token.encode() + b"\r\n\r\n")
        answer = s.recv(200).split(b"\r\n")[0].decode("latin-1")
    print("ANSWER", json.dumps([line, answer]))
PY"""


@pytest.fixture
def allowed_server() -> Iterator[int]:
    with server() as port:
        yield port


def test_malformed_requests_from_a_sealed_cell_get_clean_answers_and_log_lines(
    docker_available: bool,
    tmp_path: Path,
    batch_name: str,
    allowed_server: int,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    port = allowed_server
    tiny = tiny_repo(tmp_path / "tiny", {"fix_f": {"egress": [f"allowed.test:{port}"]}})
    lines = [line.replace("{port}", str(port)) for line in REQUESTS]
    who = attacker(tmp_path / "agent", AGENT % json.dumps(lines))
    who.profile.write_text(SEALED)
    monkeypatch.setenv("ATTACKER_BASE_URL", "http://127.0.0.1:9")
    monkeypatch.setenv("ATTACKER_API_KEY", "sk-attacker-real-key")
    out = tmp_path / "out"
    args = [
        "repo", "run", tiny.source(), "--manifest", ".agent-eval/repo-eval.yaml",
        "--arm", "guidance:raw", "--model", "m", "--reps", "1", "--batch", batch_name, "--out", str(out),
        "--harness", str(who.profile), "--bin", str(who.binary), "--json",
        "--egress-resolve", "allowed.test=127.0.0.1", "--allow-unchecked", "--price", "m=1,5",
    ]  # fmt: skip
    proc = dokimi(args)
    assert proc.returncode in (0, 1), proc.stderr
    assert "Traceback" not in proc.stderr, proc.stderr
    run_dir = cell_dir(out / batch_name, "fix_f", "guidance:raw", "m", None, 0)
    stdout = (run_dir / "agent.stdout").read_text()
    answers = dict(
        json.loads(line[len("ANSWER ") :]) for line in stdout.splitlines() if line.startswith("ANSWER ")
    )
    assert {line: answers[line].split()[1] for line in lines} == {
        line: str(status) for line, status in zip(lines, REQUESTS.values(), strict=True)
    }
    egress = sorted(
        (json.loads(line) for line in (run_dir / "egress.jsonl").read_text().splitlines()),
        key=lambda r: r["t"],
    )
    assert [r["status"] for r in egress] == list(REQUESTS.values())


# --- the proxy's bounds, with the gateway's attacks (tests/attacks/test_gateway_attacks.py, item 11) ------

EGRESS_LIB = r"""
import base64
PROXY = urllib.parse.urlsplit(os.environ["HTTP_PROXY"])
TOKEN = base64.b64encode(f"{PROXY.username}:{PROXY.password}".encode())
ALLOWED = "http://allowed.test:%d/"
def through_proxy(head, body=b"", timeout=60):
    s = socket.create_connection((PROXY.hostname, PROXY.port), timeout=timeout)
    try:
        s.sendall(head + b"Proxy-Authorization: Basic " + TOKEN + b"\r\n\r\n")
        for i in range(0, len(body), 1048576):
            s.sendall(body[i : i + 1048576])
        try:
            s.shutdown(socket.SHUT_WR)
        except OSError:  # the proxy has answered and closed already
            pass
        answer = b""
        while True:  # the proxy closes every connection once it has answered
            data = s.recv(65536)
            if not data:
                break
            answer += data
        head_, _, rest = answer.partition(b"\r\n\r\n")
        return head_.split(b"\r\n")[0].decode("latin-1") + " " + rest.decode("latin-1")[:40]
    except OSError as e:
        return repr(e)
    finally:
        s.close()
time.sleep(3)
"""

EGRESS_FLOOD = r"""
socks, errors = [], []
for i in range(1500):
    try:
        socks.append(socket.create_connection((PROXY.hostname, PROXY.port), timeout=10))
    except OSError as e:
        errors.append(repr(e))
report("opened", [len(socks), errors[:3]])
time.sleep(5)
report("closed-at-once", sum(closed(s) for s in socks))
report("while-held", through_proxy(b"GET " + ALLOWED.encode() + b" HTTP/1.1\r\n"))
time.sleep(40)
report("closed-after-idle", sum(closed(s) for s in socks))
report("served-again", through_proxy(b"GET " + ALLOWED.encode() + b" HTTP/1.1\r\n"))
call("POST", "/attack-done", {})
"""

EGRESS_BODIES = r"""
import concurrent.futures
post = b"POST " + ALLOWED.encode() + b" HTTP/1.1\r\n"
flood_line = b"X-A: " + b"a" * 65000 + b"\r\n"
def head_flood(i):
    s = socket.create_connection((PROXY.hostname, PROXY.port), timeout=60)
    try:
        s.sendall(post + b"Proxy-Authorization: Basic " + TOKEN + b"\r\n")
        for _ in range(99):
            s.sendall(flood_line)
        return s.recv(200).split(b"\r\n")[0].decode()
    except OSError as e:
        return repr(e)
    finally:
        s.close()
with concurrent.futures.ThreadPoolExecutor(32) as pool:
    report("header-flood", list(pool.map(head_flood, range(32))))
size = 48 * 1048576
body = b"x" * size
def upload(i):
    return through_proxy(post + b"Content-Length: %d\r\n" % size, body, timeout=300)
with concurrent.futures.ThreadPoolExecutor(8) as pool:
    report("uploads", sorted(set(pool.map(upload, range(8)))))
del body
report("huge-length", through_proxy(post + b"Content-Length: 734003200\r\n"))
report("cut-short", through_proxy(post + b"Content-Length: 1000\r\n", b"y" * 10))
call("POST", "/attack-done", {})
"""


def sampled_egress_attack(
    tmp_path: Path, batch_name: str, monkeypatch: pytest.MonkeyPatch, code: str
) -> tuple[Sampled, Path, Path]:
    """A sealed ``repo run`` of a tiny task whose egress is a local host that counts the body bytes it gets
    (``allowed.test``), with ``code`` as its agent and ``repo run``'s memory and threads sampled: what was
    sampled, the cell's directory and the batch's."""
    with server() as port:
        tiny = tiny_repo(tmp_path / "tiny", {"fix_f": {"egress": [f"allowed.test:{port}"]}})
        who = sealed_attacker(tmp_path / "agent", EGRESS_LIB % port + code)
        monkeypatch.setenv("ANTHROPIC_BASE_URL", "http://127.0.0.1:9")  # the attack needs no model
        monkeypatch.setenv("ANTHROPIC_API_KEY", "sk-attacker-real-key")
        batch = tmp_path / "out" / batch_name
        args = [
            "repo", "run", tiny.source(), "--manifest", ".agent-eval/repo-eval.yaml",
            "--arm", "guidance:raw", "--model", MODEL, "--reps", "1", "--batch", batch_name,
            "--out", str(batch.parent), "--harness", str(who.profile), "--bin", str(who.binary), "--json",
            "--egress-resolve", "allowed.test=127.0.0.1", "--allow-unchecked",
        ]  # fmt: skip
        cell = cell_dir(batch, "fix_f", "guidance:raw", MODEL, None, 0)
        sampled = run_sampled(args, cell)
    assert sampled.proc.returncode in (0, 1), sampled.proc.stderr
    assert "Traceback" not in sampled.proc.stderr, sampled.proc.stderr
    return sampled, cell, batch


def _reports(cell: Path) -> dict[str, Any]:
    found: dict[str, Any] = {}
    for line in (cell / "agent.stdout").read_text(errors="replace").splitlines():
        if line.startswith("ATTACK "):
            found.update(json.loads(line[len("ATTACK ") :]))
    return found


@pytest.mark.slow
def test_an_idle_flood_of_the_egress_proxy_holds_32_threads_of_the_cell_and_times_out(
    docker_available: bool, tmp_path: Path, batch_name: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    sampled, cell, batch = sampled_egress_attack(tmp_path, batch_name, monkeypatch, EGRESS_FLOOD)
    before, peak = sampled.baseline_threads, sampled.max_threads
    print(f"egress proxy, threads under 1,500 idle connections: {before} -> {peak}")
    assert peak - before <= 80
    reports = _reports(cell)
    opened, _errors = reports["opened"]
    assert reports["closed-at-once"] >= opened - 32  # past 32 connections of one cell, each is turned away
    # its 32 are held by the idle ones: turned away (reset, when the 503 beats the request)
    assert reports["while-held"].startswith(("HTTP/1.1 503", "ConnectionResetError")), reports["while-held"]
    assert reports["closed-after-idle"] == opened  # and the idle ones are closed after 30 s
    assert reports["served-again"].startswith("HTTP/1.0 200")
    refused = [
        json.loads(line) for line in (batch / "_eval" / "egress-refused.jsonl").read_text().splitlines()
    ]
    (turned_away,) = [r for r in refused if r["status"] == 503]
    assert turned_away["reason"].startswith(f"{opened - 32 + 1} connection(s) from ")


@pytest.mark.slow
def test_egress_request_heads_and_bodies_are_bounded_and_bodies_streamed(
    docker_available: bool, tmp_path: Path, batch_name: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    sampled, cell, batch = sampled_egress_attack(tmp_path, batch_name, monkeypatch, EGRESS_BODIES)
    before, peak = sampled.baseline_rss_mib, sampled.max_rss_mib
    print(f"egress proxy under header floods and 8 uploads of 48 MiB: {before:.0f} MiB -> {peak:.0f} MiB")
    assert peak - before < 64, f"repo run grew by {peak - before:.0f} MiB"
    reports = _reports(cell)
    # each flood is answered 431 once 64 KiB of its headers are read (or reset, when the answer comes while
    # the client is still sending); the proxy's log is the evidence
    assert all(
        r.startswith(("HTTP/1.1 431", "ConnectionResetError", "BrokenPipe")) for r in reports["header-flood"]
    )
    refused = [
        json.loads(line) for line in (batch / "_eval" / "egress-refused.jsonl").read_text().splitlines()
    ]
    assert [r["reason"] for r in refused if r["status"] == 431] == ["request headers over 65536 bytes"] * 32
    assert reports["uploads"] == ["HTTP/1.0 200 OK 50331648"]  # every byte reached the host
    assert reports["huge-length"].startswith("HTTP/1.1 413")
    assert reports["cut-short"].startswith("HTTP/1.1 400")
    egress = [json.loads(line) for line in (cell / "egress.jsonl").read_text().splitlines()]
    assert sorted(r["status"] for r in egress) == [200] * 8 + [400, 413]
    assert "ended after 10 of its 1000 bytes" in next(r["reason"] for r in egress if r["status"] == 400)
