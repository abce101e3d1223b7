"""Agent modes end to end: a dry-run batch of the bundled example's autonomous and review tasks through the
real Claude Code CLI and the scripted model, the rubric judge a scripted Claude Code on the host.

Three tasks, each with its mode's success rule (none of them names a gate):

- fix_power_errors (autonomous: pass, mergeable, own_tests_fail_on_base);
- review_functions (review with a decoy: decoys_not_flagged; recall is its score);
- review_functions_clean (the clean diff of review_functions: no_blocking_finding).

Three arms:

- guidance:raw plays the scripts derived from the oracles: the fix with a test that fails on the base, and
  the gold answers, which flag no decoy and raise nothing that blocks on the clean diff;
- guidance:none plays one script everywhere: it appends a test that passes on the base too, and answers with
  a finding on the decoy and one that blocks;
- guidance:tree@review is restricted to the review tasks: it plays the oracles' scripts there and runs on no
  other task.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from dokimi.batch import cell_dir
from dokimi.support.mockmodel import MockModelServer
from tests.helpers.runs import dokimi_cli

pytestmark = [pytest.mark.docker, pytest.mark.harness, pytest.mark.slow]

MODEL = "claude-haiku-4-5"
FIX, REVIEW, CLEAN = "fix_power_errors", "review_functions", "review_functions_clean"
MARKER = "{{match:<<<VERDICT-[0-9a-f]+>>>}}\n"
#: What guidance:none's agent does on every task: a test that passes on the base as well, then a review that
#: flags the decoy (ln's domain, lines 16-18) and blocks on a diff that has nothing to block.
PASSING_TEST = (
    "printf '\\n\\ndef test_one_plus_one_is_two():\\n    assert evaluate(\"1 + 1\") == 2\\n' "
    ">> tests/test_evaluator.py"
)
LAZY_REVIEW = (
    "calc/evaluator.py:17: ln does not check that x is positive, so ln(0) crashes.\n"
    "calc/evaluator.py:26: exp overflows for large arguments and nothing catches it."
)


def judge_answer() -> dict[str, str]:
    """Every rubric item of fix_power_errors passes (and the fixed test-integrity blocker: both agents
    change tests/test_evaluator.py)."""
    ids = ["B1", "B2", "N1", "N2", "N3", "TESTS"]
    verdicts = [{"id": i, "verdict": "pass", "reason": "Meets the criterion."} for i in ids]
    return {"final": MARKER + json.dumps({"verdicts": verdicts})}


@pytest.fixture
def scripted_judge(monkeypatch: pytest.MonkeyPatch) -> Iterator[MockModelServer]:
    """The judge's model: the scripted server on the host, reached through the environment dokimi passes to
    the judge's Claude Code."""
    with MockModelServer([judge_answer(), judge_answer()]) as server:
        monkeypatch.setenv("ANTHROPIC_BASE_URL", server.url)
        monkeypatch.setenv("ANTHROPIC_API_KEY", "dokimi-test")
        yield server


def result(batch: Path, task: str, arm: str) -> dict[str, Any]:
    document: dict[str, Any] = json.loads(
        (cell_dir(batch, task, arm, MODEL, None, 0) / "result.json").read_text()
    )
    return document


def document(batch: Path, task: str, arm: str, name: str) -> dict[str, Any]:
    found: dict[str, Any] = json.loads((cell_dir(batch, task, arm, MODEL, None, 0) / name).read_text())
    return found


def test_each_mode_gets_its_rule_and_own_tests_tell_a_real_test_from_one_that_passes_on_the_base(
    docker_available: bool,
    claude_bin: Path,
    example: Path,
    tmp_path: Path,
    scripted_judge: MockModelServer,
) -> None:
    lazy = tmp_path / "lazy.json"
    lazy.write_text(
        json.dumps(
            [{"tool_use": {"name": "Bash", "input": {"command": PASSING_TEST}}}, {"final": LAZY_REVIEW}]
        )
    )
    out = tmp_path / "runs"
    args = [
        "repo", "run", f"{example}@HEAD", "--manifest", ".agent-eval/repo-eval.yaml",
        "--task", FIX, "--task", REVIEW, "--task", CLEAN,
        "--arm", "guidance:raw,guidance:none,guidance:tree@review", "--model", MODEL, "--reps", "1",
        "--batch", "modes", "--out", str(out), "--bin", str(claude_bin), "--dry-run",
        "--dry-run-script", f"guidance:none={lazy}", "--judge-model", MODEL, "--judge-bin", str(claude_bin),
        "-j", "2", "--json",
    ]  # fmt: skip
    proc = dokimi_cli(args, timeout=1800)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert json.loads(proc.stdout)["ran"] == 8  # guidance:tree@review runs on the two review tasks only
    batch = out / "modes"
    assert not cell_dir(batch, FIX, "guidance:tree@review", MODEL, None, 0).exists()

    # autonomous: the oracle's fix and its test, which passes on the fix and fails on the base
    fixed = result(batch, FIX, "guidance:raw")
    assert fixed["mode"] == "autonomous" and fixed["prompt_style"] == "issue"
    assert fixed["gate_results"] == {"pass": True, "mergeable": True, "own_tests_fail_on_base": True}
    assert fixed["passed"] is True
    own = document(batch, FIX, "guidance:raw", "own_tests.json")
    assert own["own_tests_fail_on_base"] is True and own["test_files"] == ["tests/test_evaluator.py"]
    assert [(r["tree"], r["passed"]) for r in own["runs"]] == [("agent", True), ("base", False)]
    # ... and an agent whose only change is a test that passes on the base as well
    lazy_fix = result(batch, FIX, "guidance:none")
    assert lazy_fix["metrics"]["own_tests_fail_on_base"] is False and lazy_fix["passed"] is False
    own = document(batch, FIX, "guidance:none", "own_tests.json")
    assert [(r["tree"], r["passed"]) for r in own["runs"]] == [("agent", True), ("base", True)]
    assert own["reason"] == "the agent's tests pass on the base as well"

    # review: the gold answer flags no decoy (gated) and finds both threads (its score)
    for arm in ("guidance:raw", "guidance:tree@review"):
        reviewed = result(batch, REVIEW, arm)
        assert reviewed["gated"] and reviewed["gated_with_score"], reviewed
        assert reviewed["gate_results"] == {"decoys_not_flagged": True} and reviewed["score"] == 1.0
        clean = result(batch, CLEAN, arm)
        assert clean["gate_results"] == {"no_blocking_finding": True} and clean["passed"] is True
    review = document(batch, CLEAN, "guidance:raw", "review.json")
    assert [(f["lines"], f["blocking"]) for f in review["findings"]] == [([16, 16], False)]  # a nit
    # the lazy review flags the decoy, and blocks on the clean diff
    lazy_review = result(batch, REVIEW, "guidance:none")
    assert lazy_review["passed"] is False and lazy_review["score"] == 0.5
    assert document(batch, REVIEW, "guidance:none", "review.json")["flagged"] == ["ln_domain"]
    lazy_clean = result(batch, CLEAN, "guidance:none")
    assert lazy_clean["gate_results"] == {"no_blocking_finding": False}
    assert lazy_clean["metrics"]["blocking_findings"] == 2

    # the report splits rows by mode; the comparison of the restricted arm keeps to review tasks
    reported = dokimi_cli(["repo", "report", str(batch), "--json"])
    assert reported.returncode == 0, reported.stderr
    rows = {(r["task"], r["arm"]): r for r in json.loads(reported.stdout)["rows"]}
    assert {r["mode"] for r in rows.values()} == {"autonomous", "review"}
    assert (
        rows[(REVIEW, "guidance:raw")]["score_mean"] == 1.0 and rows[(REVIEW, "guidance:raw")]["passes"] == 1
    )
    summaries = {(a["arm"], a["mode"]) for a in json.loads(reported.stdout)["arms"]}
    assert ("guidance:tree@review", "autonomous") not in summaries
    assert ("guidance:raw", "autonomous") in summaries and ("guidance:raw", "review") in summaries
    compared = dokimi_cli(
        ["repo", "compare", f"{batch}/guidance:tree@review", "--baseline", f"{batch}/guidance:raw", "--json"]
    )
    assert compared.returncode == 0, compared.stderr
    doc = json.loads(compared.stdout)
    assert [c["mode"] for c in doc["comparisons"]] == ["review"]
    modes_warned = [w["message"] for w in doc["warnings"] if w["code"] == "mode_not_compared"]
    assert len(modes_warned) == 1 and "ran tasks of mode autonomous" in modes_warned[0]
