"""docs/rating.md runs as written: every ``$`` command of its ``console`` blocks runs, in order, in a fresh
build of the bundled example (examples/build_example.py), and prints what the page shows: a dry-run batch
through the real Claude Code CLI whose cell runs the task's validation commands, exported for raters.

After a deliberate change of the output, rewrite the page's blocks from a real run with
``DOKIMI_REGENERATE_GUIDE=1 pytest tests/e2e/test_rating_guide.py``.
"""

from __future__ import annotations

import json
import runpy
from pathlib import Path

import pytest

from tests.helpers.guide import CTX_DIGEST, normalised, run_guide

pytestmark = [pytest.mark.docker, pytest.mark.harness, pytest.mark.slow]

ROOT = Path(__file__).resolve().parents[2]
PAGE = ROOT / "docs" / "rating.md"
SHOWN_ROOT = "/home/ada/calc"


def normalise(lines: list[str]) -> list[str]:
    """Digests and timings left out."""
    return normalised(lines, [CTX_DIGEST, (r" in \d+\.\d+s\b", " in <seconds>s")])  # pytest's own timing


def test_the_rating_page_runs_as_written(
    docker_available: bool, claude_bin: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("DOKIMI_CLAUDE_BIN", str(claude_bin))
    repo = tmp_path / "calc"
    runpy.run_path(str(ROOT / "examples" / "build_example.py"))["build_example"](repo)
    run_guide(PAGE, repo, shown_root=SHOWN_ROOT, normalise=normalise)
    blinded = tmp_path / "rating" / "blinded"
    (artifact,) = [p for p in blinded.iterdir() if p.is_dir()]
    assert "scoring rubric" in (blinded / "RUBRIC.md").read_text().lower()
    hidden = (artifact / "validation" / "1-hidden.log").read_text()
    assert "tests/test_parser.py" in hidden and "exit code 0" in hidden
    key = json.loads((tmp_path / "rating" / "key.json").read_text())
    assert "claude-haiku-4-5" not in "".join(p.read_text() for p in artifact.rglob("*") if p.is_file())
    assert key["seed"] == 7
