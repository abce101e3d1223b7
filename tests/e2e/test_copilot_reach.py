"""repo reach with the real GitHub Copilot CLI 1.0.102 against the scripted model server (--dry-run, through
its bring-your-own-key provider): planted tokens, classes from the captured request bytes. Pins docs/reach.md
for Copilot CLI."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.e2e.reach_support import first_request, loaded_by_scenario, run_reach, trace_events

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
    out = tmp_path / "out"
    doc = run_reach(tmp_path, FIXTURE, harness="copilot", model="gpt-5-mini", bin=copilot_bin)
    assert loaded_by_scenario(doc) == LOADED
    # read=sub viewed the probe file; sub's guidance came with that, not in the first request
    events = trace_events(out, "read_sub")
    assert '"kind": "read"' in events and "sub/REACH_PROBE.txt" in events
    assert next(f for f in doc.files if f.path == "sub/AGENTS.md").head not in first_request(out, "read_sub")
