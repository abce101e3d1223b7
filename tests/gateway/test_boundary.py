"""The boundary between an infrastructure error and a failure, row by row of docs/network.md's table: literal
gateway records (the real gateway writes them in tests/gateway/test_model_gateway.py and the sealed e2e)."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest

from dokimi.gateway.boundary import infra_only_when_upstream_failed, read_gateway_records

USAGE = {"input_tokens": 10, "output_tokens": 5, "cache_write_tokens": 0, "cache_read_tokens": 0}


def answer(status: int, message: str | None = None, kind: str = "invalid_request_error") -> dict[str, Any]:
    body = None if message is None else {"type": "error", "error": {"type": kind, "message": message}}
    return {"status": status, "response": body, "usage": USAGE if status == 200 and message is None else None}


UNREACHABLE = {"status": 502, "error": "connection refused", "response": None, "usage": None}
TOO_LONG = answer(400, "prompt is too long: 210000 tokens > 200000 maximum")
OVERLOADED = answer(529, "Overloaded", "overloaded_error")
RATE = answer(429, "rate", "rate_limit_error")
KEY = answer(401, "invalid x-api-key", "authentication_error")
MODEL = answer(200)
BATCHES = {
    "status": 403,
    "error": "POST /v1/messages/batches is not a path the model APIs use",
    "response": None,
}
UNREAD = {"status": 200, "usage": None, "cost_basis": "worst case: the answer carries no usage"}

#: (records, agent_rc, verdict, words in the reason): docs/network.md's table
ROWS = [
    ([OVERLOADED] * 11, 1, "infra", "only errors (11x 529)"),
    ([RATE, answer(503, "down", "api_error")], 1, "infra", "1x 429, 1x 503"),
    ([UNREACHABLE, UNREACHABLE], 1, "infra", "could not be reached (connection refused)"),
    ([KEY], 1, "infra", "refused every request (1x 401)"),
    ([answer(404, "model: nope", "not_found_error")], 1, "infra", "the credentials or the model name"),
    ([TOO_LONG], 1, "failure", "refused the agent's request as invalid (400: prompt is too long"),
    ([OVERLOADED, TOO_LONG], 1, "failure", "400: prompt is too long"),
    ([answer(422, "bad tool schema")], 1, "failure", "(422: bad tool schema)"),
    ([], 1, "failure", "exited 1 without sending any request"),
    ([{"status": 200, "response": {"data": []}, "usage": None}], 1, "failure", "none of them a model call"),
    ([], 127, "not_started", "could not start (exit 127)"),
    ([BATCHES], 1, "failure", "the model gateway refused the agent's request (403: POST /v1/messages"),
    ([UNREAD], 1, "reached", ""),
    ([OVERLOADED, RATE, MODEL], 1, "reached", ""),
    ([MODEL, TOO_LONG], 1, "reached", ""),
    ([{"status": 200, "response": [{"type": "error", "error": {"type": "overloaded_error"}}], "usage": None}],
     1, "infra", "only errors (1x 200)"),
]  # fmt: skip


@pytest.mark.parametrize(("records", "rc", "verdict", "words"), ROWS)
def test_infra_only_when_the_upstream_failed(
    records: list[dict[str, Any]], rc: int, verdict: str, words: str
) -> None:
    reach = infra_only_when_upstream_failed(records, agent_rc=rc, timed_out=False)
    assert reach.verdict == verdict, reach
    assert words in (reach.reason or ""), reach.reason


def test_a_timeout_without_a_request_is_the_cells_failure_not_a_start_failure() -> None:
    reach = infra_only_when_upstream_failed([], agent_rc=None, timed_out=True)
    assert (reach.verdict, reach.reason) == (
        "failure",
        "the harness timed out without sending any request to the model",
    )


def test_the_records_are_read_lazily_and_the_first_model_response_decides(tmp_path: Path) -> None:
    path = tmp_path / "gateway.jsonl"
    path.write_text('{"status": 200, "usage": {"input_tokens": 1}}\nnot json\n' + "{}\n" * 3)
    records = read_gateway_records(path)
    assert infra_only_when_upstream_failed(records, agent_rc=0, timed_out=False).verdict == "reached"
    assert len(list(records)) == 3  # the rest was never read (the unparsable line is skipped)
    assert list(read_gateway_records(tmp_path / "absent.jsonl")) == []


def test_the_docs_table_names_every_verdict() -> None:
    docs = (Path(__file__).resolve().parents[2] / "docs" / "network.md").read_text()
    table = docs.split("## Errors are not failures", 1)[1].split("\n## ", 1)[0]
    for verdict in ("infra error", "failure", "failed before the agent ran"):
        assert re.search(rf"\| [^|\n]*{verdict}", table), verdict
