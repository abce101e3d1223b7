"""``repo run --executor ray``: the same batch on a Ray cluster of this machine (a head and one extra worker
node, each its own raylet process; tests/helpers/raycluster.py), with real containers.

- the bundled example's dry run (the real Claude Code CLI against the scripted model) gives the same
  result.json verdicts on the cluster as with the local executor;
- a worker node killed in the middle of a cell: the batch completes (Ray's retry, else a rerun) with every
  cell once;
- a sealed run on a cluster with a node that cannot seal (no iptables): that node's cells fail with the
  reason, never unsealed;
- SIGTERM or Ctrl-C on the driver: finished cells stay, nothing of the batch keeps running on any node, a
  rerun fills the rest;
- what a node hands back is hostile input: links leaving the run directory, FIFOs and a forged result.json
  are dropped on the driver.
"""

from __future__ import annotations

import dataclasses
import json
import os
import runpy
import signal
import subprocess
import sys
import time
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from dokimi.batch import CellKey, cell_dir, load_batch
from dokimi.gateway.network import remove_batch_networks
from dokimi.runner.cell import CellOutcome
from dokimi.runner.ray_executor import (
    NodeFacts,
    NodeReturn,
    PortableBatch,
    install_cell,
    pack_run_dir,
    pin_differences,
    relocate,
)
from dokimi.sandbox.docker import container_names
from dokimi.schemas.batch import BatchPin
from tests.conftest import _require
from tests.helpers.git import commit
from tests.helpers.raycluster import RayCluster, start_cluster
from tests.helpers.runs import MANIFEST, Tiny, dokimi_cli, fake_harness, run_args, tiny_repo

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"


# --- what comes back from a node ----------------------------------------------------------------------------


def test_a_returned_run_dir_keeps_its_files_and_drops_what_would_escape(tmp_path: Path) -> None:
    run_dir = tmp_path / "node" / "run"
    (run_dir / "workspace" / "src").mkdir(parents=True)
    (run_dir / "workspace" / "src" / "a.py").write_text("x = 1\n")
    (run_dir / "workspace" / "inside").symlink_to("src/a.py")
    (run_dir / "workspace" / "passwd").symlink_to("/etc/passwd")
    (run_dir / "workspace" / "up").symlink_to("../../../../outside")
    os.mkfifo(run_dir / "workspace" / "pipe")
    (run_dir / "answer.txt").write_text("done")
    (run_dir / "result.json").write_text('{"forged": true}')
    files = pack_run_dir(run_dir, CAP)

    root = tmp_path / "batch"
    key = CellKey("t", "guidance:raw", "m", None, 0)
    install_cell(root, key, NodeReturn(CellOutcome(key, "failed", error="x"), files=files))
    dest = key.path(root)
    assert (dest / "workspace" / "src" / "a.py").read_text() == "x = 1\n"
    assert (dest / "answer.txt").read_text() == "done"
    assert os.readlink(dest / "workspace" / "inside") == "src/a.py"
    for dropped in ("workspace/passwd", "workspace/up", "workspace/pipe", "result.json"):
        assert not os.path.lexists(dest / dropped), dropped


CAP = 64 * 1024 * 1024
GIB = 1024**3


def _sparse(path: Path, size: int, data: dict[int, bytes]) -> None:
    """A sparse file of ``size`` bytes holding ``data`` (offset -> bytes) and holes elsewhere."""
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("wb") as out:
        out.truncate(size)
        for offset, chunk in data.items():
            out.seek(offset)
            out.write(chunk)


def _returned(tmp_path: Path, run_dir: Path, cap: int) -> Path:
    key = CellKey("t", "guidance:raw", "m", None, 0)
    files = pack_run_dir(run_dir, cap)
    assert len(files) < 1024 * 1024  # the holes never travel
    install_cell(tmp_path / "batch", key, NodeReturn(CellOutcome(key, "failed", error="x"), files=files))
    return key.path(tmp_path / "batch")


def test_a_sparse_file_within_the_cap_comes_back_sparse(tmp_path: Path) -> None:
    """Issue 20: a 2 GiB sparse file in the cell's $HOME cost 2.1 GiB of real disk on the driver."""
    run_dir = tmp_path / "node" / "run"
    data = {0: b"head", 1 << 20: b"middle" * 1000, 2 * GIB - 4: b"tail"}
    _sparse(run_dir / "home" / "big", 2 * GIB, data)
    (run_dir / "home" / "small.txt").write_text("kept\n")
    dest = _returned(tmp_path, run_dir, 4 * GIB)
    big = dest / "home" / "big"
    st = big.stat()
    assert st.st_size == 2 * GIB and st.st_blocks * 512 < 1024 * 1024, st.st_blocks
    with big.open("rb") as f:
        for offset, chunk in data.items():
            f.seek(offset)
            assert f.read(len(chunk)) == chunk
        f.seek(1 << 30)
        assert f.read(4096) == bytes(4096)
    assert (dest / "home" / "small.txt").read_text() == "kept\n"
    assert not (dest / "not-returned.txt").exists()


@pytest.mark.slow
def test_an_entry_past_workspace_mb_stays_on_the_node_and_is_named(tmp_path: Path) -> None:
    run_dir = tmp_path / "node" / "run"
    _sparse(run_dir / "home" / "big", 2 * GIB, {0: b"x"})
    (run_dir / "workspace").mkdir()
    (run_dir / "workspace" / "f.txt").write_text("after\n")
    (run_dir / "answer.txt").write_text("done")
    dest = _returned(tmp_path, run_dir, 1024 * 1024 * 1024)
    assert not (dest / "home").exists()
    assert (dest / "workspace" / "f.txt").read_text() == "after\n" and (dest / "answer.txt").is_file()
    note = (dest / "not-returned.txt").read_text()
    assert note.startswith("home: more than 1024 MiB (image.limits.workspace_mb), left on node")


@dataclass(frozen=True)
class _Inner:
    content: Path
    other: Path


@dataclass(frozen=True)
class _Outer:
    inner: _Inner
    scripts: dict[tuple[str, str], Path]
    caches: tuple[Path, ...]


def test_paths_of_the_driver_are_moved_to_the_node_and_others_kept() -> None:
    driver = Path("/out/b/_eval")
    value = _Outer(
        _Inner(driver / "content", Path("/opt/harness")),
        {("t", "a"): driver / "dry-run" / "t.json"},
        (Path("/cache/x"), driver),
    )
    moved = relocate(value, [(driver, Path("/node/_eval"))])
    assert moved == _Outer(
        _Inner(Path("/node/_eval/content"), Path("/opt/harness")),
        {("t", "a"): Path("/node/_eval/dry-run/t.json")},
        (Path("/cache/x"), Path("/node/_eval")),
    )


def test_a_node_that_differs_from_the_batch_pin_is_named_with_what_differs() -> None:
    tree = "a" * 40
    pin = BatchPin.model_validate(
        {
            "schema": "repo_batch.v1", "manifest_id": "calc", "source": f"/src@{tree}", "tree": tree,
            "eval_dir_digest": "sha256:eval", "image": "dokimi/calc:x", "image_pin": "tree",
            "created_by": "0.1.0",
        }
    )  # fmt: skip
    portable = PortableBatch(
        token="t", source=f"/src@{tree}", batch="b", root="/out/b", pin=pin, dokimi_version="0.1.0",
        context={}, eval_files=b"", driver_git_dir=None, shared_out=False,
    )  # fmt: skip
    same = NodeFacts("0.1.0", tree, "sha256:eval", "2.1.328")
    assert pin_differences(portable, same, harness_version="2.1.328") is None
    assert (
        pin_differences(portable, dataclasses.replace(same, harness_version=None), harness_version="x")
        is None
    )
    cases = {
        "it has dokimi 0.2.0, the driver 0.1.0": dataclasses.replace(same, dokimi_version="0.2.0"),
        f"it sees /src@{tree} at {'b' * 40}, the batch is pinned to {tree}": dataclasses.replace(
            same, tree="b" * 40
        ),
        "the eval_dir it received has digest sha256:other, the pin sha256:eval": dataclasses.replace(
            same, eval_dir_digest="sha256:other"
        ),
        "the harness reports 2.1.300 in the image, the batch runs 2.1.328": dataclasses.replace(
            same, harness_version="2.1.300"
        ),
    }
    for message, facts in cases.items():
        assert pin_differences(portable, facts, harness_version="2.1.328") == message


# --- on a cluster -------------------------------------------------------------------------------------------


def _ray_cluster(directory: Path) -> RayCluster:
    try:
        import ray  # noqa: F401
    except ImportError:
        _require("Ray is not installed (pip install -e '.[ray]')")
    return start_cluster(directory)


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory, docker_available: bool) -> Iterator[RayCluster]:
    started = _ray_cluster(tmp_path_factory.mktemp("ray-cluster"))
    yield started
    started.stop()


@pytest.fixture
def name() -> Iterator[str]:
    """The batch name and manifest id of this test only: its containers and its image are its own on a
    daemon other tests share (and removed afterwards)."""
    name = f"ray-{uuid.uuid4().hex[:10]}"
    yield name
    listed = subprocess.run(
        ["docker", "images", "-q", "--filter", f"label=dokimi.repo.manifest-id={name}"],
        capture_output=True, text=True, check=False,
    )  # fmt: skip
    if listed.stdout.split():
        subprocess.run(["docker", "rmi", "-f", *set(listed.stdout.split())], capture_output=True, check=False)


def slow_tiny(path: Path, name: str) -> Tiny:
    """The tiny repository with one slow task (the fake harness sleeps 2 s), under manifest id ``name``."""
    tiny = tiny_repo(path, {"fix_f": {"prompt": "SLOW EDIT"}})
    manifest = MANIFEST.replace("id: runner-tiny", f"id: {name}")
    assert manifest != MANIFEST
    return dataclasses.replace(
        tiny, eval_sha=commit(path, "own id", files={".agent-eval/repo-eval.yaml": manifest})
    )


def _containers_gone(batch: str, wait_s: float = 30.0) -> bool:
    deadline = time.monotonic() + wait_s
    while container_names(label=f"dokimi.batch={batch}"):
        if time.monotonic() > deadline:
            return False
        time.sleep(0.2)
    return True


def _verdicts(batch: Path) -> dict[str, tuple[object, ...]]:
    out = {}
    for path in sorted(batch.glob("*/*/*/*/rep*/result.json")):
        result = json.loads(path.read_text())
        out[path.parent.relative_to(batch).as_posix()] = (
            result["passed"],
            result["gate_results"],
            result["metrics"],
            result["grader_failure"],
            result["turns"],
            result["agent_rc"],
        )
    return out


@pytest.mark.docker
@pytest.mark.harness
@pytest.mark.ray
def test_the_example_dry_run_gives_the_same_verdicts_on_a_ray_cluster_as_locally(
    cluster: RayCluster, claude_bin: Path, tmp_path: Path
) -> None:
    example = tmp_path / "calc"
    runpy.run_path(str(EXAMPLES / "build_example.py"))["build_example"](example)
    no_fix = tmp_path / "no-fix.json"
    no_fix.write_text(json.dumps([{"final": "I looked at the parser and changed nothing."}]))
    out = tmp_path / "runs"

    def args(batch: str, *extra: str) -> list[str]:
        return [
            "repo", "run", f"{example}@HEAD", "--manifest", ".agent-eval/repo-eval.yaml",
            "--task", "fix_power_assoc", "--arm", "guidance:none,guidance:raw", "--model", "claude-haiku-4-5",
            "--reps", "2", "--batch", batch, "--out", str(out), "--bin", str(claude_bin), "--dry-run",
            "--dry-run-script", f"guidance:none={no_fix}", "--json", *extra,
        ]  # fmt: skip

    local = dokimi_cli(args("local", "-j", "2"))
    assert local.returncode == 0, local.stderr
    remote_args = args("ray", "--executor", "ray", "--ray-address", cluster.address)
    remote = dokimi_cli(remote_args)
    assert remote.returncode == 0, remote.stderr

    summary = json.loads(remote.stdout)
    assert (summary["executor"], summary["ran"], summary["lost"], summary["failed"]) == ("ray", 4, 0, 0)
    assert sum(node["ran"] for node in summary["nodes"]) == 4
    assert all("/" in node["node"] for node in summary["nodes"])  # host/node id
    verdicts = _verdicts(out / "ray")
    assert len(verdicts) == 4 and verdicts == _verdicts(out / "local")
    passed = {rel.split("/")[1]: v[0] for rel, v in verdicts.items()}
    assert passed == {"guidance_none": False, "guidance_raw": True}
    raw = cell_dir(out / "ray", "fix_power_assoc", "guidance:raw", "claude-haiku-4-5", None, 0)
    for name in ("meta.json", "task.json", "events.jsonl", "answer.txt", "agent.stdout", "grade.json"):
        assert (raw / name).is_file(), name
    assert (raw / "workspace" / "calc" / "parser.py").is_file()
    assert not list((out / "ray" / "_eval").glob("ray-attempts/*"))

    again = dokimi_cli(remote_args)
    assert again.returncode == 0, again.stderr
    assert (json.loads(again.stdout)["ran"], json.loads(again.stdout)["skipped"]) == (0, 4)


WARM = """
import json, sys
from dokimi.runner.ray_executor import join_cluster, warm_the_nodes
ray = join_cluster(sys.argv[1])
warmed = ray.get(warm_the_nodes(ray), timeout=120)
print(json.dumps([sorted(warmed), sorted(node["NodeID"] for node in ray.nodes() if node["Alive"])]))
"""


@pytest.mark.ray
def test_joining_the_cluster_starts_a_worker_process_on_every_node(cluster: RayCluster) -> None:
    """The cells' worker processes start while the batch is prepared (docs/scale.md, "Measured"): without
    them each node's first cell waited 2-4 s for one. (Starting them failed silently once.)"""
    argv = [sys.executable, "-c", WARM, cluster.address]
    done = subprocess.run(argv, capture_output=True, text=True, timeout=300, check=False)
    assert done.returncode == 0, done.stderr
    warmed, nodes = json.loads(done.stdout.splitlines()[-1])
    assert warmed == nodes and len(nodes) == 2  # one on each node, the head and the worker


@pytest.mark.docker
@pytest.mark.ray
def test_with_shared_out_the_run_directories_are_moved_into_the_batch(
    cluster: RayCluster, tmp_path: Path, name: str
) -> None:
    tiny = slow_tiny(tmp_path / "tiny", name)
    profile, binary = fake_harness(tmp_path / "harness")
    args = run_args(
        tiny, tmp_path / "out", name, profile, binary, "--json", "--executor", "ray",
        "--ray-address", cluster.address, "--shared-out", reps=2,
    )  # fmt: skip
    done = dokimi_cli(args)
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout)["ran"] == 2
    batch = tmp_path / "out" / name
    for rep in (0, 1):
        cell = cell_dir(batch, "fix_f", "guidance:raw", "m", None, rep)
        assert json.loads((cell / "result.json").read_text())["passed"] is True
        assert (cell / "workspace" / "f.txt").read_text() == "after\n"
        assert (cell / "meta.json").is_file() and (cell / "agent.stdout").is_file()
    assert not list((batch / "_eval" / "ray-attempts").iterdir())


@pytest.mark.docker
@pytest.mark.ray
def test_a_node_without_the_harness_fails_its_cells_with_the_reason_and_a_rerun_fills_them(
    cluster: RayCluster, tmp_path: Path, name: str
) -> None:
    tiny = slow_tiny(tmp_path / "tiny", name)
    profile, binary = fake_harness(tmp_path / "harness")
    args = run_args(
        tiny, tmp_path / "out", name, profile, binary, "--json", "--executor", "ray",
        "--ray-address", cluster.address, reps=2,
    )  # fmt: skip
    where = args.index("--bin")
    without_bin = args[:where] + args[where + 2 :]
    # the driver finds the harness through its environment; the nodes' environment does not name it
    env = {**os.environ, "DOKIMI_FAKE_BIN": str(binary)}
    first = subprocess.run(
        [sys.executable, "-m", "dokimi", *without_bin], capture_output=True, text=True, env=env, timeout=600
    )
    assert first.returncode == 1, first.stderr
    summary = json.loads(first.stdout)
    assert (summary["ran"], summary["failed"]) == (0, 2)
    for failure in summary["failures"]:
        assert failure["error"].startswith("node ") and "no fake executable" in failure["error"]
    assert not load_batch(tmp_path / "out" / name).finished()

    rerun = dokimi_cli(args)
    assert rerun.returncode == 0, rerun.stderr
    assert json.loads(rerun.stdout)["ran"] == 2


def _without_iptables() -> str:
    """This machine's PATH less the directories that hold iptables: a node that cannot write a firewall."""
    path = [d for d in os.environ.get("PATH", "").split(os.pathsep) if d]
    kept = [d for d in path if not (Path(d) / "iptables").exists()]
    assert kept != path, "iptables is not on PATH: nothing to take away"
    return os.pathsep.join(kept)


@pytest.mark.docker
@pytest.mark.ray
def test_a_node_that_cannot_seal_fails_its_cells_with_the_reason_and_never_runs_them_unsealed(
    tmp_path: Path, name: str, docker_available: bool
) -> None:
    """A sealed run (the allow-list route: the fake harness reaches its vendor by the profile's egress list)
    on a cluster whose worker node has no iptables: that node's cells fail naming why, no container of
    theirs starts, and they stay missing; the head's cells run sealed."""
    unsealable = start_cluster(tmp_path / "cluster", worker_env={"PATH": _without_iptables()})
    try:
        tiny = slow_tiny(tmp_path / "tiny", name)
        profile, binary = fake_harness(tmp_path / "harness")
        profile.write_text(profile.read_text() + 'egress: ["vendor.dokimi-test.example:443"]\n')
        args = run_args(
            tiny, tmp_path / "out", name, profile, binary, "--json", "--executor", "ray",
            "--ray-address", unsealable.address, "-j", "2", reps=2,
        )  # fmt: skip
        done = dokimi_cli(args)
        assert done.returncode == 1, done.stderr
        assert "NOT SEALED" not in done.stderr
        summary = json.loads(done.stdout)
        # two cells at once on two one-CPU nodes: the worker got one (and, failing fast, maybe the other)
        assert summary["failed"] >= 1 and summary["ran"] + summary["failed"] == 2, summary
        for failure in summary["failures"]:
            error = failure["error"]
            assert error.startswith("node ") and "cannot seal its cells" in error, error
            assert "never unsealed" in error and "iptables is not installed" in error, error
        by_node = {node["node"]: node for node in summary["nodes"]}
        refusing = [n for n in by_node.values() if n["failed"]]
        assert len(refusing) == 1 and refusing[0]["ran"] == 0, summary["nodes"]

        batch = load_batch(tmp_path / "out" / name)
        assert len(batch.missing()) == summary["failed"]  # never failed verdicts: missing, for the next run
        for cell in batch.finished():  # the head's: sealed on its own network, behind the proxy
            assert cell.result is not None and cell.result.passed is True
            # an account of the node's proxy (an unsealed cell has none) and no network of the caller's
            assert cell.result.agent_network is None and cell.result.egress_attempts == 0
        for cell in batch.missing():
            assert not (cell.dir / "agent.stdout").exists()
    finally:
        unsealable.stop()
        remove_batch_networks(name)


@pytest.mark.docker
@pytest.mark.ray
@pytest.mark.parametrize(("signum", "returncode"), [(signal.SIGTERM, -signal.SIGTERM), (signal.SIGINT, 130)])
def test_a_signal_to_the_driver_stops_the_cells_on_every_node_and_a_rerun_fills_them(
    cluster: RayCluster, tmp_path: Path, name: str, signum: signal.Signals, returncode: int
) -> None:
    tiny = slow_tiny(tmp_path / "tiny", name)
    profile, binary = fake_harness(tmp_path / "harness")
    args = run_args(
        tiny, tmp_path / "out", name, profile, binary, "--json", "--executor", "ray",
        "--ray-address", cluster.address, "-j", "2", reps=6,
    )  # fmt: skip
    batch = tmp_path / "out" / name
    proc = subprocess.Popen(
        [sys.executable, "-m", "dokimi", *args], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
    )
    deadline = time.monotonic() + 300
    while not list(batch.glob("fix_f/*/*/*/rep*/result.json")):
        assert proc.poll() is None, proc.communicate()
        assert time.monotonic() < deadline
        time.sleep(0.2)
    proc.send_signal(signum)  # SIGINT: what Ctrl-C sends
    _, stderr = proc.communicate(timeout=180)
    assert proc.returncode == returncode, stderr
    assert "Run the same command again" in stderr
    done = sorted(p.parent for p in batch.glob("fix_f/*/*/*/rep*/result.json"))
    assert 1 <= len(done) < 6
    assert _containers_gone(name)

    rerun = dokimi_cli(args)
    assert rerun.returncode == 0, rerun.stderr
    data = json.loads(rerun.stdout)
    assert (data["skipped"], data["ran"]) == (len(done), 6 - len(done))
    assert len(load_batch(batch).finished()) == 6


@pytest.mark.docker
@pytest.mark.ray
def test_a_worker_node_killed_mid_cell_loses_nothing_and_counts_nothing_twice(
    tmp_path: Path, name: str, docker_available: bool
) -> None:
    doomed = _ray_cluster(tmp_path / "cluster")
    try:
        tiny = slow_tiny(tmp_path / "tiny", name)
        profile, binary = fake_harness(tmp_path / "harness")
        args = run_args(
            tiny, tmp_path / "out", name, profile, binary, "--json", "--executor", "ray",
            "--ray-address", doomed.address, "-j", "2", reps=2,
        )  # fmt: skip
        batch = tmp_path / "out" / name
        proc = subprocess.Popen(
            [sys.executable, "-m", "dokimi", *args], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
        )
        deadline = time.monotonic() + 300
        # both cells running (one per node: each node has one CPU): kill the worker node's raylet
        while len(container_names(label=f"dokimi.batch={name}")) < 2:
            assert proc.poll() is None, proc.communicate()
            assert time.monotonic() < deadline
            time.sleep(0.05)
        os.kill(doomed.worker_raylet_pid, signal.SIGKILL)
        stdout, stderr = proc.communicate(timeout=600)
        assert proc.returncode in (0, 1) and stdout, stderr
        first = json.loads(stdout)
        assert first["failed"] == 0 and first["ran"] + first["lost"] == 2, first
        if proc.returncode == 1:  # Ray's retry died too: the cell is missing, never failed
            rerun = dokimi_cli(args)
            assert rerun.returncode == 0, rerun.stderr
            second = json.loads(rerun.stdout)
            assert (second["ran"], second["skipped"]) == (first["lost"], first["ran"])

        finished = load_batch(batch).finished()
        assert len(finished) == 2 and not load_batch(batch).missing()
        assert sorted(c.rel for c in finished) == [f"fix_f/guidance_raw/m/default/rep{r}" for r in (0, 1)]
        for cell in finished:
            assert cell.result is not None and cell.result.passed is True
        final = dokimi_cli(args)
        assert final.returncode == 0, final.stderr
        assert (json.loads(final.stdout)["ran"], json.loads(final.stdout)["skipped"]) == (0, 2)
        assert _containers_gone(name, wait_s=60)
    finally:
        doomed.stop()


@pytest.mark.docker
@pytest.mark.ray
def test_a_sparse_file_costs_the_driver_no_disk_and_an_entry_past_the_cap_stays_on_the_node(
    cluster: RayCluster, tmp_path: Path, name: str
) -> None:
    """Issue 20: a 2 GiB sparse file in the cell's $HOME cost 2.1 GiB of real disk on the driver, and
    workspace_mb did not cover home/. With workspace_mb 1536: home/ (2 GiB long) stays on the node, named in
    not-returned.txt; config/ (a 1 GiB sparse file) comes back sparse."""
    from tests.attacks.conftest import attacker

    tiny = tiny_repo(tmp_path / "tiny")
    manifest = MANIFEST.replace("id: runner-tiny", f"id: {name}").replace(
        "image:\n", "image:\n  limits: {workspace_mb: 1536}\n", 1
    )
    rev = commit(tiny.path, "cap", files={".agent-eval/repo-eval.yaml": manifest})
    who = attacker(
        tmp_path / "agent",
        'truncate -s 2G "$HOME/big" && printf tail >> "$HOME/big"\n'
        'truncate -s 1G "$HOME/../config/sparse" && printf tail >> "$HOME/../config/sparse"',
    )
    args = run_args(
        tiny, tmp_path / "out", name, who.profile, who.binary, "--json", "--agent-network", "none",
        "--executor", "ray", "--ray-address", cluster.address, rev=rev,
    )  # fmt: skip
    done = dokimi_cli(args)
    assert done.returncode == 0, done.stderr
    cell = cell_dir(tmp_path / "out" / name, "fix_f", "guidance:raw", "m", None, 0)
    assert (cell / "result.json").is_file() and not (cell / "home").exists()
    assert (cell / "not-returned.txt").read_text().startswith("home: more than 1536 MiB")
    sparse = cell / "config" / "sparse"
    assert sparse.stat().st_size == 1024**3 + 4
    with sparse.open("rb") as f:
        f.seek(1024**3)
        assert f.read() == b"tail"
    used = sum(p.lstat().st_blocks * 512 for p in cell.rglob("*"))
    assert used < 32 * 1024 * 1024, f"{used} bytes of real disk for the returned cell"
