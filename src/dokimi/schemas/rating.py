"""Human scoring of blinded artifacts (scoring-rubric.md): one rater's scores, and the adjudicated row.

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
    """The final values of a run whose raters disagreed (a row of results.jsonl with ``adjudicated:
    true``)."""

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
