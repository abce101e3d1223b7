"""A snapshot's tree written to a directory exactly as git stores it (step 1 of a workspace's preparation).

Blobs are read with one ``git cat-file --batch`` process and written by dokimi, so no git configuration of the
host (core.autocrlf), no ``.gitattributes`` conversion (eol, filters, working-tree-encoding) and no
export-ignore / export-subst (which ``git archive`` would apply) changes a byte. The workspace, an image's
build context and an exported eval dir are all written this way.
"""

from __future__ import annotations

import os
import posixpath
import shutil
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING

from dokimi.errors import WorkspaceError

if TYPE_CHECKING:
    from dokimi.source.snapshot import Snapshot

__all__ = ["check_tree_path", "export_tree_as_stored", "write_entry"]

#: Blobs read per cat-file round trip while exporting a tree.
EXPORT_CHUNK = 512


def check_tree_path(path: str) -> None:
    """Refuse a tree path that would be written outside the destination or into a git directory."""
    parts = path.split("/")
    if (
        not path
        or path.startswith("/")
        or "\\" in path
        or any(part in ("", ".", "..") or part.lower() == ".git" for part in parts)
    ):
        raise WorkspaceError(f"refusing to write tree path {path!r}", hint="the tree holds an unsafe path")


def _selected(path: str, under: str, exclude: Sequence[str]) -> str | None:
    """The destination-relative path of ``path``, or None when it is outside ``under`` or excluded."""
    if any(path == ex or path.startswith(ex + "/") for ex in exclude):
        return None
    if not under:
        return path
    if path.startswith(under + "/"):
        return path[len(under) + 1 :]
    return None


def _ensure_dir(root: Path, rel_dir: str, made: set[str]) -> None:
    if rel_dir in made:
        return
    parts = rel_dir.split("/") if rel_dir else []
    for i in range(1, len(parts) + 1):
        prefix = "/".join(parts[:i])
        if prefix in made:
            continue
        target = root / prefix
        if not target.is_dir() or target.is_symlink():
            target.mkdir()
            os.chmod(target, 0o755)
        made.add(prefix)
    made.add(rel_dir)


def write_entry(root: Path, rel: str, mode: str, data: bytes) -> None:
    target = root / rel
    if mode == "120000":
        os.symlink(data.decode("utf-8", "surrogateescape"), target)
        return
    fd = os.open(target, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o600)
    with os.fdopen(fd, "wb") as handle:
        handle.write(data)
    os.chmod(target, 0o755 if mode == "100755" else 0o644)


def export_tree_as_stored(
    snapshot: Snapshot,
    dest: Path,
    *,
    under: str = "",
    exclude: Sequence[str] = (),
    only: Callable[[str], bool] | None = None,
) -> int:
    """Step 1: write ``snapshot``'s files into ``dest`` byte for byte; returns the number of entries written.

    ``under`` exports only that directory, re-rooted at ``dest`` (the eval dir for {eval_dir}); ``exclude``
    skips directories (the tasks dir for an image build context); ``only`` keeps just the tree paths it
    accepts (the paths an image's Dockerfile names). Files get mode 0644 or 0755 as git records them,
    symlinks stay symlinks, a submodule becomes an empty directory (a checkout without ``--recursive``). A
    working-tree snapshot is copied from disk the same way.
    """
    under = under.strip("/")
    exclude = [ex.strip("/") for ex in exclude if ex.strip("/")]
    dest.mkdir(parents=True, exist_ok=True)
    if any(dest.iterdir()):
        raise WorkspaceError(f"{dest} is not empty", path=dest, hint="give a new or empty directory")
    os.chmod(dest, 0o755)
    chosen: list[tuple[str, str, str | None, str]] = []  # (tree path, dest path, oid, mode)
    for path in sorted(snapshot.entries):
        rel = _selected(path, under, exclude)
        if rel is None or (only is not None and not only(path)):
            continue
        check_tree_path(rel)
        entry = snapshot.entries[path]
        chosen.append((path, rel, entry.oid, entry.mode))
    made: set[str] = {""}
    count = 0
    blobs: list[tuple[str, str, str | None, str]] = []
    for item in chosen:
        path, rel, _oid, mode = item
        _ensure_dir(dest, posixpath.dirname(rel), made)
        if mode == "160000":
            _ensure_dir(dest, rel, made)
            count += 1
        else:
            blobs.append(item)
    if snapshot.rev is None:
        assert snapshot.work_tree is not None
        for path, rel, _oid, mode in blobs:
            source = snapshot.work_tree / path
            if mode == "120000":
                os.symlink(os.readlink(source), dest / rel)
            else:
                shutil.copyfile(source, dest / rel, follow_symlinks=False)
                os.chmod(dest / rel, 0o755 if mode == "100755" else 0o644)
            count += 1
        return count
    for start in range(0, len(blobs), EXPORT_CHUNK):
        chunk = blobs[start : start + EXPORT_CHUNK]
        data = snapshot.read_oids([oid for _, _, oid, _ in chunk if oid])
        for path, rel, oid, mode in chunk:
            content = data.get(oid) if oid else None
            if content is None:
                raise WorkspaceError(
                    f"{snapshot.label}: {path}: blob {oid} is missing from the repository",
                    hint="fetch the missing objects (a blob-less clone needs its remote)",
                )
            write_entry(dest, rel, mode, content)
            count += 1
    return count
