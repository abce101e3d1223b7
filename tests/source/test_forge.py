"""``repo rules fetch`` against a local server that speaks the GitHub REST endpoints it uses: the closed pull
requests, each one's review comments and reviews, pages linked by ``Link`` headers, rate limits, and a
server that tries to take the token elsewhere."""

from __future__ import annotations

import threading
import time
import urllib.parse
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest

from dokimi.schemas.review_comments import read_review_comments
from dokimi.source.forge import FetchRequest, ForgeError, fetch_review_comments, next_link
from tests.helpers.github_stand_in import answer_json

TOKEN = "ghp_test-token-not-real"
PAGE = 2
BASE_PATH = "/api/v3"


def user(login: str, kind: str = "User") -> dict[str, str]:
    return {"login": login, "type": kind}


def pull(number: int, merged: str | None, updated: str, author: str = "erin") -> dict[str, Any]:
    return {
        "number": number,
        "merged_at": merged,
        "updated_at": updated,
        "user": user(author),
        "state": "closed",
    }


def line_comment(
    n: int, who: str, path: str, line: int | None, body: str, kind: str = "User"
) -> dict[str, Any]:
    return {"id": n, "user": user(who, kind), "path": path, "line": line, "original_line": 7, "body": body,
            "html_url": f"https://forge.invalid/acme/calc/pull/x#discussion_r{n}",
            "created_at": "2026-01-02T10:00:00Z"}  # fmt: skip


class FakeGitHub:
    """The endpoints ``repo rules fetch`` calls, ``PAGE`` items a page; every request is recorded."""

    def __init__(self) -> None:
        self.pulls = [
            pull(5, "2026-03-01T12:00:00Z", "2026-03-02T00:00:00Z"),
            pull(4, None, "2026-02-20T00:00:00Z"),  # closed without merging
            pull(3, "2026-02-10T12:00:00Z", "2026-02-11T00:00:00Z", author="frank"),
            pull(2, "2026-01-15T12:00:00Z", "2026-01-16T00:00:00Z"),
            pull(1, "2025-06-01T12:00:00Z", "2025-06-02T00:00:00Z"),
        ]
        self.comments: dict[int, list[dict[str, Any]]] = {
            5: [line_comment(51, "alice", "calc/a.py", 3, "revert this"),
                line_comment(52, "dependabot[bot]", "calc/a.py", 4, "bump", kind="Bot"),
                line_comment(53, "bob", "calc/b.py", None, "outdated line"),
                line_comment(54, "erin", "calc/a.py", 3, "done")],
            3: [line_comment(31, "carol", "tests/t.py", 9, "use pytest")],
            2: [],
            1: [line_comment(11, "alice", "README.md", 1, "old")],
        }  # fmt: skip
        self.reviews: dict[int, list[dict[str, Any]]] = {
            5: [{"id": 501, "user": user("bob"), "body": "Please split this PR.", "state": "COMMENTED",
                 "html_url": "https://forge.invalid/acme/calc/pull/5#pullrequestreview-501",
                 "submitted_at": "2026-02-28T10:00:00Z"},
                {"id": 502, "user": user("alice"), "body": "", "state": "APPROVED"}],
            3: [], 2: [], 1: [],
        }  # fmt: skip
        self.requests: list[tuple[str, str | None]] = []
        self.faults: dict[str, list[tuple[int, dict[str, str]]]] = {}
        """Path prefix -> responses served (and used up) before the real one."""
        self.next_origin: str | None = None
        """Where Link headers point (default: this server)."""
        self.redirect_to: str | None = None
        """Redirect the pull listing there."""
        self.server = ThreadingHTTPServer(("127.0.0.1", 0), self._handler())
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)

    @property
    def origin(self) -> str:
        return f"http://127.0.0.1:{self.server.server_address[1]}"

    @property
    def api_base(self) -> str:
        return self.origin + BASE_PATH

    def __enter__(self) -> FakeGitHub:
        self.thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.server.shutdown()
        self.server.server_close()

    def paths(self, prefix: str) -> list[str]:
        return [path for path, _ in self.requests if path.startswith(prefix)]

    def _handler(self) -> type[BaseHTTPRequestHandler]:
        fake = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args: Any) -> None:
                pass

            def send(self, code: int, data: Any, headers: dict[str, str] | None = None) -> None:
                answer_json(self, code, data, headers)

            def do_GET(self) -> None:
                fake.requests.append((self.path, self.headers.get("Authorization")))
                if self.headers.get("Authorization") != f"Bearer {TOKEN}":
                    self.send(401, {"message": "Bad credentials"})
                    return
                url = urllib.parse.urlsplit(self.path)
                for prefix, queued in fake.faults.items():
                    if url.path.startswith(prefix) and queued:
                        code, headers = queued.pop(0)
                        self.send(code, {"message": "limited"}, headers)
                        return
                query = urllib.parse.parse_qs(url.query)
                page = int(query.get("page", ["1"])[0])
                repo = f"{BASE_PATH}/repos/acme/calc"
                if url.path == f"{repo}/pulls":
                    if fake.redirect_to:
                        self.send(302, {}, {"Location": fake.redirect_to + self.path})
                        return
                    assert query["state"] == ["closed"]
                    items = fake.pulls
                elif url.path.startswith(f"{repo}/pulls/") and url.path.endswith("/comments"):
                    items = fake.comments[int(url.path.split("/")[-2])]
                elif url.path.startswith(f"{repo}/pulls/") and url.path.endswith("/reviews"):
                    items = fake.reviews[int(url.path.split("/")[-2])]
                else:
                    self.send(404, {"message": "Not Found"})
                    return
                chunk = items[(page - 1) * PAGE : page * PAGE]
                headers = {"x-ratelimit-remaining": "4999", "x-ratelimit-reset": str(int(time.time()) + 3600)}
                if page * PAGE < len(items):
                    query["page"] = [str(page + 1)]
                    again = urllib.parse.urlencode(query, doseq=True)
                    nxt = f"{fake.next_origin or fake.origin}{url.path}?{again}"
                    headers["Link"] = f'<{nxt}>; rel="next", <{fake.origin}{url.path}?page=1>; rel="first"'
                self.send(200, chunk, headers)

        return Handler


@pytest.fixture
def forge() -> Iterator[FakeGitHub]:
    with FakeGitHub() as server:
        yield server


def request(forge: FakeGitHub, **kw: Any) -> FetchRequest:
    return FetchRequest(repo="acme/calc", token=TOKEN, api_base=forge.api_base, timeout_s=10, **kw)


@pytest.mark.slow
def test_the_fetcher_pages_through_pulls_their_comments_and_reviews(
    forge: FakeGitHub, tmp_path: Path
) -> None:
    out = tmp_path / "review_comments.jsonl"
    summary = fetch_review_comments(request(forge), out)
    comments = read_review_comments(out)
    assert [(c.pr, c.reviewer, c.path, c.line, c.body) for c in comments] == [
        (5, "alice", "calc/a.py", 3, "revert this"),
        (5, "bob", "calc/b.py", 7, "outdated line"),  # no line any more: the original one
        (5, "erin", "calc/a.py", 3, "done"),  # the author's reply is kept: the miner leaves it out
        (5, "bob", None, None, "Please split this PR."),  # a review's summary: the whole PR
        (3, "carol", "tests/t.py", 9, "use pytest"),
        (1, "alice", "README.md", 1, "old"),
    ]
    assert comments[0].author == "erin" and comments[4].author == "frank"
    assert str(comments[0].merged_at) == "2026-03-01 12:00:00+00:00"
    assert summary.pull_requests == 4 and summary.skipped_unmerged == 1 and summary.bots == 1
    assert all(auth == f"Bearer {TOKEN}" for _, auth in forge.requests)
    assert len(forge.paths(f"{BASE_PATH}/repos/acme/calc/pulls?")) == 3  # 5 pull requests, 2 a page
    assert len(forge.paths(f"{BASE_PATH}/repos/acme/calc/pulls/5/comments")) == 2
    assert not forge.paths(f"{BASE_PATH}/repos/acme/calc/pulls/4/")  # not merged: never asked
    assert not out.with_name(out.name + ".partial").exists()


@pytest.mark.slow
def test_since_stops_the_listing_and_until_leaves_later_merges_out(forge: FakeGitHub, tmp_path: Path) -> None:
    import datetime as dt

    out = tmp_path / "c.jsonl"
    fetch_review_comments(request(forge, since=dt.date(2026, 1, 1), until=dt.date(2026, 3, 1)), out)
    assert sorted({c.pr for c in read_review_comments(out)}) == [
        3
    ]  # 2 has no comment; 5 is merged on the 1st
    assert not forge.paths(f"{BASE_PATH}/repos/acme/calc/pulls/1/")


@pytest.mark.slow
def test_rate_limits_are_waited_for_and_a_stopped_fetch_resumes(forge: FakeGitHub, tmp_path: Path) -> None:
    reset = str(int(time.time()) + 1)
    forge.faults = {
        f"{BASE_PATH}/repos/acme/calc/pulls/3/comments": [
            (403, {"x-ratelimit-remaining": "0", "x-ratelimit-reset": reset})
        ],
        f"{BASE_PATH}/repos/acme/calc/pulls/5/reviews": [(429, {"retry-after": "1"})],
    }
    out = tmp_path / "c.jsonl"
    started = time.monotonic()
    summary = fetch_review_comments(request(forge), out)
    assert time.monotonic() - started >= 1.0 and summary.waited_s >= 1.0
    assert len(read_review_comments(out)) == 6
    assert len(forge.paths(f"{BASE_PATH}/repos/acme/calc/pulls/3/comments")) == 2

    # a limit longer than --max-wait stops the fetch; what was done stays and the next run goes on from it
    forge.requests.clear()
    forge.faults = {
        f"{BASE_PATH}/repos/acme/calc/pulls/3/comments": [
            (403, {"x-ratelimit-remaining": "0", "x-ratelimit-reset": str(int(time.time()) + 600)})
        ]
    }
    again = tmp_path / "again.jsonl"
    with pytest.raises(ForgeError, match="resets at .* after the longest wait"):
        fetch_review_comments(request(forge, max_wait_s=5), again)
    assert not again.exists() and again.with_name("again.jsonl.partial").exists()
    summary = fetch_review_comments(request(forge, max_wait_s=5), again)
    assert summary.resumed == 1 and len(read_review_comments(again)) == 6
    assert len(forge.paths(f"{BASE_PATH}/repos/acme/calc/pulls/5/comments")) == 2  # once, not again


@pytest.mark.slow
def test_the_token_never_leaves_the_api_base(forge: FakeGitHub, tmp_path: Path) -> None:
    with FakeGitHub() as elsewhere:
        forge.next_origin = elsewhere.origin  # a Link header pointing at another origin
        with pytest.raises(ForgeError, match="refusing to send the token"):
            fetch_review_comments(request(forge), tmp_path / "a.jsonl")
        forge.next_origin = None
        forge.redirect_to = elsewhere.origin  # a redirect to another origin
        with pytest.raises(ForgeError, match="refusing a redirect"):
            fetch_review_comments(request(forge), tmp_path / "b.jsonl")
        assert elsewhere.requests == []


@pytest.mark.slow
def test_a_bad_token_and_a_missing_repository_are_errors_that_say_so(
    forge: FakeGitHub, tmp_path: Path
) -> None:
    bad = FetchRequest(repo="acme/calc", token="wrong", api_base=forge.api_base)
    with pytest.raises(ForgeError, match="refused the token") as caught:
        fetch_review_comments(bad, tmp_path / "a.jsonl")
    assert "wrong" not in str(caught.value)
    with pytest.raises(ForgeError, match="no such repository"):
        fetch_review_comments(
            FetchRequest(repo="acme/none", token=TOKEN, api_base=forge.api_base), tmp_path / "b"
        )
    with pytest.raises(ForgeError, match="not OWNER/NAME"):
        fetch_review_comments(FetchRequest(repo="../etc", token=TOKEN), tmp_path / "c")


def test_next_link_reads_the_rel_next_target() -> None:
    header = '<https://h/x?page=3>; rel="next", <https://h/x?page=9>; rel="last"'
    assert next_link(header) == "https://h/x?page=3"
    assert next_link('<https://h/x?page=1>; rel="prev"') is None and next_link(None) is None


@pytest.mark.slow
def test_repo_rules_fetch_reads_the_token_from_the_environment(
    forge: FakeGitHub, tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    from dokimi.cli.main import main

    out = tmp_path / "c.jsonl"
    argv = ["repo", "rules", "fetch", "acme/calc", "--api-base", forge.api_base, "--out", str(out)]
    monkeypatch.delenv("GITHUB_TOKEN", raising=False)
    assert main(argv) == 2
    assert "no token in $GITHUB_TOKEN" in capsys.readouterr().err
    monkeypatch.setenv("GITHUB_TOKEN", TOKEN)
    assert main(argv) == 0
    printed = capsys.readouterr().out
    assert "4 merged PRs, 6 comments (1 by bots left out)" in printed and TOKEN not in printed
    assert len(read_review_comments(out)) == 6
