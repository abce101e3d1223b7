"""docs/your-repo.md runs as written: every ``$`` command of its ``console`` blocks runs, in order, in a fresh
copy of the guide's example repository (tests/helpers/inventory.py), and prints what the guide shows; every
```` ```json file=PATH ```` or ```` ```yaml file=PATH ```` block is the file the reader writes.

Compared after normalising what differs from one machine to the next: the repository's path (the guide shows
/home/ada/inventory) and image digests. Costs are compared as shown: the scripted model's usage is fixed per
answer, so a dry run costs the same on every machine. After a deliberate change of the output, rewrite the
guide's blocks from a real run with ``DOKIMI_REGENERATE_GUIDE=1 pytest tests/e2e/test_your_repo_guide.py``.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.helpers.guide import CTX_DIGEST, normalised, run_guide
from tests.helpers.inventory import make_inventory

pytestmark = [pytest.mark.docker, pytest.mark.harness]

GUIDE = Path(__file__).resolve().parents[2] / "docs" / "your-repo.md"
SHOWN_ROOT = "/home/ada/inventory"


def normalise(lines: list[str], root: Path | None = None) -> list[str]:
    if root is not None:
        lines = [line.replace(str(root), SHOWN_ROOT) for line in lines]
    return normalised(lines, [CTX_DIGEST])


def test_the_guide_runs_as_written(
    docker_available: bool, claude_bin: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("DOKIMI_CLAUDE_BIN", str(claude_bin))
    repo = tmp_path / "inventory"
    make_inventory(repo)
    steps = run_guide(GUIDE, repo, shown_root=SHOWN_ROOT, normalise=normalise)
    assert [s.command for s in steps if s.command and s.command.startswith("dokimi")][:2] == [
        "dokimi repo init",
        "dokimi repo task new fix_total --from-commit b4edf16",
    ]
