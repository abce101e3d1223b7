"""rate import, adjudicate and summary: file:line errors, leaks set aside, adjudicator conflicts, kappa and
rates against hand-computed values, the RFR reading."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from dokimi.errors import DocumentError, UsageError
from dokimi.rating.scores import adjudicate, import_ratings, read_key, stored_scores
from dokimi.rating.summary import regression_free, summary
from dokimi.schemas._base import write_document
from dokimi.schemas.rating import KeyEntry, RatingKey, RatingResult

OUTCOMES = (
    "passed",
    "validation_passed",
    "human_accepted",
    "regression",
    "rework_required",
    "requirements_traceability",
)


def entry(arm: str, *, hidden: bool | None = True, status: str = "blinded") -> KeyEntry:
    return KeyEntry(
        cell=f"t/{arm}/m/default/rep0",
        task="t",
        arm=arm,
        model="m",
        effort=None,
        rep=0,
        harness="claude-code",
        harness_version=None,
        hidden_validation_passed=hidden,
        status=status,
    )  # type: ignore[arg-type]


def make_key(tmp_path: Path, artifacts: dict[str, KeyEntry]) -> Path:
    path = tmp_path / "key.json"
    write_document(
        path,
        RatingKey(schema="repo_rating_key.v1", batch="/b", out=str(tmp_path), seed=1, artifacts=artifacts),
    )
    return path


def row(run_id: str, rater: str, *, true: tuple[str, ...] = (), **extra: Any) -> dict[str, Any]:
    doc: dict[str, Any] = {
        "schema": "repo_rating.v1",
        "run_id": run_id,
        "rater": rater,
        "notes": f"{rater} on {run_id}",
    }
    doc.update({o: o in true for o in OUTCOMES})
    doc.update(extra)
    return doc


def jsonl(path: Path, rows: list[dict[str, Any]]) -> Path:
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return path


def adj(run_id: str, adjudicator: str, *, true: tuple[str, ...] = ()) -> dict[str, Any]:
    doc: dict[str, Any] = {
        "schema": "repo_adjudication.v1",
        "run_id": run_id,
        "adjudicator": adjudicator,
        "adjudicated": True,
        "adjudication_notes": "read both",
    }
    doc.update({o: o in true for o in OUTCOMES})
    return doc


# --- import -----------------------------------------------------------------------------------------------


def test_a_row_missing_an_outcome_is_an_error_with_its_line(tmp_path: Path) -> None:
    key = make_key(tmp_path, {"r1": entry("a"), "r2": entry("a")})
    bad = row("r2", "x")
    del bad["regression"]
    ratings = jsonl(tmp_path / "x.jsonl", [row("r1", "x"), bad])
    with pytest.raises(DocumentError) as info:
        import_ratings([ratings], key)
    assert info.value.path == str(ratings) and info.value.line == 2
    assert "regression" in str(info.value)
    assert not (tmp_path / "raters.jsonl").exists()


def test_invalid_json_and_unknown_ids_and_unknown_keys_name_the_line(tmp_path: Path) -> None:
    key = make_key(tmp_path, {"r1": entry("a")})
    broken = tmp_path / "b.jsonl"
    broken.write_text(json.dumps(row("r1", "x")) + "\n\n{not json\n")
    with pytest.raises(DocumentError) as info:
        import_ratings([broken], key)
    assert info.value.line == 3
    unknown = jsonl(tmp_path / "u.jsonl", [row("r9", "x")])
    with pytest.raises(DocumentError, match="r9") as info:
        import_ratings([unknown], key)
    assert info.value.line == 1
    extra = jsonl(tmp_path / "e.jsonl", [row("r1", "x", arm="guidance:raw")])
    with pytest.raises(DocumentError, match="unknown key") as info:
        import_ratings([extra], key)
    assert info.value.line == 1 and info.value.key == "arm"


def test_importing_the_same_rows_twice_changes_nothing_and_a_different_row_needs_replace(
    tmp_path: Path,
) -> None:
    key = make_key(tmp_path, {"r1": entry("a")})
    first = jsonl(tmp_path / "x.jsonl", [row("r1", "x")])
    assert import_ratings([first], key).imported == 1
    assert import_ratings([first], key).unchanged == 1
    changed = jsonl(tmp_path / "x2.jsonl", [row("r1", "x", true=("passed",))])
    with pytest.raises(DocumentError, match="--replace"):
        import_ratings([changed], key)
    import_ratings([changed], key, replace=True)
    assert [s.passed for s in stored_scores(tmp_path)] == [True]


def test_a_rater_scoring_a_run_twice_in_one_import_is_refused(tmp_path: Path) -> None:
    key = make_key(tmp_path, {"r1": entry("a")})
    twice = jsonl(tmp_path / "x.jsonl", [row("r1", "x"), row("r1", "x", true=("passed",))])
    with pytest.raises(DocumentError, match="twice") as info:
        import_ratings([twice], key)
    assert info.value.line == 2


def test_a_withheld_artifact_cannot_be_scored(tmp_path: Path) -> None:
    key = make_key(tmp_path, {"r1": entry("a", status="withheld")})
    with pytest.raises(DocumentError, match="withheld"):
        import_ratings([jsonl(tmp_path / "x.jsonl", [row("r1", "x")])], key)


def test_a_blinding_leak_sets_the_run_aside_and_keeps_it_out_of_results(tmp_path: Path) -> None:
    key = make_key(tmp_path, {"r1": entry("a"), "r2": entry("a")})
    leak = {"schema": "repo_rating.v1", "run_id": "r1", "rater": "x", "blinding_leak": "'## Phase 1' heading"}
    report = import_ratings(
        [
            jsonl(tmp_path / "x.jsonl", [leak, row("r2", "x")]),
            jsonl(tmp_path / "y.jsonl", [row("r1", "y"), row("r2", "y")]),
        ],
        key,
    )
    assert [r.run_id for r in report.leaks] == ["r1"]
    results = adjudicate([], key).results
    assert [r.run_id for r in results.final] == ["r2"]
    assert [(e.run_id, e.reason) for e in results.excluded] == [("r1", "blinding_leak")]
    doc = summary(key)
    assert doc.blinding_leaks == 1 and [e.run_id for e in doc.excluded] == ["r1"]
    assert doc.excluded[0].detail == "x: '## Phase 1' heading"
    assert all(r.n == 1 for r in doc.rates)
    assert {k.n for k in doc.kappa} == {1}  # the leaked run is not in kappa either


# --- adjudicate -------------------------------------------------------------------------------------------


def two_raters(tmp_path: Path) -> Path:
    key = make_key(tmp_path, {"r1": entry("a"), "r2": entry("a"), "r3": entry("b")})
    import_ratings(
        [
            jsonl(
                tmp_path / "x.jsonl",
                [
                    row("r1", "x", true=("passed", "human_accepted")),
                    row("r2", "x"),
                    row("r3", "x", true=("regression",)),
                ],
            ),
            jsonl(
                tmp_path / "y.jsonl",
                [
                    row("r1", "y", true=("passed",)),
                    row("r2", "y"),
                    row("r3", "y", true=("regression", "rework_required")),
                ],
            ),
        ],
        key,
    )
    return key


def test_adjudicate_lists_disagreements_per_outcome_and_writes_only_final_runs(tmp_path: Path) -> None:
    key = two_raters(tmp_path)
    report = adjudicate([], key)
    assert {d.run_id: [str(o) for o in d.outcomes] for d in report.results.disagreements} == {
        "r1": ["human_accepted"],
        "r3": ["rework_required"],
    }
    assert report.results.pending == ["r1", "r3"]
    written = [json.loads(line) for line in (tmp_path / "results.jsonl").read_text().splitlines()]
    assert [(r["run_id"], r["adjudicated"], r["raters"]) for r in written] == [("r2", False, ["x", "y"])]


def test_an_adjudicator_who_rated_the_run_is_refused(tmp_path: Path) -> None:
    key = two_raters(tmp_path)
    rows = jsonl(tmp_path / "adj.jsonl", [adj("r3", "z", true=("regression",)), adj("r1", "x")])
    with pytest.raises(DocumentError, match="may not adjudicate") as info:
        adjudicate([rows], key)
    assert info.value.line == 2 and info.value.key == "adjudicator"
    assert not (tmp_path / "adjudications.jsonl").exists()


def test_adjudicating_a_run_the_raters_agree_on_is_refused(tmp_path: Path) -> None:
    key = two_raters(tmp_path)
    with pytest.raises(DocumentError, match="do not disagree"):
        adjudicate([jsonl(tmp_path / "adj.jsonl", [adj("r2", "z")])], key)


def test_adjudicated_rows_are_marked_and_both_raters_rows_stay_for_kappa(tmp_path: Path) -> None:
    key = two_raters(tmp_path)
    report = adjudicate(
        [
            jsonl(
                tmp_path / "adj.jsonl",
                [adj("r1", "z", true=("passed", "human_accepted")), adj("r3", "z", true=("regression",))],
            )
        ],
        key,
    )
    assert report.added == 2 and report.results.pending == []
    written = {r["run_id"]: r for r in map(json.loads, (tmp_path / "results.jsonl").read_text().splitlines())}
    assert written["r1"]["adjudicated"] is True and written["r1"]["adjudicator"] == "z"
    assert written["r1"]["human_accepted"] is True and written["r1"]["adjudication_notes"] == "read both"
    assert written["r2"]["adjudicated"] is False
    for line in (tmp_path / "results.jsonl").read_text().splitlines():
        RatingResult.model_validate_json(line)
    assert len(stored_scores(tmp_path)) == 6
    assert adjudicate([], key).results.pending == []  # adjudications persist


def test_adjudicate_without_imported_rows_is_a_usage_error(tmp_path: Path) -> None:
    key = make_key(tmp_path, {"r1": entry("a")})
    with pytest.raises(UsageError, match="import"):
        adjudicate([], key)


# --- summary ----------------------------------------------------------------------------------------------


def test_kappa_and_rates_match_hand_computed_values(tmp_path: Path) -> None:
    """passed: x = T T F F, y = T F F F. Observed agreement 3/4; chance = .5*.25 + .5*.75 = .5;
    kappa = (.75 - .5) / (1 - .5) = .5. Final passed (after adjudicating r2 false): 1 of 4 in arm a."""
    key = make_key(tmp_path, {f"r{i}": entry("a") for i in range(1, 5)})
    x = [row("r1", "x", true=("passed",)), row("r2", "x", true=("passed",)), row("r3", "x"), row("r4", "x")]
    y = [row("r1", "y", true=("passed",)), row("r2", "y"), row("r3", "y"), row("r4", "y")]
    import_ratings([jsonl(tmp_path / "x.jsonl", x), jsonl(tmp_path / "y.jsonl", y)], key)
    adjudicate([jsonl(tmp_path / "adj.jsonl", [adj("r2", "z")])], key)
    doc = summary(key)
    kappa = {k.outcome: k for k in doc.kappa}
    assert kappa["passed"].kappa == pytest.approx(0.5)
    assert kappa["passed"].agreement == pytest.approx(0.75) and kappa["passed"].n == 4
    assert kappa["regression"].kappa is None  # both always false: undefined
    rates = {r.outcome: r for r in doc.rates}
    assert (rates["passed"].k, rates["passed"].n) == (1, 4)
    # Wilson 95% for 1/4: centre (.25 + z^2/8) / (1 + z^2/4), half z*sqrt(.1875/4 + z^2/64) / (1 + z^2/4)
    assert rates["passed"].ci_low == pytest.approx(0.04559, abs=1e-4)
    assert rates["passed"].ci_high == pytest.approx(0.69936, abs=1e-4)
    assert (rates["rfr"].k, rates["rfr"].n) == (4, 4)
    assert doc.adjudicated == 1 and doc.final == 4


def test_rates_are_per_arm_through_the_key(tmp_path: Path) -> None:
    key = two_raters(tmp_path)
    adjudicate(
        [
            jsonl(
                tmp_path / "adj.jsonl",
                [adj("r1", "z", true=("passed",)), adj("r3", "z", true=("regression",))],
            )
        ],
        key,
    )
    doc = summary(key)
    passed = {r.arm: (r.k, r.n) for r in doc.rates if r.outcome == "passed"}
    regression = {r.arm: (r.k, r.n) for r in doc.rates if r.outcome == "regression"}
    assert passed == {"a": (1, 2), "b": (0, 1)}
    assert regression == {"a": (0, 2), "b": (1, 1)}


def test_rfr_needs_the_locked_checks_to_pass_when_the_run_has_them(tmp_path: Path) -> None:
    """RFR note: a locked-check failure makes a run not regression-free even when the human flag is false;
    a run without locked checks counts on the human flag alone."""
    base = {o: False for o in OUTCOMES}

    def result(regression: bool, hidden: bool | None) -> RatingResult:
        return RatingResult(
            schema="repo_rating_result.v1",
            run_id="r",
            raters=["x"],
            adjudicated=False,
            hidden_validation_passed=hidden,
            **{**base, "regression": regression},
        )

    assert regression_free(result(False, True)) is True
    assert regression_free(result(False, False)) is False
    assert regression_free(result(False, None)) is True
    assert regression_free(result(True, True)) is False
    assert regression_free(result(True, None)) is False
    key = make_key(
        tmp_path,
        {"r1": entry("a", hidden=False), "r2": entry("a", hidden=True), "r3": entry("a", hidden=None)},
    )
    import_ratings([jsonl(tmp_path / "x.jsonl", [row("r1", "x"), row("r2", "x"), row("r3", "x")])], key)
    rates = {r.outcome: r for r in summary(key).rates}
    assert (rates["rfr"].k, rates["rfr"].n) == (2, 3)
    assert (rates["regression"].k, rates["regression"].n) == (0, 3)


def test_withheld_runs_are_excluded_and_counted_apart_from_rater_leaks(tmp_path: Path) -> None:
    key = make_key(tmp_path, {"r1": entry("a"), "r2": entry("b", status="withheld")})
    import_ratings([jsonl(tmp_path / "x.jsonl", [row("r1", "x")])], key)
    doc = summary(key)
    assert (doc.withheld, doc.blinding_leaks) == (1, 0)
    assert [(e.run_id, e.reason, e.arm) for e in doc.excluded] == [("r2", "withheld", "b")]
    assert read_key(key).artifacts["r2"].status == "withheld"
