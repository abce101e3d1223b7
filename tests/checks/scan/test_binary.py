"""An identifier found only in binary files is not found, by git's binary rule (what ``git grep -I`` skips).

The scan greps with ``-a`` and applies the rule afterwards to the files that matched; these tests hold that to
what git itself decides, for every way the rule can go: a NUL in the first 8,000 bytes, ``-diff``, ``diff``,
the ``binary`` macro, ``diff=NAME`` with and without ``diff.NAME.binary``, and a macro from info/attributes.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from dokimi.source import open_source
from tests.checks.scan._util import rows, scan_dir
from tests.helpers.git import FileContent, bare_clone_for_serving, commit, git, git_repo, head

WORD = b"magic_word"

#: path -> (content, binary by git's rule)
RULE_CASES: dict[str, tuple[bytes, bool]] = {
    "plain.bin": (WORD + b"\0x\n", True),  # a NUL early: binary
    "late.big": (b"a" * 8000 + b"\0" + WORD + b"\n", False),  # the NUL is byte 8001: text
    "early.big": (b"a" * 7999 + b"\0" + WORD + b"\n", True),  # byte 8000: binary
    "nodiff.txt": (WORD + b"\n", True),  # -diff
    "diffset.dat": (WORD + b"\0\n", False),  # diff (set) is text even with a NUL
    "macro.m": (WORD + b"\n", True),  # the binary macro unsets diff
    "unknown.x": (WORD + b"\0\n", True),  # diff=foo, no such driver: the NUL decides
    "textdriver.y": (WORD + b"\0\n", False),  # diff=bar with diff.bar.binary=false
    "bindriver.z": (WORD + b"\n", True),  # diff=baz with diff.baz.binary=true
    "builtin.py": (WORD + b"\0\n", True),  # diff=python (built in, no binary setting): the NUL decides
    "viainfo.q": (WORD + b"\n", True),  # a macro defined in info/attributes that unsets diff
    "text.md": (WORD + b"\n", False),
}
ATTRIBUTES = """\
nodiff.txt -diff
diffset.dat diff
macro.m binary
unknown.x diff=foo
textdriver.y diff=bar
bindriver.z diff=baz
builtin.py diff=python
viainfo.q opaque
"""


def rule_repo(tmp_path: Path) -> Path:
    files: dict[str, FileContent] = {path: content for path, (content, _) in RULE_CASES.items()}
    files[".gitattributes"] = ATTRIBUTES
    repo = git_repo(tmp_path / "repo", files)
    git(repo, "config", "diff.bar.binary", "false")
    git(repo, "config", "diff.baz.binary", "true")
    (repo / ".git" / "info").mkdir(exist_ok=True)
    (repo / ".git" / "info" / "attributes").write_text("[attr]opaque -diff\n")
    return repo


def skipped_by_git_grep(repo: Path) -> set[str]:
    """The files holding WORD that ``git grep -I`` skips, asked of git itself in the checkout."""
    holding = set(git(repo, "grep", "-a", "-l", WORD.decode()).split())
    kept = set(git(repo, "grep", "-I", "-l", WORD.decode()).split())
    return holding - kept


@pytest.mark.parametrize("at_commit", [False, True], ids=["working-tree", "commit"])
def test_binary_files_follow_git_grep_for_every_branch_of_its_rule(tmp_path: Path, at_commit: bool) -> None:
    repo = rule_repo(tmp_path)
    expected = {path for path, (_, binary) in RULE_CASES.items() if binary}
    assert skipped_by_git_grep(repo) == expected  # the table above is git's own rule
    with open_source(f"{repo}@{head(repo)}" if at_commit else str(repo)) as source:
        snapshot = source.eval_snapshot()
        try:
            assert snapshot.binary_files(list(RULE_CASES)) == expected
        finally:
            snapshot.close()


def test_an_identifier_held_only_by_binary_files_is_not_found(tmp_path: Path) -> None:
    repo = git_repo(
        tmp_path / "repo",
        {
            "AGENTS.md": "`only_in_binary` `in_text_too` `OnlyBinaryName`\n",
            "blob.bin": b"\x00\x01only_in_binary in_text_too OnlyBinaryName\n",
            "src/mod.py": "in_text_too = 1\n",
        },
    )
    for source in (str(repo), f"{repo}@{head(repo)}"):
        assert rows(scan_dir(source)) == [
            (1, "identifier", "OnlyBinaryName", "unresolved"),
            (1, "identifier", "in_text_too", "ok"),
            (1, "identifier", "only_in_binary", "unresolved"),
        ], source
    result = scan_dir(str(repo))
    assert next(d for d in result.drafts if d.claim == "in_text_too").verdict.why == "in src/mod.py"


def test_a_commit_is_read_with_its_own_attributes_not_the_working_trees(tmp_path: Path) -> None:
    repo = git_repo(
        tmp_path / "repo",
        {".gitattributes": "*.txt -diff\n", "AGENTS.md": "`named_here`\n", "notes.txt": "named_here\n"},
    )
    sha = head(repo)
    (repo / ".gitattributes").write_text("")  # the working tree no longer marks .txt binary
    assert rows(scan_dir(f"{repo}@{sha}")) == [(1, "identifier", "named_here", "unresolved")]
    assert rows(scan_dir(str(repo))) == [(1, "identifier", "named_here", "ok")]
    commit(repo, "drop the attribute")
    assert rows(scan_dir(f"{repo}@{head(repo)}")) == [(1, "identifier", "named_here", "ok")]


@pytest.mark.slow
def test_a_blobless_clone_applies_the_attributes_of_its_commit(tmp_path: Path) -> None:
    repo = git_repo(
        tmp_path / "repo",
        {
            ".gitattributes": "*.txt -diff\n",
            "AGENTS.md": "`named_here` `also_here`\n",
            "notes.txt": "named_here\n",
            "src/a.py": "also_here = 1\n",
        },
    )
    bare = bare_clone_for_serving(repo, tmp_path / "served.git")
    clone = tmp_path / "clone.git"
    git(tmp_path, "clone", "-q", "--bare", "--filter=blob:none", f"file://{bare}", str(clone))
    assert rows(scan_dir(f"{clone}@{head(repo)}")) == [
        (1, "identifier", "also_here", "ok"),
        (1, "identifier", "named_here", "unresolved"),
    ]


def test_the_users_attributes_file_counts_as_git_reads_it(tmp_path: Path) -> None:
    """core.attributesFile, read with the rest of the repository's configuration when it is opened, or
    asked of git by a snapshot made without it."""
    from dokimi.source.snapshot import snapshot_of_worktree

    repo = git_repo(tmp_path / "repo", {"x.dat": WORD + b"\n", "y.txt": WORD + b"\n"})
    (tmp_path / "user-attributes").write_text("*.dat -diff\n")
    git(repo, "config", "core.attributesFile", str(tmp_path / "user-attributes"))
    assert skipped_by_git_grep(repo) == {"x.dat"}
    with open_source(str(repo)) as source:
        with source.eval_snapshot() as snapshot:
            assert snapshot.binary_files(["x.dat", "y.txt"]) == {"x.dat"}
    with snapshot_of_worktree(repo, label="t") as snapshot:
        assert snapshot.binary_files(["x.dat", "y.txt"]) == {"x.dat"}
