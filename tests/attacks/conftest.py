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
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from tests.helpers.builtin_example import EXAMPLE_GRADE, builtin_change, manifest_with

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
        "--harness", str(who.profile), "--bin", str(who.binary), "--agent-network", "none", "--json",
        "--allow-unchecked", *extra,
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


#: The grade entry point of a grader that runs workspace code in the grade container before the real grader
#: (what any grader that imports the package under test without isolating it does).
NAIVE_GRADE = (
    '  grade: "sh -c \'cd {run_dir}/workspace && python3 -c \\"import calc\\"; '
    "exec python3 {eval_dir}/grade.py grade --contract {run_dir}'\""
)


def _variant(
    tmp_path_factory: pytest.TempPathFactory, name: str, change: Callable[[Path], dict[str, str | None]]
) -> Example:
    """The bundled example with one more commit on its eval tree: ``change(repo)`` -> files (None: delete)."""
    from tests.helpers.git import commit

    build = runpy.run_path(str(ROOT / "examples" / "build_example.py"))["build_example"]
    dest = tmp_path_factory.mktemp(name) / "calc"
    build(dest)
    return Example(dest, commit(dest, name, files=change(dest)))


@pytest.fixture(scope="session")
def builtin_example(tmp_path_factory: pytest.TempPathFactory) -> Example:
    """The bundled example with fix_power_assoc graded by ``builtin:pytest``: its hidden tests as a test patch
    (tests/test_power_hidden.py), the oracle as ``oracle_patch``, two hidden tests as fail_to_pass. The other
    tasks are removed (their graders are the example's own)."""
    return _variant(tmp_path_factory, "builtin-example", builtin_change)


@pytest.fixture(scope="session")
def naive_example(tmp_path_factory: pytest.TempPathFactory) -> Example:
    """The bundled example whose grade entry point imports the package under test in the grade container
    before running the example's grader: the position of any grader that runs workspace code unisolated."""
    return _variant(
        tmp_path_factory,
        "naive-example",
        lambda repo: {".agent-eval/repo-eval.yaml": manifest_with(repo, (EXAMPLE_GRADE, NAIVE_GRADE))},
    )
