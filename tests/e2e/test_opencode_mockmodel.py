"""The real OpenCode CLI (1.18.33) through the built-in opencode profile against the scripted model server on
the host: the endpoint and model reach it only through its config file, each tool level (an agent of that
config) offers what the profile says, commands run with their exit codes in the trace, the trace converts."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from dokimi.harness.traces import convert_file
from tests.e2e.mockmodel_support import EDIT_THEN_EXIT_3, edit_then_exit_3, run_scripted, workspace

pytestmark = pytest.mark.harness
MODEL = "gpt-5-mini"


def run_opencode(opencode: Path, tmp_path: Path, script: list[dict[str, Any]], tools: str) -> Any:
    repo, config, home = workspace(tmp_path, tools, {"f.txt": "before\n"})
    trace = tmp_path / f"trace-{tools}.jsonl"
    run = run_scripted(
        "opencode", script, bin=str(opencode), repo=repo, config=config, home=home, prompt="go", model=MODEL,
        level=tools, trace=trace,
    )  # fmt: skip
    assert "OPENAI_BASE_URL" not in run.inv.env
    offered = {t["function"]["name"] for t in run.main[0].body.get("tools", [])}
    side = [r for r in run.requests if not r.main_loop]
    return run.done, offered, trace, side


def test_tool_levels_commands_and_the_trace(opencode_bin: Path, tmp_path: Path) -> None:
    script = edit_then_exit_3("bash")
    offered = {}
    for level in ("none", "read", "all", "web"):
        done, offered[level], trace, side = run_opencode(opencode_bin, tmp_path, script, level)
        assert done.returncode == 0, done.stderr
        assert len(side) <= 1  # the session-title request, which never plays the script
    assert offered["none"] == set()
    assert offered["read"] <= {"read", "glob", "grep", "list"} and "read" in offered["read"]
    assert "bash" in offered["all"] and not offered["all"] & {"webfetch", "websearch"}
    assert "webfetch" in offered["web"]  # a task whose egress names hosts
    assert (tmp_path / "repo" / "f.txt").read_text() == "after\n"
    conv = convert_file(trace, "opencode-json")
    assert [(e["kind"], e["text"], e["rc"]) for e in conv.events] == [("command", EDIT_THEN_EXIT_3, 3)]
    assert conv.events[0]["output"] == "out\n"
    assert conv.answer == "I changed f.txt." and conv.turns == 2
    assert conv.complete and not conv.is_error
