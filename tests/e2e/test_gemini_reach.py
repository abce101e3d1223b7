"""repo reach with the real Gemini CLI 0.61.0 (on the pinned Node) against the scripted model server
(--dry-run): planted tokens, classes from the captured request bytes. Pins docs/reach.md for Gemini CLI."""

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
    repo: Path, gemini_bin: Path, node_bin: Path, out: Path
) -> tuple[GuidanceReach, dict[str, set[str]]]:
    env = {**os.environ, "PYTHONPATH": str(ROOT / "src"), "DOKIMI_NODE_BIN": str(node_bin)}
    proc = subprocess.run(
        [sys.executable, str(ROOT / "cli.py"), "repo", "reach", str(repo), "--harness", "gemini-cli",
         "--model", "gemini-2.5-flash", "--bin", str(gemini_bin), "--dry-run", "--timeout", "120",
         "--salt", "e2e", "--out", str(out)],
        capture_output=True, text=True, timeout=900, env=env,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stdout + proc.stderr
    doc = read_document(out / "reach.json", GuidanceReach)
    assert doc.harness == "gemini-cli" and doc.harness_version == "0.61.0"
    for scenario in doc.scenarios:
        assert scenario.error is None and scenario.payload_captured, scenario.name
    got: dict[str, set[str]] = {}
    for record in doc.records:
        assert record.payload is not None
        assert (record.class_.value == "loaded") == (record.payload.head and record.payload.tail)
        if record.class_.value == "loaded":
            got.setdefault(record.scenario, set()).add(record.file)
    return doc, got


def test_gemini_loads_gemini_md_down_to_cwd_and_a_subfolders_when_a_file_there_is_read(
    gemini_bin: Path, node_bin: Path, tmp_path: Path
) -> None:
    repo = git_repo(tmp_path / "repo", FIXTURE)
    out = tmp_path / "out"
    doc, got = reach(repo, gemini_bin, node_bin, out)
    assert got == LOADED
    # read=sub read the probe file with read_file; sub/GEMINI.md came with that tool result, not at start
    events = (out / "traces" / "read_sub" / "events.jsonl").read_text()
    assert '"kind": "read"' in events and "sub/REACH_PROBE.txt" in events
    first = (out / "traces" / "read_sub" / "requests.jsonl").read_text().splitlines()[0]
    sub = next(f for f in doc.files if f.path == "sub/GEMINI.md")
    assert sub.head not in first


def test_the_bridge_a_gemini_md_importing_agents_md_puts_agents_md_in_the_request(
    gemini_bin: Path, node_bin: Path, tmp_path: Path
) -> None:
    from dokimi.harness.profile import load_profile

    bridge = load_profile("gemini-cli").bridge
    assert bridge is not None and (bridge.for_, bridge.write) == ("AGENTS.md", "GEMINI.md")
    files = {"AGENTS.md": "# root\n", "sub/AGENTS.md": "sub\n"}
    files |= {f"{d}{bridge.write}": bridge.content + "\n" for d in ("", "sub/")}  # as guidance:bridge writes
    _, got = reach(git_repo(tmp_path / "repo", files), gemini_bin, node_bin, tmp_path / "out")
    assert got["cwd=."] == {"AGENTS.md", "GEMINI.md"}
    assert got["cwd=sub"] == {"AGENTS.md", "GEMINI.md", "sub/AGENTS.md", "sub/GEMINI.md"}
