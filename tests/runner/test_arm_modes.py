"""Arms restricted to one agent mode (``ARM@MODE``): parsed apart from their guidance, planned on that mode's
tasks only, refused when the batch has none of them."""

from __future__ import annotations

from typing import Any

import pytest

from dokimi.errors import UsageError
from dokimi.repo.arms import Arm
from dokimi.runner.plan import check_cell_count, plan_cells
from dokimi.schemas.task import Task


def task(task_id: str, **extra: Any) -> Task:
    data = {"id": task_id, "family": "fix", "base": "a" * 40, "prompt": "p", "grader": "g", **extra}
    return Task.model_validate(data)


@pytest.mark.parametrize(
    ("arm", "mode", "guidance", "kind", "revision"),
    [
        ("guidance:raw", None, "guidance:raw", "raw", ""),
        ("guidance:raw@review", "review", "guidance:raw", "raw", ""),
        ("guidance:at=review-guide@review", "review", "guidance:at=review-guide", "at", "review-guide"),
        ("guidance:at=HEAD@{1}", None, "guidance:at=HEAD@{1}", "at", "HEAD@{1}"),  # git's own @ stays
        ("guidance:at=v2@autonomous", "autonomous", "guidance:at=v2", "at", "v2"),
    ],
)
def test_an_arm_carries_its_mode_after_an_at_sign(
    arm: str, mode: str | None, guidance: str, kind: str, revision: str
) -> None:
    parsed = Arm(arm)
    assert (parsed.mode, parsed.guidance, parsed.kind, parsed.revision or "") == (
        mode,
        guidance,
        kind,
        revision,
    )
    assert parsed == arm


def test_an_unknown_mode_is_no_restriction_and_an_unknown_arm_stays_unknown() -> None:
    with pytest.raises(UsageError, match="unknown arm 'guidance:raw@solo'"):
        Arm("guidance:raw@solo")


def test_a_restricted_arm_runs_on_its_modes_tasks_only() -> None:
    assert Arm("guidance:raw@review").runs_task("review")
    assert not Arm("guidance:raw@review").runs_task("autonomous")
    assert not Arm("guidance:raw@review").runs_task(None)
    assert Arm("guidance:raw").runs_task(None)
    tasks = [task("fix", mode="autonomous"), task("rev", mode="review"), task("plain")]
    cells = plan_cells(tasks, [Arm("guidance:raw"), Arm("guidance:none@review")], ["m"], [], 2)
    planned = sorted({(c.task, c.arm) for c in cells})
    assert planned == [("fix", "guidance:raw"), ("plain", "guidance:raw"), ("rev", "guidance:none@review"),
                       ("rev", "guidance:raw")]  # fmt: skip
    assert (
        len(cells)
        == 8
        == check_cell_count(tasks, [Arm("guidance:raw"), Arm("guidance:none@review")], ["m"], [], 2)
    )


def test_a_restricted_arm_without_a_task_of_its_mode_is_refused() -> None:
    with pytest.raises(UsageError, match="arm guidance:raw@review runs on review tasks only, and no task"):
        plan_cells(
            [task("fix", mode="autonomous"), task("plain")], [Arm("guidance:raw@review")], ["m"], [], 1
        )
