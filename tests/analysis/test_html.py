"""The --html pages: self-contained, and rendered by headless Chromium with the right bars and numbers."""

from __future__ import annotations

import re
from html import unescape
from html.parser import HTMLParser
from pathlib import Path

import pytest

from dokimi.analysis.compare import compare
from dokimi.analysis.html import render_compare, render_report
from dokimi.analysis.report import build_report
from dokimi.batch import load_batch
from dokimi.cli.main import main
from tests.helpers.batches import write_cell, write_pin
from tests.helpers.chromium import Browser

NONE, RAW, BRIDGE = "guidance:none", "guidance:raw", "guidance:bridge"


class _Elements(HTMLParser):
    """Every element of a document as (tag, attributes)."""

    def __init__(self) -> None:
        super().__init__()
        self.elements: list[tuple[str, dict[str, str]]] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.elements.append((tag, {k: v or "" for k, v in attrs}))


def elements(html: str, tag: str, cls: str) -> list[dict[str, str]]:
    parser = _Elements()
    parser.feed(html)
    return [a for t, a in parser.elements if t == tag and cls in a.get("class", "").split()]


def chromium(binary: Path, page: Path, tmp_path: Path, *, screenshot: Path | None = None) -> str:
    """The DOM Chromium builds from ``page``, optionally with a screenshot."""
    with Browser(binary, tmp_path, width=1100, height=1300) as browser:
        shown = browser.open(page.as_uri())
        if screenshot is not None:
            shown.screenshot(screenshot)
        return str(shown.evaluate("document.documentElement.outerHTML"))


@pytest.fixture
def three_arms(tmp_path: Path) -> Path:
    """none 1/4, raw 3/4 (one grader failure among the fails), bridge 4/4 over two tasks."""
    batch = tmp_path / "pilot"
    write_pin(batch)
    outcomes = {NONE: [True, False, False, False], RAW: [True, True, True, False], BRIDGE: [True] * 4}
    for arm, passes in outcomes.items():
        for i, passed in enumerate(passes):
            write_cell(
                batch, f"t{i % 2}", arm, rep=i // 2, passed=passed, grader_failure=(arm == RAW and not passed)
            )
    return batch


def test_the_report_page_is_self_contained(three_arms: Path) -> None:
    html = render_report(build_report(load_batch(three_arms)))
    assert html.count("<script") == 1 and "<script src" not in html and "<link" not in html
    assert not re.search(r"""(src|href)\s*=\s*["']?(https?:|//)""", html)
    assert "http://" not in html.replace("http://www.w3.org", "") and "https://" not in html
    assert "default-src 'none'" in unescape(html)  # the policy forbids every request


def test_the_report_chart_has_one_bar_per_arm_with_the_numbers_of_the_report(three_arms: Path) -> None:
    doc = build_report(load_batch(three_arms))
    bars = elements(render_report(doc), "rect", "bar")
    assert [b["data-arm"] for b in bars] == [a.arm for a in doc.arms]
    for bar, arm in zip(bars, doc.arms, strict=True):
        assert (int(bar["data-passes"]), int(bar["data-gated"])) == (arm.passes, arm.gated)
        assert arm.pass_ci is not None
        assert float(bar["data-lo"]) == pytest.approx(arm.pass_ci[0])
        assert float(bar["data-hi"]) == pytest.approx(arm.pass_ci[1])


@pytest.mark.slow
def test_report_html_rendered_in_chromium_shows_one_bar_per_arm(
    three_arms: Path, tmp_path: Path, chromium_bin: Path
) -> None:
    page = tmp_path / "report.html"
    assert main(["repo", "report", str(three_arms), "--html", str(page)]) == 0
    dom = chromium(chromium_bin, page, tmp_path)
    bars = {b["data-arm"]: b for b in elements(dom, "rect", "bar")}
    assert sorted(bars) == sorted([NONE, RAW, BRIDGE])
    expected = {NONE: (1, 4, 0.25), RAW: (3, 4, 0.75), BRIDGE: (4, 4, 1.0)}
    for arm, (passes, gated, rate) in expected.items():
        bar = bars[arm]
        assert (int(bar["data-passes"]), int(bar["data-gated"])) == (passes, gated)
        assert float(bar["data-rate"]) == pytest.approx(rate)
        # the bar's height is the rate on a 194 px axis, so the picture says what the numbers say
        assert float(bar["height"]) == pytest.approx(194 * rate, abs=0.1)
    assert len(elements(dom, "line", "ci")) == 3 * 3  # a whisker and two caps per bar
    assert "grader failures" in dom
    shot = tmp_path / "report.png"
    chromium(chromium_bin, page, tmp_path, screenshot=shot)
    assert shot.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


@pytest.mark.slow
def test_compare_html_rendered_in_chromium_shows_one_delta_bar_per_paired_task(
    three_arms: Path, tmp_path: Path, chromium_bin: Path
) -> None:
    page = tmp_path / "compare.html"
    assert main(["repo", "compare", f"{three_arms}/{RAW}", "--baseline", NONE, "--html", str(page)]) == 0
    doc = compare([f"{three_arms}/{RAW}"], NONE)
    gate = next(m for m in doc.comparisons[0].measures if m.name == "gate")
    dom = chromium(chromium_bin, page, tmp_path)
    deltas = elements(dom, "rect", "delta")
    assert [d["data-task"] for d in deltas] == [v.task for v in gate.per_task]
    assert [float(d["data-delta"]) for d in deltas] == pytest.approx([v.delta for v in gate.per_task])
    # t0: none 1/2 -> raw 2/2; t1: none 0/2 -> raw 1/2
    assert [float(d["data-delta"]) for d in deltas] == [0.5, 0.5]
    (mean,) = elements(dom, "line", "mean")
    assert float(mean["data-delta"]) == pytest.approx(0.5)


def test_the_compare_page_escapes_names(tmp_path: Path) -> None:
    write_cell(tmp_path, "<t&1>", NONE, passed=False)
    write_cell(tmp_path, "<t&1>", "arm<script>", passed=True)
    html = render_compare(compare([str(tmp_path)], NONE))
    assert "arm<script>" not in html and "arm&lt;script&gt;" in html and "&lt;t&amp;1&gt;" in html
    assert html.count("<script>") == 1  # dokimi's own


@pytest.mark.slow
@pytest.mark.parametrize("kind", ["report", "compare"])
def test_a_wide_table_scrolls_inside_the_page_instead_of_widening_it(
    kind: str, tmp_path: Path, chromium_bin: Path
) -> None:
    # Real names are long (Bedrock model ids, digests): the per-task table and the selectors table must not
    # push the page past the window, nor break a model id over several lines.
    batch = tmp_path / "pilot"
    write_pin(batch, image="registry.example.invalid/some/long/path/calc:" + "f" * 40, image_pin="image")
    model = "us.anthropic.claude-haiku-4-5-20251001-v1:0"
    for i in range(2):
        write_cell(batch, f"feature_with_a_rather_long_name_{i}", NONE, model=model, passed=False)
        write_cell(batch, f"feature_with_a_rather_long_name_{i}", RAW, model=model, passed=True)
    page = tmp_path / f"{kind}.html"
    args = (
        ["repo", "report", str(batch)]
        if kind == "report"
        else ["repo", "compare", str(batch), "--baseline", NONE]
    )
    assert main([*args, "--html", str(page)]) == 0
    with Browser(chromium_bin, tmp_path, width=1100, height=900) as browser:
        shown = browser.open(page.as_uri())
        assert shown.evaluate("document.documentElement.scrollWidth > innerWidth") is False
        wrapped = shown.evaluate(
            "[...document.querySelectorAll('td')].filter(td => td.textContent.includes('claude-haiku'))"
            ".some(td => td.getClientRects()[0].height > 30)"
        )
        assert wrapped is False
