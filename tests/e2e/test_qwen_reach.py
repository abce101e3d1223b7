"""repo reach with the real Qwen Code 0.24.4 (on the pinned Node) against the scripted model server
(--dry-run): planted tokens, classes from the captured request bytes. Pins docs/reach.md for Qwen Code."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.e2e.reach_support import loaded_by_scenario, run_reach, trace_events

pytestmark = pytest.mark.harness

FIXTURE = {
    "QWEN.md": "# root\n",
    "AGENTS.md": "agents\n",
    "CLAUDE.md": "claude\n",
    "sub/QWEN.md": "sub\n",
    "sub/AGENTS.md": "sub agents\n",
    "sub/deep/QWEN.md": "deep\n",
    "other/CLAUDE.md": "other claude\n",
}
TOP = {"QWEN.md", "AGENTS.md"}
LOADED = {  # scenario -> the files whose two tokens were in the request (everything else: not_loaded)
    "cwd=.": TOP,
    "cwd=other": TOP,
    "cwd=sub": TOP | {"sub/QWEN.md", "sub/AGENTS.md"},
    "cwd=sub/deep": TOP | {"sub/QWEN.md", "sub/AGENTS.md", "sub/deep/QWEN.md"},
    "read=.": TOP,
    "read=other": TOP,
    "read=sub": TOP,
    "read=sub/deep": TOP,
}


def reach(tmp_path: Path, files: dict[str, str], qwen_bin: Path, node_bin: Path) -> dict[str, set[str]]:
    doc = run_reach(
        tmp_path, files, harness="qwen-code", model="qwen3-coder-plus", bin=qwen_bin,
        env={"DOKIMI_NODE_BIN": str(node_bin)},
    )  # fmt: skip
    return loaded_by_scenario(doc)


def test_qwen_loads_qwen_md_and_agents_md_down_to_cwd_at_start_and_never_claude_md(
    qwen_bin: Path, node_bin: Path, tmp_path: Path
) -> None:
    assert reach(tmp_path, FIXTURE, qwen_bin, node_bin) == LOADED
    # read=sub read the probe file with read_file, and sub's guidance did not come with the result
    events = trace_events(tmp_path / "out", "read_sub")
    assert '"kind": "read"' in events and "sub/REACH_PROBE.txt" in events


def test_an_at_import_in_qwen_md_puts_the_imported_file_in_the_request(
    qwen_bin: Path, node_bin: Path, tmp_path: Path
) -> None:
    files = {"QWEN.md": "# root\n@CLAUDE.md\n", "CLAUDE.md": "claude\n", "sub/CLAUDE.md": "sub claude\n"}
    got = reach(tmp_path, files, qwen_bin, node_bin)
    assert got["cwd=."] == got["cwd=sub"] == {"QWEN.md", "CLAUDE.md"}  # a CLAUDE.md nobody imports: never
