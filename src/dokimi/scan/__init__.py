"""L0: every mechanically checkable claim in a repository's guidance, offline (contract §8)."""

from __future__ import annotations

from pathlib import Path

from dokimi.scan.engine import ScanResult, scan_snapshot
from dokimi.scan.report import build_readiness, merge_static, render_text, static_not_merged, to_sarif
from dokimi.schemas.readiness import RepoReadiness

__all__ = [
    "ScanResult",
    "build_readiness",
    "merge_static",
    "render_text",
    "scan_repo",
    "scan_snapshot",
    "static_not_merged",
    "to_sarif",
    "RepoReadiness",
]


def scan_repo(
    source: str,
    *,
    manifest: str | None = None,
    manifest_file: Path | None = None,
) -> tuple[RepoReadiness, bool]:
    """Open ``source``, load the manifest (default globs when there is none) and scan its eval snapshot.

    Returns the readiness document and whether the default globs were used.
    """
    from dokimi.source import git

    # Python's collector stays off from the listing to the document (see git.nogc): the listing and the scan
    # allocate hundreds of thousands of objects and free them by reference counting. It comes back on after
    # _scan_repo has returned, when the listing and its indexes are gone, so the first collection has only
    # the document to look at.
    with git.nogc():
        return _scan_repo(source, manifest, manifest_file)


def _scan_repo(source: str, manifest: str | None, manifest_file: Path | None) -> tuple[RepoReadiness, bool]:
    from dokimi.manifest import load_manifest
    from dokimi.source import open_source

    with open_source(source) as repo:
        snapshot = repo.eval_snapshot()
        try:
            loaded = load_manifest(snapshot, manifest=manifest, manifest_file=manifest_file, required=False)
            model = loaded.manifest
            url = (model.source.url if model is not None and model.source is not None else None) or repo.url
            result = scan_snapshot(
                snapshot,
                globs=list(loaded.guidance_globs),
                also_scan=list(loaded.also_scan),
                build_systems=list(model.build_systems)
                if model is not None and model.build_systems
                else None,
                source_url=url,
            )
        finally:
            snapshot.close()
        document = build_readiness(
            result,
            source=repo.label,
            rev=snapshot.rev,
            manifest=loaded.path,
            globs=list(loaded.guidance_globs),
            also_scan=list(loaded.also_scan),
            defaulted=loaded.defaulted,
        )
    return document, loaded.defaulted
