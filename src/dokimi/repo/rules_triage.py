"""``repo rules triage``: a maintainer accepts, rejects or edits a mined rule, and the decision is recorded in
the rule (``triage``: who, when, what it was before, why).

- ``accept`` confirms the rule; a rule raised by one reviewer only may be confirmed, but
  stays that reviewer's preference (repo validate warns) until a second reviewer raises it, and a rule seen
  on fewer than 3 pull requests or from fewer than 2 reviewers cannot back a blocker (:func:`caveats`);
- ``reject`` rejects it: it stays in the file, so a re-mine keeps its id and does not offer it again;
- ``edit`` changes its text, paths or ``written_in`` and keeps its status.

Any decision may carry edits; what they replaced is kept (``rule_was``, ``paths_was``).
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Sequence
from dataclasses import dataclass

from dokimi.errors import UsageError
from dokimi.schemas.review_rules import (
    MIN_PRS_FOR_BLOCKER,
    MIN_REVIEWERS_FOR_BLOCKER,
    RepoReviewRules,
    ReviewRule,
    RuleStatus,
    Triage,
    TriageDecision,
)

__all__ = ["TriageRequest", "apply_triage", "caveats", "pending"]


@dataclass(frozen=True)
class TriageRequest:
    rule_id: str
    decision: TriageDecision
    by: str
    date: dt.date
    note: str | None = None
    rule: str | None = None
    """New text, or None to keep it."""
    paths: tuple[str, ...] | None = None
    """New paths, or None to keep them."""
    written_in: str | None = None
    """The guidance file that now states the rule, or None to keep ``written_in`` as it is."""


STATUS_OF = {TriageDecision.ACCEPT: RuleStatus.CONFIRMED, TriageDecision.REJECT: RuleStatus.REJECTED}
"""A maintainer's accept confirms a rule, a reject rejects it; an edit keeps its status."""


def caveats(rule: ReviewRule) -> list[str]:
    """What a confirmed rule still cannot do, in words."""
    found = []
    if rule.reviewers < MIN_REVIEWERS_FOR_BLOCKER:
        found.append(
            f"{rule.id} was raised by {rule.reviewers} reviewer(s): it is that reviewer's preference until a "
            "second reviewer raises it (repo validate warns)"
        )
    if rule.prs < MIN_PRS_FOR_BLOCKER or rule.reviewers < MIN_REVIEWERS_FOR_BLOCKER:
        found.append(
            f"{rule.id} was seen on {rule.prs} PR(s) from {rule.reviewers} reviewer(s): it cannot back a "
            f"rubric blocker (needs {MIN_PRS_FOR_BLOCKER} PRs from {MIN_REVIEWERS_FOR_BLOCKER} reviewers)"
        )
    return found


Edits = tuple[dict[str, object], str | None, list[str] | None]


def _edits(rule: ReviewRule, request: TriageRequest) -> Edits:
    """The fields a decision changes, and the text and paths they replace (None where unchanged)."""
    update: dict[str, object] = {}
    rule_was = paths_was = None
    if request.rule is not None and request.rule.strip() != rule.rule:
        if not request.rule.strip():
            raise UsageError("the rule's new text is empty", hint="state the rule as a reviewer would")
        update["rule"], rule_was = request.rule.strip(), rule.rule
    if request.paths is not None and list(request.paths) != rule.paths:
        paths = [p.strip() for p in request.paths if p.strip()]
        if not paths:
            raise UsageError("a rule needs at least one path glob", hint="use ** for every file")
        update["paths"], paths_was = paths, list(rule.paths)
    if request.written_in is not None and request.written_in != rule.written_in:
        update["written_in"] = request.written_in
    return update, rule_was, paths_was


def apply_triage(
    rules: RepoReviewRules, request: TriageRequest
) -> tuple[RepoReviewRules, ReviewRule, list[str]]:
    """The rules with one decision applied and recorded: the new document, the rule as it is now, and its
    caveats."""
    rule = rules.rule(request.rule_id)
    if rule is None:
        known = ", ".join(r.id for r in rules.rules) or "none"
        raise UsageError(f"no rule {request.rule_id!r} in the rules file", hint=f"the rules: {known}")
    update, rule_was, paths_was = _edits(rule, request)
    if request.decision is TriageDecision.EDIT and not update:
        raise UsageError(
            f"edit {rule.id}: nothing to change", hint="give --rule TEXT, --paths GLOB or --written-in PATH"
        )
    if request.decision in STATUS_OF:
        update["status"] = STATUS_OF[request.decision]
    record = Triage(
        decision=request.decision,
        by=request.by,
        date=request.date,
        note=request.note,
        rule_was=rule_was,
        paths_was=paths_was,
    )
    changed = rule.model_copy(update={**update, "triage": [*rule.triage, record]})
    document = rules.model_copy(update={"rules": [changed if r.id == rule.id else r for r in rules.rules]})
    notes = caveats(changed) if changed.status is RuleStatus.CONFIRMED else []
    return RepoReviewRules.model_validate(document.model_dump(by_alias=True)), changed, notes


def pending(rules: RepoReviewRules) -> Sequence[ReviewRule]:
    """The rules no maintainer has decided on yet: candidates without an accept or a reject."""
    return [
        rule
        for rule in rules.rules
        if rule.status is RuleStatus.CANDIDATE and not any(t.decision in STATUS_OF for t in rule.triage)
    ]
