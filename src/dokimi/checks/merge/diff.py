"""The workspace diff: the one diff that scope, test integrity and the judge all read.

The framework takes it BEFORE grade runs, because the grader restores the hidden test files and a diff taken
after that shows the upstream PR's test edits in place of the agent's.

How it is taken, and why:

- ``--no-renames``: a moved file is a deletion plus an addition, so the deletion of a test file is seen and
  the old path of every change is checked against the globs.
- Untracked files are added with intent-to-add (``git add -N``) to a SCRATCH index, never to the workspace's
  own: the index is built fresh from ``start_sha`` in a temporary directory (``GIT_INDEX_FILE``), so flags the
  agent set in its own index (skip-worktree, assume-unchanged) cannot hide an edit, and the workspace's
  ``.git`` is not written.
- git runs with a scratch git directory that borrows the workspace's objects (``objects/info/alternates``):
  the workspace's ``.git/config`` and ``.git/info/exclude`` are the agent's to write, so their filter drivers,
  external diff commands or exclude lines never apply. ``--no-ext-diff --no-textconv --text``: a
  ``.gitattributes`` line such as ``*.cpp -diff`` cannot turn an edit into "Binary files differ".
- Ignored files the run created: ``git ls-files --others --ignored --exclude-standard`` before the agent
  (:func:`list_ignored`) and after; the new ones are recorded and checked against ``denied_globs``, so a
  ``.gitignore`` cannot hide a write to a denied path.
"""

from __future__ import annotations

import shutil
import tempfile
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

from dokimi.errors import SourceError
from dokimi.source.git import run_git

ChangeStatus = Literal["A", "M", "D", "T"]
"""Added, modified, deleted, type changed (file <-> symlink); renames never appear (``--no-renames``)."""

DIFF_CONFIG = (
    "-c", "core.attributesFile=/dev/null",
    "-c", "core.excludesFile=/dev/null",
    "-c", "diff.noprefix=false",
    "-c", "diff.mnemonicPrefix=false",
    "-c", "diff.relative=false",
    "-c", "diff.renames=false",
    "-c", "diff.external=",
    "-c", "color.ui=never",
    "-c", "core.safecrlf=false",
)  # fmt: skip
"""Overrides of anything a global git configuration could set that changes what the diff shows."""

DIFF_FLAGS = ("--no-renames", "--no-ext-diff", "--no-textconv", "--text", "--no-color", "--ignore-submodules")


@dataclass(frozen=True)
class ChangedFile:
    """One change of the workspace diff. Without renames, ``old_path`` and ``new_path`` are the same path
    when both exist; an addition has no old path and a deletion no new path."""

    status: ChangeStatus
    old_path: str | None
    new_path: str | None
    added: int
    """Lines added (numstat; every file is counted as text)."""
    deleted: int
    """Lines deleted."""

    @property
    def paths(self) -> list[str]:
        """The old and the new path, each once."""
        return list(dict.fromkeys(p for p in (self.old_path, self.new_path) if p is not None))

    @property
    def path(self) -> str:
        return self.new_path or self.old_path or ""

    def to_json(self) -> dict[str, Any]:
        return {
            "status": self.status,
            "old_path": self.old_path,
            "new_path": self.new_path,
            "added": self.added,
            "deleted": self.deleted,
        }


@dataclass(frozen=True)
class WorkspaceDiff:
    """The agent's change: from ``start_sha`` to the working tree, untracked files included."""

    start_sha: str
    files: tuple[ChangedFile, ...]
    text: str
    """The unified diff (``git diff --text``), what the judge reads."""
    ignored_created: tuple[str, ...] = ()
    """Ignored files that did not exist before the run (empty when no before-list was given)."""
    ignored_measured: bool = False
    """Whether a before-list was given, so ``ignored_created`` means something."""

    @property
    def paths(self) -> list[str]:
        """Every old and new path of every change, sorted."""
        return sorted({p for f in self.files for p in f.paths})

    @property
    def changed_lines(self) -> int:
        return sum(f.added + f.deleted for f in self.files)

    @property
    def is_empty(self) -> bool:
        return not self.files

    def deleted_paths(self) -> list[str]:
        """Paths that no longer exist (deletions, and the old side of a move)."""
        return sorted(f.old_path for f in self.files if f.status == "D" and f.old_path is not None)

    def to_json(self) -> dict[str, Any]:
        """The run record's view (without the text, which is stored beside it as a .diff file)."""
        return {
            "start_sha": self.start_sha,
            "files": [f.to_json() for f in self.files],
            "changed_lines": self.changed_lines,
            "ignored_created": list(self.ignored_created) if self.ignored_measured else None,
        }


def empty_diff(start_sha: str) -> WorkspaceDiff:
    """The diff of an untouched workspace."""
    return WorkspaceDiff(start_sha=start_sha, files=(), text="", ignored_measured=True)


# --- the scratch git directory ----------------------------------------------------------------------------


def _objects_dir(workspace: Path) -> Path:
    dot_git = workspace / ".git"
    objects = dot_git / "objects"
    if dot_git.is_symlink() or not dot_git.is_dir() or not objects.is_dir():
        raise SourceError(
            f"{workspace} has no .git directory with objects; the diff needs the prepared repository",
            hint="take the diff of a workspace made by prepare_workspace, before grade runs",
        )
    return objects.resolve()


@dataclass
class _Scratch:
    workspace: Path
    git_dir: Path
    index: Path

    def git(self, args: Sequence[str], *, what: str, input: bytes | None = None, check: bool = True) -> bytes:
        return run_git(
            [*DIFF_CONFIG, "--work-tree", str(self.workspace), *args],
            git_dir=self.git_dir,
            cwd=self.workspace,
            input=input,
            check=check,
            env={"GIT_INDEX_FILE": str(self.index), "GIT_LITERAL_PATHSPECS": "1", "GIT_OPTIONAL_LOCKS": "0"},
            what=what,
        )


@contextmanager
def _scratch(workspace: Path, rev: str) -> Iterator[_Scratch]:
    """A temporary bare git directory borrowing the workspace's objects, with an index read from ``rev``."""
    workspace = workspace.resolve()
    objects = _objects_dir(workspace)
    tmp = Path(tempfile.mkdtemp(prefix="dokimi-diff-"))
    try:
        git_dir = tmp / "git"
        run_git(["init", "-q", "--bare", str(git_dir)], cwd=tmp, what="git init (scratch)")
        (git_dir / "objects" / "info").mkdir(parents=True, exist_ok=True)
        (git_dir / "objects" / "info" / "alternates").write_text(f"{objects}\n", encoding="utf-8")
        scratch = _Scratch(workspace, git_dir, tmp / "index")
        sha = scratch.git(["rev-parse", "--verify", "--quiet", f"{rev}^{{commit}}"], what="git rev-parse")
        resolved = sha.decode().strip()
        if not resolved:
            raise SourceError(f"{rev} is not a commit of the workspace at {workspace}")
        scratch.git(["read-tree", resolved], what="git read-tree (scratch index)")
        # A read index has no stat data, so every later look at the working tree would hash every file again:
        # record it once (exit 1 only says some files differ from the commit)
        scratch.git(["update-index", "-q", "--refresh"], check=False, what="git update-index --refresh")
        yield scratch
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def _head_of(workspace: Path) -> str:
    out = run_git(["rev-parse", "--verify", "HEAD^{commit}"], cwd=workspace, what="git rev-parse HEAD")
    return out.decode().strip()


def _nul_split(data: bytes) -> list[str]:
    return [p.decode("utf-8", "surrogateescape") for p in data.split(b"\0") if p]


def list_ignored(workspace: Path, rev: str | None = None) -> set[str]:
    """Ignored files in the workspace (``git ls-files --others --ignored --exclude-standard``), relative to
    its root. Call it on the prepared workspace before the agent runs and pass the result to
    :func:`take_workspace_diff` as ``ignored_before``. ``rev`` (default HEAD) is the commit whose files count
    as tracked."""
    start = rev or _head_of(workspace)
    with _scratch(workspace, start) as scratch:
        return _ignored(scratch)


def _ignored(scratch: _Scratch) -> set[str]:
    out = scratch.git(
        ["ls-files", "-z", "--others", "--ignored", "--exclude-standard"], what="git ls-files --ignored"
    )
    return set(_nul_split(out))


# --- parsing ----------------------------------------------------------------------------------------------


def parse_raw(data: bytes) -> list[tuple[ChangeStatus, str]]:
    """``git diff --raw -z --no-renames``: (status, path) per change."""
    fields = data.split(b"\0")
    out: list[tuple[ChangeStatus, str]] = []
    i = 0
    while i < len(fields) - 1:
        meta = fields[i].decode()
        if not meta.startswith(":"):
            i += 1
            continue
        status = meta.split()[-1][:1]
        path = fields[i + 1].decode("utf-8", "surrogateescape")
        if status not in ("A", "M", "D", "T"):
            raise SourceError(f"unexpected git diff status {status!r} for {path}")
        out.append((status, path))  # type: ignore[arg-type]
        i += 2
    return out


def parse_numstat(data: bytes) -> dict[str, tuple[int, int]]:
    """``git diff --numstat -z --no-renames``: path -> (added, deleted); ``-`` (binary) counts as 0."""
    counts: dict[str, tuple[int, int]] = {}
    for record in data.split(b"\0"):
        if not record:
            continue
        added, deleted, path = record.split(b"\t", 2)
        counts[path.decode("utf-8", "surrogateescape")] = (
            int(added) if added.isdigit() else 0,
            int(deleted) if deleted.isdigit() else 0,
        )
    return counts


def _sections(patch: bytes) -> list[list[bytes]]:
    """The file sections of a patch: a section starts at each ``diff --git`` line (content lines never do,
    they start with a space, ``+`` or ``-``)."""
    sections: list[list[bytes]] = []
    for line in patch.split(b"\n"):
        if line.startswith(b"diff --git "):
            sections.append([])
        elif sections:
            sections[-1].append(line)
    return sections


def _count(section: list[bytes]) -> tuple[int, int]:
    """(added, deleted) lines of one file section. numstat reports a file that ``.gitattributes`` marks
    ``-diff`` as binary even with ``--text``; the ``--text`` patch shows its lines, so they count here."""
    added = deleted = 0
    in_hunk = False
    for line in section:
        if line.startswith(b"@@ "):
            in_hunk = True
        elif in_hunk and line.startswith(b"+"):
            added += 1
        elif in_hunk and line.startswith(b"-"):
            deleted += 1
    return added, deleted


def _changes(
    raw: list[tuple[ChangeStatus, str]], counts: dict[str, tuple[int, int]], patch: bytes
) -> list[ChangedFile]:
    sections = _sections(patch)
    per_file = [_count(section) for section in sections] if len(sections) == len(raw) else None
    files = []
    for index, (status, path) in enumerate(raw):
        added, deleted = per_file[index] if per_file is not None else counts.get(path, (0, 0))
        files.append(
            ChangedFile(
                status=status,
                old_path=None if status == "A" else path,
                new_path=None if status == "D" else path,
                added=added,
                deleted=deleted,
            )
        )
    # A path can appear twice (a type change is split into delete + add by some git versions): keep order.
    return sorted(files, key=lambda f: (f.path, f.status))


# --- the diff ---------------------------------------------------------------------------------------------


def take_workspace_diff(
    workspace: Path, start_sha: str, *, ignored_before: set[str] | None = None
) -> WorkspaceDiff:
    """The agent's change from ``start_sha`` to the working tree of ``workspace``.

    Never writes to the workspace or its ``.git`` (the scratch index and git directory live in a temporary
    directory). ``ignored_before`` is :func:`list_ignored` from before the run; without it the ignored files
    the run created are not measured.
    """
    with _scratch(workspace, start_sha) as scratch:
        untracked = scratch.git(
            ["ls-files", "-z", "--others", "--exclude-standard"], what="git ls-files --others"
        )
        if untracked.strip(b"\0"):
            scratch.git(
                ["add", "--intent-to-add", "--pathspec-from-file=-", "--pathspec-file-nul"],
                input=untracked,
                what="git add -N (scratch index)",
            )
        raw = scratch.git(["diff", *DIFF_FLAGS, "--raw", "-z", start_sha], what="git diff --raw")
        numstat = scratch.git(["diff", *DIFF_FLAGS, "--numstat", "-z", start_sha], what="git diff --numstat")
        text = scratch.git(["diff", *DIFF_FLAGS, "--patch", start_sha], what="git diff --patch")
        ignored_now = _ignored(scratch) if ignored_before is not None else set()
    created = sorted(ignored_now - ignored_before) if ignored_before is not None else []
    return WorkspaceDiff(
        start_sha=start_sha,
        files=tuple(_changes(parse_raw(raw), parse_numstat(numstat), text)),
        text=text.decode("utf-8", "replace").replace("\0", ""),
        ignored_created=tuple(created),
        ignored_measured=ignored_before is not None,
    )
