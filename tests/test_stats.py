"""dokimi.stats against independent implementations: statsmodels, scipy and brute-force enumeration."""

from __future__ import annotations

import itertools
import random
import warnings
from fractions import Fraction

import numpy as np
import pytest
from statsmodels.stats.contingency_tables import mcnemar
from statsmodels.stats.inter_rater import cohens_kappa as sm_cohens_kappa
from statsmodels.stats.multitest import multipletests
from statsmodels.stats.proportion import proportion_confint

from dokimi import stats


@pytest.mark.parametrize("n", [1, 2, 3, 5, 10, 17, 50, 200])
def test_wilson_interval_matches_statsmodels_for_every_count(n: int) -> None:
    for k in range(n + 1):
        for conf in (0.9, 0.95, 0.99):
            got = stats.wilson_interval(k, n, conf)
            assert got is not None
            lo, hi = proportion_confint(k, n, alpha=1 - conf, method="wilson")
            assert got == pytest.approx((lo, hi), abs=1e-12)


def test_wilson_interval_of_no_trials_is_none() -> None:
    assert stats.wilson_interval(0, 0) is None


def test_wilson_interval_known_value_zero_of_ten() -> None:
    lo, hi = stats.wilson_interval(0, 10)  # type: ignore[misc]
    assert lo == 0.0
    assert hi == pytest.approx(0.2775, abs=1e-4)


def test_wilson_interval_refuses_more_successes_than_trials() -> None:
    with pytest.raises(ValueError):
        stats.wilson_interval(3, 2)


@pytest.mark.slow
def test_holm_matches_statsmodels_on_random_pvalues() -> None:
    rng = random.Random(7)
    for _ in range(80):
        m = rng.randint(1, 12)
        pvalues = [rng.choice([rng.random(), rng.random() ** 4, 1.0, 0.0]) for _ in range(m)]
        expected = multipletests(pvalues, method="holm")[1]
        assert stats.holm(pvalues) == pytest.approx(list(expected), abs=1e-12)


def test_holm_of_nothing_is_nothing() -> None:
    assert stats.holm([]) == []


def _brute_force_sign_flip(deltas: list[float]) -> float:
    observed = abs(sum(deltas))
    hits = total = 0
    for signs in itertools.product((1, -1), repeat=len(deltas)):
        total += 1
        if abs(sum(s * d for s, d in zip(signs, deltas, strict=True))) >= observed - 1e-9:
            hits += 1
    return hits / total


def test_sign_flip_p_equals_brute_force_enumeration_including_zero_deltas() -> None:
    rng = random.Random(11)
    for _ in range(150):
        n = rng.randint(1, 10)
        deltas = [rng.choice([0.0, 0.0, rng.uniform(-1, 1), round(rng.uniform(-1, 1), 1)]) for _ in range(n)]
        # brute force flips every delta, zeros included: flipping a zero changes nothing, so p is the same
        assert stats.sign_flip_p(deltas) == pytest.approx(_brute_force_sign_flip(deltas), abs=1e-12)


def test_sign_flip_p_is_one_when_every_task_is_tied() -> None:
    assert stats.sign_flip_p([0.0, 0.0, 0.0]) == 1.0
    assert stats.sign_flip_p([]) == 1.0


def test_sign_flip_p_known_value_all_five_tasks_up() -> None:
    # 2 of the 32 sign assignments (all +, all -) reach |sum| = 5
    assert stats.sign_flip_p([1, 1, 1, 1, 1]) == pytest.approx(2 / 32)


def test_sign_flip_p_is_exact_at_sixteen_changed_tasks_and_monte_carlo_above() -> None:
    sixteen = [1.0] * 16
    assert stats.sign_flip_p(sixteen) == pytest.approx(2 / 2**16)
    seventeen = [1.0] * 12 + [-1.0] * 5
    exact = stats.mcnemar_exact(5, 12)  # the exact p of this ±1 table
    estimate = stats.sign_flip_p(seventeen)
    assert estimate != exact  # a Monte Carlo estimate, not the enumeration
    assert estimate == pytest.approx(exact, abs=0.01)
    assert stats.sign_flip_p(seventeen) == estimate  # fixed seed: the same number every run


@pytest.mark.slow
def test_sign_flip_p_equals_mcnemar_exact_at_one_cell_per_task_and_arm() -> None:
    """With binary outcomes and one cell per task and arm, deltas are -1/0/+1 and the test is McNemar's."""
    rng = random.Random(3)
    for _ in range(400):
        n_tasks = rng.randint(1, 40)
        baseline = [rng.random() < rng.random() for _ in range(n_tasks)]
        treatment = [rng.random() < rng.random() for _ in range(n_tasks)]
        deltas = [float(t) - float(b) for b, t in zip(baseline, treatment, strict=True)]
        b = sum(1 for x, y in zip(baseline, treatment, strict=True) if x and not y)
        c = sum(1 for x, y in zip(baseline, treatment, strict=True) if y and not x)
        table = [[0, b], [c, 0]]
        expected = mcnemar(table, exact=True).pvalue
        assert stats.mcnemar_exact(b, c) == pytest.approx(expected, abs=1e-12)
        if b + c <= stats.EXACT_SIGN_FLIP_MAX:
            assert stats.sign_flip_p(deltas) == pytest.approx(expected, abs=1e-12)
        else:
            assert stats.sign_flip_p(deltas) == pytest.approx(expected, abs=0.01)


def test_t_interval_matches_scipy() -> None:
    from scipy import stats as sp

    deltas = [0.2, -0.1, 0.4, 0.05, 0.3]
    lo, hi = stats.t_interval(deltas)  # type: ignore[misc]
    expected = sp.t.interval(0.95, len(deltas) - 1, loc=np.mean(deltas), scale=sp.sem(deltas))
    assert (lo, hi) == pytest.approx(expected, abs=1e-12)


def test_intervals_need_two_tasks() -> None:
    assert stats.t_interval([0.5]) is None
    assert stats.bootstrap_mean_ci([0.5]) is None
    assert stats.t_interval([]) is None


def test_t_interval_of_identical_deltas_is_a_point() -> None:
    assert stats.t_interval([0.25, 0.25, 0.25]) == pytest.approx((0.25, 0.25))


def test_bootstrap_interval_is_deterministic_and_brackets_the_mean() -> None:
    deltas = [1.0, 0.0, 0.5, 1.0, -0.5, 0.0, 1.0]
    first = stats.bootstrap_mean_ci(deltas)
    assert first == stats.bootstrap_mean_ci(deltas)
    assert first is not None
    assert first[0] <= float(np.mean(deltas)) <= first[1]
    assert -0.5 <= first[0] < first[1] <= 1.0


@pytest.mark.slow
def test_bootstrap_interval_covers_the_true_delta_at_about_the_nominal_rate() -> None:
    rng = np.random.default_rng(12345)
    true_delta = 0.15
    covered = 0
    simulations = 200
    for sim in range(simulations):
        n_tasks = 30
        # per-task difficulty shared by both arms; 3 reps per cell; the arm adds true_delta to the pass chance
        difficulty = rng.uniform(0.2, 0.7, n_tasks)
        base = rng.binomial(3, difficulty) / 3
        treat = rng.binomial(3, difficulty + true_delta) / 3
        interval = stats.bootstrap_mean_ci(list(treat - base), n_boot=2000, seed=sim)
        assert interval is not None
        covered += interval[0] <= true_delta <= interval[1]
    assert 0.88 <= covered / simulations <= 0.99


@pytest.mark.slow
def test_cohen_kappa_matches_statsmodels() -> None:
    rng = random.Random(5)
    for _ in range(100):
        n = rng.randint(2, 40)
        labels = ["a", "b", "c"][: rng.randint(2, 3)]
        a = [rng.choice(labels) for _ in range(n)]
        b = [x if rng.random() < 0.6 else rng.choice(labels) for x in a]
        got = stats.cohen_kappa(a, b)
        index = {lab: i for i, lab in enumerate(labels)}
        table = np.zeros((len(labels), len(labels)))
        for x, y in zip(a, b, strict=True):
            table[index[x], index[y]] += 1
        with warnings.catch_warnings():  # statsmodels divides by a zero variance on degenerate tables
            warnings.simplefilter("ignore", RuntimeWarning)
            expected = sm_cohens_kappa(table).kappa
        if got is None:
            assert np.isnan(expected) or len(set(a) | set(b)) == 1
        else:
            assert got == pytest.approx(expected, abs=1e-12)


def test_cohen_kappa_is_undefined_when_everyone_gives_one_label() -> None:
    assert stats.cohen_kappa(["x", "x"], ["x", "x"]) is None
    assert stats.cohen_kappa([], []) is None


def test_cohen_kappa_of_perfect_agreement_is_one() -> None:
    assert stats.cohen_kappa(["a", "b", "a"], ["a", "b", "a"]) == pytest.approx(1.0)


@pytest.mark.slow
@pytest.mark.parametrize("n1,n2", [(1, 1), (2, 3), (5, 5), (4, 10), (20, 7)])
def test_newcombe_interval_matches_statsmodels_for_every_count(n1: int, n2: int) -> None:
    from statsmodels.stats.proportion import confint_proportions_2indep

    for k1 in range(n1 + 1):
        for k2 in range(n2 + 1):
            got = stats.newcombe_interval(k1, n1, k2, n2)
            assert got is not None
            lo, hi = confint_proportions_2indep(k2, n2, k1, n1, method="newcomb", compare="diff")
            assert got == pytest.approx((lo, hi), abs=1e-9)
            assert -1.0 <= got[0] <= k2 / n2 - k1 / n1 <= got[1] <= 1.0


def test_newcombe_interval_of_no_trials_is_none() -> None:
    assert stats.newcombe_interval(0, 0, 1, 2) is None and stats.newcombe_interval(1, 2, 0, 0) is None


def _brute_force_pass_k(outcomes: tuple[bool, ...], k: int) -> tuple[Fraction, Fraction]:
    """(pass@k, pass^k) by enumeration: over every k-subset of the attempts, the share holding a pass and
    the share passing whole."""
    subsets = list(itertools.combinations(outcomes, k))
    any_pass = Fraction(sum(1 for s in subsets if any(s)), len(subsets))
    all_pass = Fraction(sum(1 for s in subsets if all(s)), len(subsets))
    return any_pass, all_pass


def test_pass_at_k_and_pass_hat_k_equal_brute_force_enumeration_for_every_count() -> None:
    for n in range(1, 11):
        for c in range(n + 1):
            outcomes = (True,) * c + (False,) * (n - c)
            for k in range(1, n + 1):
                any_pass, all_pass = _brute_force_pass_k(outcomes, k)
                assert stats.pass_at_k(n, c, k) == pytest.approx(float(any_pass), abs=1e-12)
                assert stats.pass_hat_k(n, c, k) == pytest.approx(float(all_pass), abs=1e-12)


def test_pass_k_at_k_1_is_the_pass_rate_and_fewer_attempts_than_k_give_none() -> None:
    assert stats.pass_at_k(4, 3, 1) == stats.pass_hat_k(4, 3, 1) == 0.75
    assert stats.pass_at_k(2, 1, 3) is None and stats.pass_hat_k(2, 1, 3) is None
    assert stats.pass_at_k(5, 0, 5) == 0.0 and stats.pass_hat_k(5, 5, 5) == 1.0
    for bad in ((3, 4, 1), (3, 1, 0), (-1, 0, 1)):
        with pytest.raises(ValueError):
            stats.pass_at_k(*bad)
        with pytest.raises(ValueError):
            stats.pass_hat_k(*bad)


def _fisher_by_enumeration(a: int, b: int, c: int, d: int) -> float:
    """Two-sided Fisher's exact p by enumerating every table with the observed margins (hypergeometric
    probabilities from math.comb): the tables no more likely than the observed one."""
    from math import comb

    row1, col1, n = a + b, a + c, a + b + c + d

    def prob(x: int) -> float:
        return comb(col1, x) * comb(n - col1, row1 - x) / comb(n, row1)

    observed = prob(a)
    low, high = max(0, row1 + col1 - n), min(row1, col1)
    return min(1.0, sum(prob(x) for x in range(low, high + 1) if prob(x) <= observed * (1 + 1e-7)))


@pytest.mark.slow
def test_fisher_exact_p_matches_enumeration_on_every_small_table() -> None:
    for a, b, c, d in itertools.product(range(5), repeat=4):
        if a + b and c + d:
            assert stats.fisher_exact_p(a, b, c, d) == pytest.approx(
                _fisher_by_enumeration(a, b, c, d), abs=1e-9
            )
    assert stats.fisher_exact_p(0, 0, 3, 4) == 1.0
    assert stats.fisher_exact_p(6, 0, 0, 6) == pytest.approx(2 / 924)
