"""repo reach with the real Gemini CLI 0.61.0 (on the pinned Node) against the scripted model server
(--dry-run): planted tokens, classes from the captured request bytes. Pins docs/reach.md for Gemini CLI."""

from __future__ import annotations

from pathlib import Path

import pytest

from dokimi.schemas.reach import GuidanceReach
from tests.e2e.reach_support import first_request, loaded_by_scenario, run_reach, trace_events

pytestmark = pytest.mark.harness

FIXTURE = {
    "GEMINI.md": "# root\n",
    "AGENTS.md": "agents\n",
    "sub/GEMINI.md": "sub\n",
    "sub/deep/GEMINI.md": "deep\n",
    "sub/code.py": "x = 1\n",
}

LOADED = {  # scenario -> the files whose two tokens were in the request (everything else: not_loaded)
    "cwd=.": {"GEMINI.md"},
    "cwd=sub": {"GEMINI.md", "sub/GEMINI.md"},
    "cwd=sub/deep": {"GEMINI.md", "sub/GEMINI.md", "sub/deep/GEMINI.md"},
    "read=.": {"GEMINI.md"},
    "read=sub": {"GEMINI.md", "sub/GEMINI.md"},
    "read=sub/deep": {"GEMINI.md", "sub/GEMINI.md", "sub/deep/GEMINI.md"},
}


def reach(
    tmp_path: Path, files: dict[str, str], gemini_bin: Path, node_bin: Path
) -> tuple[GuidanceReach, dict[str, set[str]]]:
    doc = run_reach(
        tmp_path, files, harness="gemini-cli", model="gemini-2.5-flash", bin=gemini_bin,
        env={"DOKIMI_NODE_BIN": str(node_bin)},
    )  # fmt: skip
    return doc, loaded_by_scenario(doc)


def test_gemini_loads_gemini_md_down_to_cwd_and_a_subfolders_when_a_file_there_is_read(
    gemini_bin: Path, node_bin: Path, tmp_path: Path
) -> None:
    out = tmp_path / "out"
    doc, got = reach(tmp_path, FIXTURE, gemini_bin, node_bin)
    assert got == LOADED
    # read=sub read the probe file with read_file; sub/GEMINI.md came with that tool result, not at start
    events = trace_events(out, "read_sub")
    assert '"kind": "read"' in events and "sub/REACH_PROBE.txt" in events
    sub = next(f for f in doc.files if f.path == "sub/GEMINI.md")
    assert sub.head not in first_request(out, "read_sub")


def test_the_bridge_a_gemini_md_importing_agents_md_puts_agents_md_in_the_request(
    gemini_bin: Path, node_bin: Path, tmp_path: Path
) -> None:
    from dokimi.harness.profile import load_profile

    bridge = load_profile("gemini-cli").bridge
    assert bridge is not None and (bridge.for_, bridge.write) == ("AGENTS.md", "GEMINI.md")
    files = {"AGENTS.md": "# root\n", "sub/AGENTS.md": "sub\n"}
    files |= {f"{d}{bridge.write}": bridge.content + "\n" for d in ("", "sub/")}  # as guidance:bridge writes
    _, got = reach(tmp_path, files, gemini_bin, node_bin)
    assert got["cwd=."] == {"AGENTS.md", "GEMINI.md"}
    assert got["cwd=sub"] == {"AGENTS.md", "GEMINI.md", "sub/AGENTS.md", "sub/GEMINI.md"}
