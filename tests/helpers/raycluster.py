"""A Ray cluster on this machine for the tests: a head and one extra worker node (its own raylet process),
both on loopback, started with Ray's own test cluster (``ray.cluster_utils.Cluster``) in a child process.

    python -m tests.helpers.raycluster DIR

writes ``DIR/cluster.json`` ({address, worker_raylet_pid}) once both nodes are up, and shuts the cluster down
on SIGTERM. :func:`start_cluster` runs it and waits for the file. ``DIR/worker_env.json``, when there, holds
variables the worker node's raylet (and so every process it starts) gets over the cluster's.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
WORKER_ENV = "worker_env.json"


def cluster_environment(ray_tmp: Path) -> dict[str, str]:
    """Loopback only (Ray would otherwise use the machine's network address), no usage reports, and Ray's
    files under ``ray_tmp`` (a short path: Ray's unix sockets live there, at most 107 bytes)."""
    (ray_tmp / "ray").mkdir(parents=True, exist_ok=True)
    return {
        "RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER": "0",
        "RAY_USAGE_STATS_ENABLED": "0",
        "RAY_TMPDIR": str(ray_tmp),
    }


@dataclass
class RayCluster:
    address: str
    worker_raylet_pid: int
    process: subprocess.Popen[bytes]
    ray_tmp: Path | None = None

    def stop(self) -> None:
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGTERM)
            try:
                self.process.wait(timeout=60)
            except subprocess.TimeoutExpired:
                pass
        try:
            os.killpg(self.process.pid, signal.SIGKILL)  # the raylets and workers it started
        except ProcessLookupError:
            pass
        if self.ray_tmp is not None:
            shutil.rmtree(self.ray_tmp, ignore_errors=True)


#: Ray system settings that put every object in the object store (none inlined into a task) and make it spill
#: what it can to disk (under RAY_TMPDIR) at once: what a test reads back to see what travelled through it.
#: The driver needs them too.
SPILL_EVERYTHING = {
    "RAY_object_spilling_threshold": "0.0",
    "RAY_min_spilling_size": "1",
    "RAY_max_direct_call_object_size": "1",
}


class SpillKeeper:
    """Keeps every file the cluster spills (a hard link, so Ray deleting it once the object is freed does not
    take its content) while it runs; :meth:`stop` returns them."""

    def __init__(self, ray_tmp: Path, keep: Path) -> None:
        import threading

        self.ray_tmp, self.keep = ray_tmp, keep
        keep.mkdir(parents=True, exist_ok=True)
        self._seen: set[str] = set()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()

    def _run(self) -> None:
        while not self._stop.is_set():
            for path in self.ray_tmp.glob("ray/session_*/ray_spilled_objects*/*"):
                if str(path) not in self._seen:
                    try:
                        os.link(path, self.keep / f"{len(self._seen)}-{path.name}")
                        self._seen.add(str(path))
                    except OSError:
                        pass
            self._stop.wait(0.05)

    def stop(self) -> list[Path]:
        self._stop.set()
        self._thread.join(timeout=10)
        return sorted(self.keep.iterdir())


def start_cluster(
    directory: Path,
    timeout_s: float = 180.0,
    *,
    spill: bool = False,
    worker_env: Mapping[str, str] | None = None,
) -> RayCluster:
    """The test cluster (see the module docstring); ``spill``: its object store spills everything it can;
    ``worker_env``: variables of the worker node only (a node set up differently from the head)."""
    directory.mkdir(parents=True, exist_ok=True)
    info = directory / "cluster.json"
    if worker_env:
        (directory / WORKER_ENV).write_text(json.dumps(dict(worker_env)))
    ray_tmp = Path(tempfile.mkdtemp(prefix="dkray-", dir="/tmp"))
    env = {**os.environ, **cluster_environment(ray_tmp), **(SPILL_EVERYTHING if spill else {})}
    env["PYTHONPATH"] = os.pathsep.join(p for p in (str(ROOT / "src"), env.get("PYTHONPATH", "")) if p)
    with open(directory / "cluster.log", "wb") as log:
        process = subprocess.Popen(
            [sys.executable, "-m", "tests.helpers.raycluster", str(directory)],
            cwd=ROOT,
            env=env,
            stdout=log,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
    deadline = time.monotonic() + timeout_s
    while not info.is_file():
        if process.poll() is not None or time.monotonic() > deadline:
            RayCluster("", 0, process, ray_tmp).stop()
            text = (directory / "cluster.log").read_text(errors="replace")[-3000:]
            raise RuntimeError(f"the test Ray cluster did not start:\n{text}")
        time.sleep(0.5)
    data = json.loads(info.read_text())
    return RayCluster(data["address"], data["worker_raylet_pid"], process, ray_tmp)


def main(directory: Path) -> None:
    from ray.cluster_utils import Cluster

    cluster = Cluster(initialize_head=True, head_node_args={"num_cpus": 1, "include_dashboard": False})
    worker_env = directory / WORKER_ENV
    env_vars = json.loads(worker_env.read_text()) if worker_env.is_file() else None
    worker = cluster.add_node(num_cpus=1, env_vars=env_vars)
    cluster.wait_for_nodes()
    raylet = worker.all_processes["raylet"][0].process.pid
    stopping = False

    def stop(signum: int, frame: object) -> None:
        nonlocal stopping
        stopping = True

    signal.signal(signal.SIGTERM, stop)
    staging = directory / "cluster.json.tmp"
    staging.write_text(json.dumps({"address": cluster.address, "worker_raylet_pid": raylet}))
    staging.replace(directory / "cluster.json")
    while not stopping:
        time.sleep(0.5)
    try:
        cluster.shutdown()
    except Exception:
        pass


if __name__ == "__main__":
    main(Path(sys.argv[1]))
