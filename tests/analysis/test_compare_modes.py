"""repo compare never pools agent modes: two arms that share no mode are refused with the reason, and the
modes one arm ran alone are left out with a warning."""

from __future__ import annotations

from pathlib import Path

import pytest

from dokimi.analysis.compare import compare
from dokimi.errors import UsageError
from tests.helpers.batches import write_cell, write_pin

RAW, REVIEW_ARM, FIX_ARM = "guidance:raw", "guidance:at=v2@review", "guidance:at=v2@autonomous"


@pytest.fixture
def batch(tmp_path: Path) -> Path:
    """fix (autonomous) and rev (review) under guidance:raw; each restricted arm ran its own mode's task."""
    root = tmp_path / "modes"
    write_pin(root)
    write_cell(root, "fix", RAW, mode="autonomous", passed=False)
    write_cell(root, "rev", RAW, mode="review", passed=True, score=0.5, gated_with_score=True,
               gate_results={"decoys_not_flagged": True})  # fmt: skip
    write_cell(root, "fix", FIX_ARM, mode="autonomous", passed=True)
    write_cell(root, "rev", REVIEW_ARM, mode="review", passed=True, score=1.0, gated_with_score=True,
               gate_results={"decoys_not_flagged": True})  # fmt: skip
    return root


def test_two_arms_that_share_no_mode_are_not_compared(batch: Path) -> None:
    with pytest.raises(UsageError) as refused:
        compare([f"{batch}/{REVIEW_ARM}"], f"{batch}/{FIX_ARM}")
    assert refused.value.message.endswith(
        f"{REVIEW_ARM} ran tasks of mode review and {batch}/{FIX_ARM} tasks of mode autonomous: arms are "
        "compared within one agent mode, and there is no score across modes"
    )


def test_a_restricted_arm_is_compared_on_its_mode_and_the_rest_is_warned_about(batch: Path) -> None:
    doc = compare([f"{batch}/{REVIEW_ARM}"], f"{batch}/{RAW}")
    (comparison,) = doc.comparisons
    assert comparison.mode == "review"
    score = next(m for m in comparison.measures if m.kind == "score")
    assert (score.baseline_mean, score.treatment_mean) == (0.5, 1.0)  # recall, beside the review gate
    (warning,) = doc.warnings
    assert warning.code == "mode_not_compared"
    assert warning.message == (
        f"{batch}/{RAW} ran tasks of mode autonomous, which {batch}/{REVIEW_ARM} did not run: they are left "
        "out (arms are compared within one agent mode)"
    )
