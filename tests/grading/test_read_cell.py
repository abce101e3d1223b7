"""read_cell: the one reading of a finished cell's result.json that every reader of results shares (report,
compare, the site, the run summary, the Inspect export, the rating export)."""

from __future__ import annotations

from typing import Any

import pytest

from dokimi.grading.verdict import read_cell
from dokimi.schemas.result import Result


def result(**fields: Any) -> Result:
    base: dict[str, Any] = {
        "task": "t",
        "arm": "guidance:raw",
        "model": "m",
        "rep": 0,
        "harness": "claude-code",
        "family": "fix",
        "gated": True,
        "passed": True,
        "duration_s": 1.0,
    }
    return Result.model_validate({**base, **fields})


def test_a_gated_cell_passes_only_with_a_true_verdict_and_no_grader_failure() -> None:
    assert read_cell(result()).passed is True
    assert read_cell(result(passed=False)).passed is False
    assert read_cell(result(passed=False, grader_failure=True, grader_error="no grade.json")).passed is False


def test_a_score_only_cell_never_passes_and_scores_zero_when_its_grader_failed() -> None:
    scored = result(gated=False, passed=None, score=0.75)
    assert (read_cell(scored).passed, read_cell(scored).score) == (False, 0.75)
    failed = result(gated=False, passed=None, score=None, grader_failure=True, grader_error="exit 1")
    assert read_cell(failed).score == 0.0
    assert read_cell(result(gated=False, passed=None, score=None)).score is None
    assert read_cell(result()).score is None


def test_mergeable_is_false_after_a_grader_failure_and_none_when_not_measured() -> None:
    assert read_cell(result(metrics={"mergeable": True})).mergeable is True
    assert read_cell(result(metrics={"mergeable": False})).mergeable is False
    broken = result(passed=False, metrics={"mergeable": True}, grader_failure=True, grader_error="timeout")
    assert read_cell(broken).mergeable is False
    assert read_cell(result()).mergeable is None


def test_the_test_pass_gate_leaves_mergeable_out() -> None:
    cell = result(passed=False, gate_results={"pass": True, "mergeable": False}, metrics={"mergeable": False})
    assert read_cell(cell).test_pass is True
    assert read_cell(result(gate_results={"pass": False})).test_pass is False
    assert read_cell(result(gated=False, passed=None)).test_pass is None


@pytest.mark.parametrize(
    ("metrics", "gate", "failure", "expected"),
    [
        ({"coverage": 0.5}, {}, False, 0.5),
        ({"ok": True}, {}, False, 1.0),
        ({"coverage": None}, {}, False, None),
        ({}, {}, False, None),
        ({"pass": True}, {"pass": False}, True, 0.0),
        ({"coverage": 0.5}, {}, True, 0.5),
    ],
)
def test_a_metric_is_a_number_and_a_grader_failure_fails_every_gated_one(
    metrics: dict[str, Any], gate: dict[str, Any], failure: bool, expected: float | None
) -> None:
    error = "exit 1" if failure else None
    cell = result(
        passed=not failure, metrics=metrics, gate_results=gate, grader_failure=failure, grader_error=error
    )
    name = next(iter(metrics), "coverage")
    assert read_cell(cell).metric(name) == expected
