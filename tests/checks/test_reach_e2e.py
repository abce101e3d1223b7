"""repo reach with the real Claude Code CLI against the scripted model server (--dry-run, zero cost).

The scripted server answers with every token in the request bytes, and captures those bytes: the classes in
reach.json must match what the captured payload proves was sent, scenario by scenario. The loading behaviour
this pins for Claude Code 2.1.328 is recorded in docs/reach.md.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from dokimi.schemas._base import read_document
from dokimi.schemas.reach import GuidanceReach, ReachClass
from tests.helpers.git import Symlink, git_repo

ROOT = Path(__file__).resolve().parents[2]
pytestmark = pytest.mark.harness

FIXTURE: dict[str, str | Symlink] = {
    "AGENTS.md": "# Root rules\nRun make test.\n",
    "CLAUDE.md": Symlink("AGENTS.md"),
    "sub/AGENTS.md": "# Sub rules\nUse the sub toolchain.\n",
    "sub/code.py": "print(1)\n",
    ".github/instructions/x.md": "---\napplyTo: '**/*.py'\n---\nPython rules.\n",
}


def reach(
    repo: Path, claude_bin: Path, out: Path, *extra: str
) -> tuple[subprocess.CompletedProcess[str], GuidanceReach]:
    proc = subprocess.run(
        [sys.executable, str(ROOT / "cli.py"), "repo", "reach", str(repo), "--model", "claude-haiku-4-5",
         "--bin", str(claude_bin), "--dry-run", "--timeout", "120", "--salt", "e2e", "--out", str(out),
         *extra],
        capture_output=True, text=True, timeout=900, env={**os.environ, "PYTHONPATH": str(ROOT / "src")},
    )  # fmt: skip
    assert proc.returncode == 0, proc.stdout + proc.stderr
    return proc, read_document(out / "reach.json", GuidanceReach)


def test_reach_classes_match_the_captured_payload_scenario_by_scenario(
    claude_bin: Path, tmp_path: Path
) -> None:
    repo = git_repo(tmp_path / "repo", FIXTURE)
    _, doc = reach(repo, claude_bin, tmp_path / "out")
    assert doc.dry_run and doc.harness == "claude-code"
    assert [s.name for s in doc.scenarios] == [
        "cwd=.", "cwd=.github/instructions", "cwd=sub", "read=.", "read=.github/instructions", "read=sub",
    ]  # fmt: skip
    root = next(f for f in doc.files if f.path == "AGENTS.md")
    assert [(a.path, a.alias_kind.value) for a in root.aliases] == [("CLAUDE.md", "symlink")]
    for scenario in doc.scenarios:
        assert scenario.error is None and scenario.payload_captured and scenario.unknown == []
    for record in doc.records:
        assert record.payload is not None
        sent = (record.payload.head, record.payload.tail)
        expected = {
            (True, True): ReachClass.LOADED,
            (True, False): ReachClass.TRUNCATED,
            (False, True): ReachClass.TRUNCATED,
            (False, False): ReachClass.NOT_LOADED,
        }[sent]
        assert record.class_ is expected, (
            f"{record.scenario} {record.file}: payload {sent}, class {record.class_}"
        )
    read_events = (tmp_path / "out/traces/read_sub/events.jsonl").read_text()
    assert '"path": "sub/REACH_PROBE.txt"' in read_events

    if doc.harness_version == "2.1.328":  # the observed behaviour, recorded in docs/reach.md
        cells = {(r.scenario, r.file): r.class_.value for r in doc.records}
        assert {s: cells[(s, "AGENTS.md")] for s, _ in cells} == dict.fromkeys(
            [s.name for s in doc.scenarios], "loaded"
        )
        assert all(cells[(s.name, "sub/AGENTS.md")] == "not_loaded" for s in doc.scenarios)
        assert all(cells[(s.name, ".github/instructions/x.md")] == "not_loaded" for s in doc.scenarios)


def test_without_a_claude_md_nested_agents_md_loads_at_start_and_on_subtree_reads(
    claude_bin: Path, tmp_path: Path
) -> None:
    repo = git_repo(
        tmp_path / "repo", {"AGENTS.md": "# root\n", "sub/AGENTS.md": "# sub\n", "sub/a.py": "1\n"}
    )
    _, doc = reach(repo, claude_bin, tmp_path / "out")
    for record in doc.records:
        assert record.payload is not None
        assert (record.class_ is ReachClass.LOADED) == (record.payload.head and record.payload.tail)
    if doc.harness_version == "2.1.328":
        cells = {(r.scenario, r.file): r.class_.value for r in doc.records}
        assert cells == {
            ("cwd=.", "AGENTS.md"): "loaded",
            ("cwd=.", "sub/AGENTS.md"): "not_loaded",
            ("cwd=sub", "AGENTS.md"): "loaded",
            ("cwd=sub", "sub/AGENTS.md"): "loaded",
            ("read=.", "AGENTS.md"): "loaded",
            ("read=.", "sub/AGENTS.md"): "not_loaded",
            ("read=sub", "AGENTS.md"): "loaded",
            ("read=sub", "sub/AGENTS.md"): "loaded",
        }


SKILL_DESCRIPTION = "Write the release notes from the changelog. Use when asked for release notes."


def test_a_skill_is_listed_with_every_tool_on_but_never_loaded_on_its_own(
    claude_bin: Path, tmp_path: Path
) -> None:
    """The measurement docs/reach.md records for Claude Code: the body of a skill's SKILL.md reaches the model
    in no scenario, not even with every tool a run gives (all=.); with those tools its name and description
    (front matter) are listed, so the model can call the Skill tool for it. The summary says it per file."""
    repo = git_repo(
        tmp_path / "repo",
        {
            "AGENTS.md": "# Rules\nUse the release-notes skill for release notes.\n",
            ".claude/skills/release-notes/SKILL.md": (
                f"---\nname: release-notes\ndescription: {SKILL_DESCRIPTION}\n---\n# Release notes\n"
                "Run scripts/notes.py.\n"
            ),
            "scripts/notes.py": "print('notes')\n",
        },
    )
    out = tmp_path / "out"
    proc, doc = reach(repo, claude_bin, out, "--scenarios", "root,cwd,read,all")
    skill = ".claude/skills/release-notes/SKILL.md"
    names = [s.name for s in doc.scenarios]
    assert names == ["cwd=.", "cwd=.claude/skills/release-notes", "all=.", "read=.",
                     "read=.claude/skills/release-notes"]  # fmt: skip
    for record in doc.records:
        assert record.payload is not None
        assert (record.class_ is ReachClass.LOADED) == (record.payload.head and record.payload.tail)
    listed = {
        s.name: SKILL_DESCRIPTION in (out / s.trace_dir / "requests.jsonl").read_text() for s in doc.scenarios
    }
    if doc.harness_version == "2.1.328":
        cells = {(r.scenario, r.file): r.class_.value for r in doc.records}
        assert {s: cells[(s, skill)] for s in names} == dict.fromkeys(names, "not_loaded")
        assert {s: cells[(s, "AGENTS.md")] for s in names} == dict.fromkeys(names, "loaded")
        assert listed == {**dict.fromkeys(names, False), "all=.": True}
    lines = proc.stdout.splitlines()
    assert any(line.split()[:3] == [skill, "0/5", "5"] and line.endswith(" -") for line in lines), lines
    assert any(line.split()[:2] == ["AGENTS.md", "5/5"] and line.endswith("every scenario") for line in lines)
    assert len(lines) < 12  # one row per file, not one per (scenario, file)

    verbose, _ = reach(repo, claude_bin, tmp_path / "out2", "--scenarios", "root,cwd,read,all", "--verbose")
    assert sum(1 for line in verbose.stdout.splitlines() if line.strip().startswith(skill)) == 5
