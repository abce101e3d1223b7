"""``dokimi repo rate summary``: rates per condition, rater agreement, RFR, and what was left out.

- A condition is (arm, model, effort), unblinded through the key. Per condition and outcome: the runs with
  the outcome true over the final runs, with a Wilson 95% interval. Final runs only: pending (disagreement
  not adjudicated), unrated and excluded runs are listed, never counted.
- Cohen's kappa per outcome and per pair of raters, over the runs both scored (leaked and withheld runs
  left out, adjudicated runs kept: scoring-rubric "Adjudication" 3).
- RFR, the regression-free rate (scoring-rubric "RFR note"): a run counts as regression-free when its final
  ``regression`` is false AND, when the run carries a locked evaluator result (``hidden_validation_passed``
  not null in results.jsonl), that result is true. A run whose task has no locked checks counts on the human
  flag alone; a locked-check failure makes a run not regression-free even when the human flag is false.
- Blinding leaks (rater-reported) and withheld artifacts (export could not redact) are counted and listed
  apart from the primary analysis.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Sequence
from itertools import combinations
from pathlib import Path

from dokimi.rating.scores import Results, build_results, read_key, stored_adjudications, stored_scores
from dokimi.schemas.rating import (
    OUTCOMES,
    ConditionRate,
    ExcludedRun,
    KappaRow,
    RaterScore,
    RatingKey,
    RatingResult,
    RatingSummary,
)
from dokimi.stats import cohen_kappa, wilson_interval

#: The summarized metric that is not a rater field.
RFR = "rfr"


def regression_free(result: RatingResult) -> bool:
    """The RFR note: the human regression flag is false and, when locked evaluator checks are present for
    the run, they passed."""
    if result.regression:
        return False
    if result.hidden_validation_passed is None:
        return True
    return result.hidden_validation_passed


def condition_of(key: RatingKey, run_id: str) -> tuple[str, str, str | None]:
    entry = key.artifacts[run_id]
    return (entry.arm, entry.model, entry.effort)


def condition_rates(key: RatingKey, final: Sequence[RatingResult]) -> list[ConditionRate]:
    """Per (arm, model, effort) and outcome (the six, then rfr): k of n with a Wilson 95% interval."""
    groups: dict[tuple[str, str, str | None], list[RatingResult]] = defaultdict(list)
    for result in final:
        groups[condition_of(key, result.run_id)].append(result)
    rows: list[ConditionRate] = []
    for (arm, model, effort), results in sorted(
        groups.items(), key=lambda g: (g[0][0], g[0][1], g[0][2] or "")
    ):
        n = len(results)
        values: list[tuple[str, int]] = [(str(o), sum(1 for r in results if getattr(r, o))) for o in OUTCOMES]
        values.append((RFR, sum(1 for r in results if regression_free(r))))
        for outcome, k in values:
            ci = wilson_interval(k, n)
            rows.append(
                ConditionRate(
                    arm=arm,
                    model=model,
                    effort=effort,
                    outcome=outcome,
                    k=k,
                    n=n,
                    rate=k / n,
                    ci_low=ci[0] if ci else None,
                    ci_high=ci[1] if ci else None,
                )
            )
    return rows


def kappas(scores: Sequence[RaterScore]) -> list[KappaRow]:
    """Cohen's kappa per outcome for every pair of raters with runs in common (scored rows only)."""
    by_rater: dict[str, dict[str, RaterScore]] = defaultdict(dict)
    for score in scores:
        if score.blinding_leak is None:
            by_rater[score.rater][score.run_id] = score
    rows: list[KappaRow] = []
    for a, b in combinations(sorted(by_rater), 2):
        common = sorted(set(by_rater[a]) & set(by_rater[b]))
        if not common:
            continue
        for outcome in OUTCOMES:
            xs = [getattr(by_rater[a][r], outcome) for r in common]
            ys = [getattr(by_rater[b][r], outcome) for r in common]
            agree = sum(1 for x, y in zip(xs, ys, strict=True) if x == y)
            rows.append(
                KappaRow(
                    rater_a=a,
                    rater_b=b,
                    outcome=str(outcome),
                    n=len(common),
                    agreement=agree / len(common),
                    kappa=cohen_kappa(xs, ys),
                )
            )
    return rows


def summarize(key: RatingKey, results: Results, *, key_path: str) -> RatingSummary:
    excluded = []
    for item in results.excluded:
        arm, model, effort = condition_of(key, item.run_id)
        excluded.append(
            ExcludedRun(
                run_id=item.run_id,
                reason=item.reason,
                detail=item.detail,
                arm=arm,
                model=model,
                effort=effort,
            )
        )
    return RatingSummary(
        schema="repo_rating_summary.v1",
        key=key_path,
        batch=key.batch,
        runs=sum(1 for e in key.artifacts.values() if e.status != "retired"),
        final=len(results.final),
        adjudicated=sum(1 for r in results.final if r.adjudicated),
        pending=results.pending,
        unrated=results.unrated,
        rates=condition_rates(key, results.final),
        kappa=kappas(results.scores),
        blinding_leaks=sum(1 for e in results.excluded if e.reason == "blinding_leak"),
        withheld=sum(1 for e in results.excluded if e.reason == "withheld"),
        excluded=excluded,
    )


def summary(key_path: Path) -> RatingSummary:
    """The summary of the rating directory beside ``key_path`` (recomputed from raters.jsonl and
    adjudications.jsonl, so it never reads a stale results.jsonl)."""
    key = read_key(key_path)
    rating_dir = key_path.parent
    results = build_results(key, stored_scores(rating_dir), stored_adjudications(rating_dir))
    return summarize(key, results, key_path=str(key_path))
