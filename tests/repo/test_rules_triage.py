"""``repo rules triage``: a maintainer's accept, reject and edit, each recorded in the rule it was made on."""

from __future__ import annotations

import datetime as dt
import json
from pathlib import Path
from typing import Any

import pytest

from dokimi.repo.rules_triage import TriageRequest, apply_triage, pending
from dokimi.schemas.review_rules import RepoReviewRules, TriageDecision
from tests.helpers.evalrepo import make_eval_repo


def rule(rid: str, *, prs: int = 4, reviewers: int = 2, status: str = "candidate") -> dict[str, Any]:
    return {"id": rid, "rule": f"rule {rid}", "paths": ["**"], "prs": prs, "reviewers": reviewers,
            "written_in": None, "status": status, "evidence": [f"https://forge.invalid/{rid}"]}  # fmt: skip


RULES: dict[str, Any] = {
    "schema": "repo_review_rules.v1",
    "cut_date": "2026-03-29",
    "rules": [rule("R1"), rule("R2", reviewers=1), rule("R3", status="confirmed")],
}
TODAY = dt.date(2026, 4, 2)


def decide(rid: str, decision: str, **kw: Any) -> TriageRequest:
    return TriageRequest(rule_id=rid, decision=TriageDecision(decision), by="ada", date=TODAY, **kw)


def test_accept_confirms_and_records_who_when_and_what_the_edit_replaced() -> None:
    rules = RepoReviewRules.model_validate(RULES)
    updated, changed, caveats = apply_triage(
        rules, decide("R1", "accept", note="seen it often", paths=("src/**", "lib/**"))
    )
    assert changed.status.value == "confirmed" and changed.paths == ["src/**", "lib/**"]
    assert [t.model_dump(mode="json") for t in changed.triage] == [
        {"decision": "accept", "by": "ada", "date": "2026-04-02", "note": "seen it often", "rule_was": None,
         "paths_was": ["**"]}
    ]  # fmt: skip
    assert caveats == [] and [r.id for r in pending(updated)] == ["R2"]
    assert rules.rule("R1").status.value == "candidate"  # type: ignore[union-attr]  # the input is unchanged


def test_a_one_reviewer_rule_may_be_accepted_but_is_told_it_stays_a_preference() -> None:
    _, changed, caveats = apply_triage(RepoReviewRules.model_validate(RULES), decide("R2", "accept"))
    assert changed.status.value == "confirmed"
    assert any("until a second reviewer raises it" in c for c in caveats)
    assert any("cannot back a rubric blocker" in c for c in caveats)


def test_an_edit_keeps_the_status_and_an_empty_edit_or_an_unknown_id_is_refused() -> None:
    rules = RepoReviewRules.model_validate(RULES)
    _, changed, _ = apply_triage(rules, decide("R3", "edit", rule="Say it better.", written_in="AGENTS.md"))
    assert (changed.status.value, changed.rule, changed.written_in) == (
        "confirmed",
        "Say it better.",
        "AGENTS.md",
    )
    assert changed.triage[-1].rule_was == "rule R3"
    from dokimi.errors import UsageError

    with pytest.raises(UsageError, match="nothing to change"):
        apply_triage(rules, decide("R3", "edit", rule="rule R3"))
    with pytest.raises(UsageError, match="no rule 'R9'"):
        apply_triage(rules, decide("R9", "reject"))


@pytest.mark.slow
def test_repo_rules_triage_lists_then_decides_in_the_eval_dir(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from dokimi.cli.main import main

    repo, _, _ = make_eval_repo(tmp_path / "repo")
    path = repo / ".agent-eval" / "review_rules.json"
    path.write_text(json.dumps(RULES))
    assert main(["repo", "rules", "triage", "-C", str(repo)]) == 0
    listed = capsys.readouterr().out
    assert "2 rule(s) await triage in .agent-eval/review_rules.json" in listed and "R3" not in listed
    assert main(["repo", "rules", "triage", "R1", "-C", str(repo), "--reject", "--by", "ada"]) == 0
    assert "R1: rejected" in capsys.readouterr().out
    assert main(["repo", "rules", "triage", "R2", "-C", str(repo), "--accept"]) == 2
    assert "give --by NAME" in capsys.readouterr().err
    saved = RepoReviewRules.model_validate_json(path.read_text())
    assert saved.rule("R1").status.value == "rejected" and saved.rule("R1").triage[0].by == "ada"  # type: ignore[union-attr]
