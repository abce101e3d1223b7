"""Each mode's success rule as a task's default gate, a task's own gate winning, and how a review task
gated on its review checks is graded: gated even when its grader leaves pass null, its recall beside the
gate."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from dokimi.grading.gate import evaluate_gate, grader_failure, not_graded
from dokimi.grading.review import check_review, read_review
from dokimi.grading.verdict import read_cell
from dokimi.rundir import RunDir
from dokimi.schemas.grade import REVIEW_METRICS, RepoGrade, grade_problems
from dokimi.schemas.result import Result
from dokimi.schemas.task import Task

DECOY = {"id": "D1", "path": "a.py", "lines": [1, 2], "why": "fine"}


def task(**extra: Any) -> Task:
    data = {"id": "t", "family": "fix", "base": "a" * 40, "prompt": "p", "grader": "g", **extra}
    return Task.model_validate(data)


def grade(passed: bool | None, **metrics: Any) -> RepoGrade:
    return RepoGrade.model_validate(
        {"schema": "repo_grade.v1", "task": "t", "grader": "g", "pass": passed, "metrics": metrics}
    )


@pytest.mark.parametrize(
    ("extra", "gate"),
    [
        ({}, ["pass"]),
        ({"mode": "interactive"}, ["pass", "mergeable"]),
        ({"mode": "autonomous"}, ["pass", "mergeable", "own_tests_fail_on_base"]),
        ({"mode": "autonomous", "perf": {"metric": "m"}}, ["pass", "mergeable", "own_tests_fail_on_base",
                                                           "perf_pass"]),
        ({"mode": "review"}, ["pass"]),
        ({"mode": "review", "decoys": [DECOY]}, ["decoys_not_flagged"]),
        ({"mode": "review", "clean_diff_of": "r"}, ["no_blocking_finding"]),
        ({"mode": "review", "clean_diff_of": "r", "decoys": [DECOY]}, ["no_blocking_finding",
                                                                       "decoys_not_flagged"]),
    ],
)  # fmt: skip
def test_a_task_without_a_gate_gets_its_modes_success_rule(extra: dict[str, Any], gate: list[str]) -> None:
    made = task(**extra)
    assert made.gate == gate
    assert made.gate_from_mode is (gate != ["pass"])


def test_a_tasks_own_gate_wins_over_its_mode() -> None:
    made = task(mode="autonomous", gate=["pass"])
    assert made.gate == ["pass"] and not made.gate_from_mode


def test_an_autonomous_prompt_is_an_issue_unless_the_task_says_otherwise() -> None:
    assert task(mode="autonomous").prompt_style == "issue"
    assert task(mode="autonomous", prompt_style="spec").prompt_style == "spec"
    assert task(mode="interactive").prompt_style is None


def test_decoy_ids_are_unique() -> None:
    with pytest.raises(ValueError, match="decoy ids must be unique: D1"):
        task(mode="review", decoys=[DECOY, DECOY])


def test_a_review_task_gated_on_its_checks_is_gated_with_its_score_when_pass_is_null() -> None:
    review = task(mode="review", decoys=[DECOY], score={"metric": "recall", "max": 1.0})
    assert review.gated_without_pass
    verdict = evaluate_gate(review, grade(None, recall=0.5), extra_metrics={"decoys_not_flagged": True})
    assert (verdict.gated, verdict.passed, verdict.score) == (True, True, 0.5)
    flagged = evaluate_gate(review, grade(None, recall=1.0), extra_metrics={"decoys_not_flagged": False})
    assert (flagged.passed, flagged.score) == (False, 1.0)
    # a grader failure is a gated failure, never a score-only one
    failed = grader_failure(review, "grade exited 1")
    assert failed.gated and failed.passed is False and failed.gate_results == {"decoys_not_flagged": False}
    assert not_graded(review).gated


def test_a_clean_diff_task_may_leave_pass_null_without_a_score() -> None:
    clean = task(mode="review", clean_diff_of="r")
    assert grade_problems(grade(None), clean) == []
    assert grade_problems(grade(None), task()) != []  # a task gated on pass may not


def test_a_score_only_review_task_stays_score_only() -> None:
    review = task(mode="review", score={"metric": "recall", "max": 1.0})
    verdict = evaluate_gate(review, grade(None, recall=0.5))
    assert (verdict.gated, verdict.passed, verdict.score) == (False, None, 0.5)


@pytest.mark.parametrize(
    ("fields", "score"),
    [
        ({"gated": True, "passed": True, "score": 0.5, "gated_with_score": True}, 0.5),
        ({"gated": True, "passed": False, "score": None, "gated_with_score": True, "grader_failure": True,
          "grader_error": "x"}, 0.0),
        ({"gated": True, "passed": True, "score": 0.5}, None),  # another gated cell: the gate is its result
        ({"gated": False, "passed": None, "score": 0.25}, 0.25),
    ],
)  # fmt: skip
def test_a_review_cell_gated_with_its_score_counts_both(fields: dict[str, Any], score: float | None) -> None:
    result = Result.model_validate(
        {"task": "t", "arm": "a", "model": "m", "rep": 0, "harness": "h", "family": "review",
         "duration_s": 1.0, **fields}
    )  # fmt: skip
    assert read_cell(result).score == score


@pytest.mark.parametrize("kind", ["huge", "link"])
def test_an_answer_dokimi_cannot_read_measures_nothing(tmp_path: Path, kind: str) -> None:
    run_dir = tmp_path / "run"
    run_dir.mkdir()
    answer = RunDir(run_dir).answer_txt
    if kind == "huge":
        with answer.open("wb") as out:
            out.truncate(64 * 1024 * 1024)  # sparse: a size no review answer has
    else:
        (tmp_path / "elsewhere.txt").write_text("calc/evaluator.py:17: flagged\n")
        answer.symlink_to(tmp_path / "elsewhere.txt")
    review = task(mode="review", decoys=[DECOY], score={"metric": "recall", "max": 1.0})
    document = check_review(run_dir, review)
    assert document.metrics == dict.fromkeys(REVIEW_METRICS)  # a gate on them fails, never passes
    assert document.reasons[0].startswith("the answer cannot be read")
    assert read_review(run_dir) == document
