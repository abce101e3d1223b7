"""repo report over literal batch directories: numbers, cell statuses, effort and mode, cutoff, warnings."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from statsmodels.stats.inter_rater import cohens_kappa
from statsmodels.stats.proportion import proportion_confint

from dokimi.analysis.report import Cutoff, build_report, cutoff_side, parse_cutoffs
from dokimi.batch import load_batch
from dokimi.errors import UsageError
from dokimi.schemas.report import ReportDoc, ReportRow
from tests.helpers.batches import start_cell, write_cell, write_json, write_pin, write_plan

NONE, RAW = "guidance:none", "guidance:raw"


def report(batch: Path, *cutoffs: str) -> ReportDoc:
    return build_report(load_batch(batch), cutoffs=parse_cutoffs(list(cutoffs)))


def row(doc: ReportDoc, task: str, arm: str, **dims: object) -> ReportRow:
    found = [
        r
        for r in doc.rows
        if r.task == task and r.arm == arm and all(getattr(r, k) == v for k, v in dims.items())
    ]
    assert len(found) == 1, [r.model_dump() for r in doc.rows]
    return found[0]


def codes(doc: ReportDoc) -> list[str]:
    return [w.code for w in doc.warnings]


def test_passes_over_finished_cells_with_a_wilson_interval(tmp_path: Path) -> None:
    write_pin(tmp_path)
    write_plan(tmp_path, [("t1", RAW, "m1", None, r) for r in range(4)])
    for rep, passed in enumerate([True, True, False, True]):
        write_cell(tmp_path, "t1", RAW, rep=rep, passed=passed, cost_usd=0.25 * (rep + 1), turns=rep + 2)
    r = row(report(tmp_path), "t1", RAW)
    assert (r.finished, r.gated, r.passes, r.missing, r.invalid) == (4, 4, 3, 0, 0)
    assert r.pass_rate == 0.75
    assert r.pass_ci == pytest.approx(proportion_confint(3, 4, method="wilson"))
    assert r.cost_mean == pytest.approx((0.25 + 0.5 + 0.75 + 1.0) / 4)
    assert r.turns_mean == pytest.approx(3.5)
    assert (r.cost_n, r.turns_n) == (4, 4)


def test_a_grader_failure_counts_as_a_failure_and_is_shown(tmp_path: Path) -> None:
    write_cell(tmp_path, "t1", RAW, rep=0, passed=True)
    write_cell(tmp_path, "t1", RAW, rep=1, grader_failure=True)
    r = row(report(tmp_path), "t1", RAW)
    assert (r.finished, r.gated, r.passes, r.grader_failures) == (2, 2, 1, 1)
    assert r.pass_rate == 0.5


def test_missing_cells_are_not_failures(tmp_path: Path) -> None:
    write_plan(tmp_path, [("t1", RAW, "m1", None, r) for r in range(3)])
    write_cell(tmp_path, "t1", RAW, rep=0, passed=True)
    start_cell(tmp_path, "t1", RAW, rep=1)  # started, killed before result.json
    # rep2 never started
    doc = report(tmp_path)
    r = row(doc, "t1", RAW)
    assert (r.finished, r.gated, r.passes, r.missing) == (1, 1, 1, 2)
    assert r.pass_rate == 1.0
    assert [c.cell for c in doc.missing_cells] == [
        "t1/guidance_raw/m1/default/rep1",
        "t1/guidance_raw/m1/default/rep2",
    ]
    assert doc.counts.missing == 2 and doc.counts.finished == 1


def test_invalid_cells_are_listed_with_the_reason_and_not_counted(tmp_path: Path) -> None:
    write_cell(tmp_path, "t1", RAW, rep=0, passed=True)
    bad = write_cell(tmp_path, "t1", RAW, rep=1, passed=True)
    write_json(bad / "result.json", {"schema": "repo_result.v1", "task": "t1", "arm": RAW})
    doc = report(tmp_path)
    r = row(doc, "t1", RAW)
    assert (r.finished, r.passes, r.invalid, r.missing) == (1, 1, 1, 0)
    assert doc.invalid_cells[0].cell == "t1/guidance_raw/m1/default/rep1"
    assert "required key is missing" in (doc.invalid_cells[0].error or "")
    assert "invalid_cells" in codes(doc)


def test_a_missing_cell_lands_in_the_row_of_its_task_mode(tmp_path: Path) -> None:
    write_plan(tmp_path, [("t1", RAW, "m1", None, 0), ("t1", RAW, "m1", None, 1)])
    write_cell(tmp_path, "t1", RAW, rep=0, mode="review")
    doc = report(tmp_path)
    assert len(doc.rows) == 1
    assert (doc.rows[0].mode, doc.rows[0].missing) == ("review", 1)


def test_effort_is_never_pooled(tmp_path: Path) -> None:
    write_cell(tmp_path, "t1", RAW, rep=0, effort=None, passed=False)
    write_cell(tmp_path, "t1", RAW, rep=0, effort="high", passed=True)
    write_cell(tmp_path, "t1", RAW, rep=1, effort="high", passed=True)
    doc = report(tmp_path)
    assert (row(doc, "t1", RAW, effort=None).passes, row(doc, "t1", RAW, effort=None).gated) == (0, 1)
    assert (row(doc, "t1", RAW, effort="high").passes, row(doc, "t1", RAW, effort="high").gated) == (2, 2)
    assert sorted((a.effort or "", a.gated) for a in doc.arms) == [("", 1), ("high", 2)]


def test_mode_is_never_pooled(tmp_path: Path) -> None:
    write_cell(tmp_path, "t1", RAW, rep=0, mode="interactive", passed=True)
    write_cell(tmp_path, "t1", RAW, rep=1, mode="autonomous", passed=False)
    doc = report(tmp_path)
    assert row(doc, "t1", RAW, mode="interactive").passes == 1
    assert row(doc, "t1", RAW, mode="autonomous").passes == 0
    assert len(doc.arms) == 2


def test_score_only_tasks_report_the_mean_score_and_no_pass_rate(tmp_path: Path) -> None:
    write_cell(tmp_path, "rv", RAW, rep=0, passed=None, score=0.5)
    write_cell(tmp_path, "rv", RAW, rep=1, passed=None, score=1.0)
    write_cell(tmp_path, "rv", RAW, rep=2, passed=None, score=None, grader_failure=True)
    r = row(report(tmp_path), "rv", RAW)
    assert (r.gated, r.score_only, r.pass_rate, r.pass_ci, r.grader_failures) == (0, 3, None, None, 1)
    assert r.score_mean == pytest.approx(0.5)  # the grader failure scores 0: (0.5 + 1 + 0) / 3


def test_arm_summary_pools_tasks_but_also_gives_the_task_mean(tmp_path: Path) -> None:
    for rep in range(3):
        write_cell(tmp_path, "t1", RAW, rep=rep, passed=True)
    write_cell(tmp_path, "t2", RAW, rep=0, passed=False)
    (arm,) = report(tmp_path).arms
    assert (arm.tasks, arm.gated, arm.passes) == (2, 4, 3)
    assert arm.pass_rate == 0.75
    assert arm.task_pass_mean == 0.5


def test_cutoff_splits_rows_by_base_date(tmp_path: Path) -> None:
    write_cell(tmp_path, "old", RAW, passed=True, base_date="2024-01-31T23:30:00-02:00")  # Feb 1 in UTC
    write_cell(tmp_path, "new", RAW, passed=False, base_date="2024-03-01T00:00:00+00:00")
    write_cell(tmp_path, "old", RAW, model="m2", passed=True, base_date="2024-01-31T23:30:00-02:00")
    doc = report(tmp_path, "m1=2024-02")
    assert row(doc, "old", RAW, model="m1").cutoff == "before"
    assert row(doc, "new", RAW, model="m1").cutoff == "after"
    assert row(doc, "old", RAW, model="m2").cutoff is None  # no cutoff given for m2
    m1 = {a.cutoff: (a.passes, a.gated) for a in doc.arms if a.model == "m1"}
    assert m1 == {"before": (1, 1), "after": (0, 1)}
    assert doc.cutoffs == {"m1": "2024-02"}


def test_cutoff_reads_the_base_date_from_meta_when_result_lacks_it(tmp_path: Path) -> None:
    write_cell(
        tmp_path, "t1", RAW, base_date=None, meta=True, meta_overrides={"base_date": "2023-05-05T00:00:00Z"}
    )
    write_cell(tmp_path, "t2", RAW, base_date=None)
    doc = report(tmp_path, "m1=2024-01-01")
    assert row(doc, "t1", RAW).cutoff == "before"
    assert row(doc, "t2", RAW).cutoff == "unknown"
    assert "cutoff_unknown_base_date" in codes(doc)


def test_a_cutoff_for_a_model_the_batch_lacks_is_warned(tmp_path: Path) -> None:
    write_cell(tmp_path, "t1", RAW)
    assert "cutoff_model_absent" in codes(report(tmp_path, "other=2024-01-01"))


@pytest.mark.parametrize(
    ("cutoff", "base", "side"),
    [
        ("2024-02", "2024-02-29T23:59:59+00:00", "before"),
        ("2024-02", "2024-03-01T00:00:00+00:00", "after"),
        ("2024-02-10", "2024-02-10T23:00:00+00:00", "before"),
        ("2024-02-10", "2024-02-11T00:00:00+01:00", "before"),  # 23:00 UTC on the 10th
        ("2024-02-10T12:00:00+00:00", "2024-02-10T12:00:01+00:00", "after"),
        ("2024-02-10", "not a date", "unknown"),
    ],
)
def test_cutoff_side_is_on_or_before_the_named_period(cutoff: str, base: str, side: str) -> None:
    assert cutoff_side(base, Cutoff.parse(cutoff)) == side


@pytest.mark.parametrize("bad", ["m1", "=2024-01-01", "m1=", "m1=yesterday", "m1=2024-13"])
def test_a_malformed_cutoff_is_a_usage_error(bad: str) -> None:
    with pytest.raises(UsageError):
        parse_cutoffs([bad])


def test_a_model_given_two_cutoffs_is_refused() -> None:
    with pytest.raises(UsageError, match="twice"):
        parse_cutoffs(["m=2024-01", "m=2024-02"])


def test_a_model_id_with_equals_signs_keeps_them() -> None:
    assert list(parse_cutoffs(["a=b=2024-01-01"])) == ["a=b"]


def test_agent_network_is_warned(tmp_path: Path) -> None:
    write_pin(tmp_path)
    write_cell(tmp_path, "t1", RAW, rep=0, agent_network="host")
    write_cell(tmp_path, "t1", RAW, rep=1, agent_network="host")
    doc = report(tmp_path)
    (warning,) = [w for w in doc.warnings if w.code == "agent_network"]
    assert "2 cell(s)" in warning.message and "host" in warning.message


def test_mixed_harness_versions_are_warned(tmp_path: Path) -> None:
    write_cell(tmp_path, "t1", RAW, rep=0, harness_version="2.1.328")
    write_cell(tmp_path, "t1", RAW, rep=1, harness_version="2.1.330")
    doc = report(tmp_path)
    assert "mixed_harness_versions" in codes(doc)
    assert row(doc, "t1", RAW).harness_versions == ["claude-code 2.1.328", "claude-code 2.1.330"]


def test_one_harness_version_and_a_pin_and_plan_give_no_warning(tmp_path: Path) -> None:
    write_pin(tmp_path)
    write_plan(tmp_path, [("t1", RAW, "m1", None, 0)])
    write_cell(tmp_path, "t1", RAW)
    assert codes(report(tmp_path)) == []


def test_no_pin_and_no_plan_are_warned(tmp_path: Path) -> None:
    write_cell(tmp_path, "t1", RAW)
    assert codes(report(tmp_path)) == ["no_pin", "no_plan"]


def test_the_document_is_deterministic_and_sorted(tmp_path: Path) -> None:
    write_cell(tmp_path, "t2", RAW)
    write_cell(tmp_path, "t1", NONE)
    write_cell(tmp_path, "t1", RAW, effort="low")
    write_cell(tmp_path, "t1", RAW)
    first = report(tmp_path).model_dump_json()
    assert first == report(tmp_path).model_dump_json()
    doc = report(tmp_path)
    assert [(r.task, r.arm, r.effort) for r in doc.rows] == [
        ("t1", NONE, None),
        ("t1", RAW, None),
        ("t1", RAW, "low"),
        ("t2", RAW, None),
    ]


def test_mergeable_rate_and_merge_score_when_cells_report_them(tmp_path: Path) -> None:
    write_cell(tmp_path, "t1", RAW, rep=0, metrics={"mergeable": True, "merge_score": 0.9})
    write_cell(tmp_path, "t1", RAW, rep=1, metrics={"mergeable": True, "merge_score": 0.7})
    write_cell(tmp_path, "t1", RAW, rep=2, metrics={"mergeable": False, "merge_score": 0.2})
    write_cell(tmp_path, "t1", RAW, rep=3, grader_failure=True)  # reports nothing: not mergeable
    write_cell(tmp_path, "t1", RAW, rep=4, metrics={"mergeable": None})  # not judged: left out
    r = row(report(tmp_path), "t1", RAW)
    assert (r.mergeable, r.mergeable_n) == (2, 4)
    assert r.mergeable_ci == pytest.approx(proportion_confint(2, 4, method="wilson"))
    assert r.merge_score_mean == pytest.approx(0.8)  # among mergeable cells only


def _merge_json(
    cell: Path,
    mergeable: bool | None,
    failed: list[str],
    failure: str | None = None,
    second: bool | None = None,
) -> None:
    items = [{"id": b, "kind": "blocker", "verdict": "fail" if b in failed else "pass"} for b in ("B1", "B2")]
    judge = {"model": "m", "items": items, "failure": failure, "not_measured": []}
    other = None if second is None else {"model": "other-1", "items": [], "mergeable": second}
    doc = {"schema": "repo_merge.v1", "mergeable": mergeable, "merge_score": None, "reasons": [],
           "scope": None, "integrity": None, "judge": judge, "second_judge": other}  # fmt: skip
    write_json(cell / "merge.json", doc)


def test_mergeable_stands_beside_the_test_pass_gate_with_the_failed_blockers_and_judge_failures(
    tmp_path: Path,
) -> None:
    gate = {"pass": True, "mergeable": True}
    for rep, (mergeable, failed) in enumerate([(True, []), (False, ["B1"]), (False, ["B1", "B2"])]):
        cell = write_cell(tmp_path, "t1", RAW, rep=rep, metrics={"mergeable": mergeable},
                          gate_results={**gate, "mergeable": mergeable}, passed=mergeable)  # fmt: skip
        _merge_json(cell, mergeable, failed)
    judged_badly = write_cell(tmp_path, "t1", RAW, rep=3, metrics={"mergeable": None},
                              gate_results={**gate, "mergeable": None}, passed=False)  # fmt: skip
    _merge_json(judged_badly, None, [], failure="the reply covers B1 only")
    r = row(report(tmp_path), "t1", RAW)
    assert (r.mergeable, r.mergeable_n, r.test_passes, r.gated) == (1, 3, 4, 4)
    assert r.test_pass_rate == 1.0 and r.mergeable_gap == pytest.approx(2 / 3)
    assert r.failed_blockers == {"B1": 2, "B2": 1} and r.judge_failures == 1
    assert r.rubric_provisional is None  # no exported eval dir: the rubric's status is unknown


def test_a_second_judge_gives_the_judges_kappa_and_their_disagreements(tmp_path: Path) -> None:
    verdicts = [(True, True), (True, True), (False, False), (False, True)]
    for rep, (primary, second) in enumerate(verdicts):
        cell = write_cell(tmp_path, "t1", RAW, rep=rep, metrics={"mergeable": primary})
        _merge_json(cell, primary, [], second=second)
    doc = report(tmp_path)
    r = row(doc, "t1", RAW)
    assert r.judges_both == 4 and r.mergeable == 2  # the second judge never changes the score
    assert doc.judge_agreement is not None and doc.judge_agreement.second_model == "other-1"
    # observed agreement 3/4, chance 1/2 (primary) x 3/4 (second) + 1/2 x 1/4 = 1/2: kappa 0.5
    assert doc.judge_agreement.kappa_mergeable == pytest.approx(0.5) == r.judges_kappa
    assert [c.split("/")[-1] for c in doc.judge_agreement.disagreements] == ["rep3"]


def test_no_mergeable_rate_without_a_judged_cell(tmp_path: Path) -> None:
    write_cell(tmp_path, "t1", RAW, rep=0, grader_failure=True)
    r = row(report(tmp_path), "t1", RAW)
    assert (r.mergeable_n, r.mergeable_rate) == (0, None)


def _two_judges(
    cell: Path, primary: dict[str, str], second: dict[str, str], *, failure: str | None = None
) -> None:
    """merge.json of a cell both judges judged: their blocker verdicts, each mergeable when none fails."""

    def verdict(model: str, verdicts: dict[str, str]) -> dict[str, Any]:
        items = [{"id": b, "kind": "blocker", "verdict": v} for b, v in verdicts.items()]
        return {"model": model, "items": items, "failure": None, "not_measured": []}

    first_ok = "fail" not in primary.values()
    other = {**verdict("other-1", second), "mergeable": "fail" not in second.values(), "failure": failure}
    if failure is not None:
        other.update(items=[], mergeable=None)
    doc = {"schema": "repo_merge.v1", "mergeable": first_ok, "merge_score": None, "reasons": [],
           "scope": None, "integrity": None, "judge": verdict("m", primary),
           "second_judge": other}  # fmt: skip
    write_json(cell / "merge.json", doc)


def test_the_judges_kappa_per_blocker_with_the_cells_they_disagree_on(tmp_path: Path) -> None:
    """Checked by issue 26: kappa per blocker item, with a figure worked by hand.

    B1 over six cells (primary, second): pp pp pf ff ff fp. Observed agreement 4/6; each judge says pass 3/6,
    so chance agreement is 1/2 x 1/2 + 1/2 x 1/2 = 1/2; kappa = (2/3 - 1/2) / (1 - 1/2) = 1/3.
    B2: pp pp pp pp ff pf. Observed 5/6; the primary says pass 5/6, the second 4/6: chance 5/6 x 4/6 + 1/6 x
    2/6 = 22/36; kappa = (30/36 - 22/36) / (14/36) = 4/7.
    Pooled, twelve verdicts: observed 9/12; the primary says pass 8/12, the second 7/12: chance 8/12 x 7/12 +
    4/12 x 5/12 = 76/144; kappa = (108/144 - 76/144) / (68/144) = 8/17.
    Mergeable (no blocker fails): primary TTTFFF, second TTFFFF: observed 5/6, chance 1/2; kappa 2/3.
    A seventh cell whose second judge failed counts nowhere.
    """
    b1 = ["pp", "pp", "pf", "ff", "ff", "fp"]
    b2 = ["pp", "pp", "pp", "pp", "ff", "pf"]
    word = {"p": "pass", "f": "fail"}
    for rep, (one, two) in enumerate(zip(b1, b2, strict=True)):
        primary = {"B1": word[one[0]], "B2": word[two[0]]}
        cell = write_cell(tmp_path, "t1", RAW, rep=rep, metrics={"mergeable": "fail" not in primary.values()})
        _two_judges(cell, primary, {"B1": word[one[1]], "B2": word[two[1]]})
    failed_second = write_cell(tmp_path, "t1", RAW, rep=6, metrics={"mergeable": True})
    _two_judges(failed_second, {"B1": "pass", "B2": "pass"}, {}, failure="no verdict marker")
    agreement = report(tmp_path).judge_agreement
    assert agreement is not None
    assert agreement.kappa_mergeable == pytest.approx(2 / 3) and agreement.cells == 6
    assert agreement.blocker_items == 12 and agreement.kappa_blockers == pytest.approx(8 / 17)
    (first, second) = agreement.blockers
    assert (first.task, first.blocker, first.cells, first.agreed) == ("t1", "B1", 6, 4)
    assert first.kappa == pytest.approx(1 / 3)
    assert [d.split("/")[-1] for d in first.disagreements] == ["rep2: pass vs fail", "rep5: fail vs pass"]
    assert (second.blocker, second.cells, second.agreed) == ("B2", 6, 5)
    assert second.kappa == pytest.approx(4 / 7)
    assert [d.split("/")[-1] for d in second.disagreements] == ["rep5: pass vs fail"]
    table = [[sum(1 for p in b1 if p == a + b) for b in "pf"] for a in "pf"]  # rows primary, columns second
    assert cohens_kappa(table).kappa == pytest.approx(first.kappa)
