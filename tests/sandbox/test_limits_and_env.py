"""Container caps from the manifest and the env file's private directory (no daemon needed for these)."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest

from dokimi.sandbox import container
from dokimi.sandbox.container import ContainerSpec, docker_run_argv, private_env_root, sweep_stale_env_dirs
from dokimi.sandbox.specs import limit_options
from dokimi.schemas.manifest import Image


def _value(argv: list[str], option: str) -> str:
    return argv[argv.index(option) + 1]


def test_every_container_gets_memory_and_pids_caps_by_default() -> None:
    argv = docker_run_argv(ContainerSpec(name="n", image="i", argv=["true"]), env_file=None)
    assert _value(argv, "--memory") == "8g" and _value(argv, "--memory-swap") == "8g"
    assert _value(argv, "--pids-limit") == "4096"


def test_the_manifest_sets_the_caps() -> None:
    image = Image.model_validate({"dockerfile": "Dockerfile", "limits": {"memory": "512m", "pids": 256}})
    spec = ContainerSpec(name="n", image="i", argv=["true"], **limit_options(image))
    argv = docker_run_argv(spec, env_file=None)
    assert (_value(argv, "--memory"), _value(argv, "--pids-limit")) == ("512m", "256")
    assert image.limits.workspace_mb == 20480


@pytest.mark.parametrize("memory", ["", "8 GB", "-1g", "0", "1t"])
def test_a_malformed_memory_cap_is_refused(memory: str) -> None:
    with pytest.raises(ValueError):
        Image.model_validate({"dockerfile": "Dockerfile", "limits": {"memory": memory}})


def test_env_files_of_a_killed_dokimi_are_removed_by_the_next_one(tmp_path: Path) -> None:
    root = private_env_root()
    assert root.is_relative_to(Path(os.environ["DOKIMI_HOME"]))
    assert os.stat(root).st_mode & 0o777 == 0o700
    gone = subprocess.Popen(["true"])
    gone.wait()
    stale = root / f"{gone.pid}-abcd"
    stale.mkdir()
    (stale / "env.x").write_text("ANTHROPIC_API_KEY=secret\n")
    mine = root / f"{os.getpid()}-live"
    mine.mkdir()
    assert sweep_stale_env_dirs(root) == [stale.name]
    assert not stale.exists() and mine.exists()
    mine.rmdir()


def test_the_first_container_sweeps_once_per_directory(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("DOKIMI_HOME", str(tmp_path))
    root = tmp_path / container.PRIVATE_ENV_DIR
    root.mkdir()
    gone = subprocess.Popen(["true"])
    gone.wait()
    (root / f"{gone.pid}-left").mkdir()
    assert private_env_root() == root
    assert not (root / f"{gone.pid}-left").exists()
