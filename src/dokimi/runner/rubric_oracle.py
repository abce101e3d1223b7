"""``repo rubric check``'s oracle row from the repository's own oracle, run as ``repo tasks check`` runs it.

The row's change is what the ``oracle`` entry point does to a workspace prepared as a cell's (arm
guidance:raw), in a grade container of the eval tree's image, with the exported eval_dir at {eval_dir}: so
the rubric is checked against the same oracle that tasks check proves passes the gate. ``oracle.patch`` in the
task directory is used only when the manifest has no ``oracle`` entry point.

The image and the exported eval_dir are made on the first oracle row (a check of tasks without a rubric
builds nothing) and the exported eval_dir is removed at the end. An oracle that fails (non-zero exit, timeout)
is a DokimiError: the row could not run, and the task is not admitted.
"""

from __future__ import annotations

import dataclasses
import secrets
import shutil
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

from dokimi.checks.merge.calibrate import check_rubrics
from dokimi.errors import UsageError
from dokimi.grading.entrypoints import run_entry_point, source_dir_for
from dokimi.grading.environment import GRADE_TIMEOUT_S, GradeEnvironment
from dokimi.repo.arms import ARM_RAW
from dokimi.repo.workspace import WorkspaceSource, prepare_workspace
from dokimi.rundir import CONTENT_DIR, TASK_JSON, RunDir, task_dir
from dokimi.sandbox.container import container_name
from dokimi.sandbox.docker import require_docker
from dokimi.sandbox.image import build_image, use_image
from dokimi.sandbox.specs import image_env, prepare_agent_dirs
from dokimi.schemas._base import write_document
from dokimi.schemas.meta import no_agent_meta
from dokimi.source.export import export_tree_as_stored

if TYPE_CHECKING:
    from dokimi.checks.merge.calibrate import CheckInputs, RubricCheck
    from dokimi.repo.manifest import LoadedManifest
    from dokimi.schemas.manifest import RepoManifest
    from dokimi.schemas.task import Task
    from dokimi.source import Repo

__all__ = ["ContainerOracle", "OracleImage", "check_rubrics_with_oracle", "container_oracle"]


@dataclass(frozen=True)
class OracleImage:
    """How the oracle's image is found: ``--image``, else built from the eval tree."""

    image: str | None = None
    source_dir: Path | None = None
    """{source_dir} for an oracle that names it; default: the source's own git directory."""
    timeout_s: float = GRADE_TIMEOUT_S


@dataclass
class ContainerOracle:
    """The oracle entry point as the rubric check's oracle function (``CheckInputs.oracle``): prepares the
    workspace of a run directory and runs the oracle on it."""

    repo: Repo
    loaded: LoadedManifest
    options: OracleImage
    work_dir: Path
    """Where the eval_dir is exported (removed by the caller)."""
    _environment: GradeEnvironment | None = field(default=None, init=False)
    _batch: str = field(default_factory=lambda: f"rubric{secrets.token_hex(4)}", init=False)

    @property
    def manifest(self) -> RepoManifest:
        manifest = self.loaded.manifest
        assert manifest is not None and manifest.eval_dir is not None
        return manifest

    def environment(self) -> GradeEnvironment:
        """The grade environment, made on first use: the exported eval_dir and the image."""
        if self._environment is not None:
            return self._environment
        manifest = self.manifest
        assert manifest.entry_points is not None and manifest.entry_points.oracle
        require_docker()
        content = self.work_dir / CONTENT_DIR
        export_tree_as_stored(self.repo.eval_snapshot(), content, under=manifest.eval_dir or "")
        image = self.options.image
        built = use_image(image) if image else build_image(self.repo, manifest, work_dir=self.work_dir)
        source_dir = source_dir_for(
            self.repo,
            (manifest.entry_points.oracle,),
            given=self.options.source_dir,
            hint="run from a local clone (<dir> or <dir>@<rev>)",
        )
        environment = GradeEnvironment.for_manifest(
            manifest, image=built.ref, eval_content=content, source_dir=source_dir, batch=self._batch
        )
        self._environment = dataclasses.replace(environment, grade_timeout_s=self.options.timeout_s)
        return self._environment

    def __call__(self, task: Task, run_dir: Path) -> None:
        """Prepare ``run_dir/workspace`` as a cell's, with task.json and meta.json beside it, and run the
        oracle there."""
        rd = RunDir(run_dir)
        environment = self.environment()
        manifest = self.manifest
        assert manifest.eval_dir is not None
        directory = task_dir(environment.eval_content, manifest, task.id)
        prepared = prepare_workspace(
            WorkspaceSource(self.repo, manifest.eval_dir, self.loaded.guidance_globs),
            task,
            arm=ARM_RAW,
            profile=None,
            dest=rd.workspace,
            patches_root=directory,
        )
        shutil.copyfile(directory / TASK_JSON, rd.task_json)
        meta = no_agent_meta(prepared.meta_fields(), task=task.id, mode=task.mode)
        write_document(rd.meta_json, meta)
        prepare_agent_dirs(run_dir, image_env(manifest.image, task=task.id).scratch)
        name = container_name(self._batch, task.id, "oracle")
        entry = run_entry_point(environment, run_dir, task, "oracle", name=name)
        failure = entry.failure(environment.grade_timeout_s)
        if failure is not None:
            raise UsageError(
                f"the oracle failed: {failure}", hint="`dokimi repo tasks check` shows why the oracle fails"
            )


@contextmanager
def container_oracle(
    repo: Repo, loaded: LoadedManifest, options: OracleImage
) -> Iterator[ContainerOracle | None]:
    """The container oracle of the manifest, or None when it has no ``oracle`` entry point (then the oracle
    row reads ``oracle.patch``)."""
    manifest = loaded.manifest
    if manifest is None or manifest.entry_points is None or not manifest.entry_points.oracle:
        yield None
        return
    work_dir = Path(tempfile.mkdtemp(prefix="dokimi-rubric-oracle-"))
    try:
        yield ContainerOracle(repo, loaded, options, work_dir)
    finally:
        shutil.rmtree(work_dir, ignore_errors=True)


def check_rubrics_with_oracle(
    repo: Repo, loaded: LoadedManifest, inputs: CheckInputs, options: OracleImage | None = None
) -> RubricCheck:
    """``repo rubric check`` with the oracle row's change made by the repository's oracle entry point."""
    with container_oracle(repo, loaded, options or OracleImage()) as oracle:
        if oracle is not None:
            inputs = dataclasses.replace(inputs, oracle=oracle)
        return check_rubrics(repo, loaded, inputs)
