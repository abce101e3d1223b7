"""Build a fixture repository and scan it: the claims as (line, kind, claim, status) rows."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path

from dokimi.checks.scan import scan_snapshot
from dokimi.checks.scan.engine import ScanResult
from dokimi.checks.scan.suppress import IgnoreEntry
from dokimi.source import open_source
from tests.helpers.git import FileContent, git_repo


def scan_dir(
    source: str,
    *,
    globs: list[str] | None = None,
    also_scan: list[str] | None = None,
    build_systems: list[str] | None = None,
    source_url: str | None = None,
    ignore: list[IgnoreEntry] | None = None,
) -> ScanResult:
    with open_source(source) as repo:
        snapshot = repo.eval_snapshot()
        try:
            return scan_snapshot(
                snapshot,
                globs=globs if globs is not None else ["**/AGENTS.md"],
                also_scan=also_scan or [],
                build_systems=build_systems,
                source_url=source_url,
                ignore=ignore,
            )
        finally:
            snapshot.close()


def rows(result: ScanResult, file: str | None = None) -> list[tuple[int, str, str, str]]:
    return [
        (d.line, d.kind, d.claim, d.verdict.status) for d in result.drafts if file is None or d.file == file
    ]


def scan_files(tmp_path: Path, files: Mapping[str, FileContent], **kwargs: object) -> ScanResult:
    repo = git_repo(tmp_path / "repo", files)
    return scan_dir(str(repo), **kwargs)  # type: ignore[arg-type]


def find(result: ScanResult, claim: str) -> object:
    return next(d for d in result.drafts if d.claim == claim)


def add_submodule_entry(repo: Path, path: str) -> str:
    """Record a gitlink (mode 160000) at ``path`` and commit it; returns the new HEAD."""
    from tests.helpers.git import git, head

    git(repo, "update-index", "--add", "--cacheinfo", f"160000,{head(repo)},{path}")
    git(repo, "commit", "-q", "--no-gpg-sign", "-m", "submodule")
    return head(repo)
