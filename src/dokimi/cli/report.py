"""``dokimi repo report BATCH [--cutoff MODEL=DATE ...] [--json] [--html FILE]``.

What each number means: docs/statistics.md.

Exit codes: 0 the report was made (whatever it says), 2 not a batch directory or a bad option.
"""

from __future__ import annotations

from pathlib import Path

import click

from dokimi.cli._common import deliver_document, json_option, stdout_console


def _fmt(value: float | None, digits: int = 3) -> str:
    return "-" if value is None else f"{value:.{digits}f}"


def _ci(ci: tuple[float, float] | None) -> str:
    return "-" if ci is None else f"[{ci[0]:.2f}, {ci[1]:.2f}]"


@click.command("report")
@click.argument("batch", metavar="BATCH", type=click.Path(file_okay=False, path_type=Path))
@click.option(
    "--cutoff",
    "cutoffs",
    multiple=True,
    metavar="MODEL=DATE",
    help="Split MODEL's rows by task base date against its training cutoff "
    "(YYYY-MM, YYYY-MM-DD or ISO 8601). Repeatable.",
)
@json_option
@click.option(
    "--html",
    "html_file",
    type=click.Path(dir_okay=False, path_type=Path),
    help="Also write a self-contained HTML page with a chart of pass rates per arm.",
)
def report(batch: Path, cutoffs: tuple[str, ...], as_json: bool, html_file: Path | None) -> int:
    """Pass rates with Wilson 95% intervals per (task, arm, model, effort, mode) of BATCH (<out>/<batch>).

    Finished cells only: a grader failure counts as a failure, a cell without result.json is missing (not
    failed), a result.json that does not validate makes the cell invalid. Score-only tasks show their mean
    score. Cells that differ in effort or mode are never pooled. --json prints a repo_report.v1 document.
    """
    from dokimi.batch import load_batch
    from dokimi.errors import UsageError
    from dokimi.report import build_report, parse_cutoffs

    parsed = parse_cutoffs(cutoffs)
    loaded = load_batch(batch)
    if not loaded.cells and loaded.pin is None and loaded.plan is None:
        raise UsageError(
            f"{batch}: no cells and no _eval/ directory: not a batch",
            hint="give <out>/<batch>, the directory repo run wrote",
        )
    doc = build_report(loaded, cutoffs=parsed, path=str(batch))
    from dokimi.html import render_report

    return deliver_document(
        doc, as_json=as_json, html_file=html_file, render_html=render_report, print_text=_print
    )


def _print(doc: object) -> None:
    from rich.table import Table

    from dokimi.schemas.report import ReportDoc

    assert isinstance(doc, ReportDoc)
    console = stdout_console(wide_when_piped=True)
    counts = doc.counts
    console.print(
        f"batch {doc.batch.name}: {counts.finished} finished, {counts.missing} missing, "
        f"{counts.invalid} invalid"
        + (
            f", {counts.infra_errors} infra errors (never reached the model: in no rate; the next run of "
            "the batch runs them again)"
            if counts.infra_errors
            else ""
        )
    )
    infra = any(r.infra_errors for r in doc.rows)
    egress = any(r.egress_refused for r in doc.rows)
    split = any(r.cutoff for r in doc.rows)
    table = Table(show_edge=False, pad_edge=False, header_style="bold")
    for name in ["task", "arm", "model", "effort", "mode", *(["cutoff"] if split else [])]:
        table.add_column(name)
    merge = any(r.mergeable_n for r in doc.rows)
    numbers = ["passes", "rate", "95% CI", "score", "grader fail", "missing", "invalid", "cost", "turns"]
    numbers += (["infra err"] if infra else []) + (["egress refused"] if egress else [])
    for name in numbers + (["mergeable", "merge score"] if merge else []):
        table.add_column(name, justify="right")
    for r in doc.rows:
        table.add_row(
            r.task,
            r.arm,
            r.model,
            r.effort or "default",
            r.mode or "-",
            *([r.cutoff or "-"] if split else []),
            f"{r.passes}/{r.gated}" if r.gated else "-",
            _fmt(r.pass_rate, 2),
            _ci(r.pass_ci),
            _fmt(r.score_mean),
            str(r.grader_failures),
            str(r.missing),
            str(r.invalid),
            _fmt(r.cost_mean, 4),
            _fmt(r.turns_mean, 1),
            *([str(r.infra_errors)] if infra else []),
            *([str(r.egress_refused)] if egress else []),
            *([f"{r.mergeable}/{r.mergeable_n}", _fmt(r.merge_score_mean)] if merge else []),
        )
    console.print(table)
    if len(doc.rows) > 1:
        arms = Table(show_edge=False, pad_edge=False, header_style="bold", title="per arm (all tasks)")
        for name in ["arm", "model", "effort", "mode", *(["cutoff"] if split else [])]:
            arms.add_column(name)
        arm_numbers = ["tasks", "passes", "rate", "95% CI", "task mean", "score", "grader fail", "missing"]
        arm_numbers += (["infra err"] if infra else []) + (["egress refused"] if egress else [])
        for name in arm_numbers:
            arms.add_column(name, justify="right")
        for a in doc.arms:
            arms.add_row(
                a.arm,
                a.model,
                a.effort or "default",
                a.mode or "-",
                *([a.cutoff or "-"] if split else []),
                str(a.tasks),
                f"{a.passes}/{a.gated}" if a.gated else "-",
                _fmt(a.pass_rate, 2),
                _ci(a.pass_ci),
                _fmt(a.task_pass_mean, 2),
                _fmt(a.score_mean),
                str(a.grader_failures),
                str(a.missing),
                *([str(a.infra_errors)] if infra else []),
                *([str(a.egress_refused)] if egress else []),
            )
        console.print(arms)
    _print_guidance(console, doc)


def _print_guidance(console: object, doc: object) -> None:
    """Per arm: tasks whose agent started with any guidance file (from meta.json), and the generator's
    cost for guidance:generated."""
    from rich.console import Console
    from rich.table import Table

    from dokimi.schemas.report import ReportDoc

    assert isinstance(console, Console) and isinstance(doc, ReportDoc)
    if not doc.guidance:
        return
    table = Table(show_edge=False, pad_edge=False, header_style="bold", title="guidance at the agent's start")
    for name in ["arm", "tasks with guidance", "distinct files", "from", "generator cost"]:
        table.add_column(name, justify="left" if name in ("arm", "from") else "right")
    for g in doc.guidance:
        recorded = g.tasks if not g.cells_unrecorded else f"{g.tasks} ({g.cells_unrecorded} cells unrecorded)"
        table.add_row(
            g.arm,
            f"{g.tasks_with_guidance}/{recorded}",
            str(len(g.files)),
            ", ".join(s.split(" ")[0] for s in g.sources) or "base",
            (_fmt(g.generation_cost_usd, 4) + f" ({g.generated_pairs} runs)") if g.generated_pairs else "-",
        )
    console.print(table)
    for cell in doc.invalid_cells:
        console.print(f"invalid: {cell.cell}: {cell.error}")
