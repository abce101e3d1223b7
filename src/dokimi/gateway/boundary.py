"""The boundary between an infrastructure error and a failure, decided from a sealed cell's gateway.jsonl
(docs/network.md, "Errors are not failures").

One rule, :func:`infra_only_when_upstream_failed`: a cell is an **infra error** only when the model's API, or
the network to it, failed it: no model response came back (no 2xx answer carrying token usage), and every
error the harness got says the upstream failed (a connection error the gateway answers 502 for, a 5xx, 529,
408 or 429 after the harness's own retries) or refused the batch's credentials or model name (401, 403,
404: the same for every arm). Such a cell is rerun, and left out of every rate.

Anything an arm can cause is the cell's **failure**, with its reason, graded like any other cell (the agent
did nothing, so it fails):

- a 4xx the request itself caused (400 "prompt is too long" because a guidance file made the prompt too
  long, 413, 422 an invalid request), or a request the gateway refused itself (a path no model API uses, a
  body too large, the cell's budget spent): excusing it would favour the arm that breaks its own requests,
  the very reason a grader failure counts as a failure;
- a harness that sent no request at all, or only requests that were not model calls, and ended.

A harness that could not start at all (exit 126 or 127 before any request: the executable is missing or not
executable in the image) is neither: the cell failed before the agent ran, as when docker cannot start the
container, and the next run fills it.
"""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

__all__ = [
    "CREDENTIAL_STATUSES",
    "UPSTREAM_STATUSES",
    "ModelReach",
    "infra_only_when_upstream_failed",
    "read_gateway_records",
]

UPSTREAM_STATUSES = frozenset({408, 429, *range(500, 600)})
"""Answers that say the API (or the way to it) failed, not the request: timeouts, rate limits, overload (529),
server errors, and the gateway's own 502 for an upstream it could not reach."""
CREDENTIAL_STATUSES = frozenset({401, 403, 404})
"""Refusals of what the batch gave every cell alike (the key, the model name): not the arm's doing."""
NOT_STARTED_RCS = frozenset({126, 127})
"""What a shell or an exec wrapper exits with when the harness cannot be executed at all."""
UPSTREAM_ERROR_TYPES = frozenset({"overloaded_error", "api_error", "rate_limit_error", "timeout_error"})
"""Error types of a 2xx event stream that failed mid-way, which say the API failed (Anthropic's names)."""
MESSAGE_CHARS = 300

Verdict = Literal["reached", "infra", "failure", "not_started"]


@dataclass(frozen=True)
class ModelReach:
    """What a sealed cell's gateway saw of its model, by :func:`infra_only_when_upstream_failed`."""

    verdict: Verdict
    """``reached`` (a model answered: the cell is the agent's), ``infra`` (the upstream failed: rerun, in no
    rate), ``failure`` (the cell's own doing: graded, a failure with ``reason``), ``not_started`` (the
    harness could not start: failed before the agent ran)."""
    reason: str | None = None
    """Why, for every verdict but ``reached``."""


@dataclass(frozen=True)
class _Answer:
    status: int
    message: str | None
    error_type: str | None
    by_gateway: bool = False
    """The gateway refused the request itself (a path no model API uses, a body too large, the cell's
    budget spent): the agent's doing, never forwarded."""


def read_gateway_records(path: Path) -> Iterator[Mapping[str, Any]]:
    """The records of a cell's gateway.jsonl (written by dokimi on the host), one mapping per line; a line
    that does not parse is skipped. Read lazily: the first model response decides, so a long file is not
    read whole."""
    if not path.is_file():
        return
    with path.open("r", encoding="utf-8", errors="replace") as lines:
        for line in lines:
            try:
                record = json.loads(line)
            except ValueError:
                continue
            if isinstance(record, Mapping):
                yield record


def _error_of(body: Any) -> tuple[str | None, str | None]:
    """(message, type) of an API error body in any wire format: ``{"error": {"message", "type"}}`` (OpenAI,
    Anthropic's inner object), ``{"type": "error", "error": {...}}`` (Anthropic), ``{"error": {"message",
    "status"}}`` (Gemini), an event stream's payloads, or plain text."""
    if isinstance(body, list):
        for item in body:
            found = _error_of(item)
            if found != (None, None):
                return found
        return None, None
    if isinstance(body, str):
        return (body.strip()[:MESSAGE_CHARS] or None), None
    if not isinstance(body, Mapping):
        return None, None
    error = body.get("error")
    if isinstance(error, Mapping):
        message = error.get("message")
        kind = error.get("type") or error.get("status") or error.get("code")
        return (
            str(message)[:MESSAGE_CHARS] if message is not None else None,
            str(kind) if kind is not None else None,
        )
    if isinstance(error, str):
        return error[:MESSAGE_CHARS], None
    return None, None


def _answers(records: Iterable[Mapping[str, Any]]) -> tuple[bool, list[_Answer], int]:
    """(a model responded, the answers that were not model responses, requests). A model response is a 2xx
    answer the gateway read usage from or charged as a model turn."""
    answers: list[_Answer] = []
    requests = 0
    for record in records:
        requests += 1
        status = record.get("status")
        status = status if isinstance(status, int) else 502
        if 200 <= status < 300 and (record.get("usage") is not None or record.get("cost_basis")):
            return True, answers, requests
        message, kind = _error_of(record.get("response"))
        error = record.get("error")
        by_gateway = bool(error) and status != 502 and not 200 <= status < 300
        if error and (status == 502 or by_gateway):
            message = message or str(error)[:MESSAGE_CHARS]
        answers.append(_Answer(status, message, kind, by_gateway))
    return False, answers, requests


def _upstream_failed(answer: _Answer) -> bool:
    if answer.by_gateway:
        return False
    if 200 <= answer.status < 300:  # an event stream that broke off with the API's own error
        return answer.error_type in UPSTREAM_ERROR_TYPES
    return answer.status in UPSTREAM_STATUSES


def _caused_by_the_request(answer: _Answer) -> bool:
    if answer.by_gateway:
        return True
    if 200 <= answer.status < 300:
        return answer.error_type is not None and answer.error_type not in UPSTREAM_ERROR_TYPES
    return 400 <= answer.status < 500 and answer.status not in UPSTREAM_STATUSES | CREDENTIAL_STATUSES


def _shown(answers: Iterable[_Answer]) -> str:
    counts = Counter(a.status for a in answers)
    return ", ".join(f"{n}x {status}" for status, n in sorted(counts.items()))


def infra_only_when_upstream_failed(
    records: Iterable[Mapping[str, Any]], *, agent_rc: int | None, timed_out: bool, model_turns: int = 0
) -> ModelReach:
    """The boundary (see the module docstring), from the cell's gateway records in order and how its harness
    ended; ``model_turns``, the gateway's own count of model responses, decides ``reached`` when above 0.
    Otherwise the first model response among the records does, and the records after it are not read."""
    if model_turns > 0:
        return ModelReach("reached")
    reached, answers, requests = _answers(records)
    if reached:
        return ModelReach("reached")
    how = "timed out" if timed_out else ("was stopped" if agent_rc is None else f"exited {agent_rc}")
    if requests == 0:
        if agent_rc in NOT_STARTED_RCS and not timed_out:
            return ModelReach(
                "not_started", f"the harness could not start (exit {agent_rc}): failed before the agent ran"
            )
        return ModelReach("failure", f"the harness {how} without sending any request to the model")
    refused = [a for a in answers if _caused_by_the_request(a)]
    if refused:
        first = refused[0]
        said = f": {first.message}" if first.message else ""
        who = (
            "the model gateway refused the agent's request"
            if first.by_gateway
            else ("the model API refused the agent's request as invalid")
        )
        return ModelReach("failure", f"{who} ({first.status}{said}); the harness {how}")
    errors = [a for a in answers if not 200 <= a.status < 300 or _upstream_failed(a)]
    if not errors:
        return ModelReach(
            "failure", f"the harness {how} after {requests} request(s), none of them a model call"
        )
    if all(a.status == 502 for a in errors) and any(a.message for a in errors):
        first_message = next(a.message for a in errors if a.message)
        return ModelReach("infra", f"the model API could not be reached ({first_message}); the harness {how}")
    if all(a.status in CREDENTIAL_STATUSES for a in errors):
        return ModelReach(
            "infra",
            f"the model API refused every request ({_shown(errors)}): the credentials or the model name the "
            f"batch gave every cell; the harness {how}",
        )
    return ModelReach(
        "infra", f"the model API answered only errors ({_shown(errors)}); the harness {how} after its retries"
    )
