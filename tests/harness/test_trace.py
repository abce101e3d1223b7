"""Trace conversion (contract §4.1): Claude Code stream-json and plain text to events.jsonl and answer.txt.

The samples under tests/resources/traces/ were printed by the real Claude Code 2.1.328 against the scripted
model server (tests/e2e/test_claude_mockmodel.py makes such traces live); the literal lines below are cut from
them.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from dokimi.harness.traces import (
    OUTPUT_KEEP_BYTES,
    OUTPUT_LIMIT_BYTES,
    convert_file,
    event_time,
    truncate_output,
    write_conversion,
)
from dokimi.harness.traces import text as text_trace
from dokimi.harness.traces.claude_stream_json import command_rc, event_kind, relative_path
from dokimi.harness.traces.claude_stream_json import convert as convert_claude_stream_json

TRACES = Path(__file__).resolve().parents[1] / "resources" / "traces"

INIT = (
    '{"type":"system","subtype":"init","cwd":"/w/repo","session_id":"s","tools":["Bash","Read"],'
    '"model":"claude-haiku-4-5"}'
)


def tool_use(tool_id: str, name: str, tool_input: dict[str, object], ts: str | None = None) -> str:
    line: dict[str, object] = {
        "type": "assistant",
        "message": {
            "id": f"msg_{tool_id}",
            "type": "message",
            "role": "assistant",
            "content": [{"type": "tool_use", "id": tool_id, "name": name, "input": tool_input}],
        },
    }
    if ts:
        line["timestamp"] = ts
    return json.dumps(line)


def tool_result(tool_id: str, content: object, *, is_error: bool | None = None, ts: str | None = None) -> str:
    block: dict[str, object] = {"type": "tool_result", "tool_use_id": tool_id, "content": content}
    if is_error is not None:
        block["is_error"] = is_error
    line: dict[str, object] = {"type": "user", "message": {"role": "user", "content": [block]}}
    if ts:
        line["timestamp"] = ts
    return json.dumps(line)


def text_line(msg_id: str, text: str) -> str:
    return json.dumps(
        {"type": "assistant", "message": {"id": msg_id, "content": [{"type": "text", "text": text}]}}
    )


RESULT = json.dumps(
    {
        "type": "result",
        "subtype": "success",
        "is_error": False,
        "num_turns": 2,
        "result": "all done",
        "total_cost_usd": 0.043774,
        "usage": {"input_tokens": 43674, "output_tokens": 20},
    }
)


# --- the real traces ----------------------------------------------------------------------------------------


def test_a_real_bash_run_becomes_one_command_with_rc_0_and_its_output() -> None:
    conv = convert_file(TRACES / "claude-2.1.328-bash-edit.jsonl", "claude-stream-json")
    assert conv.events == [
        {
            "t": 0.0,
            "kind": "command",
            "text": "echo hello > f.txt && cat f.txt",
            "rc": 0,
            "output": "hello",
            "output_truncated": False,
        }
    ]
    assert conv.answer == "all done"
    assert conv.cost_usd == pytest.approx(0.043774)
    assert conv.turns == 2
    assert conv.usage["input_tokens"] == 43674
    assert (conv.is_error, conv.complete, conv.garbage_lines) == (False, True, 0)


def test_a_real_mixed_run_maps_each_tool_to_its_kind_with_paths_relative_to_cwd() -> None:
    conv = convert_file(TRACES / "claude-2.1.328-mixed-tools.jsonl", "claude-stream-json")
    summary = [
        (e["kind"], e.get("path") or e.get("text") or e.get("name"), e.get("rc"), e.get("denied"))
        for e in conv.events
    ]
    assert summary == [
        ("read", "CLAUDE.md", None, None),
        ("edit", "CLAUDE.md", None, None),
        ("command", "ls nonexistent-dir", 1, None),
        ("tool", "WebFetch", None, True),  # disallowed: "No such tool available"
        ("edit", "new.txt", None, None),  # Write is an edit
        ("command", "seq 1 3000", 0, None),
        ("tool", "Glob", None, True),
    ]
    times = [e["t"] for e in conv.events]
    assert times == sorted(times) and times[-1] > 0
    seq = conv.events[5]
    assert seq["output_truncated"] is True
    assert seq["output"].startswith("1\n2\n3\n") and seq["output"].endswith("2999\n3000")
    assert conv.answer == "Finished: edited CLAUDE.md."


def test_a_refused_command_is_denied_with_rc_null_not_a_failure() -> None:
    conv = convert_file(TRACES / "claude-2.1.328-permission-denied.jsonl", "claude-stream-json")
    command, edit = conv.events
    assert command["kind"] == "command" and command["denied"] is True and command["rc"] is None
    assert edit == {"t": edit["t"], "kind": "edit", "path": "denied2.txt", "denied": True}


def test_a_trace_cut_at_the_timeout_converts_with_rc_null_and_is_incomplete() -> None:
    conv = convert_file(TRACES / "claude-2.1.328-killed-mid-command.jsonl", "claude-stream-json")
    assert conv.events == [{"t": 0.0, "kind": "command", "text": "echo start; sleep 30", "rc": None}]
    assert conv.complete is False and conv.is_error is True
    assert conv.cost_usd is None and conv.turns is None


def test_a_command_the_harness_stopped_on_sigterm_has_rc_null_not_its_exit_137() -> None:
    # The runner sends SIGTERM at the timeout; Claude Code then kills the running command itself and reports
    # "Exit code 137" with is_error, after a task_notification with status "stopped".
    conv = convert_file(TRACES / "claude-2.1.328-sigterm-mid-command.jsonl", "claude-stream-json")
    (event,) = conv.events
    assert event["text"].endswith("&& sleep 30") and event["rc"] is None
    assert event["output"].startswith("Exit code 137")
    assert conv.complete is False


def test_an_interrupted_tool_use_result_gives_rc_null() -> None:
    line = json.loads(tool_result("a", "partial output", is_error=True))
    line["tool_use_result"] = {"stdout": "partial output", "stderr": "", "interrupted": True}
    conv = convert_claude_stream_json([INIT, tool_use("a", "Bash", {"command": "make"}), json.dumps(line)])
    assert conv.events[0]["rc"] is None


# --- rules, one test each -----------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("name", "kind"),
    [
        ("Bash", "command"),
        ("Read", "read"),
        ("Edit", "edit"),
        ("Write", "edit"),
        ("MultiEdit", "edit"),
        ("NotebookEdit", "edit"),
        ("WebFetch", "tool"),
        ("Task", "tool"),
        ("Grep", "tool"),
    ],
)
def test_each_claude_tool_maps_to_its_event_kind(name: str, kind: str) -> None:
    assert event_kind(name) == kind


def test_paths_under_the_session_cwd_become_relative_and_others_stay_as_they_are() -> None:
    assert relative_path("/w/repo/src/a.c", "/w/repo/") == "src/a.c"
    assert relative_path("/w/repo/./src//a.c", "/w/repo/") == "src/a.c"
    assert relative_path("/w/repository/a.c", "/w/repo/") == "/w/repository/a.c"
    assert relative_path("/etc/passwd", "/w/repo/") == "/etc/passwd"
    assert relative_path("src/a.c", "/w/repo/") == "src/a.c"
    assert relative_path("/w/repo/a.c", None) == "/w/repo/a.c"
    assert relative_path(None, "/w/repo/") is None


def test_rc_is_1_for_an_error_result_0_otherwise_and_null_without_a_result() -> None:
    assert command_rc({"is_error": True}) == 1
    assert command_rc({"is_error": False}) == 0
    assert command_rc({}) == 0
    assert command_rc(None) is None


def test_output_of_exactly_8_kb_is_kept_whole() -> None:
    text = "x" * OUTPUT_LIMIT_BYTES
    assert truncate_output(text) == (text, False)


def test_output_over_8_kb_keeps_first_and_last_4_kb_around_the_omission_line() -> None:
    text = "H" * OUTPUT_KEEP_BYTES + "m" * 1000 + "T" * OUTPUT_KEEP_BYTES
    out, truncated = truncate_output(text)
    assert truncated is True
    assert out == "H" * OUTPUT_KEEP_BYTES + "\n[... 1000 bytes omitted ...]\n" + "T" * OUTPUT_KEEP_BYTES


def test_one_byte_over_8_kb_is_truncated_and_says_1_byte_omitted() -> None:
    text = "H" * OUTPUT_KEEP_BYTES + "m" + "T" * OUTPUT_KEEP_BYTES
    assert len(text.encode()) == OUTPUT_LIMIT_BYTES + 1
    assert truncate_output(text) == (
        "H" * OUTPUT_KEEP_BYTES + "\n[... 1 bytes omitted ...]\n" + "T" * OUTPUT_KEEP_BYTES,
        True,
    )


def test_a_character_cut_at_a_boundary_is_counted_among_the_omitted_bytes() -> None:
    text = "x" + "é" * 5000  # 10001 bytes: the 4096th byte is the first half of an é
    out, truncated = truncate_output(text)
    head, omitted, tail = out.split("\n")
    kept = len(head.encode()) + len(tail.encode())
    assert truncated and len(head.encode()) == OUTPUT_KEEP_BYTES - 1
    assert omitted == f"[... {10001 - kept} bytes omitted ...]"


def test_truncation_counts_utf8_bytes_and_never_splits_a_character() -> None:
    text = "é" * 5000  # 10000 bytes, 5000 characters
    out, truncated = truncate_output(text)
    assert truncated is True
    head, omitted, tail = out.split("\n")
    assert omitted == f"[... {10000 - 2 * OUTPUT_KEEP_BYTES} bytes omitted ...]"
    assert set(head) == {"é"} and set(tail) == {"é"}
    assert len(head.encode()) == OUTPUT_KEEP_BYTES  # 4096 is even: no character cut


def test_t_is_seconds_since_the_first_timestamp() -> None:
    conv = convert_claude_stream_json(
        [
            INIT,
            text_line("m0", "thinking")[:-1] + ', "timestamp": "2026-01-01T00:00:00.000Z"}',
            tool_use("a", "Bash", {"command": "make"}, ts="2026-01-01T00:00:02.500Z"),
            tool_result("a", "ok", ts="2026-01-01T00:00:09.000Z"),
            tool_use("b", "Read", {"file_path": "/w/repo/src/x.c"}, ts="2026-01-01T00:00:12.250Z"),
        ]
    )
    assert [e["t"] for e in conv.events] == [2.5, 12.25]


def test_without_timestamps_t_is_the_line_index() -> None:
    conv = convert_claude_stream_json(
        [
            INIT,
            tool_use("a", "Bash", {"command": "make"}),
            tool_result("a", "ok"),
            tool_use("b", "Read", {"file_path": "x"}),
        ]
    )
    assert [e["t"] for e in conv.events] == [1.0, 3.0]
    assert event_time(None, None, 7) == 7.0


def test_garbage_lines_are_counted_and_skipped() -> None:
    conv = convert_claude_stream_json(
        [
            "Warning: something printed on stdout\n",
            INIT,
            "{not json",
            "[1, 2]",
            "\n",
            tool_use("a", "Bash", {"command": "ls"}),
            tool_result("a", "a.txt"),
            RESULT,
        ]
    )
    assert conv.garbage_lines == 3
    assert [(e["kind"], e["rc"]) for e in conv.events] == [("command", 0)]
    assert conv.is_error is False and conv.answer == "all done"


def test_a_harness_that_prints_only_garbage_converts_to_an_error_with_no_events() -> None:
    conv = convert_claude_stream_json(["Segmentation fault\n", "\x00\x01binary\n", "<html>502</html>\n"])
    assert conv.events == [] and conv.answer == "" and conv.garbage_lines == 3
    assert conv.is_error is True and conv.complete is False


def test_a_command_whose_own_output_says_permission_denied_ran_and_failed() -> None:
    conv = convert_claude_stream_json(
        [
            INIT,
            tool_use("a", "Bash", {"command": "cat /etc/shadow"}),
            tool_result("a", "Exit code 1\ncat: /etc/shadow: Permission denied", is_error=True),
        ]
    )
    assert conv.events[0]["rc"] == 1 and "denied" not in conv.events[0]


def test_another_tool_refused_with_permission_denied_is_denied() -> None:
    conv = convert_claude_stream_json(
        [
            INIT,
            tool_use("a", "WebSearch", {"query": "x"}),
            tool_result("a", "Permission denied for WebSearch", is_error=True),
            tool_use("b", "Grep", {"pattern": "x"}),
            tool_result("b", "x.py:1:x"),
        ]
    )
    assert [(e["name"], e["denied"]) for e in conv.events] == [("WebSearch", True), ("Grep", False)]


def test_a_command_claude_code_blocks_itself_is_denied_with_rc_null() -> None:
    blocked = (
        "<tool_use_error>Blocked: standalone sleep 30. To wait for a condition, use Monitor with an "
        "until-loop (e.g. `until <check>; do sleep 2; done`).</tool_use_error>"
    )  # what 2.1.328 answered to a scripted `sleep 30`
    conv = convert_claude_stream_json(
        [INIT, tool_use("a", "Bash", {"command": "sleep 30"}), tool_result("a", blocked, is_error=True)]
    )
    assert (conv.events[0]["rc"], conv.events[0]["denied"]) == (None, True)


def test_a_tool_result_as_a_list_of_blocks_is_joined_into_the_output() -> None:
    conv = convert_claude_stream_json(
        [
            INIT,
            tool_use("a", "Bash", {"command": "echo"}),
            tool_result(
                "a", [{"type": "text", "text": "one "}, {"type": "image"}, {"type": "text", "text": "two"}]
            ),
        ]
    )
    assert conv.events[0]["output"] == "one two"


def test_the_answer_of_an_unfinished_run_is_its_last_assistant_message() -> None:
    conv = convert_claude_stream_json(
        [INIT, text_line("m1", "first"), text_line("m2", "Working on "), text_line("m2", "it")]
    )
    assert conv.answer == "Working on it"
    assert conv.complete is False


def test_an_error_result_marks_the_conversion_as_an_error() -> None:
    result = json.dumps({"type": "result", "subtype": "error_max_turns", "is_error": False, "num_turns": 5})
    conv = convert_claude_stream_json([INIT, result])
    assert conv.is_error is True and conv.result_subtype == "error_max_turns" and conv.turns == 5


def test_the_text_converter_takes_all_of_stdout_as_the_answer() -> None:
    conv = text_trace.convert(["RCabc123 RCdef456\n", "and some prose\n"])
    assert conv.answer == "RCabc123 RCdef456\nand some prose"
    assert conv.events == [] and conv.is_error is False
    assert text_trace.convert([" \n"]).is_error is True


def test_an_unknown_converter_name_lists_the_known_ones(tmp_path: Path) -> None:
    from dokimi.errors import UsageError

    trace = tmp_path / "t.txt"
    trace.write_text("x")
    with pytest.raises(UsageError, match="claude-stream-json, codex-json"):
        convert_file(trace, "cursor-json")


def test_write_conversion_writes_sorted_events_jsonl_and_answer_txt(tmp_path: Path) -> None:
    conv = convert_file(TRACES / "claude-2.1.328-mixed-tools.jsonl", "claude-stream-json")
    events_path, answer_path = write_conversion(conv, tmp_path / "run")
    lines = events_path.read_text().splitlines()
    assert [json.loads(line) for line in lines] == conv.events
    assert all(list(json.loads(line)) == sorted(json.loads(line)) for line in lines)
    assert answer_path.read_text() == "Finished: edited CLAUDE.md."


@pytest.mark.parametrize("sample", sorted(p.name for p in TRACES.glob("*.jsonl")))
def test_every_converted_real_trace_reads_back_through_the_events_schema(sample: str, tmp_path: Path) -> None:
    from dokimi.schemas.events import read_events

    conv = convert_file(TRACES / sample, "claude-stream-json")
    events_path, _ = write_conversion(conv, tmp_path)
    assert len(read_events(events_path)) == len(conv.events)


def test_invalid_utf8_in_a_trace_file_does_not_crash(tmp_path: Path) -> None:
    trace = tmp_path / "trace.jsonl"
    trace.write_bytes(b"\xff\xfe garbage\n" + INIT.encode() + b"\n" + RESULT.encode() + b"\n")
    conv = convert_file(trace, "claude-stream-json")
    assert conv.garbage_lines == 1 and conv.answer == "all done"


def test_convert_takes_the_converter_name_and_the_whole_stdout_as_the_shared_interface_names_it() -> None:
    from dokimi.harness.traces import convert

    conv = convert("text", "final answer\n")
    assert conv.answer == "final answer" and conv.events == [] and not conv.is_error
    stream = (TRACES / "claude-2.1.328-bash-edit.jsonl").read_text()
    expected = convert_claude_stream_json(stream.splitlines())
    assert expected.events and convert("claude-stream-json", stream).events == expected.events
    separator = json.dumps({"type": "result", "subtype": "success", "result": "a\u2028b"}, ensure_ascii=False)
    assert convert("claude-stream-json", separator + "\n").answer == "a\u2028b"  # ends lines at \n only
    from dokimi.errors import UsageError

    with pytest.raises(UsageError, match="unknown trace converter"):
        convert("nope", "")


# --- Codex exec --json (recorded from the real codex-cli 0.169.0 against the scripted model server) --------

CODEX_TRACE = TRACES / "codex-0.169.0-commands.jsonl"


def test_a_recorded_codex_trace_converts_commands_rc_answer_and_turns() -> None:
    from dokimi.harness.traces import convert_file

    conv = convert_file(CODEX_TRACE, "codex-json")
    assert [(e["kind"], e["text"], e["rc"], e["t"]) for e in conv.events] == [
        ("command", "sed -i s/before/after/ f.txt", 0, 4.0),
        ("command", "echo out; exit 3", 3, 6.0),
    ]
    assert conv.events[1]["output"] == "out\n" and conv.events[1]["output_truncated"] is False
    assert conv.answer == "I changed f.txt."
    assert conv.turns == 1 and conv.complete and not conv.is_error
    assert conv.usage["output_tokens"] == 21 and conv.cost_usd is None
    assert conv.garbage_lines == 0


def test_a_codex_trace_cut_mid_command_has_rc_null_and_is_an_error() -> None:
    from dokimi.harness.traces import convert

    lines = CODEX_TRACE.read_text().splitlines()[:7]  # killed while the second command ran
    conv = convert("codex-json", "\n".join(lines) + "\nnot json\n")
    assert [(e["text"], e["rc"]) for e in conv.events] == [
        ("sed -i s/before/after/ f.txt", 0),
        ("echo out; exit 3", None),
    ]
    assert conv.is_error and not conv.complete and conv.garbage_lines == 1
    assert conv.answer == "Looking."


def test_codex_turn_failed_file_changes_and_wrapped_commands() -> None:
    from dokimi.harness.traces import convert
    from dokimi.harness.traces.codex_json import unwrap_shell

    trace = "\n".join(
        json.dumps(x)
        for x in [
            {"type": "item.completed", "item": {"id": "i1", "type": "file_change",
                                                "changes": [{"path": "a.py", "kind": "update"}]}},
            {"type": "turn.failed", "error": {"message": "stream disconnected"}},
        ]
    )  # fmt: skip
    conv = convert("codex-json", trace)
    assert conv.events == [{"t": 0.0, "kind": "edit", "path": "a.py"}]
    assert conv.is_error and conv.result_subtype == "error"
    assert unwrap_shell("/bin/bash -lc 'a && b'") == "a && b"
    assert unwrap_shell("ls -l") == "ls -l"
    assert unwrap_shell("/bin/bash -lc 'unterminated") == "/bin/bash -lc 'unterminated"


# --- Gemini CLI stream-json (recorded from the real gemini-cli 0.61.0 against the scripted model server) ---

GEMINI_TRACE = TRACES / "gemini-0.61.0-tools.jsonl"


def test_a_recorded_gemini_trace_converts_reads_commands_tools_and_the_answer() -> None:
    from dokimi.harness.traces import convert_file

    conv = convert_file(GEMINI_TRACE, "gemini-stream-json")
    assert [e["kind"] for e in conv.events] == ["read", "command", "tool"]
    read, command, tool = conv.events
    assert read["path"] == "f.txt" and read["t"] == 0.055
    # exit 3, yet the CLI says "success" and no exit code: rc stays null rather than a guess
    assert (command["text"], command["rc"], command["output"]) == (
        "sed -i s/before/after/ f.txt; echo out; exit 3",
        None,
        "out",
    )
    assert (tool["name"], tool["denied"]) == ("google_web_search", True)  # web tools are off at level all
    assert conv.answer == "I changed f.txt."
    assert conv.complete and not conv.is_error and conv.result_subtype == "success"
    assert conv.usage["tool_calls"] == 3 and conv.turns is None and conv.cost_usd is None


def test_a_gemini_trace_without_its_result_record_is_an_error() -> None:
    from dokimi.harness.traces import convert

    lines = GEMINI_TRACE.read_text().splitlines()[:6]
    conv = convert("gemini-stream-json", "\n".join(lines))
    assert conv.is_error and not conv.complete
    assert [e["kind"] for e in conv.events] == ["read", "command"] and "output" not in conv.events[1]


# --- GitHub Copilot CLI json (recorded from the real copilot 1.0.102 against the scripted model server) ---

COPILOT_TRACE = TRACES / "copilot-1.0.102-tools.jsonl"


def test_a_recorded_copilot_trace_converts_reads_commands_rc_tools_answer_and_turns() -> None:
    from dokimi.harness.traces import convert_file

    conv = convert_file(COPILOT_TRACE, "copilot-json")
    assert [e["kind"] for e in conv.events] == ["read", "command", "tool"]
    read, command, tool = conv.events
    assert read["path"] == "/tmp/work/repo/f.txt" and read["t"] > 0
    assert (command["text"], command["rc"]) == ("sed -i s/before/after/ f.txt; echo out; exit 3", 3)
    assert command["output"].startswith("out\n")
    assert (tool["name"], tool["denied"]) == ("web_fetch", True)  # web tools are off at level all
    assert conv.answer == "I changed f.txt." and conv.turns == 4
    assert conv.complete and not conv.is_error and conv.result_subtype == "success"


def test_a_copilot_trace_cut_mid_command_has_rc_null_and_is_an_error() -> None:
    from dokimi.harness.traces import convert

    lines = COPILOT_TRACE.read_text().splitlines()
    cut = next(i for i, line in enumerate(lines) if '"toolName":"bash"' in line.replace(" ", ""))
    conv = convert("copilot-json", "\n".join(lines[: cut + 1]))
    assert [e["kind"] for e in conv.events] == ["read", "command"]
    assert conv.events[1]["rc"] is None and "output" not in conv.events[1]
    assert conv.is_error and not conv.complete


# --- OpenCode run --format json (recorded from the real opencode 1.18.33 against the scripted model server) -

OPENCODE_TRACE = TRACES / "opencode-1.18.33-tools.jsonl"


def test_a_recorded_opencode_trace_converts_reads_commands_rc_refusals_answer_and_turns() -> None:
    from dokimi.harness.traces import convert_file

    conv = convert_file(OPENCODE_TRACE, "opencode-json")
    assert [e["kind"] for e in conv.events] == ["read", "command", "tool"]
    read, command, tool = conv.events
    assert read["path"] == "/tmp/work/repo/f.txt" and 0 < read["t"] < command["t"]
    assert (command["text"], command["rc"], command["output"]) == (
        "sed -i s/before/after/ f.txt; echo out; exit 3",
        3,
        "out\n",
    )
    assert (tool["name"], tool["denied"]) == ("webfetch", True)  # web tools are off at level all
    assert conv.answer == "I changed f.txt." and conv.turns == 4
    assert conv.complete and not conv.is_error and conv.result_subtype == "stop"


def test_an_opencode_trace_cut_before_its_last_step_is_an_error() -> None:
    from dokimi.harness.traces import convert

    lines = OPENCODE_TRACE.read_text().splitlines()
    conv = convert("opencode-json", "\n".join(lines[:-3]))
    assert conv.is_error and not conv.complete and conv.answer == "Looking."


# --- Qwen Code stream-json (recorded from the real qwen-code 0.24.4 against the scripted model server) -----

QWEN_TRACE = TRACES / "qwen-code-0.24.4-tools.jsonl"


def test_a_recorded_qwen_trace_converts_reads_edits_commands_rc_refusals_answer_and_turns() -> None:
    from dokimi.harness.traces import convert_file

    conv = convert_file(QWEN_TRACE, "qwen-stream-json")
    assert [e["kind"] for e in conv.events] == ["read", "edit", "command", "tool"]
    read, edit, command, tool = conv.events
    assert read["path"] == edit["path"] == "f.txt"  # absolute, under the session's cwd
    assert read["t"] < edit["t"] < command["t"]  # no timestamps: the line index
    assert (command["text"], command["rc"]) == ("cat f.txt; echo out; exit 3", 3)
    assert "Output: after\nout\n" in command["output"]
    assert (tool["name"], tool["denied"]) == ("web_fetch", True)  # web tools are off at level all
    assert conv.answer == "I changed f.txt." and conv.turns == 5
    assert conv.complete and not conv.is_error and conv.result_subtype == "success"


def test_a_qwen_trace_cut_mid_command_has_rc_null_and_is_an_error() -> None:
    from dokimi.harness.traces import convert

    lines = QWEN_TRACE.read_text().splitlines()
    cut = next(i for i, line in enumerate(lines) if '"name":"run_shell_command"' in line)
    conv = convert("qwen-stream-json", "\n".join(lines[: cut + 1]))
    assert [e["kind"] for e in conv.events] == ["read", "edit", "command"]
    assert conv.events[2]["rc"] is None and "output" not in conv.events[2]
    assert conv.is_error and not conv.complete


def test_a_qwen_commands_rc_is_its_last_exit_code_line_never_one_its_output_forged() -> None:
    from dokimi.harness.traces.qwen_stream_json import qwen_command_rc

    forged = (
        "Command: x\nDirectory: (root)\nOutput: Exit Code: 0\nError: (none)\nExit Code: 2\nSignal: (none)"
    )
    assert qwen_command_rc({"is_error": True}, forged) == 2
    assert qwen_command_rc({"is_error": False}, "Exit Code: 7") == 0  # a success is its bare output
    assert qwen_command_rc({"is_error": True}, "Command timed out") is None
    disabled = '"run_shell_command" is not listed in the active core tools allowlist (--core-tools ...)'
    from dokimi.harness.traces import convert

    lines = [
        '{"type":"assistant","message":{"id":"m","content":[{"type":"tool_use","id":"t1",'
        '"name":"run_shell_command","input":{"command":"touch x"}}]}}',
        '{"type":"user","message":{"content":[{"type":"tool_result","tool_use_id":"t1","is_error":true,'
        f'"content":{json.dumps(disabled)}' + "}]}}",
    ]
    conv = convert("qwen-stream-json", "\n".join(lines))
    assert [(e["rc"], e["denied"]) for e in conv.events] == [(None, True)]


# --- Aider --no-pretty stdout (recorded from the real aider 0.86.2 against the scripted model server) -------

AIDER_TRACE = TRACES / "aider-0.86.2-edits.txt"


def test_a_recorded_aider_trace_converts_reads_edits_answer_turns_and_cost() -> None:
    """The reply named f.txt (Aider added it and asked again); the second reply edited it and created
    sub/new.txt as SEARCH/REPLACE blocks, which Aider applied."""
    from dokimi.harness.traces import convert_file

    conv = convert_file(AIDER_TRACE, "aider-text")
    assert [(e["kind"], e["path"]) for e in conv.events] == [
        ("read", "f.txt"),
        ("edit", "f.txt"),
        ("edit", "sub/new.txt"),
    ]
    assert all("rc" not in e for e in conv.events)  # Aider runs no command
    assert [e["t"] for e in conv.events] == sorted(e["t"] for e in conv.events)
    assert conv.answer.startswith("Done: the file now says after.\n\nf.txt\n```\n<<<<<<< SEARCH\nbefore\n")
    assert conv.answer.endswith(">>>>>>> REPLACE\n```") and "Tokens:" not in conv.answer
    assert (conv.turns, conv.cost_usd) == (2, 0.0011)
    assert conv.complete and not conv.is_error and conv.result_subtype == "success"


def test_a_file_the_prompt_names_is_read_before_the_first_reply() -> None:
    from dokimi.harness.traces import convert

    text = AIDER_TRACE.read_text().replace("auto refresh\n\n", "auto refresh\n\nf.txt\n", 1)
    conv = convert("aider-text", text)
    assert [e["kind"] for e in conv.events] == ["read", "read", "edit", "edit"]
    assert conv.turns == 2 and conv.answer.startswith("Done:")


def test_an_aider_model_error_or_a_trace_cut_short_is_an_error() -> None:
    from dokimi.harness.traces import convert, convert_file

    failed = convert_file(TRACES / "aider-0.86.2-model-error.txt", "aider-text")
    assert failed.is_error and not failed.complete and failed.turns is None and failed.answer == ""
    assert failed.result_subtype == "error"  # litellm.BadRequestError: ...
    lines = AIDER_TRACE.read_text().splitlines()
    cut = convert(
        "aider-text", "\n".join(lines[: lines.index("Repo-map: using 4096 tokens, auto refresh") + 3])
    )
    assert cut.is_error and not cut.complete and cut.events == []
    assert convert("aider-text", "not aider\n").is_error
    malformed = "The LLM did not conform to the edit format.\n"
    text = AIDER_TRACE.read_text()
    recovered = convert("aider-text", text.replace("\n\nf.txt\nDone:", f"\n\n{malformed}\nf.txt\nDone:", 1))
    assert not recovered.is_error and recovered.turns == 2  # Aider asked again and the next reply was applied
    assert convert("aider-text", text + malformed).is_error  # after the last reply: the run ended on it
