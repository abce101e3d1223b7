"""repo reach with the real Codex CLI 0.169.0 against the scripted model server (--dry-run): planted tokens,
classes from the captured request bytes. Pins what docs/reach.md records for Codex 0.169.0."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.e2e.reach_support import loaded_by_scenario, run_reach, trace_events

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
    out = tmp_path / "out"
    doc = run_reach(tmp_path, FIXTURE, harness="codex", model="gpt-5-mini", bin=codex_bin)
    assert loaded_by_scenario(doc) == LOADED
    # the read scenarios really read the probe file (through the shell: Codex has no read tool)
    events = trace_events(out, "read_sub")
    assert "sub/REACH_PROBE.txt" in events and '"rc": 0' in events
