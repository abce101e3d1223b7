"""The real Gemini CLI 0.61.0 on the pinned Node, through the built-in gemini-cli profile, against the
scripted model server on the host: each tool level offers what the profile says, a shell call runs, the trace
converts. (The dry run in the agent container is tests/e2e/test_harness_dry_runs.py.)"""

from __future__ import annotations

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
READ_TOOLS = {"read_file", "read_many_files", "list_directory", "glob", "grep_search"}


def run_gemini(node: Path, gemini: Path, tmp_path: Path, script: list[dict[str, Any]], tools: str) -> Any:
    repo = tmp_path / "repo"
    if not repo.exists():
        git_repo(repo, {"f.txt": "before\n"})
    config, home = tmp_path / f"config-{tools}", tmp_path / f"home-{tools}"
    config.mkdir()
    home.mkdir()
    profile = load_profile("gemini-cli")
    with MockModelServer(script) as server:
        inv = build_invocation(
            profile,
            AgentRequest(
                prompt="go",
                model="gemini-2.5-flash",
                max_turns=5,
                budget=1,
                tools="all" if tools == "web" else tools,  # type: ignore[arg-type]
            ),
            Placement(
                bin=str(gemini.resolve()), config_dir=config, support_dir=support_dir(), home=str(home)
            ),
            web=tools == "web",
            environ={"PATH": f"{node.parent}:/usr/bin:/bin"},
            extra_env={**profile.dry_run_env, "GOOGLE_GEMINI_BASE_URL": server.url},
        )
        inv.write_config_files(config)
        trace = tmp_path / f"trace-{tools}.jsonl"
        done = process.run([str(node), *inv.argv], timeout=180, env=inv.env, cwd=repo, stdout_file=trace)
        offered = {
            d["name"] for t in server.requests[0].body.get("tools", []) for d in t["functionDeclarations"]
        }
    return done, offered, trace


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
