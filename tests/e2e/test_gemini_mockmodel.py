"""The real Gemini CLI 0.61.0 on the pinned Node, through the built-in gemini-cli profile, against the
scripted model server on the host: each tool level offers what the profile says, a shell call runs, the trace
converts. (The dry run in the agent container is tests/e2e/test_harness_dry_runs.py.)"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from dokimi.harness.traces import convert_file
from tests.e2e.mockmodel_support import run_scripted, workspace

pytestmark = pytest.mark.harness
READ_TOOLS = {"read_file", "read_many_files", "list_directory", "glob", "grep_search"}


def run_gemini(node: Path, gemini: Path, tmp_path: Path, script: list[dict[str, Any]], tools: str) -> Any:
    repo, config, home = workspace(tmp_path, tools, {"f.txt": "before\n"})
    trace = tmp_path / f"trace-{tools}.jsonl"
    run = run_scripted(
        "gemini-cli", script, bin=str(gemini.resolve()), repo=repo, config=config, home=home, prompt="go",
        model="gemini-2.5-flash", level=tools, launcher=[str(node)], path=f"{node.parent}:/usr/bin:/bin",
        endpoint_env=True, trace=trace,
    )  # fmt: skip
    offered = {d["name"] for t in run.requests[0].body.get("tools", []) for d in t["functionDeclarations"]}
    return run.done, offered, trace


def test_tool_levels_and_a_shell_call(node_bin: Path, gemini_bin: Path, tmp_path: Path) -> None:
    script = [{"tool_use": {"name": "run_shell_command", "input": {"command": "echo hi > new.txt"}}}]
    offered = {}
    for level in ("none", "read", "all", "web"):
        done, offered[level], trace = run_gemini(
            node_bin, gemini_bin, tmp_path, [*script, {"final": "ok"}], level
        )
        assert done.returncode == 0, done.stderr
    assert offered["none"] == set()
    assert offered["read"] and offered["read"] <= READ_TOOLS
    assert "run_shell_command" in offered["all"] and not offered["all"] & {"web_fetch", "google_web_search"}
    assert {"web_fetch", "google_web_search"} <= offered["web"]  # a task whose egress names hosts
    assert (tmp_path / "repo" / "new.txt").read_text() == "hi\n"
    conv = convert_file(trace, "gemini-stream-json")
    assert [(e["kind"], e["text"], e["rc"]) for e in conv.events] == [("command", "echo hi > new.txt", None)]
    assert conv.answer == "ok" and conv.complete and not conv.is_error
