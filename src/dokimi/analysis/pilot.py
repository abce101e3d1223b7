"""``repo plan``: a pilot batch read into a power plan (repo_power.v1). The pilot's cells are counted as
``repo compare`` counts them, then :mod:`dokimi.analysis.power` simulates studies of every size on them."""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

from dokimi.analysis.compare import Selection, _match_arm, metric_value, resolve_selectors
from dokimi.analysis.power import DEFAULT_REPS, DEFAULT_SIMS, SEED, PilotTask, PlanRow, plan
from dokimi.analysis.report import cell_passed, cell_score
from dokimi.batch import load_batch
from dokimi.errors import UsageError
from dokimi.schemas.power import PilotSummary, PowerRow, RepoPower

if TYPE_CHECKING:
    from dokimi.schemas.result import Result

__all__ = ["PowerSettings", "cell_values", "plan_batch"]


def cell_values(results: Sequence[Result], measure: str) -> tuple[float, ...]:
    """One value per cell for ``measure``, as ``repo compare`` counts it (a grader failure fails the gate and
    scores 0; cells that do not report a number are left out)."""
    out: list[float] = []
    for r in results:
        value: float | None
        if measure == "gate":
            value = (1.0 if cell_passed(r) else 0.0) if r.gated else None
        elif measure == "score":
            value = cell_score(r)
        elif measure == "cost":
            value = r.cost_usd
        elif measure == "turns":
            value = None if r.turns is None else float(r.turns)
        elif measure.startswith("metric:"):
            value = metric_value(r, measure.removeprefix("metric:"))
        else:
            raise UsageError(
                f"--measure {measure}: unknown", hint="use gate, score, cost, turns or metric:NAME"
            )
        if value is not None:
            out.append(float(value))
    return tuple(out)


@dataclass(frozen=True)
class PowerSettings:
    """How a study is planned: the test's level, the power wanted, the repetitions tried, the tasks there are,
    and the simulation."""

    alpha: float = 0.05
    target: float = 0.8
    reps: Sequence[int] = DEFAULT_REPS
    tasks_available: int | None = None
    sims: int = DEFAULT_SIMS
    seed: int = SEED
    allow_dry_pilot: bool = False
    """--allow-dry-pilot: plan from a dry run's cells anyway (see :func:`dry_pilot_refusal`)."""


def dry_pilot_refusal(batches: Sequence[str]) -> UsageError:
    """Why a dry run is no pilot: a scripted agent does what its script says every time, so its cells have
    no variance to learn from, and a plan drawn from them recommends a size that fits a script, not a
    model."""
    return UsageError(
        f"the pilot is a dry run ({', '.join(batches)}): its agents played a script, which does the same "
        "thing every time, so its cells have no variance to learn from and a plan from them fits the "
        "script, not a model",
        hint="plan from a real pilot (a few tasks, 2 reps or more), or pass --allow-dry-pilot to plan from "
        "it anyway (to try the command)",
    )


def plan_batch(
    selectors: Sequence[str],
    baseline: str,
    effect: float,
    *,
    measure: str = "gate",
    model: str | None = None,
    settings: PowerSettings = PowerSettings(),
) -> RepoPower:
    """The repo_power.v1 document for a pilot: ``selectors`` and ``baseline`` as ``repo compare`` takes them
    (a pilot with the baseline arm only is fine: it then assumes the effect is the same on every task)."""
    try:
        selections = resolve_selectors(selectors, baseline)
    except UsageError as exc:
        if not exc.message.startswith("nothing to compare"):
            raise
        selections = _baseline_only(selectors, baseline)
    dry = sorted({str(b.root) for s in selections for b in s.batches() if b.dry_run})
    if dry and not settings.allow_dry_pilot:
        raise dry_pilot_refusal(dry)
    base_sel: Selection = selections[0]
    treat_sel: Selection | None = selections[1] if len(selections) > 1 else None
    if len(selections) > 2:
        names = ", ".join(s.label for s in selections[1:])
        raise UsageError(
            f"the pilot has {len(selections) - 1} treatment arms ({names})", hint="name one with BATCH/ARM"
        )
    models = sorted({r.model for r in base_sel.cells})
    if model is None:
        if len(models) != 1:
            raise UsageError(
                f"the pilot's baseline ran {len(models)} models",
                hint=f"pick one with --model: {', '.join(models)}",
            )
        model = models[0]
    elif model not in models:
        raise UsageError(
            f"--model {model}: no baseline cell ran it", hint=f"models: {', '.join(models) or 'none'}"
        )
    cells: dict[str, tuple[list[Result], list[Result]]] = defaultdict(lambda: ([], []))
    for r in base_sel.cells:
        if r.model == model:
            cells[r.task][0].append(r)
    if treat_sel is not None:
        for r in treat_sel.cells:
            if r.model == model:
                cells[r.task][1].append(r)
    pilot = [
        PilotTask(task, cell_values(b, measure), cell_values(t, measure))
        for task, (b, t) in sorted(cells.items())
    ]
    result = plan(
        pilot,
        effect,
        alpha=settings.alpha,
        target=settings.target,
        reps=settings.reps,
        tasks_available=settings.tasks_available,
        sims=settings.sims,
        seed=settings.seed,
    )
    fit = result.fit
    alpha, target, sims, seed = settings.alpha, settings.target, settings.sims, settings.seed
    tasks_available = settings.tasks_available
    notes = [
        *(
            ["DRY-RUN PILOT (--allow-dry-pilot): its agents played a script, so this plan fits the script"]
            if dry
            else []
        ),
        "tasks are drawn from the pilot's tasks; each task's reps vary as the pilot's did",
        "the test is repo compare's: the two-sided sign-flip test over per-task deltas",
    ]
    if fit.kind == "binary":
        notes.append("the effect is a shift on the logit scale, set so the mean pass-rate gain is the effect")
    else:
        notes.append("the effect is added to every task's value")
    if not fit.heterogeneity_included:
        notes.append(
            "the effect is assumed equal on every task"
            + (
                " (the pilot shows no more spread than that)"
                if fit.paired_tasks >= 3
                else " (no treatment arm)"
            )
        )
    if result.recommended is None and tasks_available is not None:
        notes.append(f"no number of reps reaches the target with {tasks_available} tasks: write more tasks")

    def row(item: PlanRow) -> PowerRow:
        return PowerRow(reps=item.reps, tasks=item.tasks, power=item.power, cells=item.cells)

    return RepoPower(
        schema="repo_power.v1",
        dry_run_pilot=bool(dry),
        batches=sorted({str(b.root) for s in selections for b in s.batches()}),
        baseline=base_sel.label,
        treatment=None if treat_sel is None else treat_sel.label,
        model=model,
        measure=measure,
        effect=effect,
        alpha=alpha,
        target_power=target,
        simulations=sims,
        seed=seed,
        pilot=PilotSummary(
            kind=fit.kind,
            tasks=fit.tasks,
            paired_tasks=fit.paired_tasks,
            reps=fit.reps,
            baseline_mean=fit.baseline_mean,
            between_task_sd=fit.between_sd,
            icc=fit.icc,
            within_task_sd=fit.within_sd,
            heterogeneity_sd=fit.heterogeneity_sd,
            observed_delta=fit.observed_delta,
        ),
        rows=[row(r) for r in result.rows],
        tasks_available=tasks_available,
        recommended=None if result.recommended is None else row(result.recommended),
        notes=notes,
    )


def _baseline_only(selectors: Sequence[str], baseline: str) -> list[Selection]:
    """The baseline selection of a pilot that ran only the baseline arm (``repo compare`` refuses it: there
    is nothing to compare, but there is something to plan from)."""
    text = baseline.rstrip("/")
    roots = [text.rsplit("/", 1)[0]] if "/" in text else list(selectors)
    arm_name = text.rsplit("/", 1)[-1]
    sources = []
    for root in roots:
        batch = load_batch(root)
        arm = _match_arm(batch, arm_name)
        if arm is not None:
            sources.append((batch, arm))
    if not sources:
        raise UsageError(f"--baseline {baseline}: no batch given has finished cells of that arm")
    selection = Selection(sources[0][1], "baseline", sources[0][1], sources)
    selection.cells = [r for batch, arm in sources for r in batch.results() if r.arm == arm]
    return [selection]
