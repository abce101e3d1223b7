"""L0: every mechanically checkable claim in a repository's guidance, offline."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from dokimi.checks.scan.engine import ScanResult, scan_snapshot
from dokimi.checks.scan.report import (
    ScanView,
    build_readiness,
    merge_static,
    render_text,
    static_not_merged,
    to_sarif,
    view_of_document,
    view_of_result,
)
from dokimi.constants import DEFAULT_EVAL_DIR, DEFAULT_GUIDANCE_GLOBS, DEFAULT_MANIFEST_NAME

if TYPE_CHECKING:
    from dokimi.checks.scan.items_cache import ItemsCache
    from dokimi.checks.scan.plain_manifest import ScanKeys
    from dokimi.schemas.readiness import RepoReadiness
    from dokimi.source.snapshot import Snapshot

__all__ = [
    "ScanResult",
    "ScanView",
    "ScannedRepo",
    "build_readiness",
    "merge_static",
    "render_text",
    "scan_repo",
    "scan_result",
    "scan_snapshot",
    "static_not_merged",
    "to_sarif",
    "view_of_document",
    "view_of_result",
]


DEFAULT_MANIFEST = f"{DEFAULT_EVAL_DIR}/{DEFAULT_MANIFEST_NAME}"


@dataclass
class ScannedRepo:
    """The scan's result and what the readiness document says about where it came from."""

    result: ScanResult
    source: str
    rev: str | None
    manifest: str | None
    globs: list[str]
    also_scan: list[str]
    defaulted: bool

    def document(self) -> RepoReadiness:
        """The repo_readiness.v1 document (builds the pydantic models: only when it is written or merged)."""
        return build_readiness(
            self.result,
            source=self.source,
            rev=self.rev,
            manifest=self.manifest,
            globs=self.globs,
            also_scan=self.also_scan,
            defaulted=self.defaulted,
        )


def scan_repo(
    source: str,
    *,
    manifest: str | None = None,
    manifest_file: Path | None = None,
) -> tuple[RepoReadiness, bool]:
    """Open ``source``, load the manifest (default globs when there is none) and scan its eval snapshot.

    Returns the readiness document and whether the default globs were used.
    """
    scanned = scan_result(source, manifest=manifest, manifest_file=manifest_file)
    return scanned.document(), scanned.defaulted


def scan_result(
    source: str,
    *,
    manifest: str | None = None,
    manifest_file: Path | None = None,
    cache_items: bool = False,
) -> ScannedRepo:
    """:func:`scan_repo` without the document: the scan's plain result, for the text output. With
    ``cache_items`` (the command), the Markdown items of guidance texts parsed by earlier runs are reused
    (:mod:`dokimi.checks.scan.items_cache`)."""
    # repo scan's lean start (tests/checks/scan/test_lean_cli.py)
    from dokimi.source import git

    # Python's collector stays off from the listing to the result (see git.nogc): the listing and the scan
    # allocate hundreds of thousands of objects and free them by reference counting. It comes back on after
    # _scan_repo has returned, when the listing and its indexes are gone, so the first collection has only
    # the result to look at.
    with git.nogc():
        return _scan_repo(source, manifest, manifest_file, cache_items)


def _scan_repo(
    source: str, manifest: str | None, manifest_file: Path | None, cache_items: bool
) -> ScannedRepo:
    # repo scan's lean start (tests/checks/scan/test_lean_cli.py)
    from dokimi.source import open_source

    with open_source(source) as repo:
        snapshot = repo.eval_snapshot()
        try:
            keys = _manifest_keys(snapshot, manifest, manifest_file)
            defaulted = keys is None
            path, globs, also, systems, url, ignore = keys or (
                None,
                list(DEFAULT_GUIDANCE_GLOBS),
                [],
                None,
                None,
                [],
            )
            cache = (
                _items_cache(str(snapshot.work_tree or snapshot.git_dir or repo.label))
                if cache_items
                else None
            )
            result = scan_snapshot(
                snapshot,
                globs=globs,
                also_scan=also,
                build_systems=systems,
                source_url=url or repo.url,
                items_cache=cache,
                ignore=ignore,
            )
        finally:
            snapshot.close()
        return ScannedRepo(
            result,
            source=repo.label,
            rev=snapshot.rev,
            manifest=path,
            globs=globs,
            also_scan=also,
            defaulted=defaulted,
        )


def _items_cache(repository: str) -> ItemsCache | None:
    """The cache of Markdown items of this repository, or None where there is no place for one (no home
    directory to find the cache in): the scan then parses every file, as without it."""
    # repo scan's lean start (tests/checks/scan/test_lean_cli.py)
    from dokimi.checks.scan.items_cache import ItemsCache, cache_file

    try:
        return ItemsCache(cache_file(repository))
    except (OSError, RuntimeError, KeyError, ValueError, ImportError):
        return None


def _manifest_keys(snapshot: Snapshot, manifest: str | None, manifest_file: Path | None) -> ScanKeys | None:
    """What the scan takes from the manifest; None when there is none (the default globs apply)."""
    if manifest is None and manifest_file is None and not snapshot.is_file(DEFAULT_MANIFEST):
        return None  # without loading the manifest's models
    # repo scan's lean start (tests/checks/scan/test_lean_cli.py)
    from dokimi.checks.scan.plain_manifest import ScanKeys, plain_scan_keys

    plain = plain_scan_keys(snapshot, manifest=manifest, manifest_file=manifest_file)
    if plain is not None:
        # plain YAML that fits the model: read without the YAML library or the models
        return plain
    # repo scan's lean start (tests/checks/scan/test_lean_cli.py)
    from dokimi.repo.manifest import load_manifest

    loaded = load_manifest(snapshot, manifest=manifest, manifest_file=manifest_file, required=False)
    model = loaded.manifest
    if loaded.defaulted:
        return None
    systems = list(model.build_systems) if model is not None and model.build_systems else None
    url = model.source.url if model is not None and model.source is not None else None
    # repo scan's lean start (tests/checks/scan/test_lean_cli.py)
    from dokimi.checks.scan.suppress import IgnoreEntry

    ignore = [IgnoreEntry(**entry.model_dump()) for entry in model.scan.ignore] if model is not None else []
    return ScanKeys(loaded.path, list(loaded.guidance_globs), list(loaded.also_scan), systems, url, ignore)
