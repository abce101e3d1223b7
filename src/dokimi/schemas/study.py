"""A study: one file that asks one question of a repository's guidance, and the one report that answers it.

repo_study.v1 is the file (``examples/study-agentbench.yaml``): the question, the arms (for the AGENTbench
design: no guidance, the repository's own, and what the harness's generator writes), the models, reps and
tasks, the run's limits, and the analysis (the measure, the effect worth detecting, alpha and power).
``dokimi repo study run FILE`` runs its batch; ``dokimi repo study report FILE`` writes repo_study_report.v1:
the question, the arms as applied (from meta.json), the paired result with intervals, the power, and the cost
per arm.
"""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import AfterValidator, Field

from dokimi.constants import MAX_REPS
from dokimi.schemas._base import Document, not_blank
from dokimi.schemas.compare import Comparison
from dokimi.schemas.power import RepoPower
from dokimi.schemas.report import ArmGuidance, ReportWarning

NonEmpty = Annotated[str, Field(min_length=1), AfterValidator(not_blank)]
Positive = Annotated[float, Field(gt=0, allow_inf_nan=False)]


class Analysis(Document):
    """How the study's result is computed."""

    measure: Literal["gate", "score"] = "gate"
    """The primary measure: ``gate`` (share of passing cells per task) or ``score`` (score-only tasks)."""
    metrics: list[NonEmpty] = Field(default_factory=list)
    """grade.json metrics compared too (descriptive, like ``repo compare --metric``)."""
    effect: Annotated[float, Field(allow_inf_nan=False)]
    """The smallest mean per-task delta worth detecting (gate: 0.04 is 4 points); the power is for it."""
    alpha: Annotated[float, Field(gt=0, lt=1)] = 0.05
    """Two-sided significance level."""
    power: Annotated[float, Field(gt=0, lt=1)] = 0.8
    """The power the study should have."""


class Study(Document):
    """repo_study.v1: the study file. Relative paths are relative to the file's directory."""

    schema_: Literal["repo_study.v1"] = Field(alias="schema")
    """Document type and version: ``repo_study.v1``."""
    question: NonEmpty
    """The question, in words; the report states it first."""
    source: NonEmpty | None = None
    """The repository (``dir``, ``dir@rev`` or ``url@rev``); ``--source`` overrides it."""
    manifest: NonEmpty | None = None
    """Path of repo-eval.yaml inside the source."""
    harness: NonEmpty = "claude-code"
    """Harness profile name or path."""
    bin: NonEmpty | None = None
    """The harness executable; ``--bin`` overrides it."""
    baseline: NonEmpty
    """The arm every other arm is compared with (for AGENTbench's design: ``guidance:none``)."""
    arms: list[NonEmpty] = Field(min_length=2)
    """Every arm, the baseline included: ``[guidance:none, guidance:tree, guidance:generated]``."""
    models: list[NonEmpty] = Field(min_length=1)
    """Model ids."""
    reps: Annotated[int, Field(strict=True, ge=1, le=MAX_REPS)]
    """Repetitions per (task, arm, model), 1 to 1000."""
    tasks: list[NonEmpty] = Field(default_factory=list)
    """Only these tasks; empty: every task of the manifest."""
    batch: NonEmpty
    """Batch name under ``out``."""
    out: NonEmpty | None = None
    """Where batches live, relative to the study file; default: ``$DOKIMI_HOME/runs/<manifest id>``
    (DOKIMI_HOME being ``~/.cache/dokimi`` unless set), where ``repo run`` puts them."""
    agent_network: NonEmpty | None = None
    """Docker network of the agent's container instead of the sealed batch network: UNSEALED (the agent
    reaches any host that network reaches)."""
    timeout_s: Positive | None = None
    """Agent wall-clock cap per cell."""
    max_turns: Annotated[int, Field(strict=True, ge=1)] | None = None
    """Turn cap per cell."""
    budget_usd: Positive | None = None
    """Cost cap per cell."""
    max_batch_usd: Positive | None = None
    """Start no new cell once the batch has spent this much."""
    prices: list[NonEmpty] = Field(default_factory=list)
    """Prices of models the price table lacks, each ``MODEL=IN,OUT`` in USD per million tokens (a sealed
    run refuses an unpriced model)."""
    jobs: Annotated[int, Field(strict=True, ge=1)] = 1
    """Cells run side by side."""
    analysis: Analysis
    """How the result is computed."""


class ArmCost(Document):
    """What one arm cost."""

    arm: str
    """The arm."""
    cells: int
    """Finished cells."""
    cells_with_cost: int
    """Of those, cells that reported a cost."""
    agent_cost_usd: float
    """Sum of the cells' reported costs."""
    mean_cell_cost_usd: float | None
    """agent_cost_usd / cells_with_cost."""
    generation_cost_usd: float | None = None
    """guidance:generated: what the harness's generator cost (once per task and model); null for other arms
    or when no generator run reported a cost."""
    total_cost_usd: float
    """agent_cost_usd plus generation_cost_usd."""


class StudyPower(Document):
    """The power of one treatment's comparison, from this batch as its own pilot."""

    treatment: str
    """The treatment arm."""
    plan: RepoPower | None = None
    """``repo plan`` on this batch for the study's effect; null when it could not be worked out."""
    error: str | None = None
    """Why not (one task, a baseline that always passes, ...)."""


class StudyReport(Document):
    """repo_study_report.v1: the one report of a study."""

    schema_: Literal["repo_study_report.v1"] = Field("repo_study_report.v1", alias="schema")
    """Document type and version."""
    question: str
    """The study's question."""
    dry_run: bool = False
    """The study's batch is a dry run: every agent played dokimi's scripted model, so no number of this
    report measures a model (its costs are zero, and its power plans are refused)."""
    study_file: str
    """The study file read."""
    batch: str
    """The batch directory."""
    baseline: str
    """The baseline arm."""
    arms: list[str]
    """Every arm of the study."""
    analysis: Analysis
    """The study's analysis settings."""
    applied: list[ArmGuidance]
    """Per arm, what guidance the agents really started with (from meta.json)."""
    comparisons: list[Comparison]
    """Per treatment (and model, effort, mode): the paired, task-level result with 95% intervals."""
    power: list[StudyPower]
    """Per treatment: the tasks and reps the study's effect needs, with this batch as the pilot."""
    cost: list[ArmCost]
    """Per arm: the agents' cost and, for guidance:generated, the generator's."""
    warnings: list[ReportWarning] = Field(default_factory=list)
    """The comparison's warnings."""
