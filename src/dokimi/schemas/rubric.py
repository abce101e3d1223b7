"""rubric.json (repo_rubric.v1): a maintainer's rubric for one task, at
tasks/<id>/rubric.json.

The model refuses what is malformed (missing evidence, duplicate ids, extglob patterns). What only makes a
rubric unfit for paid grading (the count of blockers, a ``house:`` citation of an unconfirmed rule) is
reported by :func:`rubric_problems` as warnings, because drafts exist and are edited towards the rules.
"""

from __future__ import annotations

import hashlib
import json
import re
from enum import StrEnum
from typing import Literal

from pydantic import Field, field_validator, model_validator

from dokimi.schemas._base import Document
from dokimi.schemas.review_rules import RepoReviewRules, may_back_a_blocker

BLOCKERS_RANGE = (2, 5)
"""A task has 2-5 blockers."""
NON_BLOCKERS_RANGE = (3, 6)
"""... and 3-6 non-blockers."""

HOUSE_CITATION = re.compile(r"^house:(?P<rule>[A-Za-z][A-Za-z0-9_.-]*)$")
"""A blocker's citation of a team review rule, ``house:R13``."""

ITEM_ID = r"^[A-Za-z][A-Za-z0-9_.-]*$"
_EXTGLOB = re.compile(r"[!@+?*]\(|^!")


def _dialect_globs(patterns: list[str]) -> list[str]:
    for pattern in patterns:
        if _EXTGLOB.search(pattern):
            raise ValueError(
                f"{pattern!r}: no extglob or negation in this dialect; carve paths out with denied_globs"
            )
        if pattern.startswith("/"):
            raise ValueError(f"{pattern!r}: paths are relative to the repository root")
    return patterns


class RubricStatus(StrEnum):
    """Whether a maintainer approved the rubric."""

    DRAFT = "draft"
    APPROVED = "approved"


class Scope(Document):
    """What a change may touch; checked deterministically from the workspace diff."""

    allowed_globs: list[str] = Field(min_length=1)
    """Every changed path (old and new side) must match one of these."""
    denied_globs: list[str] = Field(default_factory=list)
    """No changed path, and no ignored file the run created, may match one of these."""
    max_changed_lines: int | None = Field(default=None, ge=1)
    """Most added plus deleted lines the change may have; null for no limit."""
    max_files: int | None = Field(default=None, ge=1)
    """Most files the change may touch; null for no limit."""

    @field_validator("allowed_globs", "denied_globs")
    @classmethod
    def _dialect(cls, patterns: list[str]) -> list[str]:
        return _dialect_globs(patterns)


class Blocker(Document):
    """Something a reviewer would stop on; binary and decidable from the diff and its context."""

    id: str = Field(pattern=ITEM_ID)
    """Id, unique within the rubric, for example ``B1``."""
    criterion: str = Field(min_length=1)
    """The binary criterion the judge decides."""
    rationale: str = Field(min_length=1)
    """Why a reviewer would request changes."""
    evidence: list[str] = Field(min_length=1)
    """Citations: a review comment URL, ``path:line`` of a guidance file or of the base source, or
    ``house:R13`` for a team review rule. A single string is accepted."""
    needs_tree: bool = False
    """True when deciding it needs the base tree beyond the diff: the diff-only judge skips it and reports
    it as not measured."""

    @field_validator("evidence", mode="before")
    @classmethod
    def _one_string(cls, value: object) -> object:
        return [value] if isinstance(value, str) else value

    @field_validator("evidence")
    @classmethod
    def _non_empty(cls, value: list[str]) -> list[str]:
        if any(not item.strip() for item in value):
            raise ValueError("an evidence entry is empty")
        return value

    @property
    def house_rules(self) -> list[str]:
        """Ids of the team review rules this blocker cites (``house:R13`` -> ``R13``)."""
        return [m.group("rule") for item in self.evidence if (m := HOUSE_CITATION.match(item.strip()))]


class NonBlocker(Document):
    """A weighted quality criterion: style, naming, comments, extra tests, formatting."""

    id: str = Field(pattern=ITEM_ID)
    """Id, unique within the rubric, for example ``N1``."""
    criterion: str = Field(min_length=1)
    """The binary criterion the judge decides."""
    weight: float = Field(default=1, gt=0, allow_inf_nan=False)
    """Weight in ``merge_score``, the weighted share of non-blockers that pass."""
    rationale: str = ""
    """Why it matters."""


class HackReport(Document):
    """The author's attempt to break the rubric."""

    lazy_solution: str = Field(min_length=1)
    """How a weak change could pass the tests and still be unmergeable."""
    alt_valid_solution: str = Field(min_length=1)
    """A different approach that is also mergeable; the rubric must not penalize it (the judge sees it)."""


class Calibration(Document):
    """Diffs for the admission check (repo rubric check), relative to the task directory."""

    lazy: list[str] = Field(default_factory=list)
    """Diffs that must not be mergeable, each failing at least the blocker it was written to break."""
    alt: list[str] = Field(default_factory=list)
    """Diffs that must be mergeable."""


class DraftRecord(Document):
    """Who drafted a rubric (``repo rubric draft``) and from what: never from an agent's output."""

    model: str = Field(min_length=1)
    """The drafting model's full id."""
    harness: str = Field(min_length=1)
    """The harness it ran through."""
    at: str = Field(min_length=1)
    """When, ISO 8601 UTC."""
    inputs: list[str] = Field(default_factory=list)
    """What it read: the task's prompt, the oracle's diff, each guidance file, each review rule."""


class Approval(Document):
    """A maintainer's approval of the rubric (``repo rubric approve``), blocker by blocker."""

    by: str = Field(min_length=1)
    """Who approved it."""
    at: str = Field(min_length=1)
    """When, ISO 8601 UTC."""
    digest: str = Field(pattern=r"^sha256:[0-9a-f]{64}$")
    """The rubric's content when approved (:func:`content_digest`): a later edit makes it a draft again."""
    note: str = ""
    """What the maintainer changed or wants kept in mind."""


class RepoRubric(Document):
    """rubric.json: intent, scope, blockers and non-blockers of one task."""

    schema_: Literal["repo_rubric.v1"] = Field(alias="schema")
    """Document type and version."""
    task: str = Field(min_length=1)
    """Id of the task this rubric grades."""
    status: RubricStatus = RubricStatus.DRAFT
    """``draft`` until a maintainer approves it blocker by blocker; a draft's results are reported as
    provisional."""
    intent: str = Field(min_length=1)
    """What the maintainer wants, including requirements the prompt only implies."""
    scope: Scope
    """Paths and size limits of an acceptable change."""
    blockers: list[Blocker] = Field(min_length=1)
    """What a reviewer would stop on (2-5 for an admitted task)."""
    non_blockers: list[NonBlocker] = Field(default_factory=list)
    """Weighted quality criteria (3-6 for an admitted task)."""
    hack_report: HackReport
    """A realistic lazy solution and a valid alternative."""
    calibration: Calibration = Field(default_factory=Calibration)
    """Calibration diffs for ``repo rubric check``."""
    drafted: DraftRecord | None = None
    """Set by ``repo rubric draft``: the model that drafted it and from what."""
    approval: Approval | None = None
    """Set by ``repo rubric approve`` with ``status: approved``."""

    @model_validator(mode="after")
    def _unique_ids(self) -> RepoRubric:
        seen: set[str] = set()
        for item_id in [b.id for b in self.blockers] + [n.id for n in self.non_blockers]:
            if item_id in seen:
                raise ValueError(f"rubric item id {item_id!r} appears twice; the judge answers per id")
            seen.add(item_id)
        return self


def content_digest(rubric: RepoRubric) -> str:
    """sha256 of what a maintainer approves: every key but ``status``, ``drafted`` and ``approval``."""
    content = rubric.model_dump(mode="json", by_alias=True, exclude={"status", "drafted", "approval"})
    return "sha256:" + hashlib.sha256(json.dumps(content, sort_keys=True).encode("utf-8")).hexdigest()


def edited_since_approval(rubric: RepoRubric) -> bool:
    """An approved rubric whose content no longer matches what was approved."""
    return rubric.approval is not None and rubric.approval.digest != content_digest(rubric)


def provisional(rubric: RepoRubric) -> bool:
    """Its results are provisional: a draft, or an approved rubric edited since its approval."""
    return rubric.status == RubricStatus.DRAFT or edited_since_approval(rubric)


def approval_holds(rubric: RepoRubric) -> str | None:
    """A rubric marked approved was approved as it reads now (``repo rubric approve`` records it); why not, or
    None. A hand-marked ``approved`` without a record is taken at its word."""
    if rubric.status == RubricStatus.APPROVED and edited_since_approval(rubric):
        assert rubric.approval is not None
        return (
            f"edited since {rubric.approval.by} approved it on {rubric.approval.at}: its results are "
            "provisional until a maintainer approves it again (repo rubric approve)"
        )
    return None


def blocker_count(rubric: RepoRubric) -> str | None:
    """A task has 2-5 blockers."""
    low, high = BLOCKERS_RANGE
    if not low <= len(rubric.blockers) <= high:
        return f"{len(rubric.blockers)} blockers; a task has {low}-{high}"
    return None


def non_blocker_count(rubric: RepoRubric) -> str | None:
    """A task has 3-6 non-blockers."""
    low, high = NON_BLOCKERS_RANGE
    if not low <= len(rubric.non_blockers) <= high:
        return f"{len(rubric.non_blockers)} non-blockers; a task has {low}-{high}"
    return None


def task_matches(rubric: RepoRubric, task_id: str | None) -> str | None:
    """A rubric sits in its task's directory and names that task."""
    if task_id is not None and rubric.task != task_id:
        return f"rubric names task {rubric.task!r} but sits in the directory of task {task_id!r}"
    return None


def house_citations(rubric: RepoRubric, rules: RepoReviewRules | None) -> list[str]:
    """A ``house:R13`` citation names a rule that exists, is confirmed, and was seen on at least 3 PRs from
    at least 2 reviewers."""
    out = []
    for blocker in rubric.blockers:
        for rule_id in blocker.house_rules:
            rule = rules.rule(rule_id) if rules is not None else None
            if rules is None:
                out.append(f"{blocker.id} cites house:{rule_id} but the repository has no review_rules.json")
            elif rule is None:
                out.append(f"{blocker.id} cites house:{rule_id}, which review_rules.json does not define")
            elif not may_back_a_blocker(rule):
                out.append(
                    f"{blocker.id} cites house:{rule_id} ({rule.status}, {rule.prs} PRs, {rule.reviewers} "
                    "reviewers); a blocker needs a confirmed rule seen on >= 3 PRs from >= 2 reviewers"
                )
    return out


def rubric_problems(
    rubric: RepoRubric, *, task_id: str | None = None, rules: RepoReviewRules | None = None
) -> list[str]:
    """Warnings about a valid rubric that is not yet fit to admit a task."""
    found = [
        blocker_count(rubric),
        non_blocker_count(rubric),
        task_matches(rubric, task_id),
        approval_holds(rubric),
    ]
    return [p for p in found if p is not None] + house_citations(rubric, rules)
