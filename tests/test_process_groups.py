"""A harness runs in its own process group: a timeout, SIGTERM or SIGHUP to dokimi kills the whole group and
leaves no orphan; what the harness printed before the kill is kept; the CLI ends with the signal it got."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from dokimi import process
from tests.helpers.git import git_repo
from tests.helpers.harness import harness_dir, kill_strays, stray_pids

ROOT = Path(__file__).resolve().parents[1]

HANG = """#!/bin/sh
if [ "$1" = "--version" ]; then echo "9.9.9 (fake)"; exit 0; fi
echo "started {marker}"
"$(dirname "$0")/sleep-{marker}" 1000 &
wait
"""

GARBAGE = """#!/bin/sh
if [ "$1" = "--version" ]; then echo "1.0.0"; exit 0; fi
echo "this is not JSON {marker}"
echo "{{ neither is this"
"""

PROFILE = """\
schema: harness_profile.v1
name: fake
bin: {bin}
version_cmd: ["{{bin}}", "--version"]
invoke: ["{{bin}}", "{{prompt}}", "--model", "{{model}}", "{{tools}}"]
tools: {{none: [], read: ["--read"], all: []}}
config_dir_env: FAKE_CONFIG_DIR
env_allow: [PATH]
trace: {trace}
guidance: {{names: [AGENTS.md], resolution: ancestors-of-cwd}}
"""


@dataclass(frozen=True)
class FakeHarness:
    script: Path
    profile: Path
    marker: str


@pytest.fixture
def fake_dir() -> Iterator[Path]:
    """A directory the harness user (uid 1000 when the tests run as root) can read and execute."""
    with harness_dir("dokimi-fake-harness-") as path:
        yield path


def make_fake_harness(directory: Path, body: str, *, trace: str = "text") -> FakeHarness:
    marker = f"dokimi-marker-{uuid.uuid4().hex[:12]}"
    script = directory / "fake-harness"
    script.write_text(body.format(marker=marker))
    script.chmod(0o755)
    sleep = directory / f"sleep-{marker}"
    sleep.symlink_to("/bin/sleep")
    profile = directory / "fake.yaml"
    profile.write_text(PROFILE.format(bin=script, trace=trace))
    return FakeHarness(script, profile, marker)


def wait_for(predicate: object, timeout: float = 60.0) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if predicate():  # type: ignore[operator]
            return True
        time.sleep(0.1)
    return False


@pytest.mark.slow
def test_a_hanging_harness_is_killed_at_its_timeout_with_its_whole_group(fake_dir: Path) -> None:
    fake = make_fake_harness(fake_dir, HANG)
    try:
        done = process.run([str(fake.script), "go"], timeout=1.5, bounds=process.Bounds(grace=1.0))
        assert done.timed_out and done.returncode is None
        assert f"started {fake.marker}" in done.stdout, "output up to the kill is kept"
        assert wait_for(lambda: not stray_pids(fake.marker), 5), "the grandchild sleep outlived the group"
    finally:
        kill_strays(fake.marker)


@pytest.mark.slow
def test_output_written_to_a_file_survives_the_timeout_kill(fake_dir: Path, tmp_path: Path) -> None:
    fake = make_fake_harness(fake_dir, HANG)
    try:
        out = tmp_path / "stdout"
        done = process.run(
            [str(fake.script), "go"],
            timeout=1.0,
            bounds=process.Bounds(grace=0.5),
            output=process.Output(file=out),
        )
        assert done.timed_out
        assert out.read_text() == f"started {fake.marker}\n" == done.stdout
        assert wait_for(lambda: not stray_pids(fake.marker), 5)
    finally:
        kill_strays(fake.marker)


@pytest.mark.slow
@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGHUP], ids=["SIGTERM", "SIGHUP"])
def test_a_signal_to_the_cli_kills_the_harness_group_and_the_cli_ends_with_it(
    sig: signal.Signals, fake_dir: Path, tmp_path: Path
) -> None:
    fake = make_fake_harness(fake_dir, HANG)
    repo = git_repo(tmp_path / "repo", {"AGENTS.md": "# rules\n"})
    scratch = tmp_path / "scratch"
    scratch.mkdir()
    argv = [sys.executable, str(ROOT / "cli.py"), "repo", "reach", str(repo), "--model", "m",
            "--harness", str(fake.profile), "--timeout", "300", "--out", str(tmp_path / "out")]  # fmt: skip
    cli = subprocess.Popen(
        argv,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        env={**os.environ, "PYTHONPATH": str(ROOT / "src"), "TMPDIR": str(scratch)},
    )
    try:
        assert wait_for(lambda: stray_pids(fake.marker) or cli.poll() is not None), (
            "the harness never started"
        )
        assert cli.poll() is None, cli.stderr.read().decode() if cli.stderr else ""
        assert stray_pids(fake.marker)
        cli.send_signal(sig)
        rc = cli.wait(timeout=30)
        assert rc == -sig, f"the CLI must end with {sig.name}, got {rc}"
        assert wait_for(lambda: not stray_pids(fake.marker), 5), "the harness group outlived the CLI"
        assert sorted(p.name for p in scratch.iterdir() if not p.name.startswith("dokimi-bin-")) == [], (
            "the CLI left its temporary skeleton behind"
        )
    finally:
        if cli.poll() is None:
            cli.kill()
            cli.wait()
        if cli.stderr:
            cli.stderr.close()
        kill_strays(fake.marker)
