"""``dokimi doctor``: each check, and the fix it names when something is missing."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import uuid
from pathlib import Path

import pytest

from dokimi.cli.main import main


def _checks(capsys: pytest.CaptureFixture[str]) -> dict[str, dict[str, object]]:
    document = json.loads(capsys.readouterr().out)
    assert document["schema"] == "dokimi_doctor.v1"
    return {check["name"]: check for check in document["checks"]}


@pytest.mark.docker
def test_a_ready_machine_passes_and_a_missing_harness_given_by_bin_fails_with_its_fix(
    docker_available: bool, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["doctor", "--json", "--bin", str(tmp_path / "no-claude")]) == 1
    checks = _checks(capsys)
    for name in ("git", "docker client", "docker daemon", "base image"):
        assert checks[name]["status"] == "ok", checks[name]
    claude = checks["claude code"]
    assert claude["status"] == "missing" and claude["required"] is True
    assert "install-harness.sh" in str(claude["fix"])
    assert any(name.startswith("disk") for name in checks)


@pytest.mark.slow
def test_no_docker_is_missing_with_the_setup_script_as_its_fix(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    git = shutil.which("git")
    assert git is not None
    os.symlink(git, bin_dir / "git")
    monkeypatch.setenv("PATH", str(bin_dir))
    assert main(["doctor", "--json"]) == 1
    checks = _checks(capsys)
    assert checks["git"]["status"] == "ok"
    assert checks["docker client"]["status"] == "missing"
    assert "dokimi setup" in str(checks["docker client"]["fix"])
    assert "base image" not in checks  # nothing to ask a daemon that is not there
    assert checks["claude code"]["required"] is False  # recommended unless --bin names one


def _container(name: str, batch: str, owner_lock: str | None) -> None:
    labels = ["--label", "dokimi.managed=1", "--label", f"dokimi.batch={batch}"]
    if owner_lock is not None:
        labels += ["--label", f"dokimi.owner_lock={owner_lock}"]
    argv = ["docker", "run", "-d", "--name", name, *labels, "dokimi-base:bookworm", "sleep", "600"]
    subprocess.run(argv, check=True, capture_output=True, timeout=60)


def _ended_owner_lock() -> str:
    """The lock path of a dokimi process that took it and has ended."""
    code = "from dokimi.sandbox.owner import owner_lock; print(owner_lock())"
    done = subprocess.run(
        [sys.executable, "-c", code], check=True, capture_output=True, text=True, timeout=60
    )
    return done.stdout.strip()


def _names() -> set[str]:
    listed = subprocess.run(["docker", "ps", "-a", "--format", "{{.Names}}"], capture_output=True, text=True)
    return set(listed.stdout.split())


@pytest.mark.docker
def test_clean_removes_only_containers_whose_dokimi_process_ended_and_never_a_running_batchs(
    docker_available: bool, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """The old fix line removed every dokimi container on the daemon, other users' running batches
    included. Now a container is removed only when the dokimi process that started it has ended (its owner
    lock is free), only in the batch asked for, and never while a run holds that batch."""
    from dokimi.batch import batch_writer
    from dokimi.checks.doctor import clean_left_containers
    from dokimi.sandbox.owner import owner_lock

    tag = uuid.uuid4().hex[:8]
    batch, other = f"honest-doctor-{tag}", f"honest-doctor-other-{tag}"
    names = {kind: f"dokimi-test-{kind}-{tag}" for kind in ("live", "ended", "unknown", "other")}
    root = tmp_path / batch
    root.mkdir()
    try:
        _container(names["live"], batch, str(owner_lock()))  # this test's own process: it runs
        _container(names["ended"], batch, _ended_owner_lock())
        _container(names["unknown"], batch, None)  # an older dokimi's: nobody can tell
        _container(names["other"], other, _ended_owner_lock())
        with batch_writer(root, "repo run"):  # a run holds the batch: nothing of it is touched
            assert main(["doctor", "--clean-batch", str(root)]) == 2
        assert "repo run" in capsys.readouterr().err and set(names.values()) <= _names()

        assert main(["doctor", "--clean-batch", str(root), "--json"]) == 0
        report = json.loads(capsys.readouterr().out)
        assert report["removed"] == [names["ended"]]
        assert "still runs" in report["kept"][names["live"]]
        assert "cannot be told" in report["kept"][names["unknown"]]
        left = _names()
        assert names["ended"] not in left and {names["live"], names["unknown"], names["other"]} <= left

        assert clean_left_containers(batch=other).removed == [names["other"]]
    finally:
        subprocess.run(["docker", "rm", "-f", *names.values()], capture_output=True, check=False)
