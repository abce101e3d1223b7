"""The claude-code profile's PreToolUse hook that refuses backgrounded shell commands, run as Claude Code runs
it: a separate python3 process reading the hook JSON on stdin (exit 2 blocks, with the reason on stderr)."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from dokimi.support import NO_BACKGROUND_HOOK, support_dir

HOOK = support_dir() / NO_BACKGROUND_HOOK


def run_hook(payload: object) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, str(HOOK)], input=json.dumps(payload), capture_output=True, text=True, timeout=30
    )


def bash(command: str, **extra: object) -> dict[str, object]:
    return {"hook_event_name": "PreToolUse", "tool_name": "Bash", "tool_input": {"command": command, **extra}}


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
