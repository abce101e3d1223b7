"""The price table and the usage reader: pure functions over literal responses."""

from __future__ import annotations

import json

import pytest

from dokimi.gateway.prices import CHECKED, PRICES, Usage, cost_of, price_for
from dokimi.gateway.usage import UsageMeter, response_model, response_usage


def test_the_price_table_says_when_it_was_checked() -> None:
    year, month, day = CHECKED.split("-")
    assert len(year) == 4 and 1 <= int(month) <= 12 and 1 <= int(day) <= 31
    assert all(p.input > 0 and p.output >= p.input for p in PRICES.values())


@pytest.mark.parametrize(
    ("model", "key"),
    [
        ("claude-haiku-4-5", "claude-haiku-4-5"),
        ("us.anthropic.claude-haiku-4-5-20251001-v1:0", "claude-haiku-4-5"),
        ("claude-opus-4-5-20251101", "claude-opus-4-5"),
        ("claude-opus-4-20250514", "claude-opus-4"),
        ("claude-sonnet-5", "claude-sonnet-5"),
        ("claude-sonnet-5-5", "claude-sonnet-5-5"),
    ],
)
def test_a_model_id_is_priced_by_the_longest_key_it_contains(model: str, key: str) -> None:
    found = price_for(model)
    assert found is not None and found[0] == key


def test_a_key_does_not_match_inside_a_longer_version_number() -> None:
    assert price_for("claude-opus-45") is None
    assert price_for("gpt-unknown") is None
    assert cost_of("gpt-unknown", Usage(input=10)) is None


def test_cost_adds_every_token_kind_at_its_own_rate() -> None:
    usage = Usage(input=1_000_000, output=1_000_000, cache_write=1_000_000, cache_read=1_000_000)
    assert cost_of("claude-haiku-4-5", usage) == pytest.approx(1.0 + 5.0 + 1.25 + 0.10)


def sse(*events: dict[str, object]) -> bytes:
    return "".join(f"event: {e['type']}\ndata: {json.dumps(e)}\n\n" for e in events).encode()


def test_an_anthropic_stream_counts_its_cumulative_output_once() -> None:
    body = sse(
        {
            "type": "message_start",
            "message": {
                "model": "claude-haiku-4-5",
                "usage": {
                    "input_tokens": 10,
                    "output_tokens": 1,
                    "cache_creation_input_tokens": 100,
                    "cache_read_input_tokens": 1000,
                },
            },
        },
        {"type": "message_delta", "usage": {"output_tokens": 42}},
        {"type": "message_stop"},
    )
    assert response_usage(body, "text/event-stream") == Usage(10, 42, 100, 1000)
    assert response_model(body, "text/event-stream") == "claude-haiku-4-5"


def test_openai_counts_cached_tokens_inside_input_and_they_are_moved_out() -> None:
    responses = {
        "usage": {"input_tokens": 100, "output_tokens": 7, "input_tokens_details": {"cached_tokens": 60}}
    }
    chat = {
        "usage": {"prompt_tokens": 50, "completion_tokens": 5, "prompt_tokens_details": {"cached_tokens": 0}}
    }
    assert response_usage(json.dumps(responses).encode(), "application/json") == Usage(40, 7, 0, 60)
    assert response_usage(json.dumps(chat).encode(), "application/json") == Usage(50, 5, 0, 0)


def test_gemini_usage_metadata_counts_thoughts_as_output() -> None:
    body = {
        "usageMetadata": {
            "promptTokenCount": 30,
            "candidatesTokenCount": 4,
            "thoughtsTokenCount": 6,
            "cachedContentTokenCount": 10,
        },
        "modelVersion": "gemini-x",
    }
    assert response_usage(json.dumps(body).encode(), "application/json") == Usage(20, 10, 0, 10)
    assert response_model(json.dumps(body).encode(), None) == "gemini-x"


@pytest.mark.parametrize(
    "body",
    [
        b'{"message": "hello"}',
        b'{"input_tokens": 12}',
        b'{"type":"error","error":{"type":"overloaded_error"}}',
        b"",
    ],
)
def test_a_response_without_usage_is_not_a_model_response(body: bytes) -> None:
    assert response_usage(body, "application/json") is None


ANSWER = '{"type": "message", "usage": {"input_tokens": %s, "output_tokens": 3}%s}'


@pytest.mark.parametrize(
    ("counter", "extra", "why"),
    [
        ("-5", "", "a usage counter input_tokens of '-5', not a count of tokens"),
        ("12.5", "", "a usage counter input_tokens of '12.5', not a count of tokens"),
        ('"12"', "", "a usage counter input_tokens of '12', not a count of tokens"),
        ("9" * 400, "", "is not JSON the gateway reads: holds an integer of 400 digits (more than 20)"),
        ("9" * 5000, "", "is not JSON the gateway reads: holds an integer of 5000 digits (more than 20)"),
        ("7", ', "x": ' + "[" * 900 + "]" * 900, "is not JSON the gateway reads: nested more than 64 levels"),
    ],
    ids=["negative", "fraction", "text", "400-digits", "5000-digits", "900-deep"],
)
@pytest.mark.parametrize("stream", [False, True], ids=["body", "stream"])
def test_usage_the_gateway_cannot_count_is_unreadable_and_says_why(
    counter: str, extra: str, why: str, stream: bool
) -> None:
    answer = (ANSWER % (counter, extra)).encode()
    meter = UsageMeter("text/event-stream" if stream else "application/json")
    if stream:
        meter.feed(b"event: message_start\ndata: " + answer + b"\n\n")
    else:
        meter.feed(answer)
    assert meter.finish() is None  # charged its worst case, never counted as nothing
    assert meter.unreadable is not None
    assert meter.unreadable.startswith("an event of the answer " if stream else "the answer ")
    assert why in meter.unreadable, meter.unreadable


def test_a_null_or_integral_counter_is_read() -> None:
    meter = UsageMeter("application/json")
    meter.feed(b'{"usage": {"input_tokens": null, "output_tokens": 3.0}}')
    assert meter.finish() == Usage(0, 3) and meter.unreadable is None
