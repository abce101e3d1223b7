"""``dokimi repo compare BATCH[/ARM] [BATCH/ARM ...] --baseline ARM|BATCH/ARM [--metric NAME ...] [--json]
[--html FILE]`` (docs/statistics.md).

Exit codes: 0 the comparison was made, 2 a refused selector or metric, or a directory that is not a batch.
"""

from __future__ import annotations

from pathlib import Path

import click

from dokimi.cli._common import deliver_document, json_option


def _fmt(value: float | None, digits: int = 3) -> str:
    return "-" if value is None else f"{value:+.{digits}f}" if digits < 0 else f"{value:.{digits}f}"


def _p(value: float | None) -> str:
    return "-" if value is None else f"{value:.3g}"


@click.command("compare")
@click.argument("selectors", metavar="BATCH[/ARM]...", nargs=-1, required=True)
@click.option(
    "--baseline",
    required=True,
    metavar="ARM|BATCH/ARM",
    help="The arm every other selected arm is compared with: a bare ARM from every batch given, "
    "or BATCH/ARM.",
)
@click.option(
    "--metric",
    "metrics",
    multiple=True,
    metavar="NAME",
    help="Also compare this grade.json metric (a number or boolean). Repeatable.",
)
@click.option(
    "--k",
    "k",
    type=int,
    metavar="K",
    help="The k of pass@k (some of k attempts passes) and pass^k (all k pass); default: the fewest reps "
    "of the batches compared.",
)
@json_option
@click.option(
    "--html",
    "html_file",
    type=click.Path(dir_okay=False, path_type=Path),
    help="Also write a self-contained HTML page with a per-task delta chart.",
)
def compare(
    selectors: tuple[str, ...],
    baseline: str,
    metrics: tuple[str, ...],
    k: int | None,
    as_json: bool,
    html_file: Path | None,
) -> int:
    """Compare arms against --baseline with tasks as the unit.

    Each task's cells are first reduced to one value per arm (the mean over its reps). Per treatment arm,
    model, effort and mode, and per measure (gate share, pass@k, pass^k, score, cost, turns, each --metric):
    the mean per-task delta with a 95% interval over tasks, tasks up/down/tied, and a two-sided sign-flip
    permutation p; Holm's correction over the gate and score comparisons. BATCH takes every arm of a batch;
    BATCH/ARM one arm of one batch, so two batches of the same arm compare too. --json prints a
    repo_compare.v1 document.
    """
    # here, not at the top: a command's --help loads no library code (bench/bench_cli_start.py)
    from dokimi.analysis.compare import compare as build
    from dokimi.analysis.report import check_k

    check_k(k)
    doc = build(list(selectors), baseline, list(metrics), k)
    # here, not at the top: a command's --help loads no library code (bench/bench_cli_start.py)
    from dokimi.analysis.html import render_compare

    return deliver_document(
        doc, as_json=as_json, html_file=html_file, render_html=render_compare, print_text=_print
    )


def _print(doc: object) -> None:
    # here, not at the top: a command's --help loads no library code (bench/bench_cli_start.py)
    from dokimi.analysis.compare import underpowered_why
    from dokimi.cli.tables import Col, fit_line, print_lines, render_table, terminal_width
    from dokimi.schemas.compare import CompareDoc

    assert isinstance(doc, CompareDoc)
    width = terminal_width()
    lines: list[str] = []
    if doc.dry_run:
        # here, not at the top: a command's --help loads no library code (bench/bench_cli_start.py)
        from dokimi.analysis.report import DRY_RUN_BANNER

        lines += [*fit_line(DRY_RUN_BANNER, width), ""]
    for selector in doc.selectors:
        lines.append(f"{selector.role} {selector.label}:")
        for b in selector.batches:
            pin = b.pin
            where = (
                f"no pin ({b.pin_error})"
                if pin is None
                else f"tree {pin.tree or '(working tree)'}, eval_dir {pin.eval_dir_digest}, "
                f"image {pin.image} ({pin.image_pin.value})"
            )
            dry = "DRY RUN, " if b.dry_run else ""
            text = f"  {b.name} ({b.path}): {dry}{b.cells} cells, {', '.join(b.harness_versions)}; {where}"
            lines += fit_line(text, width)
    columns = [
        Col("measure", key=True),
        *(
            Col(name, right=True, droppable=False)
            for name in ("tasks", "baseline", "treatment", "delta", "95% CI", "up/down/tied", "p")
        ),
        Col("p Holm", right=True),
        Col("n b/t", right=True, droppable=False),
    ]
    for c in doc.comparisons:
        title = f"{c.treatment} vs {c.baseline}: {c.models_text()}"
        if c.mode:
            title += f", mode {c.mode}"
        if c.prompt_style:
            title += f", prompt {c.prompt_style}"
        rows = [
            [
                m.name,
                str(m.tasks),
                _fmt(m.baseline_mean),
                _fmt(m.treatment_mean),
                "-" if m.delta is None else f"{m.delta:+.3f}",
                "-" if m.ci is None else f"[{m.ci[0]:+.3f}, {m.ci[1]:+.3f}]",
                f"{m.up}/{m.down}/{m.tied}",
                _p(m.p),
                _p(m.p_holm),
                f"{m.n_baseline}/{m.n_treatment}",
            ]
            for m in c.measures
        ]
        lines += ["", *fit_line(title, width), *render_table(columns, rows, width=width)]
        for m in c.measures:
            if m.underpowered:
                why = underpowered_why(m)
                lines += fit_line(f"  {m.name}: not significant, and underpowered: {why}", width)
        if c.infra_baseline or c.infra_treatment:
            # here, not at the top: a command's --help loads no library code (bench/bench_cli_start.py)
            from dokimi.analysis.compare import infra_line

            lines += fit_line(f"  {infra_line(c)}", width)
        for u in c.unpaired:
            lines += fit_line(f"  unpaired: {u.task} ({u.measure}): {u.reason}", width)
    lines += fit_line(
        "p: two-sided sign-flip permutation over tasks; "
        f"Holm over {doc.holm_family} gate/score comparison(s); "
        f"pass@{doc.k}, pass^{doc.k} (k={doc.k}), cost, turns and metrics are descriptive.",
        width,
    )
    print_lines(lines)
