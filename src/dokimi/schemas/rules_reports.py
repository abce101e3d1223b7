"""What the ``repo rules`` commands report: a mining (repo_rules_mining.v1), an evaluation of the rules
(repo_rules_evaluation.v1) and the effect of giving them to reviewer agents (repo_rules_effect.v1)."""

from __future__ import annotations

import datetime as dt
from typing import Literal

from pydantic import Field

from dokimi.schemas._base import Document


class ShareDoc(Document):
    """``k`` of ``n``, its value and Wilson 95% interval (null when ``n`` is 0)."""

    k: int = Field(ge=0)
    """How many count."""
    n: int = Field(ge=0)
    """Out of how many."""
    value: float | None
    """k / n; null when n is 0."""
    interval: tuple[float, float] | None
    """Wilson 95% interval of the value; null when n is 0."""


# --- repo rules mine --------------------------------------------------------------------------------------


class MinedRuleDoc(Document):
    """A rule of the mining and what became of it."""

    id: str
    """The rule's id; a group below the threshold keeps its provisional id (``new-3``)."""
    rule: str
    """The rule's text (a previous rule keeps its own)."""
    paths: list[str]
    """Globs of the files it applies to."""
    outcome: Literal["added", "updated", "unchanged", "not_seen", "below_threshold"]
    """``added``: a new candidate; ``updated``: a previous rule whose counts or evidence changed;
    ``unchanged``; ``not_seen``: a previous rule no mined comment supports this time (a maintainer decides
    whether to retire it); ``below_threshold``: a new group seen on too few pull requests or from too few
    reviewers, not written."""
    status: str | None
    """Its status in the rules file; null for a group that was not written."""
    prs: int
    """Distinct pull requests of the comments it groups (this mining's)."""
    reviewers: int
    """Distinct reviewers of those comments."""
    comments: int
    """Comments it groups."""


class RulesMining(Document):
    """repo_rules_mining.v1: what ``repo rules mine`` read, left out, asked and wrote."""

    schema_: Literal["repo_rules_mining.v1"] = Field(default="repo_rules_mining.v1", alias="schema")
    """Document type and version."""
    cut_date: dt.date
    """Only pull requests merged before this day were mined."""
    previous_cut_date: dt.date | None
    """The cut_date of the rules file this mining started from; null when there was none."""
    model: str
    """The judge's model that grouped the comments."""
    comments_read: int
    """Comments in the input."""
    comments_mined: int
    """Comments the leak guard let through: what the model saw."""
    excluded: dict[str, int]
    """Comments left out, by reason: ``not_merged``, ``merged_on_or_after_cut``, ``task_source`` (a pull
    request a task was made from or replays), ``excluded_pr`` (``--exclude-pr``), ``by_author`` (the pull
    request's author replying), ``empty``."""
    task_source_prs: dict[str, list[str]]
    """Task-source pull requests found in the input (number -> the tasks naming it); none of their comments
    was mined."""
    calls: int
    """Model calls made (a reply that could not be used is asked once more)."""
    cost_usd: float | None
    """What the calls cost as the harness reported it; null when it reported nothing."""
    min_prs: int
    """A new rule needed at least this many pull requests ..."""
    min_reviewers: int
    """... and this many reviewers."""
    rules: list[MinedRuleDoc]
    """Every rule and group, in the rules file's order, then the groups below the threshold."""
    out: str
    """The rules file written."""


# --- repo rules evaluate ----------------------------------------------------------------------------------


class RuleCoverageDoc(Document):
    """How many comments after the cut one rule covers."""

    id: str
    """The rule's id."""
    status: str
    """Its status."""
    covered: int
    """Comments after the cut labelled with it, on a path it applies to."""


class RulesEvaluation(Document):
    """repo_rules_evaluation.v1: how well the rules themselves do."""

    schema_: Literal["repo_rules_evaluation.v1"] = Field(default="repo_rules_evaluation.v1", alias="schema")
    """Document type and version."""
    cut_date: dt.date
    """The rules' cut_date: only comments made on or after it measure them."""
    comments: int
    """Comments in the input."""
    before_cut: int
    """Comments made before the cut (mining input, not counted)."""
    coverage: ShareDoc
    """Predictive coverage: the share of comments made on or after the cut that some confirmed rule covers
    (labelled with its id, on a path its globs match)."""
    uncovered: list[str]
    """URLs of the comments after the cut no confirmed rule covers: what the next mining should look at."""
    per_rule: list[RuleCoverageDoc]
    """Comments covered per rule (every status, so a candidate's worth shows before it is confirmed)."""
    unknown_labels: list[str]
    """Rule ids the labels name that the rules file does not hold."""
    precision_mined: ShareDoc
    """Precision of the mining: the maintainer-confirmed share of the sampled rules (a candidate counts as
    not confirmed)."""
    sample: list[str]
    """The rules sampled for it (every rule when no sample was given)."""
    precision_in_use: ShareDoc | None
    """The share of rule matches on new pull requests a maintainer agrees with, over the matches judged;
    null without a matches file."""
    single_reviewer: list[str]
    """Stability: rules seen from one reviewer only (that reviewer's preference; a candidate until a second
    reviewer confirms it)."""
    confirmed_single_reviewer: list[str]
    """Of those, the ones confirmed all the same (repo validate warns about each)."""


# --- repo rules effect ------------------------------------------------------------------------------------


class ThreadClassDoc(Document):
    """The threads of one class (covered by a rule or by none) in the two arms."""

    threads: int
    """Distinct threads of the class over the review tasks compared."""
    with_rules: ShareDoc
    """Thread-runs found with the rules given (one per thread and rep)."""
    without_rules: ShareDoc
    """Thread-runs found without them."""
    change: float | None
    """with_rules minus without_rules; null when either has no runs."""
    interval: tuple[float, float] | None
    """Newcombe 95% interval of the change; null when it cannot be computed."""


class ArmPairDoc(Document):
    """An arm with the rules against the same arm without them, for one model and effort."""

    with_arm: str
    """The arm that gives review tasks the rules (``<arm>+rules``)."""
    without_arm: str
    """The same arm without them."""
    model: str
    """Model id."""
    effort: str | None
    """Reasoning effort."""
    tasks: list[str]
    """Review tasks with finished cells in both arms."""
    recall_with: float | None
    """Mean score (recall) of those tasks' cells with the rules."""
    recall_without: float | None
    """... and without."""
    covered: ThreadClassDoc
    """Threads some rule covers: where the rules should help."""
    uncovered: ThreadClassDoc
    """Threads no rule covers: the loss there is the cost of giving rules."""
    loss_on_uncovered: float | None
    """without_rules minus with_rules on the uncovered threads (positive: the rules cost recall there)."""
    underpowered: bool
    """Fewer than 20 thread-runs in a class of either arm: the change is a hint, not a measurement."""
    note: str | None
    """Why the pair could not be measured, when it could not."""


class RulesEffect(Document):
    """repo_rules_effect.v1: review recall with the team rules and without, on threads rules cover and on
    threads none covers."""

    schema_: Literal["repo_rules_effect.v1"] = Field(default="repo_rules_effect.v1", alias="schema")
    """Document type and version."""
    batch: str
    """The batch directory."""
    dry_run: bool
    """The batch ran against the scripted model: its figures are the script's."""
    pairs: list[ArmPairDoc]
    """One per (arm with rules, arm without, model, effort)."""
