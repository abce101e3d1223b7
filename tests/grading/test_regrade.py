"""The pure parts of repo regrade and of a cell's verdict: comparison, sampling, results. Literal data."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from dokimi.batch import Cell, CellKey
from dokimi.grading.gate import GateVerdict, grader_failure
from dokimi.grading.grade import GradedCell
from dokimi.grading.regrade import Mismatch, compare_results, copy_grade_inputs, regraded_result, sample_cells
from dokimi.runner.cell import AgentRun, build_result
from dokimi.schemas.result import Result
from dokimi.schemas.task import Task

TASK = Task.model_validate({"id": "t1", "family": "fix", "base": "b" * 40, "prompt": "p", "grader": "g"})
KEY = CellKey("t1", "guidance:raw", "m", None, 0)


def result(verdict: GateVerdict, metrics: dict[str, Any] | None = None, **agent: Any) -> Result:
    fields: dict[str, Any] = {"rc": 0, "timed_out": False, "cost_usd": 0.1, "turns": 3, "duration_s": 2.0}
    fields.update(agent)
    return build_result(
        KEY,
        TASK,
        GradedCell(verdict, metrics or {}),
        AgentRun(**fields),
        harness="claude-code",
        harness_version="2.1.328",
        agent_network=None,
        base_date=None,
    )


PASS = GateVerdict(True, True, None, {"pass": True})
FAIL = GateVerdict(True, False, None, {"pass": False})


def test_a_regrade_with_the_same_verdict_and_metrics_matches() -> None:
    assert compare_results(result(PASS, {"n": 3, "ok": True}), result(PASS, {"n": 3, "ok": True})) == []


def test_every_value_that_moved_is_named() -> None:
    moved = compare_results(result(PASS, {"n": 3, "x": 1.5}), result(FAIL, {"n": 4, "y": None}))
    assert moved == [
        Mismatch("passed", True, False),
        Mismatch("gate:pass", True, False),
        Mismatch("metric:n", 3, 4),
        Mismatch("metric:x", 1.5, None),
        Mismatch("metric:y", None, None),
    ]


def test_a_boolean_and_a_number_are_not_the_same_metric_value() -> None:
    assert compare_results(result(PASS, {"ok": True}), result(PASS, {"ok": 1})) == [
        Mismatch("metric:ok", True, 1)
    ]


def test_a_grader_failure_on_regrade_is_a_mismatch_of_the_verdict() -> None:
    moved = compare_results(result(PASS), result(grader_failure(TASK, "grade exited 1")))
    assert [m.what for m in moved] == ["passed", "grader_failure", "gate:pass"]


def test_the_regraded_result_keeps_what_the_agent_run_reported() -> None:
    original = result(PASS, {"n": 1}, cost_usd=0.7, turns=9, timed_out=True, rc=None)
    again = regraded_result(original, FAIL, {"n": 2})
    assert (again.cost_usd, again.turns, again.agent_timed_out, again.agent_rc) == (0.7, 9, True, None)
    assert (again.passed, again.metrics) == (False, {"n": 2})


def test_a_grader_failure_result_fails_every_gated_metric_and_says_why() -> None:
    failed = result(grader_failure(TASK, "host-side failure after the agent ran: disk full"))
    assert (failed.passed, failed.gate_results, failed.grader_failure) == (False, {"pass": False}, True)
    assert failed.grader_error == "host-side failure after the agent ran: disk full"


def test_the_sample_is_seeded_and_sorted_and_all_cells_without_a_size(tmp_path: Path) -> None:
    cells = [Cell(dir=tmp_path / str(i), rel=f"t/a/m/default/rep{i}", status="finished") for i in range(10)]
    first = sample_cells(cells, 3, seed=5)
    assert first == sample_cells(list(reversed(cells)), 3, seed=5)
    assert [c.rel for c in first] == sorted(c.rel for c in first) and len(first) == 3
    assert sample_cells(cells, None, seed=5) == sorted(cells, key=lambda c: c.rel)
    assert len(sample_cells(cells, 50, seed=5)) == 10


def test_a_regrade_copies_the_inputs_and_never_the_verdicts(tmp_path: Path) -> None:
    run_dir = tmp_path / "cell"
    (run_dir / "workspace" / "pkg").mkdir(parents=True)
    (run_dir / "workspace" / "pkg" / "a.py").write_text("x = 1\n")
    (run_dir / "workspace" / "link").symlink_to("pkg/a.py")
    for name in (
        "task.json",
        "meta.json",
        "events.jsonl",
        "answer.txt",
        "agent.stdout",
        "grade.json",
        "result.json",
    ):
        (run_dir / name).write_text(name)
    copy_grade_inputs(run_dir, tmp_path / "copy")
    copied = sorted(p.relative_to(tmp_path / "copy").as_posix() for p in (tmp_path / "copy").rglob("*"))
    assert copied == [
        "agent.stdout",
        "answer.txt",
        "events.jsonl",
        "meta.json",
        "task.json",
        "workspace",
        "workspace/link",
        "workspace/pkg",
        "workspace/pkg/a.py",
    ]
    assert (tmp_path / "copy" / "workspace" / "link").is_symlink()
    if os.getuid() == 0:  # the copy is the container user's, as the original run dir was (CI runs as root)
        from dokimi.sandbox.container import container_identity

        who = container_identity()
        for path in [tmp_path / "copy", *(tmp_path / "copy").rglob("*")]:
            assert (os.lstat(path).st_uid, os.lstat(path).st_gid) == (who.uid, who.gid), path


def test_a_cost_or_turn_count_the_harness_got_wrong_is_not_recorded_and_never_breaks_the_cell() -> None:
    # The trace is the harness's output, untrusted: a cost of 1e400 parses as inf, which result.json refuses.
    # The cell must still get its result (an exception here ended the whole batch with a traceback).
    for cost in (float("inf"), float("nan"), -1.0):
        assert result(PASS, cost_usd=cost).cost_usd is None
    assert result(PASS, turns=-5).turns is None
    assert result(PASS, duration_s=float("nan")).duration_s == 0.0
