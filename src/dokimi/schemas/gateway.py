"""gateway.jsonl and egress.jsonl: what a sealed cell's model gateway and egress proxy saw, one JSON object
per line (see docs/network.md). Both are written by dokimi on the host, never by the agent."""

from __future__ import annotations

from typing import Annotated, Any

from pydantic import Field

from dokimi.schemas._base import Document

Seconds = Annotated[float, Field(ge=0, allow_inf_nan=False)]


class TokenUsage(Document):
    """Tokens of one model response, in the gateway's normal form (cached input apart from fresh input)."""

    input_tokens: int = Field(ge=0)
    """Fresh input tokens."""
    output_tokens: int = Field(ge=0)
    """Output tokens, thinking included."""
    cache_write_tokens: int = Field(ge=0)
    """Input tokens written to the prompt cache."""
    cache_read_tokens: int = Field(ge=0)
    """Input tokens read from the prompt cache."""


class GatewayRecord(Document):
    """One request the model gateway relayed for the cell, with its response."""

    index: int = Field(ge=0)
    """Arrival order among all the gateway's requests of the batch."""
    t: Seconds
    """Seconds from the cell's opening to the request's arrival."""
    duration_s: Seconds
    """Seconds from arrival to the last byte relayed."""
    method: str
    """HTTP method."""
    path: str
    """Path and query; credential-like query values are REDACTED."""
    headers: dict[str, str]
    """Allow-listed descriptive headers only: never a credential."""
    body: Any = None
    """The request body (JSON, or text)."""
    status: int | None
    """The status the harness got (502: the upstream could not be reached; 400, 401, 403, 413 or 429: the
    gateway refused the request itself, and ``error`` says why)."""
    error: str | None = None
    """Why the gateway refused the request or the upstream failed, or None."""
    response: Any = None
    """The response body: JSON, the list of an event stream's data payloads, or text."""
    response_type: str | None = None
    """The response's Content-Type."""
    model: str | None = None
    """The model the request named (else the response)."""
    priced_as: str | None = None
    """The price table's row for the model; null when it has none."""
    usage: TokenUsage | None = None
    """Null for a response that carries no usage (not a model response)."""
    cost_usd: Annotated[float, Field(ge=0, allow_inf_nan=False)] | None = None
    """What the request cost at the table's rates; null when it was not a model turn that was answered."""
    cost_basis: str | None = None
    """``usage`` (the tokens the answer reports), or ``worst case: <why>`` when the answer's usage could not
    be read or it was cut short, so it was charged what it reserved."""
    reserved_usd: Annotated[float, Field(ge=0, allow_inf_nan=False)] | None = None
    """The worst case the request reserved on the cell's budget before it was forwarded (a model turn)."""


class EgressRecord(Document):
    """One connection attempt through the egress proxy, allowed or refused."""

    t: Seconds = 0.0
    """Seconds from the cell's opening to the attempt's arrival (lines are written as attempts end, so a
    long tunnel's line comes after those of later, shorter attempts)."""
    method: str
    """CONNECT, or the method of a plain-HTTP request."""
    target: str
    """What the client asked for (``host:port``, or the absolute URL)."""
    host: str | None = None
    """The target host, lower-cased; null when the target could not be parsed."""
    port: int | None = None
    """The target port."""
    allowed: bool
    """Whether the proxy let it through."""
    status: int
    """What the proxy answered (200 allowed, 403 refused, 400 unparsable, 502 allowed but unreachable)."""
    reason: str
    """Why (for a refusal: which rule)."""
    entry: str | None = None
    """The allow-list entry that admitted it."""
    bytes_up: int | None = None
    """Bytes from the container to the host (an allowed connection)."""
    bytes_down: int | None = None
    """Bytes from the host to the container."""
    duration_s: Seconds | None = None
    """How long the connection lasted."""
    by: str | None = None
    """Who made the attempt: null for the agent's container; the entry point (``grade``, ``oracle``,
    ``static``, ``tests.list``, ``perf``) for one that ran after it, appended once its container exited."""
