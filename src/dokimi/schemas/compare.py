"""repo_compare.v1: what ``repo compare ... --json`` prints. See docs/statistics.md.

Cells are first reduced to one value per (task, arm, model, effort, mode); every statistic is over tasks.
"""

from __future__ import annotations

from typing import Literal

from pydantic import Field

from dokimi.schemas._base import Document
from dokimi.schemas.batch import BatchPin
from dokimi.schemas.report import ReportWarning

MeasureKind = Literal["gate", "pass_at_k", "pass_hat_k", "score", "cost", "turns", "metric"]


class BatchRef(Document):
    """One batch behind a selector."""

    name: str
    """The batch directory's name."""
    path: str
    """The batch directory as given."""
    pin: BatchPin | None = None
    """_eval/batch.json; null when the batch has no (valid) pin."""
    pin_error: str | None = None
    """Why pin is null."""
    cells: int = 0
    """Finished cells this selector takes from the batch."""
    dry_run: bool = False
    """The batch is a dry run: its agents talked to dokimi's scripted model, and its costs are zero."""
    harness_versions: list[str] = Field(default_factory=list)
    """``harness version`` of those cells, sorted."""


class SelectorInfo(Document):
    """A selector of the command line, resolved."""

    label: str
    """How the output names it: the arm for a bare ARM or a whole batch, BATCH/ARM as given otherwise."""
    role: Literal["baseline", "treatment"]
    """Baseline (--baseline) or treatment."""
    arm: str
    """The arm."""
    batches: list[BatchRef]
    """Every batch whose cells it holds."""


class TaskValue(Document):
    """One task's per-arm values and their delta (treatment - baseline)."""

    task: str
    """Task id."""
    baseline: float
    """The baseline's per-task value (mean over its cells)."""
    treatment: float
    """The treatment's per-task value."""
    delta: float
    """treatment - baseline."""


class Measure(Document):
    """One measure of one comparison."""

    kind: MeasureKind
    """gate (share of passing cells), pass_at_k and pass_hat_k (the task's pass@k and pass^k over its gated
    cells, k the document's ``k``), score (score-only tasks), cost (cost_usd), turns, or a --metric."""
    name: str
    """The kind (``pass@K`` and ``pass^K`` for the reliability measures), or the metric's name."""
    tasks: int
    """Paired tasks: the n of every statistic below."""
    baseline_mean: float | None = None
    """Mean over paired tasks of the baseline's per-task values."""
    treatment_mean: float | None = None
    """Mean over paired tasks of the treatment's per-task values."""
    delta: float | None = None
    """Mean per-task delta (treatment - baseline); null without paired tasks."""
    ci: tuple[float, float] | None = None
    """95% interval of delta over tasks; null for fewer than two tasks."""
    interval: Literal["bootstrap", "t"]
    """Percentile bootstrap (gate, score) or Student t (cost, turns, metrics)."""
    up: int = 0
    """Tasks whose delta is positive."""
    down: int = 0
    """Tasks whose delta is negative."""
    tied: int = 0
    """Tasks whose delta is zero."""
    p: float | None = None
    """Two-sided paired sign-flip permutation p; null without paired tasks."""
    p_holm: float | None = None
    """Holm-adjusted p over the gate and score measures of this call; null for descriptive measures."""
    n_baseline: int = 0
    """Baseline cells of the paired tasks that report the measure."""
    n_treatment: int = 0
    """Treatment cells of the paired tasks that report the measure."""
    per_task: list[TaskValue] = Field(default_factory=list)
    """Every paired task's values, sorted by task."""
    mde: float | None = None
    """gate and score: the smallest mean delta this many tasks detect with 80% power at alpha 0.05, simulated
    from the observed per-task deltas (centred, resampled, shifted); null for fewer than two tasks or when no
    effect is detectable with so few tasks."""
    underpowered: bool | None = None
    """gate and score: true when p >= 0.05 and the comparison could not reliably detect an effect of the
    observed size (mde above |delta|, or no mde at all): "not significant" then says little about the arm.
    `dokimi repo plan` gives the tasks and reps a smaller effect needs."""


class Unpaired(Document):
    """A task left out of a measure, and why."""

    task: str
    """Task id."""
    measure: str
    """The measure's name, or ``all`` when the task has no cells in one arm."""
    reason: str
    """No cells in one arm; gated in one arm and score-only in the other; a measure one arm lacks."""


class Comparison(Document):
    """A treatment against the baseline for one (model, effort, mode, prompt style), or, when the two share no
    model, of the treatment's model against the baseline's (``baseline_model``)."""

    treatment: str
    """The treatment selector's label."""
    baseline: str
    """The baseline selector's label."""
    model: str
    """Model id (of the treatment, when ``baseline_model`` is set)."""
    effort: str | None
    """Reasoning effort (never pooled; the treatment's, when ``baseline_model`` is set)."""
    baseline_model: str | None = None
    """Set when the two arms share no model: the baseline's model, which ``model`` is compared with."""
    baseline_effort: str | None = None
    """The baseline's effort, when ``baseline_model`` is set."""
    mode: str | None
    """Agent mode (never pooled)."""
    prompt_style: str | None = None
    """The tasks' prompt style (``spec`` or ``issue``; never pooled); null for tasks that declare none."""
    measures: list[Measure]
    """gate, pass@k, pass^k, score, cost, turns, then each --metric in the order given."""
    infra_baseline: int = 0
    """Baseline cells of this model, effort and mode the upstream failed (infra errors): in no measure."""
    infra_treatment: int = 0
    """Treatment cells the upstream failed (infra errors): in no measure."""
    cells_baseline: int = 0
    """Baseline cells that finished (what the measures read)."""
    cells_treatment: int = 0
    """Treatment cells that finished."""
    infra_p: float | None = None
    """Fisher's exact test (two-sided) of infra errors against finished cells, treatment against baseline;
    null without any infra error. Below 0.05 the comparison warns (``infra_rate_differs``): the outage hit one
    arm more, so the cells that ran are a biased sample."""
    unpaired: list[Unpaired] = Field(default_factory=list)
    """Tasks left out, with the reason, sorted."""

    def models_text(self) -> str:
        """The model and effort held constant, or, across models, the treatment's against the baseline's."""
        own = f"model {self.model}, effort {self.effort or 'default'}"
        if self.baseline_model is None:
            return own
        return f"{own} vs model {self.baseline_model}, effort {self.baseline_effort or 'default'}"


class CompareDoc(Document):
    """repo_compare.v1."""

    schema_: Literal["repo_compare.v1"] = Field("repo_compare.v1", alias="schema")
    """Document type and version."""
    dry_run: bool = False
    """Some batch compared is a dry run (scripted agents, zero costs): no difference here measures a model.
    Text and HTML output put a banner first."""
    selectors: list[SelectorInfo]
    """The baseline first, then the treatments."""
    metrics: list[str] = Field(default_factory=list)
    """The --metric names, in the order given."""
    k: int = Field(default=1, ge=1)
    """The k of the pass@k and pass^k measures: --k, else the fewest reps of the batches compared."""
    comparisons: list[Comparison]
    """Per treatment, model, effort and mode, sorted."""
    holm_family: int = 0
    """How many p-values Holm's correction ran over (the gate and score measures with a p)."""
    warnings: list[ReportWarning] = Field(default_factory=list)
    """Warnings (pooled batches, missing pins, different pins or harness versions), sorted."""
