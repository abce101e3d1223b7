"""The built wheel carries everything dokimi needs at run time: built from this checkout, installed in a fresh
venv outside it (no PYTHONPATH, no editable install), and run from there: ``dokimi setup`` (the base-image
script ships in the package), ``repo validate``, ``repo scan`` and a dry run of one cell through the real
Claude Code CLI and the scripted model server.

The test prints the venv's size (the install size people pay) and checks that the test-only and GPL packages
are not pulled in.
"""

from __future__ import annotations

import json
import os
import runpy
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = [pytest.mark.docker, pytest.mark.harness, pytest.mark.slow]

ROOT = Path(__file__).resolve().parents[1]
TASK = "fix_power_assoc"


def _run(
    argv: list[str], *, cwd: Path, env: dict[str, str], timeout: float = 600
) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        argv, cwd=cwd, env=env, capture_output=True, text=True, timeout=timeout, check=False
    )


def _size_mb(path: Path) -> float:
    return sum(p.stat().st_size for p in path.rglob("*") if p.is_file() and not p.is_symlink()) / 1e6


def test_the_wheel_installed_in_a_fresh_venv_validates_scans_and_runs_a_dry_run(
    docker_available: bool, claude_bin: Path, tmp_path: Path
) -> None:
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "PYTHONHOME", "VIRTUAL_ENV")}
    dist = tmp_path / "dist"
    built = _run(
        [sys.executable, "-m", "pip", "wheel", "--no-deps", "-q", "-w", str(dist), str(ROOT)],
        cwd=tmp_path,
        env=env,
    )
    assert built.returncode == 0, built.stderr
    (wheel,) = dist.glob("dokimi_eval-*.whl")

    venv = tmp_path / "venv"
    assert _run([sys.executable, "-m", "venv", str(venv)], cwd=tmp_path, env=env).returncode == 0
    python, dokimi = venv / "bin" / "python", venv / "bin" / "dokimi"
    installed = _run([str(python), "-m", "pip", "install", "-q", str(wheel)], cwd=tmp_path, env=env)
    assert installed.returncode == 0, installed.stderr
    site = _run([str(python), "-c", "import dokimi; print(dokimi.__file__)"], cwd=tmp_path, env=env)
    assert Path(site.stdout.strip()).is_relative_to(venv), site.stdout  # not the checkout
    listed = _run([str(python), "-m", "pip", "list", "--format", "json"], cwd=tmp_path, env=env)
    names = {p["name"].lower() for p in json.loads(listed.stdout)}
    assert "dokimi-eval" in names and "tree-sitter-bash" in names
    assert not names & {"statsmodels", "pandas", "patsy", "bashlex"}
    print(f"\ninstall size: {_size_mb(venv):.0f} MB for the venv ({len(names)} distributions, pip included)")

    setup = _run([str(dokimi), "setup"], cwd=tmp_path, env=env, timeout=1800)
    assert setup.returncode == 0, setup.stderr
    assert "base_image.sh" in setup.stderr and str(venv) in setup.stderr

    example = tmp_path / "calc"
    runpy.run_path(str(ROOT / "examples" / "build_example.py"))["build_example"](example)
    source, manifest = f"{example}@HEAD", ".agent-eval/repo-eval.yaml"
    validated = _run([str(dokimi), "repo", "validate", source, "--manifest", manifest], cwd=tmp_path, env=env)
    assert validated.returncode == 0, validated.stdout + validated.stderr
    scanned = _run(
        [str(dokimi), "repo", "scan", source, "--manifest", manifest, "--fail-on-fail", "--json"],
        cwd=tmp_path,
        env=env,
    )
    assert scanned.returncode == 0, scanned.stderr
    assert json.loads(scanned.stdout)["counts"]["fail"] == 0

    out = tmp_path / "runs"
    ran = _run(
        [
            str(dokimi),
            "repo",
            "run",
            source,
            "--manifest",
            manifest,
            "--task",
            TASK,
            "--arm",
            "guidance:raw",
            "--model",
            "claude-haiku-4-5",
            "--reps",
            "1",
            "--batch",
            "wheel",
            "--out",
            str(out),
            "--bin",
            str(claude_bin),
            "--dry-run",
            "--json",
        ],  # fmt: skip
        cwd=tmp_path,
        env=env,
    )
    assert ran.returncode == 0, ran.stdout + ran.stderr
    assert json.loads(ran.stdout)["ran"] == 1
    (result,) = (out / "wheel").glob("*/*/*/*/rep*/result.json")
    assert json.loads(result.read_text())["passed"] is True

    # the report site's table script ships as package data: the index page inlines it
    pages = tmp_path / "report-site"
    reported = _run(
        [str(dokimi), "repo", "report", str(out / "wheel"), "--html", str(pages)], cwd=tmp_path, env=env
    )
    assert reported.returncode == 0, reported.stdout + reported.stderr
    assert 'data-tables", "ready"' in (pages / "index.html").read_text()
