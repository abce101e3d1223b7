"""The allow-list route of a sealed run (docs/network.md): a harness profile whose vendor is not reached by a
base URL (Bedrock, Vertex, a gateway of one's own) lists its hosts in ``egress`` and has no ``endpoint_env``.
``repo run`` seals it all the same: the batch network and its firewall chain, and the egress proxy opened to
the profile's hosts and the task's, nothing else.

The harness here is a script playing such a CLI: it signs its request to its vendor (a server on loopback,
known to the proxy under a test name) with its own credential, which on this route it holds itself, asks a
host the profile does not list, and reports its own cost. The vendor is reached, the other host refused,
both logged; the cost is the harness's, and result.json says so.
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler
from pathlib import Path
from typing import Any

import pytest

from dokimi.batch import cell_dir
from tests.helpers.git import commit
from tests.helpers.http import serving
from tests.helpers.runs import MANIFEST, dokimi_cli, run_args, tiny_repo

pytestmark = [pytest.mark.docker]

MANIFEST_PATH = ".agent-eval/repo-eval.yaml"
VENDOR = "model.dokimi-test.example"
OTHER = "other.dokimi-test.example"
TOKEN = "vendor-token-for-the-test"

PROFILE = """\
schema: harness_profile.v1
name: vendor-cli
bin: vendor-cli
version_cmd: ["{bin}", "--version"]
invoke: ["{bin}", "{prompt}", "{tools}"]
tools: {none: [], read: [], all: []}
env_allow: [VENDOR_TOKEN, VENDOR_REGION]
egress: ["%s:%d"]
trace: claude-stream-json
guidance: {names: [AGENTS.md], resolution: ancestors-of-cwd}
"""

HARNESS = """\
#!/bin/sh
if [ "$1" = "--version" ]; then echo "vendor-cli 1.0.0"; exit 0; fi
exec python3 - <<'PY'
import json, os, urllib.request
def get(url):
    token = os.environ.get("VENDOR_TOKEN", "")
    request = urllib.request.Request(url, headers={"Authorization": "Bearer " + token})
    try:
        return urllib.request.urlopen(request, timeout=120).read().decode()
    except Exception as e:
        return "refused: %%s %%s" %% (type(e).__name__, getattr(e, "code", ""))
seen = {"vendor": get("http://%s:%d/v1/answer"), "other": get("http://%s:%d/v1/answer"),
        "region": os.environ.get("VENDOR_REGION")}
if seen["vendor"] == "edit f.txt":
    open("f.txt", "w").write("after\\n")
print(json.dumps({"type": "result", "subtype": "success", "is_error": False, "num_turns": 1,
                  "result": json.dumps(seen, sort_keys=True), "total_cost_usd": 0.0123}))
PY
"""


class _Vendor(BaseHTTPRequestHandler):
    def log_message(self, format: str, *args: Any) -> None:
        pass

    def do_GET(self) -> None:
        ok = self.headers.get("Authorization") == f"Bearer {TOKEN}"
        body = b"edit f.txt" if ok else b"bad token"
        self.send_response(200 if ok else 401)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)


@pytest.fixture
def vendor() -> Iterator[int]:
    with serving(_Vendor) as port:
        yield port


def test_a_profile_with_egress_and_no_endpoint_runs_sealed_through_its_allow_list(
    docker_available: bool, tmp_path: Path, vendor: int, image_id: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    tiny = tiny_repo(tmp_path / "tiny")
    # a manifest id (so an image) of its own: other sessions on the daemon remove the tiny repository's
    manifest = MANIFEST.replace("id: runner-tiny", f"id: {image_id}")
    tiny = dataclasses.replace(tiny, eval_sha=commit(tiny.path, "own id", files={MANIFEST_PATH: manifest}))
    profile = tmp_path / "vendor-cli.yaml"
    profile.write_text(PROFILE % (VENDOR, vendor))
    harness = tmp_path / "vendor-cli"
    harness.write_text(HARNESS % (VENDOR, vendor, OTHER, vendor))
    harness.chmod(0o755)
    monkeypatch.setenv("VENDOR_TOKEN", TOKEN)
    monkeypatch.setenv("VENDOR_REGION", "test-region-1")
    out = tmp_path / "out"
    resolve = ("--egress-resolve", f"{VENDOR}=127.0.0.1")
    done = dokimi_cli(run_args(tiny, out, "allowlist", profile, harness, "--json", *resolve))
    assert done.returncode == 0, done.stderr
    assert "NOT SEALED" not in done.stderr
    cell = cell_dir(out / "allowlist", "fix_f", "guidance:raw", "m", None, 0)
    result = json.loads((cell / "result.json").read_text())
    assert result["passed"] is True and result["agent_network"] is None
    # the harness's own figure, and result.json says where it comes from; no gateway saw the calls
    cost = (result["cost_usd"], result["cost_source"], result["usage"])
    assert cost == (0.0123, "harness_allow_list", None)
    assert result["infra_error"] is False and not (cell / "gateway.jsonl").exists()
    answer = json.loads((cell / "answer.txt").read_text())
    assert answer["vendor"] == "edit f.txt" and answer["region"] == "test-region-1"
    assert answer["other"] == "refused: HTTPError 403"
    logged = [json.loads(line) for line in (cell / "egress.jsonl").read_text().splitlines()]
    assert {(r["host"], r["allowed"]) for r in logged} == {(VENDOR, True), (OTHER, False)}
    assert (result["egress_attempts"], result["egress_refused"]) == (2, 1)
    meta = json.loads((cell / "meta.json").read_text())
    assert meta["agent_network"] is None


def test_a_profile_neither_route_can_serve_is_refused_naming_what_is_missing(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from dokimi.errors import UsageError
    from dokimi.gateway.sealed import ALLOW_LIST, GATEWAY, model_route
    from dokimi.harness.profile import load_profile

    claude = load_profile("claude-code")
    assert model_route(claude, {}).kind == GATEWAY
    bedrock = model_route(claude, {"CLAUDE_CODE_USE_BEDROCK": "1"})
    assert bedrock.kind == ALLOW_LIST and "bedrock-runtime.*.amazonaws.com" in bedrock.allow
    vertex = model_route(claude, {"CLAUDE_CODE_USE_VERTEX": "1"})
    assert vertex.kind == ALLOW_LIST and "aiplatform.googleapis.com" in vertex.allow
    no_route = claude.model_copy(update={"egress": [], "endpoint_default": None})
    with pytest.raises(UsageError) as refused:
        model_route(no_route, {})
    assert "ANTHROPIC_BASE_URL is not set" in refused.value.message
    assert "lists no egress hosts" in refused.value.message
