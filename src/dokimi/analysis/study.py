"""Studies (repo_study.v1): one file that asks one question of a repository's guidance, run as one batch and
answered by one report.

The AGENTbench design (no guidance, the repository's own, what the harness's generator writes) is three arms
of one batch: :func:`run_options` turns the study file into ``repo run``'s options, and
:func:`build_study_report` reads the batch back and puts together, for the question asked:

- the arms as applied: what guidance each arm's agents really started with (meta.json,
  :mod:`dokimi.analysis.arms`);
- the paired result: ``repo compare``'s task-level comparison of every treatment with the baseline;
- the power: ``repo plan`` on the batch itself for the study's effect (how many tasks and reps the effect
  needs, and so whether a non-significant result says anything);
- the cost per arm, with guidance:generated's generator counted apart from the cells.

The report is written beside the batch as ``study-report.json`` (repo_study_report.v1) and
``study-report.md``.
"""

from __future__ import annotations

from collections import defaultdict
from pathlib import Path
from typing import TYPE_CHECKING

from dokimi.analysis.arms import arm_guidance, generation_records
from dokimi.analysis.compare import compare
from dokimi.analysis.pilot import PowerSettings, plan_batch
from dokimi.analysis.report import DRY_RUN_BANNER
from dokimi.batch import load_batch, locate_batch
from dokimi.errors import UsageError
from dokimi.gateway.prices import parse_price
from dokimi.home import runs_root
from dokimi.repo.arms import Arm
from dokimi.runner.run import RunOptions
from dokimi.schemas._base import read_document, write_document, write_text_atomic
from dokimi.schemas.study import ArmCost, Study, StudyPower, StudyReport

if TYPE_CHECKING:
    from dokimi.gateway.prices import Price

__all__ = [
    "REPORT_JSON",
    "REPORT_MD",
    "batch_root",
    "build_study_report",
    "load_study",
    "render_markdown",
    "run_options",
    "write_study_report",
]

REPORT_JSON = "study-report.json"
REPORT_MD = "study-report.md"


def load_study(path: Path) -> Study:
    """The study file, validated; its baseline must be one of its arms, and every arm one dokimi builds."""
    study = read_document(path, Study)
    if study.baseline not in study.arms:
        raise UsageError(
            f"{path}: baseline {study.baseline} is not one of the arms ({', '.join(study.arms)})",
            path=path,
            key="baseline",
            hint="add it to arms",
        )
    for arm in study.arms:
        Arm(arm)  # refuses an arm dokimi cannot build
    if study.analysis.effect == 0:
        raise UsageError(f"{path}: analysis.effect is 0", path=path, key="analysis.effect",
                         hint="give the smallest non-zero delta worth detecting")  # fmt: skip
    return study


def _relative(study_path: Path, value: str) -> Path:
    path = Path(value).expanduser()
    return path if path.is_absolute() else study_path.parent / path


def batch_root(study: Study, study_path: Path, out: Path | None = None) -> Path:
    """``<out>/<batch>`` of the study: ``out`` when given, else the file's ``out`` (relative to the file),
    else the batch of that name under ``<DOKIMI_HOME>/runs/`` (where ``repo run`` puts a batch without
    ``--out``), found without git."""
    if out is not None or study.out is not None:
        return (out or _relative(study_path, study.out or "")) / study.batch
    found = locate_batch(study.batch)
    if found.parent.parent != runs_root():
        raise UsageError(
            f"{study_path}: no batch {study.batch} under {runs_root()}",
            hint="run `dokimi repo study run` first, or give --out DIR (where the batch is)",
        )
    return found


def run_options(
    study: Study,
    study_path: Path,
    *,
    source: str | None = None,
    bin: str | None = None,
    out: Path | None = None,
    dry_run: bool = False,
    dry_run_scripts: dict[str | None, Path] | None = None,
    jobs: int | None = None,
) -> RunOptions:
    """``repo run``'s options for the study; the keyword arguments override the file."""
    chosen_source = source or study.source
    if chosen_source is None:
        raise UsageError(
            f"{study_path}: no source", hint="set source in the study file, or pass --source DIR[@REV]"
        )
    if source is None and "@" not in chosen_source and "://" not in chosen_source:
        chosen_source = str(_relative(study_path, chosen_source))
    elif source is None and "://" not in chosen_source:
        where, _, rev = chosen_source.rpartition("@")
        chosen_source = f"{_relative(study_path, where)}@{rev}"
    harness_bin = bin or study.bin
    if harness_bin is not None and bin is None and "/" in harness_bin:
        harness_bin = str(_relative(study_path, harness_bin))
    return RunOptions(
        source=chosen_source,
        arms=tuple(Arm(arm) for arm in study.arms),
        models=tuple(study.models),
        reps=study.reps,
        batch=study.batch,
        out=out or (_relative(study_path, study.out) if study.out is not None else None),
        manifest=study.manifest,
        tasks=tuple(study.tasks),
        harness=study.harness,
        bin=harness_bin,
        agent_network=study.agent_network,
        timeout_s=study.timeout_s,
        max_turns=study.max_turns,
        budget_usd=study.budget_usd,
        max_batch_usd=study.max_batch_usd,
        prices=_prices(study.prices, study_path),
        jobs=jobs or study.jobs,
        dry_run=dry_run,
        dry_run_scripts=dry_run_scripts or {},
    )


def _prices(entries: list[str], study_path: Path) -> dict[str, Price]:
    """The study's ``prices`` (``MODEL=IN,OUT``) by model; a malformed entry is a usage error."""
    prices: dict[str, Price] = {}
    for entry in entries:
        try:
            model, price = parse_price(entry)
        except ValueError as e:
            raise UsageError(f"prices: {e}", path=study_path) from None
        prices[model] = price
    return prices


def arm_costs(root: Path) -> list[ArmCost]:
    """Per arm: the cells' reported costs, and guidance:generated's generator cost (kept apart)."""
    cells: dict[str, list[float | None]] = defaultdict(list)
    for result in load_batch(root).results():
        cells[result.arm].append(result.cost_usd)
    generated = [r.cost_usd for r in generation_records(root) if r.cost_usd is not None]
    out: list[ArmCost] = []
    for arm in sorted(cells):
        known = [c for c in cells[arm] if c is not None]
        agent = round(sum(known), 6)
        generation = round(sum(generated), 6) if arm == "guidance:generated" and generated else None
        out.append(
            ArmCost(
                arm=arm,
                cells=len(cells[arm]),
                cells_with_cost=len(known),
                agent_cost_usd=agent,
                mean_cell_cost_usd=round(agent / len(known), 6) if known else None,
                generation_cost_usd=generation,
                total_cost_usd=round(agent + (generation or 0.0), 6),
            )
        )
    return out


def build_study_report(study: Study, study_path: Path, *, out: Path | None = None) -> StudyReport:
    """The study's one report, from its batch directory alone (no git, no docker)."""
    root = batch_root(study, study_path, out)
    if not root.is_dir():
        raise UsageError(
            f"the study's batch {root} does not exist",
            hint=f"run it first: dokimi repo study run {study_path}",
        )
    batch = load_batch(root)
    comparison = compare([str(root)], study.baseline, list(study.analysis.metrics))
    keep = {study.analysis.measure, "cost", *study.analysis.metrics}
    comparisons = []
    for c in comparison.comparisons:
        c = c.model_copy(update={"measures": [m for m in c.measures if m.name in keep]})
        comparisons.append(c)
    treatments = [arm for arm in study.arms if arm != study.baseline]
    power: list[StudyPower] = []
    for arm in treatments:
        try:
            plan = plan_batch(
                [f"{root}/{arm}"],
                f"{root}/{study.baseline}",
                study.analysis.effect,
                measure=study.analysis.measure,
                model=study.models[0] if len(study.models) > 1 else None,
                settings=PowerSettings(
                    alpha=study.analysis.alpha, target=study.analysis.power, reps=(study.reps,)
                ),
            )
            power.append(StudyPower(treatment=arm, plan=plan))
        except UsageError as exc:
            power.append(StudyPower(treatment=arm, error=exc.message))
    return StudyReport(
        schema="repo_study_report.v1",
        question=study.question,
        dry_run=comparison.dry_run,
        study_file=str(study_path),
        batch=str(root),
        baseline=study.baseline,
        arms=list(study.arms),
        analysis=study.analysis,
        applied=arm_guidance(batch),
        comparisons=comparisons,
        power=power,
        cost=arm_costs(root),
        warnings=comparison.warnings,
    )


def _num(value: float | None, digits: int = 3, *, sign: bool = False) -> str:
    if value is None:
        return "-"
    return f"{value:+.{digits}f}" if sign else f"{value:.{digits}f}"


def render_markdown(report: StudyReport) -> str:
    """The report as Markdown: question, arms as applied, result, power, cost."""
    lines: list[str] = [f"# Study: {report.question}", ""]
    if report.dry_run:
        lines += [f"> **{DRY_RUN_BANNER}**", ""]
    arms = ", ".join(f"`{a}`" for a in report.arms)
    lines += [
        f"Batch `{report.batch}`; baseline `{report.baseline}`; arms {arms}; "
        f"measure {report.analysis.measure}, effect of interest {report.analysis.effect:+g}, "
        f"alpha {report.analysis.alpha:g}, power {report.analysis.power:.0%}.",
        "",
        "## Arms as applied",
        "",
        "What guidance the agents really started with, from every cell's meta.json.",
        "",
        "| arm | tasks with guidance | distinct files | from |",
        "|---|---|---|---|",
    ]
    for g in report.applied:
        sources = ", ".join(g.sources) or "the task's base"
        unrecorded = f" ({g.cells_unrecorded} cells unrecorded)" if g.cells_unrecorded else ""
        lines.append(
            f"| `{g.arm}` | {g.tasks_with_guidance}/{g.tasks}{unrecorded} | {len(g.files)} | {sources} |"
        )
    lines += ["", "## Result (tasks are the unit)", ""]
    lines += [
        "| treatment | model | measure | tasks | baseline | treatment | delta | 95% CI | p | p Holm | note |"
    ]
    lines += ["|---|---|---|---|---|---|---|---|---|---|---|"]
    for c in report.comparisons:
        for m in c.measures:
            ci = "-" if m.ci is None else f"[{m.ci[0]:+.3f}, {m.ci[1]:+.3f}]"
            note = ""
            if m.underpowered:
                note = "underpowered" + (f" (detects >= {m.mde:.3f})" if m.mde is not None else "")
            lines.append(
                f"| `{c.treatment}` | {c.model} | {m.name} | {m.tasks} | {_num(m.baseline_mean)} | "
                f"{_num(m.treatment_mean)} | {_num(m.delta, sign=True)} | {ci} | {_num(m.p)} | "
                f"{_num(m.p_holm)} | {note} |"
            )
    lines += ["", "## Power", ""]
    for p in report.power:
        if p.plan is None:
            lines.append(f"- `{p.treatment}`: not worked out: {p.error}")
            continue
        rec = p.plan.recommended
        row = p.plan.rows[0] if p.plan.rows else None
        if rec is not None and rec.tasks is not None:
            lines.append(
                f"- `{p.treatment}`: to detect {report.analysis.effect:+g} with {report.analysis.power:.0%} "
                f"power: {rec.tasks} tasks x {rec.reps} reps per arm ({rec.cells} cells); this batch has "
                f"{p.plan.pilot.tasks} tasks"
            )
        elif row is not None:
            lines.append(
                f"- `{p.treatment}`: not reached with {row.reps} reps by any number of tasks up to 5000"
            )
    lines += ["", "## Cost per arm", "", "| arm | cells | agent cost | mean per cell | generator | total |"]
    lines += ["|---|---|---|---|---|---|"]
    for cost in report.cost:
        lines.append(
            f"| `{cost.arm}` | {cost.cells} | {_num(cost.agent_cost_usd, 4)} | "
            f"{_num(cost.mean_cell_cost_usd, 4)} | {_num(cost.generation_cost_usd, 4)} | "
            f"{_num(cost.total_cost_usd, 4)} |"
        )
    if report.warnings:
        lines += ["", "## Warnings", ""]
        lines += [f"- {w.code}: {w.message}" for w in report.warnings]
    return "\n".join(lines) + "\n"


def write_study_report(report: StudyReport) -> tuple[Path, Path]:
    """``study-report.json`` and ``study-report.md`` in the batch directory; returns both paths."""
    root = Path(report.batch)
    json_path, md_path = root / REPORT_JSON, root / REPORT_MD
    write_document(json_path, report)
    write_text_atomic(md_path, render_markdown(report))
    return json_path, md_path
