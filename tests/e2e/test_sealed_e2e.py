"""Sealed real runs end to end: ``repo run`` of the bundled example, not ``--dry-run`` and without
``--agent-network``, with the real Claude Code CLI and the scripted model server on host loopback playing the
vendor API (ANTHROPIC_BASE_URL points at it, as a user's own gateway would).

The harness reaches the model only through dokimi's gateway; a command the scripted agent runs inside its
container fails to reach a second loopback server, a host service on the docker bridge address and another
container, and each attempt through the proxy is in egress.jsonl. A server that answers only 529 makes every
cell an infra error, which a rerun after the server recovers fills, and the comparison then equals that of a
batch that never had errors; one that answers 400 "prompt is too long" makes a graded failure with its reason;
and one overloaded for one arm only is flagged by compare. Every network target is on loopback or made by the
test.
"""

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

from dokimi.analysis.report import build_report
from dokimi.batch import cell_dir, load_batch
from dokimi.support.mockmodel import MockModelServer
from tests.helpers.runs import dokimi_cli

pytestmark = [pytest.mark.docker, pytest.mark.harness]

TASK = "fix_power_assoc"
MODEL = "claude-haiku-4-5"
REAL_KEY = "sk-ant-test-" + "k" * 24
BASE_IMAGE = "dokimi-base:bookworm"

PROBE = r"""python3 - <<'PY'
import json, os, urllib.request
targets = json.loads(%r)
def get(url, proxy):
    handlers = [] if proxy else [urllib.request.ProxyHandler({})]
    try:
        return urllib.request.build_opener(*handlers).open(url, timeout=5).status
    except Exception as e:
        return type(e).__name__ + ":" + str(getattr(e, "code", ""))
seen = {"key_is_dummy": os.environ.get("ANTHROPIC_API_KEY", "").startswith("dokimi-gw-")}
for name, url in targets.items():
    seen[name] = [get(url, True), get(url, False)]
print("PROBE " + json.dumps(seen, sort_keys=True))
PY"""


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


def docker_bridge_address() -> str:
    """The host's address on docker's default bridge (docker0)."""
    argv = ["ip", "-4", "-o", "addr", "show", "dev", "docker0"]
    shown = subprocess.run(argv, capture_output=True, text=True, check=False)
    words = shown.stdout.split()
    assert "inet" in words, shown.stdout + shown.stderr
    return words[words.index("inet") + 1].split("/")[0]


@pytest.fixture
def real_env(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in ("ANTHROPIC_AUTH_TOKEN", "CLAUDE_CODE_USE_BEDROCK", "CLAUDE_CODE_USE_VERTEX"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("ANTHROPIC_API_KEY", REAL_KEY)


@pytest.fixture
def other_container(docker_available: bool) -> Iterator[str]:
    tag = uuid.uuid4().hex[:8]
    network, name = f"dokimi-test-e2e-{tag}", f"dokimi-test-e2e-{tag}"
    _docker("network", "create", network)
    try:
        _docker("run", "-d", "--rm", "--name", name, "--network", network, BASE_IMAGE,
                "python3", "-m", "http.server", "8000")  # fmt: skip
        address = _docker("inspect", "-f", "{{range .NetworkSettings.Networks}}{{.IPAddress}}{{end}}", name)
        yield address.stdout.strip()
    finally:
        _docker("rm", "-f", name, check=False)
        _docker("network", "rm", network, check=False)


def run_args(example: Path, out: Path, batch: str, claude_bin: Path, *extra: str) -> list[str]:
    return [
        "repo", "run", f"{example}@HEAD", "--manifest", ".agent-eval/repo-eval.yaml", "--task", TASK,
        "--model", MODEL, "--reps", "1", "--batch", batch, "--out", str(out), "--bin", str(claude_bin),
        "--json", "--allow-unchecked", *extra,
    ]  # fmt: skip


def test_a_real_run_reaches_its_model_only_through_the_gateway_and_nothing_else(
    docker_available: bool,
    claude_bin: Path,
    example: Path,
    other_container: str,
    real_env: None,
    monkeypatch: pytest.MonkeyPatch,
    tmp_path: Path,
) -> None:
    loopback, host_wide = _serve("127.0.0.1"), _serve("0.0.0.0")
    bridge = docker_bridge_address()
    targets = {
        "loopback": f"http://127.0.0.1:{loopback.server_address[1]}/",
        "bridge": f"http://{bridge}:{host_wide.server_address[1]}/",
        "container": f"http://{other_container}:8000/",
    }
    probe = {"command": PROBE % json.dumps(targets), "description": "probe"}
    script = [{"tool_use": {"name": "Bash", "input": probe}}, {"final": "probed"}]
    try:
        with MockModelServer(script) as vendor:
            monkeypatch.setenv("ANTHROPIC_BASE_URL", vendor.url)
            out = tmp_path / "runs"
            proc = dokimi_cli(run_args(example, out, "sealed", claude_bin, "--arm", "guidance:raw"))
            vendor_requests = vendor.requests
    finally:
        for httpd in (loopback, host_wide):
            httpd.shutdown()
            httpd.server_close()
    assert proc.returncode == 0, proc.stderr
    assert "--agent-network" not in proc.stderr
    run_dir = cell_dir(out / "sealed", TASK, "guidance:raw", MODEL, None, 0)
    result = json.loads((run_dir / "result.json").read_text())
    assert result["infra_error"] is False and result["agent_network"] is None
    assert result["cost_source"] == "gateway" and result["cost_usd"] > 0
    assert result["usage"]["turns"] == result["turns"] >= 2 and result["usage"]["models"] == [MODEL]

    # every request the vendor saw came through the gateway, recorded, never with the real key
    recorded = [json.loads(line) for line in (run_dir / "gateway.jsonl").read_text().splitlines()]
    assert len(recorded) == len(vendor_requests) >= 2
    for path in run_dir.rglob("*"):
        if path.is_file() and not path.is_symlink():
            assert REAL_KEY.encode() not in path.read_bytes(), path

    # the agent's command: the dummy key only, and no way out but the proxy, which refused and logged
    output = next(
        e["output"] for e in map(json.loads, (run_dir / "events.jsonl").read_text().splitlines())
        if e["kind"] == "command"
    )  # fmt: skip
    seen = json.loads(output.split("PROBE ", 1)[1].splitlines()[0])
    assert seen["key_is_dummy"] is True
    for name in targets:
        via_proxy, direct = seen[name]
        assert via_proxy == "HTTPError:403", (name, seen)
        assert not str(direct).isdigit(), (name, seen)
    egress = [json.loads(line) for line in (run_dir / "egress.jsonl").read_text().splitlines()]
    refused = {f"http://{r['host']}:{r['port']}/" for r in egress if not r["allowed"]}
    assert set(targets.values()) <= refused
    assert result["egress_refused"] == len(refused) and result["egress_attempts"] == len(egress)
    assert build_report(load_batch(out / "sealed")).arms[0].egress_refused == len(refused)


def profile_with_one_retry(tmp_path: Path) -> Path:
    """The built-in claude-code profile with CLAUDE_CODE_MAX_RETRIES=1, so a 529-only API ends a cell in
    seconds rather than after ten backed-off retries."""
    from dokimi.harness.profiles import __file__ as profiles_init

    text = (Path(profiles_init).parent / "claude-code.yaml").read_text()
    marker = "env_set:\n"
    assert marker in text
    path = tmp_path / "claude-one-retry.yaml"
    path.write_text(text.replace(marker, marker + '  CLAUDE_CODE_MAX_RETRIES: "1"\n', 1))
    return path


def test_an_api_answering_only_529_makes_infra_errors_that_a_rerun_fills(
    docker_available: bool,
    claude_bin: Path,
    example: Path,
    real_env: None,
    monkeypatch: pytest.MonkeyPatch,
    tmp_path: Path,
) -> None:
    out = tmp_path / "runs"
    profile = profile_with_one_retry(tmp_path)
    arms = ("--arm", "guidance:none,guidance:raw", "--harness", str(profile), "-j", "2")
    overloaded = {"error": {"status": 529, "type": "overloaded_error", "message": "Overloaded"}}
    with MockModelServer([overloaded] * 200) as vendor:
        monkeypatch.setenv("ANTHROPIC_BASE_URL", vendor.url)
        down = dokimi_cli(run_args(example, out, "noisy", claude_bin, *arms))
    assert down.returncode == 1, down.stderr  # the batch is not complete: its cells must run again
    assert "infra error" in down.stderr
    assert json.loads(down.stdout)["infra_errors"] == 2
    noisy = load_batch(out / "noisy")
    assert len(noisy.infra_errors()) == 2 and noisy.finished() == []
    for cell in noisy.infra_errors():
        assert cell.result is not None and "only errors" in str(cell.result.infra_error_reason)
        assert "529" in str(cell.result.infra_error_reason)
    report = build_report(noisy)
    assert report.counts.infra_errors == 2
    assert all((a.finished, a.gated, a.infra_errors, a.pass_rate) == (0, 0, 1, None) for a in report.arms)

    answer = [{"final": "I changed nothing."}]
    with MockModelServer(answer) as vendor:
        monkeypatch.setenv("ANTHROPIC_BASE_URL", vendor.url)
        rerun = dokimi_cli(run_args(example, out, "noisy", claude_bin, *arms))
        clean = dokimi_cli(run_args(example, out, "clean", claude_bin, *arms))
    assert rerun.returncode == 0 and clean.returncode == 0, rerun.stderr + clean.stderr
    assert json.loads(rerun.stdout)["ran"] == 2
    noisy = load_batch(out / "noisy")
    assert noisy.infra_errors() == [] and len(noisy.finished()) == 2

    def gate(batch: str) -> dict[str, Any]:
        compared = dokimi_cli(["repo", "compare", str(out / batch), "--baseline", "guidance:none", "--json"])
        assert compared.returncode == 0, compared.stderr
        (comparison,) = json.loads(compared.stdout)["comparisons"]
        return next(m for m in comparison["measures"] if m["kind"] == "gate")

    assert gate("noisy") == gate("clean")


def test_a_task_with_egress_reaches_its_host_through_the_proxy_and_no_other(
    docker_available: bool,
    claude_bin: Path,
    example: Path,
    real_env: None,
    monkeypatch: pytest.MonkeyPatch,
    tmp_path: Path,
) -> None:
    from tests.helpers.git import commit

    allowed, other = _serve("127.0.0.1"), _serve("127.0.0.1")
    port = allowed.server_address[1]
    task_json = example / ".agent-eval" / "tasks" / TASK / "task.json"
    task = json.loads(task_json.read_text())
    commit(
        example,
        "egress",
        files={str(task_json.relative_to(example)): json.dumps({**task, "egress": [f"allowed.test:{port}"]})},
    )
    targets = {
        "allowed": f"http://allowed.test:{port}/",
        "other": f"http://127.0.0.1:{other.server_address[1]}/",
    }
    probe = {"command": PROBE % json.dumps(targets), "description": "probe"}
    try:
        with MockModelServer([{"tool_use": {"name": "Bash", "input": probe}}, {"final": "ok"}]) as vendor:
            monkeypatch.setenv("ANTHROPIC_BASE_URL", vendor.url)
            out = tmp_path / "runs"
            extra = ("--arm", "guidance:raw", "--egress-resolve", "allowed.test=127.0.0.1")
            proc = dokimi_cli(run_args(example, out, "egress", claude_bin, *extra))
    finally:
        for httpd in (allowed, other):
            httpd.shutdown()
            httpd.server_close()
    assert proc.returncode == 0, proc.stderr
    run_dir = cell_dir(out / "egress", TASK, "guidance:raw", MODEL, None, 0)
    output = next(
        e["output"] for e in map(json.loads, (run_dir / "events.jsonl").read_text().splitlines())
        if e["kind"] == "command"
    )  # fmt: skip
    seen = json.loads(output.split("PROBE ", 1)[1].splitlines()[0])
    assert seen["allowed"][0] == 200 and not str(seen["allowed"][1]).isdigit()
    assert seen["other"][0] == "HTTPError:403" and not str(seen["other"][1]).isdigit()
    egress = [json.loads(line) for line in (run_dir / "egress.jsonl").read_text().splitlines()]
    egress.sort(key=lambda r: r["t"])  # written as attempts end, ordered by arrival
    assert [(r["host"], r["allowed"]) for r in egress] == [("allowed.test", True), ("127.0.0.1", False)]
    result = json.loads((run_dir / "result.json").read_text())
    assert (result["egress_attempts"], result["egress_refused"]) == (2, 1)


class ErrorServer(MockModelServer):
    """The vendor API answering one error to every request (side requests too) whose body holds ``marker``
    (any request without one), and playing the script to the others. With the example's CLAUDE.md's first
    line as the marker, only guidance:raw's requests get the error: guidance:none's agent never sees it."""

    def __init__(
        self, script: Any, status: int, kind: str, message: str, marker: bytes | None = None
    ) -> None:
        super().__init__(script)
        self.error = (status, kind, message)
        self.marker = marker

    def _route(self, req: Any, route: str, body: Any, raw: bytes) -> Any:
        from dokimi.support.mockmodel import ANTHROPIC, _Answer, _error_body

        if self.marker is None or self.marker in raw:
            status, kind, message = self.error
            return _Answer(status, _error_body(ANTHROPIC, status, kind, message))
        return super()._route(req, route, body, raw)


def test_an_api_refusing_the_request_as_too_long_makes_a_graded_failure_with_its_reason(
    docker_available: bool,
    claude_bin: Path,
    example: Path,
    real_env: None,
    monkeypatch: pytest.MonkeyPatch,
    tmp_path: Path,
) -> None:
    """A 4xx the request caused (a guidance file can make the prompt too long) is the arm's doing, not an
    outage: the cell is graded, fails, counts in every rate, and says why."""
    out = tmp_path / "runs"
    too_long = "prompt is too long: 210000 tokens > 200000 maximum"
    with ErrorServer([], 400, "invalid_request_error", too_long) as vendor:
        monkeypatch.setenv("ANTHROPIC_BASE_URL", vendor.url)
        done = dokimi_cli(run_args(example, out, "long", claude_bin, "--arm", "guidance:raw"))
    assert done.returncode == 0, done.stderr  # complete: a failure is a result, not a cell to run again
    summary = json.loads(done.stdout)
    assert (summary["ran"], summary["infra_errors"]) == (1, 0)
    result = json.loads(
        (cell_dir(out / "long", TASK, "guidance:raw", MODEL, None, 0) / "result.json").read_text()
    )
    assert result["infra_error"] is False and result["passed"] is False and not result["grader_failure"]
    assert "400: prompt is too long" in result["no_model_answer"]
    (arm,) = build_report(load_batch(out / "long")).arms
    assert (arm.finished, arm.gated, arm.passes, arm.no_model_answer, arm.infra_errors) == (1, 1, 0, 1, 0)


def test_compare_flags_a_batch_where_the_api_failed_one_arm_and_not_the_other(
    docker_available: bool,
    claude_bin: Path,
    example: Path,
    real_env: None,
    monkeypatch: pytest.MonkeyPatch,
    tmp_path: Path,
) -> None:
    out = tmp_path / "runs"
    profile = profile_with_one_retry(tmp_path)
    args = ("--arm", "guidance:none,guidance:raw", "--harness", str(profile), "-j", "2")
    script = [{"final": "I changed nothing."}]
    with ErrorServer(script, 529, "overloaded_error", "Overloaded", b"Working on calc") as vendor:
        monkeypatch.setenv("ANTHROPIC_BASE_URL", vendor.url)
        done = dokimi_cli([*run_args(example, out, "lopsided", claude_bin, *args), "--reps", "4"])
    assert done.returncode == 1, done.stderr  # the infra errors are to be run again
    batch = out / "lopsided"
    report = build_report(load_batch(batch))
    per_arm = {a.arm: (a.finished, a.infra_errors) for a in report.arms}
    assert per_arm == {"guidance:none": (4, 0), "guidance:raw": (0, 4)}
    compared = dokimi_cli(["repo", "compare", str(batch), "--baseline", "guidance:none", "--json"])
    assert compared.returncode == 0, compared.stderr
    doc = json.loads(compared.stdout)
    (comparison,) = doc["comparisons"]
    assert (comparison["infra_treatment"], comparison["infra_baseline"]) == (4, 0)
    assert comparison["infra_p"] < 0.05
    (warning,) = [w for w in doc["warnings"] if w["code"] == "infra_rate_differs"]
    assert (
        "guidance:raw lost 4 of 4 cells" in warning["message"]
        and "guidance:none 0 of 4" in warning["message"]
    )
