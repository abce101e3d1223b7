"""``dokimi repo plan BATCH[/ARM] --baseline ARM --effect X [--measure gate] [--json]``: the tasks and reps a
paired comparison needs for 80% power, simulated on a pilot batch's own data (docs/statistics.md, Power).

Exit codes: 0 the plan was made (even when no size reaches the target), 2 a refused selector or option.
"""

from __future__ import annotations

import click

from dokimi.cli._common import emit_json, json_option


def _reps(ctx: click.Context, param: click.Parameter, value: str) -> tuple[int, ...]:
    try:
        found = tuple(sorted({int(v) for v in value.split(",") if v.strip()}))
    except ValueError:
        raise click.BadParameter("a comma-separated list of whole numbers, for example 1,2,3,5") from None
    if not found or min(found) < 1:
        raise click.BadParameter("every value must be 1 or more")
    return found


@click.command("plan")
@click.argument("selectors", metavar="BATCH[/ARM]...", nargs=-1, required=True)
@click.option("--baseline", required=True, metavar="ARM|BATCH/ARM", help="The baseline arm, as for compare.")
@click.option(
    "--effect",
    required=True,
    type=float,
    help="The smallest mean per-task delta worth detecting, in the measure's unit (gate: 0.05 = 5 points).",
)
@click.option(
    "--measure",
    default="gate",
    show_default=True,
    metavar="gate|score|cost|turns|metric:NAME",
    help="What the comparison will test.",
)
@click.option(
    "--model", default=None, help="The model whose cells are read (needed when the pilot ran several)."
)
@click.option("--alpha", default=0.05, show_default=True, type=float, help="Two-sided significance level.")
@click.option("--power", "target", default=0.8, show_default=True, type=float, help="The power asked for.")
@click.option(
    "--reps",
    default="1,2,3,5",
    show_default=True,
    callback=_reps,
    help="Reps per (task, arm) to work the plan out for (the pilot's own are added).",
)
@click.option(
    "--tasks-available",
    type=click.IntRange(min=1),
    default=None,
    help="How many tasks the repository has: the recommendation fits in them.",
)
@click.option(
    "--allow-dry-pilot",
    is_flag=True,
    help="Plan from a dry run anyway (its scripted agents have no variance to learn from: for trying the "
    "command only).",
)
@json_option
def plan(
    selectors: tuple[str, ...],
    baseline: str,
    effect: float,
    measure: str,
    model: str | None,
    alpha: float,
    target: float,
    reps: tuple[int, ...],
    tasks_available: int | None,
    allow_dry_pilot: bool,
    as_json: bool,
) -> int:
    """Tasks x reps a paired comparison needs to detect --effect with the --power asked for (80%).

    The pilot batch (BATCH, or BATCH/ARM, and --baseline, as compare takes them) gives the per-task variance,
    how alike one task's reps are, and, when it has a treatment arm, how much the effect varies from task to
    task. Whole studies are simulated from it and tested exactly as compare tests them (sign-flip over
    per-task deltas); the power is the share of studies with p < --alpha. --json prints repo_power.v1.
    """
    # here, not at the top: a command's --help loads no library code (bench/bench_cli_start.py)
    from dokimi.analysis.pilot import PowerSettings, plan_batch

    doc = plan_batch(
        list(selectors),
        baseline,
        effect,
        measure=measure,
        model=model,
        settings=PowerSettings(
            alpha=alpha,
            target=target,
            reps=reps,
            tasks_available=tasks_available,
            allow_dry_pilot=allow_dry_pilot,
        ),
    )
    if as_json:
        emit_json(doc)
        return 0
    # here, not at the top: a command's --help loads no library code (bench/bench_cli_start.py)
    from dokimi.cli.tables import Col, fit_line, print_lines, render_table, terminal_width

    width = terminal_width()
    p = doc.pilot
    lines = (
        fit_line("DRY-RUN PILOT: its agents played a script; this plan fits the script, not a model", width)
        if doc.dry_run_pilot
        else []
    )
    lines += fit_line(
        f"pilot: {p.tasks} tasks ({p.paired_tasks} with {doc.treatment or 'no treatment'}), "
        f"{p.reps:g} reps, baseline mean {p.baseline_mean:.3f}, model {doc.model}, measure {doc.measure}",
        width,
    )
    spread = f"icc {p.icc:.3f}" if p.icc is not None else f"within-task sd {p.within_task_sd or 0:.4g}"
    observed = "" if p.observed_delta is None else f", observed delta {p.observed_delta:+.3f}"
    lines += fit_line(f"  {spread}, effect heterogeneity sd {p.heterogeneity_sd:.3f}{observed}", width)
    lines += fit_line(
        f"to detect {doc.effect:+g} with {doc.target_power:.0%} power at alpha {doc.alpha:g} "
        f"({doc.simulations} simulated studies per size):",
        width,
    )
    rows = []
    for row in doc.rows:
        mark = " *" if doc.recommended is not None and row.reps == doc.recommended.reps else ""
        rows.append(
            [
                f"{row.reps}{mark}",
                "-" if row.tasks is None else str(row.tasks),
                "-" if row.cells is None else str(row.cells),
                "-" if row.power is None else f"{row.power:.3f}",
            ]
        )
    columns = [
        Col("reps", right=True, key=True),
        *(Col(n, right=True, droppable=False) for n in ("tasks", "cells", "power")),
    ]
    lines += render_table(columns, rows, width=width)
    if doc.recommended is not None:
        r = doc.recommended
        lines.append(f"recommended (*): {r.tasks} tasks x {r.reps} reps per arm ({r.cells} cells)")
    for note in doc.notes:
        lines += fit_line(f"  note: {note}", width)
    print_lines(lines)
    return 0
