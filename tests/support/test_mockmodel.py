"""The scripted model server over real HTTP on loopback: wire format, scripts, side requests, capture."""

from __future__ import annotations

import http.client
import json
import os
import signal
import socket
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import pytest

import dokimi.support.mockmodel as mockmodel_module
from dokimi.support.mockmodel import (
    DEFAULT_INPUT_TOKENS,
    DEFAULT_OUTPUT_TOKENS,
    DONE_TEXT,
    SIDE_TEXT,
    MockModelServer,
    ScriptError,
    find_tokens,
    is_main_loop_request,
    load_script,
)

AGENT_SYSTEM = [
    {"type": "text", "text": "x-anthropic-billing-header: cc_version=2.1.328; cc_entrypoint=sdk-cli;"},
    {"type": "text", "text": "You are a Claude agent, built on Anthropic's Claude Agent SDK."},
]
BASH_TOOL = {"name": "Bash", "description": "run", "input_schema": {"type": "object"}}


def messages_body(text: str = "hi", *, stream: bool = True, **extra: Any) -> dict[str, Any]:
    body: dict[str, Any] = {
        "model": "claude-haiku-4-5",
        "max_tokens": 32000,
        "stream": stream,
        "system": AGENT_SYSTEM,
        "tools": [BASH_TOOL],
        "messages": [{"role": "user", "content": [{"type": "text", "text": text}]}],
    }
    body.update(extra)
    return body


def request(
    url: str, method: str, path: str, body: Any = None, headers: dict[str, str] | None = None
) -> tuple[int, dict[str, str], bytes]:
    parts = urlsplit(url)
    assert parts.hostname is not None
    conn = http.client.HTTPConnection(parts.hostname, parts.port, timeout=10)
    data = json.dumps(body).encode() if body is not None else None
    hdrs = {"content-type": "application/json", **(headers or {})}
    conn.request(method, path, body=data, headers=hdrs)
    resp = conn.getresponse()
    payload = resp.read()
    conn.close()
    return resp.status, {k.lower(): v for k, v in resp.getheaders()}, payload


def sse_events(payload: bytes) -> list[tuple[str, dict[str, Any]]]:
    events = []
    for chunk in payload.decode().split("\n\n"):
        if not chunk.strip():
            continue
        lines = dict(line.split(": ", 1) for line in chunk.splitlines())
        events.append((lines["event"], json.loads(lines["data"])))
    return events


def message_from_sse(events: list[tuple[str, dict[str, Any]]]) -> dict[str, Any]:
    """Reassemble a message the way an SDK does: text deltas concatenated, input_json_delta parsed."""
    message: dict[str, Any] = events[0][1]["message"]
    blocks: dict[int, dict[str, Any]] = {}
    partial: dict[int, str] = {}
    for name, data in events[1:]:
        if name == "content_block_start":
            blocks[data["index"]] = dict(data["content_block"])
        elif name == "content_block_delta":
            delta = data["delta"]
            if delta["type"] == "text_delta":
                blocks[data["index"]]["text"] += delta["text"]
            else:
                partial[data["index"]] = partial.get(data["index"], "") + delta["partial_json"]
        elif name == "content_block_stop" and data["index"] in partial:
            blocks[data["index"]]["input"] = json.loads(partial[data["index"]])
        elif name == "message_delta":
            message["stop_reason"] = data["delta"]["stop_reason"]
    message["content"] = [blocks[i] for i in sorted(blocks)]
    return message


@pytest.fixture
def server(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[MockModelServer]:
    script = getattr(request, "param", [])
    with MockModelServer(script, capture_path=tmp_path / "capture.jsonl") as srv:
        yield srv


SCRIPT = [
    {"text": "Let me edit.", "tool_use": {"name": "Bash", "input": {"command": "echo x > f.txt"}}},
    {"final": "Edited f.txt."},
]


@pytest.mark.slow
@pytest.mark.parametrize("server", [SCRIPT], indirect=True)
def test_a_streamed_tool_call_arrives_as_sse_blocks_with_input_json_delta(server: MockModelServer) -> None:
    status, headers, payload = request(server.url, "POST", "/v1/messages?beta=true", messages_body())
    assert status == 200 and headers["content-type"] == "text/event-stream"
    events = sse_events(payload)
    names = [name for name, _ in events]
    assert names[:2] == ["message_start", "ping"] and names[-2:] == ["message_delta", "message_stop"]
    assert names.count("content_block_start") == names.count("content_block_stop") == 2
    message = message_from_sse(events)
    assert message["stop_reason"] == "tool_use"
    assert message["model"] == "claude-haiku-4-5"
    text, call = message["content"]
    assert text == {"type": "text", "text": "Let me edit."}
    assert call["type"] == "tool_use" and call["name"] == "Bash" and call["id"].startswith("toolu_")
    assert call["input"] == {"command": "echo x > f.txt"}
    assert events[-2][1]["usage"]["output_tokens"] == DEFAULT_OUTPUT_TOKENS
    assert events[0][1]["message"]["usage"]["input_tokens"] == DEFAULT_INPUT_TOKENS


@pytest.mark.slow
@pytest.mark.parametrize("server", [SCRIPT], indirect=True)
def test_a_non_streaming_request_gets_the_same_turn_as_one_json_message(server: MockModelServer) -> None:
    status, headers, payload = request(server.url, "POST", "/v1/messages", messages_body(stream=False))
    assert status == 200 and headers["content-type"] == "application/json"
    message = json.loads(payload)
    assert message["type"] == "message" and message["stop_reason"] == "tool_use"
    assert message["content"][1]["input"] == {"command": "echo x > f.txt"}
    assert (message["usage"]["input_tokens"], message["usage"]["output_tokens"]) == (1000, 100)


@pytest.mark.slow
@pytest.mark.parametrize("server", [SCRIPT], indirect=True)
def test_turns_play_in_order_and_an_exhausted_script_answers_done(server: MockModelServer) -> None:
    answers = []
    for _ in range(4):
        _, _, payload = request(server.url, "POST", "/v1/messages", messages_body(stream=False))
        message = json.loads(payload)
        answers.append((message["stop_reason"], message["content"][-1].get("text")))
    assert answers == [
        ("tool_use", None),
        ("end_turn", "Edited f.txt."),
        ("end_turn", DONE_TEXT),
        ("end_turn", DONE_TEXT),
    ]
    assert [r.turn for r in server.requests] == [0, 1, None, None]
    assert server.turns_left == 0


@pytest.mark.slow
@pytest.mark.parametrize("server", [SCRIPT], indirect=True)
def test_side_requests_get_a_canned_answer_and_do_not_consume_the_script(server: MockModelServer) -> None:
    quota = {"model": "claude-haiku-4-5", "max_tokens": 1, "messages": [{"role": "user", "content": "quota"}]}
    title = {
        "model": "claude-haiku-4-5",
        "max_tokens": 512,
        "system": [{"type": "text", "text": "Generate a concise title for this conversation."}],
        "messages": [{"role": "user", "content": "fix the bug"}],
    }
    for body in (quota, title):
        _, _, payload = request(server.url, "POST", "/v1/messages", body)
        assert json.loads(payload)["content"] == [{"type": "text", "text": SIDE_TEXT}]
    _, _, payload = request(server.url, "POST", "/v1/messages", messages_body(stream=False))
    assert json.loads(payload)["stop_reason"] == "tool_use"
    assert [(r.main_loop, r.turn) for r in server.requests] == [(False, None), (False, None), (True, 0)]


def test_the_main_loop_rule() -> None:
    no_tools = messages_body()
    del no_tools["tools"]
    assert is_main_loop_request(messages_body())  # offers tools
    assert is_main_loop_request(no_tools)  # Claude Code with --tools "": agent system prompt
    assert is_main_loop_request({"model": "m", "max_tokens": 100, "messages": []})  # plain client, no system
    assert not is_main_loop_request(messages_body(max_tokens=1))  # quota check
    assert not is_main_loop_request({**no_tools, "system": "Summarize this conversation in 5 words"})
    assert not is_main_loop_request(messages_body(model="claude-haiku-4-5"), main_model="claude-opus-4-1")
    assert is_main_loop_request(messages_body(model="claude-opus-4-1"), main_model="claude-opus-4-1")
    assert not is_main_loop_request("not a mapping")


@pytest.mark.slow
@pytest.mark.parametrize(
    "server", [[{"echo_tokens": True}, {"text": "Tokens:", "echo_tokens": True}]], indirect=True
)
def test_echo_tokens_answers_with_every_rc_token_in_the_request_in_order_once(
    server: MockModelServer,
) -> None:
    body = messages_body(
        "Contents of CLAUDE.md: RCabc123 ... RC00ff00 ... RCabc123 again; "
        "RCABCDEF is not a token, RCabc12 neither",
        stream=False,
    )
    _, _, payload = request(server.url, "POST", "/v1/messages", body)
    assert json.loads(payload)["content"][0]["text"] == "RCabc123 RC00ff00"
    _, _, payload = request(server.url, "POST", "/v1/messages", messages_body("nothing here", stream=False))
    assert json.loads(payload)["content"][0]["text"] == "Tokens:\n"


@pytest.mark.slow
@pytest.mark.parametrize("server", [[{"echo_tokens": True}]], indirect=True)
def test_an_echo_with_no_token_answers_none_which_the_reach_probe_reads_as_no_prose(
    server: MockModelServer,
) -> None:
    """The reach probe asks for NONE when there is no token; the scripted model answering anything else
    made the probe warn about "prose words" on the scripted model's own answer."""
    from dokimi.checks.reach import parse_answer

    _, _, payload = request(server.url, "POST", "/v1/messages", messages_body("nothing here", stream=False))
    answer = json.loads(payload)["content"][0]["text"]
    assert parse_answer(answer, ["RCabc123"]).prose == 0


def test_find_tokens_reads_bytes_and_text_alike() -> None:
    assert find_tokens(b'{"a":"RC0a1b2c","b":"xRC999999y"}') == ["RC0a1b2c", "RC999999"]
    assert find_tokens("RCdeadbe\u00e9") == ["RCdeadbe"]


@pytest.mark.slow
@pytest.mark.parametrize("server", [SCRIPT], indirect=True)
def test_every_request_is_captured_to_jsonl_without_credentials(
    server: MockModelServer, tmp_path: Path
) -> None:
    request(server.url, "HEAD", "/api/hello")
    request(
        server.url,
        "POST",
        "/v1/messages?beta=true",
        messages_body("RCabc123", stream=False),
        headers={
            "x-api-key": "sk-secret",
            "authorization": "Bearer sk-secret",
            "anthropic-version": "2023-06-01",
        },
    )
    lines = [json.loads(line) for line in (tmp_path / "capture.jsonl").read_text().splitlines()]
    assert [(line["method"], line["path"]) for line in lines] == [
        ("HEAD", "/api/hello"),
        ("POST", "/v1/messages?beta=true"),
    ]
    assert lines[1]["body"]["messages"][0]["content"][0]["text"] == "RCabc123"
    assert lines[1]["headers"]["anthropic-version"] == "2023-06-01"
    assert "sk-secret" not in (tmp_path / "capture.jsonl").read_text()
    assert server.requests[1].tokens() == ["RCabc123"]
    assert b"RCabc123" in server.requests[1].raw


def usage_of(server: MockModelServer, body: dict[str, Any]) -> tuple[int, int]:
    status, _, payload = request(server.url, "POST", "/v1/messages", {**body, "stream": False})
    assert status == 200
    usage = json.loads(payload)["usage"]
    return usage["input_tokens"], usage["output_tokens"]


@pytest.mark.slow
@pytest.mark.parametrize(
    "server",
    [
        [
            {"text": "one"},
            {"text": "two", "usage": {"input": 1234, "output": 56}},
            {"final": "3", "usage": {"output": 7}},
        ]
    ],
    indirect=True,
)
def test_usage_is_fixed_per_answer_whatever_the_request_and_a_turn_can_set_it(
    server: MockModelServer, tmp_path: Path
) -> None:
    """The request's size (which a harness's host partly decides) never reaches the usage an answer reports:
    a request padded by 100 KB reports what a short one does. The size is in the capture instead."""
    short = messages_body("hi")
    padded = messages_body("OS Version: Linux 6.18.44 " + "x" * 100_000)
    assert usage_of(server, padded) == (DEFAULT_INPUT_TOKENS, DEFAULT_OUTPUT_TOKENS)
    assert usage_of(server, short) == (1234, 56)
    assert usage_of(server, padded) == (DEFAULT_INPUT_TOKENS, 7)
    assert usage_of(server, short) == (DEFAULT_INPUT_TOKENS, DEFAULT_OUTPUT_TOKENS)  # done, after the script
    side = messages_body("title?", tools=[], system="Summarise this conversation as a title")
    assert usage_of(server, side) == (DEFAULT_INPUT_TOKENS, DEFAULT_OUTPUT_TOKENS)
    lines = [json.loads(x) for x in (tmp_path / "capture.jsonl").read_text().splitlines()]
    assert [x["bytes"] for x in lines] == [len(r.raw) for r in server.requests]
    assert lines[0]["bytes"] > 100_000 > lines[1]["bytes"]


@pytest.mark.slow
def test_hello_count_tokens_and_unknown_paths(server: MockModelServer) -> None:
    assert request(server.url, "GET", "/api/hello")[0] == 200
    assert request(server.url, "HEAD", "/api/hello")[0] == 200
    status, _, payload = request(server.url, "POST", "/v1/messages/count_tokens?beta=true", messages_body())
    assert status == 200 and json.loads(payload)["input_tokens"] == DEFAULT_INPUT_TOKENS
    status, _, payload = request(server.url, "GET", "/v1/models")
    assert status == 200 and json.loads(payload) == {"object": "list", "data": []}
    status, _, payload = request(server.url, "GET", "/v1/engines")
    assert status == 404 and json.loads(payload)["error"]["type"] == "not_found_error"
    assert [r.known for r in server.requests] == [True, True, True, True, False]


@pytest.mark.slow
@pytest.mark.parametrize("server", [[{"error": {"status": 529, "type": "overloaded_error"}}]], indirect=True)
def test_an_error_turn_answers_with_that_status_and_an_api_error_body(server: MockModelServer) -> None:
    status, _, payload = request(server.url, "POST", "/v1/messages", messages_body())
    assert status == 529
    assert json.loads(payload)["error"]["type"] == "overloaded_error"


@pytest.mark.parametrize(
    ("turns", "message"),
    [
        ([{"bogus": 1}], r"turns\[0\]: unknown key"),
        ([{}], "an empty turn"),
        ([{"text": "a", "final": "b"}], "same kind of answer"),
        ([{"final": "a", "tool_use": {"name": "Bash"}}], "one of final, tool_use"),
        ([{"tool_use": {"input": {}}}], "non-empty string 'name'"),
        ([{"tool_use": {"name": "Bash", "input": "ls"}}], "must be a mapping"),
        ({"not": "a list"}, "a script is a list of turns"),
        ([{"final": "a", "usage": 5}], r"turns\[0\]: 'usage' must be a mapping"),
        ([{"final": "a", "usage": {"input": -1}}], "usage.input must be a whole number"),
        ([{"final": "a", "usage": {"output": 1.5}}], "usage.output must be a whole number"),
        ([{"final": "a", "usage": {"input": True}}], "usage.input must be a whole number"),
        ([{"final": "a", "usage": {"cached": 3}}], r"unknown key\(s\) \['cached'\] in usage"),
        ([{"error": {"status": 529}, "usage": {"input": 3}}], "an error answer reports no usage"),
        ([{"usage": {"input": 3}}], "an empty turn"),
    ],
)
def test_a_bad_script_names_the_turn_and_the_problem(tmp_path: Path, turns: Any, message: str) -> None:
    path = tmp_path / "script.json"
    path.write_text(json.dumps(turns))
    with pytest.raises(ScriptError, match=message):
        load_script(path)


def test_a_script_that_is_not_json_names_the_line(tmp_path: Path) -> None:
    path = tmp_path / "script.json"
    path.write_text('[\n{"final": "x"},\n{oops}\n]')
    with pytest.raises(ScriptError, match=r"script.json:3: not valid JSON"):
        load_script(path)


def test_a_yaml_script_plays_like_json(tmp_path: Path) -> None:
    path = tmp_path / "script.yaml"
    path.write_text("turns:\n  - tool_use: {name: Read, input: {file_path: README.md}}\n  - final: read it\n")
    turns = load_script(path)
    assert turns[0].tool_calls[0].name == "Read" and turns[0].stop_reason == "tool_use"
    assert turns[1].text == "read it" and turns[1].stop_reason == "end_turn"


def _start_standalone(argv: list[str], cwd: Path) -> tuple[subprocess.Popen[str], str]:
    proc = subprocess.Popen(argv, cwd=cwd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    assert proc.stdout is not None
    url = proc.stdout.readline().strip()
    assert url.startswith("http://127.0.0.1:"), proc.stderr.read() if proc.stderr else url
    return proc, url


@pytest.mark.slow
def test_the_single_file_runs_standalone_with_only_the_stdlib(tmp_path: Path) -> None:
    # A copy outside the package, run with -I -S (no site-packages, no PYTHONPATH): what a container's
    # read-only support dir does.
    support = tmp_path / "support"
    support.mkdir()
    copy = support / "mockmodel.py"
    copy.write_text(Path(mockmodel_module.__file__).read_text())
    (tmp_path / "s.json").write_text(json.dumps([{"final": "standalone ok"}]))
    capture = tmp_path / "cap.jsonl"
    argv = [
        sys.executable,
        "-I",
        "-S",
        str(copy),
        "--script",
        str(tmp_path / "s.json"),
        "--capture",
        str(capture),
    ]
    proc, url = _start_standalone(argv, tmp_path)
    try:
        _, _, payload = request(url, "POST", "/v1/messages", messages_body(stream=False))
        assert json.loads(payload)["content"][0]["text"] == "standalone ok"
    finally:
        proc.send_signal(signal.SIGTERM)
        proc.communicate(timeout=10)
    assert proc.returncode == 0
    assert len(capture.read_text().splitlines()) == 1


@pytest.mark.slow
def test_dokimi_mock_model_serve_plays_a_script_and_rejects_a_bad_one(tmp_path: Path) -> None:
    (tmp_path / "s.json").write_text(json.dumps([{"final": "from the cli"}]))
    env = {**os.environ, "PYTHONPATH": str(Path(mockmodel_module.__file__).parents[2])}
    argv = [sys.executable, "-m", "dokimi", "mock-model", "serve", "--script", str(tmp_path / "s.json")]
    proc = subprocess.Popen(
        argv, cwd=tmp_path, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env
    )
    try:
        assert proc.stdout is not None
        url = proc.stdout.readline().strip()
        _, _, payload = request(url, "POST", "/v1/messages", messages_body(stream=False))
        assert json.loads(payload)["content"][0]["text"] == "from the cli"
    finally:
        proc.send_signal(signal.SIGTERM)
        proc.communicate(timeout=10)
    (tmp_path / "bad.json").write_text(json.dumps([{"bogus": True}]))
    bad = subprocess.run(
        [*argv[:-1], str(tmp_path / "bad.json")],
        check=False,
        cwd=tmp_path,
        capture_output=True,
        text=True,
        env=env,
        timeout=60,
    )
    assert bad.returncode == 2
    assert "unknown key(s) ['bogus']" in bad.stderr and "docs/mock-model.md" in bad.stderr


@pytest.mark.slow
def test_serving_on_a_port_already_in_use_is_an_environment_error_not_a_bug(tmp_path: Path) -> None:
    (tmp_path / "s.json").write_text(json.dumps([{"final": "x"}]))
    env = {**os.environ, "PYTHONPATH": str(Path(mockmodel_module.__file__).parents[2])}
    with socket.socket() as busy:
        busy.bind(("127.0.0.1", 0))
        busy.listen()
        port = busy.getsockname()[1]
        done = subprocess.run(
            [sys.executable, "-m", "dokimi", "mock-model", "serve", "--script", str(tmp_path / "s.json"),
             "--port", str(port)],
            check=False, cwd=tmp_path, capture_output=True, text=True, env=env, timeout=60,
        )  # fmt: skip
    assert done.returncode == 2, done.stderr
    assert "Traceback" not in done.stderr
    assert f"127.0.0.1:{port}" in done.stderr and "--port" in done.stderr
