"""The real OpenCode CLI (1.18.33) through the built-in opencode profile against the scripted model server on
the host: the endpoint and model reach it only through its config file, each tool level (an agent of that
config) offers what the profile says, commands run with their exit codes in the trace, the trace converts."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import pytest

from dokimi import process
from dokimi.harness.profile import AgentRequest, Placement, build_invocation, load_profile
from dokimi.harness.trace import convert_file
from dokimi.mockmodel import MockModelServer
from dokimi.support import support_dir
from tests.helpers.git import git_repo

pytestmark = pytest.mark.harness
MODEL = "gpt-5-mini"


def run_opencode(opencode: Path, tmp_path: Path, script: list[dict[str, Any]], tools: str) -> Any:
    repo = tmp_path / "repo"
    if not repo.exists():
        git_repo(repo, {"f.txt": "before\n"})
    config, home = tmp_path / f"config-{tools}", tmp_path / f"home-{tools}"
    config.mkdir()
    home.mkdir()
    profile = load_profile("opencode")
    with MockModelServer(script) as server:
        level = "all" if tools == "web" else tools
        inv = build_invocation(
            profile,
            AgentRequest(prompt="go", model=MODEL, max_turns=5, budget=1, tools=level),  # type: ignore[arg-type]
            Placement(bin=str(opencode), config_dir=config, support_dir=support_dir(), home=str(home)),
            environ={"PATH": os.environ["PATH"], **profile.dry_run_env},
            endpoint=server.url,
            web=tools == "web",
        )
        assert "OPENAI_BASE_URL" not in inv.env
        inv.write_config_files(config)
        trace = tmp_path / f"trace-{tools}.jsonl"
        done = process.run(inv.argv, timeout=180, env=inv.env, cwd=repo, stdout_file=trace)
        main = [r for r in server.requests if r.main_loop]
        offered = {t["function"]["name"] for t in main[0].body.get("tools", [])}
        side = [r for r in server.requests if not r.main_loop]
    return done, offered, trace, side


def test_tool_levels_commands_and_the_trace(opencode_bin: Path, tmp_path: Path) -> None:
    script = [
        {
            "tool_use": {
                "name": "bash",
                "input": {"command": "sed -i s/before/after/ f.txt; echo out; exit 3"},
            }
        },
        {"final": "I changed f.txt."},
    ]
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
    assert [(e["kind"], e["text"], e["rc"]) for e in conv.events] == [
        ("command", "sed -i s/before/after/ f.txt; echo out; exit 3", 3)
    ]
    assert conv.events[0]["output"] == "out\n"
    assert conv.answer == "I changed f.txt." and conv.turns == 2
    assert conv.complete and not conv.is_error
