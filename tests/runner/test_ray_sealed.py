"""A sealed real run on a Ray cluster (docs/scale.md, "Sealed runs"): ``repo run --executor ray`` without
``--dry-run`` on a cluster of this machine (a head and a worker node, each its own raylet), with the real
Claude Code CLI and dokimi's scripted model server on the host as the vendor (``ANTHROPIC_BASE_URL`` set
on the host, a marked key it requires).

- every gated cell passes, each sealed: its gateway.jsonl (kept on the driver, moved in with the cell) and
  egress.jsonl come back, its cost is the gateway's;
- an agent command's request to a second server on the host is refused on both nodes, straight (the node's
  firewall chain) and through the node's egress proxy, which logs it;
- the marked key reaches the upstream on every request and is nowhere in the batch, in Ray's logs or its
  object spill directory (nothing secret travels through Ray);
- a worker node's raylet killed in the middle of a cell: the batch completes, every cell exactly once and
  sealed, after Ray's retry or a rerun.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
import uuid
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler
from pathlib import Path
from typing import Any

import pytest

from dokimi.batch import load_batch
from dokimi.gateway.network import remove_batch_networks
from dokimi.runner.dryrun import oracle_script
from dokimi.sandbox.docker import container_names
from dokimi.support.mockmodel import MockModelServer
from tests.conftest import _require
from tests.helpers.http import serving
from tests.helpers.raycluster import SPILL_EVERYTHING, RayCluster, SpillKeeper, start_cluster

pytestmark = [pytest.mark.docker, pytest.mark.harness, pytest.mark.ray, pytest.mark.slow]

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"
TASK = "fix_power_assoc"
MODEL = "claude-haiku-4-5"

PROBE = r"""python3 - <<'PY'
import json, os, urllib.request
port = %d
targets = {"bridge": os.environ["NO_PROXY"].split(",")[0], "docker0": %r}
for bypass in ("NO_PROXY", "no_proxy"):  # the bridge address is the gateway's: asked through the proxy too
    os.environ.pop(bypass, None)
def get(url, proxy):
    handlers = [] if proxy else [urllib.request.ProxyHandler({})]
    try:
        return urllib.request.build_opener(*handlers).open(url, timeout=5).status
    except Exception as e:
        return type(e).__name__ + ":" + str(getattr(e, "code", ""))
seen = {"key_is_dummy": os.environ.get("ANTHROPIC_API_KEY", "").startswith("dokimi-gw-")}
for name, host in targets.items():
    url = "http://%%s:%%d/" %% (host, port)
    seen[name] = [url, get(url, True), get(url, False)]
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


def docker_bridge_address() -> str:
    shown = subprocess.run(
        ["ip", "-4", "-o", "addr", "show", "dev", "docker0"], capture_output=True, text=True, check=False
    )
    words = shown.stdout.split()
    assert "inet" in words, shown.stdout + shown.stderr
    return words[words.index("inet") + 1].split("/")[0]


@pytest.fixture
def second_server() -> Iterator[int]:
    """A host service on every address: what no sealed container may reach."""
    with serving(_Hello, "0.0.0.0") as port:
        yield port


@pytest.fixture
def name() -> Iterator[str]:
    """The batch of this test only; its containers, networks and firewall chains go with it (a killed
    node leaves its own behind)."""
    batch = f"raysealed-{uuid.uuid4().hex[:8]}"
    yield batch
    for leftover in container_names(label=f"dokimi.batch={batch}"):
        subprocess.run(["docker", "rm", "-f", leftover], capture_output=True, check=False)
    remove_batch_networks(batch)


def _cluster(directory: Path, *, spill: bool = False) -> RayCluster:
    try:
        import ray  # noqa: F401
    except ImportError:
        _require("Ray is not installed (pip install -e '.[ray]')")
    return start_cluster(directory, spill=spill)


def _example(path: Path) -> Path:
    import runpy

    runpy.run_path(str(EXAMPLES / "build_example.py"))["build_example"](path)
    return path


def _script(port: int) -> list[dict[str, Any]]:
    """The probe, then the task's oracle patch applied with Bash, then a final answer."""
    patch = (EXAMPLES / "calc" / ".agent-eval" / "tasks" / TASK / "oracle.patch").read_bytes()
    probe = {"command": PROBE % (port, docker_bridge_address()), "description": "probe"}
    return [
        {"tool_use": {"name": "Bash", "input": probe}},
        *oracle_script(patch, "Fixed the power operator."),
    ]


def _run(args: list[str], env: dict[str, str], timeout: float = 1500) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "dokimi", *args], capture_output=True, text=True, env=env, timeout=timeout
    )


def _args(example: Path, out: Path, batch: str, claude_bin: Path, address: str, *extra: str) -> list[str]:
    return [
        "repo", "run", f"{example}@HEAD", "--manifest", ".agent-eval/repo-eval.yaml", "--task", TASK,
        "--arm", "guidance:none,guidance:raw", "--model", MODEL, "--bin", str(claude_bin), "--batch", batch,
        "--out", str(out), "--executor", "ray", "--ray-address", address, "--json",
        "--allow-unchecked",  # what is tested here is the seal, not the task's check
        *extra,
    ]  # fmt: skip


def _environment(key: str, upstream: str) -> dict[str, str]:
    env = {
        k: v for k, v in os.environ.items() if k not in ("ANTHROPIC_AUTH_TOKEN", "CLAUDE_CODE_USE_BEDROCK")
    }
    env.update(
        {"ANTHROPIC_API_KEY": key, "ANTHROPIC_BASE_URL": upstream, "RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER": "0"}
    )
    return env


def _batch_networks(batch: str) -> list[str]:
    listed = subprocess.run(
        ["docker", "network", "ls", "-q", "--filter", f"label=dokimi.batch={batch}"],
        capture_output=True, text=True, check=True,
    )  # fmt: skip
    return listed.stdout.split()


def _files_holding(root: Path, secret: bytes) -> list[str]:
    found = []
    for path in root.rglob("*"):
        try:
            if path.is_file() and not path.is_symlink() and secret in path.read_bytes():
                found.append(str(path))
        except OSError:
            continue
    return found


def _sealed_cells(batch: Path) -> list[dict[str, Any]]:
    cells = []
    for result_path in sorted(batch.glob(f"{TASK}/*/*/*/rep*/result.json")):
        result = json.loads(result_path.read_text())
        run_dir = result_path.parent
        gateway = [json.loads(line) for line in (run_dir / "gateway.jsonl").read_text().splitlines()]
        egress = [json.loads(line) for line in (run_dir / "egress.jsonl").read_text().splitlines()]
        cells.append({"dir": run_dir, "result": result, "gateway": gateway, "egress": egress})
    return cells


def test_a_sealed_batch_on_a_ray_cluster_passes_sealed_on_both_nodes_and_leaks_no_key(
    docker_available: bool, claude_bin: Path, tmp_path: Path, name: str, second_server: int
) -> None:
    key = f"sk-ant-MARKED-{uuid.uuid4().hex}"
    cluster = _cluster(tmp_path / "cluster", spill=True)
    try:
        example = _example(tmp_path / "calc")
        out = tmp_path / "runs"
        assert cluster.ray_tmp is not None
        keeper = SpillKeeper(cluster.ray_tmp, tmp_path / "spilled")
        with MockModelServer(_script(second_server), api_key=key, per_conversation=True) as vendor:
            done = _run(
                _args(example, out, name, claude_bin, cluster.address, "--reps", "2", "-j", "2"),
                {**_environment(key, vendor.url), **SPILL_EVERYTHING},
            )
            requests = vendor.requests
        assert done.returncode == 0, done.stderr
        summary = json.loads(done.stdout)
        assert (summary["ran"], summary["failed"], summary["lost"]) == (4, 0, 0), summary
        # every node's seal was stopped with the batch: no network (nor its firewall chain) of it is left
        assert _batch_networks(name) == []
        nodes = {node["node"] for node in summary["nodes"]}
        assert len(nodes) == 2, summary["nodes"]  # both nodes ran cells

        # the marked key reached the vendor on every request, through the driver's gateway
        assert requests and all(r.authenticated for r in requests)
        cells = _sealed_cells(out / name)
        assert len(cells) == 4
        assert sum(len(c["gateway"]) for c in cells) == len(requests)
        bridges = set()
        for cell in cells:
            result = cell["result"]
            assert result["passed"] is True and result["infra_error"] is False, result
            assert result["cost_source"] == "gateway" and result["cost_usd"] > 0
            assert result["usage"]["turns"] == result["turns"] >= 2
            # the agent's command: a dummy key, and no way to the host's service but the proxy, which refused
            events = [json.loads(line) for line in (cell["dir"] / "events.jsonl").read_text().splitlines()]
            output = next(e["output"] for e in events if e["kind"] == "command")
            seen = json.loads(output.split("PROBE ", 1)[1].splitlines()[0])
            assert seen["key_is_dummy"] is True
            bridges.add(seen["bridge"][0])
            for target in ("bridge", "docker0"):
                url, via_proxy, direct = seen[target]
                assert via_proxy == "HTTPError:403", seen
                assert not str(direct).isdigit(), seen
                refused = [e for e in cell["egress"] if not e["allowed"] and e["target"] == url]
                assert refused and refused[0]["status"] == 403, cell["egress"]
            assert result["egress_refused"] == result["egress_attempts"] == len(cell["egress"])
        assert len(bridges) == 2  # each node's own batch network (two raylets, one docker daemon here)

        # nothing of the key in the batch, in Ray's logs, in its object spill directory (all under RAY_TMPDIR)
        secret = key.encode()
        assert _files_holding(out / name, secret) == []
        assert cluster.ray_tmp is not None and list(cluster.ray_tmp.rglob("*.log"))
        spilled = keeper.stop()
        assert len(spilled) >= 5, "the object store spilled (almost) nothing: the check would see nothing"
        # what was spilled includes the batch as the nodes got it (its name, its environment for them)
        assert _files_holding(keeper.keep, name.encode())
        assert _files_holding(cluster.ray_tmp, secret) == [] and _files_holding(keeper.keep, secret) == []
        for leftover in ("ray-gateway",):
            assert not list((out / name / "_eval" / leftover).glob("*/gateway.jsonl"))
    finally:
        cluster.stop()


def test_a_raylet_killed_mid_cell_leaves_every_cell_finished_once_and_sealed(
    docker_available: bool, claude_bin: Path, tmp_path: Path, name: str, second_server: int
) -> None:
    key = f"sk-ant-MARKED-{uuid.uuid4().hex}"
    doomed = _cluster(tmp_path / "cluster")
    try:
        example = _example(tmp_path / "calc")
        out = tmp_path / "runs"
        args = _args(example, out, name, claude_bin, doomed.address, "--reps", "1", "-j", "2")
        with MockModelServer(_script(second_server), api_key=key, per_conversation=True) as vendor:
            env = _environment(key, vendor.url)
            proc = subprocess.Popen(
                [sys.executable, "-m", "dokimi", *args],
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
                text=True,
                env=env,
            )
            deadline = time.monotonic() + 900
            # both cells' agents running (one per node): kill the worker node's raylet
            while len([c for c in container_names(label=f"dokimi.batch={name}") if c.endswith("-agent")]) < 2:
                assert proc.poll() is None, proc.communicate()
                assert time.monotonic() < deadline
                time.sleep(0.1)
            os.kill(doomed.worker_raylet_pid, signal.SIGKILL)
            stdout, stderr = proc.communicate(timeout=1200)
            assert proc.returncode in (0, 1) and stdout, stderr
            first = json.loads(stdout)
            assert first["failed"] == 0 and first["ran"] + first["lost"] == 2, first
            if proc.returncode == 1:  # Ray's retry died too: the cell is missing, never failed
                rerun = _run(args, env)
                assert rerun.returncode == 0, rerun.stderr
                second = json.loads(rerun.stdout)
                assert (second["ran"], second["skipped"]) == (first["lost"], first["ran"])
            requests = vendor.requests
        batch = load_batch(out / name)
        finished = batch.finished()
        assert len(finished) == 2 and not batch.missing()
        for cell in _sealed_cells(out / name):
            result = cell["result"]
            assert result["passed"] is True and result["cost_source"] == "gateway", result
            assert cell["gateway"] and all(r["status"] == 200 for r in cell["gateway"] if r["status"])
        assert all(r.authenticated for r in requests)
        assert _files_holding(out / name, key.encode()) == []
    finally:
        doomed.stop()
