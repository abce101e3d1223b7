"""The report site of a real batch: the bundled example, fix_power_assoc graded by ``builtin:pytest``, two
arms x two reps through the real Claude Code CLI and the scripted model server (``repo run --dry-run``),
then ``repo report --html``, read in headless Chromium over the DevTools protocol.

guidance:raw plays the task's oracle (it fixes the bug); guidance:none plays a script whose agent runs one
command that prints ``<script>`` and an ``<img onerror=...>`` handler, then answers with the same text. So:

- the first screen shows the per-task delta (+1: raw 2/2, none 0/2) and the guidance table for both arms;
- a raw cell's page shows the agent's diff (kept although the task has no rubric) and both FAIL_TO_PASS
  tests passed, the PASS_TO_PASS test passed; a none cell's page shows them failed;
- the hostile transcript line runs nothing: no console message, no request but the page itself.

Screenshots are kept in the test's temporary directory (printed).
"""

from __future__ import annotations

import json
import runpy
import sys
import uuid
from pathlib import Path

import pytest

from tests.helpers.builtin_example import FAIL_TO_PASS, PASS_TO_PASS, builtin_change
from tests.helpers.chromium import Browser, Page
from tests.helpers.git import commit
from tests.helpers.runs import dokimi_cli

pytestmark = [pytest.mark.docker, pytest.mark.harness]

ROOT = Path(__file__).resolve().parents[2]
TASK = "fix_power_assoc"
MODEL = "claude-haiku-4-5"
HOSTILE = '<script>window.__pwned = 1; console.log(1)</script><img src=x onerror="window.__pwned = 2">'


def _ok(args: list[str], timeout: float = 900) -> str:
    done = dokimi_cli(args, timeout=timeout)
    assert done.returncode == 0, f"dokimi {' '.join(args)}\n{done.stdout}\n{done.stderr}"
    return done.stdout


def _rows(page: Page, selector: str) -> list[list[str]]:
    return page.evaluate(  # type: ignore[no-any-return]
        f"[...document.querySelectorAll('{selector} tbody tr')].map(r => [...r.cells].map(c => "
        "c.textContent.trim()))"
    )


def test_the_site_of_a_dry_run_of_the_example_answers_the_question_and_shows_each_cell(
    docker_available: bool, claude_bin: Path, chromium_bin: Path, tmp_path: Path
) -> None:
    repo = tmp_path / "calc"
    runpy.run_path(str(ROOT / "examples" / "build_example.py"))["build_example"](repo)
    eval_sha = commit(repo, "fix_power_assoc graded by builtin:pytest", files=builtin_change(repo))
    script = tmp_path / "hostile.json"
    script.write_text(
        json.dumps(
            [
                {"tool_use": {"name": "Bash", "input": {"command": f"printf '%s\\n' '{HOSTILE}'"}}},
                {"final": "I changed nothing. " + HOSTILE},
            ]
        )
    )
    batch = f"site-{uuid.uuid4().hex[:8]}"
    out = tmp_path / "runs"
    _ok([
        "repo", "run", f"{repo}@{eval_sha}", "--manifest", ".agent-eval/repo-eval.yaml", "--task", TASK,
        "--arm", "guidance:none,guidance:raw", "--model", MODEL, "--reps", "2", "--batch", batch,
        "--out", str(out), "--bin", str(claude_bin), "--dry-run", "--dry-run-script",
        f"guidance:none={script}", "-j", "2", "--json",
    ])  # fmt: skip
    site = tmp_path / "site"
    _ok(["repo", "report", str(out / batch), "--html", str(site)])
    shots = tmp_path / "screenshots"
    shots.mkdir()

    def cell(arm: str, rep: int) -> Path:
        return site / "cells" / f"{TASK}--{arm.replace(':', '_')}--{MODEL}--default--rep{rep}.html"

    with Browser(chromium_bin, tmp_path, height=800) as browser:
        index = browser.open((site / "index.html").as_uri())
        for selector in ("table.deltas", "table.guidance", "p.verdict"):
            top = index.evaluate(f"document.querySelector('{selector}').getBoundingClientRect().top")
            assert 0 <= top < 800, f"{selector} starts at {top} px, below the first screen"
        assert index.evaluate("[...document.querySelectorAll('svg.mini')].map(s => s.dataset.delta)") == [
            "1.0"
        ]
        (row,) = _rows(index, "table.deltas")
        assert row[:4] == [TASK, "0/2", "2/2", "+1.00"]
        assert [r[0] for r in _rows(index, "table.guidance")] == ["guidance:none", "guidance:raw"]
        assert index.evaluate("document.querySelector('.dryrun') !== null")  # a dry run says so
        index.screenshot(shots / "first-screen.png")
        assert index.console() == []

        raw = browser.open(cell("guidance:raw", 0).as_uri())
        diff = raw.evaluate("document.querySelector('pre.diff').textContent")
        assert "calc/parser.py" in diff and "\n+" in diff
        tests = {r[1]: (r[0], r[2]) for r in _rows(raw, "table.tests")}
        assert tests == {
            **{t: ("FAIL_TO_PASS", "passed") for t in FAIL_TO_PASS},
            **{t: ("PASS_TO_PASS", "passed") for t in PASS_TO_PASS},
        }
        raw.screenshot(shots / "raw-cell.png", full_page=True)

        none = browser.open(cell("guidance:none", 0).as_uri())
        none.evaluate("new Promise(resolve => setTimeout(resolve, 300))")
        tests = {r[1]: r[2] for r in _rows(none, "table.tests")}
        assert all(tests[t] == "failed" for t in FAIL_TO_PASS) and tests[PASS_TO_PASS[0]] == "passed"
        transcript = none.evaluate("document.querySelector('table.events').textContent")
        assert HOSTILE in transcript
        assert none.evaluate("typeof window.__pwned") == "undefined"
        assert none.console() == [] and none.requests() == [cell("guidance:none", 0).as_uri()]
        none.screenshot(shots / "none-cell.png", full_page=True)
    print(f"\nsite screenshots: {shots}", file=sys.__stderr__)
