"""result.json (repo_result.v1): the framework's verdict on one cell, written LAST to the run directory.

Its presence means the cell is done; a rerun skips a cell whose result.json validates (contract §9).
Reports and comparisons read only these documents.
"""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import Field, model_validator

from dokimi.schemas._base import Document
from dokimi.schemas.grade import MetricValue
from dokimi.schemas.meta import Mode

NonNegative = Annotated[float, Field(ge=0, allow_inf_nan=False)]


class Result(Document):
    """result.json: one cell's outcome (gate, score, metrics), cost and whether grading itself failed."""

    schema_: Literal["repo_result.v1"] = Field("repo_result.v1", alias="schema")
    """Document type and version."""
    task: str = Field(min_length=1)
    """Task id."""
    arm: str = Field(min_length=1)
    """Arm, for example ``guidance:raw``."""
    model: str = Field(min_length=1)
    """Model id as passed to the harness."""
    effort: str | None = None
    """Reasoning effort (agent-modes §1); null for the harness default. Reports never pool cells that
    differ."""
    mode: Mode | None = None
    """The task's agent mode (agent-modes §2); null when the task declares none."""
    rep: int = Field(ge=0)
    """Repetition index."""
    harness: str = Field(min_length=1)
    """Harness profile name."""
    harness_version: str | None = None
    """The harness version the run used, as reported inside the image."""
    family: str = Field(min_length=1)
    """The task's family (build, fix, feature, test, review, ...), for reporting."""
    gated: bool
    """Whether the task has a gate. False for a score-only task, whose result is ``score``."""
    passed: bool | None
    """The gate verdict: every gate entry held. Null exactly when the task is score-only."""
    score: Annotated[float, Field(allow_inf_nan=False)] | None = None
    """The value of the task's ``score.metric`` for a score-only task; null otherwise or when not measured."""
    gate_results: dict[str, bool | None] = Field(default_factory=dict)
    """Per gate entry (metric name): whether it held; null when the metric was not measured."""
    metrics: dict[str, MetricValue] = Field(default_factory=dict)
    """grade.json's metrics plus the framework's own (``mergeable``, ``merge_score``, ...)."""
    grader_failure: bool = False
    """True when grading failed (grade exited non-zero, timed out, wrote no valid grade.json, or
    grade_problems found a reason, or a host-side failure). It counts as a failure on every gated metric."""
    grader_error: str | None = None
    """Why grading failed; set exactly when ``grader_failure`` is true."""
    agent_rc: int | None = None
    """Exit status of the harness process; null when it did not exit on its own."""
    agent_timed_out: bool = False
    """True when the agent was stopped at its timeout (the cell is still graded)."""
    cost_usd: NonNegative | None = None
    """Cost the harness reported; null when it reported none."""
    turns: int | None = Field(default=None, ge=0)
    """Turns the harness reported; null when it reported none."""
    duration_s: NonNegative
    """Wall time of the agent's container, in seconds."""
    agent_network: str | None = None
    """The docker network the agent ran with (``--agent-network``); reports warn when it is set."""
    base_date: str | None = None
    """Committer date of the task base (ISO 8601), for the split against a model's training cutoff."""
    prompt_style: Literal["spec", "issue"] | None = None
    """The task's prompt style (mergeability §8); null when the task declares none."""

    @model_validator(mode="after")
    def _consistent(self) -> Result:
        for problem in result_problems(self):
            raise ValueError(problem)
        return self


def score_only_has_no_verdict(result: Result) -> str | None:
    """A score-only cell (not gated) has ``passed: null``; a gated cell has true or false."""
    if not result.gated and result.passed is not None:
        return "a score-only result (gated: false) has passed: null"
    if result.gated and result.passed is None:
        return "a gated result has passed true or false"
    return None


def grader_failure_fails_the_gate(result: Result) -> str | None:
    """A grader failure counts as a failure on every gated metric (contract §4.2)."""
    if result.grader_failure and result.passed:
        return "a grader failure cannot pass: it counts as a failure on every gated metric"
    if result.grader_failure and any(result.gate_results.values()):
        return "a grader failure holds no gate entry: every gate_results value is false or null"
    return None


def grader_error_explains_failure(result: Result) -> str | None:
    """``grader_error`` is set exactly when ``grader_failure`` is true."""
    if result.grader_failure and not result.grader_error:
        return "grader_failure is true: grader_error must say why"
    if not result.grader_failure and result.grader_error:
        return "grader_error is set but grader_failure is false"
    return None


def result_problems(result: Result) -> list[str]:
    """Rules tying a result's fields together; a Result with any of them does not validate."""
    found = [
        score_only_has_no_verdict(result),
        grader_failure_fails_the_gate(result),
        grader_error_explains_failure(result),
    ]
    return [problem for problem in found if problem is not None]
