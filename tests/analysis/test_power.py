"""``repo plan`` checked by simulation: on synthetic pilots with a known effect, the size it recommends
reaches the target power (80% +- 5 points) over 500 seeded simulated studies drawn from the known truth; and
the vectorised test it simulates is the sign-flip test ``repo compare`` runs."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from dokimi import stats
from dokimi.analysis.power import (
    EXACT_TASKS,
    PilotTask,
    minimum_detectable_effect,
    plan,
    study_pvalues,
)
from dokimi.errors import UsageError
from tests.helpers.batches import write_cell, write_pin
from tests.helpers.runs import dokimi_cli

CHECK_STUDIES = 500
"""Simulated studies from the truth at the recommended size (the issue's check)."""


def _expit(x: np.ndarray) -> np.ndarray:
    return 1.0 / (1.0 + np.exp(-x))


def _logit(p: np.ndarray) -> np.ndarray:
    p = np.clip(p, 1e-9, 1 - 1e-9)
    return np.log(p) - np.log1p(-p)


class BinaryTruth:
    """Tasks whose pass probability is Beta(a, b); the treatment shifts it on the logit scale by ``c``, set so
    that the mean gain is ``effect``. Independent of dokimi.analysis.power's own fitting."""

    def __init__(self, a: float, b: float, effect: float) -> None:
        self.a, self.b = a, b
        p = np.random.default_rng(123).beta(a, b, 400_000)
        lo, hi = -20.0, 20.0
        for _ in range(60):
            mid = (lo + hi) / 2
            lo, hi = (mid, hi) if np.mean(_expit(_logit(p) + mid) - p) < effect else (lo, mid)
        self.c = (lo + hi) / 2

    def pilot(self, tasks: int, reps: int, rng: np.random.Generator) -> list[PilotTask]:
        p = rng.beta(self.a, self.b, tasks)
        q = _expit(_logit(p) + self.c)
        return [
            PilotTask(
                f"t{i}",
                tuple(rng.binomial(1, p[i], reps).astype(float)),
                tuple(rng.binomial(1, q[i], reps).astype(float)),
            )
            for i in range(tasks)
        ]

    def deltas(self, studies: int, tasks: int, reps: int, rng: np.random.Generator) -> np.ndarray:
        p = rng.beta(self.a, self.b, (studies, tasks))
        q = _expit(_logit(p) + self.c)
        return (rng.binomial(reps, q) - rng.binomial(reps, p)) / reps


class ContinuousTruth:
    """Task means N(0, 1), cells around them N(0, sd); the treatment adds ``effect``."""

    def __init__(self, sd: float, effect: float) -> None:
        self.sd, self.effect = sd, effect

    def pilot(self, tasks: int, reps: int, rng: np.random.Generator) -> list[PilotTask]:
        mu = rng.normal(0.0, 1.0, tasks)
        return [
            PilotTask(
                f"t{i}",
                tuple(mu[i] + rng.normal(0.0, self.sd, reps)),
                tuple(mu[i] + self.effect + rng.normal(0.0, self.sd, reps)),
            )
            for i in range(tasks)
        ]

    def deltas(self, studies: int, tasks: int, reps: int, rng: np.random.Generator) -> np.ndarray:
        noise = rng.normal(0.0, self.sd, (2, studies, tasks, reps)).mean(axis=3)
        return self.effect + noise[0] - noise[1]


@pytest.mark.slow
@pytest.mark.parametrize(
    ("truth", "effect", "pilot_tasks", "pilot_reps", "reps", "seed"),
    [
        (BinaryTruth(2.0, 2.0, 0.10), 0.10, 300, 4, (3,), 1),
        (BinaryTruth(1.0, 3.0, 0.10), 0.10, 300, 3, (2,), 2),
        (BinaryTruth(0.5, 0.5, 0.15), 0.15, 200, 4, (1,), 3),
        (ContinuousTruth(0.6, 0.2), 0.2, 150, 3, (2,), 4),
    ],
    ids=["binary-mid", "binary-low", "binary-u-shaped", "continuous"],
)
def test_the_recommended_size_reaches_80_percent_power_on_data_with_a_known_effect(
    truth: BinaryTruth | ContinuousTruth,
    effect: float,
    pilot_tasks: int,
    pilot_reps: int,
    reps: tuple[int, ...],
    seed: int,
) -> None:
    rng = np.random.default_rng(seed)
    result = plan(truth.pilot(pilot_tasks, pilot_reps, rng), effect, reps=reps)
    chosen = result.recommended
    assert chosen is not None and chosen.tasks is not None
    deltas = truth.deltas(CHECK_STUDIES, chosen.tasks, chosen.reps, rng)
    achieved = float((study_pvalues(deltas, seed=seed) < 0.05).mean())
    assert 0.75 <= achieved <= 0.85, (chosen, achieved, result.fit)
    # and it is the fewest tasks: ten fewer fall short of what the recommended size reaches
    if chosen.tasks > 20:
        fewer = truth.deltas(CHECK_STUDIES * 4, chosen.tasks - 10, chosen.reps, rng)
        assert float((study_pvalues(fewer, seed=seed) < 0.05).mean()) < achieved


@pytest.mark.slow
def test_more_reps_need_fewer_tasks_and_no_heterogeneity_is_invented_for_a_uniform_effect() -> None:
    rng = np.random.default_rng(9)
    result = plan(BinaryTruth(2.0, 2.0, 0.1).pilot(300, 4, rng), 0.1, reps=(1, 4))
    tasks = [row.tasks for row in result.rows]
    assert all(t is not None for t in tasks) and tasks == sorted(tasks, reverse=True)  # type: ignore[type-var]
    assert result.fit.heterogeneity_sd == 0.0 and 0.1 < (result.fit.icc or 0) < 0.3


@pytest.mark.slow
def test_the_vectorised_test_is_compares_sign_flip_test() -> None:
    rng = np.random.default_rng(5)
    for tasks in (3, 7, EXACT_TASKS):
        deltas = rng.choice([-1.0, -0.5, 0.0, 0.5, 1.0], size=(40, tasks))
        got = study_pvalues(deltas)
        want = [stats.sign_flip_p(list(row)) for row in deltas]
        assert np.allclose(got, want)
    deltas = rng.normal(0.2, 1.0, size=(20, 30))
    got = study_pvalues(deltas)
    want = np.array([stats.sign_flip_p(list(row)) for row in deltas])
    assert np.max(np.abs(got - want)) < 0.03


@pytest.mark.slow
def test_the_minimum_detectable_effect_has_80_percent_power_and_five_tasks_detect_nothing() -> None:
    rng = np.random.default_rng(2)
    deltas = list(rng.normal(0.0, 0.3, 25))
    mde = minimum_detectable_effect(deltas)
    assert mde is not None and 0.1 < mde < 0.3
    centred = np.asarray(deltas) - np.mean(deltas)
    check = centred[rng.integers(0, 25, size=(4000, 25))] + mde
    assert abs(float((study_pvalues(check) < 0.05).mean()) - 0.8) < 0.04
    assert minimum_detectable_effect([0.5, 0.4, 0.6, 0.5, 0.5]) is None  # 5 tasks all up: p = 0.0625


def test_a_pilot_without_repeated_cells_is_refused() -> None:
    with pytest.raises(UsageError, match="reps 2 or more"):
        plan([PilotTask("a", (1.0,)), PilotTask("b", (0.0,))], 0.1)
    with pytest.raises(UsageError, match="not possible") as refused:
        plan([PilotTask("a", (1.0, 1.0)), PilotTask("b", (1.0, 0.0))], 0.9)
    # it says which values are allowed, and why: the effect is added to a pass rate that stays in [0, 1]
    assert "stays between 0 and 1" in refused.value.message
    assert refused.value.hint is not None and "distance" not in refused.value.hint
    low, high = (float(v) for v in refused.value.hint.split("between ")[1].split(" (")[0].split(" and "))
    assert -0.76 < low < -0.7 and 0.2 < high < 0.26


# --- the command on a batch directory -----------------------------------------------------------------------


def _pilot_batch(root: Path, *, treatment: bool, tasks: int = 30, reps: int = 3) -> Path:
    batch = root / "pilot"
    write_pin(batch)
    rng = np.random.default_rng(11)
    for i in range(tasks):
        p = rng.beta(2, 2)
        for rep in range(reps):
            write_cell(batch, f"t{i:02d}", "guidance:none", rep=rep, passed=bool(rng.random() < p))
            if treatment:
                write_cell(
                    batch, f"t{i:02d}", "guidance:tree", rep=rep, passed=bool(rng.random() < min(1, p + 0.1))
                )
    return batch


@pytest.mark.slow
def test_repo_plan_prints_a_repo_power_document_for_a_pilot_batch(tmp_path: Path) -> None:
    batch = _pilot_batch(tmp_path, treatment=True)
    run = dokimi_cli(
        [
            "repo",
            "plan",
            str(batch),
            "--baseline",
            "guidance:none",
            "--effect",
            "0.1",
            "--reps",
            "1,3",
            "--tasks-available",
            "400",
            "--json",
        ]  # fmt: skip
    )
    assert run.returncode == 0, run.stderr
    doc = json.loads(run.stdout)
    assert doc["schema"] == "repo_power.v1"
    assert (doc["baseline"], doc["treatment"], doc["model"]) == ("guidance:none", "guidance:tree", "m1")
    assert doc["pilot"]["kind"] == "binary" and doc["pilot"]["tasks"] == 30
    assert [r["reps"] for r in doc["rows"]] == [1, 3]
    assert doc["recommended"]["tasks"] <= 400 and doc["recommended"]["power"] >= 0.8
    text = dokimi_cli(
        ["repo", "plan", str(batch), "--baseline", "guidance:none", "--effect", "0.1", "--reps", "3"]
    )
    assert text.returncode == 0 and "recommended" in text.stdout


@pytest.mark.slow
def test_repo_plan_works_from_a_baseline_only_pilot_and_refuses_bad_options(tmp_path: Path) -> None:
    batch = _pilot_batch(tmp_path, treatment=False)
    run = dokimi_cli(
        [
            "repo",
            "plan",
            str(batch),
            "--baseline",
            "guidance:none",
            "--effect",
            "0.2",
            "--reps",
            "3",
            "--json",
        ]
    )
    assert run.returncode == 0, run.stderr
    assert json.loads(run.stdout)["treatment"] is None
    bad = dokimi_cli(
        ["repo", "plan", str(batch), "--baseline", "guidance:none", "--effect", "0.1", "--reps", "0"]
    )
    assert bad.returncode == 2
    none = dokimi_cli(["repo", "plan", str(batch), "--baseline", "guidance:raw", "--effect", "0.1"])
    assert none.returncode == 2 and "guidance:raw" in none.stderr


@pytest.mark.slow
def test_compare_says_when_a_non_significant_result_was_underpowered(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    batch = tmp_path / "small"
    write_pin(batch)
    outcomes = {
        "a": (True, True),
        "b": (False, True),
        "c": (True, False),
        "d": (False, False),
        "e": (False, True),
    }
    for task, (base, treat) in outcomes.items():
        write_cell(batch, task, "guidance:none", passed=base)
        write_cell(batch, task, "guidance:tree", passed=treat)
    run = dokimi_cli(["repo", "compare", str(batch), "--baseline", "guidance:none", "--json"])
    assert run.returncode == 0, run.stderr
    gate = next(m for m in json.loads(run.stdout)["comparisons"][0]["measures"] if m["kind"] == "gate")
    assert gate["p"] >= 0.05 and gate["underpowered"] is True and gate["mde"] is None
    monkeypatch.setenv("COLUMNS", "300")
    text = dokimi_cli(["repo", "compare", str(batch), "--baseline", "guidance:none"])
    assert "underpowered" in text.stdout and "repo plan" in text.stdout
    # it never claims the comparison "misses no effect at all": no effect of any size can be significant
    assert "no effect at all" not in text.stdout
    assert "with 5 tasks no effect of any size can reach p < 0.05" in text.stdout
    assert "sign-flip test over 5 tasks gives is 0.0625" in text.stdout
