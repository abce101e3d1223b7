"""repo reach with the real Codex CLI 0.169.0 against the scripted model server (--dry-run): planted tokens,
classes from the captured request bytes. Pins what docs/reach.md records for Codex 0.169.0."""

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
    "sub/deep/AGENTS.override.md": "override\n",
    "other/AGENTS.md": "other\n",
}

LOADED = {  # scenario -> the files whose two tokens were in the request (everything else: not_loaded)
    "cwd=.": {"AGENTS.md"},
    "cwd=other": {"AGENTS.md", "other/AGENTS.md"},
    "cwd=sub": {"AGENTS.md", "sub/AGENTS.md"},
    "cwd=sub/deep": {"AGENTS.md", "sub/AGENTS.md", "sub/deep/AGENTS.override.md"},
    "read=.": {"AGENTS.md"},
    "read=other": {"AGENTS.md"},
    "read=sub": {"AGENTS.md"},
    "read=sub/deep": {"AGENTS.md"},
}


def test_codex_loads_agents_md_from_the_git_root_down_to_cwd_override_replaces_never_below(
    codex_bin: Path, tmp_path: Path
) -> None:
    repo = git_repo(tmp_path / "repo", FIXTURE)
    out = tmp_path / "out"
    proc = subprocess.run(
        [sys.executable, str(ROOT / "cli.py"), "repo", "reach", str(repo), "--harness", "codex",
         "--model", "gpt-5-mini", "--bin", str(codex_bin), "--dry-run", "--timeout", "120", "--salt", "e2e",
         "--out", str(out)],
        capture_output=True, text=True, timeout=900, env={**os.environ, "PYTHONPATH": str(ROOT / "src")},
    )  # fmt: skip
    assert proc.returncode == 0, proc.stdout + proc.stderr
    doc = read_document(out / "reach.json", GuidanceReach)
    assert doc.harness == "codex" and doc.harness_version == "0.169.0"
    for scenario in doc.scenarios:
        assert scenario.error is None and scenario.payload_captured, scenario.name
    got: dict[str, set[str]] = {}
    for record in doc.records:
        assert record.payload is not None
        assert (record.class_.value == "loaded") == (record.payload.head and record.payload.tail)
        if record.class_.value == "loaded":
            got.setdefault(record.scenario, set()).add(record.file)
    assert got == LOADED
    # the read scenarios really read the probe file (through the shell: Codex has no read tool)
    events = (out / "traces" / "read_sub" / "events.jsonl").read_text()
    assert "sub/REACH_PROBE.txt" in events and '"rc": 0' in events
