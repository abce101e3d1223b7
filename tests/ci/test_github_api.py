"""What the action asks of GitHub's API (dokimi.source.forge.GitHubApi), against the local stand-in: a write
is never sent twice, the token goes to no other origin, and a refusal says what permission is missing without
showing the token."""

from __future__ import annotations

import pytest

from dokimi.source.forge import ForgeError, GitHubApi
from tests.helpers.github_stand_in import stand_in

REPO = "acme/calc"
TOKEN = "t0ken-for-the-stand-in"


def test_a_read_is_asked_again_after_a_server_error_and_a_write_is_not() -> None:
    waits: list[float] = []
    with stand_in(REPO, TOKEN) as github:
        github.pull = {"number": 3}
        github.faults = [("GET", "/pulls/3", 502), ("POST", "/issues/3/comments", 502)]
        api = GitHubApi(REPO, TOKEN, api_base=github.url, sleep=waits.append)
        assert api.get("/pulls/3") == {"number": 3}
        with pytest.raises(ForgeError, match="POST .*/issues/3/comments answered 502"):
            api.post("/issues/3/comments", {"body": "x"})
        methods = [r["method"] for r in github.requests]
        assert methods == ["GET", "GET", "POST"] and waits == [2.0]
        assert github.comments == []  # the write was not sent a second time


def test_the_token_goes_to_no_other_origin() -> None:
    with stand_in(REPO, TOKEN) as github, stand_in(REPO, TOKEN) as elsewhere:
        for n in range(3):  # two pages
            github.comment_by("someone", f"comment {n}")
        github.next_origin = elsewhere.url
        api = GitHubApi(REPO, TOKEN, api_base=github.url)
        with pytest.raises(ForgeError, match="refusing to send the token"):
            list(api.pages("/issues/1/comments?per_page=100"))
        assert elsewhere.requests == []


def test_a_refusal_names_the_permission_and_never_the_token() -> None:
    with stand_in(REPO, TOKEN) as github:
        github.faults = [("POST", "/code-scanning/sarifs", 403)]
        api = GitHubApi(REPO, TOKEN, api_base=github.url)
        with pytest.raises(ForgeError) as caught:
            api.post("/code-scanning/sarifs", {"sarif": ""})
        said = f"{caught.value.message} {caught.value.hint}"
        assert "403" in said and "security-events: write" in said and TOKEN not in said
        bad = GitHubApi(REPO, "not-the-token", api_base=github.url)
        with pytest.raises(ForgeError, match="refused the token") as caught:
            bad.get("/pulls/1")
        assert "not-the-token" not in f"{caught.value.message} {caught.value.hint}"
    with pytest.raises(ForgeError, match="not OWNER/NAME"):
        GitHubApi("../etc", TOKEN)
