"""The fetch cache: one bare, blob-less clone per URL, updated on later calls (contract top).

Layout: ``<cache>/repos/<name>-<hash>.git`` where ``<cache>`` is DOKIMI_HOME, else ``$XDG_CACHE_HOME/dokimi``,
else ``~/.cache/dokimi``. A first clone is built in a temporary directory beside its final place and published
with ``os.replace`` under an exclusive lock, so Ctrl-C or a concurrent dokimi never leaves a half clone
behind.

Git runs non-interactively (dokimi.source.git): no terminal, stdin closed, GIT_TERMINAL_PROMPT=0; an askpass
program named by the environment still runs. Blobs are fetched on demand, many in one request
(:func:`prefetch_blobs`), never one request per file.
"""

from __future__ import annotations

import fcntl
import hashlib
import os
import re
import shutil
import tempfile
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

from dokimi.errors import SourceError
from dokimi.home import cache_directory
from dokimi.source import git

CACHE_README = """\
This directory is dokimi's cache. repos/ holds one bare, blob-less clone per source URL
(`dokimi repo fetch <url>@<rev>`); blobs are fetched when a command reads them. scan/ holds
the Markdown items (links, code spans, fences) of the guidance files `dokimi repo scan` parsed,
one file per repository, so an unchanged file is not parsed again.
Everything here can be deleted at any time; it is rebuilt on the next run.
"""

FETCH_TIMEOUT_S = 1800.0


def default_directory() -> Path:
    """DOKIMI_HOME, else $XDG_CACHE_HOME/dokimi, else ~/.cache/dokimi."""
    return cache_directory()


def clone_path(url: str, cache_dir: Path | None = None) -> Path:
    """Where the clone of ``url`` lives: a readable name plus a hash of the exact URL."""
    root = (cache_dir or default_directory()) / "repos"
    tail = url.rstrip("/").rsplit("/", 1)[-1].rsplit(":", 1)[-1]
    name = re.sub(r"[^A-Za-z0-9._-]", "_", tail.removesuffix(".git")) or "repo"
    digest = hashlib.sha256(url.encode()).hexdigest()[:12]
    return root / f"{name}-{digest}.git"


@dataclass(frozen=True)
class Clone:
    url: str
    git_dir: Path
    sha: str
    """Full SHA of the revision asked for."""
    fetched: bool
    """Whether this call talked to the remote."""


@contextmanager
def _locked(path: Path) -> Iterator[None]:
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path.with_suffix(".lock"), "w") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)


def _write_readme(cache_dir: Path) -> None:
    readme = cache_dir / "README"
    if not readme.exists():
        cache_dir.mkdir(parents=True, exist_ok=True)
        readme.write_text(CACHE_README)


def _clone_bare_blobless(url: str, dest: Path) -> None:
    """First clone: bare, --filter=blob:none, every branch and tag, then published with os.replace."""
    tmp = Path(tempfile.mkdtemp(prefix=f".{dest.name}.", dir=dest.parent))
    try:
        git.run_git(
            ["clone", "--quiet", "--bare", "--filter=blob:none", "--", url, str(tmp / "repo.git")],
            timeout=FETCH_TIMEOUT_S,
            what=f"git clone {url}",
        )
        staged = tmp / "repo.git"
        git.run_git(
            ["config", "remote.origin.fetch", "+refs/heads/*:refs/heads/*"], git_dir=staged, what="git config"
        )
        git.run_git(["config", "gc.auto", "0"], git_dir=staged, what="git config")
        os.replace(staged, dest)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def _update(git_dir: Path, url: str) -> None:
    git.run_git(
        [
            "fetch",
            "--quiet",
            "--prune",
            "--filter=blob:none",
            "origin",
            "+refs/heads/*:refs/heads/*",
            "+refs/tags/*:refs/tags/*",
        ],
        git_dir=git_dir,
        timeout=FETCH_TIMEOUT_S,
        what=f"git fetch {url}",
    )


def _fetch_commit(git_dir: Path, url: str, rev: str) -> None:
    """Fetch one commit by SHA (servers that allow reachable or any SHA in want)."""
    git.run_git(
        ["fetch", "--quiet", "--no-tags", "--no-write-fetch-head", "--filter=blob:none", "origin", rev],
        git_dir=git_dir,
        timeout=FETCH_TIMEOUT_S,
        check=True,
        what=f"git fetch {url} {rev}",
    )


def ensure_clone(url: str, rev: str, *, cache_dir: Path | None = None) -> Clone:
    """The cached clone of ``url`` holding ``rev``: cloned on first use, updated on later calls.

    A full SHA already in the cache needs no network (a commit never changes); any other revision, or a
    SHA the cache lacks, fetches first.
    """
    cache = cache_dir or default_directory()
    _write_readme(cache)
    dest = clone_path(url, cache)
    with _locked(dest):
        fetched = False
        if not (dest / "HEAD").exists():
            _clone_bare_blobless(url, dest)
            fetched = True
        sha = git.rev_parse_commit(dest, rev) if git.FULL_SHA.match(rev) else None
        if sha is None and not fetched:
            _update(dest, url)
            fetched = True
        if sha is None:
            sha = git.rev_parse_commit(dest, rev)
        if sha is None and git.HEX.match(rev):
            try:
                _fetch_commit(dest, url, rev)
            except SourceError:
                pass
            sha = git.rev_parse_commit(dest, rev)
        if sha is None:
            raise SourceError(
                f"{url}@{rev}: revision {rev!r} is not in the repository",
                hint="check the revision on the remote (git ls-remote URL), or push it",
            )
    return Clone(url=url, git_dir=dest, sha=sha, fetched=fetched)


def missing_blobs(git_dir: Path, commit: str, oids: Sequence[str]) -> list[str]:
    """Which of ``oids`` (blobs of ``commit``'s tree) are not in the local store, without fetching any.

    ``rev-list --missing=print`` walks the one tree locally and marks absent objects with ``?``.
    """
    wanted = set(oids)
    if not wanted:
        return []
    out = git.run_git(
        ["rev-list", "--objects", "--no-walk", "--missing=print", "--no-object-names", commit],
        git_dir=git_dir,
        what="git rev-list",
    )
    missing = []
    for line in out.decode().splitlines():
        if line.startswith("?") and line[1:].strip() in wanted:
            missing.append(line[1:].strip())
    return missing


def prefetch_blobs(git_dir: Path, oids: Sequence[str], *, commit: str) -> int:
    """Fetch every blob of ``oids`` the clone lacks, in ONE request. Returns how many were fetched."""
    missing = missing_blobs(git_dir, commit, oids)
    if not missing:
        return 0
    git.run_git(
        [
            "-c",
            "fetch.negotiationAlgorithm=noop",
            "fetch",
            "--quiet",
            "--no-tags",
            "--no-write-fetch-head",
            "--filter=blob:none",
            "--stdin",
            "origin",
        ],
        git_dir=git_dir,
        input="".join(f"{oid}\n" for oid in missing).encode(),
        timeout=FETCH_TIMEOUT_S,
        what=f"git fetch of {len(missing)} blobs",
    )
    return len(missing)
