"""``repo regrade``: grading must be deterministic, so regrade a sample of finished cells.

For each sampled cell, the grade inputs of its run directory (workspace/, task.json, meta.json, events.jsonl,
answer.txt, agent.stdout) are copied into a scratch run directory under ``<batch>/_eval/regrade/``; the
batch's ``grade`` entry point runs there in the batch's image with the batch's exported eval_dir, exactly as
the cell's own grade did, and the verdict is computed by the same code
(:func:`dokimi.grading.verdict.gate_over`).
For a task with a rubric, the scope check and the judge run again on the diff the cell stored before its
grade, with the judge's verdict cache bypassed: the sample measures whether the judge repeats its verdict. The
perf check is carried over (it measures time, not a verdict). The original grade.json and result.json are
never touched.

``--from-files`` (:func:`regrade_from_files`) runs no container: each sampled cell's verdict is recomputed
from the files its grading left, by the same gate function.

Every metric of either result, every gate entry, the verdict (``passed``), ``score`` and ``grader_failure``
are compared for exact equality: a deterministic grader gives the same value, so any difference is flagged
with the name of what moved. The sample is drawn from the finished cells sorted by path, with
``random.Random(seed)``, so the same seed regrades the same cells.
"""

from __future__ import annotations

import dataclasses
import os
import random
import shutil
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from dokimi import safefs
from dokimi.batch import batch_writer, load_batch, locate_batch
from dokimi.checks.merge import DEFAULT_JUDGE_HARNESS, JudgeOptions
from dokimi.errors import DocumentError, DokimiError
from dokimi.grading import merge
from dokimi.grading.entrypoints import grade_run
from dokimi.grading.environment import JudgeSettings
from dokimi.grading.finished import open_finished_batch
from dokimi.grading.grade import FRAMEWORK_CHECKS, verdict_from_files
from dokimi.grading.merge import MERGEABILITY, read_merge
from dokimi.grading.verdict import gate_over
from dokimi.repo.rules import load_review_rules
from dokimi.rundir import GRADE_INPUTS, GRADE_JSON, WORKSPACE, RunDir, task_dir
from dokimi.sandbox.container import container_identity, container_name
from dokimi.sandbox.specs import workspace_cap_bytes
from dokimi.schemas._base import read_document
from dokimi.schemas.meta import Meta
from dokimi.schemas.regrade import RegradedCellDoc, RegradeDoc, RegradeMismatch
from dokimi.schemas.result import Result
from dokimi.schemas.task import Task

if TYPE_CHECKING:
    from dokimi.batch import Cell
    from dokimi.grading.environment import GradeEnvironment
    from dokimi.grading.finished import FinishedBatch
    from dokimi.schemas.grading import MergeDoc

__all__ = [
    "GRADE_INPUTS",
    "Mismatch",
    "RegradedCell",
    "compare_results",
    "copy_grade_inputs",
    "regrade_batch",
    "regrade_document",
    "regrade_from_files",
    "regraded_result",
    "sample_cells",
]


@dataclass(frozen=True)
class Mismatch:
    """One value that moved between the stored result and the regrade."""

    what: str
    """``passed``, ``score``, ``grader_failure``, ``gate:<metric>`` or ``metric:<name>``."""
    original: Any
    regraded: Any


@dataclass
class RegradedCell:
    """The outcome of regrading one cell."""

    rel: str
    """The cell's path relative to the batch."""
    mismatches: list[Mismatch] = field(default_factory=list)
    error: str | None = None
    """Why the cell could not be regraded at all (a host-side problem, not a mismatch)."""
    grader_error: str | None = None
    """The regrade's grader error, when the regrade was a grader failure."""

    @property
    def matches(self) -> bool:
        return self.error is None and not self.mismatches


def _same(a: Any, b: Any) -> bool:
    """Exact equality that keeps booleans and numbers apart (True is not 1 here)."""
    return type(a) is type(b) and a == b if isinstance(a, bool) or isinstance(b, bool) else a == b


def compare_results(original: Result, regraded: Result) -> list[Mismatch]:
    """Every value of the verdict that differs between two results of one cell, named."""
    found: list[Mismatch] = []
    for name in ("passed", "score", "grader_failure", "gated"):
        a, b = getattr(original, name), getattr(regraded, name)
        if not _same(a, b):
            found.append(Mismatch(name, a, b))
    for metric in sorted(set(original.gate_results) | set(regraded.gate_results)):
        a, b = original.gate_results.get(metric), regraded.gate_results.get(metric)
        if not _same(a, b) or (metric in original.gate_results) != (metric in regraded.gate_results):
            found.append(Mismatch(f"gate:{metric}", a, b))
    for metric in sorted(set(original.metrics) | set(regraded.metrics)):
        a, b = original.metrics.get(metric), regraded.metrics.get(metric)
        if not _same(a, b) or (metric in original.metrics) != (metric in regraded.metrics):
            found.append(Mismatch(f"metric:{metric}", a, b))
    return found


def sample_cells(cells: Sequence[Cell], n: int | None, seed: int) -> list[Cell]:
    """``n`` of ``cells`` drawn with ``seed`` (all of them when ``n`` is None or not smaller), by path."""
    ordered = sorted(cells, key=lambda c: c.rel)
    if n is None or n >= len(ordered):
        return ordered
    picked = random.Random(seed).sample(ordered, n)
    return sorted(picked, key=lambda c: c.rel)


#: Largest grade input file a regrade copies (agent.stdout is capped lower when it is written).
MAX_INPUT_BYTES = 256 * 1024 * 1024


def copy_grade_inputs(
    run_dir: Path, scratch: Path, *, trusted: Path | None = None, max_workspace_bytes: int = 20480 << 20
) -> list[str]:
    """Copy what grade reads from ``run_dir`` into the fresh directory ``scratch``, following no link.

    The workspace is copied with its links as links; FIFOs, devices and sockets are left out. A grade input
    that is a link is copied as the link, never as the file it names (the grader cannot have dokimi read a
    host file into the copy). The copy belongs to the container user, as the original run directory did, so
    a grader that writes into it behaves the same. Its ``.git/config`` and ``.git/hooks`` were moved to
    agent-git/ before the original grade; they are not restored, so the regrade sees what the grade saw.
    ``trusted`` is the directory dokimi made above both (the batch); returns what was left out.
    """
    root = trusted or Path(os.path.commonpath([run_dir.absolute(), scratch.absolute()]))
    who = container_identity()
    owner = (who.uid, who.gid) if os.getuid() == 0 else None
    safefs.makedirs(scratch, trusted=root)
    if owner is not None:
        safefs.chown_tree(scratch, *owner, trusted=root)
    report = safefs.copy_tree(
        RunDir(run_dir).workspace,
        RunDir(scratch).workspace,
        trusted=root,
        target_trusted=root,
        max_bytes=max_workspace_bytes,
        owner=owner,
    )
    left_out = [f"{WORKSPACE}/{entry}" for entry in report.skipped]
    for name in GRADE_INPUTS:
        why = safefs.copy_entry(
            run_dir / name,
            scratch / name,
            trusted=root,
            target_trusted=root,
            limit=MAX_INPUT_BYTES,
            owner=owner,
        )
        if why is not None and why != "absent":
            left_out.append(f"{name}: {why}")
    return left_out


# --- regrading a batch (needs docker) -----------------------------------------------------------------------


@dataclass
class RegradeReport:
    """The outcome of ``repo regrade``."""

    batch: Path
    sample: int | None
    seed: int
    finished: int
    """Finished cells in the batch (what the sample was drawn from)."""
    cells: list[RegradedCell] = field(default_factory=list)

    @property
    def mismatched(self) -> list[RegradedCell]:
        return [c for c in self.cells if c.mismatches]

    @property
    def errors(self) -> list[RegradedCell]:
        return [c for c in self.cells if c.error is not None]

    @property
    def ok(self) -> bool:
        return all(c.matches for c in self.cells)


def regrade_document(report: RegradeReport) -> RegradeDoc:
    """The repo_regrade.v1 document of a regrade (what ``repo regrade --json`` prints)."""
    return RegradeDoc(
        schema="repo_regrade.v1",
        batch=str(report.batch),
        sample=report.sample,
        seed=report.seed,
        finished=report.finished,
        regraded=len(report.cells),
        mismatched=len(report.mismatched),
        errors=len(report.errors),
        cells=[
            RegradedCellDoc(
                cell=cell.rel,
                matches=cell.matches,
                error=cell.error,
                grader_error=cell.grader_error,
                mismatches=[
                    RegradeMismatch(what=m.what, original=m.original, regraded=m.regraded)
                    for m in cell.mismatches
                ],
            )
            for cell in report.cells
        ],
    )


def regraded_result(original: Result, verdict: Any, metrics: dict[str, Any]) -> Result:
    """The original result with the verdict of the regrade in place of its own (everything the agent's run
    reported stays as it was)."""
    data = original.model_dump(mode="json", by_alias=True)
    data.update(
        gated=verdict.gated,
        passed=verdict.passed,
        score=verdict.score,
        gate_results=dict(verdict.gate_results),
        metrics=metrics,
        grader_failure=verdict.grader_failure,
        grader_error=verdict.grader_error,
    )
    return Result.model_validate(data)


def regrade_batch(
    root: Path,
    *,
    sample: int | None,
    seed: int,
    caches: dict[str, Path] | None = None,
    source_dir: Path | None = None,
    progress: Callable[[str], None] | None = None,
    judge_bin: str | None = None,
) -> RegradeReport:
    """Regrade ``sample`` finished cells of the batch at ``root`` (all of them when None); see the module
    docstring. Raises UsageError when the batch cannot be regraded at all (no pin, no manifest, no image),
    and BatchLocked when a ``repo run`` or another regrade writes the batch."""
    root = locate_batch(root).absolute()
    if not root.is_dir():
        raise DocumentError("no such batch directory", path=str(root), hint="give <out>/<batch>")
    with batch_writer(root, "repo regrade"):
        return _regrade(
            root,
            RegradeRequest(sample, seed, caches, source_dir, judge_bin),
            progress=progress,
        )


@dataclass(frozen=True)
class RegradeRequest:
    sample: int | None
    seed: int
    caches: dict[str, Path] | None = None
    source_dir: Path | None = None
    judge_bin: str | None = None
    """The executable of the harness the judge ran through (default: found as doctor finds it)."""


def regrade_from_files(root: Path, *, sample: int | None, seed: int) -> RegradeReport:
    """``repo regrade --from-files``: recompute each sampled cell's verdict from the files its grading left
    (grade_run.json, grade.json, merge.json, perf/check.json) with the same gate function as the run, and no
    container. Nothing is written."""
    root = Path(root).absolute()
    batch = load_batch(root)
    finished = batch.finished()
    report = RegradeReport(root, sample, seed, len(finished))
    for cell in sample_cells(finished, sample, seed):
        assert cell.result is not None
        entry = RegradedCell(cell.rel)
        report.cells.append(entry)
        try:
            task = read_document(RunDir(cell.dir).task_json, Task, trusted=root)
        except DokimiError as exc:
            entry.error = exc.message
            continue
        found = verdict_from_files(cell.dir, task)
        again = regraded_result(cell.result, found.verdict, found.metrics)
        entry.grader_error = again.grader_error
        entry.mismatches = compare_results(cell.result, again)
    return report


def _regrade(root: Path, request: RegradeRequest, *, progress: Callable[[str], None] | None) -> RegradeReport:
    batch = load_batch(root)
    opened = open_finished_batch(root, caches=request.caches, hint="regrade a batch that repo run wrote")
    grade_command = opened.environment.entry_points.grade
    opened = opened.with_source_dir(grade_command, request.source_dir)
    finished = batch.finished()
    chosen = sample_cells(finished, request.sample, request.seed)
    report = RegradeReport(root, request.sample, request.seed, len(finished))
    scratch_root = opened.layout.regrade
    for cell in chosen:
        assert cell.result is not None
        entry = RegradedCell(cell.rel)
        report.cells.append(entry)
        if progress is not None:
            progress(f"regrading {cell.rel}")
        scratch = scratch_root / cell.rel
        try:
            again = _regrade_cell(opened, cell, scratch, request)
        except (DokimiError, OSError) as exc:
            entry.error = exc.message if isinstance(exc, DokimiError) else str(exc)
            continue
        entry.grader_error = again.grader_error
        entry.mismatches = compare_results(cell.result, again)
        if not entry.mismatches:
            safefs.remove(scratch, trusted=root)
    if scratch_root.is_dir() and not any(scratch_root.rglob(GRADE_JSON)):
        shutil.rmtree(scratch_root, ignore_errors=True)
    return report


def _regrade_cell(opened: FinishedBatch, cell: Cell, scratch: Path, request: RegradeRequest) -> Result:
    """One cell graded again on a copy of its inputs: grade in a container, and for a task with a rubric the
    scope check and the judge again on the diff the cell stored before its grade, the judge's verdict cache
    bypassed (the regrade sample measures whether the judge repeats itself). The other framework checks (the
    perf check, the agent's own tests, the review checks) are not rerun: their documents are carried over."""
    rd = RunDir(scratch)
    assert cell.result is not None
    root = opened.layout.root
    safefs.remove(scratch, trusted=root)
    copy_grade_inputs(
        cell.dir, scratch, trusted=root, max_workspace_bytes=workspace_cap_bytes(opened.manifest.image)
    )
    task = read_document(rd.task_json, Task, trusted=root)
    checks = None
    original_merge = read_merge(cell.dir)
    diff = merge.stored_diff(cell.dir) if original_merge is not None else None
    rubric = merge.load_rubric(task_dir(opened.layout.content, opened.manifest, task.id))
    environment = _rejudging(opened, original_merge, request.judge_bin)
    if diff is not None and rubric is not None:
        meta = read_document(rd.meta_json, Meta, trusted=root)
        checks = merge.checks_of_diff(environment, task, rubric=rubric, diff=diff, base_date=meta.base_date)
        checks.agent_tests = merge.stored_tests_list(cell.dir)  # the workspace copy was graded already
    outcome = grade_run(
        environment, scratch, task, name=container_name(opened.layout.name, cell.rel, "regrade")
    )
    merged = original_merge if checks is None else None
    if checks is not None and not outcome.grader_failure:
        merged = merge.merge_metrics(environment, scratch, task, checks=checks, grade=outcome.grade)
    documents = [  # mergeability judged again; every other check carried over
        merged if check is MERGEABILITY else check.read(cell.dir) for check in FRAMEWORK_CHECKS
    ]
    found = gate_over(
        task, outcome.grade, outcome.verdict.grader_error, [d for d in documents if d is not None]
    )
    return regraded_result(cell.result, found.verdict, found.metrics)


def _rejudging(opened: FinishedBatch, original: MergeDoc | None, judge_bin: str | None) -> GradeEnvironment:
    """The batch's grade environment with the judge that judged the cell (its model and harness from
    merge.json; a merge.json that names no harness was judged under Claude Code), its cache bypassed; without
    a judge verdict in merge.json, no judge."""

    judged = original.judge if original is not None else None
    model = judged.get("model") if isinstance(judged, dict) else None
    if not isinstance(model, str) or not isinstance(judged, dict):
        return opened.environment
    harness = judged.get("harness")
    profile = harness if isinstance(harness, str) else DEFAULT_JUDGE_HARNESS
    return dataclasses.replace(
        opened.environment,
        judge=JudgeSettings(model, JudgeOptions(bin=judge_bin, profile=profile, use_cache=False)),
        review_rules=load_review_rules(opened.layout.content),
    )
