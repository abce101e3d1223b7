"""Human scoring of blinded artifacts (docs/rating.md): one rater's scores, and the adjudicated row.

Every outcome is binary and conservative: true only when all its conditions hold; when unsure, false with
the reason in ``notes``. When two raters disagree on any outcome (:func:`disagreements`), an adjudicator
who rated neither (:func:`adjudicator_rated_the_run`) picks the final values; both raters' rows stay in
raters.jsonl for kappa.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from enum import StrEnum
from typing import Literal

from pydantic import Field, model_validator

from dokimi.schemas._base import Document


class Outcome(StrEnum):
    """The six binary outcomes a rater scores."""

    PASSED = "passed"
    VALIDATION_PASSED = "validation_passed"
    HUMAN_ACCEPTED = "human_accepted"
    REGRESSION = "regression"
    REWORK_REQUIRED = "rework_required"
    REQUIREMENTS_TRACEABILITY = "requirements_traceability"


OUTCOMES: tuple[Outcome, ...] = tuple(Outcome)


class RaterScore(Document):
    """One rater's scores for one run (a row of raters.jsonl)."""

    schema_: Literal["repo_rating.v1"] = Field("repo_rating.v1", alias="schema")
    """Document type and version."""
    run_id: str = Field(min_length=1)
    """The run scored (the id of its blinded artifact)."""
    rater: str = Field(min_length=1)
    """Who scored it."""
    passed: bool | None = None
    """Every pre-registered acceptance criterion is met and verifiable from the diff or logs."""
    validation_passed: bool | None = None
    """The declared validation commands and locked evaluator checks ran, exited 0, and none was disabled,
    skipped or modified by the submission."""
    human_accepted: bool | None = None
    """The rater would accept the submission as-is in code review."""
    regression: bool | None = None
    """The submission breaks a specific existing behaviour unrelated to the task (not a stated tradeoff)."""
    rework_required: bool | None = None
    """A specific follow-up change must happen before shipping; false when shippable, or so broken it would
    be reverted."""
    requirements_traceability: bool | None = None
    """Every acceptance criterion is explicitly linked to the change implementing it and the validation
    showing it."""
    notes: str = ""
    """The rater's rationale, in particular for every false given because of doubt."""
    blinding_leak: str | None = None
    """The marker that revealed the condition (a phase heading, a tool banner, a prompt-template token). A
    rater who finds one stops scoring: the outcomes stay null and the run goes back to be re-blinded."""

    @model_validator(mode="after")
    def _scored_or_leaked(self) -> RaterScore:
        missing = [name for name in OUTCOMES if getattr(self, name) is None]
        if self.blinding_leak is None and missing:
            raise ValueError(
                f"outcomes not scored: {', '.join(missing)}; score every outcome (false when unsure) "
                "or report a blinding_leak"
            )
        if self.blinding_leak is not None and not self.blinding_leak.strip():
            raise ValueError("blinding_leak must describe the marker")
        return self

    def outcomes(self) -> dict[Outcome, bool | None]:
        """The six outcomes by name."""
        return {name: getattr(self, name) for name in OUTCOMES}


class AdjudicatedRow(Document):
    """The final values of a run whose raters disagreed, chosen by an adjudicator (a row of
    adjudications.jsonl; results.jsonl carries them with ``adjudicated: true``)."""

    schema_: Literal["repo_adjudication.v1"] = Field("repo_adjudication.v1", alias="schema")
    """Document type and version."""
    run_id: str = Field(min_length=1)
    """The run adjudicated."""
    adjudicator: str = Field(min_length=1)
    """Who adjudicated; never one of the run's raters."""
    adjudicated: Literal[True] = True
    """Always true: this row's values were chosen by an adjudicator."""
    passed: bool
    """Final value of ``passed``."""
    validation_passed: bool
    """Final value of ``validation_passed``."""
    human_accepted: bool
    """Final value of ``human_accepted``."""
    regression: bool
    """Final value of ``regression``."""
    rework_required: bool
    """Final value of ``rework_required``."""
    requirements_traceability: bool
    """Final value of ``requirements_traceability``."""
    adjudication_notes: str = Field(min_length=1)
    """The adjudicator's rationale for the values chosen, after reading both raters' notes and the
    artifact."""


def disagreements(scores: Sequence[RaterScore]) -> list[Outcome]:
    """Outcomes on which the scored rows of one run disagree; any such outcome needs adjudication."""
    scored = [s for s in scores if s.blinding_leak is None]
    return [name for name in OUTCOMES if len({getattr(s, name) for s in scored}) > 1]


def adjudicator_rated_the_run(row: AdjudicatedRow, scores: Iterable[RaterScore]) -> str | None:
    """Adjudicators do not score runs they originally rated (scoring-rubric, Adjudication)."""
    raters = {s.rater for s in scores if s.run_id == row.run_id}
    if row.adjudicator in raters:
        return f"{row.adjudicator} rated run {row.run_id} and may not adjudicate it"
    return None


def leaked(scores: Iterable[RaterScore]) -> list[str]:
    """Runs with a reported blinding leak: excluded from the primary analysis until re-blinded."""
    return sorted({s.run_id for s in scores if s.blinding_leak is not None})


# --- the rating workflow's own files (dokimi repo rate; docs/rating.md) ------------------------------------


class MarkerFinding(Document):
    """One condition marker found while blinding an artifact (private: kept in the key, never shown to
    raters)."""

    file: str
    """The artifact file, relative to the artifact's directory (``diff.patch``, ``answer.txt``, ...)."""
    line: int = Field(ge=1)
    """1-based line of the file."""
    category: str
    """What the marker reveals: arm, model, effort, harness, banner, phase, guidance, batch, timestamp,
    marker (one given with --marker)."""
    marker: str
    """The text that matched."""
    redacted: bool
    """True when it was replaced by ``[redacted]``; false when it could not be redacted safely (a path in a
    diff header), which withholds the artifact from raters."""


class KeyEntry(Document):
    """What one artifact id stands for: the cell behind it and how it was blinded."""

    cell: str
    """The cell's path in the batch (``task/arm/model/effort/repN``)."""
    task: str
    """Task id."""
    arm: str
    """Arm of the cell."""
    model: str
    """Model id of the cell."""
    effort: str | None
    """Reasoning effort of the cell; null for the harness default."""
    rep: int = Field(ge=0)
    """Repetition index."""
    harness: str
    """Harness profile name."""
    harness_version: str | None
    """Harness version."""
    hidden_validation_passed: bool | None
    """The locked evaluator checks (the task's gate, result.json ``passed``, a grader failure counting as
    false) at export time; null for a score-only task, which has no locked checks."""
    status: Literal["blinded", "withheld", "retired"]
    """blinded: in the raters' directory; withheld: a marker could not be redacted, never shown to raters;
    retired: re-blinded under the id in ``reblinded_as``."""
    findings: list[MarkerFinding] = Field(default_factory=list)
    """Every condition marker found, redacted or not."""
    reblind_of: str | None = None
    """The artifact id this one re-blinds."""
    reblinded_as: str | None = None
    """The id that replaced this artifact after re-blinding."""


class RatingKey(Document):
    """key.json: the private map from artifact id to cell. Never inside the raters' directory."""

    schema_: Literal["repo_rating_key.v1"] = Field("repo_rating_key.v1", alias="schema")
    """Document type and version."""
    batch: str
    """The batch directory the artifacts came from."""
    out: str
    """The rating directory holding ``blinded/`` (the raters' directory) and ``withheld/``."""
    seed: int
    """The seed of the sample and the artifact ids: the same batch and seed give the same ids."""
    markers: list[str] = Field(default_factory=list)
    """Extra literal markers given with --marker (prompt-template tokens and the like)."""
    artifacts: dict[str, KeyEntry]
    """Artifact id -> the cell behind it."""


class RatingResult(Document):
    """A row of results.jsonl: the final values of one run, agreed by its raters or chosen by an
    adjudicator."""

    schema_: Literal["repo_rating_result.v1"] = Field("repo_rating_result.v1", alias="schema")
    """Document type and version."""
    run_id: str = Field(min_length=1)
    """The artifact id of the run."""
    raters: list[str]
    """Who scored the run (their rows stay in raters.jsonl for kappa)."""
    adjudicated: bool
    """True when the raters disagreed and an adjudicator chose these values."""
    adjudicator: str | None = None
    """Who adjudicated, when adjudicated."""
    adjudication_notes: str | None = None
    """The adjudicator's rationale, when adjudicated."""
    passed: bool
    """Final value of ``passed``."""
    validation_passed: bool
    """Final value of ``validation_passed``."""
    human_accepted: bool
    """Final value of ``human_accepted``."""
    regression: bool
    """Final value of ``regression`` (the human flag; RFR also needs ``hidden_validation_passed``)."""
    rework_required: bool
    """Final value of ``rework_required``."""
    requirements_traceability: bool
    """Final value of ``requirements_traceability``."""
    hidden_validation_passed: bool | None
    """The run's locked evaluator checks (from the batch, through the key); null when the task has none."""


class ConditionRate(Document):
    """One outcome of one condition: how many final runs scored it true."""

    arm: str
    """Arm of the condition."""
    model: str
    """Model id of the condition."""
    effort: str | None
    """Reasoning effort; null for the harness default."""
    outcome: str
    """One of the six outcomes, or ``rfr`` (regression-free: regression false and, when the run has locked
    evaluator checks, hidden_validation_passed true)."""
    k: int = Field(ge=0)
    """Runs with the outcome true."""
    n: int = Field(ge=1)
    """Final runs of the condition."""
    rate: float
    """k / n."""
    ci_low: float | None
    """Lower end of the Wilson 95% interval."""
    ci_high: float | None
    """Upper end of the Wilson 95% interval."""


class KappaRow(Document):
    """Agreement of two raters on one outcome, over the runs both scored."""

    rater_a: str
    """First rater (sorted)."""
    rater_b: str
    """Second rater."""
    outcome: str
    """The outcome."""
    n: int = Field(ge=1)
    """Runs both raters scored."""
    agreement: float
    """Share of those runs on which they gave the same value."""
    kappa: float | None
    """Cohen's kappa; null when undefined (both raters gave every run the same value)."""


class ExcludedRun(Document):
    """A run left out of the primary analysis (reported separately)."""

    run_id: str
    """Artifact id."""
    reason: Literal["blinding_leak", "withheld"]
    """blinding_leak: a rater reported a marker and the run was not re-blinded; withheld: export found a
    marker it could not redact."""
    detail: str
    """The marker, and who reported it."""
    arm: str
    """Arm of the run."""
    model: str
    """Model id of the run."""
    effort: str | None
    """Reasoning effort of the run."""


class RatingSummary(Document):
    """``dokimi repo rate summary --json``."""

    schema_: Literal["repo_rating_summary.v1"] = Field("repo_rating_summary.v1", alias="schema")
    """Document type and version."""
    key: str
    """The key file read."""
    batch: str
    """The batch the artifacts came from."""
    runs: int
    """Artifacts of the key (re-blinded ones counted once)."""
    final: int
    """Runs with final values (the primary analysis)."""
    adjudicated: int
    """Final runs whose values an adjudicator chose."""
    pending: list[str]
    """Runs whose raters disagree and that wait for an adjudicator."""
    unrated: list[str]
    """Runs no rater has scored yet."""
    rates: list[ConditionRate]
    """Per (arm, model, effort) and outcome, sorted."""
    kappa: list[KappaRow]
    """Per pair of raters and outcome."""
    blinding_leaks: int
    """Runs set aside because a rater reported a blinding leak."""
    withheld: int
    """Runs export withheld (a marker it could not redact)."""
    excluded: list[ExcludedRun]
    """Every run left out of the primary analysis, with why."""
