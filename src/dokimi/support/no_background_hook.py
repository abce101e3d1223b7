#!/usr/bin/env python3
"""Claude Code PreToolUse hook: refuse a Bash command that would run in the background.

A backgrounded command outlives the agent's turn, and the harness's process group too (the runner cannot wait
for it, kill it, or see its output), so it is refused and the model is told to run it in the foreground.

Reads the hook JSON on stdin: {"tool_name": "Bash", "tool_input": {"command": ..., "run_in_background": ..}}.
Exit 0 allows the call; exit 2 with a reason on stderr blocks it (Claude Code shows the reason to the model).
Refused: ``run_in_background: true``; a ``&`` control operator anywhere (``sleep 9 &``, ``a & b``), but not
``&&``, ``2>&1``, ``&>`` or ``|&``; the words nohup, setsid, disown (also inside ``sh -c '...'``).
Standard library only: this file runs inside the agent's container from the read-only support directory.
"""

from __future__ import annotations

import json
import re
import shlex
import sys

BACKGROUND_WORDS = frozenset({"nohup", "setsid", "disown"})
SEPARATORS = frozenset({";", "&&", "||", "|", "|&", "(", ")", "\n"})
_FALLBACK_AMP = re.compile(r"(?<![&>|<])&(?![&>])")
_SHELL_C = re.compile(r"^-[A-Za-z]*c$")
MAX_DEPTH = 4


def _tokens(command: str) -> list[str] | None:
    lexer = shlex.shlex(command, posix=True, punctuation_chars=True)
    lexer.whitespace_split = True
    lexer.commenters = "#"
    try:
        return list(lexer)
    except ValueError:  # unbalanced quotes: fall back to the regex
        return None


def background_reason(command: str, depth: int = 0) -> str | None:
    """Why ``command`` runs something in the background, or None."""
    tokens = _tokens(command)
    if tokens is None:
        if _FALLBACK_AMP.search(command):
            return "it ends a command with '&'"
        words = set(re.findall(r"[A-Za-z_]+", command))
        hit = sorted(words & BACKGROUND_WORDS)
        return f"it uses {hit[0]}" if hit else None
    at_command_start = True
    previous = ""
    for token in tokens:
        if token == "&":
            return "it ends a command with '&'"
        if token in SEPARATORS or (token and set(token) <= set(";&|()")):
            at_command_start = True
            previous = token
            continue
        base = token.rsplit("/", 1)[-1]
        if base in BACKGROUND_WORDS and at_command_start:
            return f"it uses {base}"
        if depth < MAX_DEPTH and _SHELL_C.match(previous):
            inner = background_reason(token, depth + 1)  # sh -c '...', bash -lc "..."
            if inner is not None:
                return inner
        previous = token
        # env VAR=1 nohup x, sudo nohup x, time nohup x: the wrapper's argument is a command too
        at_command_start = (
            base in {"env", "sudo", "time", "exec", "command", "nice", "timeout"} or "=" in token
        )
    return None


def decide(payload: object) -> str | None:
    """The refusal message for one hook input, or None to allow."""
    if not isinstance(payload, dict) or payload.get("tool_name") != "Bash":
        return None
    tool_input = payload.get("tool_input")
    if not isinstance(tool_input, dict):
        return None
    reason: str | None
    if tool_input.get("run_in_background") is True:
        reason = "it asks for run_in_background"
    else:
        command = tool_input.get("command")
        reason = background_reason(command) if isinstance(command, str) else None
    if reason is None:
        return None
    return (
        f"dokimi refused this command because {reason}: background processes are not allowed in this "
        "evaluation. Run the command in the foreground and wait for it to finish."
    )


def main() -> int:
    try:
        payload = json.loads(sys.stdin.read() or "null")
    except ValueError:
        return 0  # not a hook call we understand; Claude Code validated its own input
    message = decide(payload)
    if message is None:
        return 0
    sys.stderr.write(message + "\n")
    return 2


if __name__ == "__main__":
    sys.exit(main())
