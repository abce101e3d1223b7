"""The harness executable is found one way: ``repo run`` (resolve_bin) and ``dokimi doctor`` agree."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from dokimi.checks.doctor import check_claude
from dokimi.errors import PrerequisiteError
from dokimi.harness.locate import installed_path, locate_harness
from dokimi.harness.profile import builtin_profiles, load_profile, resolve_bin
from dokimi.harness.runtime import NODE_EXECUTABLE, NODE_PACKAGE, NODE_VERSION, installed_node
from tests.helpers.harness import pinned_version


def _fake_claude(path: Path) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(f"#!/bin/sh\necho '{pinned_version('claude-code')} (Claude Code)'\n")
    path.chmod(0o755)
    return path


@pytest.fixture
def clean_env(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    for name in ("DOKIMI_CLAUDE_BIN", "DOKIMI_CLAUDE_CODE_BIN"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("DOKIMI_TOOLS", str(tmp_path / "tools"))
    monkeypatch.setenv("PATH", str(tmp_path / "bin"))
    return tmp_path


def test_the_pinned_install_is_found_by_run_and_doctor_alike(clean_env: Path) -> None:
    pinned = installed_path(load_profile("claude-code"))
    assert pinned is not None and str(pinned).startswith(str(clean_env / "tools"))
    _fake_claude(pinned)
    assert resolve_bin(load_profile("claude-code")) == pinned.resolve()
    check = check_claude(None)
    assert check.status == "ok" and str(pinned.resolve()) in check.detail


def test_the_environment_variable_wins_over_the_pinned_install(
    clean_env: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    pinned = installed_path(load_profile("claude-code"))
    assert pinned is not None
    _fake_claude(pinned)
    chosen = _fake_claude(clean_env / "elsewhere" / "claude")
    monkeypatch.setenv("DOKIMI_CLAUDE_BIN", str(chosen))
    located = locate_harness(load_profile("claude-code"))
    assert (located.path, located.detail) == (chosen.resolve(), "DOKIMI_CLAUDE_BIN")
    assert str(chosen.resolve()) in check_claude(None).detail


def test_path_is_the_last_resort(clean_env: Path) -> None:
    on_path = _fake_claude(clean_env / "bin" / "claude")
    assert resolve_bin(load_profile("claude-code")) == on_path.resolve()
    assert locate_harness(load_profile("claude-code")).origin == "PATH"


def test_nothing_found_names_every_place_looked_and_the_install_script(clean_env: Path) -> None:
    with pytest.raises(PrerequisiteError) as info:
        resolve_bin(load_profile("claude-code"))
    message = str(info.value)
    for place in ("--bin", "$DOKIMI_CLAUDE_BIN", "claude-code-linux-x64", "on PATH", "install-harness.sh"):
        assert place in message
    check = check_claude(None)
    assert check.status == "warn" and "install-harness.sh" in (check.fix or "")


@pytest.mark.slow
def test_doctor_lists_every_other_built_in_harness_with_its_pin_and_verification(
    clean_env: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from dokimi.checks.doctor import check_harnesses

    for name in builtin_profiles():
        monkeypatch.delenv(f"DOKIMI_{name.upper().replace('-', '_')}_BIN", raising=False)
    codex = installed_path(load_profile("codex"))
    assert codex is not None
    codex.parent.mkdir(parents=True)
    codex.write_text(f"#!/bin/sh\necho 'codex-cli {pinned_version('codex')}'\n")
    codex.chmod(0o755)
    checks = {c.name: c for c in check_harnesses()}
    assert set(checks) == {f"harness {n}" for n in builtin_profiles() if n != "claude-code"}
    found = checks["harness codex"]
    assert (
        found.status == "ok"
        and f"verified with {pinned_version('codex')}" in found.detail
        and str(codex) in found.detail
    )
    missing = checks["harness copilot"]
    assert missing.status == "warn" and not missing.required
    assert "install-harness.sh" in (missing.fix or "")
    aider = installed_path(load_profile("aider"))  # a Python launcher: run on the host's python3.11
    assert aider is not None
    aider.parent.mkdir(parents=True)
    aider.write_text(f"print('aider {pinned_version('aider')}')\n")
    aider.chmod(0o755)
    python = {c.name: c for c in check_harnesses()}["harness aider"]
    assert python.status == "ok" and f"verified with {pinned_version('aider')}" in python.detail
    assert "python3.11" in python.detail and "the image's python3.11" in python.detail
    codex.write_text("#!/bin/sh\necho 'codex-cli 0.170.0'\n")  # another version than the profile's pin
    other = {c.name: c for c in check_harnesses()}["harness codex"]
    assert other.status == "warn" and "a different version is installed" in other.detail


ROOT = Path(__file__).resolve().parents[2]


def _script_pin(name: str) -> list[str]:
    done = subprocess.run(
        ["bash", str(ROOT / "scripts" / "install-harness.sh"), "--pin", name],
        capture_output=True,
        text=True,
        check=True,
        timeout=60,
    )
    return done.stdout.rstrip("\n").split("\t")


@pytest.mark.parametrize("name", [*builtin_profiles(), "node"])
def test_install_harness_reads_the_one_pin_dokimi_and_the_tests_read(
    name: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A harness's version is spelled once, in its profile (Node's in dokimi.harness.runtime): the install
    script, the lookup and tests/conftest.py all read it there, and put the install at the same path."""
    if name == "node":
        pin = [NODE_VERSION, NODE_PACKAGE, NODE_EXECUTABLE]
    else:
        profile = load_profile(name)
        assert profile.verification is not None and profile.verification.executable is not None
        pin = [profile.verification.version, profile.verification.package, profile.verification.executable]
    assert _script_pin(name) == pin
    monkeypatch.setenv("DOKIMI_TOOLS", str(tmp_path))
    assert (installed_node() if name == "node" else installed_path(load_profile(name))) == (
        tmp_path / f"{name}-{pin[0]}" / pin[2]
    )
