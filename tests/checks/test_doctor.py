"""``dokimi doctor``: each check, and the fix it names when something is missing."""

from __future__ import annotations

import json
import os
import shutil
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
