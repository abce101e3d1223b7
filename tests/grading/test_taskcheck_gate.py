"""The gate as a pure function (contract §3, §4.2): literal tasks and grades, no containers."""

from __future__ import annotations

from typing import Any

from dokimi.grading.gate import evaluate_gate, reaches_score_max
from dokimi.schemas.grade import RepoGrade
from dokimi.schemas.task import Task

BASE = "a" * 40


def _task(**extra: Any) -> Task:
    data = {"id": "t1", "family": "fix", "base": BASE, "prompt": "p", "grader": "g", **extra}
    return Task.model_validate(data)


def _grade(passed: bool | None, metrics: dict[str, Any] | None = None, **extra: Any) -> RepoGrade:
    data = {"schema": "repo_grade.v1", "task": "t1", "grader": "g", "pass": passed, "metrics": metrics or {}}
    return RepoGrade.model_validate({**data, **extra})


def test_the_default_gate_is_pass() -> None:
    assert evaluate_gate(_task(), _grade(True)).passed is True
    verdict = evaluate_gate(_task(), _grade(False))
    assert (verdict.gated, verdict.passed, verdict.gate_results) == (True, False, {"pass": False})


def test_every_gate_entry_must_hold() -> None:
    task = _task(gate=["strict_pass", {"metric": "coverage", "min": 0.8}])
    ok = evaluate_gate(task, _grade(True, {"strict_pass": True, "coverage": 0.9}))
    assert ok.passed is True and ok.gate_results == {"strict_pass": True, "coverage": True}
    low = evaluate_gate(task, _grade(True, {"strict_pass": True, "coverage": 0.5}))
    assert low.passed is False and low.gate_results["coverage"] is False


def test_a_metric_that_was_not_measured_is_none_and_does_not_pass() -> None:
    task = _task(gate=["strict_pass", {"metric": "coverage", "min": 0.8}])
    verdict = evaluate_gate(task, _grade(True, {"strict_pass": None}))
    assert verdict.gate_results == {"strict_pass": None, "coverage": None}
    assert verdict.passed is False
    assert verdict.grader_failure is False


def test_a_boolean_is_not_a_number_for_a_min_gate() -> None:
    task = _task(gate=[{"metric": "coverage", "min": 0.5}])
    assert evaluate_gate(task, _grade(True, {"coverage": True})).gate_results == {"coverage": False}


def test_score_only_result_is_the_score_metric() -> None:
    task = _task(score={"metric": "recall", "max": 1.0})
    verdict = evaluate_gate(task, _grade(None, {"recall": 0.5}))
    assert (verdict.gated, verdict.passed, verdict.score) == (False, None, 0.5)
    assert not reaches_score_max(task, verdict)
    assert reaches_score_max(task, evaluate_gate(task, _grade(None, {"recall": 1})))


def test_pass_null_without_score_is_a_grader_failure() -> None:
    verdict = evaluate_gate(_task(), _grade(None))
    assert verdict.grader_failure and verdict.passed is False
    assert "no score" in (verdict.grader_error or "")


def test_pass_null_with_errors_is_a_grader_failure_on_every_gated_metric() -> None:
    task = _task(gate=["pass", "strict_pass"])
    verdict = evaluate_gate(task, _grade(None, errors=["build failed"]))
    assert verdict.grader_failure
    assert verdict.gate_results == {"pass": False, "strict_pass": False}
    assert "build failed" in (verdict.grader_error or "")


def test_no_grade_json_is_a_grader_failure_with_the_reason() -> None:
    verdict = evaluate_gate(_task(), None, error="grade exited 1: Traceback")
    assert verdict.grader_failure and verdict.passed is False
    assert verdict.grader_error == "grade exited 1: Traceback"


def test_a_grade_for_another_task_is_a_grader_failure() -> None:
    verdict = evaluate_gate(_task(), _grade(True, task="other"))
    assert verdict.grader_failure and "other" in (verdict.grader_error or "")


def test_framework_metrics_can_be_gated_on() -> None:
    task = _task(gate=["pass", {"metric": "merge_score", "min": 3}])
    verdict = evaluate_gate(task, _grade(True), extra_metrics={"merge_score": 4})
    assert verdict.passed is True
