"""Spec figures shown: mergeable-gated cells with too few reps are warned about, and rows of different prompt
styles are never pooled, in the text report or in compare. Literal batches, no runner (the run of both
prompt variants is in tests/runner/test_run_faults.py)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from dokimi.analysis.compare import compare
from dokimi.analysis.report import build_report
from dokimi.batch import load_batch
from dokimi.cli.main import main
from tests.helpers.batches import write_cell, write_pin

NONE, RAW = "guidance:none", "guidance:raw"
MERGEABLE = {"gate_results": {"pass": True, "mergeable": True}, "metrics": {"mergeable": True}}


def mergeable_batch(root: Path, reps: dict[str, int]) -> Path:
    write_pin(root)
    for arm, count in reps.items():
        for task in ("t1", "t2"):
            for rep in range(count):
                write_cell(root, task, arm, rep=rep, **MERGEABLE)
    return root


def codes(warnings: list) -> dict[str, str]:  # type: ignore[type-arg]
    return {w.code: w.message for w in warnings}


def test_mergeable_gated_cells_need_3_reps_and_5_when_arms_are_compared(tmp_path: Path) -> None:
    one_arm = build_report(load_batch(mergeable_batch(tmp_path / "one", {RAW: 2})))
    message = codes(one_arm.warnings)["mergeable_few_reps"]
    assert "fewer than 3 reps (one arm)" in message and "t1 / guidance:raw / m1 (2)" in message
    assert "mergeable_few_reps" not in codes(
        build_report(load_batch(mergeable_batch(tmp_path / "three", {RAW: 3}))).warnings
    )

    two_arms = mergeable_batch(tmp_path / "two", {RAW: 4, NONE: 4})
    assert (
        "fewer than 5 reps (arms are compared)"
        in codes(build_report(load_batch(two_arms)).warnings)["mergeable_few_reps"]
    )
    assert "fewer than 5 reps" in codes(compare([str(two_arms)], NONE).warnings)["mergeable_few_reps"]
    five = mergeable_batch(tmp_path / "five", {RAW: 5, NONE: 5})
    assert "mergeable_few_reps" not in codes(compare([str(five)], NONE).warnings)


def test_cells_not_gated_on_mergeable_need_no_more_reps(tmp_path: Path) -> None:
    root = tmp_path / "plain"
    write_pin(root)
    write_cell(root, "t1", RAW)
    write_cell(root, "t1", NONE)
    assert "mergeable_few_reps" not in codes(build_report(load_batch(root)).warnings)


def styled_batch(root: Path) -> Path:
    """Both arms of one task, run with its spec prompt and with its issue prompt: the spec prompt names the
    fix (every arm passes), the issue prompt does not (only the guidance helps)."""
    write_pin(root)
    for style, none_passes in (("spec", True), ("issue", False)):
        for rep in range(2):
            common = {"prompt_style": style, "prompt_variant": style}
            write_cell(root, "t1", NONE, rep=rep, passed=none_passes, **common)
            write_cell(root, "t1", RAW, rep=rep, passed=True, **common)
    return root


def test_rows_of_different_prompt_styles_are_split_in_the_text_report_and_in_compare(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    batch = styled_batch(tmp_path / "styled")
    report = build_report(load_batch(batch))
    rows = {(r.arm, r.prompt_style): (r.passes, r.gated) for r in report.rows}
    assert rows == {
        (NONE, "issue"): (0, 2),
        (NONE, "spec"): (2, 2),
        (RAW, "issue"): (2, 2),
        (RAW, "spec"): (2, 2),
    }
    monkeypatch.setenv("COLUMNS", "300")
    assert main(["repo", "report", str(batch)]) == 0
    text = capsys.readouterr().out
    for table in text.split("\n\n")[1:4]:  # per task and arm, per arm, reliability: a prompt column each
        header = next(line for line in table.splitlines() if line.startswith(("task ", "arm ")))
        assert "prompt" in header.split() and " issue " in table and " spec " in table, table

    doc = compare([str(batch)], NONE)
    gates = {c.prompt_style: next(m for m in c.measures if m.kind == "gate").delta for c in doc.comparisons}
    assert gates == {"issue": 1.0, "spec": 0.0}  # pooled, the guidance would seem to help half as much
    assert main(["repo", "compare", str(batch), "--baseline", NONE, "--json"]) == 0
    assert {c["prompt_style"] for c in json.loads(capsys.readouterr().out)["comparisons"]} == {
        "issue",
        "spec",
    }
    assert main(["repo", "compare", str(batch), "--baseline", NONE]) == 0
    assert ", prompt issue" in capsys.readouterr().out
