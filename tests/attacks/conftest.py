"""The attack suite of issue 9: each attack an agent could mount through any harness, run for real.

The attacker's position is a custom harness profile whose "agent" is a shell script (tests/helpers/runs.py's
fake harness shape): it runs in the agent's container, in the workspace, as the agent's uid, and may write
anything there, including code that the grader later imports. Every attack runs through ``repo run`` (and
``repo regrade``) on the real docker daemon against the bundled example (examples/calc), and asserts that it
fails: host files untouched, secrets unread, trace and cost unforged, the verdict unflipped, both batches
intact.
"""

from __future__ import annotations

import os
import runpy
import subprocess
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
PROFILE = """\
schema: harness_profile.v1
name: attacker
bin: attacker
version_cmd: ["{bin}", "--version"]
invoke: ["{bin}", "{prompt}", "{tools}"]
tools: {none: [], read: [], all: []}
trace: text
guidance: {names: [AGENTS.md], resolution: ancestors-of-cwd}
"""


@dataclass(frozen=True)
class Example:
    repo: Path
    eval_sha: str

    def source(self) -> str:
        return f"{self.repo}@{self.eval_sha}"


@pytest.fixture(scope="session")
def example(tmp_path_factory: pytest.TempPathFactory) -> Example:
    build = runpy.run_path(str(ROOT / "examples" / "build_example.py"))["build_example"]
    dest = tmp_path_factory.mktemp("attacks") / "calc"
    shas = build(dest)
    return Example(dest, shas["eval"])


@dataclass(frozen=True)
class Attacker:
    profile: Path
    binary: Path


def attacker(directory: Path, body: str) -> Attacker:
    """A harness whose agent is ``body`` (POSIX sh, run in the workspace); it answers --version itself."""
    directory.mkdir(parents=True, exist_ok=True)
    binary = directory / "attacker"
    binary.write_text(
        '#!/bin/sh\nif [ "$1" = "--version" ]; then echo "attacker 6.6.6"; exit 0; fi\n'
        + body
        + "\necho done\n"
    )
    os.chmod(binary, 0o755)
    profile = directory / "attacker.yaml"
    profile.write_text(PROFILE)
    return Attacker(profile, binary)


def run_args(example: Example, out: Path, batch: str, who: Attacker, *extra: str) -> list[str]:
    return [
        "repo", "run", example.source(), "--manifest", ".agent-eval/repo-eval.yaml",
        "--task", "fix_power_assoc", "--arm", "guidance:raw", "--model", "m", "--reps", "1",
        "--batch", batch, "--out", str(out),
        "--harness", str(who.profile), "--bin", str(who.binary), "--agent-network", "none", "--json", *extra,
    ]  # fmt: skip


@pytest.fixture
def batch_name() -> Iterator[str]:
    yield f"attack-{uuid.uuid4().hex[:10]}"


@pytest.fixture
def host_secret(tmp_path: Path) -> Iterator[Path]:
    """A root-only file on the host (0600) the attacker aims at, outside every mount."""
    secret = tmp_path / "host" / "secret.txt"
    secret.parent.mkdir()
    secret.write_text(f"TOP-SECRET-{uuid.uuid4().hex}\n")
    secret.chmod(0o600)
    yield secret


def dokimi(args: list[str], timeout: float = 900) -> subprocess.CompletedProcess[str]:
    import sys

    return subprocess.run(
        [sys.executable, "-m", "dokimi", *args], capture_output=True, text=True, timeout=timeout, check=False
    )
