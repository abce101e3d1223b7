"""``repo report --html DIR``: the report as a small static site, one directory that can be zipped.

- ``DIR/index.html`` (or the ``.html`` file named): the report page (:mod:`dokimi.analysis.html`), opening
  with the answer to "does the guidance help?" (:mod:`dokimi.analysis.overview`), and a table of every cell
  (sortable, filterable by task, arm, model and outcome) linking to its page;
- ``cells/<cell>.html`` beside it: one page per cell, with the previous and next cell a click away: its
  outcome, cost, tokens and timings, the agent's diff, the tests the task names (FAIL_TO_PASS and
  PASS_TO_PASS) each with its outcome, the prompt, the transcript (every event: commands with their output,
  reads, edits, tools), the final answer, the grade (grade.json and the grader's output, each labelled), and
  the mergeability verdict (the judge's rubric rows, scope, test integrity).

No server, no external asset: inline CSS, inline SVG and dokimi's one table script, allowed by hash alone
(:func:`dokimi.analysis.html.page`). Every file of a cell directory was written by an agent or a grader, so it
is hostile: it is read without following links and up to a size cap (:mod:`dokimi.safefs`), shown escaped and
never rendered (a prompt's Markdown stays text), and a file that cannot be read says why instead of failing
the site.
"""

from __future__ import annotations

import json
import re
from collections.abc import Sequence
from html import escape
from pathlib import Path
from typing import Any

from dokimi.analysis.compare import batch_selections, build_comparison
from dokimi.analysis.html import Column, Td, _fmt, dry_run_banner, page, render_report, table
from dokimi.analysis.overview import OVERVIEW_CSS, render_overview
from dokimi.analysis.tokens import cell_tokens
from dokimi.batch import Batch, Cell
from dokimi.errors import DokimiError
from dokimi.grading.verdict import read_cell
from dokimi.repo.builtin_graders import named_test_outcomes
from dokimi.rundir import (
    ANSWER_TXT,
    BUILTIN_PREPARE_LOGS,
    BUILTIN_TESTS,
    EVENTS_JSONL,
    GRADE_JSON,
    MERGE_JSON,
    META_JSON,
    TASK_JSON,
    WORKSPACE_DIFF,
    RunDir,
    entry_stderr,
    entry_stdout,
)
from dokimi.safefs import read_bytes
from dokimi.schemas._base import load_json, make_output_dir, write_output, write_text_atomic
from dokimi.schemas.compare import CompareDoc
from dokimi.schemas.report import ReportDoc

__all__ = ["cell_page_name", "report_comparison", "write_report_site"]

#: The most of one file a cell page shows (the rest is cut, and the page says so).
SHOW_LIMIT = 256 * 1024
#: The most of one file read at all.
READ_LIMIT = 16 * 1024 * 1024
#: The most of one event's output shown.
EVENT_OUTPUT_LIMIT = 8 * 1024

_SITE_CSS = """
pre{background:#f6f8fa;border:1px solid #dde1e8;padding:8px;overflow-x:auto;white-space:pre-wrap;
word-break:break-word;font:12px/1.4 ui-monospace,SFMono-Regular,Menlo,monospace;max-height:600px;
overflow-y:auto;margin:4px 0}
.diff .add{color:#0a7a3d}.diff .del{color:#b42318}.diff .hunk{color:#6941c6}
nav{margin-bottom:12px;display:flex;gap:18px;flex-wrap:wrap}
dl{display:grid;grid-template-columns:max-content auto;gap:2px 14px}dt{color:#667085}
table.events{width:100%}table.events td:nth-child(4){white-space:normal;width:100%}
.output h3{font-size:13px;margin:12px 0 2px;font-family:ui-monospace,SFMono-Regular,Menlo,monospace}
"""


def cell_page_name(cell: Cell) -> str:
    """The page of a cell, under ``cells/``: its batch-relative path with ``/`` as ``--`` (the parts are
    already file-name safe: dokimi.batch.slug)."""
    safe = re.sub(r"[^A-Za-z0-9._=+-]", "_", cell.rel.replace("/", "--"))
    return f"{safe}.html"


def _page(title: str, body: list[str]) -> str:
    return page(title, body, css=OVERVIEW_CSS + _SITE_CSS)


def report_comparison(doc: ReportDoc, batch: Batch, baseline: str | None = None) -> CompareDoc | None:
    """Every arm of the batch against ``baseline`` (default guidance:none, else the first arm), as
    ``repo compare BATCH --baseline ARM`` compares them, with the report's k; None with one arm."""
    selections = batch_selections(batch, baseline)
    return build_comparison(selections, k=doc.k) if selections else None


def write_report_site(doc: ReportDoc, batch: Batch, index: Path, *, baseline: str | None = None) -> Path:
    """Write the site: the report at ``index`` (``<dir>/index.html`` when ``index`` is a directory), its cell
    pages in ``cells/`` beside it. Returns the index page's path."""
    if index.suffix.lower() not in (".html", ".htm"):
        index = index / "index.html"
    cells = sorted((c for c in batch.cells if c.status != "missing"), key=lambda c: c.rel)
    pages = {cell.rel: cell_page_name(cell) for cell in cells}
    overview = render_overview(doc, report_comparison(doc, batch, baseline), batch)
    report = render_report(doc, overview=overview, tail=_cells_table(cells, pages), page=_page)
    write_output(index, report)  # first: a path that cannot be written fails before any cell page
    cells_dir = index.parent / "cells"
    make_output_dir(cells_dir)
    for i, cell in enumerate(cells):
        before = pages[cells[i - 1].rel] if i > 0 else None
        after = pages[cells[i + 1].rel] if i + 1 < len(cells) else None
        write_text_atomic(cells_dir / pages[cell.rel], _cell_page(cell, before, after))
    return index


def _cell_page(cell: Cell, before: str | None, after: str | None) -> str:
    """A cell's page; a cell whose evidence cannot be read at all gets a page that says why, and the rest of
    the site is written as usual."""
    try:
        return render_cell(cell, before, after)
    except (DokimiError, OSError, ValueError, RecursionError) as exc:
        title = f"cell {cell.rel}"
        why = f"this cell's evidence could not be read: {type(exc).__name__}: {exc}"
        body = [_nav(before, after), f"<h1>{escape(title)}</h1>", f'<p class="fail">{escape(why[:2000])}</p>']
        return _page(title, body)


def _mark(cell: Cell) -> tuple[str, str]:
    """(css class, word) of a cell's outcome."""
    result = cell.result
    if cell.status != "finished" or result is None:
        return "other", cell.status.replace("_", " ")
    if result.grader_failure:
        return "other", "grader failure"
    if result.gated:
        return ("pass", "pass") if read_cell(result).passed else ("fail", "fail")
    return "other", f"score {_fmt(result.score)}"


def _cells_table(cells: Sequence[Cell], pages: dict[str, str]) -> list[str]:
    """One row per cell with a link to its page; sortable, and filterable by task, arm, model and outcome."""
    rows: list[list[str | Td]] = []
    simulated = False
    for cell in cells:
        css, word = _mark(cell)
        result = cell.result
        key = cell.key
        task, arm, model, effort = (
            (key.task, key.arm, key.model, key.effort or "default")
            if key is not None
            else (cell.rel.split("/")[0], "-", "-", "-")
        )
        label = cell.rel.rsplit("/", 1)[-1]
        href = escape(f"cells/{pages[cell.rel]}", quote=True)
        tokens = cell_tokens(result) if result is not None else None
        simulated = simulated or (tokens is not None and tokens.source == "simulated")
        rows.append(
            [
                Td(label, html=f'<a class="cell" href="{href}">{escape(label)}</a>', sort=cell.rel),
                task,
                arm,
                model,
                effort,
                Td(word, html=f'<span class="{css}">{escape(word)}</span>'),
                _fmt(result.cost_usd, 4) if result is not None else "-",
                Td(
                    "-"
                    if tokens is None
                    else f"{tokens.total:,}" + ("*" if tokens.source == "simulated" else ""),
                    sort="" if tokens is None else str(tokens.total),
                ),
                "-" if result is None or result.turns is None else str(result.turns),
                _fmt(result.duration_s, 1) if result is not None else "-",
            ]
        )
    columns = [
        Column("cell", key=True),
        Column("task", filter=True),
        Column("arm", filter=True),
        Column("model", filter=True),
        Column("effort"),
        Column("outcome", filter=True),
        Column("cost", numeric=True),
        Column("tokens", numeric=True),
        Column("turns", numeric=True),
        Column("duration (s)", numeric=True),
    ]
    return [
        '<h2 id="cells">Cells</h2>',
        '<p class="muted">Each cell opens its diff, tests, prompt, transcript, answer, grade and verdict. '
        "Click a header to sort; choose a value above the table to filter."
        + (" * simulated tokens (a dry run's scripted usage)." if simulated else "")
        + "</p>",
        table(columns, rows, css="cells"),
    ]


# --- one cell -----------------------------------------------------------------------------------------------


def _read(cell_dir: Path, name: str) -> tuple[str | None, str | None]:
    """(text, problem) of a file of the cell: the text (cut at :data:`SHOW_LIMIT`, with a note) or why it
    is not shown; (None, None) when the file is absent."""
    try:
        data = read_bytes(cell_dir / name, trusted=cell_dir, limit=READ_LIMIT)
    except FileNotFoundError:
        return None, None
    except (DokimiError, OSError) as exc:
        return None, f"{name} is not shown: {exc}"
    text = data.decode("utf-8", "replace")
    if len(text) > SHOW_LIMIT:
        return text[:SHOW_LIMIT], f"{name}: the first {SHOW_LIMIT} of {len(text)} characters are shown"
    return text, None


def _pre(text: str, css: str = "") -> str:
    return f'<pre class="{css}">{escape(text)}</pre>' if css else f"<pre>{escape(text)}</pre>"


def _section(title: str, anchor: str, content: list[str]) -> list[str]:
    return [f'<h2 id="{anchor}">{escape(title)}</h2>', *content]


def _file_block(cell_dir: Path, name: str, *, css: str = "", missing: str = "none") -> list[str]:
    text, problem = _read(cell_dir, name)
    out = [f'<p class="muted">{escape(problem)}</p>'] if problem else []
    if text is None:
        return out or [f'<p class="muted">{escape(name)}: {escape(missing)}</p>']
    if css == "diff":
        return [*out, _diff(text)]
    return [*out, _pre(text, css)]


def _diff(text: str) -> str:
    lines = []
    for line in text.splitlines():
        css = (
            "hunk"
            if line.startswith("@@")
            else "add"
            if line.startswith("+") and not line.startswith("+++")
            else "del"
            if line.startswith("-") and not line.startswith("---")
            else ""
        )
        lines.append(f'<span class="{css}">{escape(line)}</span>' if css else escape(line))
    return '<pre class="diff">' + "\n".join(lines) + "</pre>"


def _json_block(cell_dir: Path, name: str) -> tuple[Any, list[str]]:
    text, problem = _read(cell_dir, name)
    notes = [f'<p class="muted">{escape(problem)}</p>'] if problem else []
    if text is None:
        return None, notes or [f'<p class="muted">no {escape(name)}</p>']
    try:
        data = load_json(text)
    except ValueError as exc:
        return None, [
            *notes,
            f'<p class="muted">{escape(name)} is not JSON ({escape(str(exc))})</p>',
            _pre(text),
        ]
    return data, [*notes, _pre(json.dumps(data, indent=2, sort_keys=True, ensure_ascii=False))]


def _dl(items: list[tuple[str, str]]) -> str:
    return "<dl>" + "".join(f"<dt>{escape(k)}</dt><dd>{escape(v)}</dd>" for k, v in items) + "</dl>"


def _outcome(cell: Cell) -> list[str]:
    css, word = _mark(cell)
    result = cell.result
    out = [f'<p>outcome: <span class="{css}" id="outcome">{escape(word)}</span></p>']
    if result is None:
        if cell.error:
            out.append(f'<p class="muted">{escape(cell.error)}</p>')
        return out
    tokens = cell_tokens(result)
    items = [
        ("task", result.task),
        ("arm", result.arm),
        ("model", result.model),
        ("effort", result.effort or "default"),
        ("mode", result.mode or "-"),
        ("rep", str(result.rep)),
        ("harness", f"{result.harness} {result.harness_version}"),
        ("cost (USD)", _fmt(result.cost_usd, 6) + (" (dry run: nothing paid)" if result.dry_run else "")),
        *([("simulated cost (USD)", _simulated(result.simulated.cost_usd))] if result.simulated else []),
        ("tokens", "not recorded (no model gateway, and no dry run)" if tokens is None else tokens.label()),
        ("turns", "-" if result.turns is None else str(result.turns)),
        ("duration (s)", _fmt(result.duration_s, 1)),
        ("agent exit code", "-" if result.agent_rc is None else str(result.agent_rc)),
        ("agent timed out", "yes" if result.agent_timed_out else "no"),
        ("score", _fmt(result.score)),
        ("grader error", result.grader_error or "-"),
    ]
    if result.infra_error:
        items.append(("infrastructure error", result.infra_error_reason or "yes"))
    gates = ", ".join(f"{k}: {v}" for k, v in sorted(result.gate_results.items())) or "-"
    metrics = ", ".join(f"{k}={v}" for k, v in sorted(result.metrics.items())) or "-"
    items += [("gates", gates), ("metrics", metrics)]
    return [*out, _dl(items)]


def _named_tests(task: Any, grade: Any) -> list[str]:
    """The FAIL_TO_PASS and PASS_TO_PASS tests task.json names, each with its outcome in this cell."""
    if not isinstance(task, dict):
        return ['<p class="muted">no readable task.json: the tests it names are unknown</p>']
    found = named_test_outcomes(task, grade if isinstance(grade, dict) else None)
    if not found:
        return [
            '<p class="muted">task.json names no FAIL_TO_PASS or PASS_TO_PASS test: the grader decides '
            "from its own tests (grade.json below)</p>"
        ]
    rows: list[list[str | Td]] = []
    for which, test, outcome in found:
        css = (
            "pass"
            if outcome == "passed"
            else "fail"
            if outcome in ("failed", "not run", "error")
            else "other"
        )
        rows.append([which, test, Td(outcome, html=f'<span class="{css}">{escape(outcome)}</span>')])
    counts = {
        which: (
            sum(1 for w, _, o in found if w == which and o == "passed"),
            sum(1 for w, _, _ in found if w == which),
        )
        for which in ("FAIL_TO_PASS", "PASS_TO_PASS")
    }
    summary = ", ".join(
        f"{which} {passed}/{total} passed" for which, (passed, total) in counts.items() if total
    )
    columns = [
        Column("list", filter=True),
        Column("test", key=True, wrap=True),
        Column("outcome", filter=True),
    ]
    return [f"<p>{escape(summary)}</p>", table(columns, rows, css="tests")]


def _output(cell_dir: Path, name: str, what: str) -> list[str]:
    """One output file of grading, under its name and what it is: shown, or said to be empty or absent."""
    text, problem = _read(cell_dir, name)
    label = f'<h3>{escape(name)}</h3><p class="muted note">{escape(what)}</p>'
    if problem:
        return [label, f'<p class="muted">{escape(problem)}</p>']
    if text is None:
        return [label, '<p class="muted">absent</p>']
    if not text.strip():
        return [label, f'<p class="muted">empty ({len(text)} characters)</p>']
    return [label, _pre(text)]


def _grader_output(cell_dir: Path) -> list[str]:
    """grade.stdout and grade.stderr, labelled; a built-in grader's prepare step's logs too."""
    out = ['<div class="output">']
    builtin = RunDir(cell_dir).builtin_tests.is_dir() and not RunDir(cell_dir).builtin_tests.is_symlink()
    out += _output(
        cell_dir,
        entry_stdout("grade"),
        "the grader's standard output" + (" (for a built-in grader: the tests')" if builtin else ""),
    )
    out += _output(
        cell_dir,
        entry_stderr("grade"),
        "the grader's standard error"
        + (" (for a built-in grader: the tests' whole output)" if builtin else ""),
    )
    if builtin:
        for log in BUILTIN_PREPARE_LOGS:
            out += _output(cell_dir, f"{BUILTIN_TESTS}/{log}", "the built-in grader's prepare step")
    out.append("</div>")
    return out


def _events(cell_dir: Path) -> list[str]:
    """The transcript: one row per line of events.jsonl (command, read, edit, tool) with its time."""
    text, problem = _read(cell_dir, EVENTS_JSONL)
    out = [f'<p class="muted">{escape(problem)}</p>'] if problem else []
    if text is None:
        return out or ['<p class="muted">no events.jsonl (the agent ran no tool, or the trace was lost)</p>']
    rows = []
    for number, line in enumerate(text.splitlines(), 1):
        if not line.strip():
            continue
        try:
            event = load_json(line)
        except ValueError as exc:  # not JSON, or nested past what dokimi reads: shown as text, cut
            shown_line = line if len(line) <= EVENT_OUTPUT_LIMIT else line[:EVENT_OUTPUT_LIMIT] + " ..."
            rows.append(
                f'<tr><td>{number}</td><td>-</td><td colspan="3"><p class="muted">not an event: '
                f"{escape(str(exc))}</p>{_pre(shown_line)}</td></tr>"
            )
            continue
        if not isinstance(event, dict):
            continue
        kind = str(event.get("kind", "?")) + (" (denied)" if event.get("denied") is True else "")
        when = event.get("t")
        what = str(event.get("text") or event.get("path") or event.get("name") or "")
        rc = event.get("rc")
        detail = event.get("output")
        shown = ""
        if detail is not None:
            detail_text = detail if isinstance(detail, str) else json.dumps(detail, indent=2)
            if len(detail_text) > EVENT_OUTPUT_LIMIT:
                detail_text = detail_text[:EVENT_OUTPUT_LIMIT] + f"\n... ({len(detail_text)} characters)"
            shown = _pre(detail_text)
        rows.append(
            f'<tr class="event {escape(kind, quote=True)}"><td>{number}</td>'
            f"<td>{escape('-' if when is None else str(when))}</td><td>{escape(kind)}</td>"
            f"<td>{_pre(what)}{shown}</td><td>{escape('' if rc is None else str(rc))}</td></tr>"
        )
    head = "<tr><th>#</th><th>t (s)</th><th>kind</th><th>command, path or tool; output</th><th>rc</th></tr>"
    return [*out, f'<table class="events"><thead>{head}</thead><tbody>{"".join(rows)}</tbody></table>']


def _verdict(cell_dir: Path) -> list[str]:
    """merge.json: mergeable, the reasons, and the judge's verdict per rubric item."""
    data, block = _json_block(cell_dir, MERGE_JSON)
    if not isinstance(data, dict):
        return (
            ['<p class="muted">no mergeability verdict (the task has no rubric)</p>']
            if data is None
            else block
        )
    mergeable, score = escape(str(data.get("mergeable"))), escape(str(data.get("merge_score")))
    out = [f"<p>mergeable: {mergeable}, score {score}</p>"]
    reasons = data.get("reasons") or []
    if isinstance(reasons, list) and reasons:
        out.append("<ul>" + "".join(f"<li>{escape(str(r))}</li>" for r in reasons) + "</ul>")
    judge = data.get("judge")
    if isinstance(judge, dict):
        out.append(f"<h3>Judge ({escape(str(judge.get('model')))})</h3>")
        if judge.get("failure"):
            out.append(f'<p class="fail">{escape(str(judge.get("failure")))}</p>')
        rows: list[list[str | Td]] = []
        for item in judge.get("items") or []:
            if isinstance(item, dict):
                verdict = str(item.get("verdict"))
                css = "pass" if verdict == "pass" else "fail" if verdict == "fail" else "other"
                rows.append(
                    [
                        str(item.get("id")),
                        str(item.get("kind")),
                        Td(verdict, css=css),
                        str(item.get("weight")),
                        str(item.get("reason")),
                    ]
                )
        columns = [
            Column("rubric item", key=True),
            Column("kind", key=True),
            Column("verdict", key=True),
            Column("weight", numeric=True, key=True),
            Column("reason", key=True, wrap=True),
        ]
        out.append(table(columns, rows, css="rubric"))
    out.append("<details><summary>merge.json</summary>" + "".join(block) + "</details>")
    return out


def _simulated(cost_usd: float | None) -> str:
    return f"{_fmt(cost_usd, 6)} (the harness's own figure for the scripted answers: never paid)"


def _nav(before: str | None, after: str | None) -> str:
    """The way back to the report and to the previous and next cell (in the order of the cells table)."""
    links = ['<a href="../index.html">report</a>', '<a href="../index.html#cells">all cells</a>']
    links.append(
        f'<a rel="prev" id="prev" href="{escape(before, quote=True)}">&larr; previous cell</a>'
        if before
        else '<span class="muted">&larr; previous cell</span>'
    )
    links.append(
        f'<a rel="next" id="next" href="{escape(after, quote=True)}">next cell &rarr;</a>'
        if after
        else '<span class="muted">next cell &rarr;</span>'
    )
    return "<nav>" + "".join(links) + "</nav>"


def render_cell(cell: Cell, before: str | None = None, after: str | None = None) -> str:
    """One cell's page (see the module's docstring); ``before`` and ``after`` name the neighbours' pages."""
    cell_dir = cell.dir
    title = f"cell {cell.rel}"
    body = [
        _nav(before, after),
        f"<h1>{escape(title)}</h1>",
        *dry_run_banner(cell.result is not None and cell.result.dry_run),
        *_outcome(cell),
    ]
    task_text, problem = _read(cell_dir, TASK_JSON)
    try:
        task = load_json(task_text) if task_text is not None else None
    except ValueError:
        task = None
    grade, grade_block = _json_block(cell_dir, GRADE_JSON)
    body += _section(
        "Agent's diff",
        "diff",
        _file_block(
            cell_dir,
            WORKSPACE_DIFF,
            css="diff",
            missing="not kept (graded before dokimi kept every cell's diff, or its workspace was unreadable)",
        ),
    )
    body += _section("Tests the task names", "tests", _named_tests(task, grade))
    prompt = task.get("prompt") if isinstance(task, dict) else None
    why = problem or ("no task.json" if task_text is None else "no prompt in task.json")
    body += _section(
        "Prompt", "prompt", [_pre(str(prompt)) if prompt else f'<p class="muted">{escape(why)}</p>']
    )
    body += _section("Transcript", "transcript", _events(cell_dir))
    body += _section("Final answer", "answer", _file_block(cell_dir, ANSWER_TXT))
    body += _section("Grade", "grade", ["<h3>grade.json</h3>", *grade_block])
    body += _section("Grader output", "output", _grader_output(cell_dir))
    body += _section("Mergeability verdict", "verdict", _verdict(cell_dir))
    _, meta = _json_block(cell_dir, META_JSON)
    body += _section("Run metadata", "meta", ["<details><summary>meta.json</summary>", *meta, "</details>"])
    return _page(title, body)
