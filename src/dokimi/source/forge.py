"""``repo rules fetch``: the review comments of a GitHub repository's merged pull requests, through the REST
API with a token, written as review_comments.jsonl (:mod:`dokimi.schemas.review_comments`).

Requests, all ``GET`` under the API base (``https://api.github.com`` by default; GitHub Enterprise Server's is
``https://HOST/api/v3``):

- ``/repos/{owner}/{repo}/pulls?state=closed&sort=updated&direction=desc&per_page=100``, every page; a
  pull request that was closed without merging is skipped, and with ``since`` the listing stops at the
  first pull request last updated before it (a merge is an update, so no later page can hold one merged on
  or after ``since``);
- per merged pull request, ``/pulls/{n}/comments`` (the review comments on lines) and ``/pulls/{n}/reviews``
  (a review's summary, when it has text, becomes a comment on the whole pull request), every page.

Pages follow the ``Link: <...>; rel="next"`` header. The token is sent only to the API base's own origin: a
``next`` link or a redirect to another scheme, host or port is refused, never followed. Bots' comments are
left out.

Rate limits. After a response with ``x-ratelimit-remaining: 0`` the next request waits until
``x-ratelimit-reset``; a ``403``/``429`` with ``retry-after`` (a secondary limit) or with no requests left is
asked again after the wait; a wait longer than ``max_wait_s`` stops the fetch with the time the limit
resets. A ``5xx`` is asked again up to three times.

Nothing is lost on a stop (Ctrl-C, a limit, a network failure): comments go to ``OUT.partial`` a pull
request at a time, the pull requests done to ``OUT.partial.done``, and the same command resumes from them;
``OUT`` appears, whole, only at the end.
"""

from __future__ import annotations

import datetime as dt
import json
import os
import re
import time
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from dokimi import __version__
from dokimi.errors import DokimiError
from dokimi.schemas._base import load_json
from dokimi.schemas.review_comments import ReviewCommentLine

__all__ = [
    "DEFAULT_API_BASE",
    "FetchRequest",
    "FetchSummary",
    "ForgeError",
    "GitHubApi",
    "fetch_review_comments",
    "next_link",
]

DEFAULT_API_BASE = "https://api.github.com"
API_VERSION = "2022-11-28"
PER_PAGE = 100
MAX_RESPONSE_BYTES = 32 * 1024 * 1024
SERVER_RETRIES = 3
LIMIT_RETRIES = 5
_REPO = re.compile(r"^[A-Za-z0-9](?:[A-Za-z0-9._-]{0,99})/[A-Za-z0-9._-]{1,100}$")
_LINK = re.compile(r'<([^>]*)>\s*;\s*rel="?([^";]+)"?')


class ForgeError(DokimiError):
    """The forge refused or failed (a bad token, no such repository, a rate limit too long to wait for)."""


@dataclass(frozen=True)
class FetchRequest:
    repo: str
    """``owner/name``."""
    token: str
    api_base: str = DEFAULT_API_BASE
    since: dt.date | None = None
    """Only pull requests merged on or after this day (UTC)."""
    until: dt.date | None = None
    """Only pull requests merged before this day (UTC)."""
    review_bodies: bool = True
    """Also a review's summary text, as a comment on the whole pull request."""
    max_wait_s: float = 3600.0
    timeout_s: float = 60.0


@dataclass
class FetchSummary:
    pull_requests: int = 0
    """Merged pull requests whose comments were fetched (this run and the resumed ones)."""
    resumed: int = 0
    """Of those, done by an earlier run that stopped."""
    skipped_unmerged: int = 0
    comments: int = 0
    """Comments written (bots' left out)."""
    bots: int = 0
    requests: int = 0
    waited_s: float = 0.0
    """Time spent waiting for rate limits."""
    out: str = ""


@dataclass
class _Client:
    request: FetchRequest
    sleep: Callable[[float], None]
    summary: FetchSummary
    origin: tuple[str, str, int | None] = ("", "", None)
    opener: urllib.request.OpenerDirector | None = None
    wait_until: float = 0.0
    headers: dict[str, str] = field(default_factory=dict)

    def __post_init__(self) -> None:
        self.origin = _origin(self.request.api_base)
        host = self.origin[1]
        loopback = host in ("localhost", "::1") or host.startswith("127.")
        handlers: list[Any] = [_SameOriginRedirects(self.origin)]
        if loopback:  # a local server (a test, a mirror): never through a proxy
            handlers.append(urllib.request.ProxyHandler({}))
        self.opener = urllib.request.build_opener(*handlers)
        self.headers = {
            "Authorization": f"Bearer {self.request.token}",
            "Accept": "application/vnd.github+json",
            "X-GitHub-Api-Version": API_VERSION,
            "User-Agent": f"dokimi/{__version__}",
        }

    def get(self, url: str) -> tuple[Any, str | None]:
        """The JSON of one page and the URL of the next (None on the last)."""
        return self.call("GET", url)

    def call(self, method: str, url: str, payload: Any = None) -> tuple[Any, str | None]:
        """One request (``payload`` sent as JSON): the JSON answered (None for an empty body) and the URL of
        the next page. Only a ``GET`` is asked again after a server error: a ``POST`` may have been done."""
        if _origin(url) != self.origin:
            raise ForgeError(
                f"refusing to send the token to {_shown_origin(url)}: not the API base "
                f"{_shown_origin(self.request.api_base)}",
                hint="the forge's Link header or a redirect pointed elsewhere; check --api-base",
            )
        server_errors = limit_waits = 0
        while True:
            self._wait(max(0.0, self.wait_until - time.time()))
            assert self.opener is not None
            self.summary.requests += 1
            data = None if payload is None else json.dumps(payload).encode("utf-8")
            headers = self.headers if data is None else {**self.headers, "Content-Type": "application/json"}
            try:
                with self.opener.open(
                    urllib.request.Request(url, data=data, headers=headers, method=method),
                    timeout=self.request.timeout_s,
                ) as response:
                    body = response.read(MAX_RESPONSE_BYTES + 1)
                    self._note_limit(response.headers)
                    next_url = next_link(response.headers.get("Link"))
            except urllib.error.HTTPError as exc:
                exc.close()  # its connection, or the socket stays open
                self._note_limit(exc.headers)
                wait = self._limit_wait(exc)
                if wait is not None and limit_waits < LIMIT_RETRIES:
                    limit_waits += 1
                    self._wait(wait)
                    continue
                if exc.code >= 500 and server_errors < SERVER_RETRIES and method == "GET":
                    server_errors += 1
                    self.sleep(2.0**server_errors)
                    continue
                raise self._http_error(exc, url, method) from None
            except (urllib.error.URLError, OSError) as exc:
                reason = getattr(exc, "reason", exc)
                raise ForgeError(
                    f"cannot reach {_shown_origin(url)}: {reason}",
                    hint="check the network and --api-base; the same command resumes",
                ) from None
            if len(body) > MAX_RESPONSE_BYTES:
                raise ForgeError(f"a response from {_shown_origin(url)} is larger than 32 MB")
            if not body.strip() and method != "GET":
                return None, None
            try:
                return load_json(body), next_url
            except (ValueError, UnicodeDecodeError):
                raise ForgeError(f"{_shown_origin(url)} answered with something that is not JSON") from None

    def pages(self, url: str) -> Iterator[Any]:
        """Every item of every page of a listing."""
        next_url: str | None = url
        while next_url is not None:
            data, next_url = self.get(next_url)
            if not isinstance(data, list):
                raise ForgeError(f"{_shown_origin(url)} answered a listing with something that is not a list")
            yield from data

    def _note_limit(self, headers: Any) -> None:
        if headers is None:
            return
        remaining, reset = headers.get("x-ratelimit-remaining"), headers.get("x-ratelimit-reset")
        if remaining is not None and remaining.strip() == "0" and reset is not None:
            try:
                self.wait_until = max(self.wait_until, float(reset) + 1.0)
            except ValueError:
                pass

    def _limit_wait(self, exc: urllib.error.HTTPError) -> float | None:
        """How long to wait before asking again, for a 403/429 that is a rate limit; None otherwise."""
        if exc.code not in (403, 429):
            return None
        retry_after = exc.headers.get("retry-after") if exc.headers else None
        if retry_after is not None:
            try:
                return max(0.0, float(retry_after))
            except ValueError:
                return 60.0
        if exc.headers is not None and (exc.headers.get("x-ratelimit-remaining") or "").strip() == "0":
            return max(0.0, self.wait_until - time.time())
        return 60.0 if exc.code == 429 else None

    def _wait(self, seconds: float) -> None:
        if seconds <= 0:
            return
        if seconds > self.request.max_wait_s:
            at = dt.datetime.fromtimestamp(time.time() + seconds, dt.UTC).strftime("%H:%M UTC")
            raise ForgeError(
                f"the rate limit resets at {at}, after the longest wait ({self.request.max_wait_s:g} s)",
                hint="run the same command again then: it resumes where it stopped",
            )
        self.summary.waited_s += seconds
        self.sleep(seconds)

    def _http_error(self, exc: urllib.error.HTTPError, url: str, method: str) -> ForgeError:
        where = _shown_origin(url) if method == "GET" else f"{method} {_shown_origin(url)}"
        if exc.code == 401:
            return ForgeError(
                f"{where} refused the token (401)",
                hint="give a valid token in the variable --token-env names",
            )
        if exc.code == 404:
            return ForgeError(
                f"{where}: no such repository or pull request, or the token cannot see it (404)",
                hint="check OWNER/NAME and that the token may read the repository's pull requests",
            )
        if exc.code == 403:
            return ForgeError(
                f"{where} forbids it (403): the token lacks a permission",
                hint="the token needs read access to the repository's pull requests (the GitHub Action "
                "also: pull-requests: write to comment, security-events: write to upload SARIF)",
            )
        return ForgeError(f"{where} answered {exc.code} {exc.reason}")


class GitHubApi:
    """The REST API of one repository, with a token: what the GitHub Action's script asks and posts
    (dokimi.ci). The same guards as the fetch: the token goes only to the API base's origin, a redirect or a
    ``next`` link elsewhere is refused, a rate limit is waited for."""

    def __init__(
        self,
        repo: str,
        token: str,
        *,
        api_base: str = DEFAULT_API_BASE,
        timeout_s: float = 60.0,
        sleep: Callable[[float], None] = time.sleep,
    ) -> None:
        if not _REPO.match(repo):
            raise ForgeError(f"{repo!r} is not OWNER/NAME", hint="GITHUB_REPOSITORY names the repository")
        self.base = f"{api_base.rstrip('/')}/repos/{repo}"
        request = FetchRequest(repo=repo, token=token, api_base=api_base, timeout_s=timeout_s, max_wait_s=600)
        self.client = _Client(request, sleep, FetchSummary())

    def get(self, path: str) -> Any:
        return self.client.call("GET", self.base + path)[0]

    def pages(self, path: str) -> Iterator[Any]:
        return self.client.pages(self.base + path)

    def post(self, path: str, payload: Any) -> Any:
        return self.client.call("POST", self.base + path, payload)[0]

    def patch(self, path: str, payload: Any) -> Any:
        return self.client.call("PATCH", self.base + path, payload)[0]


class _SameOriginRedirects(urllib.request.HTTPRedirectHandler):
    """Follows a redirect only within the API base's origin: urllib would carry the token to any host."""

    def __init__(self, origin: tuple[str, str, int | None]) -> None:
        super().__init__()
        self.origin = origin

    def redirect_request(
        self, req: urllib.request.Request, fp: Any, code: int, msg: str, headers: Any, newurl: str
    ) -> urllib.request.Request | None:
        if _origin(newurl) != self.origin:
            fp.close()
            raise ForgeError(
                f"refusing a redirect to {_shown_origin(newurl)}: the token goes only to the API base",
                hint="check --api-base",
            )
        return super().redirect_request(req, fp, code, msg, headers, newurl)


def _origin(url: str) -> tuple[str, str, int | None]:
    parts = urllib.parse.urlsplit(url)
    scheme = parts.scheme.lower()
    try:
        port = parts.port or {"https": 443, "http": 80}.get(scheme)
    except ValueError:
        port = None
    return scheme, (parts.hostname or "").lower(), port


def _shown_origin(url: str) -> str:
    parts = urllib.parse.urlsplit(url)
    return f"{parts.scheme}://{parts.netloc.rpartition('@')[2]}{parts.path}"


def next_link(header: str | None) -> str | None:
    """The ``rel="next"`` URL of a Link header, or None."""
    for target, rel in _LINK.findall(header or ""):
        if "next" in str(rel).split():
            return str(target)
    return None


def _moment(text: Any) -> dt.datetime | None:
    if not isinstance(text, str) or not text:
        return None
    try:
        moment = dt.datetime.fromisoformat(text.replace("Z", "+00:00"))
    except ValueError:
        return None
    return moment if moment.tzinfo else moment.replace(tzinfo=dt.UTC)


def _login(user: Any) -> tuple[str, bool]:
    """A user's login (``ghost`` for a deleted account) and whether it is a bot."""
    if not isinstance(user, dict):
        return "ghost", False
    login = user.get("login") if isinstance(user.get("login"), str) and user.get("login") else "ghost"
    return str(login), user.get("type") == "Bot" or str(login).endswith("[bot]")


def _lines_of_pull(client: _Client, base: str, pull: dict[str, Any]) -> list[dict[str, Any]]:
    """review_comments.jsonl lines of one merged pull request."""
    number = pull["number"]
    author, _ = _login(pull.get("user"))
    common = {"pr": number, "merged_at": pull["merged_at"], "author": author}
    lines = []
    for item in client.pages(f"{base}/pulls/{number}/comments?per_page={PER_PAGE}"):
        who, bot = _login(item.get("user"))
        if bot:
            client.summary.bots += 1
            continue
        line = item.get("line") or item.get("original_line")
        lines.append({**common, "reviewer": who, "path": item.get("path") or None,
                      "line": line if isinstance(line, int) and line >= 1 else None,
                      "body": item.get("body") or "", "url": item.get("html_url") or item.get("url") or "",
                      "created_at": item.get("created_at")})  # fmt: skip
    if client.request.review_bodies:
        for item in client.pages(f"{base}/pulls/{number}/reviews?per_page={PER_PAGE}"):
            who, bot = _login(item.get("user"))
            if bot or not (item.get("body") or "").strip():
                client.summary.bots += bot
                continue
            lines.append({**common, "reviewer": who, "path": None, "line": None, "body": item["body"],
                          "url": item.get("html_url") or f"{base}/pulls/{number}/reviews/{item.get('id')}",
                          "created_at": item.get("submitted_at")})  # fmt: skip
    return lines


def _merged_pulls(client: _Client, base: str) -> Iterator[dict[str, Any]]:
    """The closed pull requests, newest update first, that were merged in [since, until)."""
    since, until = client.request.since, client.request.until
    url = f"{base}/pulls?state=closed&sort=updated&direction=desc&per_page={PER_PAGE}"
    for pull in client.pages(url):
        if not isinstance(pull, dict) or not isinstance(pull.get("number"), int):
            raise ForgeError("the pull request listing holds an entry without a number")
        updated = _moment(pull.get("updated_at"))
        if since is not None and updated is not None and updated.date() < since:
            return
        merged = _moment(pull.get("merged_at"))
        if merged is None:
            client.summary.skipped_unmerged += 1
            continue
        day = merged.astimezone(dt.UTC).date()
        if (since is None or day >= since) and (until is None or day < until):
            yield pull


def fetch_review_comments(
    request: FetchRequest,
    out: Path,
    *,
    progress: Callable[[FetchSummary], None] | None = None,
    sleep: Callable[[float], None] = time.sleep,
) -> FetchSummary:
    """Fetch into ``out`` (module docstring); every line is checked against review_comments.jsonl's model
    before it is written."""
    if not _REPO.match(request.repo):
        raise ForgeError(f"{request.repo!r} is not OWNER/NAME", hint="for example: octo-org/octo-repo")
    if _origin(request.api_base)[0] not in ("https", "http"):
        raise ForgeError(
            f"{request.api_base!r} is not an http(s) URL", hint="for example: https://api.github.com"
        )
    summary = FetchSummary(out=str(out))
    client = _Client(request, sleep, summary)
    base = f"{request.api_base.rstrip('/')}/repos/{request.repo}"
    partial, done_file = out.with_name(out.name + ".partial"), out.with_name(out.name + ".partial.done")
    done = _done_prs(partial, done_file)
    summary.resumed = len(done)
    with open(partial, "a", encoding="utf-8") as sink, open(done_file, "a", encoding="utf-8") as marks:
        for pull in _merged_pulls(client, base):
            summary.pull_requests += 1
            if pull["number"] in done:
                continue
            lines = [ReviewCommentLine.model_validate(line) for line in _lines_of_pull(client, base, pull)]
            sink.write("".join(json.dumps(line.model_dump(mode="json")) + "\n" for line in lines))
            sink.flush()
            marks.write(f"{pull['number']}\n")
            marks.flush()
            done.add(pull["number"])
            summary.comments += len(lines)
            if progress is not None:
                progress(summary)
    summary.comments = sum(1 for text in partial.read_text(encoding="utf-8").splitlines() if text.strip())
    os.replace(partial, out)
    done_file.unlink()
    return summary


def _done_prs(partial: Path, done_file: Path) -> set[int]:
    """The pull requests an earlier, stopped run finished (their comments are in ``partial``). Comments of a
    pull request that was not marked done are dropped from ``partial``: it is fetched again."""
    if not partial.exists() or not done_file.exists():
        partial.unlink(missing_ok=True)
        done_file.unlink(missing_ok=True)
        return set()
    done = {int(text) for text in done_file.read_text(encoding="utf-8").split() if text.isdigit()}
    kept = []
    for text in partial.read_text(encoding="utf-8").splitlines():
        try:
            if json.loads(text).get("pr") in done:
                kept.append(text + "\n")
        except (ValueError, AttributeError):
            continue
    partial.write_text("".join(kept), encoding="utf-8")
    return done
