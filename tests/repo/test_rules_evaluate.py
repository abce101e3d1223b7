"""``repo rules evaluate`` on a small fixture whose figures are worked out by hand below."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from tests.helpers.evalrepo import make_eval_repo


def rule(rid: str, paths: list[str], status: str, reviewers: int = 2) -> dict[str, Any]:
    return {"id": rid, "rule": f"rule {rid}", "paths": paths, "prs": 5, "reviewers": reviewers,
            "written_in": None, "status": status, "evidence": []}  # fmt: skip


RULES = {
    "schema": "repo_review_rules.v1",
    "cut_date": "2026-03-29",
    "rules": [
        rule("R1", ["**"], "confirmed"),
        rule("R2", ["calc/**"], "confirmed"),
        rule("R3", ["tests/**"], "candidate"),
        rule("R4", ["**"], "rejected"),
        rule("R5", ["**"], "confirmed", reviewers=1),
    ],
}


def comment(n: int, created: str, path: str | None, rules: list[str]) -> dict[str, Any]:
    return {"pr": 200 + n, "merged_at": "2026-04-20T00:00:00Z", "reviewer": "ann", "path": path,
            "line": 1 if path else None, "body": f"comment {n}", "url": f"https://forge.invalid/c{n}",
            "created_at": created, "rules": rules}  # fmt: skip


COMMENTS = [
    comment(1, "2026-03-28T23:59:00Z", "calc/x.py", ["R1"]),  # before the cut: mining input, not counted
    comment(2, "2026-04-01T10:00:00Z", "calc/x.py", ["R1"]),  # covered by R1
    comment(3, "2026-04-01T10:00:00Z", "docs/x.md", ["R2"]),  # R2 is for calc/**: not covered
    comment(4, "2026-04-02T10:00:00Z", "tests/t.py", ["R3"]),  # R3 is a candidate: not covered
    comment(5, "2026-04-02T10:00:00Z", "calc/y.py", []),  # no rule
    comment(6, "2026-03-29T00:00:00Z", None, ["R2"]),  # on the cut day; PR-level: any path; covered
    comment(7, "2026-04-03T10:00:00Z", "calc/z.py", ["R9"]),  # a label naming no rule: not covered
    comment(8, "2026-04-03T10:00:00Z", "calc/z.py", ["R4", "R5"]),  # R5 is confirmed: covered
]
MATCHES = [
    {"rule": "R1", "pr": 301, "agreed": True},
    {"rule": "R1", "pr": 302, "agreed": False},
    {"rule": "R2", "pr": 303, "agreed": True},
    {"rule": "R2", "pr": 304, "agreed": None},  # not judged yet: not counted
]


def jsonl(path: Path, rows: list[dict[str, Any]]) -> Path:
    path.write_text("".join(json.dumps(row) + "\n" for row in rows))
    return path


@pytest.mark.slow
def test_evaluate_figures_match_the_hand_count(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from dokimi.cli.main import main

    repo, _, _ = make_eval_repo(tmp_path / "repo")
    (repo / ".agent-eval" / "review_rules.json").write_text(json.dumps(RULES))
    comments = jsonl(tmp_path / "comments.jsonl", COMMENTS)
    matches = jsonl(tmp_path / "matches.jsonl", MATCHES)
    argv = [
        "repo",
        "rules",
        "evaluate",
        "-C",
        str(repo),
        "--comments",
        str(comments),
        "--matches",
        str(matches),
    ]
    assert main([*argv, "--json"]) == 0
    report = json.loads(capsys.readouterr().out)

    # coverage: 7 comments on or after the cut (2..8); covered: 2 (R1), 6 (R2, PR-level), 8 (R5) -> 3 of 7.
    # Wilson 95%, z = 1.959964, p = 3/7: centre = (p + z^2/14) / (1 + z^2/7) = 0.453881,
    # half = z * sqrt(p(1 - p)/7 + z^2/196) / (1 + z^2/7) = 0.295661
    assert report["before_cut"] == 1 and report["comments"] == 8
    assert (report["coverage"]["k"], report["coverage"]["n"]) == (3, 7)
    assert report["coverage"]["value"] == pytest.approx(3 / 7)
    assert report["coverage"]["interval"] == pytest.approx([0.158220, 0.749542], abs=2e-6)
    assert report["uncovered"] == [f"https://forge.invalid/c{n}" for n in (3, 4, 5, 7)]
    assert {r["id"]: r["covered"] for r in report["per_rule"]} == {
        "R1": 1,
        "R2": 1,
        "R3": 1,
        "R4": 1,
        "R5": 1,
    }
    assert report["unknown_labels"] == ["R9"]
    # precision of the mining: R1, R2, R5 confirmed of 5 rules -> 3 of 5; in use: 2 agreed of 3 judged
    assert (report["precision_mined"]["k"], report["precision_mined"]["n"]) == (3, 5)
    assert (report["precision_in_use"]["k"], report["precision_in_use"]["n"]) == (2, 3)
    assert report["single_reviewer"] == ["R5"] and report["confirmed_single_reviewer"] == ["R5"]

    assert main([*argv, "--sample", "R1", "--sample", "R3"]) == 0
    text = capsys.readouterr().out
    assert "predictive coverage: 3 of 7 (43%; 95% CI 16% to 75%) comments made on or after the cut" in text
    assert "precision of the mining: 1 of 2 (50%" in text
    assert main([*argv, "--min-coverage", "0.5"]) == 1
    assert "below --min-coverage 0.5" in capsys.readouterr().err
    assert main([*argv, "--sample", "R7"]) == 2
    assert "R7, which the rules file does not hold" in capsys.readouterr().err
