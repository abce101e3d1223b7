"""Qwen Code ``--output-format stream-json``: Claude Code's record shapes, with its own tool names and exit
codes."""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from typing import Any

from dokimi.harness.traces import Conversion
from dokimi.harness.traces.claude_stream_json import (
    REFUSAL_SCAN_CHARS,
    ClaudeStreamJson,
    convert_stream_json,
    is_refusal,
)

QWEN_COMMAND_TOOLS = frozenset({"run_shell_command"})
QWEN_READ_TOOLS = frozenset({"read_file"})
QWEN_EDIT_TOOLS = frozenset({"edit", "write_file", "notebook_edit"})
_QWEN_EXIT_CODE_RE = re.compile(r"^Exit Code: (-?\d+)$", re.MULTILINE)
# What Qwen Code 0.24.x says when a tool is off: outside --core-tools, or denied (--exclude-tools, a rule).
_QWEN_REFUSAL_RE = re.compile(r"is not listed in the active core tools allowlist|requires permission to use")


def qwen_command_rc(result: Mapping[str, Any], text: str) -> int | None:
    """rc of a Qwen Code shell command: 0 for a result that is no error (its text is then the bare output),
    else the last "Exit Code: N" line of its report (the command's own output comes before that line, so a
    forged one in the output never wins), else null (a signal, a timeout: no exit code)."""
    if not result.get("is_error"):
        return 0
    codes = _QWEN_EXIT_CODE_RE.findall(text)
    return int(codes[-1]) if codes else None


class _QwenStreamJson(ClaudeStreamJson):
    """Qwen Code prints Claude Code's stream-json records, with its own tool names and exit codes."""

    def kind_of(self, tool_name: str) -> str:
        if tool_name in QWEN_COMMAND_TOOLS:
            return "command"
        if tool_name in QWEN_READ_TOOLS:
            return "read"
        if tool_name in QWEN_EDIT_TOOLS:
            return "edit"
        return "tool"

    def rc_of(self, result: Mapping[str, Any], text: str) -> int | None:
        return qwen_command_rc(result, text)

    def refused(self, kind: str, result: Mapping[str, Any], text: str) -> bool:
        if result.get("is_error") and _QWEN_REFUSAL_RE.search(text[:REFUSAL_SCAN_CHARS]):
            return True
        return is_refusal(kind, result, text)


def convert(lines: Iterable[str]) -> Conversion:
    """Qwen Code ``--output-format stream-json`` → Conversion: Claude Code's record shapes (no timestamps, so
    ``t`` is the line index). run_shell_command → command with ``rc`` from its report's "Exit Code: N" (0 when
    the result is no error); read_file → read; edit, write_file, notebook_edit → edit; anything else → tool
    with ``denied`` (a denied or disabled tool's result says it "requires permission to use" it)."""
    return convert_stream_json(lines, _QwenStreamJson())
