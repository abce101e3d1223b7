"""The real Claude Code CLI (2.1.328) against the scripted model server: tool calls run, traces convert.

Run as root (CI, the machines here), the CLI runs as uid 1000 through tests/helpers/harness.py, because Claude
Code refuses bypassPermissions as root.
"""

from __future__ import annotations

import json
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from dokimi.harness.traces import convert_file, write_conversion
from dokimi.support.mockmodel import MockModelServer
from tests.helpers.git import git_repo
from tests.helpers.harness import ClaudeRun, harness_dir, kill_strays, run_claude, stray_pids

pytestmark = pytest.mark.harness


@pytest.fixture
def sandbox() -> Iterator[Path]:
    """A directory the harness user owns, holding home/ and a one-commit repo/."""
    with harness_dir() as root:
        git_repo(root / "repo", {"README.md": "# demo\n", "f.txt": "before\n"})
        (root / "home").mkdir()
        yield root


def run_script(
    claude_bin: Path, sandbox: Path, tmp_path: Path, script: list[dict[str, Any]], prompt: str, **options: Any
) -> tuple[ClaudeRun, MockModelServer]:
    """The CLI in the sandbox's repo against a server playing ``script`` (its requests kept in
    capture.jsonl); ``options`` go to run_claude."""
    with MockModelServer(script, capture_path=tmp_path / "capture.jsonl") as server:
        run = run_claude(
            claude_bin,
            prompt,
            cwd=sandbox / "repo",
            home=sandbox / "home",
            base_url=server.url,
            trace_path=tmp_path / "agent.stdout",
            **options,
        )
    return run, server


def test_a_scripted_bash_call_really_edits_the_file_and_converts_with_rc_0(
    claude_bin: Path, sandbox: Path, tmp_path: Path
) -> None:
    script: list[dict[str, Any]] = [
        {
            "tool_use": {
                "name": "Bash",
                "input": {"command": "sed -i s/before/after/ f.txt", "description": "edit"},
            }
        },
        {"final": "I changed f.txt."},
    ]
    run, server = run_script(claude_bin, sandbox, tmp_path, script, "Change before to after in f.txt")
    assert run.returncode == 0, run.stderr
    assert server.turns_played == 2
    assert (sandbox / "repo" / "f.txt").read_text() == "after\n"

    conversion = convert_file(run.trace_path, "claude-stream-json")
    write_conversion(conversion, tmp_path / "run")
    events = [json.loads(line) for line in (tmp_path / "run" / "events.jsonl").read_text().splitlines()]
    commands = [e for e in events if e["kind"] == "command"]
    assert [(c["text"], c["rc"]) for c in commands] == [("sed -i s/before/after/ f.txt", 0)]
    assert (tmp_path / "run" / "answer.txt").read_text() == "I changed f.txt."
    assert conversion.complete and not conversion.is_error and conversion.garbage_lines == 0
    assert conversion.turns == 2 and conversion.cost_usd is not None


@pytest.mark.parametrize("hard_kill", [False, True], ids=["sigterm-then-kill", "sigkill"])
def test_a_run_killed_at_its_timeout_mid_command_converts_with_rc_null(
    claude_bin: Path, sandbox: Path, tmp_path: Path, hard_kill: bool
) -> None:
    marker = f"dokimi-e2e-{uuid.uuid4().hex[:12]}"
    script: list[dict[str, Any]] = [
        {
            "tool_use": {
                "name": "Bash",
                "input": {"command": f"echo {marker} && sleep 30", "description": "slow"},
            }
        },
        {"final": "never reached"},
    ]
    try:
        run, server = run_script(
            claude_bin, sandbox, tmp_path, script, "Wait a while", timeout=6.0, hard_kill=hard_kill
        )
        left_running = stray_pids(marker)
    finally:
        # Claude Code's Bash tool runs each command in its own session, so a SIGKILL to the CLI's group leaves
        # the command running; on SIGTERM the CLI stops it itself. See tests/helpers/harness.py.
        kill_strays(marker)
    if not hard_kill:
        assert left_running == []  # the runner's way (TERM, grace, KILL) leaves no orphan behind
    assert run.timed_out and run.returncode is None
    assert server.turns_played == 1
    conversion = convert_file(run.trace_path, "claude-stream-json")
    assert [(e["kind"], e["text"], e["rc"]) for e in conversion.events] == [
        ("command", f"echo {marker} && sleep 30", None)
    ]
    assert conversion.complete is False and conversion.is_error is True


def test_echo_tokens_returns_the_claude_md_token_that_claude_code_sent(
    claude_bin: Path, sandbox: Path, tmp_path: Path
) -> None:
    (sandbox / "repo" / "CLAUDE.md").write_text("# Rules\n\nRCabc123 head token\n\nRC0d0e0f tail token\n")
    run, server = run_script(
        claude_bin,
        sandbox,
        tmp_path,
        [{"echo_tokens": True}],
        "List every token of the form RC plus six hex digits that you can see.",
        extra_args=["--tools", ""],
    )
    requests = server.requests
    assert run.returncode == 0, run.stderr
    main = [r for r in requests if r.main_loop]
    assert (
        len(main) == 1 and main[0].turn == 0
    )  # tools off: the agent-loop marker rule still plays the script
    assert main[0].tokens() == ["RCabc123", "RC0d0e0f"]  # CLAUDE.md is in the request bytes
    conversion = convert_file(run.trace_path, "claude-stream-json")
    assert conversion.answer.split() == ["RCabc123", "RC0d0e0f"]
    assert conversion.events == []
    paths = [r.path.split("?")[0] for r in requests]
    assert "/v1/messages" in paths and all(r.known for r in requests), paths
