"""The real Codex CLI (0.169.0) through the built-in codex profile against the scripted model server.

The profile's argv, environment and config.toml come from dokimi (build_invocation), exactly as in a cell: the
endpoint reaches Codex only through config.toml (no OPENAI_BASE_URL in its environment), commands really run,
and each tool level offers what the profile says it does.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from dokimi import process
from dokimi.harness.profile import load_profile
from dokimi.harness.traces import convert_file
from tests.e2e.mockmodel_support import ScriptedRun, run_scripted, workspace

pytestmark = pytest.mark.harness

MODEL = "gpt-5-mini"
WEB_TOOLS = {"web_search", "web_search_preview"}


def run_codex(
    codex_bin: Path, tmp_path: Path, script: list[dict[str, Any]], tools: str = "all"
) -> tuple[process.Completed, ScriptedRun, Path]:
    repo, config, home = workspace(tmp_path, tools, {"AGENTS.md": "# notes\n", "f.txt": "before\n"})
    trace = tmp_path / f"trace-{tools}.jsonl"
    run = run_scripted(
        "codex", script, bin=str(codex_bin), repo=repo, config=config, home=home,
        prompt="Change before to after in f.txt", model=MODEL, level=tools, trace=trace,
        capture_path=tmp_path / f"capture-{tools}.jsonl", timeout=120,
    )  # fmt: skip
    assert "OPENAI_BASE_URL" not in run.inv.env
    return run.done, run, trace


def offered(run: ScriptedRun) -> set[str]:
    body = run.requests[0].body
    return {t.get("name") or t.get("type") for t in body["tools"]}


def test_a_scripted_command_edits_the_file_and_the_trace_converts(codex_bin: Path, tmp_path: Path) -> None:
    script: list[dict[str, Any]] = [
        {"tool_use": {"name": "exec_command", "input": {"cmd": "sed -i s/before/after/ f.txt"}}},
        {"tool_use": {"name": "exec_command", "input": {"cmd": "echo out; exit 3"}}},
        {"final": "I changed f.txt."},
    ]
    done, run, trace = run_codex(codex_bin, tmp_path, script)
    assert done.returncode == 0, done.stderr
    assert run.turns_played == 3
    assert all(r.path == "/responses" for r in run.requests)
    assert (tmp_path / "repo" / "f.txt").read_text() == "after\n"
    conversion = convert_file(trace, "codex-json")
    commands = [(e["text"], e["rc"]) for e in conversion.events if e["kind"] == "command"]
    assert commands == [("sed -i s/before/after/ f.txt", 0), ("echo out; exit 3", 3)]
    assert conversion.events[1]["output"] == "out\n"
    assert conversion.answer == "I changed f.txt."
    assert conversion.complete and not conversion.is_error and conversion.turns == 1
    assert conversion.garbage_lines == 0


def test_each_tool_level_offers_what_the_profile_says(codex_bin: Path, tmp_path: Path) -> None:
    write = [{"tool_use": {"name": "exec_command", "input": {"cmd": "cat f.txt; echo x > new.txt"}}}]
    tools = {}
    for level in ("none", "read", "all", "web"):
        done, run, _ = run_codex(codex_bin, tmp_path, [*write, {"final": "ok"}], level)
        assert done.returncode == 0, done.stderr
        tools[level] = offered(run)
        if level == "read":  # the shell runs, in the read-only sandbox: it reads and cannot write
            output = run.requests[1].body["input"][-1]["output"]
            assert "before" in output and "Read-only file system" in output
            assert not (tmp_path / "repo" / "new.txt").exists()
    assert "exec_command" not in tools["none"]
    assert tools["none"] <= {"request_user_input", "view_image"}
    assert "exec_command" in tools["read"] and "exec_command" in tools["all"]
    assert not (tools["all"] | tools["read"]) & WEB_TOOLS
    assert tools["web"] & WEB_TOOLS  # a task whose egress names hosts
    assert (tmp_path / "repo" / "new.txt").read_text() == "x\n"  # written at level all


def test_the_effort_reaches_the_request(codex_bin: Path, tmp_path: Path) -> None:
    profile = load_profile("codex")
    assert profile.effort is not None
    repo, config, home = workspace(tmp_path, "none", {"f.txt": "x\n"})
    run = run_scripted(
        "codex", [{"final": "ok"}], bin=str(codex_bin), repo=repo, config=config, home=home, prompt="hi",
        model=MODEL, level="none", max_turns=1, effort="high", timeout=120,
    )  # fmt: skip
    done, body = run.done, run.requests[0].body
    assert done.returncode == 0, done.stderr
    assert body["reasoning"]["effort"] == "high"
    assert not any("ignoring" in line for line in done.stdout.splitlines() if json.loads(line).get("item"))
