"""Session fixtures of the container tests: one toy repository and one image built from it for the session.

The toy source is a working tree, so its image is tagged by the digest of its build context, which holds no
commit SHA: a later session finds the image of an earlier one and skips the build.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from dokimi.repo.manifest import LoadedManifest, load_manifest
from dokimi.repo.workspace import WorkspaceSource
from dokimi.sandbox.image import BuiltImage, build_image
from dokimi.schemas.task import Task
from dokimi.source import Repo, open_source
from dokimi.source.export import export_tree_as_stored
from tests.helpers.evalrepo import EVAL_DIR, TASKS, make_eval_repo

SANDBOX_TASKS = {
    **TASKS,
    "inspect_grader": ("inspect", {}, {}),
    "crash_grader": ("crash", {}, {}),
    "hang_grader": ("hang", {}, {}),
    "invalid_grader": ("invalid", {}, {}),
}


@dataclass
class Toy:
    path: Path
    base: str
    head: str
    repo: Repo
    loaded: LoadedManifest
    image: BuiltImage
    content: Path
    """The eval dir exported as {eval_dir}."""


@pytest.fixture(scope="session")
def toy(docker_available: bool, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Toy]:
    root = tmp_path_factory.mktemp("toy")
    path, base, head = make_eval_repo(root / "repo", tasks=SANDBOX_TASKS)
    with open_source(str(path)) as repo:
        loaded = load_manifest(repo.eval_snapshot(), manifest=None, manifest_file=None, required=True)
        assert loaded.manifest is not None
        image = build_image(repo, loaded.manifest, work_dir=root)
        content = root / "content"
        export_tree_as_stored(repo.eval_snapshot(), content, under=EVAL_DIR)
        yield Toy(path, base, head, repo, loaded, image, content)


def prepared_run(toy: Toy, run_dir: Path, task_id: str) -> Task:
    """A run directory as the runner leaves it before grading: the workspace of ``task_id`` (guidance:raw),
    task.json, meta.json, an empty trace and answer; everything the container user's."""
    import shutil

    from dokimi.repo.arms import ARM_RAW
    from dokimi.repo.manifest import load_tasks
    from dokimi.repo.workspace import prepare_workspace
    from dokimi.sandbox.specs import image_env, prepare_agent_dirs

    assert toy.loaded.manifest is not None
    loaded = {t.id: t for t in load_tasks(toy.repo.eval_snapshot(), toy.loaded.manifest)}
    task = loaded[task_id].task
    assert task is not None
    run_dir.mkdir(parents=True, exist_ok=True)
    prepared = prepare_workspace(
        WorkspaceSource(toy.repo, EVAL_DIR, toy.loaded.guidance_globs),
        task,
        arm=ARM_RAW,
        dest=run_dir / "workspace",
        patches_root=toy.content / "tasks" / task_id,
    )
    shutil.copyfile(toy.content / "tasks" / task_id / "task.json", run_dir / "task.json")
    meta = {**prepared.meta_fields(), "task": task_id, "harness": "none", "model": "none", "rep": 0}
    (run_dir / "meta.json").write_text(json.dumps(meta))
    (run_dir / "events.jsonl").write_text("")
    (run_dir / "answer.txt").write_text("")
    prepare_agent_dirs(run_dir, image_env(toy.loaded.manifest.image, task=task_id).scratch)
    return task
