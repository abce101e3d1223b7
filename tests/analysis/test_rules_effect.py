"""``repo rules effect`` on a literal batch: recall with the team rules and without, on threads a rule covers
and on threads none covers (the figures are counted by hand below)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from dokimi.analysis.rules_effect import rules_effect
from dokimi.repo.arms import Arm
from tests.helpers.batches import write_cell, write_json, write_pin

THREADS = [{"id": "t1", "rules": ["R1"]}, {"id": "t2", "rules": ["R2"]}, {"id": "t3", "rules": []}]
FOUND = {
    "guidance:raw+rules": {"t1": True, "t2": True, "t3": False},
    "guidance:raw": {"t1": False, "t2": True, "t3": True},
}


def review_cell(batch: Path, arm: str, rep: int) -> None:
    found = FOUND[arm]
    run_dir = write_cell(batch, "review_a", arm, rep=rep, passed=None, score=2 / 3, mode="review")
    task = {"id": "review_a", "family": "review", "base": "b" * 40, "prompt": "Review.", "grader": "recall",
            "mode": "review", "score": {"metric": "recall", "max": 1.0}, "threads": THREADS}  # fmt: skip
    write_json(run_dir / "task.json", task)
    grade = {"schema": "repo_grade.v1", "task": "review_a", "grader": "recall", "pass": None,
             "metrics": {"recall": 2 / 3}, "threads": found}  # fmt: skip
    write_json(run_dir / "grade.json", grade)


def test_the_effect_splits_threads_a_rule_covers_from_those_none_covers(tmp_path: Path) -> None:
    batch = tmp_path / "b"
    write_pin(batch)
    for arm in FOUND:
        for rep in (0, 1):
            review_cell(batch, arm, rep)
        write_cell(batch, "fix_x", arm)  # no threads: not a review task, not counted
    report = rules_effect(batch)
    (pair,) = report.pairs
    assert (pair.with_arm, pair.without_arm, pair.tasks) == (
        "guidance:raw+rules",
        "guidance:raw",
        ["review_a"],
    )
    # covered threads t1, t2 over 2 reps: with 4 of 4, without 2 of 4 (t2 only) -> +0.5
    assert (pair.covered.threads, pair.covered.with_rules.k, pair.covered.with_rules.n) == (2, 4, 4)
    assert (pair.covered.without_rules.k, pair.covered.without_rules.n) == (2, 4)
    assert pair.covered.change == pytest.approx(0.5)
    # uncovered thread t3: with 0 of 2, without 2 of 2 -> change -1.0, a loss of 1.0
    assert (pair.uncovered.threads, pair.uncovered.with_rules.k, pair.uncovered.without_rules.k) == (1, 0, 2)
    assert pair.uncovered.change == pytest.approx(-1.0) and pair.loss_on_uncovered == pytest.approx(1.0)
    low, high = pair.uncovered.interval  # type: ignore[misc]
    assert -1.0 <= low < high < 0  # the whole interval is a loss
    assert pair.recall_with == pytest.approx(2 / 3) and pair.underpowered


def test_repo_rules_effect_prints_the_loss_and_refuses_a_batch_without_a_rules_arm(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from dokimi.cli.main import main

    batch = tmp_path / "b"
    write_pin(batch)
    review_cell(batch, "guidance:raw", 0)
    assert main(["repo", "rules", "effect", str(batch)]) == 2
    assert "no arm with the rules (ARM+rules)" in capsys.readouterr().err
    review_cell(batch, "guidance:raw+rules", 0)
    assert main(["repo", "rules", "effect", str(batch)]) == 0
    text = capsys.readouterr().out
    assert "threads no rule covers (1): found 0 of 1" in text
    assert "loss on threads no rule covers: +100 pp" in text and "UNDERPOWERED" in text
    assert main(["repo", "rules", "effect", str(batch), "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["schema"] == "repo_rules_effect.v1"


def test_a_rules_arm_is_named_by_its_suffix_before_any_mode() -> None:
    assert Arm("guidance:raw+rules").rules and Arm("guidance:tree+rules@review").rules
    assert not Arm("guidance:raw").rules and not Arm("guidance:at=v1@review").rules
    assert Arm("guidance:tree+rules@review").without_rules == "guidance:tree@review"
    assert Arm("guidance:at=feature+rules").without_rules == "guidance:at=feature"
    assert Arm("guidance:raw").without_rules == "guidance:raw"
