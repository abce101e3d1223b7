"""``repo report --html DIR``: a static site whose summary links every (task, arm) to its cells, a page per
cell with everything the cell left, and the compare page's heatmap and forest plot; rendered in headless
Chromium: every link resolves, no page logs to the console, and screenshots are kept.

The screenshots go to $DOKIMI_TEST_ARTIFACTS/site (default: <tmp>/dokimi-test-artifacts/site); the test
prints the directory on stderr, so a CI log names where they are.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
from html.parser import HTMLParser
from pathlib import Path
from urllib.parse import unquote, urlsplit

import pytest

from dokimi.batch import cell_dir
from dokimi.cli.main import main
from tests.helpers.batches import write_cell, write_pin

NONE, RAW = "guidance:none", "guidance:raw"
MODEL = "m1"
HOSTILE = "<script>alert(1)</script><img src=x onerror=alert(2)>"


class _Links(HTMLParser):
    def __init__(self) -> None:
        super().__init__()
        self.links: list[str] = []
        self.ids: set[str] = set()
        self.scripts = 0

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        found = dict(attrs)
        if tag == "script":
            self.scripts += 1
        if found.get("id"):
            self.ids.add(str(found["id"]))
        for key in ("href", "src"):
            if found.get(key):
                self.links.append(str(found[key]))


def parse(page: Path) -> _Links:
    parser = _Links()
    parser.feed(page.read_text(encoding="utf-8"))
    return parser


def fill_cell(batch: Path, task: str, arm: str, rep: int, *, passed: bool) -> None:
    """A cell with everything a run leaves: prompt, events, answer, diff, grade, grader output, verdict."""
    run_dir = cell_dir(batch, task, arm, MODEL, None, rep)
    write_cell(batch, task, arm, model=MODEL, rep=rep, passed=passed, meta=True)
    (run_dir / "task.json").write_text(json.dumps({"id": task, "prompt": f"Fix {task}. {HOSTILE}"}))
    events = [
        {"kind": "command", "t": 0.5, "text": "pytest -q tests/", "rc": 1, "output": "1 failed " + HOSTILE},
        {"kind": "read", "t": 1.0, "path": "calc/parser.py"},
        {"kind": "edit", "t": 2.0, "path": "calc/parser.py"},
        {"kind": "tool", "t": 2.5, "name": "WebSearch"},
    ]
    (run_dir / "events.jsonl").write_text("".join(json.dumps(e) + "\n" for e in events) + "not json\n")
    (run_dir / "answer.txt").write_text("I fixed it. " + HOSTILE)
    (run_dir / "workspace.diff").write_text(
        "diff --git a/calc/parser.py b/calc/parser.py\n--- a/calc/parser.py\n+++ b/calc/parser.py\n"
        "@@ -1,2 +1,2 @@\n-old = 1\n+new = 2\n"
    )
    grade = {"schema": "repo_grade.v1", "task": task, "grader": "hidden_tests", "pass": passed, "metrics": {}}
    (run_dir / "grade.json").write_text(json.dumps(grade))
    (run_dir / "grade.stdout").write_text("8 passed\n")
    (run_dir / "grade.stderr").write_text("")
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
def site(tmp_path: Path) -> Path:
    batch = tmp_path / "pilot"
    write_pin(batch)
    for task in ("fix_parser", "add_feature"):
        for rep in (0, 1):
            fill_cell(batch, task, NONE, rep, passed=rep == 0 and task == "fix_parser")
            fill_cell(batch, task, RAW, rep, passed=True)
    # a cell whose prompt file is a link out of the run dir: shown as refused, never followed
    link_dir = cell_dir(batch, "fix_parser", RAW, MODEL, None, 1)
    (link_dir / "task.json").unlink()
    os.symlink("/etc/passwd", link_dir / "task.json")
    out = tmp_path / "site"
    assert main(["repo", "report", str(batch), "--html", str(out)]) == 0
    assert main(["repo", "compare", str(batch), "--baseline", NONE, "--html", str(out / "compare.html")]) == 0
    return out


def test_the_summary_links_every_task_and_arm_to_each_of_its_cells(site: Path) -> None:
    index = parse(site / "index.html")
    cells = sorted(link for link in index.links if link.startswith("cells/"))
    assert len(cells) == 8
    for task in ("fix_parser", "add_feature"):
        for arm in ("guidance_none", "guidance_raw"):
            assert sum(1 for c in cells if c.startswith(f"cells/{task}--{arm}--")) == 2


def test_a_cell_page_shows_prompt_transcript_diff_grade_and_verdict_escaped(site: Path) -> None:
    page = site / "cells" / "fix_parser--guidance_none--m1--default--rep0.html"
    html = page.read_text()
    for needle in (
        "Fix fix_parser.",
        "pytest -q tests/",
        "calc/parser.py",
        "WebSearch",
        "I fixed it.",
        '<span class="add">+new = 2</span>',
        "hidden_tests",
        "8 passed",
        "judge-model",
        "no test deleted",
        "cost (USD)",
        "duration (s)",
    ):
        assert needle in html, needle
    assert "<script>" not in html and "&lt;script&gt;" in html
    assert parse(page).scripts == 0
    linked = (site / "cells" / "fix_parser--guidance_raw--m1--default--rep1.html").read_text()
    assert "task.json is not shown" in linked and "root:" not in linked


def test_the_compare_page_has_a_heatmap_and_a_forest_plot(site: Path) -> None:
    html = (site / "compare.html").read_text()
    assert 'class="heatmap"' in html and 'class="chart forest"' in html
    assert 'data-task="fix_parser" data-arm="guidance:none" data-value="0.5"' in html
    assert 'data-task="add_feature" data-arm="guidance:raw" data-value="1.0"' in html
    assert 'class="forest-point"' in html and 'data-arm="guidance:raw"' in html


def artifacts_dir() -> Path:
    root = Path(
        os.environ.get("DOKIMI_TEST_ARTIFACTS") or Path(tempfile.gettempdir()) / "dokimi-test-artifacts"
    )
    path = root / "site"
    path.mkdir(parents=True, exist_ok=True)
    return path


def test_every_page_renders_in_chromium_without_console_messages_and_every_link_resolves(
    site: Path, tmp_path: Path, chromium_bin: Path
) -> None:
    pages = sorted(site.rglob("*.html"))
    assert len(pages) == 10  # index, compare, 8 cells
    for page in pages:
        parsed = parse(page)
        for link in parsed.links:
            parts = urlsplit(link)
            assert not parts.scheme and not parts.netloc, f"{page.name}: external link {link}"
            target = (page.parent / unquote(parts.path)).resolve() if parts.path else page
            assert target.is_file(), f"{page.name}: {link} does not resolve"
            if parts.fragment:
                assert parts.fragment in parse(target).ids, f"{page.name}: {link}: no such anchor"
    shots = artifacts_dir()
    base = [
        str(chromium_bin),
        "--headless",
        "--no-sandbox",
        "--disable-gpu",
        "--no-first-run",
        "--disable-background-networking",
        "--disable-component-update",
        "--disable-sync",
        f"--user-data-dir={tmp_path / 'chromium-profile'}",
        "--enable-logging=stderr",
        "--v=0",
        "--window-size=1100,1400",
    ]
    shown = {"index.html", "compare.html", "fix_parser--guidance_none--m1--default--rep0.html"}
    for page in pages:
        argv = [*base, "--dump-dom"]
        done = subprocess.run(
            [*argv, page.as_uri()],
            capture_output=True,
            text=True,
            timeout=180,
            check=False,
            stdin=subprocess.DEVNULL,
        )
        assert done.returncode == 0, done.stderr[-2000:]
        assert "</html>" in done.stdout or "</body>" in done.stdout
        console = [line for line in done.stderr.splitlines() if ":CONSOLE" in line]
        assert not console, f"{page.name}: {console}"
        if page.name in shown:
            shot = shots / page.name.replace(".html", ".png")
            taken = subprocess.run(
                [*base, f"--screenshot={shot}", page.as_uri()],
                capture_output=True,
                timeout=180,
                check=False,
                stdin=subprocess.DEVNULL,
            )
            assert taken.returncode == 0 and shot.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    print(f"\nsite screenshots: {shots}", file=sys.__stderr__)
