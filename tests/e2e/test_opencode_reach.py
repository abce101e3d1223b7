"""repo reach with the real OpenCode CLI 1.18.33 against the scripted model server (--dry-run): planted
tokens, classes from the captured request bytes. Pins docs/reach.md for OpenCode."""

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
    "sub/AGENTS.md": "sub\n",
    "sub/deep/AGENTS.md": "deep\n",
    "other/CLAUDE.md": "other claude\n",
}
LOADED = {  # scenario -> the files whose two tokens were in the request (everything else: not_loaded)
    "cwd=.": {"AGENTS.md"},
    "cwd=other": {"AGENTS.md"},
    "cwd=sub": {"AGENTS.md", "sub/AGENTS.md"},
    "cwd=sub/deep": {"AGENTS.md", "sub/AGENTS.md", "sub/deep/AGENTS.md"},
    "read=.": {"AGENTS.md"},
    "read=other": {"AGENTS.md", "other/CLAUDE.md"},
    "read=sub": {"AGENTS.md", "sub/AGENTS.md"},
    "read=sub/deep": {"AGENTS.md", "sub/AGENTS.md", "sub/deep/AGENTS.md"},
}


def test_opencode_loads_agents_md_down_to_cwd_and_claude_md_only_lazily_beside_one(
    opencode_bin: Path, tmp_path: Path
) -> None:
    repo = git_repo(tmp_path / "repo", FIXTURE)
    out = tmp_path / "out"
    proc = subprocess.run(
        [sys.executable, str(ROOT / "cli.py"), "repo", "reach", str(repo), "--harness", "opencode",
         "--model", "gpt-5-mini", "--bin", str(opencode_bin), "--dry-run", "--timeout", "240",
         "--salt", "e2e",
         "--out", str(out)],
        capture_output=True, text=True, timeout=1800, env={**os.environ, "PYTHONPATH": str(ROOT / "src")},
    )  # fmt: skip
    assert proc.returncode == 0, proc.stdout + proc.stderr
    doc = read_document(out / "reach.json", GuidanceReach)
    assert doc.harness == "opencode" and doc.harness_version == "1.18.33"
    for scenario in doc.scenarios:
        assert scenario.error is None and scenario.payload_captured, scenario.name
    got: dict[str, set[str]] = {}
    for record in doc.records:
        assert record.payload is not None
        assert (record.class_.value == "loaded") == (record.payload.head and record.payload.tail)
        if record.class_.value == "loaded":
            got.setdefault(record.scenario, set()).add(record.file)
    assert got == LOADED
    events = (out / "traces" / "read_other" / "events.jsonl").read_text()
    assert '"kind": "read"' in events and "other/REACH_PROBE.txt" in events
