"""Which tasks a real run admits: every task proven sound by ``repo tasks check``, and every task gated on
``mergeable`` with its rubric admitted by ``repo rubric check``, on what the run will run.

The checks keep one record per task in dokimi's cache (``<DOKIMI_HOME>/checks/``, dokimi_check_record.v1),
keyed by what they checked (:class:`~dokimi.schemas.check_record.CheckedAgainst`): the exported eval_dir's
digest (task.json, patches, graders and rubric), the task's base commit, the image (tasks check), the judge
model (rubric check). So a run finds them wherever the check wrote its report (``--out`` or a temporary
directory), and a record no longer speaks for a task once any of that changed.

The rule (:func:`admission_refusal`): a real run refuses a task whose record says broken or unsupported, a
task no record speaks for (unchecked), and a task gated on ``mergeable`` whose rubric no check admitted with
the run's judge model; the refusal names the command that checks it. ``--allow-unchecked`` runs them anyway,
and batch.json records which and why. A dry run is never held back: it pays nothing and is how a task is
tried out.
"""

from __future__ import annotations

import hashlib
import json
import shutil
import tempfile
from collections.abc import Callable, Mapping, Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Literal

from dokimi import __version__
from dokimi.errors import DocumentError
from dokimi.home import cache_directory
from dokimi.repo.manifest import load_tasks
from dokimi.rundir import RUBRIC_CHECK_JSON
from dokimi.sandbox.image import context_digest
from dokimi.schemas._base import read_document, write_document
from dokimi.schemas.check_record import CheckedAgainst, CheckRecord
from dokimi.source.export import export_tree_as_stored

if TYPE_CHECKING:
    from dokimi.checks.merge.calibrate import RubricCheck
    from dokimi.repo.manifest import LoadedManifest
    from dokimi.schemas.task import Task
    from dokimi.source import Repo

__all__ = [
    "CHECKS_DIR",
    "admission_refusal",
    "checked_against",
    "eval_dir_digest",
    "exported_eval_dir_digest",
    "keep_rubric_records",
    "read_record",
    "record_check",
    "unadmitted",
    "write_record",
]

CHECKS_DIR = "checks"
"""Under DOKIMI_HOME: ``tasks_check/<key>.json`` and ``rubric_check/<key>.json``."""

Kind = Literal["tasks_check", "rubric_check"]


def eval_dir_digest(content: Path) -> str:
    """The digest of an exported eval_dir, as batch.json pins it."""
    return "sha256:" + context_digest(content)


def exported_eval_dir_digest(repo: Repo, eval_dir: str) -> str:
    """The digest of ``eval_dir`` of the eval tree, exported to a temporary directory (for a check that
    exports nothing of its own)."""
    scratch = Path(tempfile.mkdtemp(prefix="dokimi-eval-digest-"))
    try:
        export_tree_as_stored(repo.eval_snapshot(), scratch / "content", under=eval_dir)
        return eval_dir_digest(scratch / "content")
    finally:
        shutil.rmtree(scratch, ignore_errors=True)


def _prefixed(digest: str | None) -> str | None:
    return digest if digest is None or digest.startswith("sha256:") else "sha256:" + digest


def checked_against(
    repo: Repo,
    task: Task,
    manifest_id: str,
    eval_digest: str,
    *,
    image: tuple[str, str | None] | None = None,
    judge_model: str | None = None,
) -> CheckedAgainst:
    """The key of ``task`` in a check or a run: ``image`` is (tag, build-context digest) for a tasks check,
    ``judge_model`` the judge of a rubric check."""
    return CheckedAgainst(
        manifest_id=manifest_id,
        task=task.id,
        eval_dir_digest=eval_digest,
        base_sha=repo.resolve(task.base) or task.base,
        image=None if image is None else image[0],
        image_context_digest=None if image is None else _prefixed(image[1]),
        judge_model=judge_model,
    )


def _path(kind: Kind, key: CheckedAgainst) -> Path:
    text = json.dumps(key.model_dump(mode="json"), sort_keys=True)
    return cache_directory() / CHECKS_DIR / kind / f"{hashlib.sha256(text.encode()).hexdigest()}.json"


def write_record(
    kind: Kind,
    key: CheckedAgainst,
    status: str,
    problems: Sequence[str],
    *,
    source: str,
    report: Path | None = None,
) -> Path:
    """Keep what a check found about one task (the latest check of the same key wins)."""
    path = _path(kind, key)
    path.parent.mkdir(parents=True, exist_ok=True)
    record = CheckRecord.model_validate(
        {
            "schema": "dokimi_check_record.v1",
            "kind": kind,
            "checked": key.model_dump(mode="json"),
            "status": status,
            "problems": list(problems),
            "source": source,
            "report": None if report is None else str(report.absolute()),
            "checked_at": datetime.now(UTC).isoformat(timespec="seconds"),
            "dokimi_version": __version__,
        }
    )
    write_document(path, record)
    return path


def read_record(kind: Kind, key: CheckedAgainst) -> CheckRecord | None:
    """The record of ``key``, or None when no check of exactly that was kept (or it cannot be read)."""
    path = _path(kind, key)
    if not path.is_file():
        return None
    try:
        record: CheckRecord = read_document(path, CheckRecord)
    except DocumentError:
        return None
    return record if record.checked == key else None


def record_check(
    kind: Kind,
    verdicts: Sequence[tuple[Task, str, Sequence[str]]],
    key: Callable[[Task], CheckedAgainst],
    *,
    source: str,
    report: Path | None = None,
) -> None:
    """Keep a check's verdict on each task it checked: ``verdicts`` holds (task, status, problems), ``key``
    makes a task's key (:func:`checked_against` with what the check ran)."""
    for task, status, problems in verdicts:
        write_record(kind, key(task), status, problems, source=source, report=report)


def keep_rubric_records(repo: Repo, loaded: LoadedManifest, report: RubricCheck, out: Path | None) -> None:
    """Keep each checked rubric's admission in dokimi's cache, keyed by the eval_dir, the base and the judge
    model, so a real run finds it (:func:`unadmitted`)."""
    manifest = loaded.manifest
    if manifest is None or not manifest.eval_dir or not report.tasks:
        return
    digest = report.eval_dir_digest or exported_eval_dir_digest(repo, manifest.eval_dir)
    tasks = {t.id: t.task for t in load_tasks(repo.eval_snapshot(), manifest) if t.task is not None}
    admitted = set(report.admitted)
    verdicts = []
    for task_id in report.tasks:
        if task_id in tasks:
            missed = [
                f"{r.kind} {r.name}: {r.detail or r.expectation}"
                for r in report.rows
                if r.task == task_id and r.ok is not True
            ]
            verdicts.append((tasks[task_id], "admitted" if task_id in admitted else "not_admitted", missed))
    record_check(
        "rubric_check",
        verdicts,
        lambda task: checked_against(repo, task, manifest.id, digest, judge_model=report.model),
        source=repo.label,
        report=None if out is None else out / RUBRIC_CHECK_JSON,
    )


def unadmitted(
    tasks: Mapping[str, tuple[CheckedAgainst, CheckedAgainst | None]],
) -> dict[str, str]:
    """Task -> why a real run must not run it: ``tasks`` maps each task to its tasks-check key and, for a
    task gated on ``mergeable``, its rubric-check key (None otherwise)."""
    why: dict[str, str] = {}
    for task, (check_key, rubric_key) in sorted(tasks.items()):
        record = read_record("tasks_check", check_key)
        if record is None:
            why[task] = "unchecked: no repo tasks check of this eval_dir, base and image"
        elif record.status != "ok":
            first = record.problems[0] if record.problems else "see its report"
            why[task] = f"{record.status} in repo tasks check: {first}"
        if task in why or rubric_key is None:
            continue
        rubric = read_record("rubric_check", rubric_key)
        if rubric is None:
            why[task] = (
                f"its rubric is unchecked: no repo rubric check of this eval_dir and base with judge "
                f"{rubric_key.judge_model or '(none given: --judge-model)'}"
            )
        elif rubric.status != "admitted":
            first = rubric.problems[0] if rubric.problems else "a calibration row missed its expectation"
            why[task] = f"its rubric was not admitted by repo rubric check: {first}"
    return why


def admission_refusal(why: Mapping[str, str], source: str, judge_model: str | None) -> str | None:
    """The message refusing a real run over ``why`` (:func:`unadmitted`), naming the commands that check
    the tasks; None when every task is admitted."""
    if not why:
        return None
    listed = "\n".join(f"  {task}: {reason}" for task, reason in why.items())
    tasks = " ".join(f"--task {t}" for t in why)
    commands = [f"dokimi repo tasks check {source} {tasks}"]
    if any("rubric" in reason for reason in why.values()):
        model = judge_model or "FULL_MODEL_ID"
        commands.append(f"dokimi repo rubric check {source} --model {model} {tasks}")
    return (
        f"{len(why)} task(s) are not proven sound for a real run (it pays for every cell):\n{listed}\n"
        "check them with:\n" + "\n".join(f"  {c}" for c in commands)
    )
