"""``repo report --html DIR``: the report as a small static site, one directory that can be zipped.

- ``DIR/index.html`` (or the ``.html`` file named): the report page (dokimi.analysis.html) and a table that
  links every (task, arm, model, effort, mode) to its cells;
- ``cells/<cell>.html`` beside it: one page per cell: its outcome, cost and timings, the prompt, the
  transcript (every event: commands with their output, reads, edits, tools), the final answer, the agent's
  diff, the grade (grade.json and the grader's output), and the mergeability verdict (the judge's rubric
  rows, scope, test integrity).

No server, no script, no external asset: inline CSS only. Every file of a cell directory was written by an
agent or a grader, so it is hostile: it is read without following links and up to a size cap
(:mod:`dokimi.safefs`), shown escaped, and a file that cannot be read says why instead of failing the site.
"""

from __future__ import annotations

import json
import re
from collections import defaultdict
from html import escape
from pathlib import Path
from typing import Any

from dokimi.analysis.html import _CSS, _fmt, dry_run_banner, render_report
from dokimi.batch import Batch, Cell
from dokimi.errors import DokimiError
from dokimi.rundir import (
    ANSWER_TXT,
    EVENTS_JSONL,
    GRADE_JSON,
    MERGE_JSON,
    META_JSON,
    TASK_JSON,
    WORKSPACE_DIFF,
)
from dokimi.safefs import read_bytes
from dokimi.schemas._base import load_json, make_output_dir, write_output, write_text_atomic
from dokimi.schemas.report import ReportDoc

__all__ = ["cell_page_name", "write_report_site"]

#: The most of one file a cell page shows (the rest is cut, and the page says so).
SHOW_LIMIT = 256 * 1024
#: The most of one file read at all.
READ_LIMIT = 16 * 1024 * 1024
#: The most of one event's output shown.
EVENT_OUTPUT_LIMIT = 8 * 1024

_SITE_CSS = """
pre{background:#f6f8fa;border:1px solid #dde1e8;padding:8px;overflow-x:auto;white-space:pre-wrap;
word-break:break-word;font:12px/1.4 ui-monospace,SFMono-Regular,Menlo,monospace;max-height:600px;
overflow-y:auto}
.diff .add{color:#0a7a3d}.diff .del{color:#b42318}.diff .hunk{color:#6941c6}
nav{margin-bottom:12px}dl{display:grid;grid-template-columns:max-content auto;gap:2px 14px}dt{color:#667085}
"""


def cell_page_name(cell: Cell) -> str:
    """The page of a cell, under ``cells/``: its batch-relative path with ``/`` as ``--`` (the parts are
    already file-name safe: dokimi.batch.slug)."""
    safe = re.sub(r"[^A-Za-z0-9._=+-]", "_", cell.rel.replace("/", "--"))
    return f"{safe}.html"


def _page(title: str, body: list[str]) -> str:
    return (
        '<!DOCTYPE html>\n<html lang="en"><head><meta charset="utf-8">'
        f"<title>{escape(title)}</title><style>{_CSS}{_SITE_CSS}</style></head><body>\n"
        + "\n".join(body)
        + "\n</body></html>\n"
    )


def write_report_site(doc: ReportDoc, batch: Batch, index: Path) -> Path:
    """Write the site: the report at ``index`` (``<dir>/index.html`` when ``index`` is a directory), its cell
    pages in ``cells/`` beside it. Returns the index page's path."""
    if index.suffix.lower() not in (".html", ".htm"):
        index = index / "index.html"
    pages = {cell.rel: cell_page_name(cell) for cell in batch.cells if cell.status != "missing"}
    page = render_report(doc).replace("</body></html>", _cell_links(batch, pages) + "\n</body></html>")
    write_output(index, page)  # first: a path that cannot be written fails before any cell page
    cells_dir = index.parent / "cells"
    make_output_dir(cells_dir)
    for cell in batch.cells:
        if cell.rel in pages:
            write_text_atomic(cells_dir / pages[cell.rel], _cell_page(cell, batch.root))
    return index


def _cell_page(cell: Cell, batch_root: Path) -> str:
    """A cell's page; a cell whose evidence cannot be read at all gets a page that says why, and the rest of
    the site is written as usual."""
    try:
        return render_cell(cell, batch_root)
    except (DokimiError, OSError, ValueError, RecursionError) as exc:
        title = f"cell {cell.rel}"
        why = f"this cell's evidence could not be read: {type(exc).__name__}: {exc}"
        return _page(title, [f"<h1>{escape(title)}</h1>", f'<p class="fail">{escape(why[:2000])}</p>'])


def _mark(cell: Cell) -> tuple[str, str]:
    """(css class, word) of a cell's outcome."""
    result = cell.result
    if cell.status != "finished" or result is None:
        return "other", cell.status
    if result.grader_failure:
        return "other", "grader failure"
    if result.gated:
        return ("pass", "pass") if result.passed else ("fail", "fail")
    return "other", f"score {_fmt(result.score)}"


def _cell_links(batch: Batch, pages: dict[str, str]) -> str:
    """Every (task, arm, model, effort, mode) with a link to each of its cells."""
    groups: dict[tuple[str, ...], list[Cell]] = defaultdict(list)
    for cell in batch.cells:
        if cell.rel not in pages:
            continue
        key = cell.key
        result = cell.result
        mode = (result.mode if result is not None else None) or "-"
        if key is not None:
            groups[(key.task, key.arm, key.model, key.effort or "default", mode)].append(cell)
        else:
            groups[(cell.rel.rsplit("/", 1)[0], "", "", "", "")].append(cell)
    rows = []
    for (task, arm, model, effort, mode), cells in sorted(groups.items()):
        links = []
        for cell in sorted(cells, key=lambda c: c.rel):
            css, word = _mark(cell)
            label = cell.rel.rsplit("/", 1)[-1]
            links.append(
                f'<a class="cell {css}" href="cells/{escape(pages[cell.rel], quote=True)}">'
                f"{escape(label)}: {escape(word)}</a>"
            )
        cells_html = "".join(links)
        rows.append(
            f"<tr><td>{escape(task)}</td><td>{escape(arm)}</td><td>{escape(model)}</td>"
            f"<td>{escape(effort)}</td><td>{escape(mode)}</td><td>{cells_html}</td></tr>"
        )
    head = "".join(f"<th>{h}</th>" for h in ("task", "arm", "model", "effort", "mode", "cells"))
    return (
        '<h2 id="cells">Cells</h2><p class="muted">Each cell opens its prompt, transcript, diff, grade and '
        "verdict.</p>"
        f'<div class="scroll"><table class="cells"><thead><tr>{head}</tr></thead>'
        f"<tbody>{''.join(rows)}</tbody></table></div>"
    )


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
    out = [f'<p>outcome: <span class="{css}">{escape(word)}</span></p>']
    if result is None:
        if cell.error:
            out.append(f'<p class="muted">{escape(cell.error)}</p>')
        return out
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
        ("turns", "-" if result.turns is None else str(result.turns)),
        ("duration (s)", _fmt(result.duration_s, 1)),
        ("agent exit code", "-" if result.agent_rc is None else str(result.agent_rc)),
        ("agent timed out", "yes" if result.agent_timed_out else "no"),
        ("score", _fmt(result.score)),
        ("grader error", result.grader_error or "-"),
    ]
    gates = ", ".join(f"{k}: {v}" for k, v in sorted(result.gate_results.items())) or "-"
    metrics = ", ".join(f"{k}={v}" for k, v in sorted(result.metrics.items())) or "-"
    items += [("gates", gates), ("metrics", metrics)]
    return [*out, _dl(items)]


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
        rows = []
        for item in judge.get("items") or []:
            if isinstance(item, dict):
                verdict = str(item.get("verdict"))
                css = "pass" if verdict == "pass" else "fail" if verdict == "fail" else "other"
                rows.append(
                    f"<tr><td>{escape(str(item.get('id')))}</td><td>{escape(str(item.get('kind')))}</td>"
                    f'<td class="{css}">{escape(verdict)}</td><td>{escape(str(item.get("weight")))}</td>'
                    f"<td>{escape(str(item.get('reason')))}</td></tr>"
                )
        head = "<tr><th>rubric item</th><th>kind</th><th>verdict</th><th>weight</th><th>reason</th></tr>"
        out.append(f'<table class="rubric"><thead>{head}</thead><tbody>{"".join(rows)}</tbody></table>')
    out.append("<details><summary>merge.json</summary>" + "".join(block) + "</details>")
    return out


def _simulated(cost_usd: float | None) -> str:
    return f"{_fmt(cost_usd, 6)} (the harness's own figure for the scripted answers: never paid)"


def render_cell(cell: Cell, batch_root: Path) -> str:
    """One cell's page (see the module's docstring)."""
    cell_dir = cell.dir
    title = f"cell {cell.rel}"
    body = [
        '<nav><a href="../index.html">report</a> / <a href="../index.html#cells">cells</a></nav>',
        f"<h1>{escape(title)}</h1>",
        *dry_run_banner(cell.result is not None and cell.result.dry_run),
        *_outcome(cell),
    ]
    task_text, problem = _read(cell_dir, TASK_JSON)
    try:
        task = load_json(task_text) if task_text is not None else None
    except ValueError:
        task = None
    prompt = task.get("prompt") if isinstance(task, dict) else None
    why = problem or ("no task.json" if task_text is None else "no prompt in task.json")
    body += _section(
        "Prompt", "prompt", [_pre(str(prompt)) if prompt else f'<p class="muted">{escape(why)}</p>']
    )
    body += _section("Transcript", "transcript", _events(cell_dir))
    body += _section("Final answer", "answer", _file_block(cell_dir, ANSWER_TXT))
    body += _section(
        "Agent's diff", "diff", _file_block(cell_dir, WORKSPACE_DIFF, css="diff", missing="not kept")
    )
    _, grade = _json_block(cell_dir, GRADE_JSON)
    body += _section("Grade", "grade", grade)
    body += [
        "<h3>Grader output</h3>",
        *_file_block(cell_dir, "grade.stdout", missing="empty or absent"),
        *_file_block(cell_dir, "grade.stderr", missing="empty or absent"),
    ]
    body += _section("Mergeability verdict", "verdict", _verdict(cell_dir))
    _, meta = _json_block(cell_dir, META_JSON)
    body += _section("Run metadata", "meta", ["<details><summary>meta.json</summary>", *meta, "</details>"])
    return _page(title, body)
