"""Team review rules (agent-modes §4) on literal data: selection for the judge, blocker eligibility, the leak
guard, and the measures of the rules themselves."""

from __future__ import annotations

import datetime as dt
import json
from pathlib import Path
from typing import Any

import pytest

from dokimi.errors import DocumentError
from dokimi.repo import rules as house
from dokimi.repo.rules import (
    ReviewComment,
    RuleMatch,
    base_day,
    blocker_eligible,
    confirmed_share,
    coverage,
    load_review_rules,
    match_agreement,
    rule_may_score,
    rules_for_diff,
    rules_for_judge,
    single_reviewer_rules,
)
from dokimi.schemas.review_rules import RepoReviewRules


def rule(
    rid: str, paths: list[str], *, prs: int = 5, reviewers: int = 3, status: str = "confirmed"
) -> dict[str, Any]:
    return {
        "id": rid,
        "rule": f"rule {rid}",
        "paths": paths,
        "prs": prs,
        "reviewers": reviewers,
        "written_in": None,
        "status": status,
        "evidence": [],
    }


RULES = RepoReviewRules.model_validate(
    {
        "schema": "repo_review_rules.v1",
        "cut_date": "2026-03-29",
        "rules": [
            rule("R1", ["**"], prs=21, reviewers=7),
            rule("R2", ["cpp/**/*.h"]),
            rule("R3", ["docs/**"]),
            rule("R4", ["cpp/**"], status="candidate"),
            rule("R5", ["cpp/**"], prs=2),
            rule("R6", ["cpp/**"], reviewers=1),
            rule("R7", ["cpp/**"], status="rejected"),
        ],
    }
)


# --- which rules the judge gets -----------------------------------------------------------------------------


def test_the_judge_gets_confirmed_rules_whose_paths_match_the_diff_never_the_whole_list() -> None:
    chosen = [r.id for r in rules_for_diff(RULES, ["cpp/algo/kmeans.h"], [])]
    assert chosen == [
        "R1",
        "R2",
        "R5",
        "R6",
    ]  # candidates and rejected rules stay out, docs/** does not match


def test_a_cited_rule_is_included_even_when_its_paths_miss_the_diff() -> None:
    assert [r.id for r in rules_for_diff(RULES, ["src/x.py"], ["R3"])] == ["R1", "R3"]


def test_star_in_a_rule_glob_does_not_cross_a_slash() -> None:
    only_top = RepoReviewRules.model_validate(
        {"schema": "repo_review_rules.v1", "cut_date": "2026-01-01", "rules": [rule("R1", ["cpp/*.h"])]}
    )
    assert rules_for_diff(only_top, ["cpp/a/b.h"], []) == []
    assert [r.id for r in rules_for_diff(only_top, ["cpp/b.h"], [])] == ["R1"]


def test_a_reviewer_gets_the_cited_and_path_matching_rules_and_nothing_before_the_cut() -> None:
    given = house.rules_for_reviewer(RULES, "2026-04-01T10:00:00+00:00", ["cpp/algo/kmeans.h"], ["R4"])
    assert [r.id for r in given] == ["R1", "R2", "R4", "R5", "R6"]  # R4 a cited candidate; R3, R7 left out
    assert house.rules_for_reviewer(RULES, "2026-03-01", ["cpp/algo/kmeans.h"], ["R4"]) == []
    prompt = house.reviewer_prompt("Review the HEAD commit.", given[:2])
    assert prompt == (
        "Review the HEAD commit.\n\n## Team review rules that apply\n\n"
        "This repository's reviewers enforce these rules on changes to the files they name:\n"
        "- R1 (applies to **): rule R1\n- R2 (applies to cpp/**/*.h): rule R2\n"
    )
    assert house.reviewer_prompt("Review.", []) == "Review."


def test_the_judge_and_this_module_share_one_selection() -> None:
    from dokimi.checks.merge import judge

    assert house.rules_for_diff is judge.rules_for_diff


# --- blockers -----------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("rid", "eligible"),
    [("R1", True), ("R2", True), ("R4", False), ("R5", False), ("R6", False), ("R7", False)],
)
def test_only_confirmed_rules_from_3_prs_and_2_reviewers_may_back_a_blocker(rid: str, eligible: bool) -> None:
    found = RULES.rule(rid)
    assert found is not None and blocker_eligible(found) is eligible


def test_a_rule_from_one_reviewer_is_that_reviewers_preference() -> None:
    assert single_reviewer_rules(RULES) == ["R6"]


# --- the leak guard -----------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("base", "allowed"),
    [
        ("2026-03-29", True),
        ("2026-03-28", False),
        (dt.date(2026, 4, 2), True),
        ("2026-03-29T00:30:00+02:00", False),  # 2026-03-28 22:30 UTC
        ("2026-03-28T23:30:00-02:00", True),  # 2026-03-29 01:30 UTC
        (dt.datetime(2026, 3, 29, 12, 0), True),
    ],
)
def test_rules_score_only_tasks_based_on_or_after_the_cut_date(base: Any, allowed: bool) -> None:
    assert rule_may_score(RULES, base) is allowed


def test_a_task_based_before_the_cut_gets_no_rules_in_its_judge() -> None:
    assert rules_for_judge(RULES, "2026-04-01T10:00:00+00:00") is RULES
    assert rules_for_judge(RULES, "2025-12-01T10:00:00+00:00") is None
    assert rules_for_judge(RULES, None) is None and rules_for_judge(None, "2026-04-01") is None


def test_base_day_reads_git_committer_dates_in_utc() -> None:
    assert base_day("2026-03-29T01:00:00+03:00") == dt.date(2026, 3, 28)


# --- evaluating the rules -----------------------------------------------------------------------------------


def test_coverage_counts_comments_after_the_cut_that_a_confirmed_rule_on_their_path_matches() -> None:
    comments = [
        ReviewComment("c0", "2026-01-10", "cpp/a.h", ("R2",)),  # before the cut: mined from, not counted
        ReviewComment("c1", "2026-04-01", "cpp/a.h", ("R2",)),  # covered
        ReviewComment("c2", "2026-04-02", "cpp/a.cpp", ("R2",)),  # R2 is for headers: not covered
        ReviewComment("c3", "2026-04-03", "cpp/a.cpp", ("R4",)),  # a candidate rule: not covered
        ReviewComment("c4", "2026-04-04", None, ("R1",)),  # a PR-level comment, a rule for every file
        ReviewComment("c5", "2026-04-05", "docs/x.md", ()),  # no rule
    ]
    share, uncovered = coverage(RULES, comments)
    assert (share.k, share.n, share.value) == (2, 5, 0.4)
    assert uncovered == ["c2", "c3", "c5"]
    interval = share.interval
    assert interval is not None and interval[0] < 0.4 < interval[1]


def test_coverage_of_no_comments_is_not_a_number() -> None:
    share, uncovered = coverage(RULES, [])
    assert share.value is None and share.interval is None and uncovered == []


def test_precision_is_the_confirmed_share_of_a_sample_and_the_agreed_share_of_matches() -> None:
    assert confirmed_share(RULES.rules).k == 5 and confirmed_share(RULES.rules).n == 7
    agreed = match_agreement(
        [RuleMatch("R1", True), RuleMatch("R2", False), RuleMatch("R2", True), RuleMatch("R3", None)]
    )
    assert (agreed.k, agreed.n) == (2, 3)


# --- loading ------------------------------------------------------------------------------------------------


def test_the_rules_file_is_read_from_the_eval_dir_and_its_absence_is_none(tmp_path: Path) -> None:
    assert load_review_rules(tmp_path) is None
    (tmp_path / "review_rules.json").write_text(RULES.model_dump_json(by_alias=True))
    loaded = load_review_rules(tmp_path)
    assert loaded is not None and [r.id for r in loaded.rules] == [r.id for r in RULES.rules]


def test_a_malformed_rules_file_names_the_key(tmp_path: Path) -> None:
    data = json.loads(RULES.model_dump_json(by_alias=True))
    data["rules"][1]["status"] = "approved"
    (tmp_path / "review_rules.json").write_text(json.dumps(data, indent=2))
    with pytest.raises(DocumentError) as caught:
        load_review_rules(tmp_path)
    assert caught.value.key == "rules[1].status"
