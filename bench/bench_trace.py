"""Per-event overhead of trace conversion: Claude Code stream-json → events.jsonl on a ~50 MB trace.

Baseline, measured in the same run: ``json.loads`` of every line of the same trace (the least any converter
must do). Target: conversion at most 2x the baseline. Prints the figures and the ratio; asserts nothing.

    python bench/bench_trace.py [--mb 50] [--repeat 3]
"""

from __future__ import annotations

import argparse
import json
import random
import time
from collections.abc import Callable
from typing import Any

from dokimi.harness.traces.claude_stream_json import convert as convert_claude_stream_json

SESSION = "7ce6d38e-9658-4d2a-96d7-976d187407e2"


def _ts(seconds: float) -> str:
    whole = int(seconds)
    hh, mm, ss, ms = 12 + whole // 3600, whole // 60 % 60, whole % 60, int(seconds * 1000) % 1000
    return f"2026-11-30T{hh:02d}:{mm:02d}:{ss:02d}.{ms:03d}Z"


def _usage() -> dict[str, object]:
    return {
        "input_tokens": 22017,
        "output_tokens": 41,
        "cache_creation_input_tokens": 0,
        "cache_read_input_tokens": 0,
    }


def make_trace(target_bytes: int, seed: int = 0) -> list[str]:
    """Lines shaped like Claude Code 2.1.328's stream-json (see tests/resources/traces/)."""
    rng = random.Random(seed)
    init = {
        "type": "system",
        "subtype": "init",
        "cwd": "/eval/run/workspace",
        "session_id": SESSION,
        "tools": ["Bash", "Edit", "Read", "Write", "Glob", "Grep", "WebFetch"],
        "model": "claude-haiku-4-5",
        "permissionMode": "bypassPermissions",
        "claude_code_version": "2.1.328",
    }
    lines = [json.dumps(init, separators=(",", ":"))]
    size = len(lines[0])
    t = 0.0
    n = 0
    words = (
        "the build failed because the include path for the host compiler is missing from the toolchain"
    ).split()
    while size < target_bytes:
        n += 1
        t += rng.uniform(0.2, 4.0)
        tool_id = f"toolu_{n:020d}"
        kind = rng.random()
        if kind < 0.5:
            name, tool_input = (
                "Bash",
                {"command": f"bazel test //cpp/oneapi/dal/algo:test_{n} --config=host", "description": "run"},
            )
            out_len = rng.choice([40, 400, 2_000, 6_000, 20_000, 60_000])
            output = "\n".join(
                f"INFO: {rng.choice(words)} {i} {' '.join(rng.sample(words, 6))}"
                for i in range(out_len // 60)
            )
            result = {"stdout": output, "stderr": "", "interrupted": False, "isImage": False}
            is_error = rng.random() < 0.3
        elif kind < 0.75:
            name, tool_input = "Read", {"file_path": f"/eval/run/workspace/cpp/src/file_{n}.cpp"}
            output = "\n".join(
                f"{i}\t// {' '.join(rng.sample(words, 8))}" for i in range(1, rng.randint(20, 400))
            )
            result = {"type": "text", "file": {"filePath": tool_input["file_path"], "numLines": 10}}
            is_error = False
        elif kind < 0.9:
            name = "Edit"
            tool_input = {
                "file_path": f"/eval/run/workspace/cpp/src/file_{n}.cpp",
                "old_string": "int a;",
                "new_string": "long a;",
            }
            output = f"The file {tool_input['file_path']} has been updated successfully."
            result = {"filePath": tool_input["file_path"], "oldString": "int a;", "newString": "long a;"}
            is_error = False
        else:
            name, tool_input = "Grep", {"pattern": f"kmeans_{n}", "path": "cpp"}
            output = "\n".join(f"cpp/x_{i}.cpp:{i}: kmeans" for i in range(rng.randint(1, 50)))
            result = {"mode": "content", "numFiles": 3}
            is_error = False
        text: dict[str, Any] = {
            "type": "assistant",
            "message": {
                "id": f"msg_{n}",
                "type": "message",
                "role": "assistant",
                "model": "claude-haiku-4-5",
                "content": [{"type": "text", "text": " ".join(rng.choices(words, k=rng.randint(5, 60)))}],
                "stop_reason": None,
                "stop_sequence": None,
                "usage": _usage(),
            },
            "parent_tool_use_id": None,
            "session_id": SESSION,
            "uuid": f"u-{n}-a",
            "timestamp": _ts(t),
        }
        use = dict(text)
        use["message"] = {
            **text["message"],
            "content": [{"type": "tool_use", "id": tool_id, "name": name, "input": tool_input}],
        }
        use["uuid"] = f"u-{n}-b"
        res = {
            "type": "user",
            "message": {
                "role": "user",
                "content": [
                    {"tool_use_id": tool_id, "type": "tool_result", "content": output, "is_error": is_error}
                ],
            },
            "parent_tool_use_id": None,
            "session_id": SESSION,
            "uuid": f"u-{n}-c",
            "timestamp": _ts(t + rng.uniform(0.01, 3)),
            "tool_use_result": {**result, "stdout": output} if name == "Bash" else result,
        }
        for obj in (text, use, res):
            line = json.dumps(obj, separators=(",", ":"))
            lines.append(line)
            size += len(line) + 1
    result_line = {
        "type": "result",
        "subtype": "success",
        "is_error": False,
        "num_turns": n,
        "result": "done",
        "total_cost_usd": 1.23,
        "usage": _usage(),
        "session_id": SESSION,
    }
    lines.append(json.dumps(result_line))
    return lines


def best_of(repeat: int, fn: Callable[[], object]) -> float:
    times = []
    for _ in range(repeat):
        start = time.perf_counter()
        fn()
        times.append(time.perf_counter() - start)
    return min(times)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--mb", type=float, default=50.0)
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()
    lines = make_trace(int(args.mb * 1024 * 1024))
    mb = sum(len(line) + 1 for line in lines) / 1024 / 1024
    loads = json.loads

    def baseline() -> None:
        for line in lines:
            loads(line)

    conversion = convert_claude_stream_json(lines)
    t_base = best_of(args.repeat, baseline)
    t_conv = best_of(args.repeat, lambda: convert_claude_stream_json(lines))
    events = len(conversion.events)
    print(
        f"trace: {mb:.1f} MB, {len(lines)} lines, {events} events "
        f"({sum(1 for e in conversion.events if e.get('output_truncated'))} outputs truncated)"
    )
    print(f"json.loads of every line : {t_base:.3f} s  ({t_base / len(lines) * 1e6:.1f} us/line)")
    per_event = (t_conv - t_base) / max(events, 1) * 1e6
    print(f"convert_claude_stream_json: {t_conv:.3f} s  ({per_event:.1f} us/event over baseline)")
    print(f"ratio: {t_conv / t_base:.2f}x (target <= 2x)")


if __name__ == "__main__":
    main()
