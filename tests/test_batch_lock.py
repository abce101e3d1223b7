"""One batch, one writer: a second repo run or regrade on a batch being written exits 2, naming the holder."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from dokimi.batch import LOCK_FILE, BatchLocked, batch_writer, load_batch
from tests.helpers.batches import write_cell
from tests.helpers.runs import dokimi_cli

HOLD = """
import sys, time
from pathlib import Path
from dokimi.batch import batch_writer
with batch_writer(Path(sys.argv[1]), "repo run"):
    print("held", flush=True)
    time.sleep(60)
"""


def test_a_second_writer_is_refused_with_the_holder_named(tmp_path: Path) -> None:
    root = tmp_path / "b1"
    with batch_writer(root, "repo run"):
        with pytest.raises(BatchLocked) as caught:
            with batch_writer(root, "repo regrade"):
                pass
    assert f"pid {os.getpid()}" in str(caught.value) and "repo run" in str(caught.value)
    with batch_writer(root, "repo regrade"):  # released on exit
        pass


def test_the_lock_file_is_not_a_cell_and_reading_needs_no_lock(tmp_path: Path) -> None:
    root = tmp_path / "b1"
    write_cell(root, "t1", "guidance:raw")
    with batch_writer(root, "repo run"):
        batch = load_batch(root)
    assert (root / LOCK_FILE).is_file()
    assert [c.status for c in batch.cells] == ["finished"]


@pytest.mark.slow
def test_repo_run_on_a_batch_another_process_writes_exits_2_naming_it(tmp_path: Path) -> None:
    out = tmp_path / "out"
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)}
    holder = subprocess.Popen(
        [sys.executable, "-c", HOLD, str(out / "shared")], stdout=subprocess.PIPE, text=True, env=env
    )
    try:
        assert holder.stdout is not None and holder.stdout.readline() == "held\n"
        start = time.monotonic()
        proc = dokimi_cli(
            ["repo", "run", str(tmp_path / "nowhere"), "--manifest", "m.yaml", "--arm", "guidance:raw",
             "--model", "m", "--reps", "1", "--batch", "shared", "--out", str(out), "--agent-network", "none"]
        )  # fmt: skip
        assert proc.returncode == 2, proc.stderr
        assert f"being written by pid {holder.pid}" in proc.stderr and "repo run" in proc.stderr
        assert time.monotonic() - start < 30  # refused at once, not after waiting
        assert "Traceback" not in proc.stderr
    finally:
        holder.kill()
        holder.wait()
        assert holder.stdout is not None
        holder.stdout.close()
    # killed without cleanup: the kernel released the lock
    with batch_writer(out / "shared", "repo run"):
        pass


def test_regrade_takes_the_same_lock(tmp_path: Path) -> None:
    from dokimi.grading.regrade import regrade_batch

    root = tmp_path / "b1"
    write_cell(root, "t1", "guidance:raw")
    with batch_writer(root, "repo run"):
        with pytest.raises(BatchLocked, match="repo run"):
            regrade_batch(root, sample=None, seed=0)
