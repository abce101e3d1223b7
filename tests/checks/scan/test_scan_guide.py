"""docs/scan.md runs as written: every ``$`` command of its ``console`` blocks runs, in order, in a fresh
copy of the bundled example (examples/build_example.py), and prints what the page shows; every file block
(```` ```md file=PATH ````) is a file the reader writes. After a deliberate change of the output, rewrite the
page's blocks from a real run with ``DOKIMI_REGENERATE_GUIDE=1 pytest tests/checks/scan/test_scan_guide.py``.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from tests.helpers.guide import CTX_DIGEST, run_guide

PAGE = Path(__file__).resolve().parents[3] / "docs" / "scan.md"


def normalise(lines: list[str]) -> list[str]:
    return [re.sub(*CTX_DIGEST, line) for line in lines]


@pytest.mark.docker
@pytest.mark.slow
def test_the_scan_page_runs_as_written(example: Path, docker_available: bool) -> None:
    steps = run_guide(PAGE, example, shown_root="calc", normalise=normalise)
    assert [s.command for s in steps if s.command][:2] == ["dokimi repo scan .", "dokimi repo scan . --run"]
