"""The action's scan, end to end on the bundled example: its ``dokimi`` step run with the same inputs GitHub
passes, in a shallow checkout of a pull request cloned from a local git remote, against a local stand-in for
GitHub's comments and SARIF API (tests/helpers/github_stand_in.py): nothing reaches a real host.

The pull request adds two failing claims to AGENTS.md (one naming ``@octocat`` with emphasis marks in it); the
step uploads the head's SARIF (fingerprinted), comments the two new failures quoted as code, writes its
outputs and summary, and fails. A second push fixes them: the same comment is edited, not a second posted,
while a comment someone else wrote with the same marker is left alone; the step passes.
"""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest

from dokimi.ci.scan import SCAN_MARKER, quote
from tests.helpers.git import commit, git
from tests.helpers.github_stand_in import ROOT, read_outputs, run_action_step, stand_in
from tests.helpers.sarif import sarif_errors

REPO = "acme/calc"
TOKEN = "t0ken-for-the-stand-in"
NUMBER = 7
NEW_CLAIMS = "- Old helpers live in `calc/legacy.py`.\n- Ask `calc/@octocat_x.py` and `calc/_x_*.zzz`.\n"


def _pull_request(example: Path, tmp_path: Path) -> tuple[Path, Path, str, str]:
    """(the origin, the checkout, base, head): the example pushed to a bare origin, a branch that adds the
    failing claims, and a shallow clone of that branch (so the base must be fetched, as a checkout with
    fetch-depth: 1 would need)."""
    origin = tmp_path / "origin.git"
    git(tmp_path, "clone", "-q", "--bare", str(example), str(origin))
    base = git(example, "rev-parse", "HEAD").strip()
    git(example, "checkout", "-q", "-b", "guidance")
    agents = (example / "AGENTS.md").read_text()
    head = commit(example, "Say where the old helpers are", files={"AGENTS.md": agents + NEW_CLAIMS})
    git(example, "push", "-q", str(origin), "guidance")
    checkout = tmp_path / "checkout"
    git(tmp_path, "clone", "-q", "--depth", "1", "--branch", "guidance", f"file://{origin}", str(checkout))
    assert subprocess.run(
        ["git", "-C", str(checkout), "cat-file", "-e", base], capture_output=True
    ).returncode
    return origin, checkout, base, head


def _github(tmp_path: Path, checkout: Path, url: str, base: str, head: str) -> dict[str, str]:
    event = tmp_path / "event.json"
    pull = {"number": NUMBER, "base": {"sha": base}, "head": {"sha": head}, "labels": [{"name": "docs"}]}
    event.write_text(json.dumps({"action": "synchronize", "number": NUMBER, "pull_request": pull}))
    for name in ("output", "summary"):
        (tmp_path / name).write_text("")
    return {
        "GITHUB_WORKSPACE": str(checkout),
        "GITHUB_REPOSITORY": REPO,
        "GITHUB_EVENT_NAME": "pull_request",
        "GITHUB_EVENT_PATH": str(event),
        "GITHUB_API_URL": url,
        "GITHUB_REF": f"refs/pull/{NUMBER}/merge",
        "GITHUB_SHA": head,
        "GITHUB_OUTPUT": str(tmp_path / "output"),
        "GITHUB_STEP_SUMMARY": str(tmp_path / "summary"),
        "GITHUB_ACTION_PATH": str(ROOT),
    }


def test_the_scan_uploads_sarif_and_comments_the_new_failures_then_edits_its_comment(
    example: Path, tmp_path: Path
) -> None:
    _, checkout, base, head = _pull_request(example, tmp_path)
    with stand_in(REPO, TOKEN) as github:
        github.pull = {"number": NUMBER}
        env = _github(tmp_path, checkout, github.url, base, head)
        done = run_action_step({"token": TOKEN}, env)
        assert done.returncode == 1, done.stderr  # new failing claims fail the step
        assert "scan: 3 new failing claim(s), 0 fixed" in done.stderr, done.stderr
        assert {r["auth"] for r in github.requests} == {f"Bearer {TOKEN}"}

        (upload,) = github.sarifs
        assert (upload["commit_sha"], upload["ref"]) == (head, f"refs/pull/{NUMBER}/merge")
        assert sarif_errors(upload["sarif"]) == []
        results = upload["sarif"]["runs"][0]["results"]
        failing = {r["message"]["text"].split(":")[0] for r in results if r["level"] == "error"}
        assert {"calc/legacy.py", "calc/@octocat_x.py", "calc/_x_*.zzz"} <= failing
        assert all(r["partialFingerprints"]["dokimiClaim/v1"] for r in results)

        (comment,) = github.comments
        body = comment["body"]
        assert body.startswith(SCAN_MARKER) and f"#{NUMBER}" in body
        assert "**3 new failing claim(s)**" in body
        for claim in ("calc/legacy.py", "calc/@octocat_x.py", "calc/_x_*.zzz"):
            assert quote(claim) in body
        outside_code = "".join(body.split("`")[::2])  # what renders as Markdown: none of the author's text
        assert "@octocat" not in outside_code and "_x_" not in outside_code
        assert quote("AGENTS.md", 80) in body  # the guidance file the pull request changes
        outputs = read_outputs(tmp_path / "output")
        assert outputs["new-failures"] == "3" and outputs["mode"] == "scan"
        assert outputs["sarif-id"] == "sarif-1" and outputs["comment-url"] == comment["html_url"]
        assert "new failing claim" in (tmp_path / "summary").read_text()
        written = (tmp_path / "output").read_text() + (tmp_path / "summary").read_text()
        assert TOKEN not in done.stdout + done.stderr + written  # the token is never printed

        # someone else's comment with the marker; then a push that fixes the claims
        github.comment_by("mallory", SCAN_MARKER + "\nnot dokimi's")
        git(example, "checkout", "-q", "guidance")
        without = (example / "AGENTS.md").read_text().replace(NEW_CLAIMS, "")
        fixed = commit(example, "Drop the stale lines", files={"AGENTS.md": without})
        git(example, "push", "-q", str(tmp_path / "origin.git"), "guidance")
        git(checkout, "pull", "-q", "--ff-only")
        env = _github(tmp_path, checkout, github.url, base, fixed)
        again = run_action_step({"token": TOKEN}, env)
        assert again.returncode == 0, again.stderr
        assert [c["id"] for c in github.comments] == [comment["id"], comment["id"] + 1]
        assert "**No new failing claim.**" in github.comments[0]["body"]
        assert github.comments[1]["body"] == SCAN_MARKER + "\nnot dokimi's"
        assert [r["method"] for r in github.requests].count("PATCH") == 1


def test_a_refused_sarif_upload_still_comments_then_fails_the_step_naming_the_permission(
    example: Path, tmp_path: Path
) -> None:
    _, checkout, base, head = _pull_request(example, tmp_path)
    with stand_in(REPO, TOKEN) as github:
        github.faults = [("POST", "/code-scanning/sarifs", 403)]
        done = run_action_step({"token": TOKEN}, _github(tmp_path, checkout, github.url, base, head))
        assert done.returncode == 2, done.stderr
        assert "security-events: write" in done.stderr and TOKEN not in done.stdout + done.stderr
        (comment,) = github.comments
        assert "The SARIF upload was refused" in comment["body"]
        assert read_outputs(tmp_path / "output")["comment-url"] == comment["html_url"]


def test_without_a_token_nothing_is_posted_and_the_summary_still_says_it(
    example: Path, tmp_path: Path
) -> None:
    _, checkout, base, head = _pull_request(example, tmp_path)
    with stand_in(REPO, TOKEN) as github:
        env = _github(tmp_path, checkout, github.url, base, head)
        done = run_action_step({"token": "", "fail-on-new-failures": "false"}, env)
        assert done.returncode == 0, done.stderr
        assert "nothing is posted" in done.stderr
        assert github.requests == []
    assert "new failing claim" in (tmp_path / "summary").read_text()


@pytest.mark.parametrize(
    ("event", "said"),
    [
        ({"pull_request": {"number": 1}}, "has no number, base or head"),
        ({"pull_request": {"number": 1, "base": {"sha": "main"}, "head": {"sha": "a" * 40}}}, "full commit"),
    ],
)
def test_a_broken_event_is_a_usage_error(tmp_path: Path, event: dict, said: str) -> None:  # type: ignore[type-arg]
    path = tmp_path / "event.json"
    path.write_text(json.dumps(event))
    done = run_action_step(
        {"token": ""},
        {"GITHUB_WORKSPACE": str(tmp_path), "GITHUB_REPOSITORY": REPO, "GITHUB_EVENT_NAME": "pull_request",
         "GITHUB_EVENT_PATH": str(path)},
    )  # fmt: skip
    assert done.returncode == 2 and said in done.stderr, done.stderr
