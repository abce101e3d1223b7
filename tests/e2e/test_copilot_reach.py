"""repo reach with the real GitHub Copilot CLI 1.0.102 against the scripted model server (--dry-run, through
its bring-your-own-key provider): planted tokens, classes from the captured request bytes. Pins docs/reach.md
for Copilot CLI."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from dokimi.schemas._base import read_document
from dokimi.schemas.reach import GuidanceReach
from tests.helpers.git import git_repo

ROOT = Path(__file__).resolve().parents[2]
pytestmark = pytest.mark.harness

FIXTURE = {
    "AGENTS.md": "# root\n",
    "CLAUDE.md": "claude\n",
    "GEMINI.md": "gemini\n",
    ".github/copilot-instructions.md": "copilot\n",
    "sub/AGENTS.md": "sub\n",
    "sub/CLAUDE.md": "sub claude\n",
    "sub/deep/AGENTS.md": "deep\n",
}
ROOT_FILES = {"AGENTS.md", "CLAUDE.md", "GEMINI.md", ".github/copilot-instructions.md"}
SUB = {"sub/AGENTS.md", "sub/CLAUDE.md"}
LOADED = {  # scenario -> the files whose two tokens were in the request (everything else: not_loaded)
    "cwd=.": ROOT_FILES,
    "cwd=.github": ROOT_FILES,
    "cwd=sub": ROOT_FILES | SUB,
    "cwd=sub/deep": ROOT_FILES | SUB | {"sub/deep/AGENTS.md"},
    "read=.": ROOT_FILES,
    "read=.github": ROOT_FILES,
    "read=sub": ROOT_FILES | SUB,
    "read=sub/deep": ROOT_FILES | SUB | {"sub/deep/AGENTS.md"},
}


def test_copilot_loads_every_name_down_to_cwd_and_a_subfolders_when_a_file_there_is_viewed(
    copilot_bin: Path, tmp_path: Path
) -> None:
    repo = git_repo(tmp_path / "repo", FIXTURE)
    out = tmp_path / "out"
    proc = subprocess.run(
        [sys.executable, str(ROOT / "cli.py"), "repo", "reach", str(repo), "--harness", "copilot",
         "--model", "gpt-5-mini", "--bin", str(copilot_bin), "--dry-run", "--timeout", "120", "--salt", "e2e",
         "--out", str(out)],
        capture_output=True, text=True, timeout=900, env={**os.environ, "PYTHONPATH": str(ROOT / "src")},
    )  # fmt: skip
    assert proc.returncode == 0, proc.stdout + proc.stderr
    doc = read_document(out / "reach.json", GuidanceReach)
    assert doc.harness == "copilot" and doc.harness_version == "1.0.102"
    for scenario in doc.scenarios:
        assert scenario.error is None and scenario.payload_captured, scenario.name
    got: dict[str, set[str]] = {}
    for record in doc.records:
        assert record.payload is not None
        assert (record.class_.value == "loaded") == (record.payload.head and record.payload.tail)
        if record.class_.value == "loaded":
            got.setdefault(record.scenario, set()).add(record.file)
    assert got == LOADED
    # read=sub viewed the probe file; sub's guidance came with that, not in the first request
    events = (out / "traces" / "read_sub" / "events.jsonl").read_text()
    assert '"kind": "read"' in events and "sub/REACH_PROBE.txt" in events
    first = (out / "traces" / "read_sub" / "requests.jsonl").read_text().splitlines()[0]
    assert next(f for f in doc.files if f.path == "sub/AGENTS.md").head not in first
