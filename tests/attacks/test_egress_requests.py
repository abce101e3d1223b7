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

import pytest

from dokimi.batch import cell_dir
from tests.attacks.conftest import PROFILE, attacker, dokimi
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
