"""The performance-check protocol as pure functions over numbers: no docker, no files.

The framework owns the protocol; the repository's ``perf`` entry point only measures one variant and writes
repo_perf.v1. The rules, one function each:

- :func:`plan_rounds`: every round runs the candidate once and the oracle twice, in shuffled order. The
  first oracle run of a round is the baseline, the second the control. The candidate's position cycles
  through first, middle and last over the rounds (balanced, then shuffled with the seed), so drift within a
  round (warm-up, a neighbour's load) falls on the candidate as often as on the baseline.
- :func:`ratio_per_repetition`: the metric is compared as a ratio taken within each repetition (repetition
  ``i`` of the candidate over repetition ``i`` of the baseline of the same round and size), never as a wall
  time across rounds.
- :func:`noise_band` and :func:`control_in_band`: the control is the oracle against itself. A round whose
  control's median ratio lies outside the baseline run's own spread (its repetitions relative to their
  median, never narrower than :data:`NOISE_FLOOR`) measured noise, not code: the round is dropped.
- :func:`measured_noise`: the noise band of the verdict is the range of every control ratio of the valid
  rounds (at least the floor band).
- :func:`verdict`: the check fails when the median ratio exceeds the tolerance AND lies above the measured
  noise band. No valid round: not measured (``passed`` None), never a pass.
- :func:`complexity_regression`: with sizes (listed smallest to largest), the ratio grows with input size
  when no step from one size to the next falls below the noise band and the ratio at the largest size over
  the ratio at the smallest lies above it.

Metrics are costs (time, ns/op): lower is better, and a ratio above 1 is a slowdown.
"""

from __future__ import annotations

import random
import statistics
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

Slot = Literal["candidate", "oracle", "control"]
"""One run of a round: the agent's tree, the oracle (the baseline), or the oracle again (the control)."""
SLOTS: tuple[Slot, ...] = ("candidate", "oracle", "control")

NOISE_FLOOR = 0.05
"""No band is narrower than ±5%: back-to-back timings on a shared host are not trusted below that, so a
benchmark whose repetitions happen to agree closely does not turn every small wobble into an invalid round or
a failure."""


@dataclass(frozen=True)
class Band:
    """A band of ratios ``[lo, hi]`` that noise alone explains."""

    lo: float
    hi: float

    def __contains__(self, value: object) -> bool:
        return isinstance(value, (int, float)) and self.lo <= value <= self.hi

    def to_json(self) -> list[float]:
        return [self.lo, self.hi]


def floor_band(floor: float = NOISE_FLOOR) -> Band:
    """The narrowest band: ``[1/(1+floor), 1+floor]``."""
    return Band(1.0 / (1.0 + floor), 1.0 + floor)


def _widen(band: Band, floor: float) -> Band:
    least = floor_band(floor)
    return Band(min(band.lo, least.lo), max(band.hi, least.hi))


# --- the plan -----------------------------------------------------------------------------------------------


def plan_rounds(rounds: int, seed: int) -> list[tuple[Slot, ...]]:
    """The order of the runs of each round: one candidate and two oracle runs, the first oracle run the
    baseline and the second the control. The candidate is first, in the middle and last equally often (up to
    ``rounds % 3``); which round gets which position is shuffled with ``seed``. Same seed, same plan."""
    if rounds < 1:
        raise ValueError(f"rounds must be >= 1, not {rounds}")
    rng = random.Random(seed)
    positions = [i % 3 for i in range(rounds)]
    rng.shuffle(positions)
    plan: list[tuple[Slot, ...]] = []
    for position in positions:
        order: list[Slot] = ["oracle", "control"]
        order.insert(position, "candidate")
        plan.append(tuple(order))
    return plan


def variant_of(slot: Slot) -> Literal["candidate", "oracle"]:
    """What ``--variant`` the entry point gets: the control is the oracle, and must not be told apart."""
    return "candidate" if slot == "candidate" else "oracle"


# --- ratios and noise ---------------------------------------------------------------------------------------


def ratio_per_repetition(candidate: Sequence[float], baseline: Sequence[float]) -> list[float]:
    """``candidate[i] / baseline[i]`` for each repetition. Both runs must have the same number of
    repetitions, and every baseline value must be a positive cost (a ratio to zero means nothing)."""
    if len(candidate) != len(baseline):
        raise ValueError(f"{len(candidate)} repetitions against {len(baseline)}: a ratio needs pairs")
    if not baseline:
        raise ValueError("no repetitions")
    if any(b <= 0 for b in baseline) or any(c < 0 for c in candidate):
        raise ValueError("values must be costs: the baseline > 0, the candidate >= 0")
    return [c / b for c, b in zip(candidate, baseline, strict=True)]


def noise_band(baseline: Sequence[float], floor: float = NOISE_FLOOR) -> Band:
    """The baseline run's own spread: its smallest and largest repetition over its median, widened to at
    least ``[1/(1+floor), 1+floor]``."""
    if not baseline:
        raise ValueError("no repetitions")
    mid = statistics.median(baseline)
    if mid <= 0:
        raise ValueError("values must be positive costs")
    return _widen(Band(min(baseline) / mid, max(baseline) / mid), floor)


def control_in_band(control_ratios: Sequence[float], band: Band) -> bool:
    """A round is valid when the control's median ratio to the baseline lies inside the baseline's own noise
    band; a control outside it invalidates the round."""
    return bool(control_ratios) and statistics.median(control_ratios) in band


def measured_noise(control_ratios: Sequence[float], floor: float = NOISE_FLOOR) -> Band:
    """The noise of the verdict: the range of the control ratios of the valid rounds (the oracle against
    itself, back to back), widened to at least the floor band."""
    if not control_ratios:
        return floor_band(floor)
    return _widen(Band(min(control_ratios), max(control_ratios)), floor)


# --- the verdict --------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class PerfVerdict:
    """Pass, fail or not measured, with the numbers that decided it."""

    passed: bool | None
    """False: slower beyond tolerance and noise; None: not measured (no valid round, or a run failed)."""
    median_ratio: float | None
    """Median candidate/baseline ratio over the repetitions of the valid rounds."""
    band: Band | None
    """The measured noise band it was compared with."""
    reason: str

    def to_json(self) -> dict[str, Any]:
        return {
            "passed": self.passed,
            "median_ratio": self.median_ratio,
            "band": self.band.to_json() if self.band is not None else None,
            "reason": self.reason,
        }


def verdict(ratios: Sequence[float], tolerance: float, noise: Band) -> PerfVerdict:
    """Fails when the median ratio exceeds ``tolerance`` and lies above the measured noise band; an effect
    inside the noise cannot be told from it, so it passes."""
    if not ratios:
        return PerfVerdict(None, None, noise, "no valid round: nothing was measured")
    median = statistics.median(ratios)
    shown = f"median ratio {median:.3g}"
    band = f"[{noise.lo:.3g}, {noise.hi:.3g}]"
    if median <= tolerance:
        return PerfVerdict(True, median, noise, f"{shown} is within the tolerance {tolerance:g}")
    if median <= noise.hi:
        return PerfVerdict(
            True,
            median,
            noise,
            f"{shown} exceeds the tolerance {tolerance:g} but lies inside the noise band {band}: "
            "not distinguishable from noise",
        )
    return PerfVerdict(
        False,
        median,
        noise,
        f"{shown} exceeds the tolerance {tolerance:g} and lies outside the noise band {band}",
    )


def complexity_regression(median_ratios: Sequence[float], noise: Band) -> bool:
    """The ratio grows with input size (sizes ordered smallest to largest): no step to the next size falls
    below the noise band (``r[k+1] >= r[k] * noise.lo``), and the largest size's ratio over the smallest's
    lies above it (``r[-1] / r[0] > noise.hi``). Fewer than two sizes: never."""
    if len(median_ratios) < 2 or median_ratios[0] <= 0:
        return False
    steps_hold = all(b >= a * noise.lo for a, b in zip(median_ratios, median_ratios[1:], strict=False))
    return steps_hold and median_ratios[-1] / median_ratios[0] > noise.hi


# --- evaluating measured rounds -----------------------------------------------------------------------------


@dataclass(frozen=True)
class RoundMeasurement:
    """The values of one round at one size: one list per slot, one value per repetition."""

    round: int
    size_index: int | None
    values: Mapping[Slot, Sequence[float]]


@dataclass(frozen=True)
class RoundResult:
    round: int
    ratios: list[float]
    control_ratios: list[float]
    band: Band
    """The baseline's own noise band the control was checked against."""
    valid: bool

    def to_json(self) -> dict[str, Any]:
        return {
            "round": self.round,
            "ratios": self.ratios,
            "control_ratios": self.control_ratios,
            "band": self.band.to_json(),
            "valid": self.valid,
        }


@dataclass(frozen=True)
class SizeResult:
    size_index: int | None
    size: Mapping[str, Any] | None
    rounds: list[RoundResult]
    noise: Band
    verdict: PerfVerdict

    def to_json(self) -> dict[str, Any]:
        return {
            "size_index": self.size_index,
            "size": dict(self.size) if self.size is not None else None,
            "rounds": [r.to_json() for r in self.rounds],
            "noise": self.noise.to_json(),
            "verdict": self.verdict.to_json(),
        }


@dataclass
class PerfReport:
    """The whole check: one result per size, the overall verdict and the complexity flag."""

    sizes: list[SizeResult] = field(default_factory=list)
    passed: bool | None = None
    ratio: float | None = None
    """The worst (largest) median ratio over the sizes."""
    complexity_regression: bool | None = None
    """None without at least two measured sizes."""
    reason: str = ""
    error: str | None = None
    """Why the check could not be completed (a run failed), when it could not."""

    def metrics(self) -> dict[str, bool | float | None]:
        """The metrics for result.json: ``perf_ratio``, ``perf_pass`` and ``perf_scaling_ok`` (null when not
        measured, never false)."""
        scaling = None if self.complexity_regression is None else not self.complexity_regression
        return {"perf_ratio": self.ratio, "perf_pass": self.passed, "perf_scaling_ok": scaling}

    def to_json(self) -> dict[str, Any]:
        return {
            "passed": self.passed,
            "ratio": self.ratio,
            "complexity_regression": self.complexity_regression,
            "reason": self.reason,
            "error": self.error,
            "sizes": [s.to_json() for s in self.sizes],
        }


def evaluate_round(measured: RoundMeasurement, floor: float = NOISE_FLOOR) -> RoundResult:
    """Ratios of one round, and whether its control stayed inside the baseline's own noise band."""
    baseline = measured.values["oracle"]
    ratios = ratio_per_repetition(measured.values["candidate"], baseline)
    control = ratio_per_repetition(measured.values["control"], baseline)
    band = noise_band(baseline, floor)
    return RoundResult(measured.round, ratios, control, band, control_in_band(control, band))


def evaluate_size(
    rounds: Sequence[RoundMeasurement],
    tolerance: float,
    *,
    size: Mapping[str, Any] | None = None,
    floor: float = NOISE_FLOOR,
) -> SizeResult:
    """The verdict at one size from its rounds: only valid rounds count."""
    results = [evaluate_round(m, floor) for m in rounds]
    valid = [r for r in results if r.valid]
    ratios = [x for r in valid for x in r.ratios]
    noise = measured_noise([x for r in valid for x in r.control_ratios], floor)
    found = verdict(ratios, tolerance, noise)
    dropped = len(results) - len(valid)
    if dropped and found.passed is not None:
        found = PerfVerdict(
            found.passed,
            found.median_ratio,
            found.band,
            f"{found.reason} ({dropped} of {len(results)} rounds dropped: control outside its noise band)",
        )
    elif not valid and results:
        found = PerfVerdict(
            None, None, noise, f"every one of {len(results)} rounds had its control outside its noise band"
        )
    index = rounds[0].size_index if rounds else None
    return SizeResult(index, size, results, noise, found)


def evaluate(
    measurements: Sequence[RoundMeasurement],
    tolerance: float,
    *,
    sizes: Sequence[Mapping[str, Any]] | None = None,
    floor: float = NOISE_FLOOR,
) -> PerfReport:
    """The whole check from every round at every size: passes when every size passes; fails when one fails;
    otherwise not measured. The complexity flag compares the sizes' median ratios."""
    by_size: dict[int | None, list[RoundMeasurement]] = {}
    for m in measurements:
        by_size.setdefault(m.size_index, []).append(m)
    report = PerfReport()
    for index in sorted(by_size, key=lambda i: -1 if i is None else i):
        size = sizes[index] if sizes is not None and index is not None else None
        report.sizes.append(evaluate_size(by_size[index], tolerance, size=size, floor=floor))
    outcomes = [s.verdict.passed for s in report.sizes]
    medians = [s.verdict.median_ratio for s in report.sizes]
    if not outcomes:
        report.passed, report.reason = None, "nothing was measured"
        return report
    report.passed = False if False in outcomes else None if None in outcomes else True
    measured = [m for m in medians if m is not None]
    report.ratio = max(measured) if measured else None
    report.reason = "; ".join(_size_label(s) + s.verdict.reason for s in report.sizes)
    if len(report.sizes) >= 2 and all(m is not None for m in medians):
        noise = _union([s.noise for s in report.sizes])
        report.complexity_regression = complexity_regression([m for m in medians if m is not None], noise)
        if report.complexity_regression:
            report.reason += (
                f"; the ratio grows with input size ({' -> '.join(f'{m:.3g}' for m in measured)}) "
                f"beyond the noise band [{noise.lo:.3g}, {noise.hi:.3g}]: a complexity regression"
            )
    return report


def _union(bands: Sequence[Band]) -> Band:
    return Band(min(b.lo for b in bands), max(b.hi for b in bands))


def _size_label(size: SizeResult) -> str:
    if size.size is None:
        return ""
    return "size " + ", ".join(f"{k}={v}" for k, v in size.size.items()) + ": "
