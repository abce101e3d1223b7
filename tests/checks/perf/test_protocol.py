"""The perf protocol on literal numbers (agent-modes §3): plan, ratios, control, noise, verdict, sizes."""

from __future__ import annotations

import pytest

from dokimi.checks.perf.protocol import (
    NOISE_FLOOR,
    Band,
    RoundMeasurement,
    complexity_regression,
    control_in_band,
    evaluate,
    evaluate_round,
    measured_noise,
    noise_band,
    plan_rounds,
    ratio_per_repetition,
    variant_of,
    verdict,
)
from dokimi.checks.perf.spec import TaskPerf, perf_env, perf_problems, task_perf
from dokimi.schemas.task import Task

# --- the plan -----------------------------------------------------------------------------------------------


def test_each_round_runs_the_candidate_once_and_the_oracle_twice_baseline_before_control() -> None:
    plan = plan_rounds(7, seed=3)
    assert len(plan) == 7
    for order in plan:
        assert sorted(order) == ["candidate", "control", "oracle"]
        assert order.index("oracle") < order.index("control")


def test_the_candidate_is_first_middle_and_last_equally_often() -> None:
    positions = [order.index("candidate") for order in plan_rounds(6, seed=11)]
    assert sorted(positions) == [0, 0, 1, 1, 2, 2]


def test_the_same_seed_gives_the_same_plan_and_seeds_shuffle_it() -> None:
    assert plan_rounds(5, seed=1) == plan_rounds(5, seed=1)
    assert len({tuple(plan_rounds(6, seed=s)) for s in range(10)}) > 1


def test_zero_rounds_is_refused() -> None:
    with pytest.raises(ValueError):
        plan_rounds(0, seed=0)


def test_the_control_is_run_as_the_oracle_variant() -> None:
    assert [variant_of(s) for s in ("candidate", "oracle", "control")] == ["candidate", "oracle", "oracle"]


# --- ratios and noise ---------------------------------------------------------------------------------------


def test_the_ratio_is_taken_within_each_repetition() -> None:
    assert ratio_per_repetition([2.0, 3.0, 4.5], [1.0, 1.5, 1.5]) == [2.0, 2.0, 3.0]


@pytest.mark.parametrize(
    ("candidate", "baseline"), [([1.0], [1.0, 1.0]), ([], []), ([1.0], [0.0]), ([-1.0], [1.0])]
)
def test_unpaired_or_non_cost_values_have_no_ratio(candidate: list[float], baseline: list[float]) -> None:
    with pytest.raises(ValueError):
        ratio_per_repetition(candidate, baseline)


def test_the_noise_band_is_the_baselines_spread_around_its_median_never_narrower_than_the_floor() -> None:
    assert noise_band([0.8, 1.0, 1.3]) == Band(0.8, 1.3)
    tight = noise_band([1.0, 1.001, 1.0])
    assert tight.lo == pytest.approx(1 / (1 + NOISE_FLOOR)) and tight.hi == pytest.approx(1 + NOISE_FLOOR)


def test_a_control_inside_the_baselines_band_keeps_the_round() -> None:
    assert control_in_band([0.98, 1.03, 1.01], Band(0.9, 1.1))


def test_a_noisy_control_outside_its_band_invalidates_the_round() -> None:
    # the oracle against itself came out 30% slower: this round measured the host, not the code
    assert not control_in_band([1.3, 1.28, 1.35], Band(0.95, 1.05))
    measured = RoundMeasurement(
        0, None, {"oracle": [1.0, 1.01, 0.99], "control": [1.3, 1.28, 1.35], "candidate": [1.0, 1.0, 1.0]}
    )
    assert not evaluate_round(measured).valid


def test_the_measured_noise_is_the_range_of_the_control_ratios() -> None:
    assert measured_noise([0.9, 1.02, 1.12]) == Band(0.9, 1.12)
    assert measured_noise([]) == measured_noise([1.0])


# --- the verdict --------------------------------------------------------------------------------------------


def test_a_2x_regression_beyond_tolerance_and_noise_fails() -> None:
    found = verdict([2.0, 1.95, 2.1, 2.02, 1.98], tolerance=1.5, noise=Band(0.95, 1.06))
    assert found.passed is False and found.median_ratio == 2.0
    assert "exceeds the tolerance 1.5 and lies outside the noise band" in found.reason


def test_a_1_05x_change_within_the_noise_passes_even_above_a_tight_tolerance() -> None:
    found = verdict([1.04, 1.05, 1.06], tolerance=1.02, noise=Band(0.92, 1.08))
    assert found.passed is True and found.median_ratio == 1.05
    assert "inside the noise band" in found.reason


def test_a_ratio_within_tolerance_passes() -> None:
    assert verdict([1.2, 1.3, 1.1], tolerance=1.5, noise=Band(0.99, 1.01)).passed is True


def test_no_ratio_is_not_measured_never_a_pass() -> None:
    found = verdict([], tolerance=1.5, noise=Band(0.95, 1.05))
    assert found.passed is None and found.median_ratio is None


def test_evaluate_drops_the_noisy_round_and_fails_the_2x_regression() -> None:
    good = {"oracle": [1.0, 1.02, 0.98], "control": [1.01, 1.0, 0.99], "candidate": [2.0, 2.04, 1.96]}
    noisy = {"oracle": [1.0, 1.02, 0.98], "control": [1.6, 1.5, 1.7], "candidate": [1.0, 1.0, 1.0]}
    report = evaluate(
        [RoundMeasurement(0, None, good), RoundMeasurement(1, None, noisy), RoundMeasurement(2, None, good)],
        tolerance=1.5,
    )
    assert [r.valid for r in report.sizes[0].rounds] == [True, False, True]
    assert report.passed is False and report.ratio == pytest.approx(2.0)
    assert "1 of 3 rounds dropped" in report.reason
    assert report.metrics() == {"perf_ratio": pytest.approx(2.0), "perf_pass": False, "perf_scaling_ok": None}


def test_evaluate_with_every_round_noisy_is_not_measured() -> None:
    noisy = {"oracle": [1.0, 1.0], "control": [2.0, 2.0], "candidate": [1.0, 1.0]}
    report = evaluate([RoundMeasurement(i, None, noisy) for i in range(3)], tolerance=1.5)
    assert report.passed is None and report.ratio is None
    assert report.metrics()["perf_pass"] is None


# --- sizes --------------------------------------------------------------------------------------------------


def test_a_ratio_growing_with_size_beyond_noise_is_a_complexity_regression() -> None:
    assert complexity_regression([1.0, 1.4, 2.1], Band(0.95, 1.05))


def test_a_flat_ratio_across_sizes_or_one_size_is_not() -> None:
    assert not complexity_regression([1.3, 1.31, 1.29], Band(0.95, 1.05))
    assert not complexity_regression([3.0], Band(0.95, 1.05))


def test_growth_within_the_noise_band_is_not_flagged() -> None:
    assert not complexity_regression([1.0, 1.02, 1.04], Band(0.95, 1.05))


def test_a_ratio_that_falls_beyond_noise_on_the_way_is_not_monotone_growth() -> None:
    assert not complexity_regression([1.0, 2.0, 1.2, 2.2], Band(0.95, 1.05))


def test_evaluate_flags_growth_across_sizes_in_the_metrics() -> None:
    def rounds(size: int, factor: float) -> list[RoundMeasurement]:
        values = {"oracle": [1.0, 1.0], "control": [1.0, 1.01], "candidate": [factor, factor]}
        return [RoundMeasurement(r, size, values) for r in range(2)]

    sizes = [{"p": 1000}, {"p": 10000}, {"p": 100000}]
    report = evaluate(rounds(0, 1.1) + rounds(1, 1.3) + rounds(2, 1.45), tolerance=1.5, sizes=sizes)
    assert report.passed is True and report.complexity_regression is True
    assert report.metrics() == {
        "perf_ratio": pytest.approx(1.45),
        "perf_pass": True,
        "perf_scaling_ok": False,
    }
    assert "complexity regression" in report.reason and "size p=100000" in report.reason


# --- the task's perf object ---------------------------------------------------------------------------------


def test_the_specs_example_perf_object_reads_with_defaults_for_what_it_omits() -> None:
    task = Task.model_validate(
        {
            "id": "t",
            "family": "fix",
            "base": "0" * 40,
            "prompt": "p",
            "grader": "g",
            "perf": {
                "target": "//bench:x",
                "metric": "objective_ratio",
                "baseline": "oracle",
                "tolerance": 1.5,
                "threads": 8,
                "sizes": [{"p": 20000}, {"p": 50000}],
            },
        }
    )
    perf = task_perf(task)
    assert perf is not None and (perf.repeats, perf.rounds) == (5, 3) and perf.size_indices == [0, 1]
    env = perf_env(perf, variant="oracle", size_index=1)
    assert env["DOKIMI_PERF_SIZE"] == '{"p": 50000}' and env["DOKIMI_PERF_THREADS"] == "8"
    assert env["DOKIMI_PERF_VARIANT"] == "oracle" and env["DOKIMI_PERF_TARGET"] == "//bench:x"


def test_a_perf_object_without_metric_or_with_a_tolerance_below_1_names_the_key() -> None:
    problems = perf_problems({"tolerance": 0.5, "baseline": "head"})
    keys = {loc for loc, _ in problems}
    assert ("perf", "metric") in keys and ("perf", "tolerance") in keys and ("perf", "baseline") in keys
    assert TaskPerf.model_validate({"metric": "t", "tolerance": 1.2, "tool_flags": "-x"}).model_extra == {
        "tool_flags": "-x"
    }
