"""The real Qwen Code 0.24.4 on the pinned Node, through the built-in qwen-code profile, against the scripted
model server on the host: the endpoint reaches it through argv, each tool level offers what the profile says
(eagerly, and in the list of deferred tools the request names), commands run with their exit codes in the
trace, a tool the level lacks is refused, --max-session-turns stops the run, the trace converts. (The dry run
in the agent container is tests/e2e/test_harness_dry_runs.py.)"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest

from dokimi.harness.traces import convert_file
from tests.e2e.mockmodel_support import run_scripted, workspace

pytestmark = pytest.mark.harness
MODEL = "qwen3-coder-plus"
READ_TOOLS = {"read_file", "glob", "grep_search", "list_directory"}
WEB_TOOLS = {"web_fetch", "web_search"}
# The request lists each tool it defers (reachable through tool_search/tool_call) as `- "name": "..."`.
DEFERRED_RE = re.compile(r'^- "(\w+)": ', re.MULTILINE)


def deferred(body: dict[str, Any]) -> set[str]:
    texts = []
    for message in body.get("messages", []):
        content = message.get("content")
        parts = content if isinstance(content, list) else [{"text": content}]
        texts += [p.get("text") or "" for p in parts if isinstance(p, dict)]
    return {name for text in texts for name in DEFERRED_RE.findall(text)}


def run_qwen(
    node: Path,
    qwen: Path,
    tmp_path: Path,
    script: list[dict[str, Any]],
    tools: str,
    max_turns: int = 5,
    files: dict[str, str] | None = None,
) -> Any:
    repo, config, home = workspace(tmp_path, tools, {"f.txt": "before\n", **(files or {})})
    trace = tmp_path / f"trace-{tools}.jsonl"
    run = run_scripted(
        "qwen-code", script, bin=str(qwen.resolve()), repo=repo, config=config, home=home, prompt="go",
        model=MODEL, level=tools, max_turns=max_turns, launcher=[str(node)],
        path=f"{node.parent}:/usr/bin:/bin", trace=trace,
    )  # fmt: skip
    assert "OPENAI_BASE_URL" not in run.inv.env  # the endpoint goes in argv
    done, requests = run.done, run.requests
    assert requests and all(r.main_loop for r in requests)  # no background request plays the script
    first = requests[0].body
    offered = {t["function"]["name"] for t in first.get("tools", [])}
    return done, offered, deferred(first), trace


def test_tool_levels_commands_and_the_trace(node_bin: Path, qwen_bin: Path, tmp_path: Path) -> None:
    script = [
        {"tool_use": {"name": "run_shell_command", "input": {"command": "echo after > f.txt"}}},
        {"tool_use": {"name": "run_shell_command", "input": {"command": "echo out; exit 3"}}},
        {"final": "I changed f.txt."},
    ]
    offered, lazy = {}, {}
    for level in ("none", "read", "all", "web"):
        done, offered[level], lazy[level], trace = run_qwen(node_bin, qwen_bin, tmp_path, script, level)
        assert done.returncode == 0, done.stderr
    assert offered["none"] == set() and lazy["none"] == set()
    assert offered["read"] == READ_TOOLS and lazy["read"] == set()
    assert {"run_shell_command", "edit", "write_file"} <= offered["all"]
    assert not (offered["all"] | lazy["all"]) & WEB_TOOLS
    assert "web_fetch" in lazy["web"]  # a task whose egress names hosts (web_search needs a provider)
    assert (tmp_path / "repo" / "f.txt").read_text() == "after\n"
    conv = convert_file(trace, "qwen-stream-json")
    assert [(e["kind"], e["text"], e["rc"]) for e in conv.events] == [
        ("command", "echo after > f.txt", 0),
        ("command", "echo out; exit 3", 3),
    ]
    # the report holds the exit code; its "Output:" is at times "(empty)" for a command this quick (0.24.4)
    assert "Exit Code: 3" in conv.events[1]["output"]
    assert conv.answer == "I changed f.txt." and conv.turns == 3
    assert conv.complete and not conv.is_error


def test_a_tool_the_level_lacks_is_refused_and_max_turns_stops_the_run(
    node_bin: Path, qwen_bin: Path, tmp_path: Path
) -> None:
    shell = {"tool_use": {"name": "run_shell_command", "input": {"command": "touch made.txt"}}}
    done, _, _, trace = run_qwen(node_bin, qwen_bin, tmp_path, [shell, {"final": "done"}], "read")
    assert done.returncode == 0, done.stderr
    assert not (tmp_path / "repo" / "made.txt").exists()
    conv = convert_file(trace, "qwen-stream-json")
    assert [(e["kind"], e["rc"], e.get("denied")) for e in conv.events] == [("command", None, True)]
    done, _, _, trace = run_qwen(node_bin, qwen_bin, tmp_path, [shell, shell, shell], "all", max_turns=2)
    assert done.returncode == 53  # --max-session-turns: no result record
    conv = convert_file(trace, "qwen-stream-json")
    assert len(conv.events) == 2 and not conv.complete and conv.is_error


def test_a_repositorys_own_mcp_server_and_hooks_do_not_run(
    node_bin: Path, qwen_bin: Path, tmp_path: Path
) -> None:
    marks = tmp_path / "marks"
    marks.mkdir()
    hook = {"hooks": [{"type": "command", "command": f"touch {marks}/hook"}]}
    settings = {
        "mcpServers": {"planted": {"command": "sh", "args": ["-c", f"touch {marks}/mcp; sleep 1"]}},
        "hooks": {"SessionStart": [hook], "UserPromptSubmit": [hook]},
    }
    files = {".qwen/settings.json": json.dumps(settings)}
    done, offered, lazy, _ = run_qwen(node_bin, qwen_bin, tmp_path, [{"final": "ok"}], "none", files=files)
    assert done.returncode == 0, done.stderr
    assert offered == lazy == set()
    assert sorted(p.name for p in marks.iterdir()) == []
