"""``repo compare``: paired, task-level comparison of arms against a baseline.

Pure: selectors resolve to finished cells of batch directories, and the result is a repo_compare.v1 document.

1. Cells are reduced to one value per (task, arm, model, effort, mode) first: repetitions share a task's
   difficulty and are not paired across arms, so the task is the unit (:func:`task_values`). Two arms that
   share no model are a comparison of their models (:func:`across_models`): each side holds one model and
   effort per mode, and models of two vendors whose cells a judge scored are compared only when a judge of a
   third vendor, or of both, scored them (:func:`refuse_cross_vendor_without_judge`).
2. Per treatment arm, model, effort, mode and measure: the mean per-task delta against the baseline with a 95%
   interval over tasks (bootstrap for gate and score, t for cost, turns and metrics; none for one task), the
   tasks up, down and tied, and a two-sided sign-flip permutation p (:func:`measure_stats`).
3. Holm's correction over the gate and score measures of the call; the rest are descriptive
   (:func:`apply_holm`).
4. Tasks left out are listed with the reason (:func:`pair_tasks`).

Selectors (:func:`resolve_selectors`): ``BATCH`` takes every arm of a batch, ``BATCH/ARM`` one arm of one
batch, and a bare ``ARM`` (only for --baseline) that arm from every batch on the command line. Arms from
whole-batch selectors are grouped by name, so two batches of one arm pool (and are warned about); BATCH/ARM
keeps them apart.
"""

from __future__ import annotations

import math
from collections import Counter, defaultdict
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

from dokimi import stats
from dokimi.analysis.power import minimum_detectable_effect
from dokimi.analysis.report import cell_passed, cell_score, check_k, warn_few_mergeable_reps
from dokimi.analysis.vendors import vendor_of
from dokimi.batch import Batch, dimensions, load_batch, locate_batch, slug
from dokimi.errors import UsageError
from dokimi.grading.verdict import read_cell
from dokimi.schemas.batch import ImagePin
from dokimi.schemas.compare import (
    BatchRef,
    CompareDoc,
    Comparison,
    Measure,
    MeasureKind,
    SelectorInfo,
    TaskValue,
    Unpaired,
)
from dokimi.schemas.report import ReportWarning

if TYPE_CHECKING:
    from dokimi.schemas.batch import BatchPin
    from dokimi.schemas.result import Result

__all__ = ["Selection", "build_comparison", "compare", "resolve_selectors"]

#: The interval of each kind of measure.
IntervalKind = Literal["bootstrap", "t"]
INTERVAL: dict[MeasureKind, IntervalKind] = {
    "gate": "bootstrap",
    "pass_at_k": "bootstrap",
    "pass_hat_k": "bootstrap",
    "score": "bootstrap",
    "cost": "t",
    "turns": "t",
    "metric": "t",
}
#: Measures whose p-values are corrected together; the rest are descriptive.
HOLM_KINDS: frozenset[MeasureKind] = frozenset({"gate", "score"})
#: Measures of the gated cells of a task taken whole: pass@k and pass^k, defined only with k or more of them.
RELIABILITY_KINDS: frozenset[MeasureKind] = frozenset({"pass_at_k", "pass_hat_k"})


# --- selectors ---------------------------------------------------------------------------------------------


@dataclass
class Selection:
    """The finished cells one selector stands for."""

    label: str
    role: Literal["baseline", "treatment"]
    arm: str
    sources: list[tuple[Batch, str]]
    """(batch, arm) pairs; more than one batch only for a bare ARM or an arm of several whole batches."""
    cells: list[Result] = field(default_factory=list)

    def batches(self) -> list[Batch]:
        return [batch for batch, _ in self.sources]

    def infra(self) -> list[Result]:
        """The selector's cells the upstream failed (infra errors): in no measure, counted beside them."""
        return [
            cell.result
            for batch, arm in self.sources
            for cell in batch.infra_errors()
            if cell.result is not None and cell.result.arm == arm
        ]


def _arms_of(batch: Batch) -> list[str]:
    """The arms with a result.json in ``batch``: an arm whose every cell the upstream failed is one too (its
    infra errors are shown beside the comparison)."""
    return sorted({r.arm for r in batch.all_results()})


def _match_arm(batch: Batch, arm: str) -> str | None:
    """The arm of ``batch`` named ``arm`` (its real value, else its directory slug)."""
    arms = _arms_of(batch)
    if arm in arms:
        return arm
    by_slug = [a for a in arms if slug(a) == arm]
    return by_slug[0] if len(by_slug) == 1 else None


@dataclass
class _Parsed:
    text: str
    batch: Batch | None
    arm: str | None


class _Batches:
    """Loads each batch directory once, keyed by its resolved path."""

    def __init__(self) -> None:
        self.by_root: dict[Path, Batch] = {}
        self.given: dict[Path, str] = {}

    def get(self, path: Path, text: str) -> Batch:
        root = path.resolve()
        if root not in self.by_root:
            self.by_root[root] = load_batch(path)
            self.given[root] = text
        return self.by_root[root]


def _parse(text: str, batches: _Batches, *, bare_ok: bool) -> _Parsed:
    """``BATCH`` (a directory), ``BATCH/ARM``, or (for --baseline) a bare ``ARM`` without a slash."""
    stripped = text.rstrip("/")
    if "/" not in stripped and bare_ok:
        return _Parsed(text, None, stripped)
    path = locate_batch(stripped)
    if path.is_dir():
        return _Parsed(text, batches.get(path, stripped), None)
    head, _, arm = stripped.rpartition("/")
    if head and arm and (found := locate_batch(head)).is_dir():
        return _Parsed(text, batches.get(found, head), arm)
    raise UsageError(
        f"{text!r} is neither a batch directory nor BATCH/ARM with an existing batch",
        hint="give <out>/<batch> or <out>/<batch>/<arm> (a batch of <DOKIMI_HOME>/runs/<repo id>/ by its "
        "name), for example pilot/guidance:raw",
    )


def _require_arm(batch: Batch, arm: str, text: str) -> str:
    real = _match_arm(batch, arm)
    if real is None:
        arms = ", ".join(_arms_of(batch)) or "none"
        raise UsageError(f"{text}: batch {batch.name} has no cell of arm {arm!r} (its arms: {arms})")
    return real


def resolve_selectors(selectors: Sequence[str], baseline: str) -> list[Selection]:
    """The baseline selection first, then one per treatment. Refuses two selectors of the same cells."""
    if not selectors:
        raise UsageError("give at least one batch (BATCH or BATCH/ARM)")
    batches = _Batches()
    parsed = [_parse(text, batches, bare_ok=False) for text in selectors]
    base = _parse(baseline, batches, bare_ok=True)

    whole: list[_Parsed] = []
    seen_whole: dict[Path, str] = {}
    for item in parsed:
        if item.arm is None:
            assert item.batch is not None
            root = item.batch.root.resolve()
            if root in seen_whole:
                raise UsageError(f"{seen_whole[root]!r} and {item.text!r} select the same cells (one batch)")
            seen_whole[root] = item.text
            whole.append(item)

    # the baseline's sources
    if base.batch is None:
        assert base.arm is not None
        sources = []
        for batch in _unique(p.batch for p in parsed):
            real = _match_arm(batch, base.arm)
            if real is not None:
                sources.append((batch, real))
        if not sources:
            found = sorted({a for b in _unique(p.batch for p in parsed) for a in _arms_of(b)})
            raise UsageError(
                f"--baseline {baseline}: no batch given has finished cells of that arm",
                hint=f"arms found: {', '.join(found) or 'none'}",
            )
        real_arm = sources[0][1] if len({arm for _, arm in sources}) == 1 else base.arm
        base_sel = Selection(real_arm, "baseline", real_arm, sources)
    else:
        assert base.arm is not None
        real = _require_arm(base.batch, base.arm, baseline)
        base_sel = Selection(base.text.rstrip("/"), "baseline", real, [(base.batch, real)])
    base_keys = {(b.root.resolve(), a) for b, a in base_sel.sources}
    taken: dict[tuple[Path, str], str] = {key: f"--baseline {baseline}" for key in base_keys}

    treatments: list[Selection] = []
    for item in parsed:
        if item.arm is None:
            continue
        assert item.batch is not None
        real = _require_arm(item.batch, item.arm, item.text)
        key = (item.batch.root.resolve(), real)
        if key in taken:
            raise UsageError(
                f"{taken[key]!r} and {item.text!r} select the same cells ({item.batch.name}/{real})"
            )
        taken[key] = item.text
        treatments.append(Selection(item.text.rstrip("/"), "treatment", real, [(item.batch, real)]))

    pooled: dict[str, list[tuple[Batch, str]]] = defaultdict(list)
    for item in whole:
        assert item.batch is not None
        root = item.batch.root.resolve()
        for arm in _arms_of(item.batch):
            key = (root, arm)
            if key in base_keys:
                continue  # the baseline's own cells in a whole batch
            if key in taken:
                raise UsageError(
                    f"{item.text!r} and {taken[key]!r} select the same cells ({item.batch.name}/{arm})"
                )
            pooled[arm].append((item.batch, arm))
    for arm in sorted(pooled):
        treatments.append(Selection(arm, "treatment", arm, pooled[arm]))

    if not treatments:
        raise UsageError(
            "nothing to compare: the selectors hold only the baseline's cells",
            hint="name a batch with another arm, or BATCH/ARM of another batch",
        )
    labels = [base_sel.label, *(t.label for t in treatments)]
    if len(set(labels)) != len(labels):
        raise UsageError(
            f"two selectors share a name ({', '.join(labels)}); use BATCH/ARM with distinct paths"
        )
    out = [base_sel, *treatments]
    for selection in out:
        selection.cells = [r for batch, arm in selection.sources for r in batch.results() if r.arm == arm]
    return out


def default_baseline(arms: Sequence[str]) -> str:
    """The arm a report compares the others with when none is named: guidance:none (the agent without
    guidance) when the batch ran it, else the first arm."""
    return "guidance:none" if "guidance:none" in arms else sorted(arms)[0]


def batch_selections(batch: Batch, baseline: str | None = None) -> list[Selection]:
    """Every arm of one batch against ``baseline`` (default :func:`default_baseline`), as ``repo compare
    BATCH --baseline ARM`` selects them; an empty list for a batch with fewer than two arms."""
    arms = _arms_of(batch)
    base = _match_arm(batch, baseline) if baseline is not None else default_baseline(arms) if arms else None
    if baseline is not None and base is None:
        raise UsageError(
            f"--baseline {baseline}: batch {batch.name} has no finished cell of that arm",
            hint=f"its arms: {', '.join(arms) or 'none'}",
        )
    if base is None or len(arms) < 2:
        return []
    selections = [Selection(base, "baseline", base, [(batch, base)])]
    selections += [Selection(arm, "treatment", arm, [(batch, arm)]) for arm in arms if arm != base]
    for selection in selections:
        selection.cells = [r for r in batch.results() if r.arm == selection.arm]
    return selections


def _unique(batches: Iterable[Batch | None]) -> list[Batch]:
    out: dict[Path, Batch] = {}
    for batch in batches:
        if batch is not None:
            out.setdefault(batch.root.resolve(), batch)
    return list(out.values())


# --- one value per task ------------------------------------------------------------------------------------


def metric_value(result: Result, name: str) -> float | None:
    """A metric as a number: booleans as 0/1; None when the cell does not report it (null or absent).

    A grader failure fails every gated metric: a metric that is a gate entry of such a cell,
    and ``mergeable`` (as in the report), is 0 (false), never left out, which would favour the arm whose agent
    broke its workspace.
    """
    return read_cell(result).metric(name)


def reported_value(result: Result, name: str) -> float | None:
    """A metric as the cell's grade reported it, as a number (booleans 0/1); None when not measured."""
    return read_cell(result).reported(name)


@dataclass
class TaskArm:
    """One task in one arm: its cells reduced to one value per measure (the mean of the reporting cells)."""

    cells: int
    gated: set[bool]
    values: dict[str, tuple[float, int]]
    """measure name -> (mean over the reporting cells, how many cells report it)."""


def _mean_n(values: Sequence[float]) -> tuple[float, int] | None:
    return (math.fsum(values) / len(values), len(values)) if values else None


def task_values(results: Sequence[Result], metrics: Sequence[str], k: int = 1) -> TaskArm:
    """Reduce one task's cells in one arm to one value per measure: the mean over reps.

    gate: the share of passing cells (a grader failure fails); pass@k and pass^k: their unbiased estimates
    over the gated cells (absent with fewer than k); score: the mean score of score-only cells and of review
    cells gated with their score (a grader failure scores 0); cost, turns and each metric: the mean over the
    cells that report it.
    """
    values: dict[str, tuple[float, int]] = {}
    gated = [r for r in results if r.gated]
    if gated:
        passes = sum(1 for r in gated if cell_passed(r))
        for kind, estimate in (
            ("pass_at_k", stats.pass_at_k(len(gated), passes, k)),
            ("pass_hat_k", stats.pass_hat_k(len(gated), passes, k)),
        ):
            if estimate is not None:
                values[kind] = (estimate, len(gated))
    candidates: dict[str, list[float]] = {
        "gate": [1.0 if cell_passed(r) else 0.0 for r in gated],
        "score": [s for r in results if (s := cell_score(r)) is not None],
        "cost": [r.cost_usd for r in results if r.cost_usd is not None],
        "turns": [float(r.turns) for r in results if r.turns is not None],
    }
    for name in metrics:
        candidates["metric:" + name] = [v for r in results if (v := metric_value(r, name)) is not None]
    for key, found in candidates.items():
        mean_n = _mean_n(found)
        if mean_n is not None:
            values[key] = mean_n
    return TaskArm(cells=len(results), gated={r.gated for r in results}, values=values)


# --- pairing and statistics --------------------------------------------------------------------------------


@dataclass(frozen=True)
class MeasureSpec:
    kind: MeasureKind
    name: str

    @property
    def key(self) -> str:
        return f"metric:{self.name}" if self.kind == "metric" else self.kind


def measures_for(metrics: Sequence[str], k: int = 1) -> list[MeasureSpec]:
    return [
        MeasureSpec("gate", "gate"),
        MeasureSpec("pass_at_k", f"pass@{k}"),
        MeasureSpec("pass_hat_k", f"pass^{k}"),
        MeasureSpec("score", "score"),
        MeasureSpec("cost", "cost"),
        MeasureSpec("turns", "turns"),
        *(MeasureSpec("metric", m) for m in metrics),
    ]


def _gating(arm: TaskArm) -> str:
    if arm.gated == {True}:
        return "gated"
    if arm.gated == {False}:
        return "score-only"
    return "mixed"


def pair_tasks(
    baseline: dict[str, TaskArm],
    treatment: dict[str, TaskArm],
    spec: MeasureSpec,
    *,
    labels: tuple[str, str],
) -> tuple[list[tuple[str, TaskArm, TaskArm]], list[Unpaired]]:
    """Tasks paired for one measure, and those that lack it in one arm.

    Tasks left out of every measure (no cells in one arm, a different gate) are :func:`task_level_unpaired`.
    """
    base_label, treat_label = labels
    paired: list[tuple[str, TaskArm, TaskArm]] = []
    unpaired: list[Unpaired] = []
    for task in sorted(set(baseline) & set(treatment)):
        b, t = baseline[task], treatment[task]
        if _gating(b) != _gating(t) or _gating(b) == "mixed":
            continue
        if spec.kind in ("gate", *RELIABILITY_KINDS) and _gating(b) != "gated":
            continue
        has_b, has_t = spec.key in b.values, spec.key in t.values
        if has_b and has_t:
            paired.append((task, b, t))
        elif spec.kind in RELIABILITY_KINDS:
            lacking = " and ".join(
                label for label, has in ((base_label, has_b), (treat_label, has_t)) if not has
            )
            reason = f"fewer gated cells than k in {lacking}"
            unpaired.append(Unpaired(task=task, measure=spec.name, reason=reason))
        elif has_b or has_t:
            lacking = treat_label if has_b else base_label
            reason = f"no cell of {lacking} reports {spec.name}"
            unpaired.append(Unpaired(task=task, measure=spec.name, reason=reason))
    return paired, unpaired


def task_level_unpaired(
    baseline: dict[str, TaskArm], treatment: dict[str, TaskArm], labels: tuple[str, str]
) -> list[Unpaired]:
    """Tasks left out of every measure: finished cells in one arm only, or a task gated in one arm and
    score-only in the other (its definition changed, so it is not the same task)."""
    base_label, treat_label = labels
    out = [
        Unpaired(task=task, measure="all", reason=f"no finished cells in {treat_label}")
        for task in sorted(set(baseline) - set(treatment))
    ]
    out += [
        Unpaired(task=task, measure="all", reason=f"no finished cells in {base_label}")
        for task in sorted(set(treatment) - set(baseline))
    ]
    for task in sorted(set(baseline) & set(treatment)):
        gb, gt = _gating(baseline[task]), _gating(treatment[task])
        if "mixed" in (gb, gt):
            which = base_label if gb == "mixed" else treat_label
            reason = f"gated in some cells of {which} and score-only in others"
            out.append(Unpaired(task=task, measure="all", reason=reason))
        elif gb != gt:
            out.append(
                Unpaired(task=task, measure="all", reason=f"{gb} in {base_label} and {gt} in {treat_label}")
            )
    return out


def measure_stats(spec: MeasureSpec, paired: Sequence[tuple[str, TaskArm, TaskArm]]) -> Measure:
    """Mean per-task delta, its 95% interval over tasks, up/down/tied and the sign-flip p of one measure."""
    per_task = []
    for task, b, t in paired:
        bv, tv = b.values[spec.key][0], t.values[spec.key][0]
        per_task.append(TaskValue(task=task, baseline=bv, treatment=tv, delta=tv - bv))
    deltas = [v.delta for v in per_task]
    interval = INTERVAL[spec.kind]
    if not deltas:
        return Measure(kind=spec.kind, name=spec.name, tasks=0, interval=interval)
    ci = stats.bootstrap_mean_ci(deltas) if interval == "bootstrap" else stats.t_interval(deltas)
    p = stats.sign_flip_p(deltas)
    mde, underpowered = power_note(spec, deltas, p)
    return Measure(
        kind=spec.kind,
        name=spec.name,
        tasks=len(deltas),
        baseline_mean=stats.mean([v.baseline for v in per_task]),
        treatment_mean=stats.mean([v.treatment for v in per_task]),
        delta=stats.mean(deltas),
        ci=ci,
        interval=interval,
        up=sum(1 for d in deltas if d > 0),
        down=sum(1 for d in deltas if d < 0),
        tied=sum(1 for d in deltas if d == 0),
        p=p,
        mde=mde,
        underpowered=underpowered,
        n_baseline=sum(b.values[spec.key][1] for _, b, _ in paired),
        n_treatment=sum(t.values[spec.key][1] for _, _, t in paired),
        per_task=per_task,
    )


#: Significance level of the underpowered note (and of ``repo plan``'s default).
POWER_ALPHA = 0.05
#: The power a comparison should have had for the observed effect.
POWER_TARGET = 0.8


def smallest_sign_flip_p(tasks: int) -> float:
    """The smallest two-sided p the sign-flip test can give over ``tasks`` tasks (every task moving the same
    way): 2 / 2^tasks. At 5 tasks or fewer it is at least 0.0625, so no effect can be significant."""
    return min(1.0, 2.0 / 2.0**tasks) if tasks > 0 else 1.0


def power_note(spec: MeasureSpec, deltas: Sequence[float], p: float) -> tuple[float | None, bool | None]:
    """(mde, underpowered) of a gate or score measure; (None, None) for the descriptive ones.

    The mde is the smallest mean delta these tasks detect with 80% power (:mod:`dokimi.analysis.power`, from
    the observed spread of the deltas). A result with p >= 0.05 is underpowered when an effect of the observed
    size would have been missed more than 20% of the time."""
    if spec.kind not in HOLM_KINDS or len(deltas) < 2:
        return None, None
    mde = minimum_detectable_effect(deltas, alpha=POWER_ALPHA, target=POWER_TARGET)
    if p < POWER_ALPHA:
        return mde, False
    observed = abs(math.fsum(deltas) / len(deltas))
    return mde, mde is None or mde > observed


def tasks_text(n: int) -> str:
    """``1 task``, ``3 tasks``."""
    return f"{n} task" + ("" if n == 1 else "s")


def underpowered_why(m: Measure) -> str:
    """Why a non-significant measure says little: the effects its tasks miss more than 20% of the time, or
    that no effect of any size can reach p < 0.05 with so few tasks."""
    plan = "`dokimi repo plan` gives the tasks and reps an effect needs"
    tasks = tasks_text(m.tasks)
    if m.mde is not None:
        return (
            f"with {tasks} this comparison misses an effect smaller than {m.mde:.3f} more than 20% "
            f"of the time; {plan}"
        )
    floor = smallest_sign_flip_p(m.tasks)
    if floor >= POWER_ALPHA:
        return (
            f"with {tasks} no effect of any size can reach p < {POWER_ALPHA:g} (the smallest p a "
            f"sign-flip test over {tasks} gives is {floor:.4g}, every task moving the same way); "
            f"{plan}"
        )
    return (
        f"with {tasks} and this spread of per-task deltas, even an effect many times the observed "
        f"ones is detected less than 80% of the time; {plan}"
    )


def power_verdict(m: Measure) -> str:
    """One sentence on what a gate or score measure's test says: significant, not significant with enough
    power, or underpowered (and why)."""
    if m.p is None or m.delta is None:
        return "no paired task: nothing tested"
    holm = "" if m.p_holm is None else f", {m.p_holm:.3g} after Holm"
    test = f"p = {m.p:.3g}{holm} (two-sided sign-flip over {tasks_text(m.tasks)})"
    if m.p < POWER_ALPHA:
        return f"significant: {test}"
    if m.underpowered or smallest_sign_flip_p(m.tasks) >= POWER_ALPHA:
        return f"not significant, and underpowered: {test}; {underpowered_why(m)}"
    if m.underpowered is False:
        mde = f" (it detects a mean delta of {m.mde:.3f} with 80% power)" if m.mde is not None else ""
        return f"not significant, with power to see an effect of the observed size{mde}: {test}"
    return f"not significant: {test}"


def apply_holm(comparisons: Sequence[Comparison]) -> int:
    """Holm over every gate and score measure with a p in this call; returns the family size."""
    family = [m for c in comparisons for m in c.measures if m.kind in HOLM_KINDS and m.p is not None]
    adjusted = stats.holm([m.p for m in family if m.p is not None])
    for measure, p_holm in zip(family, adjusted, strict=True):
        measure.p_holm = p_holm
    return len(family)


# --- the comparison ----------------------------------------------------------------------------------------

GroupKey = tuple[str, str | None, str | None, str | None]
"""(model, effort, mode, prompt style): never pooled."""


def _group(result: Result) -> GroupKey:
    """Cells that differ in model, effort, agent mode or prompt style are never pooled: a spec-style prompt
    names what an issue-style one leaves the agent to find, so each style is compared on its own."""
    found = dimensions(result)
    return (found.model, found.effort, found.mode, result.prompt_style)


def _mode_only(result: Result) -> GroupKey:
    """The group of a comparison across models: the mode and prompt style alone (each side holds one model
    and effort in each)."""
    return ("", None, dimensions(result).mode, result.prompt_style)


def _runs(selection: Selection) -> list[Result]:
    """The selection's finished cells and its infra errors: every cell that says which model it ran."""
    return [*selection.cells, *selection.infra()]


def across_models(baseline: Selection, treatment: Selection) -> bool:
    """The two arms share no model: the comparison is of their models (each side must hold one), never of
    guidance arms under one model."""
    base, treat = {r.model for r in _runs(baseline)}, {r.model for r in _runs(treatment)}
    return bool(base and treat) and not base & treat


def one_model_per_mode(selection: Selection) -> dict[GroupKey, tuple[str, str | None]]:
    """The group of a comparison across models (:func:`_mode_only`) -> the one (model, effort) the selection
    ran in it; a UsageError when it ran several (a comparison across models pairs one model with one)."""
    found: dict[GroupKey, set[tuple[str, str | None]]] = defaultdict(set)
    for result in _runs(selection):
        found[_mode_only(result)].add((result.model, result.effort))
    for key, combos in found.items():
        if len(combos) > 1:
            mode = key[2]
            listed = ", ".join(f"{m} (effort {e or 'default'})" for m, e in sorted(combos, key=str))
            raise UsageError(
                f"{selection.label} shares no model with the other arm, so the comparison is of models, and "
                f"it ran several{f' in mode {mode}' if mode else ''}: {listed}",
                hint="select one model and effort on each side (BATCH/ARM of a batch of one --model)",
            )
    return {key: next(iter(combos)) for key, combos in found.items()}


def _by_task(results: Iterable[Result], metrics: Sequence[str], k: int) -> dict[str, TaskArm]:
    cells: dict[str, list[Result]] = defaultdict(list)
    for result in results:
        cells[result.task].append(result)
    return {task: task_values(found, metrics, k) for task, found in cells.items()}


def _sort_key(key: GroupKey) -> tuple[tuple[bool, str], ...]:
    return tuple((value is not None, value or "") for value in key)


def default_k(selections: Sequence[Selection]) -> int:
    """The k of pass@k and pass^k when --k is not given: the fewest reps of the batches compared."""
    return min((batch.reps() for s in selections for batch in s.batches()), default=1)


def _modes(cells: Iterable[Result]) -> set[str | None]:
    return {_group(result)[2] for result in cells}


def _mode_names(modes: Iterable[str | None]) -> str:
    return ", ".join(sorted(mode or "none" for mode in modes))


def refuse_across_modes(baseline: Selection, treatment: Selection) -> None:
    """Arms are compared within one agent mode, and there is no score across modes: two arms whose cells
    share no mode are not compared at all (UsageError, exit 2)."""
    base, treat = _modes(baseline.cells), _modes(treatment.cells)
    if base and treat and not base & treat:
        raise UsageError(
            f"{treatment.label} ran tasks of mode {_mode_names(treat)} and {baseline.label} tasks of mode "
            f"{_mode_names(base)}: arms are compared within one agent mode, and there is no score across "
            "modes",
            hint="compare arms that ran tasks of the same mode (docs/agent-modes.md)",
        )


def build_comparison(
    selections: Sequence[Selection], metrics: Sequence[str] = (), k: int | None = None
) -> CompareDoc:
    """The repo_compare.v1 document of resolved selections (baseline first); ``k`` of pass@k and pass^k
    (default: :func:`default_k`)."""
    check_k(k)
    k = k or default_k(selections)
    metrics = list(dict.fromkeys(metrics))
    check_metrics(selections, metrics)
    baseline, treatments = selections[0], selections[1:]
    for treatment in treatments:
        refuse_across_modes(baseline, treatment)
    specs = measures_for(metrics, k)
    comparisons: list[Comparison] = []
    base_modes = _modes(baseline.cells)
    for treatment in treatments:
        cross = across_models(baseline, treatment)
        key_of = _mode_only if cross else _group
        sides = (one_model_per_mode(baseline), one_model_per_mode(treatment)) if cross else None
        if cross:
            refuse_cross_vendor_without_judge(baseline, treatment)
        base_infra = Counter(key_of(r) for r in baseline.infra())
        treat_infra = Counter(key_of(r) for r in treatment.infra())
        groups: dict[GroupKey, tuple[list[Result], list[Result]]] = defaultdict(lambda: ([], []))
        for result in baseline.cells:
            groups[key_of(result)][0].append(result)
        for result in treatment.cells:
            groups[key_of(result)][1].append(result)
        for key in treat_infra:  # an arm the upstream failed on every cell is still compared: its infra shows
            groups.setdefault(key, ([], []))
        for key in sorted(groups, key=_sort_key):
            base_cells, treat_cells = groups[key]
            if not treat_cells and not treat_infra[key]:
                continue  # the baseline ran a model/effort/mode this treatment never ran
            if key[2] not in base_modes:
                continue  # a mode the baseline never ran: warned about, never paired across modes
            base_tasks, treat_tasks = _by_task(base_cells, metrics, k), _by_task(treat_cells, metrics, k)
            labels = (baseline.label, treatment.label)
            unpaired = task_level_unpaired(base_tasks, treat_tasks, labels)
            measures = []
            for spec in specs:
                paired, left_out = pair_tasks(base_tasks, treat_tasks, spec, labels=labels)
                unpaired += left_out
                if spec.kind != "metric" and not paired and not left_out:
                    continue  # no task has it in either arm: not a measure of this comparison
                measures.append(measure_stats(spec, paired))
            model, effort, mode, style = key
            models: dict[str, Any] = {}
            if sides is not None:
                (base_model, base_effort), (model, effort) = sides[0].get(key, ("", None)), sides[1][key]
                models = {"baseline_model": base_model or None, "baseline_effort": base_effort}
            comparisons.append(
                Comparison(
                    treatment=treatment.label,
                    baseline=baseline.label,
                    model=model,
                    effort=effort,
                    mode=mode,
                    prompt_style=style,
                    **models,
                    measures=measures,
                    unpaired=sorted(unpaired, key=lambda u: (u.task, u.measure, u.reason)),
                    **infra_counts(base_infra[key], len(base_cells), treat_infra[key], len(treat_cells)),
                )
            )
    family = apply_holm(comparisons)
    warnings = [*compare_warnings(selections), *(w for c in comparisons for w in warn_infra_rate_differs(c))]
    return CompareDoc(
        schema="repo_compare.v1",
        dry_run=any(batch.dry_run for s in selections for batch in s.batches()),
        selectors=[_selector_info(s, batch_paths(s)) for s in selections],
        metrics=metrics,
        k=k,
        comparisons=comparisons,
        holm_family=family,
        warnings=sorted(warnings, key=lambda w: (w.code, w.message)),
    )


def infra_counts(base_infra: int, base_cells: int, treat_infra: int, treat_cells: int) -> dict[str, Any]:
    """The infra errors of both arms beside their finished cells, and Fisher's exact p of the difference in
    their rates (None without any infra error)."""
    p = None
    if base_infra or treat_infra:
        p = stats.fisher_exact_p(treat_infra, treat_cells, base_infra, base_cells)
    return {
        "infra_baseline": base_infra,
        "infra_treatment": treat_infra,
        "cells_baseline": base_cells,
        "cells_treatment": treat_cells,
        "infra_p": p,
    }


def infra_line(c: Comparison) -> str:
    """The infra errors of both arms of a comparison (in no measure), and Fisher's exact p of their rates."""
    p = "-" if c.infra_p is None else f"{c.infra_p:.3g}"
    return (
        f"infra errors (the model's API failed them; in no measure): {c.treatment} {c.infra_treatment} of "
        f"{c.infra_treatment + c.cells_treatment} cells, {c.baseline} {c.infra_baseline} of "
        f"{c.infra_baseline + c.cells_baseline}; Fisher's exact p = {p}"
    )


def batch_paths(selection: Selection) -> dict[Path, str]:
    return {batch.root.resolve(): str(batch.root) for batch in selection.batches()}


def _version(result: Result) -> str:
    return f"{result.harness} {result.harness_version or '?'}"


def _selector_info(selection: Selection, paths: dict[Path, str]) -> SelectorInfo:
    refs = []
    for batch, arm in selection.sources:
        cells = [r for r in batch.results() if r.arm == arm]
        refs.append(
            BatchRef(
                name=batch.name,
                path=paths[batch.root.resolve()],
                pin=batch.pin,
                pin_error=batch.pin_error,
                cells=len(cells),
                dry_run=batch.dry_run,
                harness_versions=sorted({_version(r) for r in cells}),
            )
        )
    return SelectorInfo(label=selection.label, role=selection.role, arm=selection.arm, batches=refs)


def check_metrics(selections: Sequence[Selection], metrics: Sequence[str]) -> None:
    """A --metric no finished cell reports as a number or boolean is refused."""
    cells = [r for s in selections for r in s.cells]
    reported = sorted({name for r in cells for name in r.metrics if reported_value(r, name) is not None})
    for name in metrics:
        if name not in reported:
            raise UsageError(
                f"--metric {name}: no finished cell of the compared arms reports it as a number or boolean",
                hint=f"metrics reported: {', '.join(reported) or 'none'}",
            )


# --- warnings (one function per rule) ----------------------------------------------------------------------


def warn_pooled_batches(selections: Sequence[Selection]) -> list[ReportWarning]:
    """A bare ARM (or an arm of several whole batches) pools the cells of several batches."""
    return [
        ReportWarning(
            code="pooled_batches",
            message=f"{s.label} ({s.role}) pools {len(s.sources)} batches: "
            f"{', '.join(b.name for b in s.batches())}; select one with BATCH/ARM",
        )
        for s in selections
        if len(s.sources) > 1
    ]


def warn_no_pin(selections: Sequence[Selection]) -> list[ReportWarning]:
    """A batch of the comparison has no pin: what it ran from is unknown."""
    out = []
    for batch in _unique(b for s in selections for b in s.batches()):
        if batch.pin is None:
            out.append(
                ReportWarning(
                    code="no_pin",
                    message=f"batch {batch.name} has no pin ({batch.pin_error}): "
                    "its eval tree and image are unknown",
                )
            )
    return out


def image_identity(pin: BatchPin) -> str | None:
    """What an image pin compares by: None for an image repo run built from the eval tree, else its name.

    An image built from the tree (``image_pin`` tree, tagged ``dokimi/<id>:<sha>``, or digest, from a working
    tree's build context) follows the tree, so two revisions are not warned about it: what changed is the
    tree, and the eval_dir digest speaks for the eval content. An ``--image`` of its own is compared by name.
    """
    return pin.image if pin.image_pin == ImagePin.IMAGE else None


def warn_different_pins(baseline: Selection, treatment: Selection) -> list[ReportWarning]:
    """The two arms ran from different eval_dir or image pins."""
    out: list[ReportWarning] = []
    base_pins = [b.pin for b in baseline.batches() if b.pin is not None]
    treat_pins = [b.pin for b in treatment.batches() if b.pin is not None]
    if not base_pins or not treat_pins:
        return out
    base_eval = sorted({p.eval_dir_digest for p in base_pins})
    treat_eval = sorted({p.eval_dir_digest for p in treat_pins})
    if base_eval != treat_eval:
        out.append(
            ReportWarning(
                code="different_eval_dir",
                message=f"{treatment.label} and {baseline.label} ran from different eval_dir content "
                f"({', '.join(treat_eval)} vs {', '.join(base_eval)}): tasks or graders may differ",
            )
        )
    base_image = sorted({image_identity(p) or "built from the tree" for p in base_pins})
    treat_image = sorted({image_identity(p) or "built from the tree" for p in treat_pins})
    if base_image != treat_image:
        out.append(
            ReportWarning(
                code="different_image",
                message=f"{treatment.label} and {baseline.label} ran in different images "
                f"({', '.join(treat_image)} vs {', '.join(base_image)})",
            )
        )
    return out


def warn_different_harness_versions(baseline: Selection, treatment: Selection) -> list[ReportWarning]:
    """The two arms ran different harness versions."""
    base = sorted({_version(r) for r in baseline.cells})
    treat = sorted({_version(r) for r in treatment.cells})
    if base == treat:
        return []
    return [
        ReportWarning(
            code="different_harness_versions",
            message=f"{treatment.label} ran {', '.join(treat)}; {baseline.label} ran {', '.join(base)}",
        )
    ]


def warn_modes_not_compared(baseline: Selection, treatment: Selection) -> list[ReportWarning]:
    """The modes one arm ran and the other did not: those tasks are left out, never paired across modes."""
    base, treat = _modes(baseline.cells), _modes(treatment.cells)
    if not base & treat:
        return []  # refused as a whole (refuse_across_modes)
    sides = ((treatment.label, treat - base, baseline.label), (baseline.label, base - treat, treatment.label))
    return [
        ReportWarning(
            code="mode_not_compared",
            message=f"{label} ran tasks of mode {_mode_names(only)}, which {other} did not run: they are "
            "left out (arms are compared within one agent mode)",
        )
        for label, only, other in sides
        if only
    ]


def warn_dry_and_real(baseline: Selection, treatment: Selection) -> list[ReportWarning]:
    """One arm ran the scripted model (a dry run) and the other a real one: their difference measures the
    script against a model, never the guidance."""
    base = {b.dry_run for b in baseline.batches()}
    treat = {b.dry_run for b in treatment.batches()}
    if len(base | treat) < 2:
        return []

    def kind(dry: set[bool]) -> str:
        return "a dry run" if dry == {True} else "a real run" if dry == {False} else "dry and real runs"

    return [
        ReportWarning(
            code="dry_and_real",
            message=f"{treatment.label} is {kind(treat)} and {baseline.label} is {kind(base)}: their "
            "difference compares the scripted model with a real one, not the arms",
        )
    ]


#: Below this p the infra errors of two arms are taken to differ (Fisher's exact test, two-sided).
INFRA_ALPHA = 0.05


def warn_infra_rate_differs(comparison: Comparison) -> list[ReportWarning]:
    """The upstream failed one arm's cells more often than the other's (Fisher's exact test on infra errors
    against finished cells, two-sided, p < 0.05): the cells that ran are then a biased sample of each arm,
    and the comparison of them may be too."""
    p = comparison.infra_p
    if p is None or p >= INFRA_ALPHA:
        return []
    c = comparison
    where = (
        f"model {c.model}"
        + (f", effort {c.effort}" if c.effort else "")
        + (f", mode {c.mode}" if c.mode else "")
    )
    return [
        ReportWarning(
            code="infra_rate_differs",
            message=f"{c.treatment} lost {c.infra_treatment} of {c.infra_treatment + c.cells_treatment} "
            f"cells to infra errors and {c.baseline} {c.infra_baseline} of "
            f"{c.infra_baseline + c.cells_baseline} ({where}; Fisher's exact p = {p:.3g}): the outage hit "
            "one arm more, so the cells that ran may be a biased sample; run the batch again to fill them",
        )
    ]


def _judged_by(selection: Selection) -> set[str]:
    """The judges' models of the selection's cells (their result.json ``judges``)."""
    return {judge for result in selection.cells for judge in result.judges}


def _vendors(models: Iterable[str]) -> str:
    return ", ".join(f"{m} ({vendor_of(m)})" for m in sorted(models))


def refuse_cross_vendor_without_judge(baseline: Selection, treatment: Selection) -> None:
    """Models of two vendors are compared only when no judge could favour one of them: every side whose
    cells a rubric judge scored had a judge (the primary or the second) of a third vendor, or judges of
    both compared vendors. Otherwise a UsageError says which judges scored which side."""
    base = {vendor_of(r.model) for r in _runs(baseline)}
    treat = {vendor_of(r.model) for r in _runs(treatment)}
    compared = base | treat
    if base == treat:
        return
    for side in (baseline, treatment):
        judges = _judged_by(side)
        vendors = {vendor_of(j) for j in judges}
        if not judges or vendors - compared or compared <= vendors:
            continue
        models = sorted({r.model for r in _runs(treatment)} | {r.model for r in _runs(baseline)})
        raise UsageError(
            f"refusing to compare {_vendors(models)}: models of different vendors, and the cells of "
            f"{side.label} were judged only by {_vendors(judges)}; a judge may favour its own vendor's work, "
            "so a comparison of vendors needs a judge (first or second) of a third vendor, or judges of "
            f"both ({' and '.join(sorted(compared))})",
            hint="run the batches again with --judge-model of a third vendor, or with --second-judge-model "
            "(and --second-judge-harness) of the other vendor (docs/mergeability.md)",
        )


def warn_across_models(baseline: Selection, treatment: Selection) -> list[ReportWarning]:
    """The two arms share no model: the comparison is of their models (and harnesses), not of guidance."""
    if not across_models(baseline, treatment):
        return []
    base = sorted({r.model for r in _runs(baseline)})
    treat = sorted({r.model for r in _runs(treatment)})
    return [
        ReportWarning(
            code="across_models",
            message=f"{treatment.label} ({', '.join(treat)}) and {baseline.label} ({', '.join(base)}) share "
            "no model: this compares the models (and their harnesses), not guidance arms under one model",
        )
    ]


def compare_warnings(selections: Sequence[Selection]) -> list[ReportWarning]:
    baseline, treatments = selections[0], selections[1:]
    out = [*warn_pooled_batches(selections), *warn_no_pin(selections)]
    out += warn_few_mergeable_reps([r for s in selections for r in s.cells], compared=True)
    for treatment in treatments:
        out += warn_modes_not_compared(baseline, treatment)
        out += warn_across_models(baseline, treatment)
        out += warn_dry_and_real(baseline, treatment)
        out += warn_different_pins(baseline, treatment)
        out += warn_different_harness_versions(baseline, treatment)
    return out


def compare(
    selectors: Sequence[str], baseline: str, metrics: Sequence[str] = (), k: int | None = None
) -> CompareDoc:
    """``repo compare``: resolve the selectors and build the comparison."""
    return build_comparison(resolve_selectors(selectors, baseline), metrics, k)
