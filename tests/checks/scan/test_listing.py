"""The tree listing the scan starts from is parsed while git writes it: every path whole, in git's order."""

from __future__ import annotations

from pathlib import Path

import pytest

from dokimi.source.git import ls_tree
from tests.helpers.git import git, git_repo


@pytest.mark.slow
def test_a_listing_read_in_chunks_keeps_every_path_whole_and_in_order(tmp_path: Path) -> None:
    repo = git_repo(tmp_path / "repo", {"README.md": "x\n"})
    empty = git(repo, "hash-object", "-w", "--stdin", input="").strip()
    # multi-byte names, a tab, a link and an executable, over several 64 KB chunks of listing
    names = [f"dír-{n % 7}/fïle-{n}-ωμέγα\tx{'é' * (n % 5)}.txt" for n in range(4000)]
    info = "".join(f"100644 {empty}\t{name}\x00" for name in names)
    info += f"100755 {empty}\trun.sh\x00120000 {empty}\tlink\x00"
    git(repo, "update-index", "-z", "--add", "--index-info", input=info)
    tree = git(repo, "write-tree").strip()
    listing = git(repo, "ls-tree", "-r", "-z", "--full-tree", tree)
    assert len(listing.encode()) > 4 * 65536
    expected = [record.split("\t", 1) for record in listing.split("\0") if record]
    entries = ls_tree(repo / ".git", tree)
    assert [(e.mode, e.kind, e.oid, e.path) for e in entries.values()] == [
        (*meta.split(" "), path) for meta, path in expected
    ]
    assert list(entries) == [path for _, path in expected]
    assert entries["run.sh"].mode == "100755" and entries["link"].is_symlink


def test_the_directories_a_listing_works_out_are_the_directories_of_its_paths(tmp_path: Path) -> None:
    from dokimi.source.snapshot import Snapshot, snapshot_of_commit

    repo = git_repo(tmp_path / "repo", {"README.md": "x\n"})
    empty = git(repo, "hash-object", "-w", "--stdin", input="").strip()
    # tabs and slashes in names (the path starts after the first tab), deep and shallow, over several chunks
    names = [f"a{n % 3}/b\t{n % 11}/c/d\te-{n}.txt" for n in range(5000)] + ["top\ttab.txt", "x/y/z/w.md"]
    info = "".join(f"100644 {empty}\t{name}\x00" for name in names)
    git(repo, "update-index", "-z", "--add", "--index-info", input=info)
    tree = git(repo, "write-tree").strip()
    listed = snapshot_of_commit(repo / ".git", tree, label="t")
    assert listed._listed_parents is not None
    plain = Snapshot(label="plain", entries=dict(listed.entries))  # the directories worked out afterwards
    assert list(listed.dirs_reached) == list(plain.dirs_reached)
    assert "a1/b\t4/c" in listed.dirs and "x/y/z" in listed.dirs and "top" not in listed.dirs
    assert listed.by_basename == plain.by_basename
