"""``repo report --html DIR``: a static site whose first screen answers "does the guidance help?", a table of
every cell (sortable, filterable) linking to a page per cell, and the compare page; rendered in headless
Chromium driven over the DevTools protocol (tests/helpers/chromium.py): the first screen holds the deltas and
the guidance table, sorting and filtering work when clicked, hostile text runs nothing and requests nothing,
tables fit 1280 px, every link resolves, no page logs to the console, and screenshots are kept.

The screenshots go to the test's temporary directory (``<tmp_path>/screenshots``; $DOKIMI_TEST_ARTIFACTS/site
instead when set, for CI to upload); each test prints where on stderr, so a log names them.
"""

from __future__ import annotations

import base64
import hashlib
import json
import os
import re
import sys
from html.parser import HTMLParser
from pathlib import Path
from urllib.parse import unquote, urlsplit

import pytest

from dokimi.batch import cell_dir
from dokimi.cli.main import main
from tests.helpers.batches import write_cell, write_pin
from tests.helpers.chromium import Browser, Page

NONE, RAW = "guidance:none", "guidance:raw"
MODEL = "m1"
#: Agent-written text that would run script and fetch a URL if it were ever rendered as HTML.
HOSTILE = (
    "<script>window.__pwned = 1; console.log('pwned')</script>"
    "<img src=x onerror=\"window.__pwned = 2; fetch('http://127.0.0.1:9/leak')\">"
)
PROMPT = "Fix {task}: give Stack a __reversed__ method; **do not** touch __init__. " + HOSTILE
F2P = ["tests/test_stack.py::test_reversed", "tests/test_stack.py::test_reversed_empty"]
P2P = ["tests/test_stack.py::test_push", "tests/test_stack.py::test_pop"]
USAGE = {
    "requests": 4, "turns": 4, "input_tokens": 2100, "output_tokens": 420, "cache_write_tokens": 0,
    "cache_read_tokens": 8000, "cost_usd": 0.02,
}  # fmt: skip


class _Links(HTMLParser):
    def __init__(self) -> None:
        super().__init__()
        self.links: list[str] = []
        self.ids: set[str] = set()
        self.scripts: list[str] = []
        self.policy: str | None = None
        self._in_script = False

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        found = dict(attrs)
        if tag == "script":
            self._in_script = True
            self.scripts.append("")
        if tag == "meta" and found.get("http-equiv") == "Content-Security-Policy":
            self.policy = found.get("content")
        if found.get("id"):
            self.ids.add(str(found["id"]))
        for key in ("href", "src"):
            if found.get(key):
                self.links.append(str(found[key]))

    def handle_endtag(self, tag: str) -> None:
        if tag == "script":
            self._in_script = False

    def handle_data(self, data: str) -> None:
        if self._in_script:
            self.scripts[-1] += data


def parse(page: Path) -> _Links:
    parser = _Links()
    parser.feed(page.read_text(encoding="utf-8"))
    return parser


def builtin_grade(task: str, passed: bool) -> dict[str, object]:
    """grade.json as dokimi's builtin:pytest writes it: the tests that did not pass, with their outcome."""
    failing = {} if passed else {F2P[1]: "failed"}
    return {
        "schema": "repo_grade.v1", "task": task, "grader": "builtin:pytest", "pass": passed,
        "metrics": {"fail_to_pass": passed, "pass_to_pass": True,
                    "fail_to_pass_passed": len(F2P) - len(failing), "pass_to_pass_broken": 0},
        "details": {"run": "pytest ran", "fail_to_pass_not_passing": failing, "pass_to_pass_broken": {}},
        "errors": [],
    }  # fmt: skip


def fill_cell(batch: Path, task: str, arm: str, rep: int, *, passed: bool) -> None:
    """A cell with everything a run leaves: prompt, events, answer, diff, grade, grader output, verdict."""
    run_dir = cell_dir(batch, task, arm, MODEL, None, rep)
    write_cell(batch, task, arm, model=MODEL, rep=rep, passed=passed, meta=True, usage=USAGE)
    task_doc = {"id": task, "prompt": PROMPT.format(task=task), "fail_to_pass": F2P, "pass_to_pass": P2P}
    (run_dir / "task.json").write_text(json.dumps(task_doc))
    events = [
        {"kind": "command", "t": 0.5, "text": "pytest -q tests/", "rc": 1, "output": "1 failed " + HOSTILE},
        {"kind": "read", "t": 1.0, "path": "calc/parser.py"},
        {"kind": "edit", "t": 2.0, "path": "calc/parser.py"},
        {"kind": "tool", "t": 2.5, "name": "WebSearch"},
        {"kind": "command", "t": 3.0, "text": "echo " + HOSTILE, "rc": 0, "output": HOSTILE},
    ]
    (run_dir / "events.jsonl").write_text("".join(json.dumps(e) + "\n" for e in events) + "not json\n")
    (run_dir / "answer.txt").write_text("I fixed it. " + HOSTILE)
    (run_dir / "workspace.diff").write_text(
        "diff --git a/calc/parser.py b/calc/parser.py\n--- a/calc/parser.py\n+++ b/calc/parser.py\n"
        "@@ -1,2 +1,2 @@\n-old = 1\n+new = 2\n"
    )
    (run_dir / "grade.json").write_text(json.dumps(builtin_grade(task, passed)))
    (run_dir / "grade.stdout").write_text("")
    (run_dir / "grade.stderr").write_text("2 passed in 0.1s\n")
    judge = {
        "model": "judge-model",
        "failure": None,
        "items": [
            {"id": "B1", "kind": "blocker", "verdict": "pass", "reason": "no test deleted", "weight": 1.0},
            {"id": "Q1", "kind": "quality", "verdict": "fail", "reason": HOSTILE, "weight": 2.0},
        ],
    }
    merge = {"mergeable": passed, "merge_score": 0.5, "reasons": ["quality Q1 failed"], "judge": judge}
    (run_dir / "merge.json").write_text(json.dumps(merge))
    os.symlink("/etc/passwd", run_dir / "grade.stderr.link")


@pytest.fixture
def batch(tmp_path: Path) -> Path:
    root = tmp_path / "pilot"
    write_pin(root)
    for task in ("fix_parser", "add_feature"):
        for rep in (0, 1):
            fill_cell(root, task, NONE, rep, passed=rep == 0 and task == "fix_parser")
            fill_cell(root, task, RAW, rep, passed=True)
    # a cell whose prompt file is a link out of the run dir: shown as refused, never followed
    link_dir = cell_dir(root, "fix_parser", RAW, MODEL, None, 1)
    (link_dir / "task.json").unlink()
    os.symlink("/etc/passwd", link_dir / "task.json")
    return root


@pytest.fixture
def site(batch: Path, tmp_path: Path) -> Path:
    out = tmp_path / "site"
    assert main(["repo", "report", str(batch), "--html", str(out)]) == 0
    assert main(["repo", "compare", str(batch), "--baseline", NONE, "--html", str(out / "compare.html")]) == 0
    return out


def artifacts_dir(tmp_path: Path) -> Path:
    """Where a test keeps its screenshots (printed by the test)."""
    configured = os.environ.get("DOKIMI_TEST_ARTIFACTS")
    path = Path(configured) / "site" if configured else tmp_path / "screenshots"
    path.mkdir(parents=True, exist_ok=True)
    return path


def cell_page(site: Path, task: str, arm: str, rep: int) -> Path:
    return site / "cells" / f"{task}--{arm.replace(':', '_')}--m1--default--rep{rep}.html"


# --- the pages as written --------------------------------------------------------------------------


@pytest.mark.slow
def test_the_summary_links_every_task_and_arm_to_each_of_its_cells(site: Path) -> None:
    index = parse(site / "index.html")
    cells = sorted(link for link in index.links if link.startswith("cells/"))
    assert len(cells) == 8
    for task in ("fix_parser", "add_feature"):
        for arm in ("guidance_none", "guidance_raw"):
            assert sum(1 for c in cells if c.startswith(f"cells/{task}--{arm}--")) == 2


@pytest.mark.slow
def test_every_page_runs_only_dokimi_s_script_allowed_by_its_hash_and_nothing_else(site: Path) -> None:
    for path in sorted(site.rglob("*.html")):
        found = parse(path)
        assert len(found.scripts) == 1, path.name  # dokimi's table script, nothing the agent wrote
        digest = base64.b64encode(hashlib.sha256(found.scripts[0].encode()).digest()).decode()
        assert found.policy is not None and f"script-src 'sha256-{digest}'" in found.policy
        assert "default-src 'none'" in found.policy and "unsafe-inline'; img-src data:" in found.policy
        assert not re.search(r"""(src|href)\s*=\s*["']?(https?:|//)""", path.read_text()), path.name


@pytest.mark.slow
def test_a_cell_page_shows_the_diff_the_named_tests_the_tokens_and_labelled_output_escaped(
    site: Path,
) -> None:
    page = cell_page(site, "fix_parser", NONE, 1)
    html = page.read_text()
    for needle in (
        '<span class="add">+new = 2</span>',
        "pytest -q tests/",
        "calc/parser.py",
        "WebSearch",
        "I fixed it.",
        "builtin:pytest",
        "judge-model",
        "no test deleted",
        "cost (USD)",
        "in 2,100, out 420, cache write 0, cache read 8,000",
        "FAIL_TO_PASS 1/2 passed, PASS_TO_PASS 2/2 passed",
        '<h3>grade.stdout</h3><p class="muted note">the grader&#x27;s standard output',
        '<p class="muted">empty (0 characters)</p>',
        "<h3>grade.stderr</h3>",
        "2 passed in 0.1s",
    ):
        assert needle in html, needle
    html = html.replace("<wbr>", "")  # the break opportunities in long ids
    for test in [*F2P, *P2P]:
        assert test in html
    rows = re.findall(
        r"<tr><td[^>]*>(FAIL_TO_PASS|PASS_TO_PASS)</td><td[^>]*>([^<]+)</td><td[^>]*>(.*?)</td>", html
    )
    outcomes = {test: re.sub(r"<[^>]+>", "", outcome) for _, test, outcome in rows}
    assert outcomes == {F2P[0]: "passed", F2P[1]: "failed", P2P[0]: "passed", P2P[1]: "passed"}
    # the prompt is text: escaped, never rendered as Markdown
    assert "give Stack a __reversed__ method; **do not** touch __init__." in html
    assert "<strong>" not in html and "<script>window" not in html and "&lt;script&gt;" in html
    assert "<img" not in html and "onerror=&quot;" in html
    assert '<a rel="prev" id="prev" href="fix_parser--guidance_none--m1--default--rep0.html">' in html
    assert '<a rel="next" id="next" href="fix_parser--guidance_raw--m1--default--rep0.html">' in html
    linked = cell_page(site, "fix_parser", RAW, 1).read_text()
    assert "task.json is not shown" in linked and "root:" not in linked


@pytest.mark.slow
def test_the_first_and_last_cells_have_no_previous_and_no_next(site: Path) -> None:
    first = cell_page(site, "add_feature", NONE, 0).read_text()
    last = cell_page(site, "fix_parser", RAW, 1).read_text()
    assert 'id="prev"' not in first and 'id="next"' in first
    assert 'id="next"' not in last and 'id="prev"' in last


@pytest.mark.slow
def test_the_compare_page_has_a_heatmap_and_a_forest_plot(site: Path) -> None:
    html = (site / "compare.html").read_text()
    assert 'class="heatmap' in html and 'class="chart forest"' in html
    assert 'data-task="fix_parser" data-arm="guidance:none" data-value="0.5"' in html
    assert 'data-task="add_feature" data-arm="guidance:raw" data-value="1.0"' in html
    assert 'class="forest-point"' in html and 'data-arm="guidance:raw"' in html


def test_report_baseline_chooses_the_arm_compared_with_and_is_checked(
    batch: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "raw-first"
    assert main(["repo", "report", str(batch), "--html", str(out), "--baseline", RAW]) == 0
    assert 'data-treatment="guidance:none" data-baseline="guidance:raw"' in (out / "index.html").read_text()
    assert (
        main(["repo", "report", str(batch), "--html", str(tmp_path / "x"), "--baseline", "guidance:tree"])
        == 2
    )
    assert "its arms: guidance:none, guidance:raw" in capsys.readouterr().err
    assert main(["repo", "report", str(batch), "--baseline", RAW]) == 2
    assert not (tmp_path / "x").exists()


# --- in the browser -------------------------------------------------------------------------------


def visible_rows(page: Page, table: str) -> list[list[str]]:
    return page.evaluate(  # type: ignore[no-any-return]
        f"[...document.querySelectorAll('{table} tbody tr')].filter(r => !r.hidden)"
        ".map(r => [...r.cells].map(c => c.textContent.trim()))"
    )


def choose(page: Page, table: str, column: str, value: str) -> None:
    """Choose ``value`` in the drop-down the table script put above ``table`` for ``column``."""
    bar = f"document.querySelector('{table}').closest('.scroll').previousElementSibling"
    page.evaluate(
        f"(() => {{ const s = {bar}.querySelector('select[data-filter={column}]'); "
        f"s.value = {json.dumps(value)}; s.dispatchEvent(new Event('change')); }})()"
    )


def header_index(page: Page, table: str, name: str) -> int:
    return int(
        page.evaluate(
            f"[...document.querySelectorAll('{table} thead th')].findIndex(th => th.textContent.trim() === "
            f"{json.dumps(name)})"
        )
    )


@pytest.mark.slow
def test_the_first_screen_shows_the_per_task_deltas_the_test_and_the_guidance_table(
    site: Path, tmp_path: Path, chromium_bin: Path
) -> None:
    shots = artifacts_dir(tmp_path)
    with Browser(chromium_bin, tmp_path, width=1280, height=800) as browser:
        page = browser.open((site / "index.html").as_uri())
        for selector in ("table.deltas", "table.guidance", "p.verdict", "svg.scatter", "table.costs"):
            box = page.evaluate(
                f"JSON.stringify(document.querySelector('{selector}').getBoundingClientRect())"
            )
            top = json.loads(box)["top"]
            assert 0 <= top < 800, f"{selector} starts at {top} px, below the first screen"
        deltas = page.evaluate(
            "[...document.querySelectorAll('svg.mini')].map(s => [s.dataset.task, Number(s.dataset.delta)])"
        )
        assert sorted(deltas) == [["add_feature", 1.0], ["fix_parser", 0.5]]
        verdict = page.evaluate("document.querySelector('p.verdict').textContent")
        assert "gate: +0.75 per task" in verdict and "2 up, 0 down, 0 tied" in verdict
        power = page.evaluate("document.querySelector('p.verdict + p').textContent")
        assert "not significant, and underpowered" in power and "sign-flip over 2 tasks" in power
        guidance = visible_rows(page, "table.guidance")
        assert [row[0] for row in guidance] == [NONE, RAW]
        assert {row[0] for row in visible_rows(page, "table.costs")} == {NONE, RAW}
        page.screenshot(shots / "first-screen.png")
        page.screenshot(shots / "index-full.png", full_page=True)
        assert page.console() == []
    print(f"\nsite screenshots: {shots}", file=sys.__stderr__)


@pytest.mark.slow
def test_the_first_screen_gives_each_arm_s_pass_at_k_and_pass_hat_k_beside_its_cost(
    site: Path, tmp_path: Path, chromium_bin: Path
) -> None:
    """k defaults to the batch's 2 reps. guidance:none passes fix_parser once in 2 and add_feature never:
    pass@2 is (1 + 0) / 2, pass^2 (0 + 0) / 2; guidance:raw passes every attempt."""
    with Browser(chromium_bin, tmp_path) as browser:
        page = browser.open((site / "index.html").as_uri())
        costs = "table.costs"
        at_k, hat_k = header_index(page, costs, "pass@2"), header_index(page, costs, "pass^2")
        assert at_k > 0 and hat_k > 0
        shown = {row[0]: (row[at_k], row[hat_k]) for row in visible_rows(page, costs)}
        assert shown == {NONE: ("0.50", "0.00"), RAW: ("1.00", "1.00")}


@pytest.mark.slow
def test_tables_sort_and_filter_when_clicked(site: Path, tmp_path: Path, chromium_bin: Path) -> None:
    with Browser(chromium_bin, tmp_path) as browser:
        page = browser.open((site / "index.html").as_uri())
        assert page.evaluate("document.documentElement.dataset.tables") == "ready"
        cells = "table.cells"
        assert len(visible_rows(page, cells)) == 8
        # filter: the arm, then the outcome, by choosing in the drop-downs the script put above the table
        choose(page, cells, "arm", RAW)
        choose(page, cells, "outcome", "pass")
        arm, outcome = header_index(page, cells, "arm"), header_index(page, cells, "outcome")
        rows = visible_rows(page, cells)
        assert len(rows) == 4 and all(r[arm] == RAW and r[outcome] == "pass" for r in rows)
        shown = "document.querySelector('table.cells').closest('.scroll').previousElementSibling.textContent"
        assert "4 of 8 rows" in page.evaluate(shown)
        choose(page, cells, "arm", "")
        assert len(visible_rows(page, cells)) == 5  # every passing cell: 4 raw, 1 none
        # sort: click the task header, then again for the reverse order
        task = header_index(page, cells, "task")
        button = f"document.querySelectorAll('{cells} thead th')[{task}].querySelector('button')"
        page.evaluate(f"{button}.click()")
        ascending = [r[task] for r in visible_rows(page, cells)]
        assert ascending == sorted(ascending) and ascending[0] == "add_feature"
        page.evaluate(f"{button}.click()")
        descending = [r[task] for r in visible_rows(page, cells)]
        assert descending == sorted(ascending, reverse=True)
        assert page.evaluate(f"{button}.parentNode.getAttribute('aria-sort')") == "descending"
        # a numeric column sorts as numbers, "-" last: the per-task deltas, by delta
        delta = header_index(page, "table.deltas", "delta")
        page.evaluate(
            f"document.querySelectorAll('table.deltas thead th')[{delta}].querySelector('button').click()"
        )
        assert [r[delta] for r in visible_rows(page, "table.deltas")] == ["+0.50", "+1.00"]
        shots = artifacts_dir(tmp_path)
        page.screenshot(shots / "sorted-and-filtered.png", full_page=True)
        assert page.console() == []
    print(f"\nsite screenshots: {shots}", file=sys.__stderr__)


@pytest.mark.slow
def test_hostile_text_in_a_transcript_runs_nothing_and_requests_nothing(
    site: Path, tmp_path: Path, chromium_bin: Path
) -> None:
    """The transcript, prompt, answer and judge's reason hold ``<script>`` and an ``onerror=`` handler that
    would log, set a global and fetch a URL: none happens, on the cell page and on the index."""
    with Browser(chromium_bin, tmp_path) as browser:
        for path in (cell_page(site, "fix_parser", NONE, 1), site / "index.html"):
            page = browser.open(path.as_uri())
            page.evaluate("new Promise(resolve => setTimeout(resolve, 300))")  # any image error has fired
            assert page.evaluate("typeof window.__pwned") == "undefined"
            assert page.evaluate("document.querySelectorAll('img, iframe, object, embed').length") == 0
            assert page.console() == [], path.name
            assert page.requests() == [path.as_uri()], path.name
        text = page.evaluate("document.body.innerText")
        assert "pwned" not in text  # the index shows no agent text; the cell page shows it as text:
        shown = browser.open(cell_page(site, "fix_parser", NONE, 1).as_uri()).evaluate(
            "document.body.innerText"
        )
        assert "<script>window.__pwned = 1; console.log('pwned')</script>" in shown
        assert 'onerror="window.__pwned = 2;' in shown


@pytest.mark.slow
def test_every_page_renders_fits_1280_px_logs_nothing_and_every_link_resolves(
    site: Path, tmp_path: Path, chromium_bin: Path
) -> None:
    pages = sorted(site.rglob("*.html"))
    assert len(pages) == 10  # index, compare, 8 cells
    for page_path in pages:
        parsed = parse(page_path)
        for link in parsed.links:
            parts = urlsplit(link)
            assert not parts.scheme and not parts.netloc, f"{page_path.name}: external link {link}"
            target = (page_path.parent / unquote(parts.path)).resolve() if parts.path else page_path
            assert target.is_file(), f"{page_path.name}: {link} does not resolve"
            if parts.fragment:
                assert parts.fragment in parse(target).ids, f"{page_path.name}: {link}: no such anchor"
    shots = artifacts_dir(tmp_path)
    shown = {"index.html", "compare.html", cell_page(site, "fix_parser", NONE, 1).name}
    with Browser(chromium_bin, tmp_path, width=1280, height=900) as browser:
        for page_path in pages:
            page = browser.open(page_path.as_uri())
            assert page.console() == [], page_path.name
            assert page.evaluate("document.documentElement.scrollWidth") <= 1280, page_path.name
            cut = page.evaluate(
                "[...document.querySelectorAll('.scroll')].filter(d => d.scrollWidth > d.clientWidth + 1)"
                ".map(d => d.querySelector('table').className)"
            )
            assert cut == [], f"{page_path.name}: tables wider than the page: {cut}"
            if page_path.name in shown:
                page.screenshot(shots / page_path.name.replace(".html", ".png"), full_page=True)
    print(f"\nsite screenshots: {shots}", file=sys.__stderr__)
