"""repo_report.v1: what ``repo report <batch> --json`` prints.

One row per (task, arm, model, effort, mode, prompt_style) and, with ``--cutoff``, per side of the model's
training cutoff. Cells that differ in effort or mode are never pooled. See docs/statistics.md.
"""

from __future__ import annotations

from typing import Literal

from pydantic import Field

from dokimi.schemas._base import Document
from dokimi.schemas.batch import BatchPin

CutoffSide = Literal["before", "after", "unknown"]
"""``before``: the task base is on or before the model's training cutoff (its fix may be known to the model);
``after``: later; ``unknown``: the base date is not recorded."""


class Counts(Document):
    """Cells by status. Each cell is exactly one of finished, missing, invalid and infra_errors."""

    finished: int = 0
    """Cells whose result.json validates."""
    missing: int = 0
    """Planned (plan.json) or started cells without result.json: not failed; the next run fills them."""
    invalid: int = 0
    """Cells whose result.json does not validate: neither counted nor missing, listed with the reason."""
    infra_errors: int = 0
    """Cells the model's API failed (result.json says infra_error): in no rate; rerun like missing."""


class Outcome(Document):
    """The measured part of a row or an arm summary."""

    finished: int = 0
    """Finished cells."""
    missing: int = 0
    """Missing cells (see Counts)."""
    invalid: int = 0
    """Invalid cells (see Counts)."""
    gated: int = 0
    """Finished cells of gated tasks: the denominator of the pass rate."""
    passes: int = 0
    """Gated cells that passed. A grader failure is never a pass."""
    pass_rate: float | None = None
    """passes / gated; null without gated cells."""
    pass_ci: tuple[float, float] | None = None
    """Wilson 95% interval of pass_rate, treating the cells as independent trials."""
    score_only: int = 0
    """Finished cells of score-only tasks."""
    score_mean: float | None = None
    """Mean score of the score-only cells (a grader failure scores 0); null without any."""
    grader_failures: int = 0
    """Finished cells whose grading failed; counted as failures in passes (and as 0 in score_mean)."""
    infra_errors: int = 0
    """Cells the upstream failed (infra_error: no model response, the API down or refusing the batch's
    credentials): not finished, in no rate, rerun like missing."""
    no_model_answer: int = 0
    """Finished cells that got no model answer by their own doing (a request the API refused as invalid, or
    none sent): graded, and counted as failures in every rate."""
    egress_refused: int = 0
    """Connections the agents' containers tried through the egress proxy and were refused (all cells)."""
    timeouts: int = 0
    """Finished cells whose agent was stopped at its timeout (and still graded)."""
    mergeable_n: int = 0
    """Finished cells that report the ``mergeable`` metric, plus grader failures that do
    not: a grader failure is not mergeable."""
    mergeable: int = 0
    """Of those, cells that are mergeable."""
    mergeable_rate: float | None = None
    """mergeable / mergeable_n; null when no cell reports it."""
    mergeable_ci: tuple[float, float] | None = None
    """Wilson 95% interval of mergeable_rate."""
    merge_score_mean: float | None = None
    """Mean ``merge_score`` among mergeable cells."""
    test_passes: int = 0
    """Gated cells whose test-pass gate holds: pass and every gate entry other than ``mergeable``."""
    test_pass_rate: float | None = None
    """test_passes / gated: the rate to read beside mergeable_rate."""
    mergeable_gap: float | None = None
    """Test-pass rate minus mergeable rate over the cells whose mergeability was measured: runs that pass the
    tests and would not be merged; null when none was measured."""
    judge_failures: int = 0
    """Cells whose rubric judge gave no usable verdict (mergeable not measured)."""
    failed_blockers: dict[str, int] = Field(default_factory=dict)
    """Blocker id -> runs that failed it: what agents get wrong when the tests pass."""
    judges_both: int = 0
    """Cells that both the primary and the second judge decided mergeable for (the second judge's runs)."""
    judges_kappa: float | None = None
    """Cohen's kappa of the two judges on mergeable over those cells; null when undefined or no second
    judge ran."""
    rubric_provisional: bool | None = None
    """True when the task's rubric is still a draft (its mergeability results are provisional); null
    without a rubric."""
    cost_mean: float | None = None
    """Mean cost_usd over the finished cells that report a cost."""
    cost_n: int = 0
    """Finished cells that report a cost."""
    turns_mean: float | None = None
    """Mean turns over the finished cells that report turns."""
    turns_n: int = 0
    """Finished cells that report turns."""
    pass_at_k: float | None = None
    """pass@k: the chance that at least one of k attempts passes (k: the document's ``k``), by the unbiased
    estimator over the gated cells; for an arm, the mean over its tasks. Null with fewer than k gated
    cells."""
    pass_hat_k: float | None = None
    """pass^k: the chance that every one of k attempts passes, by the unbiased estimator; for an arm, the mean
    over its tasks. Null with fewer than k gated cells."""


class ReportRow(Outcome):
    """One (task, arm, model, effort, mode, prompt_style[, cutoff side]) of the batch."""

    task: str
    """Task id."""
    arm: str
    """Arm."""
    model: str
    """Model id."""
    effort: str | None
    """Reasoning effort; null for the harness default."""
    mode: str | None
    """The task's agent mode; null when it declares none."""
    prompt_style: str | None
    """The task's prompt style; null when it declares none."""
    cutoff: CutoffSide | None = None
    """Side of the model's training cutoff; null when no --cutoff was given for this model."""
    family: str | None = None
    """The task's family."""
    base_date: str | None = None
    """The task base's committer date."""
    harness_versions: list[str] = Field(default_factory=list)
    """``harness version`` of the finished cells, sorted."""


class ArmSummary(Outcome):
    """All tasks of one (arm, model, effort, mode, prompt_style[, cutoff side]): descriptive, cells pooled."""

    arm: str
    """Arm."""
    model: str
    """Model id."""
    effort: str | None
    """Reasoning effort."""
    mode: str | None
    """Agent mode."""
    prompt_style: str | None
    """Prompt style."""
    cutoff: CutoffSide | None = None
    """Side of the model's training cutoff."""
    tasks: int = 0
    """Tasks with at least one cell in this summary."""
    task_pass_mean: float | None = None
    """Mean over gated tasks of each task's pass share: every task weighs the same, whatever its reps."""
    k_tasks: int = 0
    """Gated tasks with at least k gated cells: those pass_at_k and pass_hat_k average over."""


class CellProblem(Document):
    """A cell that is not finished."""

    cell: str
    """The cell's path relative to the batch."""
    error: str | None = None
    """Why it is invalid; null for a missing cell."""


class ReportWarning(Document):
    """Something the reader must know before trusting the numbers."""

    code: str
    """Stable identifier: agent_network, mixed_harness_versions, no_pin, no_plan, plan_error, invalid_cells,
    mixed_gating, cutoff_unknown_base_date, cutoff_model_absent, same_guidance."""
    message: str
    """What is wrong and what it means."""


class BatchInfo(Document):
    """Which batch was read and what it is pinned to."""

    name: str
    """The batch directory's name."""
    path: str
    """The batch directory as given."""
    pin: BatchPin | None = None
    """_eval/batch.json; null when absent or invalid."""
    pin_error: str | None = None
    """Why the pin is null."""
    plan: bool = False
    """Whether _eval/plan.json was read: without it, missing cells are only the started ones."""
    plan_error: str | None = None
    """Why plan.json could not be read."""


class SeenGuidanceFile(Document):
    """One guidance file (path and blob SHA) some cells of an arm started with."""

    path: str
    """Repository path in the workspace."""
    sha: str
    """Git blob SHA."""
    tasks: int
    """Tasks whose cells had this exact file."""


class ArmGuidance(Document):
    """What one arm really put in front of the agent, from the cells' meta.json."""

    arm: str
    """The arm."""
    tasks: int
    """Tasks with finished cells in this arm."""
    tasks_with_guidance: int
    """Of those, tasks where some cell started with at least one guidance file. guidance:raw on bases that
    predate the repository's guidance shows 0 here: the arm then measures nothing."""
    cells_unrecorded: int = 0
    """Finished cells whose meta.json does not list the guidance files (written by an older dokimi)."""
    sources: list[str] = Field(default_factory=list)
    """Where the arm's files came from (``tree <sha>``, ``at <sha>``, ``generated``)."""
    files: list[SeenGuidanceFile] = Field(default_factory=list)
    """Every distinct (path, blob SHA) seen, sorted."""
    skills: list[str] = Field(default_factory=list)
    """The distinct skills seen (the directory of each SKILL.md among ``files``), sorted: counted apart from
    the instruction files, since a harness lists a skill and loads its body only when the model asks."""
    tasks_with_skills: int = 0
    """Tasks where some cell started with at least one skill."""
    generated_pairs: int = 0
    """guidance:generated: the (task, model) pairs the harness's generator ran for."""
    generation_cost_usd: float | None = None
    """guidance:generated: what the generator's runs cost together (not in any cell's cost); null when none
    reported a cost."""
    generation_cost_unknown: int = 0
    """guidance:generated: generator runs that reported no cost."""


class BlockerAgreement(Document):
    """Two rubric judges on one blocker of one task: how often they agreed, and where they did not (the
    cells of a batch, or the rows of ``repo rubric check``)."""

    task: str
    """The task whose rubric holds the blocker."""
    blocker: str
    """The blocker's id (``B1``; ``TESTS`` for the framework's test-integrity blocker)."""
    cells: int
    """Cells (rubric check: rows) both judges gave a verdict on this blocker for."""
    agreed: int
    """Of those, how many both gave the same verdict."""
    kappa: float | None
    """Cohen's kappa on this blocker's pass/fail verdicts; null when undefined (both judges gave every cell
    the same verdict)."""
    disagreements: list[str] = Field(default_factory=list)
    """The cells where they disagreed on it, as ``cell: primary vs second``."""


class JudgeAgreement(Document):
    """Two rubric judges over a batch: their agreement on mergeable and on each blocker, and where they
    disagreed."""

    second_model: str | None
    """The second judge's model id."""
    cells: int
    """Cells both judges decided mergeable for."""
    kappa_mergeable: float | None
    """Cohen's kappa on mergeable; null when undefined (a single class)."""
    disagreements: list[str]
    """The cells (task/arm/model/effort/repN) where the judges disagreed on mergeable, for human review."""
    blocker_items: int = 0
    """Blocker verdicts both judges gave, over every cell and blocker."""
    kappa_blockers: float | None = None
    """Cohen's kappa over all those blocker verdicts pooled; null when undefined or none."""
    blockers: list[BlockerAgreement] = Field(default_factory=list)
    """Per task and blocker: the judges' agreement and the cells where they disagreed, sorted."""


class ReportDoc(Document):
    """repo_report.v1."""

    schema_: Literal["repo_report.v1"] = Field("repo_report.v1", alias="schema")
    """Document type and version."""
    batch: BatchInfo
    """The batch read."""
    dry_run: bool = False
    """The batch is a dry run (``repo run --dry-run``): every agent talked to dokimi's scripted model, so the
    pass rates are the script's and every cost is zero. Text and HTML output put a banner first."""
    counts: Counts
    """Cells by status over the whole batch."""
    cutoffs: dict[str, str] = Field(default_factory=dict)
    """model -> training cutoff, as given with --cutoff."""
    k: int = Field(default=1, ge=1)
    """The k of pass@k and pass^k: --k, else the batch's reps (the most planned for one task and arm)."""
    rows: list[ReportRow]
    """Per (task, arm, model, effort, mode, prompt_style[, cutoff]), sorted."""
    arms: list[ArmSummary]
    """Per (arm, model, effort, mode, prompt_style[, cutoff]), sorted."""
    missing_cells: list[CellProblem] = Field(default_factory=list)
    """Every missing cell."""
    invalid_cells: list[CellProblem] = Field(default_factory=list)
    """Every invalid cell with the reason."""
    warnings: list[ReportWarning] = Field(default_factory=list)
    """Warnings, sorted by code."""
    guidance: list[ArmGuidance] = Field(default_factory=list)
    """Per arm: what guidance the agents really started with (from meta.json), sorted by arm."""
    judge_agreement: JudgeAgreement | None = None
    """The primary and the second rubric judge over the whole batch; null when no second judge ran."""
