"""Opening a finished batch for grading again (``repo regrade``, ``repo perf RUN_DIR``): its pin, the manifest
it ran with, its exported eval_dir and the :class:`GradeEnvironment` its cells were graded in. Written once.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from dokimi.batch import read_pin
from dokimi.errors import DocumentError, UsageError
from dokimi.grading.entrypoints import needs_source_dir
from dokimi.grading.environment import GradeEnvironment
from dokimi.grading.reference import stored_references
from dokimi.rundir import BatchLayout
from dokimi.sandbox.docker import image_exists, require_docker
from dokimi.sandbox.specs import resolve_caches
from dokimi.schemas._base import read_document
from dokimi.schemas.manifest import RepoManifest
from dokimi.source import open_source

if TYPE_CHECKING:
    from dokimi.sandbox.specs import CacheMount
    from dokimi.schemas.batch import BatchPin

__all__ = ["FinishedBatch", "open_finished_batch"]


@dataclass(frozen=True)
class FinishedBatch:
    """A batch directory that ``repo run`` wrote, ready to be graded again."""

    layout: BatchLayout
    pin: BatchPin
    manifest: RepoManifest
    environment: GradeEnvironment

    def with_source_dir(self, command: str, given: Path | None) -> FinishedBatch:
        """The batch with {source_dir} set for an entry point that names it: ``given``, else the git directory
        of the batch's source (opened from the pin)."""
        source_dir = given
        if source_dir is None and needs_source_dir(command):
            with open_source(self.pin.source) as repo:
                source_dir = repo.git_dir
        if source_dir == self.environment.source_dir:
            return self
        environment = dataclasses.replace(self.environment, source_dir=source_dir)
        return dataclasses.replace(self, environment=environment)


def open_finished_batch(
    root: Path,
    *,
    caches: Mapping[str, Path] | None = None,
    containers: bool = True,
    hint: str = "give a batch that repo run wrote",
) -> FinishedBatch:
    """Read the batch at ``root`` (pin, manifest copy, exported eval_dir). With ``containers``: docker must
    run and the batch's image must be on it, and the caches are resolved. Raises UsageError naming what is
    missing."""
    layout = BatchLayout(Path(root).absolute())
    pin, why = read_pin(layout.root)
    if pin is None:
        raise UsageError(f"{layout.root}: {why}", hint=hint)
    try:
        manifest = read_document(layout.manifest_copy, RepoManifest)
    except DocumentError as exc:
        raise UsageError(f"the batch's manifest copy cannot be read: {exc}", hint="rerun the batch") from None
    if manifest.entry_points is None:
        raise UsageError(f"{layout.manifest_copy} has no entry_points", hint="rerun the batch")
    if not layout.content.is_dir():
        raise UsageError(
            f"{layout.content} is missing: the batch's exported eval_dir", hint="rerun the batch"
        )
    cache_mounts: tuple[CacheMount, ...] = ()
    if containers:
        require_docker()
        if not image_exists(pin.image):
            raise UsageError(
                f"the batch's image {pin.image} is not on this docker daemon",
                hint="rebuild it with `repo run` on the batch's eval tree (a rerun skips finished cells)",
            )
        cache_mounts = tuple(resolve_caches(manifest.image, manifest.id, overrides=caches))
    environment = GradeEnvironment.for_manifest(
        manifest,
        image=pin.image,
        eval_content=layout.content,
        source_dir=None,
        caches=cache_mounts,
        batch=layout.name,
    )
    environment = dataclasses.replace(environment, references=stored_references(layout))
    return FinishedBatch(layout, pin, manifest, environment)
