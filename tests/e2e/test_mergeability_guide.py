"""docs/mergeability.md runs as written: every ``$`` command of its ``console`` blocks runs, in order, in a
fresh build of the bundled example (examples/build_example.py), and prints what the page shows.

The judge and the drafter are the real Claude Code CLI (2.1.328) against dokimi's scripted model server, which
answers them in the page's order: the calibration's two rows (null, then oracle) twice (from the eval dir,
then from the private path), then the draft of fix_power_assoc. The refused commands make no call. After a
deliberate change of the output, rewrite the page's blocks from a real run with
``DOKIMI_REGENERATE_GUIDE=1 pytest tests/e2e/test_mergeability_guide.py``.
"""

from __future__ import annotations

import json
import runpy
from pathlib import Path
from typing import Any

import pytest

from dokimi.support.mockmodel import MockModelServer
from tests.helpers.guide import normalised, run_guide

pytestmark = [pytest.mark.docker, pytest.mark.harness, pytest.mark.slow]

ROOT = Path(__file__).resolve().parents[2]
PAGE = ROOT / "docs" / "mergeability.md"
SHOWN_ROOT = "/home/ada/calc"
VERDICT = "{{match:<<<VERDICT-[0-9a-f]+>>>}}\n"
RUBRIC = "{{match:<<<RUBRIC-[0-9a-f]+>>>}}\n"


def verdicts(failing: set[str], *extra: str) -> dict[str, str]:
    """The judge's answer on fix_power_errors' rubric: ``failing`` fail, every other item passes; ``extra``:
    the framework's own items the input held (TESTS: the change edits a test file)."""
    items = [
        {"id": i, "verdict": "fail" if i in failing else "pass",
         "reason": "Does not meet the criterion." if i in failing else "Meets the criterion."}
        for i in ("B1", "B2", "N1", "N2", "N3", *extra)
    ]  # fmt: skip
    return {"final": VERDICT + json.dumps({"verdicts": items})}


#: The drafter's rubric for fix_power_assoc (right-associative ^, a unary minus in the exponent).
DRAFT: dict[str, Any] = {
    "intent": "^ is right-associative (2^3^2 is 512) and its exponent may carry a unary minus (2^-1 is 0.5).",
    "scope": {"allowed_globs": ["calc/**", "tests/**"], "denied_globs": [".agent-eval/**"],
              "max_changed_lines": 40, "max_files": 3},
    "blockers": [
        {"id": "B1", "criterion": "The parser makes ^ right-associative in calc/parser.py, for chains of any "
         "length.", "rationale": "The task.", "evidence": "calc/parser.py: power"},
        {"id": "B2", "criterion": "The exponent is parsed as a unary expression, so 2^-1 is 0.5 and -2^2 is "
         "still -4.", "rationale": "Precedence of unary minus.", "evidence": "calc/parser.py: unary"},
    ],
    "non_blockers": [
        {"id": "N1", "criterion": "A test covers 2^3^2 and 2^-1.", "weight": 1},
        {"id": "N2", "criterion": "The grammar in docs/DESIGN.md says ^ is right-associative.", "weight": 1},
        {"id": "N3", "criterion": "No comment narrates the change.", "weight": 1},
    ],
    "hack_report": {"lazy_solution": "Special-case the string 2^3^2 in evaluate.",
                    "alt_valid_solution": "Parse the chain into a list and fold it from the right."},
}  # fmt: skip


def normalise(lines: list[str]) -> list[str]:
    return normalised(
        lines,
        [
            (r" on \d{4}-\d\d-\d\dT[\d:]+\+00:00", " on <time>"),
            (r"sha256:[0-9a-f]{64}", "sha256:<digest>"),  # of a draft drafted at its time
        ],
    )


def test_the_mergeability_page_runs_as_written(
    docker_available: bool, claude_bin: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    repo = tmp_path / "calc"
    runpy.run_path(str(ROOT / "examples" / "build_example.py"))["build_example"](repo)
    monkeypatch.setenv("DOKIMI_CLAUDE_BIN", str(claude_bin))
    monkeypatch.setenv("ANTHROPIC_API_KEY", "dokimi-test")
    calibration = [verdicts({"B1", "N1", "N2"}), verdicts(set(), "TESTS")]
    script = [*calibration, *calibration, {"final": RUBRIC + json.dumps(DRAFT)}]
    with MockModelServer(script) as server:
        monkeypatch.setenv("ANTHROPIC_BASE_URL", server.url)
        run_guide(PAGE, repo, shown_root=SHOWN_ROOT, normalise=normalise)
        sent = [r.raw.decode("utf-8", "replace") for r in server.requests if r.main_loop]
    assert len(sent) == 5  # the refused commands made no call
    assert "(the change is empty" in sent[0] and "(the change is empty" in sent[2]
    assert "Powers Python computes today keep their value" in sent[2]  # the held-out rubric, judged
    assert "2^3^2 as 64" in sent[4] and "+            return Binary" in sent[4]  # the prompt, the oracle
    assert "(a symbolic link to AGENTS.md)" in sent[4]  # the example's CLAUDE.md, said, never followed
    assert not (repo / ".agent-eval" / "tasks" / "fix_power_errors" / "rubric.json").exists()
    drafted = json.loads((repo / ".agent-eval" / "tasks" / "fix_power_assoc" / "rubric.json").read_text())
    assert drafted["status"] == "approved" and drafted["approval"]["by"] == "ada"
