"""``repo rules mine`` end to end: 200 review comments, the real Claude Code CLI (2.1.328) playing the judge's
model against the scripted model server, the rules file written into the eval dir; then a re-mine that keeps
every id. The fixture and its known answer: tests/helpers/review_comments.py."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from dokimi.schemas.review_rules import RepoReviewRules
from dokimi.support.mockmodel import MockModelServer
from tests.helpers.evalrepo import TASKS, make_eval_repo
from tests.helpers.review_comments import (
    TASK_SOURCE_PR,
    UNMERGED_PR,
    Fixture,
    grouping_answer,
    in_prompt,
    make_fixture,
)

pytestmark = pytest.mark.harness

MODEL = "claude-haiku-4-5"


def run_rules(argv: list[str], capsys: pytest.CaptureFixture[str]) -> tuple[int, str, str]:
    from dokimi.cli.main import main

    code = main(["repo", "rules", *argv])
    captured = capsys.readouterr()
    return code, captured.out, captured.err


def themed(fixture: Fixture, theme: str) -> list[dict[str, Any]]:
    return [c for c in fixture.comments if fixture.theme[c["url"]] == theme and in_prompt(c)]


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    tasks = dict(TASKS)
    grader, extra, files = tasks["fix_add"]
    tasks["fix_add"] = (grader, {**extra, "source_pr": TASK_SOURCE_PR}, files)
    path, _, _ = make_eval_repo(tmp_path / "repo", tasks=tasks)
    return path


def test_mining_200_comments_leaves_out_the_cut_the_task_source_and_keeps_ids_on_a_re_mine(
    repo: Path,
    tmp_path: Path,
    claude_bin: Path,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    fixture = make_fixture()
    comments = fixture.write(tmp_path / "review_comments.jsonl")
    assert len(fixture.comments) == 200
    first = grouping_answer(
        [
            ("Revert incidental edits to unrelated files.", ["**"], themed(fixture, "incidental"), None),
            (
                "Public functions in calc/ have a docstring.",
                ["calc/**/*.py"],
                themed(fixture, "docstring"),
                None,
            ),
            ("Tests are plain pytest functions.", ["tests/**"], themed(fixture, "pytest"), None),
            ("Prefer f-strings.", ["**/*.py"], themed(fixture, "fstring"), None),  # alice alone
            ("Link the issue.", ["**"], themed(fixture, "issue_ref"), None),  # 2 PRs
            ("Caches key on env.", ["calc/evaluator.py"], themed(fixture, "cache_env"), None),  # no PR 42
        ]
    )
    argv = ["mine", "-C", str(repo), "--comments", str(comments), "--cut-date", "2026-03-29",
            "--model", MODEL, "--bin", str(claude_bin), "--timeout", "120", "--json"]  # fmt: skip
    monkeypatch.setenv("ANTHROPIC_API_KEY", "dokimi-test")
    with MockModelServer([{"final": first}]) as server:
        monkeypatch.setenv("ANTHROPIC_BASE_URL", server.url)
        code, out, err = run_rules(argv, capsys)
        sent = [r.raw.decode("utf-8") for r in server.requests if r.main_loop]
    assert code == 0, err
    assert len(sent) == 1
    report = json.loads(out)
    rules_file = repo / ".agent-eval" / "review_rules.json"
    rules = RepoReviewRules.model_validate_json(rules_file.read_text())

    # the leak guard: what the model saw, and what the rules count
    for pr in (TASK_SOURCE_PR, UNMERGED_PR, *range(101, 109)):
        assert f"pull request #{pr}," not in sent[0]
    assert "API token" not in sent[0] and "never log credentials" not in sent[0].lower()
    seen = sum(in_prompt(c) for c in fixture.comments)
    assert report["comments_read"] == 200 and report["comments_mined"] == seen
    assert sent[0].count("] pull request #") == seen
    on = lambda prs: sum(1 for c in fixture.comments if c["pr"] in prs)  # noqa: E731
    assert report["excluded"]["merged_on_or_after_cut"] == on(set(range(101, 109)))
    assert report["excluded"]["task_source"] == on({TASK_SOURCE_PR})
    assert report["excluded"]["not_merged"] == on({UNMERGED_PR})
    assert report["task_source_prs"] == {str(TASK_SOURCE_PR): ["fix_add"]}

    # the threshold: 3 PRs from 2 reviewers; counts are dokimi's
    assert [(r.id, r.prs, r.reviewers, r.status.value) for r in rules.rules] == [
        ("R1", 8, 3, "candidate"),
        ("R2", 5, 2, "candidate"),
        ("R3", 4, 2, "candidate"),
    ]
    assert rules.rule("R1").rule == "Revert incidental edits to unrelated files."  # type: ignore[union-attr]
    below = {
        r["rule"]: (r["prs"], r["reviewers"]) for r in report["rules"] if r["outcome"].startswith("below")
    }
    assert below == {"Prefer f-strings.": (4, 1), "Link the issue.": (2, 2), "Caches key on env.": (2, 2)}
    evidence = {url for rule in rules.rules for url in rule.evidence}
    assert evidence == {c["url"] for t in ("incidental", "docstring", "pytest") for c in themed(fixture, t)}
    leaked = [c["url"] for c in fixture.comments if not in_prompt(c)]
    assert not evidence & set(leaked)

    # a maintainer edits R1 and confirms it; the re-mine words and orders the groups differently, names R2 and
    # R3 by same_as and forgets R1's: every id, the edit and the status stay
    data = json.loads(rules_file.read_text())
    data["rules"][0].update(rule="Revert edits to files the change does not need.", status="confirmed")
    rules_file.write_text(json.dumps(data))
    second = grouping_answer(
        [
            ("Tests: pytest functions only.", ["tests/**"], themed(fixture, "pytest")[::-1], "R3"),
            ("Keep unrelated files out of the diff.", ["**"], themed(fixture, "incidental")[1:], None),
            ("Docstrings on public calc functions.", ["calc/**"], themed(fixture, "docstring"), "R2"),
        ]
    )
    with MockModelServer([{"final": second}]) as server:
        monkeypatch.setenv("ANTHROPIC_BASE_URL", server.url)
        code, out, err = run_rules(argv, capsys)
        sent = [r.raw.decode("utf-8") for r in server.requests if r.main_loop]
    assert code == 0, err
    assert "R1 (applies to **): Revert edits to files the change does not need." in sent[0]
    again = RepoReviewRules.model_validate_json(rules_file.read_text())
    assert [(r.id, r.status.value) for r in again.rules] == [("R1", "confirmed"), ("R2", "candidate"),
                                                             ("R3", "candidate")]  # fmt: skip
    assert again.rule("R1").rule == "Revert edits to files the change does not need."  # type: ignore[union-attr]
    assert again.rule("R2").paths == ["calc/**/*.py"]  # type: ignore[union-attr]
    outcomes = {r["id"]: r["outcome"] for r in json.loads(out)["rules"]}
    assert outcomes == {"R1": "updated", "R2": "unchanged", "R3": "unchanged"}
