"""The pull request a workflow runs for, read from GitHub's event file (``GITHUB_EVENT_PATH``).

``pull_request`` and ``pull_request_target`` events carry the pull request; a ``workflow_dispatch`` (or any
other event) names it with ``--pull-request N`` and its base comes from the API. The event file is written by
GitHub, but its text fields (title, label names, branch names) are the pull request author's: nothing of it
is run, and only the number, the SHAs and the label names are kept.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from dokimi.errors import UsageError
from dokimi.schemas._base import load_json
from dokimi.source.forge import GitHubApi

PR_EVENTS = ("pull_request", "pull_request_target")
_SHA = re.compile(r"^[0-9a-f]{40}$")
MAX_EVENT_BYTES = 64 * 1024 * 1024


@dataclass(frozen=True)
class PullRequest:
    """What the action needs of the pull request."""

    number: int
    base_sha: str
    """The base branch's commit the pull request is compared with."""
    head_sha: str
    """The pull request's own head commit (the checkout may be the merge commit instead)."""
    labels: tuple[str, ...]
    event_name: str
    action: str | None = None
    """The event's ``action`` (``opened``, ``synchronize``, ``labeled``, ...)."""
    label: str | None = None
    """The label a ``labeled`` event added."""


def _sha(value: Any, what: str) -> str:
    if not isinstance(value, str) or not _SHA.match(value):
        raise UsageError(f"the event's {what} is not a full commit SHA: {str(value)[:60]!r}")
    return value


def _pull_request(data: Any, event_name: str, action: Any = None, label: Any = None) -> PullRequest:
    if not isinstance(data, dict):
        raise UsageError("the event names no pull request")
    number = data.get("number")
    base, head = data.get("base"), data.get("head")
    if not isinstance(number, int) or not isinstance(base, dict) or not isinstance(head, dict):
        raise UsageError("the event's pull request has no number, base or head")
    labels = tuple(
        str(item["name"]) for item in data.get("labels") or [] if isinstance(item, dict) and "name" in item
    )
    return PullRequest(
        number=number,
        base_sha=_sha(base.get("sha"), "base.sha"),
        head_sha=_sha(head.get("sha"), "head.sha"),
        labels=labels,
        event_name=event_name,
        action=action if isinstance(action, str) else None,
        label=str(label["name"]) if isinstance(label, dict) and "name" in label else None,
    )


def read_pull_request(
    event_path: Path | None, event_name: str, *, number: int | None = None, api: GitHubApi | None = None
) -> PullRequest:
    """The pull request of the event; for another event (a dispatch), pull request ``number`` as the API
    gives it."""
    data: Any = {}
    if event_path is not None:
        try:
            raw = event_path.read_bytes()[: MAX_EVENT_BYTES + 1]
        except OSError as exc:
            raise UsageError(f"cannot read the event file: {exc.strerror}", path=str(event_path)) from None
        if len(raw) > MAX_EVENT_BYTES:
            raise UsageError("the event file is larger than 64 MB", path=str(event_path))
        try:
            data = load_json(raw)
        except ValueError as exc:
            raise UsageError(f"the event file is not JSON: {exc}", path=str(event_path)) from None
    if event_name in PR_EVENTS and number is None:
        if not isinstance(data, dict):
            raise UsageError("the event file holds no object", path=str(event_path))
        return _pull_request(data.get("pull_request"), event_name, data.get("action"), data.get("label"))
    if number is None and isinstance(data, dict):
        inputs = data.get("inputs")
        given = inputs.get("pull-request") if isinstance(inputs, dict) else None
        if isinstance(given, (str, int)) and str(given).strip().isdigit():
            number = int(str(given).strip())
    if number is None:
        raise UsageError(
            f"a {event_name or 'manual'} run names no pull request",
            hint="give --pull-request N (a workflow_dispatch input named pull-request does it)",
        )
    if api is None:
        raise UsageError("reading pull request {number} needs the API: give a token")
    return _pull_request(api.get(f"/pulls/{number}"), event_name or "workflow_dispatch")
