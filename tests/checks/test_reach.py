"""The reach probe (contract §7): each rule on its own, then whole runs against fake harnesses (offline)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from dokimi.checks.reach import (
    PROBE_FILE,
    ReachOptions,
    build_skeleton,
    check_tree_path,
    classify,
    guidance_dirs,
    parse_answer,
    plan_scenarios,
    plan_skeleton,
    refuse_guidance_ancestors,
    run_reach,
    seed_text,
    token,
)
from dokimi.errors import UsageError
from dokimi.harness.profile import load_profile
from dokimi.schemas._base import read_document
from dokimi.schemas.reach import GuidanceReach, ReachClass
from dokimi.source import open_source
from tests.helpers.git import Symlink, git, git_repo
from tests.helpers.harness import kill_strays, stray_pids
from tests.test_process_groups import GARBAGE, HANG, fake_dir, make_fake_harness, wait_for

__all__ = ["fake_dir"]  # the fixture, imported for use here

ROOT = Path(__file__).resolve().parents[2]
GLOBS = ["**/AGENTS.md", "**/CLAUDE.md", ".github/instructions/*.md"]

CAT = """#!/bin/sh
if [ "$1" = "--version" ]; then echo "fake 2.0.1"; exit 0; fi
# loads the AGENTS.md of its cwd only, like a harness without ancestor loading
cat AGENTS.md 2>/dev/null || echo "nothing here"
"""


# --- rules --------------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "path",
    ["a\\b.md", "c:/x.md", "a/../AGENTS.md", "./AGENTS.md", "a/./b.md", ".git/AGENTS.md", "x/.GIT/y",
     "/abs.md", "a//b.md"],
)  # fmt: skip
def test_a_tree_path_that_would_escape_the_workspace_is_refused(path: str) -> None:
    assert check_tree_path(path) is not None


@pytest.mark.parametrize("path", ["AGENTS.md", ".github/instructions/x.md", "a/.gitignore", "a/b.git/c"])
def test_an_ordinary_tree_path_is_accepted(path: str) -> None:
    assert check_tree_path(path) is None


def test_a_token_is_rc_plus_six_hex_digits_of_salt_path_and_position() -> None:
    import hashlib

    t = token("s", "sub/AGENTS.md", "head")
    assert t == "RC" + hashlib.sha256(b"s\0sub/AGENTS.md\0head").hexdigest()[:6]
    assert t != token("s", "sub/AGENTS.md", "tail") != token("t", "sub/AGENTS.md", "head")


def test_the_head_token_goes_after_yaml_front_matter_and_the_tail_at_the_end() -> None:
    text = "---\napplyTo: '**'\n---\n# Title\nbody"
    assert (
        seed_text(text, "RChead00", "RCtail00")
        == "---\napplyTo: '**'\n---\nRChead00\n# Title\nbody\n\nRCtail00\n"
    )


def test_without_front_matter_the_head_token_is_the_first_line() -> None:
    assert seed_text("# T\n", "RCaaaaaa", "RCbbbbbb") == "RCaaaaaa\n# T\n\nRCbbbbbb\n"
    assert seed_text("", "RCaaaaaa", "RCbbbbbb") == "RCaaaaaa\n\nRCbbbbbb\n"


def test_an_unclosed_front_matter_is_not_front_matter() -> None:
    assert seed_text("---\nno end\n", "RCaaaaaa", "RCbbbbbb").startswith("RCaaaaaa\n---\n")


@pytest.mark.parametrize(
    ("head", "tail", "read", "error", "expected"),
    [
        (True, True, False, False, ReachClass.LOADED),
        (True, False, False, False, ReachClass.TRUNCATED),
        (False, True, False, False, ReachClass.TRUNCATED),
        (True, True, True, False, ReachClass.FETCHED),
        (False, True, True, False, ReachClass.FETCHED),
        (False, False, True, False, ReachClass.NOT_LOADED),
        (False, False, False, False, ReachClass.NOT_LOADED),
        (True, True, False, True, ReachClass.ERROR),
    ],
)
def test_classes(head: bool, tail: bool, read: bool, error: bool, expected: ReachClass) -> None:
    assert classify(head=head, tail=tail, read_by_tool=read, error=error) is expected


def test_the_answer_gives_reported_unknown_and_prose() -> None:
    parsed = parse_answer("RCaaaaaa, RCffffff and RCaaaaaa. I also see RC123456", ["RCaaaaaa", "RCbbbbbb"])
    assert parsed.reported == ["RCaaaaaa"]
    assert parsed.unknown == ["RCffffff", "RC123456"]
    assert parsed.prose == 4
    assert parse_answer("NONE", ["RCaaaaaa"]).prose == 0


def test_a_guidance_file_in_an_ancestor_refuses_the_probe(tmp_path: Path) -> None:
    (tmp_path / "CLAUDE.md").write_text("host memory\n")
    with pytest.raises(UsageError, match="ancestor"):
        refuse_guidance_ancestors(tmp_path / "a" / "workspace", ["CLAUDE.md"])
    refuse_guidance_ancestors(tmp_path, ["CLAUDE.md"])  # the directory itself is not its own ancestor


def test_scenarios_root_cwd_and_read() -> None:
    names = [s.name for s in plan_scenarios([".", "sub", "a/b"], ["root", "cwd", "read"])]
    assert names == ["cwd=.", "cwd=sub", "cwd=a/b", "read=.", "read=sub", "read=a/b"]
    read = plan_scenarios([".", "sub"], ["read"], only="read=sub")[0]
    assert read.cwd == "." and read.tools == "read" and read.read_target == f"sub/{PROBE_FILE}"
    assert f"sub/{PROBE_FILE}" in read.prompt()
    assert [s.tools for s in plan_scenarios([".", "sub"], ["root", "cwd"])] == ["none", "none"]


def test_an_unknown_only_lists_the_scenarios() -> None:
    with pytest.raises(UsageError, match="cwd=sub"):
        plan_scenarios([".", "sub"], ["root", "cwd"], only="cwd=nope")
    with pytest.raises(UsageError, match="unknown scenario kind"):
        plan_scenarios(["."], ["roots"])


def test_scenarios_naming_no_kind_are_refused_rather_than_probing_nothing() -> None:
    with pytest.raises(UsageError, match="no scenario kind"):
        plan_scenarios([".", "sub"], [])


# --- the skeleton -------------------------------------------------------------------------------------------


@pytest.fixture
def fixture_repo(tmp_path: Path) -> Path:
    return git_repo(
        tmp_path / "repo",
        {
            "AGENTS.md": "# Root\nUse make.\n",
            "CLAUDE.md": Symlink("AGENTS.md"),
            "sub/AGENTS.md": "---\ndescription: sub\n---\n# Sub\n",
            "sub/code.py": "print(1)\n",
            ".github/instructions/x.md": "x rules\n",
            "docs/CLAUDE.md": Symlink("../missing.md"),
            "up/CLAUDE.md": Symlink("../../outside.md"),
            "dirlink/CLAUDE.md": Symlink("../sub"),
            "loop/CLAUDE.md": Symlink("CLAUDE.md"),
            "other/CLAUDE.md": Symlink("../notes/guide.md"),
            "notes/guide.md": "guide\n",
            ".agent-eval/AGENTS.md": "eval dir guidance is never probed\n",
            "README.md": "not guidance\n",
        },
    )


def test_the_skeleton_plan_follows_links_and_lists_the_ones_it_cannot(fixture_repo: Path) -> None:
    with open_source(str(fixture_repo)) as repo:
        snapshot = repo.eval_snapshot()
        plan = plan_skeleton(snapshot, globs=GLOBS, names=["CLAUDE.md", "AGENTS.md"], eval_dir=".agent-eval")
    assert plan.files == {
        ".github/instructions/x.md": [],
        "AGENTS.md": ["CLAUDE.md"],
        "notes/guide.md": ["other/CLAUDE.md"],
        "sub/AGENTS.md": [],
    }
    assert dict(plan.unresolved) == {
        "dirlink/CLAUDE.md": "names a directory",
        "docs/CLAUDE.md": "dangles",
        "loop/CLAUDE.md": "loops",
        "up/CLAUDE.md": "escapes the tree",
    }
    assert guidance_dirs(plan) == [".", ".github/instructions", "notes", "other", "sub"]


def test_a_guidance_path_with_a_colon_refuses_the_probe(tmp_path: Path) -> None:
    repo_path = git_repo(tmp_path / "repo", {"a:b/AGENTS.md": "x\n"})
    with open_source(str(repo_path)) as repo, pytest.raises(UsageError, match="':'"):
        plan_skeleton(repo.eval_snapshot(), globs=GLOBS, names=["AGENTS.md"], eval_dir=None)


def test_the_skeleton_is_seeded_linked_probed_and_committed_once(fixture_repo: Path, tmp_path: Path) -> None:
    dest = tmp_path / "ws"
    with open_source(f"{fixture_repo}@HEAD") as repo:
        snapshot = repo.snapshot(repo.rev or "")
        plan = plan_skeleton(snapshot, globs=GLOBS, names=["CLAUDE.md", "AGENTS.md"], eval_dir=".agent-eval")
        seeded = build_skeleton(snapshot, plan, dest, salt="s")
    by_path = {f.path: f for f in seeded}
    root = by_path["AGENTS.md"]
    assert (dest / "AGENTS.md").read_text() == f"{root.head}\n# Root\nUse make.\n\n{root.tail}\n"
    assert os.readlink(dest / "CLAUDE.md") == "AGENTS.md"
    assert [(a.path, a.alias_kind.value) for a in root.aliases] == [("CLAUDE.md", "symlink")]
    assert os.readlink(dest / "other/CLAUDE.md") == "../notes/guide.md"
    sub = (dest / "sub/AGENTS.md").read_text()
    assert sub.startswith(f"---\ndescription: sub\n---\n{by_path['sub/AGENTS.md'].head}\n")
    assert not (dest / "sub/code.py").exists() and not (dest / "README.md").exists()
    assert not (dest / ".agent-eval").exists() and not (dest / "docs/CLAUDE.md").exists()
    for d in [".", "sub", ".github/instructions", "notes", "other"]:
        assert (dest / d / PROBE_FILE).is_file()
    assert git(dest, "rev-list", "--count", "HEAD").strip() == "1"
    assert git(dest, "status", "--porcelain") == ""


def test_where_symlinks_are_refused_a_link_becomes_a_copy_and_says_so(
    fixture_repo: Path, tmp_path: Path
) -> None:
    def refuse(target: str, link: Path) -> None:
        raise OSError("symlinks are not allowed here")

    with open_source(str(fixture_repo)) as repo:
        snapshot = repo.eval_snapshot()
        plan = plan_skeleton(snapshot, globs=GLOBS, names=["CLAUDE.md"], eval_dir=".agent-eval")
        seeded = build_skeleton(snapshot, plan, tmp_path / "ws", salt="s", symlink=refuse)
    root = next(f for f in seeded if f.path == "AGENTS.md")
    assert [(a.path, a.alias_kind.value) for a in root.aliases] == [("CLAUDE.md", "copy")]
    link = tmp_path / "ws" / "CLAUDE.md"
    assert not link.is_symlink() and link.read_text() == (tmp_path / "ws" / "AGENTS.md").read_text()


# --- whole runs with fake harnesses -------------------------------------------------------------------------


def _run(repo: Path, profile_path: Path, out: Path, **kw: object) -> GuidanceReach:
    options = ReachOptions(model="m", salt="salt", timeout=kw.pop("timeout", 60.0), **kw)  # type: ignore[arg-type]
    with open_source(str(repo)) as source:
        return run_reach(
            source.eval_snapshot(),
            load_profile(profile_path),
            globs=GLOBS,
            eval_dir=None,
            out=out,
            options=options,
        )


def test_a_run_classifies_each_file_in_each_scenario_and_writes_reach_json(
    fake_dir: Path, tmp_path: Path
) -> None:
    fake = make_fake_harness(fake_dir, CAT)
    repo = git_repo(tmp_path / "repo", {"AGENTS.md": "# root\n", "sub/AGENTS.md": "# sub\n"})
    doc = _run(repo, fake.profile, tmp_path / "out", scenarios=["root", "cwd"])
    cells = {(r.scenario, r.file): r.class_ for r in doc.records}
    assert cells == {
        ("cwd=.", "AGENTS.md"): ReachClass.LOADED,
        ("cwd=.", "sub/AGENTS.md"): ReachClass.NOT_LOADED,
        ("cwd=sub", "AGENTS.md"): ReachClass.NOT_LOADED,
        ("cwd=sub", "sub/AGENTS.md"): ReachClass.LOADED,
    }
    assert doc.harness == "fake" and doc.harness_version == "2.0.1" and doc.salt == "salt"
    assert all(s.prose > 0 and s.payload_captured is False and s.error is None for s in doc.scenarios)
    assert all(r.payload is None for r in doc.records)
    written = read_document(tmp_path / "out" / "reach.json", GuidanceReach)
    assert written == doc
    assert (tmp_path / "out/traces/cwd_sub/stdout").read_text().startswith(doc.files[1].head)
    assert (tmp_path / "out/traces/cwd_sub/events.jsonl").exists()


@pytest.mark.slow
def test_a_harness_printing_garbage_gives_class_error_not_a_traceback(fake_dir: Path, tmp_path: Path) -> None:
    fake = make_fake_harness(fake_dir, GARBAGE, trace="claude-stream-json")
    repo = git_repo(tmp_path / "repo", {"AGENTS.md": "# root\n"})
    proc = subprocess.run(
        [sys.executable, str(ROOT / "cli.py"), "repo", "reach", str(repo), "--model", "m", "--harness",
         str(fake.profile), "--out", str(tmp_path / "out"), "--scenarios", "root"],
        capture_output=True, text=True, timeout=120, env={**os.environ, "PYTHONPATH": str(ROOT / "src")},
    )  # fmt: skip
    assert proc.returncode == 1, proc.stderr
    assert "Traceback" not in proc.stderr
    doc = json.loads((tmp_path / "out" / "reach.json").read_text())
    assert [r["class"] for r in doc["records"]] == ["error"]
    assert doc["scenarios"][0]["error"] == "no final result in the trace"
    assert fake.marker in (tmp_path / "out/traces/cwd_./stdout").read_text()


@pytest.mark.slow
def test_a_hanging_harness_is_an_error_at_the_timeout_and_leaves_no_orphan(
    fake_dir: Path, tmp_path: Path
) -> None:
    fake = make_fake_harness(fake_dir, HANG)
    repo = git_repo(tmp_path / "repo", {"AGENTS.md": "# root\n"})
    try:
        doc = _run(repo, fake.profile, tmp_path / "out", scenarios=["root"], timeout=2.0)
        scenario = doc.scenarios[0]
        assert scenario.timed_out and scenario.returncode is None and scenario.error == "timed out after 2 s"
        assert [r.class_ for r in doc.records] == [ReachClass.ERROR]
        assert (tmp_path / "out/traces/cwd_./stdout").read_text() == f"started {fake.marker}\n"
        assert wait_for(lambda: not stray_pids(fake.marker), 5)
    finally:
        kill_strays(fake.marker)


def test_a_repository_without_guidance_is_refused_before_any_harness_runs(
    fake_dir: Path, tmp_path: Path
) -> None:
    fake = make_fake_harness(fake_dir, CAT)
    repo = git_repo(tmp_path / "repo", {"README.md": "no guidance here\n", "docs/CLAUDE.md": Symlink("../x")})
    with pytest.raises(UsageError, match="no guidance file to probe") as info:
        _run(repo, fake.profile, tmp_path / "out")
    assert "**/AGENTS.md" in (info.value.hint or "")
    assert not (tmp_path / "out").exists()


def test_a_refused_guidance_path_is_reported_before_the_harness_binary_is_needed(
    fake_dir: Path, tmp_path: Path
) -> None:
    fake = make_fake_harness(fake_dir, CAT)
    repo = git_repo(tmp_path / "repo", {"a:b/AGENTS.md": "x\n"})
    with pytest.raises(UsageError, match="':'"):
        _run(repo, fake.profile, tmp_path / "out", bin=str(tmp_path / "no-such-harness"))


def test_dry_run_needs_an_endpoint_env(fake_dir: Path, tmp_path: Path) -> None:
    fake = make_fake_harness(fake_dir, CAT)
    repo = git_repo(tmp_path / "repo", {"AGENTS.md": "# root\n"})
    with pytest.raises(UsageError, match="endpoint_env"):
        _run(repo, fake.profile, tmp_path / "out", dry_run=True)
