"""The scripted model server's OpenAI Responses, OpenAI Chat Completions and Gemini generateContent wire
formats, over real HTTP: one script plays in every API, streaming and not, with the same capture."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from dokimi.support.mockmodel import CHAT, GEMINI, RESPONSES, MockModelServer, api_of, is_main_loop_request
from tests.support.test_mockmodel import request

SCRIPT = [
    {"text": "Let me look.", "tool_use": {"name": "exec_command", "input": {"cmd": "ls"}}},
    {"echo_tokens": True},
]
TOOLS_RESPONSES = [{"type": "function", "name": "exec_command", "parameters": {"type": "object"}}]


@pytest.fixture
def server(tmp_path: Path) -> Iterator[MockModelServer]:
    with MockModelServer(SCRIPT, capture_path=tmp_path / "capture.jsonl") as srv:
        yield srv


def data_lines(payload: bytes) -> list[str]:
    return [line[len("data: ") :] for line in payload.decode().splitlines() if line.startswith("data: ")]


def named_events(payload: bytes) -> list[tuple[str, dict[str, Any]]]:
    out = []
    for chunk in payload.decode().split("\n\n"):
        if chunk.strip():
            fields = dict(line.split(": ", 1) for line in chunk.splitlines())
            out.append((fields["event"], json.loads(fields["data"])))
    return out


def responses_body(stream: bool, text: str = "hi RCabcdef") -> dict[str, Any]:
    return {
        "model": "gpt-5-mini",
        "instructions": "You are a coding agent",
        "input": [{"type": "message", "role": "user", "content": [{"type": "input_text", "text": text}]}],
        "tools": TOOLS_RESPONSES,
        "stream": stream,
    }


def test_the_path_decides_the_api() -> None:
    assert api_of("POST", "/v1/responses").api == RESPONSES  # type: ignore[union-attr]
    assert api_of("POST", "/responses").api == RESPONSES  # type: ignore[union-attr]
    assert api_of("POST", "/v1/chat/completions").api == CHAT  # type: ignore[union-attr]
    gem = api_of("POST", "/v1beta/models/gemini-2.5-flash:streamGenerateContent")
    assert gem is not None and gem.api == GEMINI and gem.stream is True and gem.model == "gemini-2.5-flash"
    gem = api_of("POST", "/v1beta/models/gemini-2.5-flash:generateContent")
    assert gem is not None and gem.stream is False
    assert api_of("POST", "/v1beta/models/m:embedContent") is None
    assert api_of("DELETE", "/v1/responses") is None


@pytest.mark.slow
def test_responses_streamed_a_function_call_then_echoed_tokens(server: MockModelServer) -> None:
    status, headers, payload = request(server.url, "POST", "/v1/responses", responses_body(True))
    assert status == 200 and headers["content-type"] == "text/event-stream"
    events = named_events(payload)
    names = [n for n, _ in events]
    assert names[0] == "response.created" and names[-1] == "response.completed"
    done = [d["item"] for n, d in events if n == "response.output_item.done"]
    assert [i["type"] for i in done] == ["message", "function_call"]
    assert done[0]["content"][0]["text"] == "Let me look."
    assert done[1]["name"] == "exec_command" and json.loads(done[1]["arguments"]) == {"cmd": "ls"}
    assert done[1]["call_id"].startswith("call_")
    assert [d["sequence_number"] for _, d in events] == list(range(len(events)))
    completed = events[-1][1]["response"]
    assert completed["status"] == "completed" and completed["output"] == done
    assert completed["usage"]["total_tokens"] >= 2
    status, _, payload = request(server.url, "POST", "/v1/responses", responses_body(False))
    answer = json.loads(payload)
    assert status == 200 and answer["object"] == "response"
    assert answer["output"][0]["content"][0]["text"] == "RCabcdef"
    assert [r.turn for r in server.requests] == [0, 1]


@pytest.mark.slow
def test_chat_completions_streamed_and_not(server: MockModelServer) -> None:
    body = {
        "model": "gpt-4o",
        "messages": [{"role": "user", "content": "go RCabcdef"}],
        "stream": True,
        "tools": [{"type": "function", "function": {"name": "exec_command", "parameters": {}}}],
    }
    status, _, payload = request(server.url, "POST", "/v1/chat/completions", body)
    lines = data_lines(payload)
    assert status == 200 and lines[-1] == "[DONE]"
    chunks = [json.loads(line) for line in lines[:-1]]
    text = "".join(c["choices"][0]["delta"].get("content") or "" for c in chunks if c["choices"])
    calls = [tc for c in chunks if c["choices"] for tc in c["choices"][0]["delta"].get("tool_calls", [])]
    finish = [c["choices"][0]["finish_reason"] for c in chunks if c["choices"]]
    assert text == "Let me look."
    assert calls[0]["function"]["name"] == "exec_command"
    assert json.loads(calls[0]["function"]["arguments"]) == {"cmd": "ls"}
    assert finish[-1] == "tool_calls" and chunks[-1]["usage"]["total_tokens"] == 1100
    status, _, payload = request(server.url, "POST", "/v1/chat/completions", {**body, "stream": False})
    answer = json.loads(payload)
    assert answer["object"] == "chat.completion"
    assert answer["choices"][0]["message"]["content"] == "RCabcdef"
    assert answer["choices"][0]["finish_reason"] == "stop"


@pytest.mark.slow
def test_gemini_stream_generate_content_and_generate_content(server: MockModelServer) -> None:
    body = {
        "contents": [{"role": "user", "parts": [{"text": "go RCabcdef"}]}],
        "tools": [{"functionDeclarations": [{"name": "run_shell_command"}]}],
    }
    path = "/v1beta/models/gemini-2.5-flash:streamGenerateContent?alt=sse"
    status, headers, payload = request(server.url, "POST", path, body)
    assert status == 200 and headers["content-type"] == "text/event-stream"
    (chunk,) = [json.loads(line) for line in data_lines(payload)]
    parts = chunk["candidates"][0]["content"]["parts"]
    assert parts == [
        {"text": "Let me look."},
        {"functionCall": {"name": "exec_command", "args": {"cmd": "ls"}}},
    ]
    assert chunk["candidates"][0]["finishReason"] == "STOP" and chunk["modelVersion"] == "gemini-2.5-flash"
    status, _, payload = request(server.url, "POST", "/v1beta/models/gemini-2.5-flash:generateContent", body)
    assert json.loads(payload)["candidates"][0]["content"]["parts"] == [{"text": "RCabcdef"}]
    status, _, payload = request(server.url, "POST", "/v1beta/models/gemini-2.5-flash:countTokens", body)
    assert status == 200 and json.loads(payload)["totalTokens"] == 1000
    lines = [json.loads(x) for x in (server.capture_path or Path()).read_text().splitlines()]
    assert [x["main_loop"] for x in lines] == [True, True, False]
    assert lines[0]["path"] == path and lines[0]["body"] == body


@pytest.mark.slow
def test_a_structured_output_request_is_a_side_request_answered_with_an_empty_object(
    server: MockModelServer,
) -> None:
    body = {
        "contents": [{"role": "user", "parts": [{"text": "who speaks next?"}]}],
        "generationConfig": {
            "responseMimeType": "application/json",
            "responseJsonSchema": {"type": "object"},
        },
    }
    status, _, payload = request(server.url, "POST", "/v1beta/models/gemini-2.5-flash:generateContent", body)
    assert status == 200
    assert json.loads(payload)["candidates"][0]["content"]["parts"] == [{"text": "{}"}]
    assert server.turns_played == 0 and server.requests[0].main_loop is False
    assert not is_main_loop_request({"text": {"format": {"type": "json_schema"}}}, api=RESPONSES)
    assert not is_main_loop_request({"model": "a"}, api=CHAT, main_model="b")
    assert is_main_loop_request({"model": "b"}, api=CHAT, main_model="b")


@pytest.mark.slow
@pytest.mark.parametrize(
    ("path", "check"),
    [
        ("/v1/responses", lambda e: e["error"]["type"] == "rate_limit_error"),
        ("/v1/chat/completions", lambda e: e["error"]["code"] == "rate_limit_error"),
        ("/v1beta/models/g:generateContent", lambda e: e["error"]["status"] == "RESOURCE_EXHAUSTED"),
    ],
)
def test_an_error_turn_answers_in_the_apis_own_error_shape(tmp_path: Path, path: str, check: Any) -> None:
    script = [{"error": {"status": 429, "type": "rate_limit_error", "message": "slow down"}}]
    with MockModelServer(script) as srv:
        status, _, payload = request(srv.url, "POST", path, {"model": "m", "input": "x"})
    assert status == 429 and check(json.loads(payload))


def test_a_session_title_request_without_tools_is_a_side_request() -> None:
    title = {
        "messages": [{"role": "system", "content": "You are a title generator. You output ONLY a title"}]
    }
    assert not is_main_loop_request(title, api=CHAT)
    assert is_main_loop_request({**title, "tools": [{"type": "function"}]}, api=CHAT)
    assert is_main_loop_request({"messages": [{"role": "user", "content": "fix it"}]}, api=CHAT)


def reported_usage(api: str, payload: bytes, stream: bool) -> tuple[int, int]:
    """(input, output) tokens of an answer in ``api``'s own shape."""
    if api == RESPONSES:
        events = named_events(payload) if stream else [("", {"response": json.loads(payload)})]
        usage = events[-1][1]["response"]["usage"]
        return usage["input_tokens"], usage["output_tokens"]
    answer = json.loads(data_lines(payload)[-2 if api == CHAT else -1]) if stream else json.loads(payload)
    if api == CHAT:
        return answer["usage"]["prompt_tokens"], answer["usage"]["completion_tokens"]
    return answer["usageMetadata"]["promptTokenCount"], answer["usageMetadata"]["candidatesTokenCount"]


@pytest.mark.slow
@pytest.mark.parametrize("stream", [True, False], ids=["stream", "whole"])
@pytest.mark.parametrize(
    ("api", "path"),
    [
        (RESPONSES, "/v1/responses"),
        (CHAT, "/v1/chat/completions"),
        (GEMINI, "/v1beta/models/gemini-2.5-flash:generateContent"),
    ],
)
def test_usage_is_the_scripts_in_every_api_whatever_the_request_size(
    tmp_path: Path, api: str, path: str, stream: bool
) -> None:
    script = [{"text": "a"}, {"text": "b", "usage": {"input": 4321, "output": 9}}]
    padding = "OS Version: Linux 2.6.78 " + "x" * 50_000
    chat = [{"role": "user", "content": padding}]
    bodies = {
        RESPONSES: responses_body(stream, padding),
        CHAT: {"model": "m", "messages": chat, "tools": [{}], "stream": stream},
        GEMINI: {"contents": [{"role": "user", "parts": [{"text": padding}]}], "tools": [{}]},
    }
    if api == GEMINI and stream:
        path = path.replace(":generateContent", ":streamGenerateContent?alt=sse")
    with MockModelServer(script) as server:
        first = request(server.url, "POST", path, bodies[api])[2]
        second = request(server.url, "POST", path, bodies[api])[2]
    assert reported_usage(api, first, stream) == (1000, 100)
    assert reported_usage(api, second, stream) == (4321, 9)
