"""A Node harness runs on the pinned Node, never PATH's; a Python harness on a python3.11, in the container
the image's own: launchers and mounts (dokimi.harness.runtime)."""

from __future__ import annotations

import os
from pathlib import Path, PurePosixPath

import pytest

from dokimi.errors import PrerequisiteError
from dokimi.harness.runtime import (
    CONTAINER_NODE,
    container_launcher,
    harness_mounts,
    host_launcher,
    node_binary,
    package_root,
    python_binary,
)


def fake_node(path: Path, version: str) -> Path:
    path.write_text(f"#!/bin/sh\necho {version}\n")
    path.chmod(0o755)
    return path


@pytest.fixture
def prefix(tmp_path: Path) -> Path:
    script = tmp_path / "gem" / "node_modules" / "@google" / "gemini-cli" / "bundle" / "gemini.js"
    script.parent.mkdir(parents=True)
    script.write_text("console.log(1)\n")
    (tmp_path / "gem" / "node_modules" / "dep" / "node_modules").mkdir(parents=True)
    return tmp_path / "gem"


def test_a_node_script_runs_as_node_script_from_its_npm_prefix(
    prefix: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    node = fake_node(tmp_path / "node", "v22.23.5")
    monkeypatch.setenv("DOKIMI_NODE_BIN", str(node))
    script = prefix / "node_modules/@google/gemini-cli/bundle/gemini.js"
    assert package_root(script) == prefix
    assert package_root(prefix / "node_modules/dep/node_modules/x.js") == prefix  # the topmost node_modules
    assert container_launcher(script) == [
        str(CONTAINER_NODE),
        "/eval/harness/node_modules/@google/gemini-cli/bundle/gemini.js",
    ]
    assert harness_mounts(script) == [(prefix, PurePosixPath("/eval/harness")), (node, CONTAINER_NODE)]
    assert host_launcher(script) == [str(node), str(script)]


def test_a_native_binary_is_mounted_alone_and_runs_as_itself(tmp_path: Path) -> None:
    binary = fake_node(tmp_path / "codex", "codex-cli 0.169.0")
    assert harness_mounts(binary) == [(binary, PurePosixPath("/eval/harness"))]
    assert container_launcher(binary) == ["/eval/harness"] and host_launcher(binary) == [str(binary)]


def test_no_pinned_node_or_an_old_one_is_refused_never_paths_node(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("DOKIMI_NODE_BIN", str(tmp_path / "missing"))
    monkeypatch.setenv("PATH", f"{tmp_path}:{os.environ['PATH']}")
    fake_node(tmp_path / "node", "v22.0.0")  # a node on PATH is never picked up
    with pytest.raises(PrerequisiteError, match="no pinned Node") as err:
        node_binary()
    assert "install-harness.sh node" in (err.value.hint or "")
    monkeypatch.setenv("DOKIMI_NODE_BIN", str(fake_node(tmp_path / "old", "v18.19.0")))
    with pytest.raises(PrerequisiteError, match="Node 20 or later"):
        node_binary()


def test_a_python_launcher_runs_isolated_on_python311_with_its_directory_mounted(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    launcher = tmp_path / "aider-0.86.2" / "aider.py"
    launcher.parent.mkdir()
    launcher.write_text("import sys\n")
    python = fake_node(tmp_path / "python3.11", "'(3, 11)'")
    monkeypatch.setenv("DOKIMI_PYTHON_BIN", str(python))
    assert harness_mounts(launcher) == [(launcher.parent, PurePosixPath("/eval/harness"))]  # no interpreter
    assert container_launcher(launcher) == ["python3.11", "-I", "/eval/harness/aider.py"]
    assert host_launcher(launcher) == [str(python), "-I", str(launcher)]


def test_a_python_that_is_not_311_is_refused(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("DOKIMI_PYTHON_BIN", str(fake_node(tmp_path / "python3", "'(3, 12)'")))
    with pytest.raises(PrerequisiteError, match=r"is Python \(3, 12\); the harness needs Python 3.11"):
        python_binary()
    monkeypatch.setenv("DOKIMI_PYTHON_BIN", str(tmp_path / "missing"))
    with pytest.raises(PrerequisiteError, match="no python3.11 is at"):
        python_binary()
