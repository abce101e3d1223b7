"""The statistics of report and compare: small, pure functions over plain numbers.

numpy and scipy are imported inside the functions that need them, so importing this module is free. Every
function is tested against an independent implementation (statsmodels, brute-force enumeration); see
docs/statistics.md for what each number means and why the task, not the cell, is the unit of a comparison.
"""

from __future__ import annotations

import math
from collections.abc import Hashable, Sequence
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import numpy as np
    from numpy.typing import NDArray

#: Above this many non-zero deltas the sign-flip p is estimated by Monte Carlo instead of enumerated.
EXACT_SIGN_FLIP_MAX = 16
#: Random sign vectors drawn when the sign-flip p is not exact.
SIGN_FLIP_DRAWS = 100_000
#: Resamples of a bootstrap interval.
BOOTSTRAP_RESAMPLES = 10_000
#: The fixed seed of every random procedure here: the same inputs give the same numbers on every run.
SEED = 20240917

Interval = tuple[float, float]


def _z(conf: float) -> float:
    # scipy.stats costs a start ~0.3 s; only this statistic needs it
    from scipy.stats import norm

    return float(norm.ppf(1.0 - (1.0 - conf) / 2.0))


def wilson_interval(k: int, n: int, conf: float = 0.95) -> Interval | None:
    """Wilson score interval for ``k`` successes in ``n`` trials; None when ``n`` is 0.

    Unlike the normal ("Wald") interval it stays inside [0, 1] and is not empty at 0/n or n/n.
    """
    if n < 0 or k < 0 or k > n:
        raise ValueError(f"need 0 <= k <= n, got k={k}, n={n}")
    if n == 0:
        return None
    z = _z(conf)
    p = k / n
    denom = 1.0 + z * z / n
    centre = (p + z * z / (2 * n)) / denom
    half = z * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n)) / denom
    return (max(0.0, centre - half), min(1.0, centre + half))


def bootstrap_mean_ci(
    deltas: Sequence[float],
    conf: float = 0.95,
    n_boot: int = BOOTSTRAP_RESAMPLES,
    seed: int = SEED,
) -> Interval | None:
    """Percentile bootstrap interval of the mean of ``deltas`` (resampling the values, i.e. the tasks).

    None for fewer than two values: one task gives no interval.
    """
    n = len(deltas)
    if n < 2:
        return None
    # numpy costs a start ~0.1 s; only a statistic needs it
    import numpy as np

    values = np.asarray(deltas, dtype=float)
    rng = np.random.default_rng(seed)
    means = np.empty(n_boot)
    chunk = max(1, 2_000_000 // n)  # bound memory: chunk x n indices at a time
    for start in range(0, n_boot, chunk):
        stop = min(n_boot, start + chunk)
        idx = rng.integers(0, n, size=(stop - start, n))
        means[start:stop] = values[idx].mean(axis=1)
    alpha = 1.0 - conf
    lo, hi = np.quantile(means, [alpha / 2, 1 - alpha / 2])
    return (float(lo), float(hi))


def t_interval(deltas: Sequence[float], conf: float = 0.95) -> Interval | None:
    """Student t interval of the mean of ``deltas``; None for fewer than two values."""
    n = len(deltas)
    if n < 2:
        return None
    # scipy.stats costs a start ~0.3 s; only this statistic needs it
    from scipy.stats import t

    mean = math.fsum(deltas) / n
    var = math.fsum((d - mean) ** 2 for d in deltas) / (n - 1)
    half = float(t.ppf(1.0 - (1.0 - conf) / 2.0, n - 1)) * math.sqrt(var / n)
    return (mean - half, mean + half)


def sign_flip_p(deltas: Sequence[float], *, draws: int = SIGN_FLIP_DRAWS, seed: int = SEED) -> float:
    """Two-sided paired sign-flip permutation p of the mean of ``deltas``.

    Under the null hypothesis (the arm makes no difference) each task's delta is as likely to have either
    sign. The statistic is ``|sum of deltas|``; the p is the share of the 2^m sign assignments of the m
    non-zero deltas whose statistic is at least the observed one. Zero deltas are ties: flipping them changes
    nothing, so they are left out. Exact enumeration up to :data:`EXACT_SIGN_FLIP_MAX` non-zero deltas; above,
    ``draws`` random sign vectors with a fixed seed, with the observed assignment counted once
    ((hits + 1) / (draws + 1)). At one cell per task and arm with pass/fail outcomes this equals McNemar's
    exact test (:func:`mcnemar_exact`). One row of :func:`sign_flip_pvalues`.
    """
    nonzero = [float(d) for d in deltas if d != 0]
    if not nonzero:
        return 1.0
    return float(sign_flip_pvalues([nonzero], draws=draws, seed=seed)[0])


def sign_flip_pvalues(
    deltas: Sequence[Sequence[float]] | NDArray[np.float64],
    *,
    exact_max: int = EXACT_SIGN_FLIP_MAX,
    draws: int = SIGN_FLIP_DRAWS,
    normal_above: int | None = None,
    seed: int = SEED,
) -> NDArray[np.float64]:
    """Two-sided sign-flip p of every row of ``deltas`` (rows x tasks): the one implementation of the test,
    for ``repo compare`` (one row, :func:`sign_flip_p`) and for the simulated studies of ``repo plan``.

    Exact up to ``exact_max`` tasks (every one of the 2^tasks sign vectors; a zero delta changes nothing
    under a flip, so enumerating every task's sign equals enumerating the non-zero ones'); above
    ``normal_above`` tasks (when given) the normal approximation of the sum; else ``draws`` random sign
    vectors with the fixed ``seed``, shared by every row, the observed assignment counted once
    ((hits + 1) / (draws + 1)). A tolerance of 1e-9 of the deltas' size keeps ties in floating point ties.
    """
    # numpy costs a start ~0.1 s; only a statistic needs it
    import numpy as np

    values = np.asarray(deltas, dtype=float)
    rows, tasks = values.shape
    observed = np.abs(values.sum(axis=1))
    floor = observed - 1e-9 * np.maximum(1.0, np.abs(values).sum(axis=1))
    if tasks <= exact_max:
        codes = np.arange(2**tasks, dtype=np.int64)[:, None]
        signs = 1.0 - 2.0 * ((codes >> np.arange(tasks, dtype=np.int64)) & 1)
        exact: NDArray[np.float64] = (np.abs(values @ signs.T) >= floor[:, None]).sum(axis=1) / 2**tasks
        return exact
    if normal_above is not None and tasks > normal_above:
        # scipy.stats costs a start ~0.3 s; only this statistic needs it
        from scipy.stats import norm

        scale = np.sqrt((values**2).sum(axis=1))
        z = np.divide(observed, scale, out=np.zeros_like(observed), where=scale > 0)
        normal: NDArray[np.float64] = np.where(scale > 0, 2.0 * norm.sf(z), 1.0)
        return normal
    rng = np.random.default_rng(seed)
    hits = np.zeros(rows)
    per_draw = max(1, 2_000_000 // tasks)  # sign vectors held at once
    for start in range(0, draws, per_draw):
        signs = rng.choice(np.array([-1.0, 1.0]), size=(min(per_draw, draws - start), tasks))
        per_block = max(1, 4_000_000 // len(signs))  # rows of the (rows x sign vectors) matrix held at once
        for row in range(0, rows, per_block):
            block = slice(row, row + per_block)
            hits[block] += (np.abs(values[block] @ signs.T) >= floor[block, None]).sum(axis=1)
    estimated: NDArray[np.float64] = (hits + 1) / (draws + 1)
    return estimated


def holm(pvalues: Sequence[float]) -> list[float]:
    """Holm-Bonferroni adjusted p-values, in the order given (step-down, monotone, capped at 1)."""
    m = len(pvalues)
    order = sorted(range(m), key=lambda i: pvalues[i])
    adjusted = [0.0] * m
    running = 0.0
    for rank, i in enumerate(order):
        running = max(running, min(1.0, (m - rank) * pvalues[i]))
        adjusted[i] = running
    return adjusted


def mcnemar_exact(b: int, c: int) -> float:
    """McNemar's exact test of the discordant pairs ``b`` (only baseline passed) and ``c`` (only treatment).

    Two-sided binomial test of min(b, c) against Binomial(b + c, 1/2); 1.0 without discordant pairs.
    """
    n = b + c
    if n == 0:
        return 1.0
    # scipy.stats costs a start ~0.3 s; only this statistic needs it
    from scipy.stats import binom

    return float(min(1.0, 2.0 * binom.cdf(min(b, c), n, 0.5)))


def fisher_exact_p(a_yes: int, a_no: int, b_yes: int, b_no: int) -> float:
    """Fisher's exact test of the 2x2 table ``[[a_yes, a_no], [b_yes, b_no]]``, two-sided (scipy's: the
    tables as likely as or less likely than the observed one, under fixed margins). 1.0 for an empty row."""
    if a_yes + a_no == 0 or b_yes + b_no == 0:
        return 1.0
    # scipy.stats costs a start ~0.3 s; only this statistic needs it
    from scipy.stats import fisher_exact

    return float(fisher_exact([[a_yes, a_no], [b_yes, b_no]], alternative="two-sided").pvalue)


def cohen_kappa(a: Sequence[Hashable], b: Sequence[Hashable]) -> float | None:
    """Cohen's kappa of two raters' labels for the same items; None when it is undefined.

    Undefined for no items and when chance agreement is 1 (both raters gave every item the same label).
    """
    if len(a) != len(b):
        raise ValueError(f"the raters labelled {len(a)} and {len(b)} items")
    n = len(a)
    if n == 0:
        return None
    observed = sum(1 for x, y in zip(a, b, strict=True) if x == y) / n
    labels = set(a) | set(b)
    expected = sum((list(a).count(lab) / n) * (list(b).count(lab) / n) for lab in labels)
    if expected >= 1.0:
        return None
    return (observed - expected) / (1.0 - expected)


def newcombe_interval(k1: int, n1: int, k2: int, n2: int, conf: float = 0.95) -> Interval | None:
    """Newcombe's hybrid score interval of ``k2/n2 - k1/n1``, two independent proportions; None when either
    has no trials.

    Built from each proportion's :func:`wilson_interval`, so it stays inside [-1, 1] and is not empty at 0/n
    or n/n. It treats the cells of one task and arm as independent trials: the interval of one task's
    difference, not of an arm's effect (that is compare's interval over tasks).
    """
    first, second = wilson_interval(k1, n1, conf), wilson_interval(k2, n2, conf)
    if first is None or second is None:
        return None
    p1, p2 = k1 / n1, k2 / n2
    (l1, u1), (l2, u2) = first, second
    delta = p2 - p1
    return (
        delta - math.sqrt((p2 - l2) ** 2 + (u1 - p1) ** 2),
        delta + math.sqrt((u2 - p2) ** 2 + (p1 - l1) ** 2),
    )


def _check_counts(n: int, c: int, k: int) -> None:
    if n < 0 or c < 0 or c > n or k < 1:
        raise ValueError(f"need 0 <= c <= n and k >= 1, got n={n}, c={c}, k={k}")


def pass_at_k(n: int, c: int, k: int) -> float | None:
    """pass@k: the chance that at least one of ``k`` attempts passes, from ``c`` passes in ``n`` attempts.

    The unbiased estimator ``1 - C(n-c, k) / C(n, k)``: the share of the k-subsets of the n attempts that hold
    a pass (Chen et al. 2021). None when ``n < k``: fewer attempts than k estimate nothing.
    """
    _check_counts(n, c, k)
    if n < k:
        return None
    return 1.0 - math.comb(n - c, k) / math.comb(n, k)


def pass_hat_k(n: int, c: int, k: int) -> float | None:
    """pass^k: the chance that every one of ``k`` attempts passes, from ``c`` passes in ``n`` attempts.

    The unbiased estimator ``C(c, k) / C(n, k)``: the share of the k-subsets of the n attempts that pass
    whole (Yao et al. 2024, tau-bench). None when ``n < k``.
    """
    _check_counts(n, c, k)
    if n < k:
        return None
    return math.comb(c, k) / math.comb(n, k)


def mean(values: Sequence[float]) -> float | None:
    """Arithmetic mean, None for no values."""
    return math.fsum(values) / len(values) if values else None
