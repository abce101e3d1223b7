"""docs/agent-modes.md runs as written: every ``$`` command of its ``console`` blocks runs, in order, in a
fresh build of the bundled example (examples/build_example.py), and prints what the page shows; its
``file=`` blocks are the files the reader writes.

Compared after normalising what differs from one machine to the next: the repository's path (the page shows
/home/ada/calc) and the commit, digest and image names that follow the example's content.
After a deliberate change of the output, rewrite the page's blocks from a real run with
``DOKIMI_REGENERATE_GUIDE=1 pytest tests/e2e/test_agent_modes_guide.py``.
"""

from __future__ import annotations

import runpy
from pathlib import Path

import pytest

from tests.helpers.guide import CTX_DIGEST, normalised, run_guide

pytestmark = [pytest.mark.docker, pytest.mark.harness, pytest.mark.slow]

ROOT = Path(__file__).resolve().parents[2]
PAGE = ROOT / "docs" / "agent-modes.md"
SHOWN_ROOT = "/home/ada/calc"


def normalise(lines: list[str]) -> list[str]:
    return normalised(
        lines, [(r"\b[0-9a-f]{40}\b", "<sha>"), (r"sha256:[0-9a-f]{64}", "sha256:<digest>"), CTX_DIGEST]
    )


def test_the_agent_modes_page_runs_as_written(
    docker_available: bool, claude_bin: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("DOKIMI_CLAUDE_BIN", str(claude_bin))
    repo = tmp_path / "calc"
    runpy.run_path(str(ROOT / "examples" / "build_example.py"))["build_example"](repo)
    steps = run_guide(PAGE, repo, shown_root=SHOWN_ROOT, normalise=normalise)
    commands = [s.command for s in steps if s.command]
    assert any("guidance:none@review" in c for c in commands)
