"""Power of the paired comparison, by simulation on a pilot's own data (``repo plan``, and ``repo compare``'s
underpowered note).

``repo compare`` reduces each task to one value per arm (the mean over its reps) and tests the per-task deltas
with a two-sided sign-flip permutation test. How many tasks and reps that test needs to see an effect depends
on three things a pilot batch shows: how much one task's reps disagree (within-task variance), how much tasks
differ (which, for pass/fail cells, sets each task's variance p(1-p)), and how much the arm's effect differs
from task to task (heterogeneity). This module estimates them from the pilot and simulates whole studies:

- **pass/fail (gate)**. Each task has its own pass probability. The pilot's baseline cells give a
  beta-binomial fit (the intraclass correlation ``icc``: how alike one task's reps are) and, per task, the
  posterior Beta(a + k, b + n - k). A simulated study draws tasks from the pilot's tasks (with replacement),
  a pass probability p from each drawn task's posterior, and the treatment's probability
  ``expit(logit p + c + u)``: ``c`` is set so the mean gain over the pilot's tasks is the target effect, and
  ``u ~ N(0, tau^2)`` is the task-to-task heterogeneity of the effect, estimated from the pilot's two arms
  when it has both (simulated method of moments on the variance of the per-task deltas), else 0.
- **numbers (score, cost, turns, metrics)**. A task's reps are its mean plus residuals drawn from the pilot's
  pooled within-task residuals; the treatment adds the target effect plus ``u ~ N(0, tau^2)``, tau^2 being
  the variance of the pilot's per-task deltas beyond what the within-task noise explains.

Each simulated study is tested exactly as ``repo compare`` tests (sign-flip p of the per-task deltas: exact
enumeration up to :data:`EXACT_TASKS` tasks, else :data:`FLIP_DRAWS` random sign vectors); the power is the
share of studies with p < alpha. :func:`plan` searches, per number of reps, the fewest tasks that reach the
target power. Everything is vectorised with numpy and seeded: the same pilot gives the same plan.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Literal

import numpy as np

from dokimi.errors import UsageError
from dokimi.stats import sign_flip_pvalues

if TYPE_CHECKING:
    from numpy.typing import NDArray


__all__ = [
    "DEFAULT_REPS",
    "EXACT_TASKS",
    "FLIP_DRAWS",
    "PilotFit",
    "PilotTask",
    "PlanResult",
    "PlanRow",
    "fit_pilot",
    "minimum_detectable_effect",
    "plan",
    "study_pvalues",
    "simulate_power",
]

EXACT_TASKS = 12
"""Up to this many tasks a simulated study's sign-flip p is enumerated exactly (2^tasks sign vectors)."""
FLIP_DRAWS = 2000
"""Random sign vectors per simulated study above :data:`EXACT_TASKS` tasks."""
NORMAL_TASKS = 60
"""Above this many tasks the sign-flip p is its normal approximation (the permutation distribution of a sum
of many +-d_i is close to normal; the simulation only needs to know whether p < alpha)."""
DEFAULT_REPS = (1, 2, 3, 5)
"""Reps per (task, arm) the plan is worked out for, besides the pilot's own."""
DEFAULT_SIMS = 3000
"""Simulated studies per evaluated size."""
MAX_TASKS = 5000
CELLS_PER_BLOCK = 4_000_000
"""Simulated cells held at once by :func:`simulate_power`."""
"""The search gives up above this many tasks."""
SEED = 20240917

Kind = Literal["binary", "continuous"]


@dataclass(frozen=True)
class PilotTask:
    """One task of the pilot: its cells' values per arm (0/1 for pass/fail)."""

    task: str
    baseline: tuple[float, ...]
    treatment: tuple[float, ...] = ()


@dataclass
class PilotFit:
    """What the simulation takes from the pilot."""

    kind: Kind
    tasks: int
    reps: float
    """Median reps per task in the baseline arm."""
    baseline_mean: float
    icc: float | None = None
    """Binary: the intraclass correlation of one task's reps (beta-binomial), in (0, 1)."""
    within_sd: float | None = None
    """Continuous: the pooled within-task standard deviation of one cell."""
    between_sd: float | None = None
    """Standard deviation of the per-task baseline means (descriptive)."""
    heterogeneity_sd: float = 0.0
    """tau: the task-to-task standard deviation of the arm's effect (logit scale for pass/fail)."""
    observed_delta: float | None = None
    """The pilot's own mean per-task delta, when it has both arms."""
    paired_tasks: int = 0
    # the simulation's inputs
    alpha_beta: tuple[float, float] | None = None
    heterogeneity_included: bool = False
    """Whether the pilot's per-task deltas vary more than a uniform effect explains (one-sided, 5%): only
    then is tau part of the simulation."""
    shifts: dict[tuple[float, float], float] = field(default_factory=dict, repr=False)
    """Cache of the logit shift per (effect, tau)."""
    counts: list[tuple[int, int]] = field(default_factory=list)
    """Binary: (passes, cells) of each task's baseline."""
    residuals: list[float] = field(default_factory=list)
    """Continuous: the pooled within-task residuals (scaled to unbiased variance)."""


@dataclass(frozen=True)
class PlanRow:
    reps: int
    tasks: int | None
    """Fewest tasks reaching the target power; None when not reached by :data:`MAX_TASKS`."""
    power: float | None
    """The simulated power at that size."""

    @property
    def cells(self) -> int | None:
        """Cells of the study: two arms x tasks x reps."""
        return None if self.tasks is None else 2 * self.tasks * self.reps


@dataclass
class PlanResult:
    fit: PilotFit
    effect: float
    alpha: float
    target: float
    sims: int
    rows: list[PlanRow]
    recommended: PlanRow | None
    tasks_available: int | None


# --- the test, vectorised ----------------------------------------------------------------------------------


def study_pvalues(deltas: NDArray[np.float64], *, seed: int = SEED) -> NDArray[np.float64]:
    """The sign-flip p of every simulated study (a row of ``deltas``), as ``repo compare`` tests one
    (:func:`dokimi.stats.sign_flip_pvalues`): exact up to :data:`EXACT_TASKS` tasks, :data:`FLIP_DRAWS` random
    sign vectors above, the normal approximation above :data:`NORMAL_TASKS` (the simulation only needs to know
    whether p < alpha)."""
    return sign_flip_pvalues(
        deltas, exact_max=EXACT_TASKS, draws=FLIP_DRAWS, normal_above=NORMAL_TASKS, seed=seed
    )


# --- fitting the pilot -------------------------------------------------------------------------------------


def _is_binary(tasks: Sequence[PilotTask]) -> bool:
    return all(v in (0.0, 1.0) for t in tasks for v in (*t.baseline, *t.treatment))


def _beta_binomial(counts: Sequence[tuple[int, int]]) -> tuple[float, float, float, float]:
    """(mean, icc, a, b) of a beta-binomial fitted by the ANOVA estimator of the intraclass correlation."""
    total_k = sum(k for k, _ in counts)
    total_n = sum(n for _, n in counts)
    m = total_k / total_n
    groups = len(counts)
    msb = sum(n * (k / n - m) ** 2 for k, n in counts) / max(1, groups - 1)
    msw = sum(k * (1 - k / n) for k, n in counts) / max(1, total_n - groups)
    n0 = (total_n - sum(n * n for _, n in counts) / total_n) / max(1, groups - 1)
    denom = msb + (n0 - 1) * msw
    icc = (msb - msw) / denom if denom > 0 else 0.999
    icc = min(0.999, max(1e-3, icc))
    m = min(1 - 1e-6, max(1e-6, m))
    size = (1 - icc) / icc
    return m, icc, m * size, (1 - m) * size


def fit_pilot(tasks: Sequence[PilotTask], *, seed: int = SEED) -> PilotFit:
    """Estimate the simulation's inputs from the pilot (see the module docstring). UsageError when the pilot
    cannot show within-task variance (no task with two or more baseline cells) or has fewer than two tasks."""
    usable = [t for t in tasks if t.baseline]
    if len(usable) < 2:
        raise UsageError(
            f"the pilot has {len(usable)} task(s) with finished baseline cells; a plan needs at least two",
            hint="run a pilot batch over more tasks (3 or more reps each) first",
        )
    if not any(len(t.baseline) >= 2 for t in usable):
        raise UsageError(
            "no task of the pilot has two or more baseline cells, so its within-task variance is unknown",
            hint="run the pilot with --reps 2 or more",
        )
    kind: Kind = "binary" if _is_binary(usable) else "continuous"
    means = [float(np.mean(t.baseline)) for t in usable]
    reps = float(np.median([len(t.baseline) for t in usable]))
    paired = [t for t in usable if t.treatment]
    deltas = [float(np.mean(t.treatment) - np.mean(t.baseline)) for t in paired]
    fit = PilotFit(
        kind=kind,
        tasks=len(usable),
        reps=reps,
        baseline_mean=float(np.mean(means)),
        between_sd=float(np.std(means, ddof=1)),
        observed_delta=float(np.mean(deltas)) if deltas else None,
        paired_tasks=len(paired),
    )
    if kind == "binary":
        counts = [(int(sum(t.baseline)), len(t.baseline)) for t in usable]
        _m, icc, a, b = _beta_binomial(counts)
        fit.icc, fit.alpha_beta, fit.counts = icc, (a, b), counts
        if len(paired) >= 3:
            fit.heterogeneity_sd = _binary_tau(fit, paired, seed=seed)
    else:
        residuals: list[float] = []
        for t in usable:
            n = len(t.baseline)
            if n >= 2:
                centre = float(np.mean(t.baseline))
                scale = math.sqrt(n / (n - 1))
                residuals += [(v - centre) * scale for v in t.baseline]
        fit.residuals = residuals
        fit.within_sd = float(np.sqrt(np.mean(np.square(residuals)))) if residuals else 0.0
        if len(paired) >= 3:
            noise = float(
                np.mean([fit.within_sd**2 * (1 / len(t.baseline) + 1 / len(t.treatment)) for t in paired])
            )
            observed = float(np.var(deltas, ddof=1))
            # one-sided 5% check that the deltas vary more than the within-task noise explains
            from scipy.stats import chi2

            limit = noise * float(chi2.ppf(0.95, len(paired) - 1)) / (len(paired) - 1)
            if observed > limit:
                fit.heterogeneity_included = True
                fit.heterogeneity_sd = math.sqrt(max(0.0, observed - noise))
    return fit


def _expit(x: NDArray[np.float64]) -> NDArray[np.float64]:
    return np.asarray(1.0 / (1.0 + np.exp(-x)))


def _logit(p: NDArray[np.float64]) -> NDArray[np.float64]:
    clipped = np.clip(p, 1e-9, 1 - 1e-9)
    return np.asarray(np.log(clipped) - np.log1p(-clipped))


def _draw_probabilities(
    fit: PilotFit, rng: np.random.Generator, shape: tuple[int, ...]
) -> NDArray[np.float64]:
    """Pass probabilities of simulated tasks: a pilot task drawn at random, then p from its posterior."""
    assert fit.alpha_beta is not None
    a, b = fit.alpha_beta
    counts = np.asarray(fit.counts, dtype=float)
    pick = rng.integers(0, len(counts), size=shape)
    k, n = counts[pick, 0], counts[pick, 1]
    drawn: NDArray[np.float64] = rng.beta(a + k, b + n - k)
    return drawn


def effect_out_of_range(effect: float, baseline: float, lowest: float, highest: float) -> UsageError:
    """The refusal of an ``--effect`` the pass rate cannot move by: the effect is added to the baseline's pass
    rate, which stays between 0 and 1, so from a baseline of 0.75 only effects between -0.75 and +0.25 exist
    (``lowest`` and ``highest``, the gains of the most extreme shift, a little inside those)."""
    return UsageError(
        f"--effect {effect:+.3f} is not possible from the baseline's pass rate of {baseline:.3f}: an effect "
        f"is added to that rate, and a pass rate stays between 0 and 1",
        hint=f"give --effect between {math.ceil(lowest * 1000) / 1000:+.3f} and "
        f"{math.floor(highest * 1000) / 1000:+.3f} (not 0: no change needs no study)",
    )


def _logit_shift(fit: PilotFit, effect: float, tau: float, *, seed: int) -> float:
    """The logit shift c whose mean gain over the pilot's task distribution is ``effect`` (cached)."""
    cached = fit.shifts.get((effect, tau))
    if cached is not None:
        return cached
    rng = np.random.default_rng(seed + 1)
    p = _draw_probabilities(fit, rng, (50_000,))
    u = rng.normal(0.0, tau, size=p.shape) if tau > 0 else np.zeros_like(p)
    base = _logit(p)

    def gain(c: float) -> float:
        return float(np.mean(_expit(base + c + u) - p))

    lo, hi = -30.0, 30.0
    if not gain(lo) <= effect <= gain(hi):
        raise effect_out_of_range(effect, fit.baseline_mean, gain(lo), gain(hi))
    for _ in range(50):
        mid = (lo + hi) / 2
        if gain(mid) < effect:
            lo = mid
        else:
            hi = mid
    fit.shifts[(effect, tau)] = (lo + hi) / 2
    return fit.shifts[(effect, tau)]


def _binary_tau(fit: PilotFit, paired: Sequence[PilotTask], *, seed: int) -> float:
    """tau by simulated method of moments: the heterogeneity whose simulated variance of per-task deltas (at
    the pilot's own reps and effect) matches the pilot's observed variance. 0 unless the observed variance
    exceeds the 95th percentile of what pilots of this size give with a uniform effect: a sample variance of
    a few hundred tasks is noisy, and an invented heterogeneity would only make the plan ask for more."""
    deltas = np.array([np.mean(t.treatment) - np.mean(t.baseline) for t in paired])
    observed_var = float(np.var(deltas, ddof=1))
    effect = float(np.clip(deltas.mean(), -0.9, 0.9))
    n_b = int(round(float(np.median([len(t.baseline) for t in paired]))))
    n_t = int(round(float(np.median([len(t.treatment) for t in paired]))))

    def simulated(tau: float, shape: tuple[int, ...]) -> NDArray[np.float64] | None:
        try:
            c = _logit_shift(fit, effect, tau, seed=seed)
        except UsageError:
            return None
        rng = np.random.default_rng(seed + 2)
        p = _draw_probabilities(fit, rng, shape)
        u = rng.normal(0.0, tau, size=p.shape) if tau > 0 else 0.0
        q = _expit(_logit(p) + c + u)
        return np.asarray(rng.binomial(n_t, q) / n_t - rng.binomial(n_b, p) / n_b)

    null = simulated(0.0, (400, len(paired)))
    if null is None or observed_var <= float(np.quantile(np.var(null, axis=1, ddof=1), 0.95)):
        return 0.0
    fit.heterogeneity_included = True

    def variance(tau: float) -> float:
        found = simulated(tau, (20_000,))
        return math.inf if found is None else float(np.var(found))

    lo, hi = 0.0, 6.0
    if variance(hi) <= observed_var:
        return hi
    for _ in range(20):
        mid = (lo + hi) / 2
        if variance(mid) < observed_var:
            lo = mid
        else:
            hi = mid
    return (lo + hi) / 2


# --- simulating studies ------------------------------------------------------------------------------------


def simulate_deltas(
    fit: PilotFit, effect: float, tasks: int, reps: int, sims: int, *, seed: int = SEED
) -> NDArray[np.float64]:
    """Per-task deltas (sims x tasks) of simulated studies with ``tasks`` tasks and ``reps`` reps per arm."""
    rng = np.random.default_rng(seed)
    tau = fit.heterogeneity_sd
    if fit.kind == "binary":
        c = _logit_shift(fit, effect, tau, seed=seed)
        p = _draw_probabilities(fit, rng, (sims, tasks))
        u = rng.normal(0.0, tau, size=p.shape) if tau > 0 else 0.0
        q = _expit(_logit(p) + c + u)
        return np.asarray((rng.binomial(reps, q) - rng.binomial(reps, p)) / reps)
    residuals = np.asarray(fit.residuals, dtype=float)
    if residuals.size == 0:
        residuals = np.zeros(1)
    noise_t = residuals[rng.integers(0, residuals.size, size=(sims, tasks, reps))].mean(axis=2)
    noise_b = residuals[rng.integers(0, residuals.size, size=(sims, tasks, reps))].mean(axis=2)
    u = rng.normal(0.0, tau, size=(sims, tasks)) if tau > 0 else 0.0
    return np.asarray(effect + u + noise_t - noise_b)


def simulate_power(
    fit: PilotFit, effect: float, tasks: int, reps: int, *, alpha: float = 0.05, sims: int = DEFAULT_SIMS,
    seed: int = SEED,
) -> float:  # fmt: skip
    """The share of simulated studies of this size whose sign-flip p is below ``alpha``. Studies are simulated
    in blocks of at most :data:`CELLS_PER_BLOCK` cells (a plan for 5000 tasks must not hold gigabytes), each
    block with its own seed derived from ``seed``, so the result does not depend on the machine."""
    per_study = tasks * max(1, reps)
    block = max(1, min(sims, CELLS_PER_BLOCK // per_study))
    hits = 0
    for index, start in enumerate(range(0, sims, block)):
        size = min(block, sims - start)
        deltas = simulate_deltas(fit, effect, tasks, reps, size, seed=seed + 7919 * index)
        hits += int((study_pvalues(deltas, seed=seed) < alpha).sum())
    return hits / sims


def _fewest_tasks(
    fit: PilotFit, effect: float, reps: int, *, alpha: float, target: float, sims: int, seed: int
) -> tuple[int | None, float | None]:
    """The fewest tasks with simulated power >= target: doubling, then bisection (common random numbers)."""
    cache: dict[int, float] = {}

    def power(n: int) -> float:
        if n not in cache:
            cache[n] = simulate_power(fit, effect, n, reps, alpha=alpha, sims=sims, seed=seed)
        return cache[n]

    lo, hi = 1, 2
    while power(hi) < target:
        lo, hi = hi, hi * 2
        if hi > MAX_TASKS:
            if power(MAX_TASKS) < target:
                return None, None
            hi = MAX_TASKS
            break
    while hi - lo > 1:
        mid = (lo + hi) // 2
        if power(mid) >= target:
            hi = mid
        else:
            lo = mid
    return hi, power(hi)


def plan(
    tasks: Sequence[PilotTask],
    effect: float,
    *,
    alpha: float = 0.05,
    target: float = 0.8,
    reps: Sequence[int] = DEFAULT_REPS,
    tasks_available: int | None = None,
    sims: int = DEFAULT_SIMS,
    seed: int = SEED,
) -> PlanResult:
    """Tasks x reps for ``target`` power at ``alpha`` to detect a mean per-task delta of ``effect``.

    One row per number of reps (``reps`` and the pilot's own). The recommendation is the cheapest row (fewest
    cells) whose tasks fit in ``tasks_available`` when given, else the cheapest row: more tasks beat more
    reps, because reps only shrink each task's own noise."""
    if effect == 0 or not math.isfinite(effect):
        raise UsageError(f"--effect {effect}: give the smallest non-zero delta worth detecting")
    if not 0 < alpha < 1 or not 0 < target < 1:
        raise UsageError("--alpha and --power are probabilities strictly between 0 and 1")
    fit = fit_pilot(tasks, seed=seed)
    options = sorted({*reps, max(1, int(round(fit.reps)))})
    rows: list[PlanRow] = []
    for r in options:
        n, p = _fewest_tasks(fit, effect, r, alpha=alpha, target=target, sims=sims, seed=seed)
        rows.append(PlanRow(reps=r, tasks=n, power=p))
    reached = [row for row in rows if row.tasks is not None]
    fitting = [row for row in reached if tasks_available is None or (row.tasks or 0) <= tasks_available]
    pool = fitting or ([] if tasks_available is not None else reached)
    recommended = min(pool, key=lambda row: (row.cells or 0, row.reps)) if pool else None
    return PlanResult(fit, effect, alpha, target, sims, rows, recommended, tasks_available)


def minimum_detectable_effect(
    deltas: Sequence[float], *, alpha: float = 0.05, target: float = 0.8, sims: int = 1000, seed: int = SEED
) -> float | None:
    """The smallest mean delta a study of these tasks detects with ``target`` power: the observed per-task
    deltas, centred, resampled and shifted by the effect, tested as compare tests. None for fewer than two
    tasks, or when no effect up to the deltas' range is detected (too few tasks: 5 tasks all up give at best
    p = 0.0625)."""
    values = np.asarray(deltas, dtype=float)
    n = values.size
    if n < 2:
        return None
    centred = values - values.mean()
    rng = np.random.default_rng(seed)
    draws = centred[rng.integers(0, n, size=(sims, n))]
    spread = float(np.max(np.abs(values))) or 1.0

    def power(effect: float) -> float:
        return float((study_pvalues(draws + effect, seed=seed) < alpha).mean())

    hi = max(spread, 1e-9)
    for _ in range(6):
        if power(hi) >= target:
            break
        hi *= 2
    else:
        return None
    lo = 0.0
    for _ in range(30):
        mid = (lo + hi) / 2
        if power(mid) >= target:
            hi = mid
        else:
            lo = mid
    return hi
