"""repo_perf.v1: what a repository's ``perf`` entry point writes to {out} for one variant.

The framework owns the protocol (baseline = oracle, interleaved order, the control run, the noise band and
the verdict) and calls ``perf: "<command> --variant {variant} --out {out}"`` once per variant and round;
the command wraps whatever benchmark tool fits and reports one metric's values, one per repetition.
"""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import Field, StrictBool, StrictInt, StrictStr

from dokimi.schemas._base import Document

Value = Annotated[float, Field(strict=True, allow_inf_nan=False)]


class RepoPerf(Document):
    """One variant's measurements of one metric."""

    schema_: Literal["repo_perf.v1"] = Field(alias="schema")
    """Document type and version."""
    metric: str = Field(min_length=1)
    """Metric name, for example ``objective_ratio``. Prefer a ratio taken within each repetition to a wall
    time."""
    unit: str = Field(min_length=1)
    """Unit of the values, for example ``ratio``, ``s`` or ``ns/op``."""
    variant: str = Field(min_length=1)
    """The variant measured, as passed in ``--variant`` (the agent's build, the oracle, or the oracle
    control)."""
    values: list[Value] = Field(min_length=1)
    """One value per repetition, in the order measured."""
    size: dict[str, StrictInt | float | StrictStr | StrictBool] | None = None
    """The input size these values were measured at (one entry of the task's ``perf.sizes``); null when the
    task has no sizes."""
    details: dict[str, Any] = Field(default_factory=dict)
    """Free-form output of the benchmark tool (machine, threads, raw timings); stored, never aggregated."""
