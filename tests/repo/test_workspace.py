"""Workspace preparation (contract §3): each of the eight steps, then all of them, on real git repos."""

from __future__ import annotations

import os
import stat
import subprocess
from collections.abc import Iterator
from pathlib import Path
from types import SimpleNamespace

import pytest

from dokimi.constants import DEFAULT_GUIDANCE_GLOBS
from dokimi.errors import UsageError, WorkspaceError
from dokimi.repo.arms import ARM_BRIDGE, ARM_NONE, ARM_RAW, Arm
from dokimi.repo.workspace import (
    NEUTRAL_EMAIL,
    BridgeSpec,
    WorkspaceSource,
    amend_commit,
    apply_arm,
    apply_review_patch,
    apply_setup_patches,
    bridge_of,
    delete_eval_dir,
    expire_reflog_and_prune,
    head_sha,
    init_and_commit,
    overlay_from_snapshot,
    patch_digest,
    prepare_workspace,
    resolve_base,
)
from dokimi.schemas.meta import Meta
from dokimi.source import Repo, open_source
from dokimi.source.export import export_tree_as_stored
from tests.helpers.git import Symlink, git, git_repo

_OPEN: list[Repo] = []


@pytest.fixture(autouse=True)
def _close_sources() -> Iterator[None]:
    """Every opened source keeps a cat-file process; close them after each test."""
    yield
    while _OPEN:
        _OPEN.pop().close()


BRIDGE = BridgeSpec(for_="AGENTS.md", write="CLAUDE.md", content="@AGENTS.md")
GUIDANCE_GLOBS = ["**/AGENTS.md", "**/CLAUDE.md", ".github/copilot-instructions.md"]

GUIDANCE_SECRET = "GUIDANCE-ONLY-TEXT-4b1d"
UNPATCHED_SECRET = "UNPATCHED-CODE-7c2e"
UPSTREAM_AUTHOR = "Upstream Person"
UPSTREAM_EMAIL = "upstream@example.org"


def _files(root: Path) -> dict[str, bytes | str]:
    """Every file under root except .git: bytes, or 'link -> target' for a symlink."""
    out: dict[str, bytes | str] = {}
    for dirpath, dirnames, filenames in os.walk(root):
        dirnames[:] = [d for d in dirnames if d != ".git"]
        for name in [*filenames, *[d for d in dirnames if os.path.islink(os.path.join(dirpath, d))]]:
            full = Path(dirpath) / name
            rel = full.relative_to(root).as_posix()
            out[rel] = f"link -> {os.readlink(full)}" if full.is_symlink() else full.read_bytes()
    return out


@pytest.fixture()
def source(tmp_path: Path) -> Path:
    """A repository with nested guidance, a CLAUDE.md link, an eval dir, CRLF, attributes, an executable."""
    repo = git_repo(
        tmp_path / "src",
        {
            "AGENTS.md": f"# root guidance {GUIDANCE_SECRET}\n",
            "CLAUDE.md": Symlink("AGENTS.md"),
            "pkg/AGENTS.md": "# pkg guidance\n",
            "pkg/mod.py": f"def f():\n    return '{UNPATCHED_SECRET}'\n",
            "lib/AGENTS.md": "# lib guidance\n",
            "lib/CLAUDE.md": "# lib has its own CLAUDE.md\n",
            ".github/copilot-instructions.md": "copilot\n",
            "crlf.txt": b"one\r\ntwo\r\n",
            "ignored.bin": b"\x00\x01kept although export-ignore\n",
            "subst.txt": "$Format:%H$\n",
            ".gitignore": "build/\n",
            "run.sh": "#!/bin/sh\necho hi\n",
            ".agent-eval/repo-eval.yaml": "schema: repo_manifest.v1\n",
            ".agent-eval/tasks/t1/task.json": "{}\n",
        },
    )
    os.chmod(repo / "run.sh", 0o755)
    # attributes that a checkout (eol) or git archive (export-ignore, export-subst) would apply
    (repo / ".gitattributes").write_text(
        "*.txt text eol=crlf\nignored.bin export-ignore\nsubst.txt export-subst\n"
    )
    (repo / "lf.txt").write_text("a\nb\n")
    # a tracked file under an ignored directory (force-added), which `git add -A` alone would drop
    (repo / "build").mkdir()
    (repo / "build" / "tracked.txt").write_text("force-added\n")
    git(repo, "add", "-f", "build/tracked.txt", "run.sh", ".gitattributes", "lf.txt")
    git(repo, "commit", "-q", "--no-gpg-sign", "-m", "base")  # not add -A: that would renormalize crlf.txt
    stored = subprocess.run(
        ["git", "cat-file", "blob", "HEAD:crlf.txt"], cwd=repo, capture_output=True, check=True
    )
    assert stored.stdout == b"one\r\ntwo\r\n"
    # the host's own configuration must not matter
    git(repo, "config", "core.autocrlf", "true")
    return repo


def _task_dir(tmp_path: Path, source: Path) -> Path:
    """A task directory with a setup patch (fixes nothing, injects text) and an mbox review patch."""
    task_dir = tmp_path / "taskdir"
    task_dir.mkdir()
    (source / "pkg" / "mod.py").write_text("def f():\n    return 'patched'\n")
    (task_dir / "bug.patch").write_text(git(source, "diff", "--", "pkg/mod.py"))
    git(source, "checkout", "--", "pkg/mod.py")
    # the review patch: a commit by an upstream author on top of the patched code, as format-patch writes it
    git(source, "checkout", "-q", "-b", "review")
    (source / "pkg" / "mod.py").write_text("def f():\n    return 'patched'\n")
    git(source, "commit", "-q", "-m", "setup", "--", "pkg/mod.py")
    (source / "pkg" / "new.py").write_text("X = 1\n")
    git(source, "add", "pkg/new.py")
    subprocess.run(
        ["git", "commit", "-q", "-m", "add new module", f"--author={UPSTREAM_AUTHOR} <{UPSTREAM_EMAIL}>"],
        cwd=source,
        check=True,
    )
    (task_dir / "review.patch").write_text(git(source, "format-patch", "-1", "--stdout"))
    git(source, "checkout", "-q", "main")
    return task_dir


# --- step 1 -------------------------------------------------------------------------------------------------


def test_export_writes_every_blob_as_git_stores_it(source: Path, tmp_path: Path) -> None:
    repo = open_source(str(source))
    _OPEN.append(repo)
    sha = git(source, "rev-parse", "HEAD").strip()
    dest = tmp_path / "ws"
    export_tree_as_stored(repo.snapshot(sha), dest)
    files = _files(dest)
    assert files["crlf.txt"] == b"one\r\ntwo\r\n"  # stored with CR LF
    assert files["lf.txt"] == b"a\nb\n"  # no autocrlf, no eol attribute
    assert files["ignored.bin"] == b"\x00\x01kept although export-ignore\n"  # no export-ignore
    assert files["subst.txt"] == b"$Format:%H$\n"  # no export-subst
    assert files["CLAUDE.md"] == "link -> AGENTS.md"
    assert files["build/tracked.txt"] == b"force-added\n"
    assert (dest / "run.sh").stat().st_mode & stat.S_IXUSR
    assert not (dest / "pkg" / "mod.py").stat().st_mode & stat.S_IXUSR
    assert not (dest / ".git").exists()


def test_export_of_a_directory_reroots_it_and_exclude_skips_a_subtree(source: Path, tmp_path: Path) -> None:
    repo = open_source(str(source))
    _OPEN.append(repo)
    snap = repo.snapshot(git(source, "rev-parse", "HEAD").strip())
    export_tree_as_stored(snap, tmp_path / "content", under=".agent-eval")
    assert sorted(_files(tmp_path / "content")) == ["repo-eval.yaml", "tasks/t1/task.json"]
    export_tree_as_stored(snap, tmp_path / "ctx", exclude=[".agent-eval/tasks"])
    assert ".agent-eval/repo-eval.yaml" in _files(tmp_path / "ctx")
    assert not (tmp_path / "ctx" / ".agent-eval" / "tasks").exists()


def test_export_refuses_a_destination_that_is_not_empty(source: Path, tmp_path: Path) -> None:
    repo = open_source(str(source))
    _OPEN.append(repo)
    (tmp_path / "full").mkdir()
    (tmp_path / "full" / "x").write_text("x")
    with pytest.raises(WorkspaceError, match="not empty"):
        export_tree_as_stored(repo.snapshot(git(source, "rev-parse", "HEAD").strip()), tmp_path / "full")


# --- step 2 -------------------------------------------------------------------------------------------------


def test_delete_eval_dir_removes_it_and_a_base_without_one_is_fine(tmp_path: Path) -> None:
    (tmp_path / "ev" / "tasks").mkdir(parents=True)
    (tmp_path / "ev" / "tasks" / "x").write_text("gold")
    assert delete_eval_dir(tmp_path, "ev") is True
    assert not (tmp_path / "ev").exists()
    assert delete_eval_dir(tmp_path, "ev") is False
    with pytest.raises(UsageError):
        delete_eval_dir(tmp_path, "../outside")


# --- step 3 -------------------------------------------------------------------------------------------------


def _exported(source: Path, tmp_path: Path) -> Path:
    repo = open_source(str(source))
    _OPEN.append(repo)
    dest = tmp_path / "ws"
    export_tree_as_stored(repo.snapshot(git(source, "rev-parse", "HEAD").strip()), dest)
    delete_eval_dir(dest, ".agent-eval")
    return dest


def test_init_and_commit_makes_one_commit_of_every_file_without_conversion(
    source: Path, tmp_path: Path
) -> None:
    dest = _exported(source, tmp_path)
    sha = init_and_commit(dest)
    assert git(dest, "rev-list", "--count", "HEAD").strip() == "1"
    tracked = set(git(dest, "ls-files").split())
    assert {"build/tracked.txt", "crlf.txt", "CLAUDE.md", "ignored.bin"} <= tracked
    stored = subprocess.run(
        ["git", "cat-file", "blob", f"{sha}:crlf.txt"], cwd=dest, capture_output=True, check=True
    )
    assert stored.stdout == b"one\r\ntwo\r\n"
    assert git(dest, "log", "-1", "--format=%an <%ae>").strip() == f"dokimi <{NEUTRAL_EMAIL}>"
    assert not (dest / ".git" / "hooks").exists()  # no template, so no sample hooks


# --- step 4 -------------------------------------------------------------------------------------------------


@pytest.mark.slow
def test_setup_patches_are_applied_and_their_sha256_recorded(source: Path, tmp_path: Path) -> None:
    task_dir = _task_dir(tmp_path, source)
    dest = _exported(source, tmp_path)
    init_and_commit(dest)
    applied = apply_setup_patches(dest, ["bug.patch"], patches_root=task_dir)
    assert applied == {"bug.patch": patch_digest(task_dir / "bug.patch")}
    assert len(applied["bug.patch"]) == 64
    assert "patched" in (dest / "pkg" / "mod.py").read_text()


@pytest.mark.slow
def test_a_setup_patch_that_does_not_apply_names_the_patch(source: Path, tmp_path: Path) -> None:
    task_dir = _task_dir(tmp_path, source)
    dest = _exported(source, tmp_path)
    init_and_commit(dest)
    (dest / "pkg" / "mod.py").write_text("something else entirely\n")
    with pytest.raises(WorkspaceError, match="setup patch bug.patch does not apply"):
        apply_setup_patches(dest, ["bug.patch"], patches_root=task_dir)
    with pytest.raises(WorkspaceError, match="not found"):
        apply_setup_patches(dest, ["missing.patch"], patches_root=task_dir)


# --- step 5 -------------------------------------------------------------------------------------------------


@pytest.mark.slow
def test_guidance_none_deletes_every_matched_file_at_every_depth(source: Path, tmp_path: Path) -> None:
    dest = _exported(source, tmp_path)
    init_and_commit(dest)
    result = apply_arm(dest, ARM_NONE, GUIDANCE_GLOBS)
    assert result.removed == (
        ".github/copilot-instructions.md",
        "AGENTS.md",
        "CLAUDE.md",
        "lib/AGENTS.md",
        "lib/CLAUDE.md",
        "pkg/AGENTS.md",
    )
    for path in result.removed:
        assert not os.path.lexists(dest / path)
    assert (dest / "pkg" / "mod.py").exists()


SKILLS = {
    ".agents/skills/release/SKILL.md": "---\nname: release\ndescription: cut a release\n---\n",
    ".agents/skills/release/scripts/notes.py": "print('notes')\n",
    ".agents/skills/release/references/steps.md": "1. tag\n",
    ".agents/config.toml": "kept = true\n",
    ".claude/skills/fmt/SKILL.md": "---\nname: fmt\ndescription: format\n---\n",
    "docs/SKILL.md": "not a skill directory: docs/ is no skills/ directory\n",
    "docs/guide.md": "kept\n",
}


@pytest.mark.slow
@pytest.mark.parametrize("globs", [DEFAULT_GUIDANCE_GLOBS, (".agents/**", "**/CLAUDE.md")])
def test_guidance_none_removes_skills_whole_and_leaves_no_empty_directory(
    tmp_path: Path, globs: tuple[str, ...]
) -> None:
    repo = git_repo(tmp_path / "skills", {"AGENTS.md": "# guide\n", "mod.py": "x = 1\n", **SKILLS})
    dest = tmp_path / "ws"
    with open_source(str(repo)) as opened:
        export_tree_as_stored(opened.snapshot(git(repo, "rev-parse", "HEAD").strip()), dest)
    init_and_commit(dest)
    result = apply_arm(dest, ARM_NONE, globs)
    release = [p for p in SKILLS if p.startswith(".agents/skills/")]
    assert set(release) <= set(result.removed)
    assert ".agents/config.toml" in result.removed or ".agents/**" not in globs
    if globs == DEFAULT_GUIDANCE_GLOBS:
        assert set(result.removed) == {"AGENTS.md", *release, ".claude/skills/fmt/SKILL.md"}
        assert not (dest / ".claude").exists() and (dest / ".agents" / "config.toml").is_file()
    else:
        assert not (dest / ".agents").exists()
    assert not (dest / ".agents" / "skills").exists()
    assert (dest / "docs" / "SKILL.md").is_file() and (dest / "mod.py").is_file()
    empty = [d for d, subdirs, files in os.walk(dest) if ".git" not in d and not subdirs and not files]
    assert empty == []


def test_an_overlay_carries_each_matched_skill_whole(tmp_path: Path) -> None:
    repo = git_repo(tmp_path / "skills", {"AGENTS.md": "# guide\n", **SKILLS})
    with open_source(str(repo)) as opened:
        snapshot = opened.snapshot(git(repo, "rev-parse", "HEAD").strip())
        overlay = overlay_from_snapshot(snapshot, DEFAULT_GUIDANCE_GLOBS, origin="tree")
    assert [f.path for f in overlay.files] == [
        ".agents/skills/release/SKILL.md",
        ".agents/skills/release/references/steps.md",
        ".agents/skills/release/scripts/notes.py",
        ".claude/skills/fmt/SKILL.md",
        "AGENTS.md",
    ]


@pytest.mark.slow
def test_guidance_raw_keeps_every_file(source: Path, tmp_path: Path) -> None:
    dest = _exported(source, tmp_path)
    init_and_commit(dest)
    before = _files(dest)
    assert apply_arm(dest, ARM_RAW, GUIDANCE_GLOBS).removed == ()
    assert _files(dest) == before


@pytest.mark.slow
def test_guidance_bridge_writes_the_bridge_next_to_every_matched_agents_md(
    source: Path, tmp_path: Path
) -> None:
    dest = _exported(source, tmp_path)
    init_and_commit(dest)
    result = apply_arm(dest, ARM_BRIDGE, GUIDANCE_GLOBS, bridge=BRIDGE)
    assert result.bridged == ("pkg/CLAUDE.md",)
    assert (dest / "pkg" / "CLAUDE.md").read_text() == "@AGENTS.md\n"
    # the root CLAUDE.md (a link) and lib/CLAUDE.md (its own text) are the repository's and stay as they are
    assert result.kept_existing == ("CLAUDE.md", "lib/CLAUDE.md")
    assert (dest / "lib" / "CLAUDE.md").read_text() == "# lib has its own CLAUDE.md\n"


@pytest.mark.slow
def test_guidance_bridge_without_a_profile_bridge_is_a_usage_error(source: Path, tmp_path: Path) -> None:
    dest = _exported(source, tmp_path)
    with pytest.raises(UsageError, match="bridge"):
        apply_arm(dest, ARM_BRIDGE, GUIDANCE_GLOBS, bridge=None)
    with pytest.raises(UsageError, match="unknown arm"):
        apply_arm(dest, Arm("guidance:extra"), GUIDANCE_GLOBS)


def test_bridge_of_reads_a_profile_object_or_a_plain_dict() -> None:
    assert bridge_of({"for": "AGENTS.md", "write": "CLAUDE.md", "content": "@AGENTS.md"}) == BRIDGE
    assert (
        bridge_of({"bridge": {"for": "AGENTS.md", "write": "CLAUDE.md", "content": "@AGENTS.md"}}) == BRIDGE
    )
    assert bridge_of(SimpleNamespace(bridge=None)) is None
    profile = SimpleNamespace(
        bridge=SimpleNamespace(for_="AGENTS.md", write="CLAUDE.md", content="@AGENTS.md")
    )
    assert bridge_of(profile) == BRIDGE


# --- step 6 -------------------------------------------------------------------------------------------------


@pytest.mark.slow
def test_amend_commit_folds_patches_and_arm_into_the_single_commit(source: Path, tmp_path: Path) -> None:
    task_dir = _task_dir(tmp_path, source)
    dest = _exported(source, tmp_path)
    first = init_and_commit(dest)
    apply_setup_patches(dest, ["bug.patch"], patches_root=task_dir)
    apply_arm(dest, ARM_NONE, GUIDANCE_GLOBS)
    amended = amend_commit(dest)
    assert amended != first
    assert git(dest, "rev-list", "--count", "HEAD").strip() == "1"
    assert git(dest, "status", "--porcelain").strip() == ""
    assert "AGENTS.md" not in git(dest, "ls-files").split()


# --- step 7 -------------------------------------------------------------------------------------------------


@pytest.mark.slow
def test_review_patch_is_the_head_commit_under_a_neutral_author(source: Path, tmp_path: Path) -> None:
    task_dir = _task_dir(tmp_path, source)
    dest = _exported(source, tmp_path)
    init_and_commit(dest)
    apply_setup_patches(dest, ["bug.patch"], patches_root=task_dir)
    amend_commit(dest)
    head = apply_review_patch(dest, task_dir / "review.patch")
    assert git(dest, "log", "-1", "--format=%s").strip() == "add new module"
    assert git(dest, "log", "-1", "--format=%an <%ae>|%cn <%ce>").strip() == (
        f"dokimi <{NEUTRAL_EMAIL}>|dokimi <{NEUTRAL_EMAIL}>"
    )
    assert git(dest, "show", "--name-only", "--format=", head).split() == ["pkg/new.py"]


@pytest.mark.slow
def test_a_review_patch_that_does_not_apply_is_aborted_and_named(source: Path, tmp_path: Path) -> None:
    task_dir = _task_dir(tmp_path, source)
    dest = _exported(source, tmp_path)
    init_and_commit(dest)
    (dest / "pkg" / "new.py").write_text("already here\n")
    amend_commit(dest)
    with pytest.raises(WorkspaceError, match="review patch review.patch does not apply"):
        apply_review_patch(dest, task_dir / "review.patch")
    assert not (dest / ".git" / "rebase-apply").exists()


# --- step 8 -------------------------------------------------------------------------------------------------


@pytest.mark.slow
def test_expire_reflog_and_prune_leaves_no_unreachable_object(source: Path, tmp_path: Path) -> None:
    dest = _exported(source, tmp_path)
    init_and_commit(dest)
    apply_arm(dest, ARM_NONE, GUIDANCE_GLOBS)
    amend_commit(dest)
    assert git(dest, "fsck", "--unreachable", "--no-reflogs").strip() != ""  # the replaced commit is there
    expire_reflog_and_prune(dest)
    assert git(dest, "fsck", "--unreachable", "--no-reflogs").strip() == ""
    assert git(dest, "reflog", "show", "--all").strip() == ""
    assert "-text" in (dest / ".git" / "info" / "attributes").read_text()  # conversions stay off


# --- all eight ----------------------------------------------------------------------------------------------


def _task(source: Path, **extra: object) -> SimpleNamespace:
    return SimpleNamespace(base=git(source, "rev-parse", "HEAD").strip(), **extra)


def _all_objects(dest: Path) -> str:
    return subprocess.run(
        ["git", "cat-file", "--batch-all-objects", "--batch"], cwd=dest, capture_output=True, check=True
    ).stdout.decode("utf-8", "replace")


@pytest.mark.slow
def test_nothing_removed_unpatched_or_upstream_is_recoverable_from_the_workspace_git(
    source: Path, tmp_path: Path
) -> None:
    task_dir = _task_dir(tmp_path, source)
    repo = open_source(str(source))
    _OPEN.append(repo)
    task = _task(source, setup_patches=["bug.patch"], review_patch="review.patch")
    prepared = prepare_workspace(
        WorkspaceSource(repo, ".agent-eval", GUIDANCE_GLOBS),
        task,
        arm=ARM_NONE,
        dest=tmp_path / "ws",
        patches_root=task_dir,
    )
    dest = prepared.path
    objects = _all_objects(dest)
    for secret in (GUIDANCE_SECRET, UNPATCHED_SECRET, UPSTREAM_AUTHOR, UPSTREAM_EMAIL, "repo_manifest.v1"):
        assert secret not in objects, secret
    assert git(dest, "fsck", "--unreachable", "--lost-found", "--no-reflogs").strip() == ""
    assert git(dest, "reflog", "show", "--all").strip() == ""
    assert not (dest / ".git" / "ORIG_HEAD").exists()
    assert git(dest, "rev-list", "--count", "HEAD").strip() == "2"
    assert git(dest, "status", "--porcelain").strip() == ""
    # every object the workspace holds is reachable from HEAD
    reachable = set(git(dest, "rev-list", "--objects", "--all").split())
    stored = set(git(dest, "cat-file", "--batch-all-objects", "--batch-check=%(objectname)").split())
    assert stored <= reachable


@pytest.mark.slow
def test_prepare_workspace_records_the_meta_fields_and_is_deterministic(source: Path, tmp_path: Path) -> None:
    task_dir = _task_dir(tmp_path, source)
    repo = open_source(str(source))
    _OPEN.append(repo)
    base = git(source, "rev-parse", "HEAD").strip()
    task = SimpleNamespace(base=base + "^{commit}", setup_patch="bug.patch", review_patch="review.patch")
    source_ = WorkspaceSource(repo, ".agent-eval", GUIDANCE_GLOBS)
    one = prepare_workspace(source_, task, arm=ARM_RAW, dest=tmp_path / "one", patches_root=task_dir)
    two = prepare_workspace(source_, task, arm=ARM_RAW, dest=tmp_path / "two", patches_root=task_dir)
    meta = one.meta_fields()
    assert meta["base_rev"] == base + "^{commit}"
    assert meta["base_sha"] == base
    assert meta["base_date"] == git(source, "log", "-1", "--format=%cI", base).strip()
    assert meta["arm"] == ARM_RAW
    assert meta["patches"] == [
        {"path": "bug.patch", "sha": patch_digest(task_dir / "bug.patch"), "kind": "setup"},
        {"path": "review.patch", "sha": patch_digest(task_dir / "review.patch"), "kind": "review"},
    ]
    assert Meta.model_validate({**meta, "task": "t", "harness": "none", "model": "none", "rep": 0})
    assert meta["start_sha"] == head_sha(one.path)
    assert one.start_sha == two.start_sha
    assert not (one.path / ".agent-eval").exists()
    assert (one.path / "AGENTS.md").exists()


def test_a_base_that_does_not_resolve_is_a_workspace_error(source: Path) -> None:
    repo = open_source(str(source))
    _OPEN.append(repo)
    with pytest.raises(WorkspaceError, match="does not resolve"):
        resolve_base(repo, "0" * 40)
