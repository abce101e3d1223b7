"""``repo rubric draft TASK``: the inputs of the drafter gathered from the repository, and the draft written.

1. The oracle's change: the repository's ``oracle`` entry point run on a workspace prepared as a cell's (arm
   guidance:raw), in a grade container, as ``repo rubric check`` runs it (:mod:`dokimi.runner.rubric_oracle`);
   ``oracle.patch`` in the task directory when the manifest has no oracle entry point.
2. The guidance files at the task's base: those of a workspace prepared as a cell's, untouched.
3. The team review rules that may score the task (its base is on or after their cut date) and whose paths the
   oracle's change touches (confirmed ones only).
4. The drafting model (:func:`dokimi.checks.merge.draft.draft_rubric`), then ``tasks/<id>/rubric.json``
   (status draft, with the record of what was read) and, when the drafter wrote one, ``calib/lazy.diff``.

Nothing of a batch is read: the drafter never sees an agent's output. An existing rubric.json is never
overwritten without ``force`` (it may be a maintainer's approved work).
"""

from __future__ import annotations

import json
import os
import shutil
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from dokimi import safefs
from dokimi.checks.merge.diff import take_workspace_diff
from dokimi.checks.merge.draft import Drafted, DraftInputs, draft_rubric
from dokimi.checks.merge.judge import paths_in_diff_text
from dokimi.errors import UsageError
from dokimi.repo.arms import ARM_RAW
from dokimi.repo.manifest import load_tasks
from dokimi.repo.rules import load_review_rules, rules_for_judge
from dokimi.repo.workspace import PreparedWorkspace, WorkspaceSource, head_sha, prepare_workspace
from dokimi.rundir import CONTENT_DIR, ORACLE_PATCH, RUBRIC_JSON, RunDir, task_dir
from dokimi.runner.rubric_oracle import OracleImage, container_oracle
from dokimi.schemas.review_rules import rules_for_diff
from dokimi.source.export import export_tree_as_stored
from dokimi.source.git import run_git

if TYPE_CHECKING:
    from dokimi.checks.merge.judge import JudgeOptions
    from dokimi.repo.manifest import LoadedManifest
    from dokimi.schemas.task import Task
    from dokimi.source import Repo

__all__ = ["DraftRequest", "DraftWritten", "draft_task_rubric"]

LAZY_DIFF = "calib/lazy.diff"
MAX_GUIDANCE_BYTES = 256 * 1024
"""What the drafter reads of one guidance file."""
SYMLINK_MODE = "120000"
"""A guidance entry's git mode when it is a symbolic link."""


@dataclass(frozen=True)
class DraftRequest:
    task_id: str
    model: str
    judge: JudgeOptions
    image: str | None = None
    force: bool = False


@dataclass(frozen=True)
class DraftWritten:
    """What ``repo rubric draft`` wrote."""

    rubric_path: Path
    lazy_path: Path | None
    drafted: Drafted


@dataclass(frozen=True)
class _Source:
    """The repository, its manifest and the exported eval dir (the task's patches)."""

    repo: Repo
    loaded: LoadedManifest
    content: Path

    def prepare(self, task: Task, dest: Path) -> PreparedWorkspace:
        """A workspace prepared as a cell's (arm guidance:raw), untouched."""
        manifest = self.loaded.manifest
        assert manifest is not None and manifest.eval_dir is not None
        return prepare_workspace(
            WorkspaceSource(self.repo, manifest.eval_dir, self.loaded.guidance_globs),
            task,
            arm=ARM_RAW,
            profile=None,
            dest=dest,
            patches_root=task_dir(self.content, manifest, task.id),
        )


def _diff(workspace: Path) -> str:
    return take_workspace_diff(workspace, head_sha(workspace), ignored_before=None).text


def oracle_change(source: _Source, task: Task, work: Path, image: str | None) -> tuple[str, str]:
    """The oracle's diff and where it came from (module docstring, step 1)."""
    manifest = source.loaded.manifest
    assert manifest is not None
    with container_oracle(source.repo, source.loaded, OracleImage(image=image)) as oracle:
        if oracle is not None:
            run_dir = work / "oracle"
            oracle(task, run_dir)
            return _diff(RunDir(run_dir).workspace), "oracle entry point"
    patch = task_dir(source.content, manifest, task.id) / ORACLE_PATCH
    if not patch.is_file():
        raise UsageError(
            f"task {task.id} has no oracle: the manifest has no oracle entry point and the task no "
            f"{ORACLE_PATCH}",
            hint="the drafter reads the maintainers' own fix: add the oracle entry point or oracle.patch",
        )
    workspace = work / "oracle-patch"
    source.prepare(task, workspace)
    what = f"git apply {ORACLE_PATCH}"
    run_git(["apply", "--whitespace=nowarn", "--", str(patch.resolve())], cwd=workspace, what=what)
    return _diff(workspace), ORACLE_PATCH


def guidance_at_base(prepared: PreparedWorkspace) -> dict[str, str]:
    """Path -> text of every guidance file of a prepared workspace (the first 256 KiB of each); a symbolic
    link (CLAUDE.md -> AGENTS.md, as many repositories keep both) is said as one, never followed."""
    root = prepared.path
    return {
        path: f"(a symbolic link to {os.readlink(root / path)})"
        if mode == SYMLINK_MODE
        else safefs.read_bytes(root / path, trusted=root, limit=MAX_GUIDANCE_BYTES).decode("utf-8", "replace")
        for path, mode, _ in prepared.guidance
    }


def draft_task_rubric(
    repo: Repo, loaded: LoadedManifest, repo_dir: Path, request: DraftRequest
) -> DraftWritten:
    """Gather the inputs, ask the drafter, write the draft (module docstring)."""
    manifest = loaded.manifest
    if manifest is None or manifest.eval_dir is None or manifest.tasks is None:
        raise UsageError(
            "rubric draft needs a manifest with eval_dir and tasks", hint="run `dokimi repo init`"
        )
    found = {t.id: t for t in load_tasks(repo.eval_snapshot(), manifest)}
    loaded_task = found.get(request.task_id)
    if loaded_task is None or loaded_task.task is None:
        problem = "has no such task" if loaded_task is None else f"cannot read {loaded_task.path}"
        raise UsageError(
            f"{request.task_id}: the repository {problem}", hint=", ".join(sorted(found)) or None
        )
    task = loaded_task.task
    target = repo_dir / loaded_task.dir / RUBRIC_JSON
    if target.exists() and not request.force:
        raise UsageError(
            f"{target} exists; a draft never overwrites a rubric (it may be a maintainer's approved work)",
            hint="move it aside, or pass --force to replace it",
        )
    work = Path(tempfile.mkdtemp(prefix="dokimi-rubric-draft-"))
    try:
        content = work / CONTENT_DIR
        export_tree_as_stored(repo.eval_snapshot(), content, under=manifest.eval_dir)
        source = _Source(repo, loaded, content)
        diff_text, where = oracle_change(source, task, work, request.image)
        prepared = source.prepare(task, work / "null")
        rules = rules_for_judge(load_review_rules(content), prepared.base_date)
        chosen = rules_for_diff(rules, paths_in_diff_text(diff_text), []) if rules is not None else []
        inputs = DraftInputs(task, diff_text, where, guidance_at_base(prepared), chosen)
        drafted = draft_rubric(inputs, model=request.model, options=request.judge)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    document = drafted.rubric.model_dump(mode="json", by_alias=True, exclude_none=True)
    target.write_text(json.dumps(document, indent=2) + "\n", encoding="utf-8")
    lazy_path = None
    if drafted.lazy_diff is not None:
        lazy_path = target.parent / LAZY_DIFF
        lazy_path.parent.mkdir(parents=True, exist_ok=True)
        lazy_path.write_text(
            drafted.lazy_diff if drafted.lazy_diff.endswith("\n") else drafted.lazy_diff + "\n"
        )
    return DraftWritten(target, lazy_path, drafted)
