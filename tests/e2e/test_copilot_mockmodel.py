"""The real GitHub Copilot CLI (1.0.102) through the built-in copilot profile against the scripted model
server on the host, through its bring-your-own-key provider: each tool level offers what the profile says,
commands really run with their exit codes in the trace, and the trace converts."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from dokimi.harness.traces import convert_file
from tests.e2e.mockmodel_support import EDIT_THEN_EXIT_3, edit_then_exit_3, run_scripted, workspace

pytestmark = pytest.mark.harness
MODEL = "gpt-5-mini"


def run_copilot(copilot: Path, tmp_path: Path, script: list[dict[str, Any]], tools: str) -> Any:
    repo, config, home = workspace(tmp_path, tools, {"f.txt": "before\n"})
    trace = tmp_path / f"trace-{tools}.jsonl"
    run = run_scripted(
        "copilot", script, bin=str(copilot), repo=repo, config=config, home=home, prompt="go", model=MODEL,
        level=tools, endpoint_env=True, trace=trace,
    )  # fmt: skip
    offered = {t.get("name") for t in run.requests[0].body.get("tools", [])}
    return run.done, offered, trace


def test_tool_levels_commands_and_the_trace(copilot_bin: Path, tmp_path: Path) -> None:
    script = edit_then_exit_3("bash")
    offered = {}
    for level in ("none", "read", "all"):
        done, offered[level], trace = run_copilot(copilot_bin, tmp_path, script, level)
        assert done.returncode == 0, done.stderr
    assert offered["none"] == set()
    assert offered["read"] == {"view", "grep", "glob"}
    assert "bash" in offered["all"] and not offered["all"] & {"web_fetch", "web_search"}
    assert (tmp_path / "repo" / "f.txt").read_text() == "after\n"
    conv = convert_file(trace, "copilot-json")
    assert [(e["kind"], e["text"], e["rc"]) for e in conv.events] == [("command", EDIT_THEN_EXIT_3, 3)]
    assert conv.events[0]["output"].startswith("out\n")
    assert conv.answer == "I changed f.txt." and conv.turns == 2
    assert conv.complete and not conv.is_error
