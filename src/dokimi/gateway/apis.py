"""The model APIs the gateway forwards, one entry per wire format a harness profile names in ``api``.

For each API, what the gateway needs to hold a cell to it:

- its **routes**: the only method and paths forwarded (a model turn, ``generate``, and free token counting,
  ``count``); anything else (batches, files, admin, model listings, the legacy completion API) is refused
  and never reaches the upstream with the real key;
- its **credential headers**: where the harness sends its key (and, for Gemini, the ``key`` query parameter);
  the dummy key is looked for and swapped only there;
- how a request names its **model** and its **output limit** (``max_tokens`` and its equivalents), from which
  the gateway reserves the request's worst case before forwarding it.

Paths are those the harness sends to the gateway's root URL: Claude Code ``/v1/messages``, an OpenAI SDK
``/responses`` or ``/chat/completions`` (``/v1`` is the upstream's prefix; a configuration that keeps it in
the endpoint is served too), Gemini ``/v1beta/models/MODEL:streamGenerateContent``.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal

__all__ = ["API_NAMES", "APIS", "Api", "ApiName", "ApiPath", "Route", "apis_named", "route_of"]

ApiName = Literal["anthropic", "openai-responses", "openai-chat", "gemini"]
API_NAMES: tuple[ApiName, ...] = ("anthropic", "openai-responses", "openai-chat", "gemini")

Action = Literal["generate", "count"]
GENERATE: Action = "generate"
"""A model turn: priced, reserved on the budget, counted as a turn when answered."""
COUNT: Action = "count"
"""Token counting: free."""


@dataclass(frozen=True)
class Route:
    """A request the gateway forwards: its API, what it does and the model its path names (Gemini)."""

    api: Api
    action: Literal["generate", "count"]
    path_model: str | None = None


@dataclass(frozen=True)
class ApiPath:
    """One forwarded path: how the docs show it, its pattern (a ``model`` group names the model) and what
    it does."""

    shown: str
    pattern: re.Pattern[str]
    action: Literal["generate", "count"]


def _path(shown: str, action: Literal["generate", "count"]) -> ApiPath:
    """``shown`` with ``[/v1]`` an optional prefix and ``MODEL`` a model name."""
    pattern = re.escape(shown).replace(r"\[/v1\]", "(?:/v1)?").replace("MODEL", r"(?P<model>[A-Za-z0-9._-]+)")
    return ApiPath(shown, re.compile(pattern), action)


@dataclass(frozen=True)
class Api:
    name: ApiName
    paths: tuple[ApiPath, ...]
    """The POST paths forwarded (the query string removed)."""
    credential_headers: tuple[str, ...]
    """Lower-case header names that carry the key: the value is the key, or ``Bearer`` and the key."""
    credential_query: tuple[str, ...] = ()
    """Query parameters that carry the key (Gemini's ``key``)."""
    output_limit: tuple[tuple[str, ...], ...] = ()
    """Where a request body gives its output limit, each a path of keys; the first present wins."""

    def route(self, method: str, path: str) -> Route | None:
        if method != "POST":
            return None
        for candidate in self.paths:
            match = candidate.pattern.fullmatch(path)
            if match is not None:
                return Route(self, candidate.action, match.groupdict().get("model"))
        return None

    def max_output(self, body: Mapping[str, Any]) -> int | None:
        """The output limit the request sets, or None when it sets none."""
        for keys in self.output_limit:
            value: Any = body
            for key in keys:
                value = value.get(key) if isinstance(value, Mapping) else None
            if isinstance(value, int) and not isinstance(value, bool) and value >= 0:
                return value
        return None

    def describe(self) -> str:
        """The routes as a user reads them (``POST /v1/messages``)."""
        return ", ".join(f"POST {p.shown}" for p in self.paths)


APIS: Mapping[ApiName, Api] = {
    "anthropic": Api(
        "anthropic",
        (_path("/v1/messages", GENERATE), _path("/v1/messages/count_tokens", COUNT)),
        credential_headers=("x-api-key", "authorization"),
        output_limit=(("max_tokens",),),
    ),
    "openai-responses": Api(
        "openai-responses",
        (_path("[/v1]/responses", GENERATE),),
        credential_headers=("authorization",),
        output_limit=(("max_output_tokens",),),
    ),
    "openai-chat": Api(
        "openai-chat",
        (_path("[/v1]/chat/completions", GENERATE),),
        credential_headers=("authorization",),
        output_limit=(("max_completion_tokens",), ("max_tokens",)),
    ),
    "gemini": Api(
        "gemini",
        tuple(
            _path(f"/{version}/models/MODEL:{verb}", COUNT if verb == "countTokens" else GENERATE)
            for version in ("v1beta", "v1")
            for verb in ("generateContent", "streamGenerateContent", "countTokens")
        ),
        credential_headers=("x-goog-api-key",),
        credential_query=("key",),
        output_limit=(("generationConfig", "maxOutputTokens"),),
    ),
}
"""Every API by name."""


def apis_named(names: Sequence[str]) -> tuple[Api, ...]:
    return tuple(APIS[name] for name in names if name in APIS)  # type: ignore[index]


def route_of(apis: Sequence[Api], method: str, path: str) -> Route | None:
    """The route of a request (``path`` without its query string) in the first API that has it, or None."""
    for api in apis:
        found = api.route(method, path)
        if found is not None:
            return found
    return None
