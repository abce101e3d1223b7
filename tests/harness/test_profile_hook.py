"""The claude-code profile's PreToolUse hook that refuses backgrounded shell commands, run as Claude Code runs
it: a separate python3 process reading the hook JSON on stdin (exit 2 blocks, with the reason on stderr)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from dokimi.support import NO_BACKGROUND_HOOK, support_dir

HOOK = support_dir() / NO_BACKGROUND_HOOK


def run_hook(payload: object) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, str(HOOK)], input=json.dumps(payload), capture_output=True, text=True, timeout=30
    )


def bash(command: str, **extra: object) -> dict[str, object]:
    return {"hook_event_name": "PreToolUse", "tool_name": "Bash", "tool_input": {"command": command, **extra}}


@pytest.mark.slow
@pytest.mark.parametrize(
    "command",
    [
        "sleep 100 &",
        "make server & sleep 1; curl localhost",
        "(cd build && ninja) &",
        "nohup ./serve.sh > log",
        "env A=1 nohup x",
        "setsid bazel build //...",
        "./x; disown",
        "sh -c 'sleep 5 &'",
        'bash -lc "nohup x"',
        "x 2>&1 &",
    ],
)
def test_a_backgrounded_command_is_refused_with_a_reason(command: str) -> None:
    done = run_hook(bash(command))
    assert done.returncode == 2
    assert "background" in done.stderr and "foreground" in done.stderr


def test_run_in_background_is_refused() -> None:
    done = run_hook(bash("pytest -q", run_in_background=True))
    assert done.returncode == 2 and "run_in_background" in done.stderr


@pytest.mark.slow
@pytest.mark.parametrize(
    "command",
    [
        "make && make test",
        "pytest -q 2>&1 | tail",
        "build &> log",
        "x |& tee log",
        'echo "a & b"',
        "echo nohup is a word here",
        "grep -r disown .",
        "echo done # &",
    ],
)
def test_a_foreground_command_is_allowed(command: str) -> None:
    done = run_hook(bash(command))
    assert done.returncode == 0, done.stderr
    assert done.stderr == ""


def test_other_tools_and_unreadable_input_are_allowed() -> None:
    assert run_hook({"tool_name": "Read", "tool_input": {"file_path": "/x &"}}).returncode == 0
    done = subprocess.run(
        [sys.executable, str(HOOK)], input="not json", capture_output=True, text=True, timeout=30
    )
    assert done.returncode == 0


def test_the_hook_imports_only_the_standard_library() -> None:
    done = subprocess.run(
        [sys.executable, "-I", "-S", str(HOOK)], input=json.dumps(bash("sleep 1 &")), capture_output=True,
        text=True, timeout=30,
    )  # fmt: skip
    assert done.returncode == 2


@pytest.mark.harness
def test_real_claude_code_runs_the_hook_from_the_profile_and_refuses_a_background_command(
    claude_bin: Path,
) -> None:
    """The built-in profile's settings.json, written into a fresh config dir, makes Claude Code 2.1.328 run
    the hook: a scripted ``sleep &`` comes back to the model as a refused call; nothing is left running."""
    from dokimi import process
    from dokimi.harness.profile import AgentRequest, Placement, build_invocation, load_profile
    from dokimi.harness.runas import give_to, harness_identity, reachable_binary, wrap_argv
    from dokimi.harness.traces.claude_stream_json import convert as convert_claude_stream_json
    from dokimi.support.mockmodel import MockModelServer
    from tests.helpers.harness import harness_dir, kill_strays, stray_pids

    marker = "dokimi-hook-e2e-4417"
    script: list[dict[str, Any]] = [
        {"tool_use": {"name": "Bash", "input": {"command": f"sleep 300 & echo {marker}"}}},
        {"tool_use": {"name": "Bash", "input": {"command": "echo foreground-ok"}}},
        {"final": "finished"},
    ]
    who = harness_identity()
    profile = load_profile("claude-code")
    with harness_dir() as scratch, MockModelServer(script) as server:
        (scratch / "ws").mkdir()
        (scratch / "home").mkdir()
        (scratch / "config").mkdir()
        inv = build_invocation(
            profile,
            AgentRequest(prompt="run it", model="claude-haiku-4-5", max_turns=5, budget=1, tools="all"),
            Placement(
                bin=str(reachable_binary(claude_bin, who)),
                config_dir=scratch / "config",
                support_dir=support_dir(),
                home=str(scratch / "home"),
            ),
            environ={"PATH": "/usr/local/bin:/usr/bin:/bin"},
            extra_env={"ANTHROPIC_BASE_URL": server.url, **profile.dry_run_env},
        )
        inv.write_config_files(scratch / "config")
        give_to(scratch, who)
        try:
            done = process.run(wrap_argv(inv.argv, who), timeout=120, env=inv.env, cwd=scratch / "ws")
            leftover = stray_pids("sleep 300")
        finally:
            kill_strays("sleep 300")
    conv = convert_claude_stream_json(done.stdout.splitlines())
    commands = [e for e in conv.events if e["kind"] == "command"]
    assert [c["text"] for c in commands] == [f"sleep 300 & echo {marker}", "echo foreground-ok"], done.stdout
    assert commands[0]["rc"] is None, "a refused call has no result (contract §4.1)"
    assert commands[1]["rc"] == 0
    assert "background processes are not allowed" in done.stdout
    assert leftover == [], "the refused command must never have started"
    assert conv.answer == "finished"
