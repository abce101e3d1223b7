"""Team review rules: loading ``<eval_dir>/review_rules.json``, which rules a judge or
reviewer agent gets, which may back a blocker, the leak guard, and the measures of the rules themselves.

The document's shape and the three rules of the method live with the model,
:mod:`dokimi.schemas.review_rules`, and are re-exported here under the names the spec uses; the judge
(:func:`dokimi.checks.merge.judge.render_judge_input`) calls the same :func:`rules_for_diff`, so there is one
implementation of "only the cited rules and the confirmed rules whose paths match the diff".

Evaluating the rules (how well the rules themselves do) is pure functions over literal data:

- :func:`coverage`: predictive coverage, the share of maintainer comments made on or after ``cut_date`` that
  some confirmed rule matches;
- :func:`confirmed_share` and :func:`match_agreement`: the two precisions, the maintainer-confirmed share of a
  sampled set of rules and the share of rule matches on new PRs a maintainer agrees with;
- :func:`single_reviewer_rules`: stability, a rule seen from one reviewer only stays a candidate.

Whether a comment is an instance of a rule is a judgement (a maintainer's or a labelling model's); it comes in
as data (:attr:`ReviewComment.rules`), and these functions only count.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path

from dokimi.errors import UsageError
from dokimi.globs import match_any
from dokimi.repo.manifest import LoadedTask, load_manifest, load_tasks
from dokimi.rundir import REVIEW_RULES_JSON
from dokimi.schemas._base import read_document
from dokimi.schemas.manifest import RepoManifest
from dokimi.schemas.review_comments import ReviewCommentLine
from dokimi.schemas.review_rules import (
    MIN_PRS_FOR_BLOCKER,
    MIN_REVIEWERS_FOR_BLOCKER,
    RepoReviewRules,
    ReviewRule,
    RuleStatus,
    may_back_a_blocker,
    may_score_base,
    review_rules_problems,
    rule_lines,
    rules_for_diff,
)
from dokimi.schemas.rules_reports import RulesEvaluation
from dokimi.source import open_source
from dokimi.source.git import toplevel
from dokimi.stats import wilson_interval

__all__ = [
    "MIN_PRS_FOR_BLOCKER",
    "MIN_REVIEWERS_FOR_BLOCKER",
    "REVIEW_RULES_JSON",
    "RepoReviewRules",
    "ReviewComment",
    "ReviewRule",
    "RuleMatch",
    "RuleStatus",
    "Share",
    "base_day",
    "blocker_eligible",
    "confirmed_share",
    "coverage",
    "evaluate_rules",
    "labelled_comments",
    "load_review_rules",
    "load_rules_file",
    "eval_dir_of",
    "EvalDir",
    "match_agreement",
    "review_rules_problems",
    "reviewer_prompt",
    "rules_for_reviewer",
    "rule_may_score",
    "rules_for_diff",
    "rules_for_judge",
    "single_reviewer_rules",
]


def load_review_rules(eval_dir: Path) -> RepoReviewRules | None:
    """``<eval_dir>/review_rules.json`` (an exported eval directory on the host), or None when there is
    none; a DocumentError naming file:line:key when it is malformed."""
    path = eval_dir / REVIEW_RULES_JSON
    return load_rules_file(path) if path.is_file() else None


@dataclass(frozen=True)
class EvalDir:
    """A working tree's eval directory, as its manifest names it."""

    root: Path
    """The repository's root."""
    path: Path
    """``<root>/<eval_dir>``."""
    manifest: RepoManifest
    tasks: list[LoadedTask]
    """Every task of the manifest, read once."""

    @property
    def rules_file(self) -> Path:
        return self.path / REVIEW_RULES_JSON


def eval_dir_of(repo_dir: Path, manifest: str | None) -> EvalDir:
    """The eval directory of the working tree at ``repo_dir`` (or above it) and its tasks; a UsageError when
    its manifest names none."""
    root = toplevel(repo_dir) or repo_dir
    with open_source(str(root)) as repo:
        snapshot = repo.eval_snapshot()
        loaded = load_manifest(snapshot, manifest=manifest, manifest_file=None, required=True)
        found = loaded.manifest
        if found is None or found.eval_dir is None:
            raise UsageError(
                "the manifest names no eval_dir, where review_rules.json lives",
                hint="run `dokimi repo init` first, or name the rules file",
            )
        return EvalDir(root, root / found.eval_dir, found, load_tasks(snapshot, found))


def load_rules_file(path: Path) -> RepoReviewRules:
    """A review_rules.json named by path; a DocumentError naming file:line:key when it is malformed."""
    return read_document(path, RepoReviewRules)


def blocker_eligible(rule: ReviewRule) -> bool:
    """A rule may back a blocker only when confirmed and seen on at least 3 PRs from at least 2 reviewers."""
    return may_back_a_blocker(rule)


def base_day(base_date: dt.date | dt.datetime | str) -> dt.date:
    """The calendar day of a base date, in UTC: a ``dt.date``, an aware or naive ``datetime``, or an ISO
    8601 string as meta.json's ``base_date`` and ``git log --format=%cI`` write it. A naive time is UTC."""
    if isinstance(base_date, str):
        text = base_date.strip()
        parsed: dt.date | dt.datetime = (
            dt.date.fromisoformat(text) if len(text) == 10 else dt.datetime.fromisoformat(text)
        )
    else:
        parsed = base_date
    if isinstance(parsed, dt.datetime):
        if parsed.tzinfo is not None:
            parsed = parsed.astimezone(dt.UTC)
        return parsed.date()
    return parsed


def rule_may_score(rules: RepoReviewRules, task_base_date: dt.date | dt.datetime | str) -> bool:
    """Leak guard: rules mined from PRs merged before ``cut_date`` may score only a task whose base is on or
    after it; a task based earlier may be the very PR a rule was mined from."""
    return may_score_base(rules, base_day(task_base_date))


def rules_for_judge(
    rules: RepoReviewRules | None, task_base_date: dt.date | dt.datetime | str | None
) -> RepoReviewRules | None:
    """The rules a task's judge may be given: None when there are none, when the task's base date is
    unknown, or when the leak guard refuses the base (the judge then gets no team rules at all)."""
    if rules is None or task_base_date is None:
        return None
    return rules if rule_may_score(rules, task_base_date) else None


# --- evaluating the rules themselves ----------------------------------------------------------------------


@dataclass(frozen=True)
class Share:
    """``k`` of ``n``, with its Wilson 95% interval (None when ``n`` is 0)."""

    k: int
    n: int

    @property
    def value(self) -> float | None:
        return self.k / self.n if self.n else None

    @property
    def interval(self) -> tuple[float, float] | None:
        return wilson_interval(self.k, self.n)


@dataclass(frozen=True)
class ReviewComment:
    """A maintainer's review comment on a PR, labelled with the rules it is an instance of."""

    id: str
    date: dt.date | dt.datetime | str
    """When it was made; only comments on or after ``cut_date`` measure the rules (earlier ones mined
    them)."""
    path: str | None
    """The file it was made on; None for a PR-level comment."""
    rules: tuple[str, ...] = ()
    """Ids of the rules a labeller matched it to; empty when it is not an instance of any rule."""


def _applies(rule: ReviewRule, path: str | None) -> bool:
    return path is None or match_any(rule.paths, path)


def coverage(rules: RepoReviewRules, comments: Iterable[ReviewComment]) -> tuple[Share, list[str]]:
    """Predictive coverage: the share of comments made on or after ``cut_date`` that some confirmed rule
    matches (labelled with its id, on a path its globs cover); and the ids of the uncovered comments, which
    are what the next mining should look at."""
    confirmed = {r.id: r for r in rules.rules if r.status is RuleStatus.CONFIRMED}
    covered = 0
    uncovered: list[str] = []
    total = 0
    for comment in comments:
        if base_day(comment.date) < rules.cut_date:
            continue
        total += 1
        if any(rid in confirmed and _applies(confirmed[rid], comment.path) for rid in comment.rules):
            covered += 1
        else:
            uncovered.append(comment.id)
    return Share(covered, total), sorted(uncovered)


def confirmed_share(sample: Sequence[ReviewRule]) -> Share:
    """Precision of the mining: the maintainer-confirmed share of a sampled set of rules (a rule still a
    candidate counts as not confirmed)."""
    return Share(sum(r.status is RuleStatus.CONFIRMED for r in sample), len(sample))


@dataclass(frozen=True)
class RuleMatch:
    """A rule matched on a new PR (by a reviewer agent or the judge), and whether a maintainer agrees."""

    rule: str
    agreed: bool | None
    """None: no maintainer has looked at it yet (not counted)."""


def match_agreement(matches: Iterable[RuleMatch]) -> Share:
    """Precision in use: the share of rule matches on new PRs that a maintainer agrees with, over the
    matches a maintainer judged."""
    judged = [m for m in matches if m.agreed is not None]
    return Share(sum(1 for m in judged if m.agreed), len(judged))


def single_reviewer_rules(rules: RepoReviewRules) -> list[str]:
    """Stability: ids of the rules seen from one reviewer only; they are that reviewer's preference and stay
    candidates until a second reviewer confirms them."""
    return sorted(r.id for r in rules.rules if r.reviewers < MIN_REVIEWERS_FOR_BLOCKER)


# --- repo rules evaluate ----------------------------------------------------------------------------------


def share_doc(share: Share) -> dict[str, object]:
    """A Share as repo_rules_evaluation.v1 writes it."""
    return {"k": share.k, "n": share.n, "value": share.value, "interval": share.interval}


def labelled_comments(lines: Iterable[ReviewCommentLine]) -> list[ReviewComment]:
    """The lines of a labelled review_comments.jsonl as :class:`ReviewComment` (dated by ``created_at``, or
    ``merged_at`` when it has none); a comment with neither cannot be placed against the cut (UsageError)."""
    comments = []
    for line in lines:
        date = line.created_at or line.merged_at
        if date is None:
            raise UsageError(
                f"the comment {line.url} has neither created_at nor merged_at",
                hint="the evaluation counts comments made on or after cut_date: date every comment",
            )
        comments.append(ReviewComment(line.url, date, line.path, tuple(line.rules)))
    return comments


def evaluate_rules(
    rules: RepoReviewRules,
    lines: Sequence[ReviewCommentLine],
    matches: Sequence[RuleMatch] | None = None,
    sample: Sequence[str] | None = None,
) -> RulesEvaluation:
    """repo_rules_evaluation.v1: predictive coverage of the labelled comments after the cut, the two
    precisions, and stability (docs/review-rules.md)."""
    comments = labelled_comments(lines)
    share, uncovered = coverage(rules, comments)
    after = [c for c in comments if base_day(c.date) >= rules.cut_date]
    known = {rule.id for rule in rules.rules}
    missing = sorted(set(sample or ()) - known)
    if missing:
        raise UsageError(f"--sample names {', '.join(missing)}, which the rules file does not hold")
    sampled = [rule for rule in rules.rules if sample is None or rule.id in set(sample)]
    single = single_reviewer_rules(rules)
    return RulesEvaluation.model_validate(
        {
            "cut_date": rules.cut_date,
            "comments": len(comments),
            "before_cut": len(comments) - len(after),
            "coverage": share_doc(share),
            "uncovered": uncovered,
            "per_rule": [
                {
                    "id": rule.id,
                    "status": rule.status.value,
                    "covered": sum(rule.id in c.rules and _applies(rule, c.path) for c in after),
                }
                for rule in rules.rules
            ],
            "unknown_labels": sorted({rid for c in comments for rid in c.rules} - known),
            "precision_mined": share_doc(confirmed_share(sampled)),
            "sample": [rule.id for rule in sampled],
            "precision_in_use": share_doc(match_agreement(matches)) if matches is not None else None,
            "single_reviewer": single,
            "confirmed_single_reviewer": [
                rule.id for rule in rules.rules if rule.id in single and rule.status is RuleStatus.CONFIRMED
            ],
        }
    )


# --- what a reviewer agent is given -----------------------------------------------------------------------


def rules_for_reviewer(
    rules: RepoReviewRules | None,
    task_base_date: dt.date | dt.datetime | str | None,
    review_paths: Sequence[str],
    cited: Sequence[str] = (),
) -> list[ReviewRule]:
    """What a review task's reviewer agent gets, as the judge would: nothing when the leak guard refuses the
    task's base, else the cited rules and the confirmed rules whose paths match the diff under review, never
    the whole list."""
    allowed = rules_for_judge(rules, task_base_date)
    return rules_for_diff(allowed, review_paths, cited) if allowed is not None else []


def reviewer_prompt(prompt: str, given: Sequence[ReviewRule]) -> str:
    """The task's prompt with the rules given, under the heading the judge's input uses; the prompt as it is
    when none is given."""
    if not given:
        return prompt
    lines = "\n".join(rule_lines(given))
    return (
        f"{prompt.rstrip()}\n\n## Team review rules that apply\n\n"
        f"This repository's reviewers enforce these rules on changes to the files they name:\n{lines}\n"
    )
