"""Each verified harness other than Claude Code runs a dry run of the bundled example in the locked-down agent
container (``repo run --harness H --dry-run``): with the scripts derived from the oracles every gated task
passes exactly as its oracle does, and with a null script (an agent that only answers) every gated task fails;
a batch cap of $0.01 holds no cell back (a dry run pays nothing).
(Claude Code's own batch e2e is tests/e2e/test_batch_e2e.py.)
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from dokimi.batch import cell_dir
from dokimi.harness.profile import builtin_profiles, load_profile
from dokimi.harness.runtime import is_node_script
from tests.helpers.runs import dokimi_cli

pytestmark = [pytest.mark.docker, pytest.mark.harness]

GATED = ("feature_variables", "fix_power_assoc", "test_division_by_zero")
SCORED = "review_cache"


MODELS = {"gemini-cli": "gemini-2.5-flash", "qwen-code": "qwen3-coder-plus"}
"""The model a harness is asked for, where gpt-5-mini is not one it takes."""


@pytest.mark.parametrize("harness", [name for name in builtin_profiles() if name != "claude-code"])
def test_a_dry_run_of_the_example_passes_as_the_oracles_do_and_a_null_script_fails(
    docker_available: bool,
    request: pytest.FixtureRequest,
    monkeypatch: pytest.MonkeyPatch,
    example: Path,
    tmp_path: Path,
    harness: str,
) -> None:
    binary = request.getfixturevalue("pinned_harness")(harness)
    pin = load_profile(harness).verification
    assert pin is not None
    model, version = MODELS.get(harness, "gpt-5-mini"), pin.version
    if is_node_script(binary):  # a Node program: the pinned Node is mounted beside it, not the host's
        monkeypatch.setenv("DOKIMI_NODE_BIN", str(request.getfixturevalue("node_bin")))
    null = tmp_path / "null.json"
    null.write_text(json.dumps([{"final": "I changed nothing."}]))
    out = tmp_path / "runs"
    args = [
        "repo", "run", f"{example}@HEAD", "--manifest", ".agent-eval/repo-eval.yaml", "--harness", harness,
        *(f"--task={task}" for task in (*GATED, SCORED)),
        "--arm", "guidance:none,guidance:raw", "--model", model, "--reps", "1", "--batch", harness,
        "--out", str(out), "--bin", str(binary), "--dry-run", "--dry-run-script", f"guidance:none={null}",
        "-j", "2", "--json", "--max-batch-usd", "0.01",
    ]  # fmt: skip
    done = dokimi_cli(args)
    assert done.returncode == 0, done.stderr
    summary = json.loads(done.stdout)
    assert (summary["ran"], summary["harness"], summary["harness_version"]) == (8, harness, version)
    # a dry run pays nothing, so no budget holds a cell back (codex's trace has no cost: each dry cell used to
    # be charged its $1 cap, and a $2.5 batch cap stopped after two cells)
    assert summary["dry_run"] is True and summary["spent_usd"] == 0 and summary["not_started"] == 0
    assert "--max-batch-usd 0.01 does not apply to a dry run" in done.stderr
    batch = out / harness
    for task in (*GATED, SCORED):
        oracle = json.loads(
            (cell_dir(batch, task, "guidance:raw", model, None, 0) / "result.json").read_text()
        )
        nothing = json.loads(
            (cell_dir(batch, task, "guidance:none", model, None, 0) / "result.json").read_text()
        )
        assert not oracle["grader_failure"] and not nothing["grader_failure"], task
        if task in GATED:
            assert (oracle["passed"], nothing["passed"]) == (True, False), task
        else:
            assert (oracle["metrics"]["recall"], nothing["metrics"]["recall"]) == (1.0, 0.0)
    raw = cell_dir(batch, "fix_power_assoc", "guidance:raw", model, None, 0)
    events = [json.loads(line) for line in (raw / "events.jsonl").read_text().splitlines()]
    if harness == "aider":  # no tools: the reply names the file (Aider adds it), then edits it as text
        assert [(e["kind"], e["path"]) for e in events] == [
            ("read", "calc/parser.py"),
            ("edit", "calc/parser.py"),
        ]
        return
    rc = None if harness == "gemini-cli" else 0  # Gemini CLI reports no exit code
    assert [(e["kind"], e["rc"]) for e in events] == [("command", rc)] and "git apply" in events[0]["text"]
