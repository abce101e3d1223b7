"""result.json (repo_result.v1): the framework's verdict on one cell, written LAST to the run directory.

Its presence means the cell is done; a rerun skips a cell whose result.json validates.
Reports and comparisons read only these documents.
"""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import Field, model_validator

from dokimi.schemas._base import Document
from dokimi.schemas.grade import MetricValue
from dokimi.schemas.meta import Mode

NonNegative = Annotated[float, Field(ge=0, allow_inf_nan=False)]


class ModelUsage(Document):
    """What the model gateway saw of a cell's model calls: the authoritative tokens, cost and turns."""

    requests: int = Field(ge=0)
    """Requests the harness sent through the gateway."""
    turns: int = Field(ge=0)
    """Model responses: 2xx answers to model-turn requests, relayed to the harness."""
    input_tokens: int = Field(ge=0)
    """Fresh input tokens (cached ones are counted apart)."""
    output_tokens: int = Field(ge=0)
    """Output tokens, thinking included."""
    cache_write_tokens: int = Field(ge=0)
    """Input tokens written to the prompt cache."""
    cache_read_tokens: int = Field(ge=0)
    """Input tokens read from the prompt cache."""
    cost_usd: NonNegative | None = None
    """The cost at the price table's rates (null only in cells of older dokimi versions, which let an
    unpriced model through)."""
    refused: int = Field(default=0, ge=0)
    """Requests the gateway answered itself: a path it does not forward, a model it cannot price, the cap
    spent, a malformed request."""
    worst_case: int = Field(default=0, ge=0)
    """Answers charged at their worst case: their usage unreadable, cut short, or still running when the cell
    ended."""
    models: list[str] = Field(default_factory=list)
    """Models the calls named."""
    unpriced_models: list[str] = Field(default_factory=list)
    """Models the price table did not know (cells of older dokimi versions only: they are refused now)."""
    statuses: dict[str, int] = Field(default_factory=dict)
    """HTTP status -> requests answered with it (502: the gateway could not reach the API)."""
    prices_checked: str | None = None
    """The day the price table was checked against the vendors' price lists."""


class SimulatedAccount(Document):
    """What a dry run's harness reported of the scripted model's answers: made-up figures, never paid."""

    cost_usd: NonNegative | None = None
    """The harness's own cost figure, computed from the scripted model's fixed token counts; null when the
    harness reports none. Not a cost: nobody paid it."""
    tokens: dict[str, int] = Field(default_factory=dict)
    """The token counts the harness reported, as it named them: the scripted model's fixed usage."""


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
    """Reasoning effort; null for the harness default. Reports never pool cells that
    differ."""
    mode: Mode | None = None
    """The task's agent mode; null when the task declares none."""
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
    """The value of the task's ``score.metric`` for a score-only task (or one ``gated_with_score``); null
    otherwise or when not measured."""
    gated_with_score: bool = False
    """A review task gated on dokimi's review checks keeps its ``score`` (recall of the human review
    threads) beside the gate: reports count both, and a grader failure scores 0."""
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
    dry_run: bool = False
    """The agent talked to dokimi's scripted model (``repo run --dry-run``): no model ran and nothing was
    paid. ``cost_usd`` is 0, and what the harness reported of the scripted answers is in ``simulated``."""
    cost_usd: NonNegative | None = None
    """The cell's cost: the model gateway's in a sealed run (``cost_source: gateway``), else the harness's own
    figure (``harness``); 0 for a dry run (``dry_run``); null when neither is known."""
    cost_source: Literal["gateway", "harness", "harness_allow_list", "dry_run"] | None = None
    """Where ``cost_usd`` comes from: ``gateway`` (the model gateway priced every request), ``harness`` (the
    harness's own figure, unsealed), ``harness_allow_list`` (the harness's own figure in a sealed run on the
    allow-list route, where the model was reached through the egress proxy's tunnels and no gateway could
    read its usage: untrusted, as the agent can write to what the harness prints), ``dry_run`` (nothing was
    paid)."""
    simulated: SimulatedAccount | None = None
    """A dry run's made-up figures, kept apart from the cost: the harness's own cost figure and token counts
    for the scripted answers. Null for a real run."""
    usage: ModelUsage | None = None
    """The model gateway's account of the cell (a sealed real run); null without the gateway."""
    judge_cost_usd: NonNegative | None = None
    """What the rubric judges cost for this cell (cached verdicts cost nothing); charged to the batch."""
    judges: list[str] = Field(default_factory=list)
    """The full model ids of the rubric judges that judged this cell's diff: the primary first, then the
    second (whose verdicts give only the judges' agreement). Empty when no judge ran. ``repo compare`` reads
    them before it compares models of different vendors."""
    infra_error: bool = False
    """True when the upstream failed the cell: no model response came back, and the API was unreachable or
    answered only errors that say it failed (5xx, 529, 408, 429 after the harness's retries) or refused the
    batch's credentials or model name (401, 403, 404). Such a cell is left out of every rate and comparison,
    counted apart per arm, and run again like a missing cell. A request the API refused as invalid, or a
    harness that sent none, is a failure instead (``no_model_answer``)."""
    infra_error_reason: str | None = None
    """Why the cell is an infra error; set exactly when ``infra_error`` is true."""
    no_model_answer: str | None = None
    """Why a sealed cell got no model answer by its own doing: the model API refused its request as invalid
    (400 "prompt is too long" when a guidance file made the prompt too long, 422), or the harness sent none.
    Not an infra error: the cell is graded and counts as a failure in every rate, as a grader failure does,
    so an arm that breaks its own requests is never excused (docs/network.md)."""
    egress_attempts: int | None = Field(default=None, ge=0)
    """Connections the agent's container tried through the egress proxy (null without the proxy)."""
    egress_refused: int | None = Field(default=None, ge=0)
    """Of those, the ones refused (a host not on the task's egress list)."""
    turns: int | None = Field(default=None, ge=0)
    """Model turns: the gateway's count when there is one, else what the harness reported; null when
    neither is known."""
    late_trace_lines: int = Field(default=0, ge=0)
    """Lines of the agent's output that arrived after the run ended (after the end-of-run marker dokimi's
    wrapper prints once the harness exited and every other process of the agent was ended, or after the
    harness's own final result record). Something the agent left behind wrote them; they are dropped from
    events.jsonl, answer.txt, the cost and the turns, and counted here."""
    duration_s: NonNegative
    """Wall time of the agent's container, in seconds."""
    agent_network: str | None = None
    """The docker network the agent ran with (``--agent-network``); reports warn when it is set."""
    base_date: str | None = None
    """Committer date of the task base (ISO 8601), for the split against a model's training cutoff."""
    prompt_style: Literal["spec", "issue"] | None = None
    """The style of the prompt the agent got; null when the task declares none. Reports and comparisons never
    pool cells that differ in it."""
    prompt_variant: Literal["spec", "issue"] | None = None
    """The prompt variant the run chose (``repo run --prompt-style``; a dimension of the cell, in its
    directory); null when the cell ran the task's own prompt."""

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
    """A grader failure counts as a failure on every gated metric."""
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


def no_model_answer_is_not_infra(result: Result) -> str | None:
    """A cell with no model answer is either the upstream's (infra) or its own (a failure), never both."""
    if result.no_model_answer and result.infra_error:
        return "no_model_answer (the cell's own doing) and infra_error (the upstream's) exclude each other"
    return None


def infra_error_has_a_reason(result: Result) -> str | None:
    """``infra_error_reason`` is set exactly when ``infra_error`` is true, and such a cell never passes."""
    if result.infra_error and not result.infra_error_reason:
        return "infra_error is true: infra_error_reason must say why"
    if not result.infra_error and result.infra_error_reason:
        return "infra_error_reason is set but infra_error is false"
    if result.infra_error and result.passed:
        return "an infra_error cell never reached its model, so it cannot pass"
    return None


def dry_run_costs_nothing(result: Result) -> str | None:
    """A dry run's cost is zero (its harness's figure is ``simulated``), and only a dry run is simulated."""
    if result.dry_run and (result.cost_usd != 0 or result.cost_source != "dry_run"):
        return "a dry run costs nothing: cost_usd 0 and cost_source dry_run"
    if not result.dry_run and (result.simulated is not None or result.cost_source == "dry_run"):
        return "only a dry run has simulated figures and cost_source dry_run"
    return None


def result_problems(result: Result) -> list[str]:
    """Rules tying a result's fields together; a Result with any of them does not validate."""
    found = [
        dry_run_costs_nothing(result),
        score_only_has_no_verdict(result),
        grader_failure_fails_the_gate(result),
        grader_error_explains_failure(result),
        infra_error_has_a_reason(result),
        no_model_answer_is_not_infra(result),
    ]
    return [problem for problem in found if problem is not None]
