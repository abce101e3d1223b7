"""infra_error cells (the model's API failed them): in no rate or comparison, counted per arm, rerun like
missing cells. Literal batches, no runner."""

from __future__ import annotations

from pathlib import Path

import pytest
from pydantic import ValidationError

from dokimi.analysis.compare import compare
from dokimi.analysis.report import build_report
from dokimi.batch import CellKey, load_batch
from dokimi.cli.main import main
from dokimi.runner.run import finished_result
from dokimi.schemas.result import Result
from tests.helpers.batches import write_cell, write_pin

NONE, RAW = "guidance:none", "guidance:raw"
INFRA = {
    "infra_error": True,
    "infra_error_reason": "the model API answered only errors (11x 529); the harness exited 1",
    "passed": False,
}


def clean_batch(batch: Path) -> None:
    write_pin(batch)
    for task, none, raw in [("t1", False, True), ("t2", True, True), ("t3", False, False)]:
        write_cell(batch, task, NONE, passed=none, cost_usd=0.5)
        write_cell(batch, task, RAW, passed=raw, cost_usd=0.5)


def test_infra_error_cells_are_counted_apart_and_in_no_rate(tmp_path: Path) -> None:
    batch = tmp_path / "b"
    clean_batch(batch)
    write_cell(batch, "t1", RAW, rep=1, egress_refused=2, **INFRA)
    write_cell(batch, "t2", RAW, rep=1, **INFRA)
    report = build_report(load_batch(batch))
    assert (report.counts.finished, report.counts.infra_errors) == (6, 2)
    raw = next(a for a in report.arms if a.arm == RAW)
    assert (raw.finished, raw.gated, raw.passes, raw.infra_errors, raw.egress_refused) == (3, 3, 2, 2, 2)
    assert raw.grader_failures == 0
    row = next(r for r in report.rows if (r.task, r.arm) == ("t1", RAW))
    assert (row.finished, row.passes, row.pass_rate, row.infra_errors) == (1, 1, 1.0, 1)


@pytest.mark.slow
def test_a_compare_with_infra_errors_equals_one_of_a_batch_that_never_had_them(tmp_path: Path) -> None:
    clean, noisy = tmp_path / "clean", tmp_path / "noisy"
    clean_batch(clean)
    clean_batch(noisy)
    for task in ("t1", "t2", "t3"):
        write_cell(noisy, task, RAW, rep=1, **INFRA)
        write_cell(noisy, task, NONE, rep=1, **INFRA)
    infra = {"infra_baseline", "infra_treatment", "infra_p"}
    a = compare([str(clean)], NONE).model_dump(exclude={"batches", "selectors"})
    b = compare([str(noisy)], NONE)
    (comparison,) = b.comparisons
    assert (comparison.infra_baseline, comparison.infra_treatment, comparison.infra_p) == (3, 3, 1.0)
    assert b.warnings == []  # the same outage in both arms: nothing to warn about
    dumped = b.model_dump(exclude={"batches": True, "selectors": True, "comparisons": {0: infra}})
    a["comparisons"][0] = {k: v for k, v in a["comparisons"][0].items() if k not in infra}
    assert a == dumped


@pytest.mark.slow
def test_compare_counts_infra_errors_per_arm_and_warns_when_one_arm_lost_more(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """An outage that hit one arm more leaves a biased sample of cells: Fisher's exact test (two-sided) on
    infra errors against finished cells, p < 0.05, names both arms."""
    batch = tmp_path / "b"
    write_pin(batch)
    for task in ("t1", "t2", "t3", "t4", "t5", "t6"):
        write_cell(batch, task, NONE, passed=False)
        write_cell(batch, task, RAW, passed=True)
        for rep in (1, 2):
            write_cell(batch, task, NONE, rep=rep, passed=False)
            write_cell(batch, task, RAW, rep=rep, **INFRA)
    doc = compare([str(batch)], NONE)
    (comparison,) = doc.comparisons
    assert (comparison.infra_treatment, comparison.cells_treatment) == (12, 6)
    assert (comparison.infra_baseline, comparison.cells_baseline) == (0, 18)
    assert comparison.infra_p is not None and comparison.infra_p < 1e-4
    (warning,) = [w for w in doc.warnings if w.code == "infra_rate_differs"]
    assert (
        "guidance:raw lost 12 of 18 cells" in warning.message and "guidance:none 0 of 18" in warning.message
    )
    assert main(["repo", "compare", str(batch), "--baseline", NONE]) == 0
    out, err = capsys.readouterr()
    assert "infra errors (the model's API failed them; in no measure)" in " ".join(out.split())
    assert "infra_rate_differs" in err


def test_a_cell_that_got_no_model_answer_by_its_own_doing_is_a_counted_failure(tmp_path: Path) -> None:
    batch = tmp_path / "b"
    clean_batch(batch)
    refused = (
        "the model API refused the agent's request as invalid (400: prompt is too long); the harness exited 1"
    )
    write_cell(batch, "t1", RAW, rep=1, passed=False, no_model_answer=refused)
    report = build_report(load_batch(batch))
    raw = next(a for a in report.arms if a.arm == RAW)
    assert (raw.finished, raw.passes, raw.no_model_answer, raw.infra_errors) == (4, 2, 1, 0)
    assert report.counts.infra_errors == 0


def test_an_infra_error_cell_is_not_done_so_a_rerun_runs_it(tmp_path: Path) -> None:
    batch = tmp_path / "b"
    write_pin(batch)
    write_cell(batch, "t1", RAW, rep=0)
    write_cell(batch, "t1", RAW, rep=1, **INFRA)
    assert finished_result(batch, CellKey("t1", RAW, "m1", None, 0)) is not None
    assert finished_result(batch, CellKey("t1", RAW, "m1", None, 1)) is None
    assert [c.rel for c in load_batch(batch).infra_errors()] == ["t1/guidance_raw/m1/default/rep1"]


def test_an_infra_error_says_why_and_never_passes() -> None:
    base = {
        "schema": "repo_result.v1", "task": "t", "arm": RAW, "model": "m", "rep": 0, "harness": "h",
        "family": "fix", "gated": True, "duration_s": 1.0,
    }  # fmt: skip
    with pytest.raises(ValidationError, match="infra_error_reason must say why"):
        Result.model_validate({**base, "passed": False, "infra_error": True})
    with pytest.raises(ValidationError, match="cannot pass"):
        Result.model_validate({**base, **INFRA, "passed": True})
