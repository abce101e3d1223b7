"""``repo report``: pass rates, scores, grader failures, missing cells, cost and turns of one batch.

Pure: reads a :class:`~dokimi.batch.Batch` (files only) and returns a repo_report.v1 document. The rules:

- a row is one (task, arm, model, effort, mode, prompt_style): cells that differ in effort or mode are never
  pooled, nor are prompt styles;
- passes count over finished cells; a grader failure is a failure, never excluded;
- a cell without result.json is missing, not failed; a cell whose result.json does not validate is invalid;
- ``--cutoff MODEL=DATE`` splits every row of that model by the task base date.
"""

from __future__ import annotations

import re
from collections import defaultdict
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, date, datetime
from typing import TYPE_CHECKING, Any

from dokimi import stats
from dokimi.analysis.arms import arm_guidance, warn_same_guidance
from dokimi.batch import Batch, Cell, CellKey, dimensions, effort_slug
from dokimi.checks.merge.agreement import BlockerPair, blocker_agreement, paired_blockers
from dokimi.errors import DocumentError, UsageError
from dokimi.grading.merge import read_merge
from dokimi.grading.verdict import read_cell
from dokimi.rundir import RUBRIC_JSON, BatchLayout, task_dir
from dokimi.schemas._base import read_document
from dokimi.schemas.manifest import RepoManifest
from dokimi.schemas.report import (
    ArmSummary,
    BatchInfo,
    CellProblem,
    Counts,
    CutoffSide,
    JudgeAgreement,
    ReportDoc,
    ReportRow,
    ReportWarning,
)
from dokimi.schemas.rubric import RepoRubric, provisional

if TYPE_CHECKING:
    from dokimi.schemas.grading import MergeDoc
    from dokimi.schemas.result import Result

__all__ = [
    "DRY_RUN_BANNER",
    "Cutoff",
    "ReportDoc",
    "build_report",
    "cell_passed",
    "cell_score",
    "cutoff_side",
    "parse_cutoffs",
]

DRY_RUN_BANNER = (
    "DRY RUN: every agent talked to dokimi's scripted model, not a real one. Pass rates show what the script "
    "did (by default each task's oracle), and every cost is zero (the harness's own figures for the scripted "
    "answers are kept apart in result.json, as simulated). No number here measures a model."
)
"""What a report, a comparison and an HTML page of a dry run say first."""


# --- the rules of one cell --------------------------------------------------------------------------------


def cell_passed(result: Result) -> bool:
    """A gated cell passes only with a true verdict and no grader failure."""
    return read_cell(result).passed


def cell_score(result: Result) -> float | None:
    """The score of a score-only cell; None for a gated cell or a score that was not measured.

    A grader failure scores 0 rather than being left out: excluding it would favour arms that break
    workspaces.
    """
    return read_cell(result).score


# --- training cutoffs ------------------------------------------------------------------------------------

_MONTH = re.compile(r"^\d{4}-\d{2}$")


@dataclass(frozen=True)
class Cutoff:
    """A model's training cutoff: a month (``2025-01``), a day (``2025-01-31``) or an instant (ISO 8601)."""

    text: str
    """As given."""
    precision: str
    """``month``, ``day`` or ``instant``."""
    value: datetime
    """The cutoff's start, UTC."""

    @classmethod
    def parse(cls, text: str) -> Cutoff:
        try:
            if _MONTH.match(text):
                year, month = map(int, text.split("-"))
                return cls(text, "month", datetime(year, month, 1, tzinfo=UTC))
            if len(text) == 10:
                day = date.fromisoformat(text)
                return cls(text, "day", datetime(day.year, day.month, day.day, tzinfo=UTC))
            return cls(text, "instant", _utc(datetime.fromisoformat(text)))
        except ValueError:
            raise UsageError(
                f"--cutoff: {text!r} is not a date",
                hint="give MODEL=YYYY-MM, MODEL=YYYY-MM-DD or MODEL=<ISO 8601 date and time>",
            ) from None

    def includes(self, when: datetime) -> bool:
        """Whether ``when`` is on or before the cutoff (inside the month or day the cutoff names)."""
        when = _utc(when)
        if self.precision == "month":
            return (when.year, when.month) <= (self.value.year, self.value.month)
        if self.precision == "day":
            return when.date() <= self.value.date()
        return when <= self.value


def _utc(when: datetime) -> datetime:
    return when.replace(tzinfo=UTC) if when.tzinfo is None else when.astimezone(UTC)


def parse_cutoffs(values: Sequence[str]) -> dict[str, Cutoff]:
    """``MODEL=DATE`` options (repeatable) -> {model: cutoff}; the model is what precedes the last ``=``."""
    out: dict[str, Cutoff] = {}
    for value in values:
        model, sep, when = value.rpartition("=")
        if not sep or not model or not when:
            raise UsageError(
                f"--cutoff {value!r}: expected MODEL=DATE", hint="for example --cutoff m1=2025-01-31"
            )
        if model in out:
            raise UsageError(f"--cutoff: model {model!r} is given twice")
        out[model] = Cutoff.parse(when)
    return out


def cutoff_side(base_date: str | None, cutoff: Cutoff | None) -> CutoffSide | None:
    """``before`` (on or before the cutoff: the fix may be in the training data), ``after``, ``unknown`` when
    the base date is missing or unreadable; None when the model has no cutoff given."""
    if cutoff is None:
        return None
    if not base_date:
        return "unknown"
    try:
        when = datetime.fromisoformat(base_date)
    except ValueError:
        return "unknown"
    return "before" if cutoff.includes(when) else "after"


# --- grouping ----------------------------------------------------------------------------------------------

RowKey = tuple[str, str, str, str | None, str | None, str | None, CutoffSide | None]
"""(task, arm, model, effort, mode, prompt_style, cutoff side)."""


@dataclass
class _Group:
    results: list[Result] = field(default_factory=list)
    merges: list[MergeDoc] = field(default_factory=list)
    pairs: list[tuple[str, bool, bool, str | None]] = field(default_factory=list)
    """(cell, primary mergeable, second judge's mergeable, second model) where both judges decided."""
    blocker_pairs: list[BlockerPair] = field(default_factory=list)
    """The blockers both judges gave a verdict on, per cell."""
    """merge.json of the finished cells that have one."""
    missing: int = 0
    invalid: int = 0
    infra: list[Result] = field(default_factory=list)
    """Results of the infra_error cells (never reached their model)."""


def _text(value: object) -> str | None:
    return None if value is None else str(value)


def _base_date(cell: Cell) -> str | None:
    if cell.result is not None and cell.result.base_date:
        return cell.result.base_date
    meta = cell.meta()
    return meta.base_date if meta is not None else None


@dataclass
class _TaskFacts:
    """What the finished cells say about a task, to place its missing and invalid cells in the right row."""

    mode: str | None = None
    prompt_style: str | None = None
    base_date: str | None = None
    family: str | None = None


def cell_mergeable(result: Result) -> bool | None:
    """The ``mergeable`` metric of a cell; a grader failure is not mergeable; None when the
    cell does not report it."""
    return read_cell(result).mergeable


def _merge_outcome(results: Sequence[Result]) -> dict[str, Any]:
    verdicts = [(r, m) for r in results if (m := cell_mergeable(r)) is not None]
    mergeable = [r for r, m in verdicts if m]
    if not any(isinstance(r.metrics.get("mergeable"), bool) for r in results):
        return {}  # nobody judged mergeability: grader failures alone make no rate
    scores = [float(v) for r in mergeable if isinstance(v := r.metrics.get("merge_score"), (int, float))]
    return {
        "mergeable_n": len(verdicts),
        "mergeable": len(mergeable),
        "mergeable_rate": len(mergeable) / len(verdicts),
        "mergeable_ci": stats.wilson_interval(len(mergeable), len(verdicts)),
        "merge_score_mean": stats.mean(scores),
    }


def failed_blockers(merges: Sequence[MergeDoc]) -> dict[str, int]:
    """How often each blocker failed, over runs the judge decided (what agents get wrong when the tests
    pass: a failed blocker is only judged on a run whose other checks hold)."""
    counts: dict[str, int] = defaultdict(int)
    for merge in merges:
        judge = merge.judge or {}
        for item in judge.get("items") or []:
            if isinstance(item, dict) and item.get("kind") == "blocker" and item.get("verdict") == "fail":
                counts[str(item.get("id"))] += 1
    return dict(sorted(counts.items()))


def judge_pair(merge: MergeDoc) -> tuple[bool, bool, str | None] | None:
    """(primary mergeable, second judge's mergeable, second model) when both judges decided; else None."""
    second = merge.second_judge
    if not second or not isinstance(merge.mergeable, bool) or not isinstance(second.get("mergeable"), bool):
        return None
    model = second.get("model")
    return merge.mergeable, bool(second["mergeable"]), model if isinstance(model, str) else None


def judge_agreement(pairs: Sequence[tuple[str, bool, bool, str | None]]) -> dict[str, Any]:
    """Cohen's kappa of the two judges on mergeable, and the cells where they disagree."""
    if not pairs:
        return {}
    kappa = stats.cohen_kappa([p[1] for p in pairs], [p[2] for p in pairs])
    return {
        "second_model": next((p[3] for p in pairs if p[3]), None),
        "cells": len(pairs),
        "kappa_mergeable": kappa,
        "disagreements": sorted(p[0] for p in pairs if p[1] != p[2]),
    }


def _batch_agreement(groups: Mapping[Any, _Group]) -> JudgeAgreement | None:
    pairs = [pair for group in groups.values() for pair in group.pairs]
    items = [pair for group in groups.values() for pair in group.blocker_pairs]
    if not pairs and not items:
        return None
    mergeable = judge_agreement(pairs) or {"second_model": None, "cells": 0, "kappa_mergeable": None}
    return JudgeAgreement.model_validate({"disagreements": [], **mergeable, **blocker_agreement(items)})


def judge_failed(merge: MergeDoc) -> bool:
    """The judge ran and gave no usable verdict (a reply that does not cover every rubric id, a crash)."""
    return bool(merge.judge and merge.judge.get("failure"))


def _mergeability(group: _Group, provisional: bool | None) -> dict[str, Any]:
    """Mergeability beside the test-pass gate: the gate without ``mergeable``, its rate, and the gap."""
    readings = [read_cell(r) for r in group.results if r.gated]
    test_passes = sum(1 for c in readings if c.test_pass)
    measured = [c for c in readings if c.mergeable is not None]
    gap = None
    if measured:
        test_rate = sum(1 for c in measured if c.test_pass) / len(measured)
        gap = test_rate - sum(1 for c in measured if c.mergeable) / len(measured)
    return {
        "test_passes": test_passes,
        "test_pass_rate": test_passes / len(readings) if readings else None,
        "mergeable_gap": gap,
        "judge_failures": sum(1 for m in group.merges if judge_failed(m)),
        "failed_blockers": failed_blockers(group.merges),
        "judges_both": len(group.pairs),
        "judges_kappa": judge_agreement(group.pairs).get("kappa_mergeable"),
        "rubric_provisional": provisional,
    }


def rubric_status(batch: Batch) -> dict[str, bool]:
    """Task -> whether its rubric is a draft (its results are provisional), from the batch's exported
    eval dir; tasks without a rubric are left out."""
    layout = BatchLayout(batch.root)
    try:
        manifest = read_document(layout.manifest_copy, RepoManifest)
    except DocumentError:
        return {}
    status: dict[str, bool] = {}
    tasks = {c.result.task for c in batch.finished() if c.result is not None}
    for task in sorted(tasks):
        path = task_dir(layout.content, manifest, task) / RUBRIC_JSON
        if path.is_file() and not path.is_symlink():
            try:
                status[task] = provisional(read_document(path, RepoRubric))
            except DocumentError:
                continue
    return status


def _outcome(
    results: Sequence[Result], missing: int, invalid: int, infra: Sequence[Result] = ()
) -> dict[str, Any]:
    gated = [r for r in results if r.gated]
    passes = sum(1 for r in gated if cell_passed(r))
    scores = [s for r in results if (s := cell_score(r)) is not None]
    costs = [r.cost_usd for r in results if r.cost_usd is not None]
    turns = [float(r.turns) for r in results if r.turns is not None]
    return {
        "finished": len(results),
        "missing": missing,
        "invalid": invalid,
        "gated": len(gated),
        "passes": passes,
        "pass_rate": passes / len(gated) if gated else None,
        "pass_ci": stats.wilson_interval(passes, len(gated)),
        "score_only": len(results) - len(gated),
        "score_mean": stats.mean(scores),
        "grader_failures": sum(1 for r in results if r.grader_failure),
        "infra_errors": len(infra),
        "no_model_answer": sum(1 for r in results if r.no_model_answer),
        "egress_refused": sum(r.egress_refused or 0 for r in (*results, *infra)),
        "timeouts": sum(1 for r in results if r.agent_timed_out),
        "cost_mean": stats.mean(costs),
        "cost_n": len(costs),
        "turns_mean": stats.mean(turns),
        "turns_n": len(turns),
        **_merge_outcome(results),
    }


def reliability(results: Sequence[Result], k: int) -> dict[str, Any]:
    """pass@k and pass^k of one task's gated cells (None with fewer than k of them)."""
    gated = [r for r in results if r.gated]
    passes = sum(1 for r in gated if cell_passed(r))
    if not gated:
        return {"pass_at_k": None, "pass_hat_k": None}
    return {
        "pass_at_k": stats.pass_at_k(len(gated), passes, k),
        "pass_hat_k": stats.pass_hat_k(len(gated), passes, k),
    }


def check_k(k: int | None) -> None:
    """--k is a positive number of attempts."""
    if k is not None and k < 1:
        raise UsageError(f"--k {k}: k is a number of attempts, at least 1")


def _sort_key(key: tuple[str | None, ...]) -> tuple[tuple[bool, str], ...]:
    return tuple((value is not None, value or "") for value in key)


def build_report(
    batch: Batch, *, cutoffs: dict[str, Cutoff] | None = None, path: str | None = None, k: int | None = None
) -> ReportDoc:
    """The repo_report.v1 document of ``batch``; ``cutoffs`` (model -> cutoff) split rows by base date; ``k``
    of pass@k and pass^k (default: the batch's reps)."""
    check_k(k)
    k = k or batch.reps()
    cutoffs = cutoffs or {}
    groups: dict[RowKey, _Group] = defaultdict(_Group)
    facts: dict[str, _TaskFacts] = {}
    real_names: dict[str, CellKey] = {}  # slug path prefix -> the real dimensions a finished cell reported
    warnings: list[ReportWarning] = []

    finished = batch.finished()
    for cell in finished:
        result = cell.result
        assert result is not None
        task = facts.setdefault(result.task, _TaskFacts())
        task.mode = task.mode or dimensions(result).mode
        task.prompt_style = task.prompt_style or result.prompt_style
        task.base_date = task.base_date or _base_date(cell)
        task.family = task.family or result.family
        real_names.setdefault(
            _prefix(cell.rel),
            CellKey(result.task, result.arm, result.model, result.effort, 0, result.prompt_variant),
        )

    for cell in finished:
        result = cell.result
        assert result is not None
        side = cutoff_side(_base_date(cell) or facts[result.task].base_date, cutoffs.get(result.model))
        key: RowKey = (*dimensions(result), result.prompt_style, side)
        groups[key].results.append(result)
        merge = read_merge(cell.dir)
        if merge is not None:
            groups[key].merges.append(merge)
            pair = judge_pair(merge)
            if pair is not None:
                groups[key].pairs.append((cell.rel, *pair))
            groups[key].blocker_pairs += paired_blockers(
                result.task, cell.rel, merge.judge, merge.second_judge
            )

    for cell in batch.cells:
        if cell.status == "finished":
            continue
        dims = cell.key or real_names.get(_prefix(cell.rel)) or _key_from_slugs(cell.rel)
        task = facts.get(dims.task, _TaskFacts())
        side = cutoff_side(task.base_date, cutoffs.get(dims.model))
        style = dims.prompt or task.prompt_style
        key = (dims.task, dims.arm, dims.model, dims.effort, task.mode, style, side)
        if cell.status == "missing":
            groups[key].missing += 1
        elif cell.status == "infra_error" and cell.result is not None:
            groups[key].infra.append(cell.result)
        else:
            groups[key].invalid += 1

    provisional = rubric_status(batch)
    rows = []
    for key in sorted(groups, key=_sort_key):
        group = groups[key]
        task_name, arm, model, effort, mode, style, side = key
        versions = sorted({_version(r) for r in group.results})
        rows.append(
            ReportRow(
                task=task_name,
                arm=arm,
                model=model,
                effort=effort,
                mode=mode,
                prompt_style=style,
                cutoff=side,
                family=facts[task_name].family if task_name in facts else None,
                base_date=facts[task_name].base_date if task_name in facts else None,
                harness_versions=versions,
                **_outcome(group.results, group.missing, group.invalid, group.infra),
                **_mergeability(group, provisional.get(task_name)),
                **reliability(group.results, k),
            )
        )

    warnings += _warnings(batch, rows, cutoffs)
    warnings += warn_same_guidance(batch)
    return ReportDoc(
        schema="repo_report.v1",
        dry_run=batch.dry_run,
        batch=BatchInfo(
            name=batch.name,
            path=path if path is not None else str(batch.root),
            pin=batch.pin,
            pin_error=batch.pin_error,
            plan=batch.plan is not None,
            plan_error=batch.plan_error,
        ),
        counts=Counts(
            finished=len(finished),
            missing=len(batch.missing()),
            invalid=len(batch.invalid()),
            infra_errors=len(batch.infra_errors()),
        ),
        cutoffs={model: cutoff.text for model, cutoff in sorted(cutoffs.items())},
        k=k,
        rows=rows,
        arms=_arm_summaries(groups, k),
        missing_cells=[CellProblem(cell=c.rel) for c in batch.missing()],
        invalid_cells=[CellProblem(cell=c.rel, error=c.error) for c in batch.invalid()],
        warnings=sorted(warnings, key=lambda w: (w.code, w.message)),
        guidance=arm_guidance(batch),
        judge_agreement=_batch_agreement(groups),
    )


def _prefix(rel: str) -> str:
    return "/".join(rel.split("/")[:4])


def _key_from_slugs(rel: str) -> CellKey:
    """Dimensions of a cell nobody planned and no finished cell names: the directory names themselves."""
    task, arm, model, effort = (rel.split("/") + ["", "", "", ""])[:4]
    arm, _, prompt = arm.partition(".prompt-")
    return CellKey(task, arm, model, None if effort == effort_slug(None) else effort, 0, prompt or None)


def _version(result: Result) -> str:
    return f"{result.harness} {result.harness_version or '?'}"


def _arm_summaries(groups: dict[RowKey, _Group], k: int) -> list[ArmSummary]:
    by_arm: dict[tuple[str, str, str | None, str | None, str | None, CutoffSide | None], list[RowKey]] = (
        defaultdict(list)
    )
    for key in groups:
        task, arm, model, effort, mode, style, side = key
        by_arm[(arm, model, effort, mode, style, side)].append(key)
    out = []
    for arm_key in sorted(by_arm, key=_sort_key):
        keys = by_arm[arm_key]
        results = [r for key in keys for r in groups[key].results]
        shares = []
        for key in keys:
            gated = [r for r in groups[key].results if r.gated]
            if gated:
                shares.append(sum(1 for r in gated if cell_passed(r)) / len(gated))
        per_task = [reliability(groups[key].results, k) for key in keys]
        at_k = [v["pass_at_k"] for v in per_task if v["pass_at_k"] is not None]
        hat_k = [v["pass_hat_k"] for v in per_task if v["pass_hat_k"] is not None]
        arm, model, effort, mode, style, side = arm_key
        outcome = _outcome(
            results,
            sum(groups[key].missing for key in keys),
            sum(groups[key].invalid for key in keys),
            [r for key in keys for r in groups[key].infra],
        )
        out.append(
            ArmSummary(
                arm=arm,
                model=model,
                effort=effort,
                mode=mode,
                prompt_style=style,
                cutoff=side,
                tasks=len({key[0] for key in keys}),
                task_pass_mean=stats.mean(shares),
                k_tasks=len(at_k),
                pass_at_k=stats.mean(at_k),
                pass_hat_k=stats.mean(hat_k),
                **outcome,
            )
        )
    return out


# --- warnings (one function per rule) ----------------------------------------------------------------------


def warn_agent_network(results: Iterable[Result]) -> list[ReportWarning]:
    """Cells run with --agent-network: unsealed, the agent had that network's reach."""
    networks: dict[str, int] = defaultdict(int)
    for result in results:
        if result.agent_network:
            networks[result.agent_network] += 1
    return [
        ReportWarning(
            code="agent_network",
            message=f"{count} cell(s) ran with --agent-network {net} (unsealed): the agent's commands could "
            "reach any host that network reaches, including the upstream fix",
        )
        for net, count in sorted(networks.items())
    ]


def warn_mixed_harness_versions(results: Iterable[Result]) -> list[ReportWarning]:
    """Cells of one batch ran different harness versions: loading and behaviour change between versions."""
    versions: dict[str, int] = defaultdict(int)
    for result in results:
        versions[_version(result)] += 1
    if len(versions) < 2:
        return []
    listed = ", ".join(f"{v} ({n} cells)" for v, n in sorted(versions.items()))
    return [
        ReportWarning(code="mixed_harness_versions", message=f"the batch mixes harness versions: {listed}")
    ]


def warn_mixed_gating(rows: Iterable[ReportRow]) -> list[ReportWarning]:
    """A row with gated and score-only cells: the task changed its gate within the batch."""
    return [
        ReportWarning(
            code="mixed_gating",
            message=f"{row.task} / {row.arm} / {row.model}: {row.gated} gated and {row.score_only} "
            "score-only cells; the task's gate changed within the batch",
        )
        for row in rows
        if row.gated and row.score_only
    ]


def warn_batch_files(batch: Batch) -> list[ReportWarning]:
    """No pin, no plan, an unreadable plan, invalid cells."""
    out = []
    if batch.pin is None:
        out.append(
            ReportWarning(code="no_pin", message=f"{batch.pin_error}: the eval tree it ran from is unknown")
        )
    if batch.plan_error:
        out.append(ReportWarning(code="plan_error", message=f"{batch.plan_error}: planned cells are unknown"))
    elif batch.plan is None:
        out.append(
            ReportWarning(
                code="no_plan",
                message="no _eval/plan.json: only cells that started count as missing",
            )
        )
    invalid = batch.invalid()
    if invalid:
        out.append(
            ReportWarning(
                code="invalid_cells",
                message=f"{len(invalid)} cell(s) have a result.json that does not validate; "
                "they are not counted",
            )
        )
    return out


def warn_cutoffs(rows: Sequence[ReportRow], cutoffs: dict[str, Cutoff]) -> list[ReportWarning]:
    """A --cutoff for a model the batch lacks; rows whose base date is unknown."""
    out = []
    models = {row.model for row in rows}
    for model in sorted(set(cutoffs) - models):
        out.append(
            ReportWarning(
                code="cutoff_model_absent",
                message=f"--cutoff {model}: no cell of the batch ran this model (models: "
                f"{', '.join(sorted(models)) or 'none'})",
            )
        )
    unknown = sorted({row.task for row in rows if row.cutoff == "unknown"})
    if unknown:
        out.append(
            ReportWarning(
                code="cutoff_unknown_base_date",
                message=f"no base date for task(s) {', '.join(unknown)}: "
                "reported on neither side of the cutoff",
            )
        )
    return out


def warn_mixed_dry_run(batch: Batch) -> list[ReportWarning]:
    """A batch whose cells are partly dry runs (one pinned before dokimi refused to mix them): its rates pool
    a script with a model."""
    dry = sum(1 for r in batch.all_results() if r.dry_run)
    real = sum(1 for r in batch.all_results() if not r.dry_run)
    if not dry or not real:
        return []
    return [
        ReportWarning(
            code="mixed_dry_run",
            message=f"the batch mixes {dry} dry-run cell(s) (the scripted model) with {real} real one(s): "
            "its rates pool a script with a model; run the real cells in a batch of their own",
        )
    ]


MERGEABLE_MIN_REPS = 3
"""Reps per (task, arm, model) a mergeable-gated rate needs: mergeable rates are lower and spread more than
test passes."""
MERGEABLE_MIN_REPS_COMPARED = 5
"""Reps per (task, arm, model) when arms are compared on a mergeable gate."""


def gated_on_mergeable(result: Result) -> bool:
    """The cell's gate names ``mergeable``."""
    return "mergeable" in result.gate_results


def few_mergeable_reps(results: Iterable[Result], minimum: int) -> list[tuple[str, str, str, int]]:
    """(task, arm, model, reps) of every (task, arm, model, effort) gated on mergeable with fewer than
    ``minimum`` finished cells, sorted."""
    reps: dict[tuple[str, str, str, str | None], int] = defaultdict(int)
    for result in results:
        if gated_on_mergeable(result):
            reps[(result.task, result.arm, result.model, result.effort)] += 1
    return sorted((t, a, m, n) for (t, a, m, _e), n in reps.items() if n < minimum)


def warn_few_mergeable_reps(results: Sequence[Result], *, compared: bool) -> list[ReportWarning]:
    """Mergeable-gated cells need at least 3 reps per (task, arm, model), and 5 when arms are compared."""
    minimum = MERGEABLE_MIN_REPS_COMPARED if compared else MERGEABLE_MIN_REPS
    few = few_mergeable_reps(results, minimum)
    if not few:
        return []
    listed = ", ".join(f"{t} / {a} / {m} ({n})" for t, a, m, n in few[:10]) + (
        ", ..." if len(few) > 10 else ""
    )
    why = "arms are compared" if compared else "one arm"
    return [
        ReportWarning(
            code="mergeable_few_reps",
            message=f"{len(few)} (task, arm, model) gated on mergeable ran fewer than {minimum} reps "
            f"({why}): {listed}. Mergeable rates are lower and spread more than test passes: run at least "
            f"{MERGEABLE_MIN_REPS} reps per (task, arm, model), {MERGEABLE_MIN_REPS_COMPARED} when comparing "
            "arms",
        )
    ]


def _warnings(batch: Batch, rows: Sequence[ReportRow], cutoffs: dict[str, Cutoff]) -> list[ReportWarning]:
    results = list(batch.results())
    arms = {r.arm for r in results}
    return [
        *warn_few_mergeable_reps(results, compared=len(arms) > 1),
        *warn_mixed_dry_run(batch),
        *warn_agent_network(results),
        *warn_mixed_harness_versions(results),
        *warn_mixed_gating(rows),
        *warn_batch_files(batch),
        *warn_cutoffs(rows, cutoffs),
    ]
