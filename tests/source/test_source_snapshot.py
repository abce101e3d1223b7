from __future__ import annotations

from pathlib import Path

import pytest

from dokimi.errors import SourceError
from dokimi.source import open_source, parse_source
from tests.helpers.git import Symlink, commit, git, git_repo


def test_a_dir_with_rev_reads_blobs_of_that_commit_not_of_the_worktree(tmp_path: Path) -> None:
    repo = git_repo(tmp_path / "r", {"a.txt": "one\n", "d/b.txt": "bee\n"})
    first = commit(repo, "second", files={"a.txt": "two\n"})
    (repo / "a.txt").write_text("dirty\n")
    with open_source(f"{repo}@{first}") as source:
        snap = source.eval_snapshot()
        assert snap.read_many(["a.txt", "d/b.txt"]) == {"a.txt": b"two\n", "d/b.txt": b"bee\n"}
        assert snap.is_dir("d") and not snap.is_file("d")
    with open_source(str(repo)) as source:
        assert source.eval_snapshot().read("a.txt") == b"dirty\n"


def test_symlinks_are_followed_the_same_from_a_tree_and_from_a_commit(tmp_path: Path) -> None:
    repo = git_repo(
        tmp_path / "r",
        {
            "AGENTS.md": "guide\n",
            "CLAUDE.md": Symlink("AGENTS.md"),
            "linkdir": Symlink("src/pkg"),
            "src/pkg/core.py": "x = 1\n",
            "bad.md": Symlink("../outside.md"),
            "gone.md": Symlink("nothing.md"),
        },
    )
    sha = commit(repo, "same")
    for spec in (str(repo), f"{repo}@{sha}"):
        with open_source(spec) as source:
            snap = source.eval_snapshot()
            assert snap.read("CLAUDE.md") == b"guide\n"
            assert snap.read("CLAUDE.md", follow=False) == b"AGENTS.md"
            assert snap.resolve("linkdir/core.py").path == "src/pkg/core.py"
            assert snap.resolve("bad.md").reason == "escapes the tree"
            assert snap.resolve("gone.md").reason == "dangles"


def test_a_source_that_does_not_exist_is_a_source_error(tmp_path: Path) -> None:
    with pytest.raises(SourceError, match="no such directory"):
        parse_source(str(tmp_path / "missing"))
    with pytest.raises(SourceError, match="needs a revision"):
        parse_source("https://example.invalid/repo.git")
    spec = parse_source("git@example.invalid:org/repo@abc123")
    assert (spec.kind, spec.url, spec.rev) == ("url_rev", "git@example.invalid:org/repo", "abc123")


def test_an_unresolvable_revision_names_the_source(tmp_path: Path) -> None:
    repo = git_repo(tmp_path / "r", {"a": "1"})
    with pytest.raises(SourceError, match="does not resolve"):
        open_source(f"{repo}@deadbeef")


def test_a_file_given_as_a_source_is_named_a_file_not_a_missing_directory(tmp_path: Path) -> None:
    repo = git_repo(tmp_path / "r", {"README.md": "x\n"})
    with pytest.raises(SourceError, match="is a file, not a directory") as info:
        parse_source(str(repo / "README.md"))
    assert info.value.hint is not None and str(repo) in info.value.hint
    with pytest.raises(SourceError, match="is a file, not a directory"):
        parse_source(f"{repo / 'README.md'}@HEAD")


def test_a_subdirectory_of_a_repository_is_refused_with_the_repository_root(tmp_path: Path) -> None:
    """Manifest paths are relative to the repository root; a subdirectory would silently shift them."""
    repo = git_repo(tmp_path / "r", {"sub/a.py": "x\n"})
    with pytest.raises(SourceError, match="inside the git repository") as info:
        open_source(str(repo / "sub"))
    assert info.value.hint is not None and str(repo.resolve()) in info.value.hint


def test_a_bare_repository_without_a_revision_asks_for_one(tmp_path: Path) -> None:
    repo = git_repo(tmp_path / "r", {"a.py": "x\n"})
    bare = tmp_path / "r.git"
    git(tmp_path, "clone", "-q", "--bare", str(repo), str(bare))
    with pytest.raises(SourceError, match="has no working tree") as info:
        open_source(str(bare))
    assert info.value.hint is not None and f"{bare}@<rev>" in info.value.hint
    with open_source(f"{bare}@HEAD") as opened:
        assert opened.eval_snapshot().is_file("a.py")


def test_a_working_tree_listing_tells_untracked_names_from_index_records(tmp_path: Path) -> None:
    """One ``git ls-files`` lists the index and the untracked files: an untracked name spelled like an
    index record (mode, oid, stage, tab) stays a plain file, never a submodule."""
    repo = git_repo(tmp_path / "repo", {"a.txt": "a\n", "sub/.gitattributes": "*.bin -diff\n"})
    fake = f"160000 {'0' * 40} 0\tevil"
    (repo / fake).write_text("x\n")
    (repo / "new.txt").write_text("n\n")
    git(repo, "update-index", "--add", "--cacheinfo", f"160000,{'1' * 40},mod")
    with open_source(str(repo)) as source:
        snapshot = source.eval_snapshot()
        entries = snapshot.entries
        assert entries[fake].kind == "blob" and "evil" not in entries
        assert entries["mod"].kind == "commit"
        assert {"a.txt", "new.txt", "sub/.gitattributes"} <= set(entries)
        assert snapshot._indexed_attributes == ["sub/.gitattributes"]
