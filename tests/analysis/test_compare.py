"""repo compare over literal batches: the math on hand-computed cases, selectors, refusals, warnings."""

from __future__ import annotations

from pathlib import Path

import pytest
from statsmodels.stats.contingency_tables import mcnemar

from dokimi import stats
from dokimi.analysis.compare import compare
from dokimi.analysis.vendors import second_judge_of_another_family, vendor_of
from dokimi.errors import UsageError
from dokimi.schemas.compare import CompareDoc, Comparison, Measure
from tests.helpers.batches import SHA_B, write_cell, write_pin

NONE, RAW, BRIDGE = "guidance:none", "guidance:raw", "guidance:bridge"


def only(doc: CompareDoc, treatment: str | None = None, **dims: object) -> Comparison:
    found = [
        c
        for c in doc.comparisons
        if (treatment is None or c.treatment == treatment)
        and all(getattr(c, k) == v for k, v in dims.items())
    ]
    assert len(found) == 1, [(c.treatment, c.model, c.effort, c.mode) for c in doc.comparisons]
    return found[0]


def measure(comparison: Comparison, name: str) -> Measure:
    (found,) = [m for m in comparison.measures if m.name == name]
    return found


def codes(doc: CompareDoc) -> list[str]:
    return [w.code for w in doc.warnings]


def cells(batch: Path, task: str, arm: str, outcomes: list[bool | None], **kwargs: object) -> None:
    for rep, passed in enumerate(outcomes):
        write_cell(batch, task, arm, rep=rep, passed=passed, **kwargs)  # type: ignore[arg-type]


@pytest.fixture
def pilot(tmp_path: Path) -> Path:
    """Three tasks, two reps: per-task gate deltas +1, +0.5, -0.5; treatment costs 1.0 vs 0.5."""
    batch = tmp_path / "pilot"
    write_pin(batch)
    cells(batch, "t1", NONE, [False, False])
    cells(batch, "t1", RAW, [True, True], cost_usd=1.0)
    cells(batch, "t2", NONE, [True, False])
    cells(batch, "t2", RAW, [True, True], cost_usd=1.0)
    cells(batch, "t3", NONE, [True, True])
    cells(batch, "t3", RAW, [True, False], cost_usd=1.0)
    return batch


def test_gate_delta_is_the_mean_of_per_task_deltas(pilot: Path) -> None:
    doc = compare([str(pilot)], NONE)
    gate = measure(only(doc, RAW), "gate")
    assert gate.tasks == 3
    assert gate.delta == pytest.approx((1 + 0.5 - 0.5) / 3)
    assert (gate.baseline_mean, gate.treatment_mean) == pytest.approx((0.5, 2.5 / 3))
    assert (gate.up, gate.down, gate.tied) == (2, 1, 0)
    assert [(v.task, v.delta) for v in gate.per_task] == [("t1", 1.0), ("t2", 0.5), ("t3", -0.5)]
    # sign flips of [1, .5, -.5]: |sum| >= 1 in 6 of 8 assignments
    assert gate.p == pytest.approx(0.75)
    assert gate.interval == "bootstrap"
    assert gate.ci is not None and gate.delta is not None and gate.ci[0] <= gate.delta <= gate.ci[1]
    assert (gate.n_baseline, gate.n_treatment) == (6, 6)


def test_cost_uses_a_t_interval_and_is_descriptive(pilot: Path) -> None:
    cost = measure(only(compare([str(pilot)], NONE), RAW), "cost")
    assert cost.interval == "t"
    assert cost.delta == pytest.approx(0.5)
    assert cost.ci == pytest.approx((0.5, 0.5))  # every task moved by exactly 0.5
    assert cost.p == pytest.approx(2 / 8)
    assert cost.p_holm is None


def test_turns_t_interval_matches_a_hand_computation(tmp_path: Path) -> None:
    from scipy import stats as sp

    for task, (base, treat) in {"a": (10, 14), "b": (10, 11), "c": (10, 9)}.items():
        write_cell(tmp_path, task, NONE, turns=base)
        write_cell(tmp_path, task, RAW, turns=treat)
    turns = measure(only(compare([str(tmp_path)], NONE), RAW), "turns")
    deltas = [4, 1, -1]
    half = sp.t.ppf(0.975, 2) * sp.tstd(deltas) / 3**0.5
    assert turns.delta == pytest.approx(4 / 3)
    assert turns.ci == pytest.approx((4 / 3 - half, 4 / 3 + half))


def test_one_task_gives_no_interval(tmp_path: Path) -> None:
    write_cell(tmp_path, "t1", NONE, passed=False)
    write_cell(tmp_path, "t1", RAW, passed=True)
    comparison = only(compare([str(tmp_path)], NONE))
    assert measure(comparison, "gate").ci is None
    assert measure(comparison, "cost").ci is None
    assert measure(comparison, "gate").p == 1.0  # one changed task: both signs reach |1|


@pytest.mark.slow
def test_at_one_cell_per_task_and_arm_p_is_mcnemars_exact_test(tmp_path: Path) -> None:
    # 7 tasks only the treatment passes, 1 only the baseline, 2 both, 2 neither
    outcomes = [(False, True)] * 7 + [(True, False)] + [(True, True)] * 2 + [(False, False)] * 2
    for i, (base, treat) in enumerate(outcomes):
        write_cell(tmp_path, f"t{i:02}", NONE, passed=base)
        write_cell(tmp_path, f"t{i:02}", RAW, passed=treat)
    gate = measure(only(compare([str(tmp_path)], NONE)), "gate")
    assert gate.p == pytest.approx(mcnemar([[2, 1], [7, 2]], exact=True).pvalue)
    assert gate.p == pytest.approx(stats.mcnemar_exact(1, 7))
    assert (gate.up, gate.down, gate.tied) == (7, 1, 4)


@pytest.mark.slow
def test_holm_runs_over_the_gate_and_score_comparisons_of_one_call(tmp_path: Path) -> None:
    for i in range(6):
        write_cell(tmp_path, f"t{i}", NONE, passed=False)
        write_cell(tmp_path, f"t{i}", RAW, passed=True)
        write_cell(tmp_path, f"t{i}", BRIDGE, passed=i < 3)
    for i in range(4):
        write_cell(tmp_path, f"r{i}", NONE, passed=None, score=0.2)
        write_cell(tmp_path, f"r{i}", RAW, passed=None, score=0.2 + 0.1 * i)
        write_cell(tmp_path, f"r{i}", BRIDGE, passed=None, score=0.2)
    doc = compare([str(tmp_path)], NONE)
    family = [measure(c, name) for c in doc.comparisons for name in ("gate", "score")]
    assert doc.holm_family == 4
    expected = stats.holm([m.p for m in family if m.p is not None])
    assert [m.p_holm for m in family] == pytest.approx(expected)
    assert all(m.p_holm is None for c in doc.comparisons for m in c.measures if m.kind in ("cost", "turns"))
    raw_score = measure(only(doc, RAW), "score")
    assert raw_score.delta == pytest.approx((0 + 0.1 + 0.2 + 0.3) / 4)
    assert (raw_score.up, raw_score.tied) == (3, 1)
    assert measure(only(doc, BRIDGE), "score").p == 1.0  # every task tied


def test_unpaired_tasks_are_listed_with_the_reason(tmp_path: Path) -> None:
    write_cell(tmp_path, "both", NONE, passed=False)
    write_cell(tmp_path, "both", RAW, passed=True)
    write_cell(tmp_path, "only-base", NONE, passed=True)
    write_cell(tmp_path, "only-treat", RAW, passed=True)
    write_cell(tmp_path, "regated", NONE, passed=True)
    write_cell(tmp_path, "regated", RAW, passed=None, score=1.0)
    write_cell(tmp_path, "nocost", NONE, passed=True, cost_usd=None)
    write_cell(tmp_path, "nocost", RAW, passed=True)
    comparison = only(compare([str(tmp_path)], NONE))
    assert [(u.task, u.measure, u.reason) for u in comparison.unpaired] == [
        ("nocost", "cost", f"no cell of {NONE} reports cost"),
        ("only-base", "all", f"no finished cells in {RAW}"),
        ("only-treat", "all", f"no finished cells in {NONE}"),
        ("regated", "all", f"gated in {NONE} and score-only in {RAW}"),
    ]
    assert measure(comparison, "gate").tasks == 2  # both, nocost
    assert measure(comparison, "cost").tasks == 1  # both


def test_metrics_count_the_cells_that_report_them(tmp_path: Path) -> None:
    write_cell(tmp_path, "t1", NONE, rep=0, metrics={"root_cause_fixed": False, "diff_lines": 10})
    write_cell(tmp_path, "t1", NONE, rep=1, metrics={"root_cause_fixed": None, "diff_lines": 20})
    write_cell(tmp_path, "t1", RAW, rep=0, metrics={"root_cause_fixed": True, "diff_lines": 12})
    write_cell(tmp_path, "t1", RAW, rep=1, metrics={"root_cause_fixed": True})
    write_cell(tmp_path, "t2", NONE, metrics={"root_cause_fixed": True})
    write_cell(tmp_path, "t2", RAW, metrics={})
    doc = compare([str(tmp_path)], NONE, ["root_cause_fixed", "diff_lines"])
    comparison = only(doc)
    fixed = measure(comparison, "root_cause_fixed")
    assert (fixed.kind, fixed.interval, fixed.tasks) == ("metric", "t", 1)
    assert (fixed.n_baseline, fixed.n_treatment) == (1, 2)  # the null does not count
    assert fixed.delta == pytest.approx(1.0)
    lines = measure(comparison, "diff_lines")
    assert lines.delta == pytest.approx(12 - 15) and (lines.n_baseline, lines.n_treatment) == (2, 1)
    assert ("t2", "root_cause_fixed", f"no cell of {RAW} reports root_cause_fixed") in [
        (u.task, u.measure, u.reason) for u in comparison.unpaired
    ]
    assert doc.metrics == ["root_cause_fixed", "diff_lines"]


def test_a_grader_failure_counts_as_a_failure_of_a_gated_metric_never_as_a_cell_left_out(
    tmp_path: Path,
) -> None:
    # contract §4.2: a grader failure fails every gated metric. Leaving the cell out of --metric strict_pass
    # would favour the arm that broke its workspace (here raw: one pass, one crashed grader).
    gate = {"pass": True, "strict_pass": True}
    write_cell(tmp_path, "t1", NONE, rep=0, gate_results=gate, metrics={"strict_pass": True, "diff": 3})
    write_cell(tmp_path, "t1", NONE, rep=1, gate_results=gate, metrics={"strict_pass": True, "diff": 5})
    write_cell(tmp_path, "t1", RAW, rep=0, gate_results=gate, metrics={"strict_pass": True, "diff": 4})
    failed = {"pass": False, "strict_pass": False}
    write_cell(tmp_path, "t1", RAW, rep=1, grader_failure=True, gate_results=failed, metrics={})
    comparison = only(compare([str(tmp_path)], NONE, ["strict_pass", "diff"]))
    strict = measure(comparison, "strict_pass")
    assert (strict.baseline_mean, strict.treatment_mean, strict.n_treatment) == (1.0, 0.5, 2)
    diff = measure(comparison, "diff")  # not gated: the failed cell does not report it
    assert (diff.treatment_mean, diff.n_treatment) == (4.0, 1)
    with pytest.raises(UsageError, match="--metric merge"):  # a failure alone reports no metric
        compare([str(tmp_path)], NONE, ["merge"])


def test_a_grader_failure_is_not_mergeable_in_compare_as_in_the_report(tmp_path: Path) -> None:
    write_cell(tmp_path, "t1", NONE, metrics={"mergeable": True})
    write_cell(tmp_path, "t1", RAW, rep=0, metrics={"mergeable": True})
    write_cell(tmp_path, "t1", RAW, rep=1, grader_failure=True, metrics={})
    mergeable = measure(only(compare([str(tmp_path)], NONE, ["mergeable"])), "mergeable")
    assert (mergeable.treatment_mean, mergeable.n_treatment, mergeable.delta) == (0.5, 2, -0.5)


def test_a_metric_no_cell_reports_is_refused(tmp_path: Path) -> None:
    write_cell(tmp_path, "t1", NONE, metrics={"strict_pass": True, "nothing": None})
    write_cell(tmp_path, "t1", RAW, metrics={"strict_pass": False})
    with pytest.raises(UsageError, match="--metric nothing") as info:
        compare([str(tmp_path)], NONE, ["nothing"])
    assert "strict_pass" in (info.value.hint or "")
    with pytest.raises(UsageError, match="--metric typo"):
        compare([str(tmp_path)], NONE, ["typo"])


def test_effort_and_mode_are_never_pooled(tmp_path: Path) -> None:
    write_cell(tmp_path, "t1", NONE, passed=False)
    write_cell(tmp_path, "t1", RAW, passed=True)
    write_cell(tmp_path, "t1", NONE, effort="high", passed=True)
    write_cell(tmp_path, "t1", RAW, effort="high", passed=True)
    write_cell(tmp_path, "t2", NONE, mode="review", passed=None, score=0.5)
    write_cell(tmp_path, "t2", RAW, mode="review", passed=None, score=0.75)
    doc = compare([str(tmp_path)], NONE)
    assert measure(only(doc, effort=None, mode=None), "gate").delta == 1.0
    assert measure(only(doc, effort="high"), "gate").delta == 0.0
    assert measure(only(doc, mode="review"), "score").delta == 0.25
    assert len(doc.comparisons) == 3


def test_models_are_compared_separately(tmp_path: Path) -> None:
    for model, treat in (("m1", True), ("m2", False)):
        write_cell(tmp_path, "t1", NONE, model=model, passed=False)
        write_cell(tmp_path, "t1", RAW, model=model, passed=treat)
    doc = compare([str(tmp_path)], NONE)
    assert measure(only(doc, model="m1"), "gate").delta == 1.0
    assert measure(only(doc, model="m2"), "gate").delta == 0.0


# --- selectors ---------------------------------------------------------------------------------------------


@pytest.fixture
def two_revisions(tmp_path: Path) -> tuple[Path, Path]:
    """The same arms from two batches: guidance at two revisions of the tree (tree-pinned images)."""
    rev1, rev2 = tmp_path / "rev1", tmp_path / "rev2"
    write_pin(rev1)
    write_pin(rev2, tree=SHA_B, image="dokimi/calc:" + SHA_B, source="/src/calc@" + SHA_B)
    for batch, treat in ((rev1, False), (rev2, True)):
        cells(batch, "t1", NONE, [False])
        cells(batch, "t1", RAW, [treat])
    return rev1, rev2


def test_batch_arm_selectors_compare_one_arm_of_two_batches(two_revisions: tuple[Path, Path]) -> None:
    rev1, rev2 = two_revisions
    doc = compare([f"{rev2}/{RAW}"], f"{rev1}/{RAW}")
    assert [s.label for s in doc.selectors] == [f"{rev1}/{RAW}", f"{rev2}/{RAW}"]
    assert measure(only(doc), "gate").delta == 1.0
    assert [b.name for s in doc.selectors for b in s.batches] == ["rev1", "rev2"]
    # tree-pinned images follow the tree: two revisions are not warned about
    assert codes(doc) == []


def test_the_output_names_each_batch_its_pin_and_harness_versions(two_revisions: tuple[Path, Path]) -> None:
    rev1, rev2 = two_revisions
    doc = compare([f"{rev2}/{RAW}"], f"{rev1}/{RAW}")
    base, treat = doc.selectors
    assert base.role == "baseline" and treat.role == "treatment"
    assert base.batches[0].pin is not None and base.batches[0].pin.tree == "a" * 40
    assert treat.batches[0].pin is not None and treat.batches[0].pin.tree == SHA_B
    assert treat.batches[0].harness_versions == ["claude-code 2.1.328"]
    assert treat.batches[0].cells == 1


def test_a_bare_arm_pooling_several_batches_is_warned(two_revisions: tuple[Path, Path]) -> None:
    rev1, rev2 = two_revisions
    doc = compare([str(rev1), str(rev2)], NONE)
    assert [s.label for s in doc.selectors] == [NONE, RAW]
    assert [len(s.batches) for s in doc.selectors] == [2, 2]
    pooled = [w.message for w in doc.warnings if w.code == "pooled_batches"]
    assert len(pooled) == 2 and all("rev1, rev2" in m for m in pooled)


def test_the_arm_slug_is_accepted_in_a_selector(two_revisions: tuple[Path, Path]) -> None:
    rev1, _ = two_revisions
    doc = compare([f"{rev1}/guidance_raw"], "guidance_none")
    assert [s.arm for s in doc.selectors] == [NONE, RAW]


@pytest.mark.parametrize(
    ("selectors", "baseline"),
    [
        (["{b}/" + RAW, "{b}/" + RAW], NONE),
        (["{b}", "{b}/" + RAW], NONE),
        (["{b}/" + RAW, "{b}"], NONE),
        (["{b}", "{b}/"], NONE),
        (["{b}/" + NONE], NONE),
        (["{b}/" + RAW], "{b}/" + RAW),
    ],
)
def test_two_selectors_of_the_same_cells_are_refused(
    pilot: Path, selectors: list[str], baseline: str
) -> None:
    with pytest.raises(UsageError, match="select the same cells"):
        compare([s.format(b=pilot) for s in selectors], baseline.format(b=pilot))


def test_a_baseline_arm_no_batch_has_is_refused_with_the_arms_found(pilot: Path) -> None:
    with pytest.raises(UsageError, match="no batch given has finished cells") as info:
        compare([str(pilot)], "guidance:bridge")
    assert NONE in (info.value.hint or "") and RAW in (info.value.hint or "")


def test_a_batch_arm_the_batch_lacks_is_refused(pilot: Path) -> None:
    with pytest.raises(UsageError, match="has no cell of arm"):
        compare([f"{pilot}/guidance:bridge"], NONE)


def test_nothing_but_the_baseline_is_refused(tmp_path: Path) -> None:
    write_cell(tmp_path, "t1", NONE)
    with pytest.raises(UsageError, match="nothing to compare"):
        compare([str(tmp_path)], NONE)


def test_a_selector_that_is_no_batch_is_refused(tmp_path: Path) -> None:
    with pytest.raises(UsageError, match="neither a batch directory"):
        compare([str(tmp_path / "nope" / RAW)], NONE)


# --- warnings ----------------------------------------------------------------------------------------------


def test_a_batch_without_pin_is_warned(tmp_path: Path) -> None:
    write_cell(tmp_path, "t1", NONE)
    write_cell(tmp_path, "t1", RAW)
    doc = compare([str(tmp_path)], NONE)
    assert codes(doc) == ["no_pin"]


def test_different_eval_dir_pins_are_warned(two_revisions: tuple[Path, Path]) -> None:
    rev1, rev2 = two_revisions
    write_pin(rev2, tree=SHA_B, image="dokimi/calc:" + SHA_B, eval_dir_digest="sha256:eval2")
    doc = compare([f"{rev2}/{RAW}"], f"{rev1}/{RAW}")
    assert codes(doc) == ["different_eval_dir"]


def test_an_image_of_its_own_is_compared(two_revisions: tuple[Path, Path]) -> None:
    rev1, rev2 = two_revisions
    write_pin(rev2, image="my/image:1", image_pin="image", image_context_digest=None)
    assert codes(compare([f"{rev2}/{RAW}"], f"{rev1}/{RAW}")) == ["different_image"]
    write_pin(rev1, image="my/image:1", image_pin="image", image_context_digest=None)
    assert codes(compare([f"{rev2}/{RAW}"], f"{rev1}/{RAW}")) == []
    write_pin(rev1, image="my/image:2", image_pin="image", image_context_digest=None)
    assert codes(compare([f"{rev2}/{RAW}"], f"{rev1}/{RAW}")) == ["different_image"]


def test_a_working_tree_image_follows_the_tree_too(two_revisions: tuple[Path, Path]) -> None:
    rev1, rev2 = two_revisions
    write_pin(rev1, tree=None, image="dokimi/calc:ctx1", image_pin="digest")
    write_pin(rev2, tree=None, image="dokimi/calc:ctx2", image_pin="digest", image_context_digest="ctx2")
    assert codes(compare([f"{rev2}/{RAW}"], f"{rev1}/{RAW}")) == []


def test_different_harness_versions_are_warned(two_revisions: tuple[Path, Path]) -> None:
    rev1, rev2 = two_revisions
    write_cell(rev2, "t1", RAW, harness_version="2.1.400")
    doc = compare([f"{rev2}/{RAW}"], f"{rev1}/{RAW}")
    (warning,) = [w for w in doc.warnings if w.code == "different_harness_versions"]
    assert "2.1.400" in warning.message and "2.1.328" in warning.message


def test_the_document_is_deterministic(pilot: Path) -> None:
    assert compare([str(pilot)], NONE).model_dump_json() == compare([str(pilot)], NONE).model_dump_json()


# --- models of two vendors ---------------------------------------------------------------------------------

CLAUDE, GPT, GEMINI = "claude-sonnet-4-5", "gpt-5-mini", "gemini-2.5-flash"


def vendor_batches(tmp_path: Path, judges: dict[str, list[str]]) -> tuple[str, str]:
    """Two batches of one arm: ``claude`` ran CLAUDE and ``gpt`` ran GPT on three tasks; ``judges`` names the
    judges (result.json ``judges``) of each batch's cells. Per-task gate deltas (gpt - claude): +1, 0, -1."""
    selectors = []
    for name, model, outcomes in (("claude", CLAUDE, [False, True, True]), ("gpt", GPT, [True, True, False])):
        batch = tmp_path / name
        write_pin(batch)
        for task, passed in zip(("t1", "t2", "t3"), outcomes, strict=True):
            gate = {"pass": True, "mergeable": passed}
            write_cell(batch, task, RAW, model=model, passed=passed, judges=judges[name],
                       metrics={"mergeable": passed}, gate_results=gate)  # fmt: skip
        selectors.append(f"{batch}/{RAW}")
    return selectors[0], selectors[1]


def test_models_of_two_vendors_judged_by_one_of_them_are_refused_with_the_reason(tmp_path: Path) -> None:
    """Checked by issue 26: compare refuses a cross-vendor comparison judged by one vendor, and says why."""
    claude, gpt = vendor_batches(tmp_path, {"claude": [CLAUDE], "gpt": [CLAUDE]})
    with pytest.raises(UsageError) as refused:
        compare([gpt], claude)
    message = refused.value.message
    assert f"{CLAUDE} (anthropic), {GPT} (openai)" in message
    assert f"judged only by {CLAUDE} (anthropic)" in message and "favour its own vendor" in message
    assert "third vendor" in message and "--second-judge-model" in (refused.value.hint or "")


@pytest.mark.parametrize(
    "judges",
    [
        [CLAUDE, GEMINI],  # a second judge of a third vendor
        [GEMINI],  # a primary of a third vendor
        [CLAUDE, GPT],  # a judge of each compared vendor
    ],
)
def test_models_of_two_vendors_are_compared_with_a_third_vendors_judge_or_both(
    tmp_path: Path, judges: list[str]
) -> None:
    claude, gpt = vendor_batches(tmp_path, {"claude": judges, "gpt": judges})
    doc = compare([gpt], claude)
    comparison = only(doc)
    assert (comparison.model, comparison.baseline_model) == (GPT, CLAUDE)
    assert comparison.models_text() == f"model {GPT}, effort default vs model {CLAUDE}, effort default"
    gate = measure(comparison, "gate")
    assert gate.tasks == 3 and gate.delta == 0.0 and (gate.up, gate.down, gate.tied) == (1, 1, 1)
    assert "across_models" in codes(doc)


def test_one_sides_lone_vendor_judge_is_enough_to_refuse(tmp_path: Path) -> None:
    """Each side is judged on its own: a third-vendor judge of one batch does not vouch for the other's."""
    claude, gpt = vendor_batches(tmp_path, {"claude": [CLAUDE, GEMINI], "gpt": [GPT]})
    with pytest.raises(UsageError, match=f"the cells of {gpt} were judged only by {GPT}"):
        compare([gpt], claude)


def test_models_of_one_vendor_or_unjudged_cells_need_no_third_judge(tmp_path: Path) -> None:
    claude, gpt = vendor_batches(tmp_path / "unjudged", {"claude": [], "gpt": []})
    assert (
        only(compare([gpt], claude)).baseline_model == CLAUDE
    )  # no judge scored anything: nothing to favour
    batches = []
    for model in ("claude-opus-4-1", CLAUDE):
        batch = tmp_path / "one-vendor" / model
        write_pin(batch)
        write_cell(batch, "t1", RAW, model=model, judges=[CLAUDE])
        batches.append(f"{batch}/{RAW}")
    assert only(compare([batches[0]], batches[1])).model == "claude-opus-4-1"


def test_a_side_of_several_models_is_refused_when_the_arms_share_none(tmp_path: Path) -> None:
    base, treat = tmp_path / "base", tmp_path / "treat"
    write_pin(base)
    write_pin(treat)
    write_cell(base, "t1", RAW, model=CLAUDE)
    for model in (GPT, "gpt-5"):
        write_cell(treat, "t1", RAW, model=model)
    with pytest.raises(UsageError, match=r"ran several: gpt-5 \(effort default\), gpt-5-mini"):
        compare([f"{treat}/{RAW}"], f"{base}/{RAW}")


@pytest.mark.parametrize(
    ("model", "vendor"),
    [
        ("claude-haiku-4-5", "anthropic"),
        ("us.anthropic.claude-sonnet-4-5-20250929-v1:0", "anthropic"),
        ("gpt-5-mini", "openai"),
        ("o3-mini", "openai"),
        ("openai/gpt-4.1", "openai"),
        ("gemini-2.5-flash", "google"),
        ("qwen3-coder-plus", "alibaba"),
        ("m1", "m1"),
        ("acme-coder-2", "acme"),
    ],
)
def test_a_models_vendor_comes_from_its_family(model: str, vendor: str) -> None:
    assert vendor_of(model) == vendor


@pytest.mark.parametrize(
    ("first", "second", "refused"),
    [
        ("claude-haiku-4-5", "claude-sonnet-4-5-20250929", True),
        ("claude-haiku-4-5", "us.anthropic.claude-opus-4-1-20250805-v1:0", True),
        ("gpt-5-mini", "o3-mini", True),
        ("claude-haiku-4-5", "gpt-5-mini", False),
        ("gpt-5-mini", "gemini-2.5-flash", False),
    ],
)
def test_a_second_judge_of_the_primarys_family_is_refused(first: str, second: str, refused: bool) -> None:
    problem = second_judge_of_another_family(first, second)
    assert (problem is not None) == refused
    assert problem is None or f"both {vendor_of(first)} models" in problem


@pytest.mark.parametrize(
    "argv",
    [
        ["repo", "run", ".", "--arm", "guidance:raw", "--model", "m", "--reps", "1", "--batch", "b",
         "--judge-model", "claude-haiku-4-5", "--second-judge-model", "claude-sonnet-4-5-20250929"],
        ["repo", "rubric", "check", ".", "--model", "claude-haiku-4-5",
         "--second-model", "claude-sonnet-4-5-20250929"],
    ],
    ids=["run", "rubric-check"],
)  # fmt: skip
def test_both_commands_refuse_a_second_judge_of_the_primarys_family_before_any_work(argv: list[str]) -> None:
    from click.testing import CliRunner

    from dokimi.cli.app import cli

    result = CliRunner().invoke(cli, argv)
    assert result.exit_code == 2, result.output
    assert "both anthropic models" in result.output and "another model family" in result.output
