"""A task's rubric: the maintainer's approval (``repo rubric approve``), and held-out rubrics kept in a
private path (``--rubrics DIR``), docs/mergeability.md.

A drafted rubric is ``draft`` until a maintainer reviews it blocker by blocker and approves it. The approval
is recorded in the rubric itself (who, when, and the digest of the content approved) and in the repository's
history when it is committed. A rubric edited after its approval is provisional again
(:func:`dokimi.schemas.rubric.provisional`) until approved anew.

The file is rewritten with its keys in their order and its values as written, only ``status`` and
``approval`` changed.

Held-out rubrics (:func:`overlay_held_out_rubrics`) live outside the repository, as ``DIR/<task-id>/
rubric.json`` with their calibration diffs beside them: a repository whose tasks come from public merged PRs
may keep its rubrics out of reach of models trained on its public tree. A command given ``--rubrics DIR``
copies them into its exported eval dir, so they count exactly as a rubric of the eval dir does, and the eval
dir's digest (a batch's pin, the admission records) covers them.
"""

from __future__ import annotations

import json
import shutil
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING

from dokimi.errors import UsageError
from dokimi.rundir import RUBRIC_JSON, TASK_JSON, task_dir
from dokimi.schemas._base import parse_json, read_document, read_raw, validate_marked
from dokimi.schemas.rubric import (
    Approval,
    RepoRubric,
    RubricStatus,
    content_digest,
    edited_since_approval,
    task_matches,
)

if TYPE_CHECKING:
    from dokimi.schemas.manifest import RepoManifest
    from dokimi.source import Repo

__all__ = ["Approved", "approve_rubric", "held_out_dir", "overlay_held_out_rubrics"]


@dataclass(frozen=True)
class Approved:
    path: Path
    rubric: RepoRubric
    already: bool
    """It was approved as it reads, before this call: nothing was written."""


def approve_rubric(path: Path, *, by: str, note: str = "", now: datetime | None = None) -> Approved:
    """Mark the rubric at ``path`` approved by ``by`` (module docstring). A rubric already approved as it
    reads is left as it is (``already``)."""
    if not by.strip():
        raise UsageError("--by is empty", hint="name the maintainer who reviewed the rubric")
    if not path.is_file():
        raise UsageError(f"{path} does not exist", hint="draft one with `dokimi repo rubric draft TASK`")
    text = read_raw(path).decode("utf-8")
    marked = parse_json(text, str(path))
    rubric = validate_marked(marked, RepoRubric)
    if (
        rubric.status == RubricStatus.APPROVED
        and rubric.approval is not None
        and not edited_since_approval(rubric)
    ):
        return Approved(path, rubric, already=True)
    when = (now or datetime.now(UTC)).isoformat(timespec="seconds")
    approval = Approval(by=by.strip(), at=when, digest=content_digest(rubric), note=note)
    raw = json.loads(text)
    raw["status"] = RubricStatus.APPROVED.value
    raw["approval"] = approval.model_dump(mode="json")
    path.write_text(json.dumps(raw, indent=2, ensure_ascii=False) + "\n", encoding="utf-8")
    return Approved(path, RepoRubric.model_validate(raw), already=False)


# --- held-out rubrics -----------------------------------------------------------------------------------


def repository_roots(repo: Repo) -> list[Path]:
    """The directories of the source on this machine: its work tree, and the one holding its ``.git``."""
    roots = [repo.work_tree] if repo.work_tree is not None else []
    if repo.git_dir is not None:
        roots.append(repo.git_dir.parent if repo.git_dir.name == ".git" else repo.git_dir)
    return [root.resolve() for root in roots]


def held_out_dir(rubrics_dir: Path, repo: Repo) -> Path:
    """``--rubrics DIR`` checked: a directory outside the repository (a rubric inside it is as public as
    the eval dir's), resolved."""
    resolved = rubrics_dir.resolve()
    if not resolved.is_dir():
        raise UsageError(
            f"--rubrics {rubrics_dir}: not a directory", hint="give DIR holding <task-id>/rubric.json"
        )
    for root in repository_roots(repo):
        if resolved == root or root in resolved.parents:
            raise UsageError(
                f"--rubrics {rubrics_dir} is inside the repository {root}: a held-out rubric there is public",
                hint="keep held-out rubrics in a private path outside the repository (or commit them to the "
                "eval dir, without --rubrics)",
            )
    return resolved


def _inside(task_root: Path, rel: str, what: str) -> Path:
    parts = Path(rel).parts
    if Path(rel).is_absolute() or ".." in parts or not parts:
        raise UsageError(f"{what}: {rel!r} must be a path inside the task's directory")
    return task_root / rel


def overlay_held_out_rubrics(content: Path, manifest: RepoManifest, rubrics_dir: Path) -> list[str]:
    """Copy each ``DIR/<task-id>/rubric.json`` (with the calibration diffs it names) into the task's
    directory of an exported eval dir, so every reader of that copy (cells, references, the report, regrade,
    rubric check) treats it as it treats a rubric of the eval dir; returns the task ids. Refused: an entry
    that names no task, one without rubric.json, a rubric that does not validate or names another task, a
    calibration diff found nowhere, and a task with a rubric in the eval dir too (which one counts would be
    ambiguous)."""
    copied = []
    for entry in sorted(rubrics_dir.iterdir()):
        if entry.name.startswith("."):
            continue
        target = task_dir(content, manifest, entry.name)
        if not entry.is_dir() or not (target / TASK_JSON).is_file():
            raise UsageError(
                f"--rubrics: {entry} names no task of the eval dir",
                hint="DIR holds one directory per task id, each with its rubric.json",
            )
        source = entry / RUBRIC_JSON
        if not source.is_file():
            raise UsageError(f"--rubrics: {entry} has no {RUBRIC_JSON}")
        if (target / RUBRIC_JSON).exists():
            raise UsageError(
                f"task {entry.name} has a rubric in the eval dir and one in {rubrics_dir}",
                hint="keep one: the held-out one (remove the eval dir's) or the public one (drop it from "
                "DIR)",
            )
        rubric = read_document(source, RepoRubric)
        problem = task_matches(rubric, entry.name)
        if problem:
            raise UsageError(f"{source}: {problem}")
        for rel in [RUBRIC_JSON, *rubric.calibration.lazy, *rubric.calibration.alt]:
            origin = _inside(entry, rel, f"{source}: calibration")
            destination = _inside(target, rel, f"{source}: calibration")
            if origin.is_file():
                destination.parent.mkdir(parents=True, exist_ok=True)
                shutil.copyfile(origin, destination)
            elif not destination.is_file():
                raise UsageError(
                    f"{source}: calibration diff {rel} is neither in {entry} nor in the task's directory"
                )
        copied.append(entry.name)
    return copied
