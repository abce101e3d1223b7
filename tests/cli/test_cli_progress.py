"""Long work shows progress on a terminal and stays quiet when not on one (repo run, with real containers)."""

from __future__ import annotations

import os
import pty
import re
import select
import subprocess
import sys
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.helpers.runs import dokimi_cli, fake_harness, remove_tiny_images, run_args, tiny_repo

pytestmark = pytest.mark.docker


@pytest.fixture
def name() -> Iterator[str]:
    yield f"progress-{uuid.uuid4().hex[:10]}"
    remove_tiny_images()


def run_on_a_terminal(args: list[str], timeout: float = 600) -> tuple[int, str]:
    """Run ``python -m dokimi ARGS`` with stdout and stderr on a pseudo-terminal; return its exit code and
    everything it drew."""
    leader, follower = pty.openpty()
    proc = subprocess.Popen(
        [sys.executable, "-m", "dokimi", *args],
        stdin=subprocess.DEVNULL,
        stdout=follower,
        stderr=follower,
        env={**os.environ, "COLUMNS": "120", "TERM": "xterm"},
    )
    os.close(follower)
    drawn = bytearray()
    try:
        while True:
            ready, _, _ = select.select([leader], [], [], timeout)
            if not ready:
                raise AssertionError("the command printed nothing for too long")
            try:
                chunk = os.read(leader, 65536)
            except OSError:  # EIO: the other side closed
                break
            if not chunk:
                break
            drawn += chunk
    finally:
        os.close(leader)
        rc = proc.wait(timeout=timeout)
    return rc, drawn.decode("utf-8", "replace")


def test_repo_run_draws_a_progress_bar_on_a_terminal_only(
    docker_available: bool, tmp_path: Path, name: str
) -> None:
    tiny = tiny_repo(tmp_path / "tiny")
    profile, binary = fake_harness(tmp_path / "harness")
    args = run_args(tiny, tmp_path / "out", name, profile, binary, reps=2)
    rc, drawn = run_on_a_terminal(args)
    assert rc == 0, drawn
    plain = re.sub(r"\x1b\[[0-9;?]*[A-Za-z]", "", drawn)
    # the bar, half way: only the bar ever shows 1 of the 2 cells done (the final table says 2/2)
    assert re.search(r"cells ━+.* 1/2 ", plain), plain
    piped = dokimi_cli([*run_args(tiny, tmp_path / "out2", name, profile, binary, reps=2)])
    assert piped.returncode == 0, piped.stderr
    assert "━" not in piped.stderr and "\x1b[" not in piped.stderr  # no bar, no escape codes
