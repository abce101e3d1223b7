"""dokimi.process: the one way dokimi starts a subprocess."""

from __future__ import annotations

import os
import signal
import subprocess
import time
import uuid
from pathlib import Path

import pytest

from dokimi import process
from dokimi.errors import PrerequisiteError, ProcessError


def _pids_with(marker: str) -> list[int]:
    out = subprocess.run(["pgrep", "-f", marker], capture_output=True, text=True, check=False).stdout
    return [int(pid) for pid in out.split()]


def test_a_nonzero_exit_is_data_and_check_turns_it_into_an_error() -> None:
    done = process.run(["sh", "-c", "echo out; echo err >&2; exit 4"], timeout=10)
    assert (done.returncode, done.stdout, done.stderr, done.ok) == (4, "out\n", "err\n", False)
    with pytest.raises(ProcessError, match="exited 4") as caught:
        process.run(["sh", "-c", "echo boom >&2; exit 4"], timeout=10, check=True)
    assert "boom" in str(caught.value)


def test_a_missing_executable_is_a_prerequisite_error_with_the_fix() -> None:
    with pytest.raises(PrerequisiteError, match="not installed") as caught:
        process.run(["dokimi-no-such-tool"], timeout=5)
    assert caught.value.hint


def test_a_background_member_of_the_group_does_not_delay_the_result() -> None:
    start = time.monotonic()
    done = process.run(["sh", "-c", "echo hi; sleep 30 & echo bg"], timeout=20)
    assert done.stdout == "hi\nbg\n" and done.returncode == 0
    assert time.monotonic() - start < 10  # the group was killed when the child exited


@pytest.mark.slow
def test_a_process_that_escaped_the_group_holding_the_pipe_does_not_hang_the_caller() -> None:
    marker = f"dokimi-escaped-{uuid.uuid4().hex}"
    script = f"echo before; setsid sh -c 'sleep 60 # {marker}' & sleep 0.2; echo after"
    start = time.monotonic()
    try:
        done = process.run(["sh", "-c", script], timeout=20, bounds=process.Bounds(grace=1.0))
        assert time.monotonic() - start < 10
        assert done.stdout == "before\nafter\n" and done.returncode == 0
    finally:
        for pid in _pids_with(marker):
            os.kill(pid, signal.SIGKILL)


@pytest.mark.slow
def test_a_timeout_keeps_what_the_child_printed_and_reports_no_returncode() -> None:
    done = process.run(["sh", "-c", "echo started; sleep 30"], timeout=0.5, bounds=process.Bounds(grace=0.5))
    assert done.timed_out and done.returncode is None and done.stdout == "started\n"


def test_output_over_the_cap_keeps_head_and_tail_and_counts_the_middle(tmp_path: Path) -> None:
    script = "head -c 3000000 /dev/zero | tr '\\0' a; printf END; head -c 3000000 /dev/zero | tr '\\0' b >&2"
    out = tmp_path / "grade.stdout"
    done = process.run(
        ["sh", "-c", script],
        timeout=60,
        output=process.Output(file=out),
        bounds=process.Bounds(max_output=1_000_000),
    )
    kept = out.read_bytes()
    assert kept.startswith(b"a" * 1_000_000)
    assert kept.endswith(b"a" * (1_000_000 - 3) + b"END")
    assert b"[... 1000003 bytes omitted ...]" in kept
    assert done.stdout_omitted == 1_000_003 and len(kept) < 2_000_100
    assert done.stderr_omitted == 1_000_000 and "[... 1000000 bytes omitted ...]" in done.stderr
    assert len(done.stderr) < 2_000_100


def test_output_under_the_cap_is_kept_whole() -> None:
    done = process.run(["sh", "-c", "seq 1 1000"], timeout=10, bounds=process.Bounds(max_output=1_000_000))
    assert done.stdout == "".join(f"{i}\n" for i in range(1, 1001)) and done.stdout_omitted == 0


def test_a_link_planted_as_the_stdout_file_is_replaced_not_written_through(tmp_path: Path) -> None:
    secret = tmp_path / "secret"
    secret.write_text("keep\n")
    run_dir = tmp_path / "run"
    run_dir.mkdir()
    (run_dir / "grade.stdout").symlink_to(secret)
    process.run(["echo", "hi"], timeout=10, output=process.Output(file=run_dir / "grade.stdout"))
    assert secret.read_text() == "keep\n"
    assert (run_dir / "grade.stdout").read_text() == "hi\n"


def test_merged_stderr_goes_into_the_stdout_file_in_the_order_printed(tmp_path: Path) -> None:
    out = tmp_path / "build.log"
    script = "echo one; echo two >&2; echo three"
    done = process.run(["sh", "-c", script], timeout=10, output=process.Output(file=out, merge_stderr=True))
    assert out.read_text() == "one\ntwo\nthree\n"
    assert done.stdout == "one\ntwo\nthree\n" and done.stderr == ""
