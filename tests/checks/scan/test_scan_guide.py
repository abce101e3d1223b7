"""docs/scan.md runs as written: every ``$`` command of its ``console`` blocks runs, in order, in a fresh
copy of the bundled example (examples/build_example.py), and prints what the page shows; every file block
(```` ```md file=PATH ````) is a file the reader writes. After a deliberate change of the output, rewrite the
page's blocks from a real run with ``DOKIMI_REGENERATE_GUIDE=1 pytest tests/checks/scan/test_scan_guide.py``.
"""

from __future__ import annotations

import os
import re
from pathlib import Path

import pytest

from tests.helpers.guide import guide_steps, rewrite, run_step

PAGE = Path(__file__).resolve().parents[3] / "docs" / "scan.md"


@pytest.mark.docker
@pytest.mark.slow
def test_the_scan_page_runs_as_written(example: Path, docker_available: bool) -> None:
    lines = PAGE.read_text(encoding="utf-8").splitlines()
    steps = guide_steps(lines)
    assert [s.command for s in steps if s.command][:2] == ["dokimi repo scan .", "dokimi repo scan . --run"]
    regenerate = os.environ.get("DOKIMI_REGENERATE_GUIDE") == "1"
    outputs: dict[int, list[str]] = {}
    for step in steps:
        if step.file is not None:
            target = example / step.file
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_text(step.content, encoding="utf-8")
            continue
        assert step.command is not None
        done = run_step(step.command, example)
        assert done.returncode == 0, f"$ {step.command}\n{done.stdout}\n{done.stderr}"
        actual = [
            re.sub(r"ctx-[0-9a-f]{24}", "ctx-<digest>", line.rstrip()) for line in done.stdout.splitlines()
        ]
        outputs[step.line] = actual
        if not regenerate:
            assert actual == step.shown, f"$ {step.command}\n" + "\n".join(actual)
    if regenerate:
        rewrite(PAGE, lines, steps, outputs)
