"""docs/review-rules.md runs as written: every ``$`` command of its ``console`` blocks runs, in order, in a
fresh copy of the bundled example (examples/build_example.py), and prints what the page shows; every file
block (```` ```jsonl file=PATH ````) is a file the reader writes.

Mining asks the judge's model through the real Claude Code CLI (2.1.328); here the model is dokimi's scripted
server, which groups the page's comments as written below, naming each comment by the reference the prompt
gave it. After a deliberate change of the output, rewrite the page's blocks from a real run with
``DOKIMI_REGENERATE_GUIDE=1 pytest tests/e2e/test_review_rules_guide.py``.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from dokimi.support.mockmodel import MockModelServer
from tests.helpers.guide import CTX_DIGEST, guide_steps, run_guide
from tests.helpers.review_comments import grouping_answer

pytestmark = [pytest.mark.docker, pytest.mark.harness, pytest.mark.slow]

PAGE = Path(__file__).resolve().parents[2] / "docs" / "review-rules.md"

#: How the scripted model groups the page's comments: (rule, paths, the comments' numbers after ``#r``).
GROUPS = [
    ("Every public function in calc/ has a docstring.", ["calc/**/*.py"], [202, 502, 902]),
    ("A cache keys on every input the cached value depends on.", ["calc/**/*.py"], [201, 501, 901]),
    ("Tests are plain pytest functions with plain asserts, never unittest classes.", ["tests/**"],
     [301, 601, 801]),
    ("The command line reports an error on stderr and exits with status 2.", ["calc/__main__.py"],
     [401, 602, 903]),
    ("Prefer f-strings to % formatting.", ["**/*.py"], [302, 503, 802]),
]  # fmt: skip


def normalise(lines: list[str]) -> list[str]:
    return [re.sub(*CTX_DIGEST, line) for line in lines]


def page_comments() -> dict[int, dict[str, object]]:
    (step,) = [s for s in guide_steps(PAGE.read_text().splitlines()) if s.file == "review_comments.jsonl"]
    rows = [json.loads(line) for line in step.content.splitlines() if line.strip()]
    return {int(str(row["url"]).rsplit("#r", 1)[1]): row for row in rows}


def test_the_review_rules_page_runs_as_written(
    example: Path,
    docker_available: bool,
    claude_bin: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    comments = page_comments()
    answer = grouping_answer(
        [(text, paths, [comments[n] for n in refs], None) for text, paths, refs in GROUPS]
    )
    monkeypatch.setenv("DOKIMI_CLAUDE_BIN", str(claude_bin))
    monkeypatch.setenv("ANTHROPIC_API_KEY", "dokimi-test")
    with MockModelServer([{"final": answer}]) as server:
        monkeypatch.setenv("ANTHROPIC_BASE_URL", server.url)
        steps = run_guide(PAGE, example, shown_root="calc", normalise=normalise)
        mined = [r for r in server.requests if r.main_loop]
    assert len(mined) == 1  # the mining's one call
    assert "pull request #7," not in mined[0].raw.decode()  # review_cache's source: never shown to the model
    commands = [s.command for s in steps if s.command]
    assert any(c.startswith("dokimi repo rules mine") for c in commands)
    rules = json.loads((example / ".agent-eval" / "review_rules.json").read_text())
    shipped = json.loads((Path(__file__).resolve().parents[2] / "examples" / "calc" / ".agent-eval" /
                          "review_rules.json").read_text())  # fmt: skip
    strip = lambda doc: [{k: v for k, v in r.items() if k != "triage"} for r in doc["rules"]]  # noqa: E731
    assert strip(rules) == strip(shipped)  # the example ships what this page ends with
