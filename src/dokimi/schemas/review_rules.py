"""review_rules.json (repo_review_rules.v1): a team's own review rules, mined from review comments
and confirmed by a maintainer.

The repository keeps them at <eval_dir>/review_rules.json. Rubric blockers cite them as ``house:R13``; the
judge or a reviewer agent gets only the cited rules and those whose paths match the diff
(:func:`rules_for_diff`).
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Iterable
from enum import StrEnum
from typing import Literal

from pydantic import Field, field_validator

from dokimi.globs import match_any
from dokimi.schemas._base import Document

MIN_PRS_FOR_BLOCKER = 3
"""A rule may back a blocker only when seen on at least this many PRs."""
MIN_REVIEWERS_FOR_BLOCKER = 2
"""... and from at least this many reviewers; a one-reviewer rule is that reviewer's preference."""


class RuleStatus(StrEnum):
    """A maintainer's triage of a mined rule."""

    CONFIRMED = "confirmed"
    REJECTED = "rejected"
    CANDIDATE = "candidate"


class TriageDecision(StrEnum):
    """What a maintainer decided about a rule."""

    ACCEPT = "accept"
    REJECT = "reject"
    EDIT = "edit"


class Triage(Document):
    """One decision of a maintainer's triage, kept in the rule it was made on."""

    decision: TriageDecision
    """``accept`` (the rule becomes confirmed), ``reject`` (rejected) or ``edit`` (its text, paths or
    ``written_in`` changed, its status kept)."""
    by: str = Field(min_length=1)
    """Who decided."""
    date: dt.date
    """When."""
    note: str | None = None
    """Why, in the maintainer's words."""
    rule_was: str | None = None
    """The rule's text before this decision changed it; null when it did not."""
    paths_was: list[str] | None = None
    """The rule's paths before this decision changed them; null when it did not."""


class ReviewRule(Document):
    """One rule the team's reviewers enforce."""

    id: str = Field(pattern=r"^[A-Za-z][A-Za-z0-9_.-]*$")
    """Stable id, for example ``R13``; blockers cite it as ``house:R13``. Ids are kept across re-mining."""
    rule: str = Field(min_length=1)
    """The rule, stated as a reviewer would."""
    paths: list[str] = Field(min_length=1)
    """Globs (dokimi's dialect) of the files the rule applies to; ``**`` for every file."""
    prs: int = Field(ge=0)
    """Number of merged PRs whose review comments raised it (before ``cut_date``)."""
    reviewers: int = Field(ge=0)
    """Number of distinct reviewers who raised it."""
    written_in: str | None
    """The guidance file that already states it; null for a rule not yet written down (it belongs in
    AGENTS.md)."""
    status: RuleStatus
    """confirmed, rejected or candidate (maintainer triage)."""
    evidence: list[str] = Field(default_factory=list)
    """Review comment URLs the rule was mined from."""
    triage: list[Triage] = Field(default_factory=list)
    """The maintainers' decisions on the rule, oldest first (``repo rules triage`` records them)."""


class RepoReviewRules(Document):
    """review_rules.json: the team's rules with the date that separates mining from scoring."""

    schema_: Literal["repo_review_rules.v1"] = Field(alias="schema")
    """Document type and version."""
    cut_date: dt.date
    """Mining used only PRs merged before this date; the rules may score only tasks whose base is on or
    after it."""
    rules: list[ReviewRule] = Field(default_factory=list)
    """The rules, every status included."""

    @field_validator("rules")
    @classmethod
    def _unique_ids(cls, rules: list[ReviewRule]) -> list[ReviewRule]:
        seen: set[str] = set()
        for rule in rules:
            if rule.id in seen:
                raise ValueError(f"rule id {rule.id!r} appears twice; ids must be unique and stable")
            seen.add(rule.id)
        return rules

    def rule(self, rule_id: str) -> ReviewRule | None:
        """The rule with this id, or None."""
        return next((rule for rule in self.rules if rule.id == rule_id), None)


def may_back_a_blocker(rule: ReviewRule) -> bool:
    """Only confirmed rules seen on at least 3 PRs from at least 2 reviewers may be blockers."""
    return (
        rule.status is RuleStatus.CONFIRMED
        and rule.prs >= MIN_PRS_FOR_BLOCKER
        and rule.reviewers >= MIN_REVIEWERS_FOR_BLOCKER
    )


def may_score_base(rules: RepoReviewRules, base_date: dt.date) -> bool:
    """Leak guard: rules may score only tasks whose base is on or after ``cut_date``."""
    return base_date >= rules.cut_date


def rules_for_diff(
    rules: RepoReviewRules, changed_paths: Iterable[str], cited: Iterable[str] = ()
) -> list[ReviewRule]:
    """What the judge or reviewer agent gets: the cited rules and the confirmed rules whose paths match the
    diff, never the whole list."""
    paths = list(changed_paths)
    cited_ids = set(cited)
    return [
        rule
        for rule in rules.rules
        if rule.id in cited_ids
        or (rule.status is RuleStatus.CONFIRMED and any(match_any(rule.paths, path) for path in paths))
    ]


def rule_lines(rules: Iterable[ReviewRule]) -> list[str]:
    """The rules as the judge and a reviewer agent read them: ``- R13 (applies to **): the rule``."""
    return [f"- {rule.id} (applies to {', '.join(rule.paths)}): {rule.rule}" for rule in rules]


def one_reviewer_confirmed(rule: ReviewRule) -> str | None:
    """A rule seen from one reviewer only stays a candidate until a second reviewer confirms it."""
    if rule.status is RuleStatus.CONFIRMED and rule.reviewers < MIN_REVIEWERS_FOR_BLOCKER:
        return (
            f"{rule.id}: confirmed from {rule.reviewers} reviewer(s); "
            "it stays a candidate until a second reviewer confirms it"
        )
    return None


def review_rules_problems(rules: RepoReviewRules) -> list[str]:
    """Warnings about a rules file that validates but breaks a rule of the method."""
    found = [one_reviewer_confirmed(rule) for rule in rules.rules]
    return [problem for problem in found if problem is not None]
