"""Sources: ``<dir>`` (a working tree), ``<dir>@<rev>`` and ``<url>@<rev>``, opened as a :class:`Repo`.

A Repo hands out Snapshots: the source's own tree (the eval tree) and any other commit (task bases).
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Literal

from dokimi.errors import SourceError
from dokimi.source import git
from dokimi.source.git import CatFile
from dokimi.source.snapshot import Snapshot, snapshot_of_commit, snapshot_of_worktree

__all__ = ["Repo", "Snapshot", "SourceSpec", "open_source", "parse_source"]

SourceKind = Literal["dir", "dir_rev", "url_rev"]

_URL = re.compile(r"^(?:[a-zA-Z][a-zA-Z0-9+.-]*://|[^/@:]+@[^/:]+:)")


def looks_like_url(text: str) -> bool:
    """``scheme://...`` or scp-like ``user@host:path``."""
    return bool(_URL.match(text))


@dataclass(frozen=True)
class SourceSpec:
    text: str
    kind: SourceKind
    path: Path | None = None
    url: str | None = None
    rev: str | None = None

    def __str__(self) -> str:
        return self.text


def parse_source(text: str) -> SourceSpec:
    """Split a source argument. An existing directory is a working tree even if its name holds ``@``."""
    if not text:
        raise SourceError("empty source", hint="give <dir>, <dir>@<rev> or <url>@<rev>")
    if Path(text).is_dir() and not looks_like_url(text):
        return SourceSpec(text, "dir", path=Path(text))
    if looks_like_url(text):
        head, sep, rev = text.rpartition("@")
        # in scp-like `git@host:repo` without a rev, the only @ is the user's
        if not sep or not looks_like_url(head) or "/" in rev and ":" not in head and "://" not in head:
            raise SourceError(
                f"{text}: a URL source needs a revision",
                hint=f"write {text}@<sha> (a branch or tag also works here; tasks pin their own bases)",
            )
        if not rev:
            raise SourceError(f"{text}: empty revision after @", hint="write <url>@<sha>")
        return SourceSpec(text, "url_rev", url=head, rev=rev)
    head, sep, rev = text.rpartition("@")
    if sep and head and Path(head).is_dir():
        if not rev:
            raise SourceError(f"{text}: empty revision after @", hint="write <dir>@<rev>")
        return SourceSpec(text, "dir_rev", path=Path(head), rev=rev)
    for candidate in (text, head if sep else None):
        if candidate and Path(candidate).exists():
            raise SourceError(
                f"{candidate}: is a file, not a directory",
                hint=f"give the repository's directory ({Path(candidate).resolve().parent} or its root)",
            )
    raise SourceError(
        f"{text}: no such directory",
        hint="give an existing <dir>, <dir>@<rev> or <url>@<rev>",
    )


@dataclass
class Repo:
    """An opened source: a git directory (maybe none, for a plain directory) and the eval-tree revision."""

    spec: SourceSpec
    git_dir: Path | None
    work_tree: Path | None
    rev: str | None
    """Full SHA of the eval tree; None for a working tree."""
    url: str | None = None
    promisor: bool = False
    _catfile: CatFile | None = field(default=None, repr=False)
    _dirs: tuple[Path | None, Path | None] | None = field(default=None, repr=False)
    """(git directory, top of the work tree) of a working tree, as open_source found them."""
    _config: dict[str, str | None] | None = field(default=None, repr=False)
    """The repository's configuration of :data:`git.REPO_CONFIG`, as open_source read it."""

    @property
    def label(self) -> str:
        return self.spec.text

    def catfile(self) -> CatFile:
        if self.git_dir is None:
            raise SourceError(f"{self.label}: not a git repository")
        if self._catfile is None:
            self._catfile = CatFile(self.git_dir)
        return self._catfile

    def eval_snapshot(self) -> Snapshot:
        """The tree the manifest is loaded from: the working tree, or the commit the source names."""
        if self.rev is None:
            assert self.work_tree is not None
            return snapshot_of_worktree(
                self.work_tree, label=self.label, dirs=self._dirs, config=self._config
            )
        return self.snapshot(self.rev)

    def snapshot(self, sha: str) -> Snapshot:
        """The tree of one commit (full SHA)."""
        if self.git_dir is None:
            raise SourceError(f"{self.label}: not a git repository, so it has no commits")
        return snapshot_of_commit(
            self.git_dir,
            sha,
            label=f"{self.label}@{sha[:12]}",
            catfile=self.catfile(),
            promisor=self.promisor,
            config=self._config,
        )

    def resolve(self, rev: str) -> str | None:
        if self.git_dir is None:
            return None
        return git.rev_parse_commit(self.git_dir, rev)

    def close(self) -> None:
        if self._catfile is not None:
            self._catfile.close()
            self._catfile = None

    def __enter__(self) -> Repo:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def open_source(spec: SourceSpec | str, *, cache_dir: Path | None = None) -> Repo:
    """Open a source. ``<url>@<rev>`` goes through the fetch cache (a bare, blob-less clone per URL)."""
    if isinstance(spec, str):
        spec = parse_source(spec)
    if spec.kind == "url_rev":
        # fetch imports hashlib and tempfile, which a scan of a working tree never needs
        from dokimi.source.fetch import ensure_clone

        assert spec.url is not None and spec.rev is not None
        clone = ensure_clone(spec.url, spec.rev, cache_dir=cache_dir)
        return Repo(spec, clone.git_dir, None, clone.sha, url=spec.url, promisor=True)
    assert spec.path is not None
    path = spec.path.resolve()
    if spec.kind == "dir":
        git_dir, top = git.repo_dirs(path)
        _refuse_part_of_a_repository(spec, path, git_dir, top)
        config = _repo_config(git_dir)
        return Repo(spec, git_dir, path, None, url=_origin_url(config), _dirs=(git_dir, top), _config=config)
    git_dir = git.git_dir_of(path)
    if git_dir is None:
        raise SourceError(
            f"{spec.path}: not a git repository, so @{spec.rev} cannot be read", hint="drop @<rev>"
        )
    assert spec.rev is not None
    sha = git.rev_parse_commit(git_dir, spec.rev)
    if sha is None:
        raise SourceError(
            f"{spec.text}: revision {spec.rev!r} does not resolve to a commit",
            hint="check the revision (git log), or fetch it into the repository",
        )
    config = _repo_config(git_dir)
    return Repo(
        spec, git_dir, path, sha, url=_origin_url(config), promisor=_is_promisor(config), _config=config
    )


def _refuse_part_of_a_repository(
    spec: SourceSpec, path: Path, git_dir: Path | None, top: Path | None
) -> None:
    """A bare ``<dir>`` is a working tree read as a whole: a subdirectory of a repository would shift every
    manifest path (they are relative to the repository root), and a bare repository has no working tree."""
    if git_dir is None:
        return
    if top is None:
        raise SourceError(
            f"{spec.text}: a bare repository (or a .git directory) has no working tree",
            hint=f"name a commit: {spec.text}@<rev>, for example {spec.text}@HEAD",
        )
    if top.resolve() != path:
        raise SourceError(
            f"{spec.text}: is inside the git repository {top}",
            hint=f"give the repository root {top.resolve()}; manifest and task paths are relative to it",
        )


def _repo_config(git_dir: Path | None) -> dict[str, str | None] | None:
    """The configuration an opened repository reads (:data:`git.REPO_CONFIG`), in one ``git config``."""
    return git.config_values(git_dir, git.REPO_CONFIG) if git_dir is not None else None


def _origin_url(config: dict[str, str | None] | None) -> str | None:
    """``remote.origin.url`` (its last value, as ``git config --get`` gives it)."""
    if config is None:
        return None
    return (config.get("remote.origin.url") or "").strip() or None


def _is_promisor(config: dict[str, str | None] | None) -> bool:
    """Whether ``git config --get-regexp 'remote\\..*\\.promisor'`` prints ``true`` (a blob-less clone)."""
    found = git.config_matching(config or {}, r"remote\..*\.promisor")
    return any("true" in key or "true" in (value or "") for key, value in found.items())
