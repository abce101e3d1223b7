"""Performance checks: the framework's protocol around the repository's ``perf`` entry point.

- :mod:`dokimi.checks.perf.protocol`: the plan, ratios, control, noise band and verdict, as pure functions;
- :mod:`dokimi.checks.perf.spec`: the task's ``perf`` object and the environment of one invocation;
- :mod:`dokimi.grading.perf`: running the entry point per variant in the grade container (needs docker).
"""

from __future__ import annotations

from dokimi.checks.perf.protocol import (
    NOISE_FLOOR,
    Band,
    PerfReport,
    PerfVerdict,
    RoundMeasurement,
    complexity_regression,
    control_in_band,
    evaluate,
    measured_noise,
    noise_band,
    plan_rounds,
    ratio_per_repetition,
    verdict,
)
from dokimi.checks.perf.spec import TaskPerf, parse_perf, perf_problems, task_perf

__all__ = [
    "NOISE_FLOOR",
    "Band",
    "PerfReport",
    "PerfVerdict",
    "RoundMeasurement",
    "TaskPerf",
    "complexity_regression",
    "control_in_band",
    "evaluate",
    "measured_noise",
    "noise_band",
    "parse_perf",
    "perf_problems",
    "plan_rounds",
    "ratio_per_repetition",
    "task_perf",
    "verdict",
]
