"""A Snapshot is the tree listing and the blobs of one commit, or of a working tree.

Listing is one ``git ls-tree -r`` per commit; blobs come through one ``git cat-file --batch`` process per
repository, many per round trip. In a blob-less clone, the blobs a caller asks for are fetched in one request
first (see :mod:`dokimi.source.fetch`), never one request per file.
"""

from __future__ import annotations

import operator
import os
import posixpath
import stat
import threading
from collections.abc import Iterable, Set
from dataclasses import dataclass, field
from functools import cached_property
from pathlib import Path
from typing import NamedTuple

from dokimi import safefs
from dokimi.errors import SourceError
from dokimi.source import git
from dokimi.source.git import CatFile, TreeEntry

MAX_LINK_HOPS = 40
#: Largest file read from a working tree; a FIFO, a device or a bigger one is a SourceError, not a hang.
MAX_DISK_READ = 256 * 1024 * 1024
FIRST_FEW_BYTES = 8000
"""git's binary test reads this many bytes for a NUL (``buffer_is_binary``)."""
ATTRIBUTES = ".gitattributes"
_CATFILE_LOCK = threading.Lock()
_OID = operator.attrgetter("oid")


class Resolved(NamedTuple):
    """Where a path leads after following symlinks inside the tree."""

    path: str | None
    """The final in-tree path, or None when the link cannot be followed."""
    reason: str | None = None
    """Why it cannot: ``dangles``, ``escapes the tree``, ``loops``."""


@dataclass
class Snapshot:
    """Files of one tree. Paths are POSIX, relative to the repository root, without a leading ``./``."""

    label: str
    entries: dict[str, TreeEntry]
    rev: str | None = None
    """Full SHA of the commit; None for a working tree."""
    git_dir: Path | None = None
    work_tree: Path | None = None
    _catfile: CatFile | None = field(default=None, repr=False)
    promisor: bool = False
    _listed_parents: dict[str, None] | None = field(default=None, repr=False)
    """The directory of every entry in listing order, when the listing worked it out (:func:`git.ls_tree`)."""
    _indexed_attributes: list[str] | None = field(default=None, repr=False)
    """The .gitattributes files of a working tree's index, when its listing read the index."""
    _config: dict[str, str | None] | None = field(default=None, repr=False)
    """The repository's configuration of :data:`git.REPO_CONFIG`, when the source read it already."""

    # --- listing -----------------------------------------------------------------------------------------

    @cached_property
    def dirs(self) -> frozenset[str]:
        """Every directory that holds a tracked entry ('' is the root)."""
        return frozenset(self._dirs_reached)

    @cached_property
    def sorted_dirs(self) -> list[str]:
        """Every directory but the root, sorted. Cheap: they are listed in the order the listing reaches them,
        which for a listing in path order is nearly sorted (a sort of a few long runs, not of a shuffle)."""
        return sorted(d for d in self._dirs_reached if d)

    @property
    def dirs_reached(self) -> Iterable[str]:
        """Every directory, the root ('') included, in the order the listing first reaches it (the ancestors
        of a parent after it): nearly sorted for a listing in path order."""
        return self._dirs_reached.keys()

    @cached_property
    def _dirs_reached(self) -> dict[str, None]:
        """Every directory, in the order the listing first reaches it (the ancestors of a parent after it).

        One pass over the listing for the direct parents, then the ancestors of those few parents: a tree of
        50,000 files has a few thousand directories."""
        parents = self._listed_parents
        if parents is None:
            parents = dict.fromkeys([path.rpartition("/")[0] for path in self.entries])
        out = dict(parents)
        for parent in parents:
            while parent:
                parent = parent.rpartition("/")[0]
                if parent in out:
                    break
                out[parent] = None
        out[""] = None
        return out

    @cached_property
    def by_basename(self) -> dict[str, list[str]]:
        """Paths by their last segment: the files in listing order, then the directories. Built on first
        use."""
        index: dict[str, list[str]] = {}
        for path in self.entries:
            name = path.rpartition("/")[2]
            found = index.get(name)
            if found is None:
                index[name] = [path]
            else:
                found.append(path)
        for directory in self._dirs_reached:
            if directory:
                index.setdefault(directory.rpartition("/")[2], []).append(directory)
        return index

    def paths(self) -> list[str]:
        return sorted(self.entries)

    def exists(self, path: str) -> bool:
        path = normalize(path)
        return path in self.entries or path in self.dirs

    def is_file(self, path: str) -> bool:
        return normalize(path) in self.entries

    def is_dir(self, path: str) -> bool:
        return normalize(path) in self.dirs

    def entry(self, path: str) -> TreeEntry | None:
        return self.entries.get(normalize(path))

    @cached_property
    def _submodules(self) -> frozenset[str]:
        return frozenset(path for path, entry in self.entries.items() if entry.kind == "commit")

    @cached_property
    def _symlinks(self) -> frozenset[str]:
        return frozenset(path for path, entry in self.entries.items() if entry.mode == "120000")

    @property
    def has_symlinks(self) -> bool:
        """Whether the tree lists any symlink (if not, every path is where it is listed, or nowhere)."""
        return bool(self._symlinks)

    def submodule_of(self, path: str) -> str | None:
        """The submodule path that contains ``path`` (or is it), if any."""
        if not self._submodules:  # most trees have none: no prefix to try
            return None
        path = normalize(path)
        parts = path.split("/")
        for i in range(1, len(parts) + 1):
            prefix = "/".join(parts[:i])
            entry = self.entries.get(prefix)
            if entry is not None and entry.is_submodule:
                return prefix
        return None

    # --- symlinks ----------------------------------------------------------------------------------------

    def link_target(self, path: str) -> str:
        """The raw target text of a symlink entry."""
        return self.read(path, follow=False).decode("utf-8", "surrogateescape")

    def resolve(self, path: str) -> Resolved:
        """Follow symlinks (of the path and of its directories) inside the tree, as a checkout would."""
        path = normalize(path)
        if not self._symlinks:  # no link to follow: the path is there or it dangles
            return Resolved(path) if path in self.entries or path in self.dirs else Resolved(None, "dangles")
        seen: set[str] = set()
        for _ in range(MAX_LINK_HOPS):
            parts = path.split("/") if path else []
            rebuilt: list[str] = []
            changed = False
            for i, part in enumerate(parts):
                rebuilt.append(part)
                prefix = "/".join(rebuilt)
                entry = self.entries.get(prefix)
                if entry is not None and entry.is_symlink:
                    if prefix in seen and i == len(parts) - 1:
                        return Resolved(None, "loops")
                    seen.add(prefix)
                    target = self.link_target(prefix)
                    if target.startswith("/"):
                        return Resolved(None, "escapes the tree")
                    joined = posixpath.normpath(posixpath.join(posixpath.dirname(prefix), target))
                    if joined == ".." or joined.startswith("../"):
                        return Resolved(None, "escapes the tree")
                    rest = parts[i + 1 :]
                    path = normalize("/".join([joined, *rest]) if joined != "." else "/".join(rest))
                    changed = True
                    break
            if not changed:
                if path in self.entries or path in self.dirs:
                    return Resolved(path)
                return Resolved(None, "dangles")
        return Resolved(None, "loops")

    # --- blobs -------------------------------------------------------------------------------------------

    def read(self, path: str, *, follow: bool = True) -> bytes:
        """Contents of one file. Prefer :meth:`read_many` for several."""
        return self.read_many([path], follow=follow)[normalize(path)]

    def read_many(self, paths: Iterable[str], *, follow: bool = True) -> dict[str, bytes]:
        """Contents of many files in one batch (symlinks followed unless ``follow=False``).

        Raises SourceError for a path that is not a readable file of this tree.
        """
        wanted = [normalize(p) for p in paths]
        real: dict[str, str] = {}
        for path in wanted:
            target = path
            entry = self.entries.get(path)
            if follow and (entry is None or entry.is_symlink or self._under_link(path)):
                resolved = self.resolve(path)
                if resolved.path is None:
                    raise SourceError(f"{path}: link {resolved.reason}", path=path)
                target = resolved.path
            if target not in self.entries or self.entries[target].kind != "blob":
                raise SourceError(f"{self.label}: {path}: not a file in this tree", path=path)
            real[path] = target
        if self.rev is None:
            return {path: self._read_disk(target) for path, target in real.items()}
        oids = {path: self.entries[target].oid for path, target in real.items()}
        blobs = self.read_oids([oid for oid in oids.values() if oid])
        out: dict[str, bytes] = {}
        for path, oid in oids.items():
            data = blobs.get(oid) if oid else None
            if data is None:
                raise SourceError(f"{self.label}: {path}: blob {oid} is missing from the repository")
            out[path] = data
        return out

    def read_oids(self, oids: list[str]) -> dict[str, bytes | None]:
        if self.git_dir is None:
            raise SourceError(f"{self.label}: no git repository to read blobs from")
        if self.promisor and self.rev is not None:
            # fetch imports hashlib and tempfile, which a scan of a working tree never needs
            from dokimi.source.fetch import prefetch_blobs

            prefetch_blobs(self.git_dir, oids, commit=self.rev)
        with _CATFILE_LOCK:  # a scan reads from a second thread too: one cat-file process, never two
            if self._catfile is None:
                self._catfile = CatFile(self.git_dir)
            catfile = self._catfile
        return catfile.read_many(oids)

    # --- git's binary rule ----------------------------------------------------------------------------

    def binary_files(self, paths: Iterable[str]) -> set[str]:
        """Which of ``paths`` git counts as binary, so that ``git grep -I`` skips them: the rule of git's
        ``grep_source_is_binary``, for these paths only.

        The ``diff`` attribute decides first (``binary`` is a macro that unsets it): unset (``-diff``) is
        binary, set (``diff``) is text, and ``diff=NAME`` is what ``diff.NAME.binary`` says when configured.
        Otherwise a NUL in the first 8,000 bytes makes a file binary. The attributes are those of this
        snapshot: of its commit's tree (:func:`git.check_attr` with its .gitattributes files), or of its
        working tree. Costs one ``check-attr`` call only when some attribute file could set ``diff`` (see
        :meth:`_diff_attribute_possible`), and one batched read of the distinct blobs left to test."""
        wanted: Set[str] = paths if isinstance(paths, (set, frozenset)) else set(paths)  # read, never changed
        if not wanted:
            return set()
        if self.git_dir is None:
            raise SourceError(f"{self.label}: git's binary rule needs a git repository")
        values: dict[str, str] = {}
        if self._diff_attribute_possible:
            if self.rev is not None:
                files = [self.entries[p] for p in self._attribute_files]
                values = git.check_attr(wanted, "diff", git_dir=self.git_dir, attributes_files=files)
            else:
                values = git.check_attr(wanted, "diff", work_tree=self.work_tree)
        if not any(v != "unspecified" for v in values.values()):
            return self._with_early_nul(wanted)
        drivers: dict[str, bool] = {}
        if any(v not in ("set", "unset", "unspecified") for v in values.values()):
            drivers = self._diff_drivers_binary
        binary: set[str] = set()
        undecided: set[str] = set()
        for path in wanted:
            value = values.get(path, "unspecified")
            if value == "unset":
                binary.add(path)
            elif value == "set":
                continue
            elif value != "unspecified" and value in drivers:
                if drivers[value]:
                    binary.add(path)
            else:
                undecided.add(path)
        return binary | self._with_early_nul(undecided)

    def _with_early_nul(self, paths: Set[str]) -> set[str]:
        """The paths whose first 8,000 bytes hold a NUL (a file that cannot be read holds none, as in git)."""
        out: set[str] = set()
        if self.rev is None:
            assert self.work_tree is not None
            root = str(self.work_tree)
            for path in paths:  # a grep can match hundreds of files: descriptors, no file objects
                try:
                    if b"\0" in _first_bytes(os.path.join(root, path), FIRST_FEW_BYTES):
                        out.add(path)
                except OSError:
                    pass
            return out
        entries = self.entries
        # the distinct blobs first, by C-level steps (a grep can match every file of the tree): a blob held at
        # many paths is read once, and the paths are looked at one by one only when some blob is binary
        distinct = set(map(_OID, filter(None, map(entries.get, paths))))
        distinct.discard(None)
        blobs = self.read_oids(sorted(distinct))
        early = {oid for oid, data in blobs.items() if data is not None and b"\0" in data[:FIRST_FEW_BYTES]}
        if not early:
            return set()
        return {p for p in paths if (entry := entries.get(p)) is not None and entry.oid in early}

    @cached_property
    def _attribute_files(self) -> list[str]:
        """The listed .gitattributes files (one C-level test per path, no index of every basename)."""
        if "by_basename" in self.__dict__:  # already built for someone else
            return [p for p in self.by_basename.get(ATTRIBUTES, []) if p in self.entries]
        return [
            p
            for p in self.entries
            if p.endswith(ATTRIBUTES) and (p == ATTRIBUTES or p.endswith("/" + ATTRIBUTES))
        ]

    @cached_property
    def _diff_drivers_binary(self) -> dict[str, bool]:
        """``diff.NAME.binary`` of the repository's configuration, by NAME."""
        found = self._config_values(r"^diff\..+\.binary$")
        out: dict[str, bool] = {}
        for key, value in found.items():
            flag = git.config_bool(value)
            if flag is not None:
                out[key[len("diff.") : -len(".binary")]] = flag
        return out

    @cached_property
    def _diff_attribute_possible(self) -> bool:
        """Whether some attribute file git reads for this snapshot could set ``diff``: only a line that
        spells ``diff`` or ``binary`` (the one built-in macro) can, directly or through a macro it defines.
        False only when every such file is known and none holds either word: the tree's .gitattributes files
        (for a working tree, also its index's), the repository's info/attributes, the user's attributes file
        (core.attributesFile or the XDG default) and the system's. Anything unknown counts as possible."""
        texts: list[bytes] = []
        in_tree = self._attribute_files
        if self.rev is not None:
            try:
                texts.extend(self.read_many(in_tree, follow=False).values())
            except SourceError:
                return True
        else:
            assert self.work_tree is not None
            if self._indexed_attributes is not None:  # the listing read the index already
                indexed_names = set(self._indexed_attributes)
            else:
                indexed = git.run_git(
                    ["ls-files", "-z", "--cached", "--", f":(glob)**/{ATTRIBUTES}"], cwd=self.work_tree
                )
                indexed_names = {p.decode("utf-8", "surrogateescape") for p in indexed.split(b"\0") if p}
            names = indexed_names | set(in_tree)
            # an ignored .gitattributes on disk counts too: git reads the file of each directory it looks in
            names.update(f"{d}/{ATTRIBUTES}" if d else ATTRIBUTES for d in self.dirs)
            for name in names:
                try:
                    texts.append(safefs.read_plain(self.work_tree / name, limit=MAX_DISK_READ))
                except safefs.UnsafePathError:
                    return True
                except FileNotFoundError:
                    if name in indexed_names:
                        return True  # in the index only: git reads it from there
                except OSError:
                    return True
        files = _attribute_files_outside_the_tree(
            self.git_dir, self._config_values(r"^core\.attributesfile$")
        )
        if files is None:
            return True
        for file in files:
            try:
                texts.append(safefs.read_plain(file, limit=MAX_DISK_READ))
            except safefs.UnsafePathError:
                return True
            except FileNotFoundError:
                continue
            except OSError:
                return True
        return any(b"diff" in text or b"binary" in text for text in texts)

    def _config_values(self, regexp: str) -> dict[str, str | None]:
        """The repository's configuration keys that ``regexp`` matches (one of :data:`git.REPO_CONFIG`'s):
        from what the source read, else from ``git config``."""
        if self._config is not None:
            return git.config_matching(self._config, regexp)
        return git.config_values(self.git_dir, regexp, cwd=self.work_tree)

    def _under_link(self, path: str) -> bool:
        if not self._symlinks:
            return False
        parent = posixpath.dirname(path)
        while parent:
            entry = self.entries.get(parent)
            if entry is not None and entry.is_symlink:
                return True
            parent = posixpath.dirname(parent)
        return False

    def _read_disk(self, path: str) -> bytes:
        assert self.work_tree is not None
        try:
            entry = self.entries.get(path)
            if entry is not None and entry.is_symlink:
                return os.readlink(self.work_tree / path).encode("utf-8", "surrogateescape")
            return safefs.read_plain(self.work_tree / path, limit=MAX_DISK_READ)
        except safefs.UnsafePathError as exc:  # a FIFO or a device in a working tree is read by nothing
            raise SourceError(f"{path}: {exc.message}", path=path) from None
        except OSError as exc:
            raise SourceError(f"{path}: cannot read: {exc.strerror}", path=path) from None

    def close(self) -> None:
        if self._catfile is not None:
            self._catfile.close()
            self._catfile = None

    def __enter__(self) -> Snapshot:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def _attribute_files_outside_the_tree(
    git_dir: Path | None, configured: dict[str, str | None]
) -> list[Path] | None:
    """The attribute files git reads besides the tree's: info/attributes of the repository (its common dir
    for a linked worktree), the user's (core.attributesFile, else $XDG_CONFIG_HOME/git/attributes or
    ~/.config/git/attributes) and the system's ($(sysconfdir)/gitattributes: /etc, or etc/ beside the
    directory of the git executable). ``configured``: the repository's ``core.attributesfile`` keys. None
    when one of them cannot be located."""
    files: list[Path] = []
    if git_dir is not None:
        common = git_dir
        try:
            common = (git_dir / (git_dir / "commondir").read_text().strip()).resolve()
        except FileNotFoundError:
            pass
        except OSError:
            return None
        files.append(common / "info" / "attributes")
    home = os.environ.get("HOME")
    if configured:
        value = list(configured.values())[-1]
        if value is None:
            return None
        if value.startswith("~/") and home:
            value = home + value[1:]
        if not value.startswith("/"):
            return None
        files.append(Path(value))
    elif os.environ.get("XDG_CONFIG_HOME"):
        files.append(Path(os.environ["XDG_CONFIG_HOME"]) / "git" / "attributes")
    elif home:
        files.append(Path(home) / ".config" / "git" / "attributes")
    files.append(Path("/etc/gitattributes"))
    executable = _which("git")
    if executable is not None:
        files.append(Path(executable).resolve().parent.parent / "etc" / "gitattributes")
    return files


def _first_bytes(path: str, size: int) -> bytes:
    """The first ``size`` bytes of a file (fewer when it is shorter), as ``open(path, "rb").read(size)``."""
    fd = os.open(path, os.O_RDONLY | os.O_CLOEXEC)
    try:
        data = b""
        while len(data) < size:
            chunk = os.read(fd, size - len(data))
            if not chunk:
                break
            data += chunk
        return data
    finally:
        os.close(fd)


def _which(name: str) -> str | None:
    """``shutil.which(name)`` for a plain name on POSIX: the first file on PATH that may be executed (shutil
    itself imports bz2 and lzma, milliseconds of a pre-commit scan)."""
    for directory in os.environ.get("PATH", os.defpath).split(os.pathsep):
        candidate = os.path.join(directory, name)
        if os.path.exists(candidate) and os.access(candidate, os.X_OK) and not os.path.isdir(candidate):
            return candidate
    return None


def normalize(path: str) -> str:
    """``./a//b/`` -> ``a/b``; the root is ''."""
    if path and "//" not in path and "/." not in path and path[0] not in "./" and path[-1] != "/":
        return path  # already normal: nothing for normpath to do (a claim's paths mostly are)
    while path.startswith("./"):
        path = path[2:]
    norm = posixpath.normpath(path) if path else ""
    return "" if norm == "." else norm.lstrip("/")


def snapshot_of_commit(
    git_dir: Path,
    sha: str,
    *,
    label: str,
    catfile: CatFile | None = None,
    promisor: bool = False,
    config: dict[str, str | None] | None = None,
) -> Snapshot:
    parents: dict[str, None] = {}
    return Snapshot(
        label=label,
        entries=git.ls_tree(git_dir, sha, parents=parents),
        rev=sha,
        git_dir=git_dir,
        _catfile=catfile,
        promisor=promisor,
        _listed_parents=parents,
        _config=config,
    )


def snapshot_of_worktree(
    root: Path,
    *,
    label: str,
    dirs: tuple[Path | None, Path | None] | None = None,
    config: dict[str, str | None] | None = None,
) -> Snapshot:
    """Files of a working tree as on disk: tracked and untracked-but-not-ignored, or every file of a plain
    dir. ``dirs``: (git directory, top of the work tree) of ``root``, and ``config``: its configuration of
    :data:`git.REPO_CONFIG`, when the caller has asked git already."""
    git_dir, top = dirs if dirs is not None else git.repo_dirs(root)
    entries: dict[str, TreeEntry] = {}
    indexed_attributes: list[str] | None = None
    base = str(root)
    if git_dir is not None and top is not None and top.resolve() == root.resolve():
        listing = git.ls_files_worktree(root)
        for path in listing.paths:
            if path in listing.submodules:
                entries[path] = TreeEntry(path, "160000", "commit", None)
                continue
            entry = _disk_entry(base, path)
            if entry is not None:
                entries[path] = entry
        indexed_attributes = [p for p in listing.indexed if p == ATTRIBUTES or p.endswith("/" + ATTRIBUTES)]
    else:
        for dirpath, dirnames, filenames in os.walk(root):
            dirnames[:] = sorted(d for d in dirnames if d != ".git")
            rel_dir = os.path.relpath(dirpath, root)
            for name in [*filenames, *[d for d in dirnames if os.path.islink(os.path.join(dirpath, d))]]:
                rel = name if rel_dir == "." else f"{rel_dir}/{name}".replace(os.sep, "/")
                entry = _disk_entry(base, rel)
                if entry is not None:
                    entries[rel] = entry
    return Snapshot(
        label=label,
        entries=entries,
        rev=None,
        git_dir=git_dir,
        work_tree=root,
        _indexed_attributes=indexed_attributes,
        _config=config,
    )


def _disk_entry(root: str, path: str) -> TreeEntry | None:
    """What ``path`` is on disk under ``root`` (a string: one ``lstat`` per listed file, no Path objects)."""
    try:
        st = os.lstat(os.path.join(root, path))
    except OSError:
        return None  # tracked but deleted in the working tree
    if stat.S_ISLNK(st.st_mode):
        return TreeEntry(path, "120000", "blob", None)
    if stat.S_ISDIR(st.st_mode):
        return None
    mode = "100755" if st.st_mode & 0o111 else "100644"
    return TreeEntry(path, mode, "blob", None)
