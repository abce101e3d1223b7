"""repo reach with the real OpenCode CLI 1.18.33 against the scripted model server (--dry-run): planted
tokens, classes from the captured request bytes. Pins docs/reach.md for OpenCode."""

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
    out = tmp_path / "out"
    doc = run_reach(
        tmp_path, FIXTURE, harness="opencode", model="gpt-5-mini", bin=opencode_bin,
        timeout=240,
    )  # fmt: skip
    assert loaded_by_scenario(doc) == LOADED
    events = trace_events(out, "read_other")
    assert '"kind": "read"' in events and "other/REACH_PROBE.txt" in events
