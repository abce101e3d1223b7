"""The real GitHub Copilot CLI (1.0.102) through the built-in copilot profile against the scripted model
server on the host, through its bring-your-own-key provider: each tool level offers what the profile says,
commands really run with their exit codes in the trace, and the trace converts."""

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


def run_copilot(copilot: Path, tmp_path: Path, script: list[dict[str, Any]], tools: str) -> Any:
    repo = tmp_path / "repo"
    if not repo.exists():
        git_repo(repo, {"f.txt": "before\n"})
    config, home = tmp_path / f"config-{tools}", tmp_path / f"home-{tools}"
    config.mkdir()
    home.mkdir()
    profile = load_profile("copilot")
    with MockModelServer(script) as server:
        inv = build_invocation(
            profile,
            AgentRequest(prompt="go", model=MODEL, max_turns=5, budget=1, tools=tools),
            Placement(bin=str(copilot), config_dir=config, support_dir=support_dir(), home=str(home)),
            environ={"PATH": os.environ["PATH"]},
            extra_env={**profile.dry_run_env, "COPILOT_PROVIDER_BASE_URL": server.url},
        )
        trace = tmp_path / f"trace-{tools}.jsonl"
        done = process.run(inv.argv, timeout=180, env=inv.env, cwd=repo, stdout_file=trace)
        offered = {t.get("name") for t in server.requests[0].body.get("tools", [])}
    return done, offered, trace


def test_tool_levels_commands_and_the_trace(copilot_bin: Path, tmp_path: Path) -> None:
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
    for level in ("none", "read", "all"):
        done, offered[level], trace = run_copilot(copilot_bin, tmp_path, script, level)
        assert done.returncode == 0, done.stderr
    assert offered["none"] == set()
    assert offered["read"] == {"view", "grep", "glob"}
    assert "bash" in offered["all"] and not offered["all"] & {"web_fetch", "web_search"}
    assert (tmp_path / "repo" / "f.txt").read_text() == "after\n"
    conv = convert_file(trace, "copilot-json")
    assert [(e["kind"], e["text"], e["rc"]) for e in conv.events] == [
        ("command", "sed -i s/before/after/ f.txt; echo out; exit 3", 3)
    ]
    assert conv.events[0]["output"].startswith("out\n")
    assert conv.answer == "I changed f.txt." and conv.turns == 2
    assert conv.complete and not conv.is_error
