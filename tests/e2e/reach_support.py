"""What every per-harness reach test does the same way: run ``repo reach --dry-run`` with the real CLI against
the scripted model server, check that every scenario captured its payload, and read the result as the files
each scenario loaded. What each harness loads stays asserted in its own test file."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from dokimi.schemas._base import read_document
from dokimi.schemas.reach import GuidanceReach
from tests.helpers.git import git_repo
from tests.helpers.harness import pinned_version

ROOT = Path(__file__).resolve().parents[2]


def run_reach(
    tmp_path: Path,
    files: dict[str, str],
    *,
    harness: str,
    model: str,
    bin: Path,
    timeout: int = 120,
    env: dict[str, str] | None = None,
) -> GuidanceReach:
    """``repo reach --dry-run`` on a repository ``tmp_path/repo`` of ``files``, into ``tmp_path/out``: it
    exits 0, reports ``harness`` at its pin, and every scenario captured a request with no error."""
    repo, out = git_repo(tmp_path / "repo", files), tmp_path / "out"
    proc = subprocess.run(
        [sys.executable, str(ROOT / "cli.py"), "repo", "reach", str(repo), "--harness", harness,
         "--model", model, "--bin", str(bin), "--dry-run", "--timeout", str(timeout), "--salt", "e2e",
         "--out", str(out)],
        capture_output=True, text=True, timeout=timeout * 15 // 2,  # the scenarios run one after another
        env={**os.environ, "PYTHONPATH": str(ROOT / "src"), **(env or {})},
    )  # fmt: skip
    assert proc.returncode == 0, proc.stdout + proc.stderr
    doc = read_document(out / "reach.json", GuidanceReach)
    assert doc.harness == harness and doc.harness_version == pinned_version(harness)
    for scenario in doc.scenarios:
        assert scenario.error is None and scenario.payload_captured, scenario.name
    return doc


def loaded_by_scenario(doc: GuidanceReach) -> dict[str, set[str]]:
    """Scenario -> the files classed loaded: those both of whose tokens were in the request."""
    got: dict[str, set[str]] = {}
    for record in doc.records:
        assert record.payload is not None
        assert (record.class_.value == "loaded") == (record.payload.head and record.payload.tail)
        if record.class_.value == "loaded":
            got.setdefault(record.scenario, set()).add(record.file)
    return got


def trace_events(out: Path, scenario: str) -> str:
    """The converted trace (events.jsonl) of one scenario, as text; ``scenario`` as its folder names it."""
    return (out / "traces" / scenario / "events.jsonl").read_text()


def first_request(out: Path, scenario: str) -> str:
    """The first request the scenario's harness sent, as captured."""
    return (out / "traces" / scenario / "requests.jsonl").read_text().splitlines()[0]
