"""Self-contained HTML pages for ``repo report --html`` and ``repo compare --html``.

One file, no external assets: inline CSS, inline SVG charts, and one inline script of dokimi's own
(``site.js``: tables sort and filter), so a page can be attached to a pull request or opened offline. Every
page carries a Content-Security-Policy that allows that script alone, by its hash, and no request of any kind:
text an agent wrote is escaped wherever it is shown, and should an escape ever be missed, no script or handler
it smuggled in would run, nor could anything be fetched. Every chart element carries its numbers as ``data-*``
attributes, so a test (and a reader with devtools) can check the chart against the JSON document.
Deterministic: no timestamps.
"""

from __future__ import annotations

import base64
import hashlib
import re
from collections import defaultdict
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from functools import cache
from html import escape
from importlib import resources

from dokimi.analysis.compare import infra_line
from dokimi.analysis.report import DRY_RUN_BANNER
from dokimi.schemas.compare import CompareDoc, Comparison, Measure
from dokimi.schemas.report import ArmSummary, ReportDoc, ReportWarning

__all__ = ["Column", "Td", "dry_run_banner", "page", "render_compare", "render_report", "table"]

_CSS = """
body{font:14px/1.45 system-ui,-apple-system,Segoe UI,Roboto,sans-serif;margin:24px;color:#1d2330}
td{white-space:nowrap}.scroll{overflow-x:auto;max-width:100%}td.wrap{white-space:normal;overflow-wrap:break-word}td.digest{overflow-wrap:anywhere}
h1{font-size:22px;margin:0 0 4px}h2{font-size:17px;margin:28px 0 8px}h3{font-size:15px;margin:18px 0 6px}
table{border-collapse:collapse;margin:8px 0;font-variant-numeric:tabular-nums}
th,td{border-bottom:1px solid #dde1e8;padding:3px 10px;text-align:left;vertical-align:top}
th{background:#f3f5f8;font-weight:600}td.num{text-align:right}
.muted{color:#667085}.warn{background:#fff6e5;border-left:4px solid #f5a524;padding:6px 10px;margin:4px 0}
svg text{font:12px system-ui,sans-serif;fill:#1d2330}svg .axis{stroke:#98a2b3}svg .grid{stroke:#eef0f4}
svg .bar{fill:#4f7cff}svg .score-bar{fill:#8b5cf6}svg .ci{stroke:#1d2330;stroke-width:1.5}
svg .up{fill:#12b76a}svg .down{fill:#f04438}svg .tied{fill:#98a2b3}svg .mean{stroke:#1d2330;stroke-width:2}
svg .band{fill:#1d2330;fill-opacity:.08}svg .forest-ci{stroke:#1d2330;stroke-width:2}
svg .forest-point{fill:#4f7cff}svg .zero{stroke:#98a2b3;stroke-dasharray:4 3}
table.heatmap td.heat{text-align:center;min-width:70px}
code{background:#f3f5f8;padding:0 3px;border-radius:3px}
.pass{color:#0a7a3d;font-weight:600}.fail{color:#b42318;font-weight:600}.other{color:#b54708;font-weight:600}
a.cell{margin-right:12px}
.dryrun{background:#fef0c7;border:2px solid #dc6803;padding:8px 12px;margin:8px 0 12px;font-weight:600}
th button.sort{all:unset;cursor:pointer}th button.sort:focus-visible{outline:2px solid #4f7cff}
th[aria-sort=ascending] button.sort::after{content:" \\25B2";font-size:10px}
th[aria-sort=descending] button.sort::after{content:" \\25BC";font-size:10px}
.filters{display:flex;flex-wrap:wrap;gap:6px 16px;align-items:center;margin:8px 0 0}
.filters select{font:inherit;max-width:260px}
.note{font-size:12px;margin:2px 0}
"""


def _fmt(value: float | None, digits: int = 3) -> str:
    return "-" if value is None else f"{value:.{digits}f}"


def _ci(ci: tuple[float, float] | None, digits: int = 3) -> str:
    return "-" if ci is None else f"[{ci[0]:.{digits}f}, {ci[1]:.{digits}f}]"


def _attr(value: object) -> str:
    if value is None:
        return ""
    if isinstance(value, float):
        return repr(value)
    return escape(str(value), quote=True)


def dry_run_banner(dry_run: bool) -> list[str]:
    """The banner every page of a dry run opens with: its numbers are a script's, its costs zero."""
    return [f'<p class="dryrun" data-dry-run="true">{escape(DRY_RUN_BANNER)}</p>'] if dry_run else []


@cache
def _script() -> tuple[str, str]:
    """(site.js, its CSP source ``'sha256-...'``)."""
    text = resources.files("dokimi.analysis").joinpath("site.js").read_text(encoding="utf-8")
    digest = base64.b64encode(hashlib.sha256(text.encode("utf-8")).digest()).decode("ascii")
    return text, f"'sha256-{digest}'"


def content_security_policy() -> str:
    """What a page may do: run dokimi's script (by hash), apply inline styles and show inline images; nothing
    else, and no request at all (no fetch, no image, no font, no frame, no form, no base URL)."""
    _, script_hash = _script()
    return (
        f"default-src 'none'; script-src {script_hash}; style-src 'unsafe-inline'; img-src data:; "
        "base-uri 'none'; form-action 'none'"
    )


def page(title: str, body: Sequence[str], css: str = "") -> str:
    """A whole page: the policy first, the styles, the body, then dokimi's table script."""
    script, _ = _script()
    policy = escape(content_security_policy(), quote=True)
    return (
        '<!DOCTYPE html>\n<html lang="en"><head><meta charset="utf-8">'
        f'<meta http-equiv="Content-Security-Policy" content="{policy}">'
        '<meta name="viewport" content="width=device-width, initial-scale=1">'
        f"<title>{escape(title)}</title><style>{_CSS}{css}</style></head><body>\n"
        + "\n".join(body)
        + f"\n<script>{script}</script>\n</body></html>\n"
    )


def _page(title: str, body: list[str]) -> str:
    return page(title, body)


# --- tables ------------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Column:
    """One column of a :func:`table`."""

    name: str
    numeric: bool = False
    """Right-aligned, sorted as a number."""
    filter: bool = False
    """A drop-down above the table filters by this column's values (never dropped)."""
    key: bool = False
    """Names the row (task, arm): never dropped."""
    wrap: bool = False
    """Long text that may wrap (a path, a reason) rather than widen the table: at spaces and after
    separators."""
    digest: bool = False
    """With ``wrap``: a digest or an image name, which may break anywhere (hex has no separator)."""


@dataclass(frozen=True)
class Td:
    """A cell with more than text: markup (already escaped), a sort key, a filter value, a class."""

    text: str
    """What the cell says (what empty-column detection and filters read)."""
    html: str | None = None
    """The cell's markup; None shows ``text`` escaped."""
    sort: str | None = None
    """The key sorting reads (a number for a "3/4" cell)."""
    css: str = ""


#: A column where every row holds one of these says nothing: dropped, and named under the table.
EMPTY_VALUES = frozenset({"", "-", "0", "0/0", "0.0", "0.000", "0.0000", "[]"})


def _text(cell: str | Td) -> str:
    return cell.text if isinstance(cell, Td) else cell


def _td(cell: str | Td, column: Column) -> str:
    td = cell if isinstance(cell, Td) else Td(cell)
    classes = " ".join(
        c
        for c in (
            "num" if column.numeric else "",
            "wrap" if column.wrap else "",
            "digest" if column.digest else "",
            td.css,
        )
        if c
    )
    attrs = f' class="{classes}"' if classes else ""
    if td.sort is not None:
        attrs += f' data-sort="{_attr(td.sort)}"'
    if column.filter:
        attrs += f' data-value="{_attr(td.text)}"'
    text = escape(td.text)
    if column.wrap:  # a path or an id may break after its separators rather than widen the table
        text = _BREAK_AFTER.sub(r"\1<wbr>", text)
    return f"<td{attrs}>{td.html if td.html is not None else text}</td>"


#: Where a long name may break: after ``/ _ . : = -`` (never inside an HTML entity, which has none of them).
_BREAK_AFTER = re.compile(r"([/_.:=-])")


def table(
    columns: Sequence[Column], rows: Sequence[Sequence[str | Td]], *, css: str = "", drop_empty: bool = True
) -> str:
    """A sortable table (filterable by its ``filter`` columns). With ``drop_empty``, a column that says
    nothing is left out and named once: empty in every row (``-``, 0) under the table, one value in every row
    of several above it; key and filter columns always stay."""
    keep = list(range(len(columns)))
    same: list[str] = []
    empty: list[str] = []
    if drop_empty and rows:
        keep = []
        for i, column in enumerate(columns):
            values = {_text(row[i]) for row in rows}
            if column.key or column.filter:
                keep.append(i)
            elif values <= EMPTY_VALUES:
                empty.append(column.name)
            elif len(values) == 1 and len(rows) > 1 and not column.numeric:
                same.append(f"{column.name} {values.pop()}")
            else:
                keep.append(i)
    head = "".join(
        "<th"
        + (' class="num"' if columns[i].numeric else "")
        + (f' data-filter="{_attr(columns[i].name)}"' if columns[i].filter else "")
        + f">{escape(columns[i].name)}</th>"
        for i in keep
    )
    body = "".join("<tr>" + "".join(_td(row[i], columns[i]) for i in keep) + "</tr>" for row in rows)
    classes = " ".join(c for c in ("sortable", css) if c)
    out = [f'<p class="muted note">every row: {escape(", ".join(same))}</p>'] if same else []
    out.append(
        f'<div class="scroll"><table class="{classes}"><thead><tr>{head}</tr></thead>'
        f"<tbody>{body}</tbody></table></div>"
    )
    if empty:
        out.append(f'<p class="muted note">nothing in any row: {escape(", ".join(empty))}</p>')
    return "".join(out)


def _table(
    headers: Sequence[str],
    rows: Sequence[Sequence[str]],
    numeric: Sequence[int] = (),
    *,
    filters: Sequence[str] = (),
    drop_empty: bool = False,
) -> str:
    """:func:`table` with columns named by ``headers``: ``numeric`` indices, ``filters`` names."""
    numbers = set(numeric)
    columns = [Column(h, numeric=i in numbers, filter=h in filters) for i, h in enumerate(headers)]
    return table(columns, rows, drop_empty=drop_empty)


def _warnings(warnings: Sequence[ReportWarning]) -> list[str]:
    if not warnings:
        return []
    items = [
        f'<div class="warn" data-code="{_attr(w.code)}"><b>{escape(w.code)}</b>: {escape(w.message)}</div>'
        for w in warnings
    ]
    return ["<h2>Warnings</h2>", *items]


# --- report ------------------------------------------------------------------------------------------------


def _panel_title(summary: ArmSummary) -> str:
    parts = [f"model {summary.model}", f"effort {summary.effort or 'default'}"]
    if summary.mode:
        parts.append(f"mode {summary.mode}")
    if summary.prompt_style:
        parts.append(f"prompt {summary.prompt_style}")
    if summary.cutoff:
        parts.append(f"{summary.cutoff} cutoff")
    return ", ".join(parts)


def _rate_chart(summaries: Sequence[ArmSummary]) -> str:
    """One bar per arm: the pass rate over the arm's gated cells and its Wilson 95% interval."""
    width, height, left, bottom, top = 640, 250, 48, 40, 16
    plot_h = height - bottom - top
    slot = (width - left - 16) / max(1, len(summaries))
    bar_w = min(80.0, slot * 0.6)
    out = [
        f'<svg class="chart rates" width="{width}" height="{height}" '
        f'viewBox="0 0 {width} {height}" role="img">'
    ]
    for tick in (0.0, 0.25, 0.5, 0.75, 1.0):
        y = top + plot_h * (1 - tick)
        out.append(f'<line class="grid" x1="{left}" x2="{width - 8}" y1="{y:.1f}" y2="{y:.1f}"/>')
        out.append(f'<text x="{left - 6}" y="{y + 4:.1f}" text-anchor="end">{tick:.2f}</text>')
    out.append(f'<line class="axis" x1="{left}" x2="{left}" y1="{top}" y2="{top + plot_h}"/>')
    for i, s in enumerate(summaries):
        rate = s.pass_rate or 0.0
        x = left + slot * i + (slot - bar_w) / 2
        y = top + plot_h * (1 - rate)
        lo, hi = s.pass_ci if s.pass_ci is not None else (rate, rate)
        cx = x + bar_w / 2
        out.append(
            f'<rect class="bar" x="{x:.1f}" y="{y:.1f}" width="{bar_w:.1f}" height="{plot_h * rate:.1f}" '
            f'data-arm="{_attr(s.arm)}" data-passes="{s.passes}" data-gated="{s.gated}" '
            f'data-rate="{_attr(s.pass_rate)}" data-lo="{_attr(lo)}" data-hi="{_attr(hi)}">'
            f"<title>{escape(s.arm)}: {s.passes}/{s.gated} = {_fmt(s.pass_rate)}, "
            f"95% {_ci(s.pass_ci)}</title>"
            "</rect>"
        )
        y_lo, y_hi = top + plot_h * (1 - lo), top + plot_h * (1 - hi)
        out.append(f'<line class="ci" x1="{cx:.1f}" x2="{cx:.1f}" y1="{y_lo:.1f}" y2="{y_hi:.1f}"/>')
        for yy in (y_lo, y_hi):
            out.append(f'<line class="ci" x1="{cx - 6:.1f}" x2="{cx + 6:.1f}" y1="{yy:.1f}" y2="{yy:.1f}"/>')
        out.append(
            f'<text x="{cx:.1f}" y="{top + plot_h + 16}" text-anchor="middle">{escape(s.arm)}</text>'
            f'<text class="muted" x="{cx:.1f}" y="{top + plot_h + 31}" text-anchor="middle">'
            f"{s.passes}/{s.gated}</text>"
        )
    out.append("</svg>")
    return "".join(out)


def _score_chart(summaries: Sequence[ArmSummary]) -> str:
    """One bar per arm: the mean score of its score-only cells (no interval: cells of a task are not
    independent; compare gives the interval over tasks)."""
    top_value = max([1.0, *(s.score_mean or 0.0 for s in summaries)])
    width, height, left, bottom, top = 640, 220, 48, 40, 16
    plot_h = height - bottom - top
    slot = (width - left - 16) / max(1, len(summaries))
    bar_w = min(80.0, slot * 0.6)
    out = [f'<svg class="chart scores" width="{width}" height="{height}" viewBox="0 0 {width} {height}">']
    out.append(f'<line class="axis" x1="{left}" x2="{left}" y1="{top}" y2="{top + plot_h}"/>')
    out.append(f'<text x="{left - 6}" y="{top + 4}" text-anchor="end">{top_value:.2f}</text>')
    out.append(f'<text x="{left - 6}" y="{top + plot_h + 4}" text-anchor="end">0</text>')
    for i, s in enumerate(summaries):
        value = max(0.0, s.score_mean or 0.0)
        x = left + slot * i + (slot - bar_w) / 2
        h = plot_h * value / top_value
        out.append(
            f'<rect class="score-bar" x="{x:.1f}" y="{top + plot_h - h:.1f}" '
            f'width="{bar_w:.1f}" height="{h:.1f}" '
            f'data-arm="{_attr(s.arm)}" data-score="{_attr(s.score_mean)}" data-n="{s.score_only}">'
            f"<title>{escape(s.arm)}: mean score {_fmt(s.score_mean)} over {s.score_only} cells"
            "</title></rect>"
            f'<text x="{x + bar_w / 2:.1f}" y="{top + plot_h + 16}" text-anchor="middle">'
            f"{escape(s.arm)}</text>"
        )
    out.append("</svg>")
    return "".join(out)


def render_report(
    doc: ReportDoc,
    overview: Sequence[str] = (),
    tail: Sequence[str] = (),
    page: Callable[[str, list[str]], str] | None = None,
) -> str:
    """The report page: the header (batch, pin, counts, warnings), ``overview`` (the site's first screen:
    does the guidance help), per panel (model, effort, mode, prompt style, cutoff side) a chart of pass rates
    per arm with Wilson intervals and its table, the per-task table, cells not counted, then ``tail`` (the
    site's table of cells); ``page`` makes the whole page (the site adds its styles)."""
    batch = doc.batch
    body = [f"<h1>dokimi report: {escape(batch.name)}</h1>", *dry_run_banner(doc.dry_run)]
    pin = batch.pin
    counts = doc.counts
    line = f"{counts.finished} finished, {counts.missing} missing, {counts.invalid} invalid cells" + (
        "; cutoffs: " + ", ".join(f"{m} {c}" for m, c in doc.cutoffs.items()) if doc.cutoffs else ""
    )
    body.append(f"<p>{escape(line)}</p>")
    if pin is not None:
        body.append(
            f'<p class="muted note">source <code>{escape(pin.source)}</code>, tree '
            f"<code>{escape(pin.tree or '-')}</code>, eval_dir <code>{escape(pin.eval_dir_digest)}</code>, "
            f"image <code>{escape(pin.image)}</code> ({escape(str(pin.image_pin.value))})</p>"
        )
    body += _warnings(doc.warnings)
    body += overview

    panels: dict[str, list[ArmSummary]] = defaultdict(list)
    for summary in doc.arms:
        panels[_panel_title(summary)].append(summary)
    body.append('<h2 id="arms">Pass rate per arm</h2>')
    body.append(
        '<p class="muted">Bars: passes over finished gated cells of all tasks '
        "(a grader failure is a failure); "
        "whiskers: Wilson 95% interval, which treats cells as independent. For the difference between arms, "
        f"with tasks as the unit, see the comparison above or <code>repo compare</code>. pass@{doc.k} and "
        f"pass^{doc.k}: the mean over tasks with {doc.k} or more gated cells of the chance that some (pass@) "
        f"or every (pass^) one of {doc.k} attempts passes.</p>"
    )
    for title, summaries in panels.items():
        gated = [s for s in summaries if s.gated]
        scored = [s for s in summaries if s.score_only]
        body.append(f'<section class="panel" data-panel="{_attr(title)}"><h3>{escape(title)}</h3>')
        if gated:
            body.append(_rate_chart(gated))
        if scored:
            body.append('<p class="muted">Mean score of score-only tasks per arm</p>')
            body.append(_score_chart(scored))
        body.append(_arm_table(summaries, doc.k))
        body.append("</section>")

    body.append('<h2 id="tasks">Per task</h2>')
    body.append(_task_table(doc))
    if doc.missing_cells or doc.invalid_cells:
        body.append("<h2>Cells not counted</h2>")
        body.append(
            table(
                [Column("cell", key=True), Column("status", filter=True), Column("reason", wrap=True)],
                [[c.cell, "missing", ""] for c in doc.missing_cells]
                + [[c.cell, "invalid", c.error or ""] for c in doc.invalid_cells],
            )
        )
    body += tail
    return (page or _page)(f"dokimi report: {batch.name}", body)


def _arm_table(summaries: Sequence[ArmSummary], k: int) -> str:
    columns = [
        Column("arm", key=True),
        *(
            Column(name, numeric=True)
            for name in ("tasks", "passes", "rate", "95% CI", "task mean", f"pass@{k}", f"pass^{k}", "score")
        ),
        *(Column(name, numeric=True) for name in ("grader failures", "missing", "invalid", "infra errors")),
        *(Column(name, numeric=True) for name in ("cost", "turns", "mergeable", "merge score")),
    ]
    rows = [
        [
            s.arm,
            str(s.tasks),
            f"{s.passes}/{s.gated}" if s.gated else "-",
            _fmt(s.pass_rate),
            _ci(s.pass_ci),
            _fmt(s.task_pass_mean),
            _fmt(s.pass_at_k),
            _fmt(s.pass_hat_k),
            _fmt(s.score_mean),
            str(s.grader_failures),
            str(s.missing),
            str(s.invalid),
            str(s.infra_errors),
            _fmt(s.cost_mean, 4),
            _fmt(s.turns_mean, 1),
            f"{s.mergeable}/{s.mergeable_n}" if s.mergeable_n else "-",
            _fmt(s.merge_score_mean),
        ]
        for s in summaries
    ]
    return table(columns, rows)


def _task_table(doc: ReportDoc) -> str:
    """One row per task and arm; filterable by task, arm and model; empty columns left out."""
    k = doc.k
    columns = [
        Column("task", key=True, filter=True),
        Column("arm", key=True, filter=True),
        Column("model", filter=True),
        Column("effort"),
        Column("mode"),
        Column("prompt style"),
        Column("cutoff"),
        *(
            Column(name, numeric=True)
            for name in ("passes", "rate", "95% CI", f"pass@{k}", f"pass^{k}", "score")
        ),
        *(Column(name, numeric=True) for name in ("grader failures", "missing", "invalid", "infra errors")),
        *(Column(name, numeric=True) for name in ("cost", "turns")),
        Column("harness"),
    ]
    rows = [
        [
            r.task,
            r.arm,
            r.model,
            r.effort or "default",
            r.mode or "-",
            r.prompt_style or "-",
            r.cutoff or "-",
            Td(f"{r.passes}/{r.gated}", sort=_attr(r.pass_rate)) if r.gated else "-",
            _fmt(r.pass_rate),
            _ci(r.pass_ci),
            _fmt(r.pass_at_k),
            _fmt(r.pass_hat_k),
            _fmt(r.score_mean),
            str(r.grader_failures),
            str(r.missing),
            str(r.invalid),
            str(r.infra_errors),
            _fmt(r.cost_mean, 4),
            _fmt(r.turns_mean, 1),
            ", ".join(r.harness_versions),
        ]
        for r in doc.rows
    ]
    return table(columns, rows, css="tasks")


# --- compare -----------------------------------------------------------------------------------------------


def _delta_chart(measure: Measure) -> str:
    """One horizontal bar per task: its delta; the mean delta as a line and its 95% interval as a band."""
    values = [v.delta for v in measure.per_task]
    extent = max([1e-9, *(abs(v) for v in values), *(abs(x) for x in (measure.ci or ()))])
    if measure.kind in ("gate",):
        extent = max(extent, 1.0)
    row_h, left, right, top = 20, 180, 24, 12
    width = 640
    height = top + row_h * len(values) + 30
    plot_w = width - left - right
    zero = left + plot_w / 2

    def x_of(v: float) -> float:
        return zero + (v / extent) * (plot_w / 2)

    out = [
        f'<svg class="chart deltas" width="{width}" height="{height}" viewBox="0 0 {width} {height}" '
        f'data-measure="{_attr(measure.name)}">'
    ]
    bottom = top + row_h * len(values)
    if measure.ci is not None:
        lo, hi = x_of(measure.ci[0]), x_of(measure.ci[1])
        out.append(
            f'<rect class="band" x="{min(lo, hi):.1f}" y="{top}" width="{abs(hi - lo):.1f}" '
            f'height="{bottom - top}" data-lo="{_attr(measure.ci[0])}" data-hi="{_attr(measure.ci[1])}"/>'
        )
    for i, value in enumerate(measure.per_task):
        y = top + row_h * i
        x0, x1 = sorted((zero, x_of(value.delta)))
        kind = "up" if value.delta > 0 else "down" if value.delta < 0 else "tied"
        width_bar = max(x1 - x0, 1.5)
        out.append(
            f'<rect class="delta {kind}" x="{x0:.1f}" y="{y + 3}" width="{width_bar:.1f}" '
            f'height="{row_h - 6}" '
            f'data-task="{_attr(value.task)}" data-delta="{_attr(value.delta)}">'
            f"<title>{escape(value.task)}: {value.baseline:.3f} -> {value.treatment:.3f} "
            f"({value.delta:+.3f})</title></rect>"
            f'<text x="{left - 8}" y="{y + row_h - 6}" text-anchor="end">{escape(value.task)}</text>'
        )
    out.append(f'<line class="axis" x1="{zero:.1f}" x2="{zero:.1f}" y1="{top}" y2="{bottom}"/>')
    if measure.delta is not None:
        xm = x_of(measure.delta)
        out.append(
            f'<line class="mean" x1="{xm:.1f}" x2="{xm:.1f}" y1="{top}" y2="{bottom}" '
            f'data-delta="{_attr(measure.delta)}"/>'
        )
    out.append(
        f'<text x="{left}" y="{bottom + 18}">{-extent:+.2f}</text>'
        f'<text x="{zero:.1f}" y="{bottom + 18}" text-anchor="middle">0</text>'
        f'<text x="{width - right}" y="{bottom + 18}" text-anchor="end">{extent:+.2f}</text>'
    )
    out.append("</svg>")
    return "".join(out)


def _comparison_title(c: Comparison) -> str:
    parts = [f"{c.treatment} vs {c.baseline}", c.models_text()]
    if c.mode:
        parts.append(f"mode {c.mode}")
    if c.prompt_style:
        parts.append(f"prompt {c.prompt_style}")
    return ", ".join(parts)


def _p(value: float | None) -> str:
    return "-" if value is None else f"{value:.4g}"


def _heat_color(value: float) -> str:
    """White (0) to blue (1): the share of passing cells of one task in one arm."""
    v = min(1.0, max(0.0, value))
    r, g, b = (round(255 - (255 - 79) * v), round(255 - (255 - 124) * v), 255)
    return f"rgb({r},{g},{b})"


def _panels(doc: CompareDoc) -> dict[str, list[Comparison]]:
    """Comparisons grouped by what they hold constant (model, effort, mode)."""
    panels: dict[str, list[Comparison]] = defaultdict(list)
    for c in doc.comparisons:
        title = c.models_text() + (f", mode {c.mode}" if c.mode else "")
        panels[title].append(c)
    return panels


def _gate(c: Comparison) -> Measure | None:
    return next((m for m in c.measures if m.kind == "gate"), None)


def _heatmap(comparisons: Sequence[Comparison]) -> str:
    """Task x arm: each task's share of passing cells in each arm (the baseline first), from the gate
    measure's per-task values."""
    arms: list[str] = []
    values: dict[tuple[str, str], float] = {}
    for c in comparisons:
        gate = _gate(c)
        if gate is None:
            continue
        for arm in (c.baseline, c.treatment):
            if arm not in arms:
                arms.append(arm)
        for v in gate.per_task:
            values[(v.task, c.baseline)] = v.baseline
            values[(v.task, c.treatment)] = v.treatment
    tasks = sorted({task for task, _ in values})
    if not tasks:
        return ""
    head = "<th>task</th>" + "".join(f"<th>{escape(a)}</th>" for a in arms)
    rows = []
    for task in tasks:
        cells = [f"<td>{escape(task)}</td>"]
        for arm in arms:
            value = values.get((task, arm))
            if value is None:
                cells.append('<td class="heat muted">-</td>')
                continue
            color = _heat_color(value)
            cells.append(
                f'<td class="heat" style="background:{color}" data-task="{_attr(task)}" '
                f'data-arm="{_attr(arm)}" data-value="{_attr(value)}">{value:.2f}</td>'
            )
        rows.append("<tr>" + "".join(cells) + "</tr>")
    return (
        '<div class="scroll"><table class="heatmap"><thead><tr>'
        + head
        + "</tr></thead><tbody>"
        + "".join(rows)
        + "</tbody></table></div>"
    )


def _forest(comparisons: Sequence[Comparison]) -> str:
    """One row per treatment arm: its mean per-task gate delta (a point) and 95% interval (a line), against
    a dashed zero."""
    rows = [
        (c.treatment, m) for c in comparisons for m in [_gate(c)] if m is not None and m.delta is not None
    ]
    if not rows:
        return ""
    extent = float(max([0.25, *(abs(x) for _, m in rows for x in (m.delta or 0.0, *(m.ci or ())))]))
    width, left, right, top, row_h = 640, 200, 24, 12, 26
    height = top + row_h * len(rows) + 30
    plot_w = width - left - right
    zero = left + plot_w / 2

    def x_of(v: float) -> float:
        return zero + (v / extent) * (plot_w / 2)

    bottom = top + row_h * len(rows)
    out = [
        f'<svg class="chart forest" width="{width}" height="{height}" viewBox="0 0 {width} {height}" '
        'role="img">',
        f'<line class="zero" x1="{zero:.1f}" x2="{zero:.1f}" y1="{top}" y2="{bottom}"/>',
    ]
    for i, (arm, m) in enumerate(rows):
        y = top + row_h * i + row_h / 2
        assert m.delta is not None
        if m.ci is not None:
            out.append(
                f'<line class="forest-ci" x1="{x_of(m.ci[0]):.1f}" x2="{x_of(m.ci[1]):.1f}" '
                f'y1="{y:.1f}" y2="{y:.1f}" data-arm="{_attr(arm)}" data-lo="{_attr(m.ci[0])}" '
                f'data-hi="{_attr(m.ci[1])}"/>'
            )
        out.append(
            f'<circle class="forest-point" cx="{x_of(m.delta):.1f}" cy="{y:.1f}" r="5" '
            f'data-arm="{_attr(arm)}" data-delta="{_attr(m.delta)}">'
            f"<title>{escape(arm)}: {m.delta:+.3f}, 95% {_ci(m.ci)}</title>"
            "</circle>"
            f'<text x="{left - 10}" y="{y + 4:.1f}" text-anchor="end">{escape(arm)}</text>'
        )
    out.append(
        f'<text x="{left}" y="{bottom + 18}">{-extent:+.2f}</text>'
        f'<text x="{zero:.1f}" y="{bottom + 18}" text-anchor="middle">0</text>'
        f'<text x="{width - right}" y="{bottom + 18}" text-anchor="end">{extent:+.2f}</text>'
    )
    out.append("</svg>")
    return "".join(out)


def render_compare(doc: CompareDoc) -> str:
    """The compare page: selectors with their batches and pins, then per comparison a table of measures and a
    per-task delta chart for the gate and score measures."""
    body = ["<h1>dokimi compare</h1>", *dry_run_banner(doc.dry_run)]
    rows = []
    for s in doc.selectors:
        for b in s.batches:
            pin = b.pin
            rows.append(
                [
                    s.label,
                    s.role,
                    b.name,
                    "-" if pin is None else (pin.tree[:12] if pin.tree else "(working tree)"),
                    "-" if pin is None else pin.eval_dir_digest,
                    "-" if pin is None else f"{pin.image} ({pin.image_pin.value})",
                    ", ".join(b.harness_versions),
                    "dry run" if b.dry_run else "real",
                    str(b.cells),
                ]
            )
    body.append("<h2>Selectors</h2>")
    body.append(
        table(
            [
                Column("selector", key=True),
                Column("role", key=True),
                Column("batch", key=True),
                Column("tree", key=True),
                Column("eval_dir", key=True, wrap=True, digest=True),
                Column("image", key=True, wrap=True, digest=True),
                Column("harness", key=True),
                Column("run", key=True),
                Column("cells", numeric=True, key=True),
            ],
            rows,
        )
    )
    body += _warnings(doc.warnings)
    body.append(
        '<p class="muted">One value per task and arm (the mean over its cells); deltas are treatment minus '
        "baseline over paired tasks. p: two-sided sign-flip permutation; "
        f"Holm over {doc.holm_family} gate and "
        "score comparisons; cost, turns and metrics are descriptive.</p>"
    )
    for panel, comparisons in _panels(doc).items():
        heat, forest = _heatmap(comparisons), _forest(comparisons)
        if not heat and not forest:
            continue
        body.append(f'<section class="overview" data-panel="{_attr(panel)}"><h2>{escape(panel)}</h2>')
        if heat:
            body.append(
                "<h3>Pass share per task and arm</h3>"
                '<p class="muted">Each task\'s share of passing cells in each arm (the mean of its reps).</p>'
            )
            body.append(heat)
        if forest:
            body.append(
                "<h3>Gate delta per arm against the baseline</h3>"
                '<p class="muted">Point: the mean per-task delta; line: its 95% interval over tasks.</p>'
            )
            body.append(forest)
        body.append("</section>")
    for c in doc.comparisons:
        title = _comparison_title(c)
        body.append(
            f'<section class="comparison" data-treatment="{_attr(c.treatment)}"><h2>{escape(title)}</h2>'
        )
        body.append(
            _table(
                [
                    "measure",
                    "tasks",
                    "baseline",
                    "treatment",
                    "delta",
                    "95% CI",
                    "up",
                    "down",
                    "tied",
                    "p",
                    "p (Holm)",
                    "n base",
                    "n treat",
                ],
                [
                    [
                        m.name,
                        str(m.tasks),
                        _fmt(m.baseline_mean),
                        _fmt(m.treatment_mean),
                        _fmt(m.delta),
                        _ci(m.ci),
                        str(m.up),
                        str(m.down),
                        str(m.tied),
                        _p(m.p),
                        _p(m.p_holm),
                        str(m.n_baseline),
                        str(m.n_treatment),
                    ]
                    for m in c.measures
                ],
                numeric=range(1, 13),
            )
        )
        for m in c.measures:
            if m.kind in ("gate", "score") and m.per_task:
                body.append(f"<h3>Per-task {escape(m.name)} delta</h3>")
                body.append(_delta_chart(m))
        if c.infra_baseline or c.infra_treatment:
            body.append(f'<p class="muted" data-infra-p="{_attr(c.infra_p)}">{escape(infra_line(c))}</p>')
        if c.unpaired:
            body.append("<h3>Unpaired tasks</h3>")
            body.append(
                _table(["task", "measure", "reason"], [[u.task, u.measure, u.reason] for u in c.unpaired])
            )
        body.append("</section>")
    return _page("dokimi compare", body)
