"""``dokimi repo report BATCH [--cutoff MODEL=DATE ...] [--k K] [--json] [--html DIR|FILE.html
[--baseline ARM]]``.

What each number means: docs/statistics.md.

Exit codes: 0 the report was made (whatever it says), 2 not a batch directory or a bad option.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

import click

from dokimi.cli._common import deliver_document, json_option, note
from dokimi.errors import UsageError

if TYPE_CHECKING:
    from dokimi.schemas.report import ReportDoc, ReportRow


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
@click.option(
    "--k",
    "k",
    type=int,
    metavar="K",
    help="The k of pass@k (some of k attempts passes) and pass^k (all k pass); default: the batch's reps.",
)
@click.option(
    "--baseline",
    metavar="ARM",
    help="The arm the HTML report compares every other arm with (default: guidance:none when the batch ran "
    "it, else the first arm).",
)
@json_option
@click.option(
    "--html",
    "html_file",
    metavar="DIR|FILE.html",
    type=click.Path(path_type=Path),
    help="Also write the report as a static site: DIR/index.html (or FILE.html), opening with each arm "
    "against --baseline (per-task deltas, the paired test, the guidance, cost beside pass rate), and one "
    "page per cell in cells/ beside it (diff, tests, prompt, transcript, grade, verdict).",
)
def report(
    batch: Path,
    cutoffs: tuple[str, ...],
    k: int | None,
    baseline: str | None,
    as_json: bool,
    html_file: Path | None,
) -> int:
    """Pass rates with Wilson 95% intervals per (task, arm, model, effort, mode) of BATCH (<out>/<batch>).

    Finished cells only: a grader failure counts as a failure, a cell without result.json is missing (not
    failed), a result.json that does not validate makes the cell invalid. Score-only tasks show their mean
    score. Cells that differ in effort or mode are never pooled. --json prints a repo_report.v1 document.
    """
    # here, not at the top: a command's --help loads no library code (bench/bench_cli_start.py)
    from dokimi.analysis.report import build_report, check_k, parse_cutoffs
    from dokimi.batch import load_batch, why_not_a_batch

    check_k(k)
    if baseline is not None and html_file is None:
        raise UsageError("--baseline chooses what the HTML report compares: give it with --html")
    parsed = parse_cutoffs(cutoffs)
    loaded = load_batch(batch)
    why = why_not_a_batch(loaded)
    if why is not None:
        raise UsageError(f"{batch}: {why}", hint="give <out>/<batch>, the directory repo run wrote")
    doc = build_report(loaded, cutoffs=parsed, path=str(batch), k=k)
    if html_file is not None:
        # here, not at the top: a command's --help loads no library code (bench/bench_cli_start.py)
        from dokimi.analysis.site import write_report_site

        note(f"wrote {write_report_site(doc, loaded, html_file, baseline=baseline)} and its cell pages")
    return deliver_document(doc, as_json=as_json, html_file=None, render_html=str, print_text=_print)


def _print(doc: object) -> None:
    # here, not at the top: a command's --help loads no library code (bench/bench_cli_start.py)
    from dokimi.cli.tables import Col, fit_line, print_lines, render_table, terminal_width
    from dokimi.schemas.report import ReportDoc

    assert isinstance(doc, ReportDoc)
    counts = doc.counts
    lines = []
    if doc.dry_run:
        # here, not at the top: a command's --help loads no library code (bench/bench_cli_start.py)
        from dokimi.analysis.report import DRY_RUN_BANNER

        lines += [*fit_line(DRY_RUN_BANNER, terminal_width()), ""]
    lines += [
        f"batch {doc.batch.name}: {counts.finished} finished, {counts.missing} missing, "
        f"{counts.invalid} invalid"
        + (
            f", {counts.infra_errors} infra errors (the model's API failed them: in no rate; the next run "
            "of the batch runs them again)"
            if counts.infra_errors
            else ""
        )
    ]
    infra = any(r.infra_errors for r in doc.rows)
    unanswered = any(r.no_model_answer for r in doc.rows)
    egress = any(r.egress_refused for r in doc.rows)
    split = any(r.cutoff for r in doc.rows)
    styles = any(r.prompt_style for r in doc.rows)  # rows of different prompt styles are never pooled
    merge = any(r.mergeable_n for r in doc.rows)
    lines += _pivot(doc)
    names = [Col("task", key=True), Col("arm", key=True), Col("model"), Col("effort"), Col("mode")]
    names += [Col("prompt", key=True)] if styles else []
    names += [Col("cutoff")] if split else []
    # mergeable first, the test-pass gate beside it: the gap between the two is a result in its own right
    numbers = ["mergeable", "test pass", "gap", "merge score", "judge fail"] if merge else []
    numbers += ["passes", "rate", "95% CI", "score", "grader fail", "missing", "invalid", "cost", "turns"]
    numbers += (["infra err"] if infra else []) + (["no answer"] if unanswered else [])
    numbers += ["egress refused"] if egress else []
    rows = [
        [
            r.task,
            r.arm,
            r.model,
            r.effort or "default",
            r.mode or "-",
            *([r.prompt_style or "-"] if styles else []),
            *([r.cutoff or "-"] if split else []),
            *(_merge_cells(r) if merge else []),
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
            *([str(r.no_model_answer)] if unanswered else []),
            *([str(r.egress_refused)] if egress else []),
        ]
        for r in doc.rows
    ]
    lines += [
        "",
        *render_table([*names, *(Col(n, right=True) for n in numbers)], rows, title="per task and arm"),
    ]
    if merge:
        lines += _mergeability_notes(doc)
    if len(doc.rows) > 1:
        arm_names = [Col("arm", key=True), Col("model"), Col("effort"), Col("mode")]
        arm_names += [Col("prompt", key=True)] if styles else []
        arm_names += [Col("cutoff")] if split else []
        arm_numbers = ["tasks", "passes", "rate", "95% CI", "task mean", "score", "grader fail", "missing"]
        arm_numbers += (["infra err"] if infra else []) + (["no answer"] if unanswered else [])
        arm_numbers += ["egress refused"] if egress else []
        arm_rows = [
            [
                a.arm,
                a.model,
                a.effort or "default",
                a.mode or "-",
                *([a.prompt_style or "-"] if styles else []),
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
                *([str(a.no_model_answer)] if unanswered else []),
                *([str(a.egress_refused)] if egress else []),
            ]
            for a in doc.arms
        ]
        columns = [*arm_names, *(Col(n, right=True) for n in arm_numbers)]
        lines += ["", *render_table(columns, arm_rows, title="per arm (all tasks)")]
    lines += _reliability_lines(doc)
    lines += _guidance_lines(doc)
    for cell in doc.invalid_cells:
        lines.append(f"invalid: {cell.cell}: {cell.error}")
    print_lines(lines)


def _pivot(doc: object) -> list[str]:
    """Pass counts and rates with the arms in columns, one row per task: the first thing to read when the
    batch has several arms and one model, effort, mode and cutoff."""
    # here, not at the top: a command's --help loads no library code (bench/bench_cli_start.py)
    from dokimi.cli.tables import Col, render_table
    from dokimi.schemas.report import ReportDoc

    assert isinstance(doc, ReportDoc)
    arms = sorted({r.arm for r in doc.rows})
    others = {(r.model, r.effort, r.mode, r.prompt_style, r.cutoff) for r in doc.rows}
    tasks = sorted({r.task for r in doc.rows})
    if len(arms) < 2 or len(others) != 1:
        return []
    by = {(r.task, r.arm): r for r in doc.rows}
    rows = []
    for task in tasks:
        row = [task]
        for arm in arms:
            r = by.get((task, arm))
            row.append("-" if r is None or not r.gated else f"{r.passes}/{r.gated} {_fmt(r.pass_rate, 2)}")
        rows.append(row)
    columns = [Col("task", key=True), *(Col(arm, right=True, droppable=False) for arm in arms)]
    return ["", *render_table(columns, rows, title="passes and pass rate per task (arms in columns)")]


def _reliability_lines(doc: ReportDoc) -> list[str]:
    """Per arm: pass@k and pass^k, the means over the tasks with at least k gated cells."""
    # here, not at the top: a command's --help loads no library code (bench/bench_cli_start.py)
    from dokimi.cli.tables import Col, render_table

    gated = [a for a in doc.arms if a.gated]
    if not gated:
        return []
    k = doc.k
    styles = any(a.prompt_style for a in gated)  # never pooled: a column of their own
    rows = [
        [
            a.arm,
            *([a.prompt_style or "-"] if styles else []),
            a.model,
            a.effort or "default",
            a.mode or "-",
            f"{a.k_tasks}/{a.tasks}",
            _fmt(a.task_pass_mean),
            _fmt(a.pass_at_k),
            _fmt(a.pass_hat_k),
        ]
        for a in gated
    ]
    columns = [
        Col("arm", key=True),
        *([Col("prompt", key=True)] if styles else []),
        Col("model"),
        Col("effort"),
        Col("mode"),
        Col("tasks", right=True, droppable=False),
        Col("pass@1", right=True, droppable=False),
        Col(f"pass@{k}", right=True, droppable=False),
        Col(f"pass^{k}", right=True, droppable=False),
    ]
    title = (
        f"reliability over k={k} attempts: pass@{k} (some attempt passes) and pass^{k} (all {k} do), "
        f"the mean over the tasks with {k} or more gated cells"
    )
    return ["", *render_table(columns, rows, title=title)]


def _guidance_lines(doc: object) -> list[str]:
    """Per arm: tasks whose agent started with any guidance file (from meta.json), the distinct files, and
    the generator's cost for guidance:generated; when some arm had skills, the skills apart (distinct skills,
    tasks with a skill), and the files column then counts the instruction files only."""
    # here, not at the top: a command's --help loads no library code (bench/bench_cli_start.py)
    from dokimi.cli.tables import Col, render_table
    from dokimi.repo.workspace import skill_directory
    from dokimi.schemas.report import ReportDoc

    assert isinstance(doc, ReportDoc)
    if not doc.guidance:
        return []
    with_skills = any(g.skills for g in doc.guidance)
    rows = []
    for g in doc.guidance:
        recorded = g.tasks if not g.cells_unrecorded else f"{g.tasks} ({g.cells_unrecorded} cells unrecorded)"
        files = [f for f in g.files if not with_skills or skill_directory(f.path) is None]
        row = [g.arm, f"{g.tasks_with_guidance}/{recorded}", str(len(files))]
        if with_skills:
            row += [str(len(g.skills)), f"{g.tasks_with_skills}/{g.tasks}"]
        row += [
            ", ".join(s.split(" ")[0] for s in g.sources) or "base",
            (_fmt(g.generation_cost_usd, 4) + f" ({g.generated_pairs} runs)") if g.generated_pairs else "-",
        ]
        rows.append(row)
    columns = [
        Col("arm", key=True),
        Col("tasks with guidance", right=True, droppable=False),
        Col("distinct files" if not with_skills else "instruction files", right=True, droppable=False),
        *(
            [
                Col("skills", right=True, droppable=False),
                Col("tasks with skills", right=True, droppable=False),
            ]
            if with_skills
            else []
        ),
        Col("from", droppable=False),
        Col("generator cost", right=True, droppable=False),
    ]
    return ["", *render_table(columns, rows, title="guidance at the agent's start")]


def _merge_cells(row: ReportRow) -> list[str]:
    """mergeable (``*`` for a draft rubric: provisional), the test-pass gate, their gap, the mean merge
    score and the judge failures of one row."""
    if not row.mergeable_n:
        return [
            "-",
            f"{row.test_passes}/{row.gated}" if row.gated else "-",
            "-",
            "-",
            str(row.judge_failures),
        ]
    mark = "*" if row.rubric_provisional else ""
    return [
        f"{row.mergeable}/{row.mergeable_n}{mark}",
        f"{row.test_passes}/{row.gated}" if row.gated else "-",
        _fmt(row.mergeable_gap, 2),
        _fmt(row.merge_score_mean),
        str(row.judge_failures),
    ]


def _mergeability_notes(doc: ReportDoc) -> list[str]:
    """The failed-blocker histogram per task, and what a draft rubric means."""
    lines: list[str] = []
    per_task: dict[str, dict[str, int]] = {}
    for row in doc.rows:
        counts = per_task.setdefault(row.task, {})
        for blocker, n in row.failed_blockers.items():
            counts[blocker] = counts.get(blocker, 0) + n
    failed = {task: counts for task, counts in sorted(per_task.items()) if counts}
    if failed:
        lines += ["", "failed blockers (runs the judge decided):"]
        lines += [
            f"  {task}: "
            + ", ".join(f"{b} x{n}" for b, n in sorted(c.items(), key=lambda kv: (-kv[1], kv[0])))
            for task, c in failed.items()
        ]
    agreement = doc.judge_agreement
    if agreement is not None:

        def kappa(value: float | None) -> str:
            return "undefined" if value is None else f"{value:.2f}"

        lines += [
            "",
            f"judges: kappa {kappa(agreement.kappa_mergeable)} on mergeable over {agreement.cells} cell(s), "
            f"{kappa(agreement.kappa_blockers)} on {agreement.blocker_items} blocker verdict(s) "
            f"(second judge {agreement.second_model or '?'}; its verdicts never change a score)",
            *(f"  disagree: {cell}" for cell in agreement.disagreements),
        ]
        for item in agreement.blockers:
            lines.append(
                f"  {item.task} {item.blocker}: kappa {kappa(item.kappa)}, agreed on {item.agreed} of "
                f"{item.cells} cell(s)"
            )
            lines += [f"    disagree: {cell}" for cell in item.disagreements]
    if any(row.rubric_provisional for row in doc.rows):
        lines += [
            "",
            "* a draft rubric (not yet approved by a maintainer): its mergeable results are provisional",
        ]
    return lines
