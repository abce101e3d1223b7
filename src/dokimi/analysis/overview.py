"""The report site's first screen: does the guidance help?

For each compared pair of arms of the batch (every arm against the baseline, per model, effort and mode, as
``repo compare BATCH --baseline ARM`` compares them):

- the verdict of the gate: the mean per-task delta with its 95% interval over tasks, the paired sign-flip
  test and its power verdict (:func:`dokimi.analysis.compare.power_verdict`);
- every task's delta with an interval: each arm's passes over its gated cells, and Newcombe's interval of
  the difference (:func:`dokimi.stats.newcombe_interval`, cells of one task taken as independent trials: the
  interval of one task's difference, not of the arm's effect), drawn as a small forest;
- pass@k and pass^k of both arms.

Beside them: the guidance each arm's agents really started with (meta.json, as the text report's
"guidance at the agent's start"), and cost beside pass rate: a scatter of each arm's mean cost per cell
against its pass rate (inline SVG) and a table with pass@k, pass^k and tokens per cell.

Pure rendering of documents (repo_report.v1, repo_compare.v1) and the batch's result.json files; every
name is escaped.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Sequence
from html import escape

from dokimi import stats
from dokimi.analysis.compare import power_verdict, tasks_text
from dokimi.analysis.html import Column, Td, _attr, _ci, _fmt, table
from dokimi.analysis.tokens import cell_tokens
from dokimi.batch import Batch
from dokimi.schemas.compare import CompareDoc, Comparison, Measure
from dokimi.schemas.report import ArmGuidance, ArmSummary, ReportDoc

__all__ = ["OVERVIEW_CSS", "render_overview"]

OVERVIEW_CSS = """
.overview .grid{display:grid;grid-template-columns:minmax(0,1.2fr) minmax(0,1fr);gap:8px 28px;
align-items:start}
.overview table{font-size:13px}.overview th,.overview td{padding:3px 7px}
@media (max-width:1000px){.overview .grid{grid-template-columns:minmax(0,1fr)}}
.overview h2{margin-top:14px}.overview h3{margin-top:10px}
article.comparison{border:1px solid #dde1e8;border-radius:6px;padding:4px 14px 8px;margin:0 0 14px}
p.verdict{margin:4px 0}.verdict b{font-size:15px}
svg.mini line.zero{stroke:#98a2b3}svg.mini line.task-ci{stroke:#1d2330;stroke-width:1.5}
svg.mini circle.up{fill:#12b76a}svg.mini circle.down{fill:#f04438}svg.mini circle.tied{fill:#98a2b3}
svg.scatter circle{fill:#4f7cff}svg.scatter line.rate-ci{stroke:#1d2330}
"""

_MINI_W, _MINI_H = 100, 16


def _mini_forest(delta: float, ci: tuple[float, float] | None, task: str) -> str:
    """A task's delta on [-1, 1] (a point) and its interval (a line), for a table cell."""

    def x(v: float) -> float:
        return 6 + (max(-1.0, min(1.0, v)) + 1) / 2 * (_MINI_W - 12)

    kind = "up" if delta > 0 else "down" if delta < 0 else "tied"
    mid = _MINI_H / 2
    line = ""
    if ci is not None:
        line = (
            f'<line class="task-ci" x1="{x(ci[0]):.1f}" x2="{x(ci[1]):.1f}" y1="{mid}" y2="{mid}" '
            f'data-lo="{_attr(ci[0])}" data-hi="{_attr(ci[1])}"/>'
        )
    return (
        f'<svg class="mini" width="{_MINI_W}" height="{_MINI_H}" viewBox="0 0 {_MINI_W} {_MINI_H}" '
        f'data-task="{_attr(task)}" data-delta="{_attr(delta)}" role="img">'
        f'<line class="zero" x1="{x(0):.1f}" x2="{x(0):.1f}" y1="1" y2="{_MINI_H - 1}"/>{line}'
        f'<circle class="{kind}" cx="{x(delta):.1f}" cy="{mid}" r="4"/></svg>'
    )


def _counts(doc: ReportDoc, c: Comparison) -> dict[tuple[str, str], tuple[int, int]]:
    """(task, arm) -> (passes, gated cells) in the comparison's model, effort and mode (rows of several
    prompt styles or cutoff sides summed)."""
    found: dict[tuple[str, str], tuple[int, int]] = defaultdict(lambda: (0, 0))
    for row in doc.rows:
        if (row.model, row.effort, row.mode) == (c.model, c.effort, c.mode) and row.arm in (
            c.baseline,
            c.treatment,
        ):
            passes, gated = found[(row.task, row.arm)]
            found[(row.task, row.arm)] = (passes + row.passes, gated + row.gated)
    return found


def _share(passes: int, gated: int) -> Td:
    rate = passes / gated if gated else None
    return Td(f"{passes}/{gated}", sort=_attr(rate))


def _breakable(arm: str) -> str:
    """An arm's name as a column header that may break after its ``:`` (a zero-width space), so two long arm
    names do not widen the table."""
    return arm.replace(":", ":\u200b")


def _gate_rows(doc: ReportDoc, c: Comparison, gate: Measure) -> str:
    counts = _counts(doc, c)
    rows: list[list[str | Td]] = []
    for value in gate.per_task:
        pb, nb = counts.get((value.task, c.baseline), (0, 0))
        pt, nt = counts.get((value.task, c.treatment), (0, 0))
        interval = stats.newcombe_interval(pb, nb, pt, nt)
        rows.append(
            [
                value.task,
                _share(pb, nb),
                _share(pt, nt),
                Td(f"{value.delta:+.2f}", sort=_attr(value.delta)),
                "-" if interval is None else f"[{interval[0]:+.2f}, {interval[1]:+.2f}]",
                Td("", html=_mini_forest(value.delta, interval, value.task)),
            ]
        )
    columns = [
        Column("task", key=True, filter=True, wrap=True),
        Column(_breakable(c.baseline), numeric=True, key=True),
        Column(_breakable(c.treatment), numeric=True, key=True),
        Column("delta", numeric=True, key=True),
        Column("95% CI", numeric=True, key=True),
        Column("-1  0  +1", key=True),
    ]
    return table(columns, rows, css="deltas")


def _score_rows(c: Comparison, score: Measure) -> str:
    columns = [
        Column("task", key=True, filter=True, wrap=True),
        Column(_breakable(c.baseline), numeric=True, key=True),
        Column(_breakable(c.treatment), numeric=True, key=True),
        Column("delta", numeric=True, key=True),
    ]
    rows: list[list[str | Td]] = [
        [v.task, _fmt(v.baseline), _fmt(v.treatment), Td(f"{v.delta:+.3f}", sort=_attr(v.delta))]
        for v in score.per_task
    ]
    return table(columns, rows, css="score-deltas")


def _headline(m: Measure) -> str:
    """``gate +0.50 per task, 95% CI [+0.00, +1.00], 2 up / 0 down / 0 tied: <power verdict>``."""
    if m.delta is None:
        return f'<p class="verdict">{escape(m.name)}: no paired task</p>'
    ci = "no interval from one task" if m.ci is None else f"95% CI [{m.ci[0]:+.2f}, {m.ci[1]:+.2f}]"
    return (
        f'<p class="verdict" data-measure="{_attr(m.name)}" data-delta="{_attr(m.delta)}">'
        f"{escape(m.name)}: <b>{m.delta:+.2f}</b> per task ({escape(ci)}; {m.up} up, {m.down} down, "
        f"{m.tied} tied)</p>"
        f'<p class="muted note" data-underpowered="{_attr(m.underpowered)}">{escape(power_verdict(m))}</p>'
    )


def _reliability(c: Comparison) -> str:
    parts = []
    for m in c.measures:
        if m.kind in ("pass_at_k", "pass_hat_k") and m.tasks:
            parts.append(
                f"{m.name} {_fmt(m.baseline_mean, 2)} &rarr; {_fmt(m.treatment_mean, 2)} "
                f"({m.delta:+.2f} over {tasks_text(m.tasks)})"
            )
    return f'<p class="muted note">{"; ".join(parts)}</p>' if parts else ""


def _comparison(doc: ReportDoc, c: Comparison) -> list[str]:
    title = f"{c.treatment} vs {c.baseline}"
    where = f"model {c.model}, effort {c.effort or 'default'}" + (f", mode {c.mode}" if c.mode else "")
    out = [
        f'<article class="comparison" data-treatment="{_attr(c.treatment)}" '
        f'data-baseline="{_attr(c.baseline)}">',
        f'<h3>{escape(title)} <span class="muted note">{escape(where)}</span></h3>',
    ]
    measures = {m.kind: m for m in c.measures}
    gate, score = measures.get("gate"), measures.get("score")
    if gate is not None:
        out.append(_headline(gate))
        if gate.per_task:
            out.append(_gate_rows(doc, c, gate))
    if score is not None:
        out.append(_headline(score))
        if score.per_task:
            out.append(_score_rows(c, score))
    out.append(_reliability(c))
    if c.unpaired:
        left = sorted({u.task for u in c.unpaired if u.measure in ("all", "gate", "score")})
        if left:
            out.append(f'<p class="muted note">not paired: {escape(", ".join(left))}</p>')
    out.append("</article>")
    return out


def _guidance(guidance: Sequence[ArmGuidance]) -> list[str]:
    """Per arm: tasks whose agent started with any guidance file, the distinct files and where they came
    from; the files themselves under the table."""
    if not guidance:
        return ['<p class="muted">no finished cell: nothing known of the guidance</p>']
    rows: list[list[str | Td]] = []
    for g in guidance:
        recorded = f"{g.tasks}" + (f" ({g.cells_unrecorded} cells unrecorded)" if g.cells_unrecorded else "")
        cost = f"{_fmt(g.generation_cost_usd, 4)} ({g.generated_pairs} runs)" if g.generated_pairs else "-"
        rows.append(
            [
                g.arm,
                Td(f"{g.tasks_with_guidance}/{recorded}", sort=str(g.tasks_with_guidance)),
                str(len(g.files)),
                ", ".join(s.split(" ")[0] for s in g.sources) or "base",
                cost,
            ]
        )
    columns = [
        Column("arm", key=True),
        Column("tasks with guidance", numeric=True, key=True),
        Column("distinct files", numeric=True, key=True),
        Column("from", key=True),
        Column("generator cost", numeric=True),
    ]
    out = [table(columns, rows, css="guidance")]
    files = [(g.arm, f) for g in guidance for f in g.files]
    if files:
        listed = "".join(
            f"<li>{escape(arm)}: <code>{escape(f.path)}</code> {escape(f.sha[:12])} ({f.tasks} tasks)</li>"
            for arm, f in files
        )
        out.append(f"<details><summary>the files ({len(files)})</summary><ul>{listed}</ul></details>")
    return out


def _tokens_per_arm(batch: Batch) -> dict[tuple[str, str, str | None], tuple[float, int, bool]]:
    """(arm, model, effort) -> (mean tokens per cell with tokens, cells with tokens, any simulated)."""
    found: dict[tuple[str, str, str | None], list[tuple[int, bool]]] = defaultdict(list)
    for result in batch.results():
        tokens = cell_tokens(result)
        if tokens is not None:
            found[(result.arm, result.model, result.effort)].append(
                (tokens.total, tokens.source == "simulated")
            )
    return {
        key: (sum(t for t, _ in values) / len(values), len(values), any(s for _, s in values))
        for key, values in found.items()
    }


def _label(s: ArmSummary, several_models: bool) -> str:
    return f"{s.arm} ({s.model})" if several_models else s.arm


def _scatter(summaries: Sequence[ArmSummary], several_models: bool, dry_run: bool) -> str:
    """One point per arm: mean cost per cell (x) against pass rate (y), with the rate's Wilson interval."""
    points = [s for s in summaries if s.gated and s.pass_rate is not None]
    if not points:
        return '<p class="muted">no gated cell: no pass rate to plot</p>'
    costs = [s.cost_mean for s in points if s.cost_mean is not None]
    top = max([*costs, 0.0]) * 1.15 or 1.0
    width, height, left, right, bottom, top_pad = 460, 250, 52, 20, 40, 22
    plot_w, plot_h = width - left - right, height - bottom - top_pad

    def x(cost: float) -> float:
        return left + cost / top * plot_w

    def y(rate: float) -> float:
        return top_pad + (1 - rate) * plot_h

    out = [
        f'<svg class="chart scatter" width="{width}" height="{height}" viewBox="0 0 {width} {height}" '
        'role="img">'
    ]
    for tick in (0.0, 0.5, 1.0):
        out.append(
            f'<line class="grid" x1="{left}" x2="{width - right}" y1="{y(tick):.1f}" y2="{y(tick):.1f}"/>'
            f'<text x="{left - 6}" y="{y(tick) + 4:.1f}" text-anchor="end">{tick:.1f}</text>'
        )
    out.append(f'<line class="axis" x1="{left}" x2="{left}" y1="{top_pad}" y2="{top_pad + plot_h}"/>')
    out.append(
        f'<line class="axis" x1="{left}" x2="{width - right}" y1="{top_pad + plot_h}" '
        f'y2="{top_pad + plot_h}"/>'
    )
    out.append(f'<text x="{left}" y="{height - 22}">0</text>')
    out.append(f'<text x="{width - right}" y="{height - 22}" text-anchor="end">${top:.4f}</text>')
    axis = "mean cost per cell (USD)" + (": a dry run costs nothing" if dry_run else "")
    out.append(
        f'<text x="{left + plot_w / 2:.1f}" y="{height - 6}" text-anchor="middle">{escape(axis)}</text>'
    )
    for s in points:
        assert s.pass_rate is not None
        if s.cost_mean is None:
            continue
        cx, cy = x(s.cost_mean), y(s.pass_rate)
        label = _label(s, several_models)
        if s.pass_ci is not None:
            out.append(
                f'<line class="rate-ci" x1="{cx:.1f}" x2="{cx:.1f}" y1="{y(s.pass_ci[0]):.1f}" '
                f'y2="{y(s.pass_ci[1]):.1f}"/>'
            )
        out.append(
            f'<circle cx="{cx:.1f}" cy="{cy:.1f}" r="5" data-arm="{_attr(s.arm)}" '
            f'data-model="{_attr(s.model)}" '
            f'data-cost="{_attr(s.cost_mean)}" data-rate="{_attr(s.pass_rate)}">'
            f"<title>{escape(label)}: pass rate {_fmt(s.pass_rate)}, cost {_fmt(s.cost_mean, 4)}"
            "</title></circle>"
            + (
                f'<text x="{cx - 8:.1f}" y="{cy - 6:.1f}" text-anchor="end">{escape(label)}</text>'
                if cx > left + plot_w / 2
                else f'<text x="{cx + 8:.1f}" y="{cy - 6:.1f}">{escape(label)}</text>'
            )
        )
    out.append("</svg>")
    unknown = [s for s in points if s.cost_mean is None]
    if unknown:
        names = ", ".join(_label(s, several_models) for s in unknown)
        out.append(f'<p class="muted note">no cell reports a cost: {escape(names)}</p>')
    return "".join(out)


def _cost_table(doc: ReportDoc, batch: Batch, several_models: bool) -> str:
    tokens = _tokens_per_arm(batch)
    k = doc.k
    rows: list[list[str | Td]] = []
    for s in doc.arms:
        mean_tokens, with_tokens, simulated = tokens.get((s.arm, s.model, s.effort), (0.0, 0, False))
        token_text = "-" if not with_tokens else f"{mean_tokens:,.0f}" + ("*" if simulated else "")
        rows.append(
            [
                _label(s, several_models),
                Td(f"{_fmt(s.pass_rate, 2)} {_ci(s.pass_ci, 2)}", sort=_attr(s.pass_rate)),
                _fmt(s.pass_at_k, 2),
                _fmt(s.pass_hat_k, 2),
                _fmt(s.cost_mean, 4),
                Td(token_text, sort=_attr(mean_tokens if with_tokens else None)),
                str(s.infra_errors),
            ]
        )
    columns = [
        Column("arm", key=True),
        Column("pass rate [95% CI]", numeric=True, key=True),
        Column(f"pass@{k}", numeric=True, key=True),
        Column(f"pass^{k}", numeric=True, key=True),
        Column("cost / cell", numeric=True, key=True),
        Column("tokens / cell", numeric=True, key=True),
        Column("infra errors", numeric=True),
    ]
    return table(columns, rows, css="costs")


def render_overview(doc: ReportDoc, comparison: CompareDoc | None, batch: Batch) -> list[str]:
    """The first screen (see the module docstring)."""
    several_models = len({s.model for s in doc.arms}) > 1
    main: list[str] = []
    if comparison is None or not comparison.comparisons:
        main.append(
            '<p class="muted">One arm only: nothing to compare. Run the batch with a second arm '
            "(<code>--arm guidance:none,guidance:raw</code>) to see whether the guidance helps.</p>"
        )
    else:
        base = comparison.comparisons[0].baseline
        main.append(
            f'<p class="muted note">Every arm against <b>{escape(base)}</b>, tasks as the unit: the delta of '
            "each task's pass share, its interval (Newcombe, the task's cells as independent trials) and the "
            "paired test over tasks.</p>"
        )
        for c in comparison.comparisons:
            main += _comparison(doc, c)
    side = [
        '<h3 id="guidance">Guidance at the agent\'s start</h3>',
        *_guidance(doc.guidance),
        '<h3 id="cost">Cost and pass rate per arm</h3>',
        _scatter(doc.arms, several_models, doc.dry_run),
        _cost_table(doc, batch, several_models),
        f'<p class="muted note">pass@{doc.k}: some of {doc.k} attempts passes; pass^{doc.k}: all {doc.k} do '
        "(mean over tasks). Tokens: the model gateway's count; * simulated (a dry run's scripted usage).</p>",
    ]
    return [
        '<section class="overview" id="answer"><h2>Does the guidance help?</h2><div class="grid">',
        '<div class="main">',
        *main,
        '</div><div class="side">',
        *side,
        "</div></div></section>",
    ]
