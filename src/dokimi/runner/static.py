"""Running the manifest's ``static`` entry point for ``repo scan --run-static``.

The image is built from the eval tree as for tasks check (or ``image`` is used). The container is a grade
container (HOME a fresh grade-home, {eval_dir} read-only, no {source_dir}) with ``image.network``; its
workspace, /eval/run/workspace, is the eval tree as git stores it without the eval dir, committed once so that
``git ls-files`` works. {out} is /eval/run/static.json. The document is copied to ``out_dir/static.json`` and
its path returned; the scan validates it as repo_static.v1 when it merges it (an invalid one is reported, not
merged, and the scan exits 1).
"""

from __future__ import annotations

import dataclasses
import secrets
import shutil
import tempfile
from pathlib import Path
from typing import TYPE_CHECKING

from dokimi.errors import ContainerError, UsageError
from dokimi.grading.entrypoints import run_entry_point
from dokimi.grading.environment import GRADE_TIMEOUT_S, GradeEnvironment
from dokimi.repo.workspace import init_and_commit
from dokimi.rundir import CONTENT_DIR, STATIC_JSON, RunDir
from dokimi.sandbox.container import container_name, give_to_container_user
from dokimi.sandbox.docker import require_docker
from dokimi.sandbox.image import BUILD_TIMEOUT_S, build_image, use_image
from dokimi.sandbox.specs import resolve_caches
from dokimi.source.export import export_tree_as_stored

if TYPE_CHECKING:
    from dokimi.repo.manifest import LoadedManifest
    from dokimi.source import Repo

STATIC_RUN_DIR = "run"


def run_static(
    repo: Repo,
    loaded: LoadedManifest,
    *,
    image: str | None = None,
    out_dir: Path | None = None,
    timeout_s: float = GRADE_TIMEOUT_S,
    build_timeout_s: float = BUILD_TIMEOUT_S,
    build_network: str | None = None,
) -> Path:
    """Run ``entry_points.static`` and return the path of the document it wrote (``out_dir/static.json``;
    ``out_dir`` defaults to a new temporary directory, which the caller may remove).

    An entry point that exits non-zero, times out or writes nothing is a ContainerError with its stderr.
    """
    manifest = loaded.manifest
    if manifest is None or manifest.entry_points is None or not manifest.entry_points.static:
        raise UsageError(
            "--run-static needs a manifest whose entry_points has static",
            hint='add entry_points.static (for example "python3 {eval_dir}/static_check.py --out {out}")',
        )
    assert manifest.eval_dir is not None
    require_docker()
    out_dir = Path(out_dir) if out_dir is not None else Path(tempfile.mkdtemp(prefix="dokimi-static."))
    out_dir.mkdir(parents=True, exist_ok=True)
    scratch = Path(tempfile.mkdtemp(prefix="dokimi-static-run."))
    try:
        snapshot = repo.eval_snapshot()
        content = scratch / CONTENT_DIR
        export_tree_as_stored(snapshot, content, under=manifest.eval_dir)
        built = (
            use_image(image)
            if image
            else build_image(
                repo, manifest, work_dir=scratch, network=build_network, timeout_s=build_timeout_s
            )
        )
        run_dir = scratch / STATIC_RUN_DIR
        workspace = RunDir(run_dir).workspace
        export_tree_as_stored(snapshot, workspace, exclude=[manifest.eval_dir])
        init_and_commit(workspace)
        give_to_container_user(run_dir)
        environment = GradeEnvironment.for_manifest(
            manifest,
            image=built.ref,
            eval_content=content,
            source_dir=None,
            caches=tuple(resolve_caches(manifest.image, manifest.id)),
        )
        environment = dataclasses.replace(environment, grade_timeout_s=timeout_s)
        entry = run_entry_point(
            environment,
            run_dir,
            None,
            "static",
            name=container_name(f"static{secrets.token_hex(4)}", manifest.id, "grade"),
        )
        failure = entry.failure(timeout_s)
        if failure is not None:
            raise ContainerError(f"the static entry point failed: {failure}", hint="fix entry_points.static")
        written = RunDir(run_dir).static_json
        if not written.is_file() or written.is_symlink():
            raise ContainerError(
                "the static entry point wrote nothing to {out}",
                hint="it must write a repo_static.v1 document to the path {out} names",
            )
        target = out_dir / STATIC_JSON
        shutil.copyfile(written, target)
        return target
    finally:
        shutil.rmtree(scratch, ignore_errors=True)
