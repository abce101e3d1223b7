"""Raters' rows in, final values out: ``rate import`` and ``rate adjudicate`` (docs/rating.md).

Files, all beside the key (never in the raters' directory):

- ``raters.jsonl``: every rater row imported (repo_rating.v1), sorted by (run_id, rater). Rows stay here
  after adjudication: kappa is computed from them.
- ``adjudications.jsonl``: the adjudicators' rows (repo_adjudication.v1).
- ``results.jsonl``: one row per run with final values (repo_rating_result.v1), adjudicated rows marked.

A run is

- ``leaked`` when any rater reported a blinding leak: set aside for re-blinding (``rate reblind``), excluded
  from the primary analysis until then;
- ``withheld`` when export found a marker it could not redact: never shown to raters, excluded;
- ``pending`` when its raters disagree on some outcome and no adjudicator has chosen yet;
- ``final`` otherwise (with at least one scored row): agreed values, or the adjudicator's.
"""

from __future__ import annotations

import json
from collections import defaultdict
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Literal, TypeVar

from pydantic import BaseModel

from dokimi.errors import DocumentError, UsageError
from dokimi.schemas._base import (
    Marked,
    decode_text,
    parse_json,
    read_document,
    read_raw,
    validate_marked,
    write_text_atomic,
)
from dokimi.schemas.rating import (
    OUTCOMES,
    AdjudicatedRow,
    Outcome,
    RaterScore,
    RatingKey,
    RatingResult,
    adjudicator_rated_the_run,
    disagreements,
)

RATERS_JSONL = "raters.jsonl"
ADJUDICATIONS_JSONL = "adjudications.jsonl"
RESULTS_JSONL = "results.jsonl"

M = TypeVar("M", bound=BaseModel)


# --- files ------------------------------------------------------------------------------------------------


def read_key(path: Path) -> RatingKey:
    return read_document(path, RatingKey)


def read_rows(path: Path, model: type[M]) -> list[tuple[int, M]]:
    """Every non-blank line of a JSON Lines file validated against ``model``, with its line number.
    A bad line raises DocumentError naming ``file:line`` and the key."""
    raw = read_raw(path)
    rows: list[tuple[int, M]] = []
    for number, line in enumerate(decode_text(raw, str(path)).splitlines(), 1):
        if not line.strip():
            continue
        try:
            data = parse_json(line, str(path)).data
        except DocumentError as exc:
            raise DocumentError(exc.message, path=str(path), line=number, hint=exc.hint) from None
        if not isinstance(data, dict):
            raise DocumentError("a row must be a JSON object", path=str(path), line=number)
        rows.append((number, validate_marked(Marked(data, str(path), {(): number}), model)))
    return rows


def write_rows(path: Path, rows: Sequence[BaseModel]) -> None:
    """One compact, sorted-key JSON object per line."""
    text = "".join(
        json.dumps(r.model_dump(mode="json", by_alias=True), sort_keys=True, ensure_ascii=False) + "\n"
        for r in rows
    )
    write_text_atomic(path, text)


def _stored(path: Path, model: type[M]) -> list[M]:
    return [row for _, row in read_rows(path, model)] if path.is_file() else []


def stored_scores(rating_dir: Path) -> list[RaterScore]:
    return _stored(rating_dir / RATERS_JSONL, RaterScore)


def stored_adjudications(rating_dir: Path) -> list[AdjudicatedRow]:
    return _stored(rating_dir / ADJUDICATIONS_JSONL, AdjudicatedRow)


# --- import -----------------------------------------------------------------------------------------------


@dataclass
class ImportReport:
    """What ``rate import`` did."""

    imported: int = 0
    unchanged: int = 0
    """Rows identical to one already imported (importing the same file twice is harmless)."""
    leaks: list[RaterScore] = field(default_factory=list)
    """Rows reporting a blinding leak: their runs are set aside for re-blinding."""
    total: int = 0
    """Rows in raters.jsonl after the import."""

    def to_json(self) -> dict[str, object]:
        return {
            "imported": self.imported,
            "unchanged": self.unchanged,
            "rows": self.total,
            "set_aside_for_reblinding": [
                {"run_id": r.run_id, "rater": r.rater, "blinding_leak": r.blinding_leak} for r in self.leaks
            ],
        }


def scored_artifact(key: RatingKey, run_id: str, *, path: Path, line: int) -> None:
    """A rater row must name an artifact raters were given."""
    entry = key.artifacts.get(run_id)
    if entry is None:
        raise DocumentError(
            f"run_id {run_id!r} is not an artifact of this key",
            path=str(path),
            line=line,
            key="run_id",
            hint="check the id against blinded/ids.txt of this export",
        )
    if entry.status == "withheld":
        raise DocumentError(
            f"artifact {run_id} was withheld from raters (unredactable marker)",
            path=str(path),
            line=line,
            key="run_id",
        )


def import_ratings(files: Sequence[Path], key_path: Path, *, replace: bool = False) -> ImportReport:
    """Validate raters' rows and merge them into raters.jsonl beside the key. One row per (run, rater): a
    second, different row for the same pair is an error unless ``replace``."""
    key = read_key(key_path)
    rating_dir = key_path.parent
    rows: dict[tuple[str, str], RaterScore] = {(s.run_id, s.rater): s for s in stored_scores(rating_dir)}
    report = ImportReport()
    seen: dict[tuple[str, str], tuple[Path, int]] = {}
    for path in files:
        for line, score in read_rows(path, RaterScore):
            scored_artifact(key, score.run_id, path=path, line=line)
            pair = (score.run_id, score.rater)
            if pair in seen:
                first = seen[pair]
                raise DocumentError(
                    f"{score.rater} scored {score.run_id} twice (first at {first[0]}:{first[1]})",
                    path=str(path),
                    line=line,
                )
            seen[pair] = (path, line)
            old = rows.get(pair)
            if old is not None and old == score:
                report.unchanged += 1
                continue
            if old is not None and not replace:
                raise DocumentError(
                    f"{score.rater} already has a different row for {score.run_id} in {RATERS_JSONL}",
                    path=str(path),
                    line=line,
                    hint="pass --replace to overwrite it",
                )
            rows[pair] = score
            report.imported += 1
            if score.blinding_leak is not None:
                report.leaks.append(score)
    ordered = [rows[pair] for pair in sorted(rows)]
    write_rows(rating_dir / RATERS_JSONL, ordered)
    report.total = len(ordered)
    return report


# --- final values -----------------------------------------------------------------------------------------


@dataclass
class Excluded:
    """A run left out of the primary analysis, and why."""

    run_id: str
    reason: Literal["blinding_leak", "withheld"]
    """``blinding_leak`` (a rater reported one) or ``withheld`` (export could not redact a marker)."""
    detail: str


@dataclass
class Disagreement:
    """A run whose raters disagree, with every rater's values and notes for the adjudicator."""

    run_id: str
    outcomes: list[Outcome]
    scores: list[RaterScore]
    adjudication: AdjudicatedRow | None

    def to_json(self) -> dict[str, object]:
        return {
            "run_id": self.run_id,
            "outcomes": [str(o) for o in self.outcomes],
            "raters": {
                s.rater: {**{str(o): getattr(s, o) for o in self.outcomes}, "notes": s.notes}
                for s in self.scores
            },
            "adjudicated": self.adjudication is not None,
            "adjudicator": self.adjudication.adjudicator if self.adjudication else None,
        }


@dataclass
class Results:
    """Every run of a key, sorted into final, pending, excluded and unrated."""

    final: list[RatingResult]
    disagreements: list[Disagreement]
    excluded: list[Excluded]
    unrated: list[str]
    scores: list[RaterScore]
    """Every scored (non-leak) row of the runs not excluded: the input of kappa."""

    @property
    def pending(self) -> list[str]:
        return [d.run_id for d in self.disagreements if d.adjudication is None]


def run_leaked(scores: Sequence[RaterScore]) -> RaterScore | None:
    """The first row of a run that reports a blinding leak; such a run is set aside for re-blinding."""
    return next((s for s in scores if s.blinding_leak is not None), None)


def agreed_result(run_id: str, scores: Sequence[RaterScore], hidden: bool | None) -> RatingResult:
    first = scores[0]
    values = {str(o): bool(getattr(first, o)) for o in OUTCOMES}
    return RatingResult.model_validate(
        {
            "schema": "repo_rating_result.v1",
            "run_id": run_id,
            "raters": sorted(s.rater for s in scores),
            "adjudicated": False,
            "hidden_validation_passed": hidden,
            **values,
        }
    )


def adjudicated_result(
    row: AdjudicatedRow, scores: Sequence[RaterScore], hidden: bool | None
) -> RatingResult:
    values = {str(o): getattr(row, o) for o in OUTCOMES}
    return RatingResult.model_validate(
        {
            "schema": "repo_rating_result.v1",
            "run_id": row.run_id,
            "raters": sorted(s.rater for s in scores),
            "adjudicated": True,
            "adjudicator": row.adjudicator,
            "adjudication_notes": row.adjudication_notes,
            "hidden_validation_passed": hidden,
            **values,
        }
    )


def build_results(
    key: RatingKey, scores: Sequence[RaterScore], adjudications: Sequence[AdjudicatedRow]
) -> Results:
    """Final values per run: agreed, or adjudicated where raters disagree; leaked and withheld runs apart."""
    by_run: dict[str, list[RaterScore]] = defaultdict(list)
    for score in scores:
        by_run[score.run_id].append(score)
    adjudicated = {a.run_id: a for a in adjudications}
    out = Results(final=[], disagreements=[], excluded=[], unrated=[], scores=[])
    for run_id, entry in sorted(key.artifacts.items()):
        if entry.status == "retired":
            continue
        if entry.status == "withheld":
            markers = sorted({f.marker for f in entry.findings if not f.redacted})
            out.excluded.append(Excluded(run_id, "withheld", "unredactable: " + ", ".join(markers)))
            continue
        rows = sorted(by_run.get(run_id, []), key=lambda s: s.rater)
        leak = run_leaked(rows)
        if leak is not None:
            out.excluded.append(Excluded(run_id, "blinding_leak", f"{leak.rater}: {leak.blinding_leak}"))
            continue
        if not rows:
            out.unrated.append(run_id)
            continue
        out.scores += rows
        differ = disagreements(rows)
        hidden = entry.hidden_validation_passed
        if not differ:
            out.final.append(agreed_result(run_id, rows, hidden))
            continue
        row = adjudicated.get(run_id)
        out.disagreements.append(Disagreement(run_id, differ, rows, row))
        if row is not None:
            out.final.append(adjudicated_result(row, rows, hidden))
    return out


# --- adjudication -----------------------------------------------------------------------------------------


def check_adjudication(
    row: AdjudicatedRow, key: RatingKey, scores: Sequence[RaterScore], *, path: Path, line: int
) -> None:
    """An adjudication must name a run whose raters disagree, by someone who did not rate it."""
    entry = key.artifacts.get(row.run_id)
    if entry is None or entry.status != "blinded":
        raise DocumentError(
            f"run_id {row.run_id!r} is not a blinded artifact of this key",
            path=str(path),
            line=line,
            key="run_id",
        )
    rows = [s for s in scores if s.run_id == row.run_id]
    conflict = adjudicator_rated_the_run(row, rows)
    if conflict is not None:
        raise DocumentError(
            conflict,
            path=str(path),
            line=line,
            key="adjudicator",
            hint="adjudicators do not score runs they originally rated: ask another person",
        )
    if run_leaked(rows) is not None:
        raise DocumentError(
            f"run {row.run_id} is set aside for a blinding leak; re-blind it first",
            path=str(path),
            line=line,
            key="run_id",
        )
    if not disagreements(rows):
        raise DocumentError(
            f"the raters of {row.run_id} do not disagree: nothing to adjudicate",
            path=str(path),
            line=line,
            key="run_id",
        )


@dataclass
class AdjudicationReport:
    results: Results
    added: int = 0

    def to_json(self) -> dict[str, object]:
        r = self.results
        return {
            "added": self.added,
            "final": len(r.final),
            "adjudicated": sum(1 for x in r.final if x.adjudicated),
            "pending": r.pending,
            "disagreements": [d.to_json() for d in r.disagreements],
            "excluded": [{"run_id": e.run_id, "reason": e.reason, "detail": e.detail} for e in r.excluded],
            "unrated": r.unrated,
        }


def adjudicate(files: Sequence[Path], key_path: Path, *, replace: bool = False) -> AdjudicationReport:
    """Take adjudicators' rows (if any), then write results.jsonl: one row per final run."""
    key = read_key(key_path)
    rating_dir = key_path.parent
    scores = stored_scores(rating_dir)
    if not scores:
        raise UsageError(f"no {RATERS_JSONL} beside {key_path}", hint="run `dokimi repo rate import` first")
    rows = {a.run_id: a for a in stored_adjudications(rating_dir)}
    added = 0
    seen: dict[str, tuple[Path, int]] = {}
    for path in files:
        for line, row in read_rows(path, AdjudicatedRow):
            check_adjudication(row, key, scores, path=path, line=line)
            if row.run_id in seen:
                first = seen[row.run_id]
                raise DocumentError(
                    f"{row.run_id} adjudicated twice (first at {first[0]}:{first[1]})",
                    path=str(path),
                    line=line,
                )
            seen[row.run_id] = (path, line)
            old = rows.get(row.run_id)
            if old is not None and old != row and not replace:
                raise DocumentError(
                    f"{row.run_id} already has a different adjudication",
                    path=str(path),
                    line=line,
                    hint="pass --replace to overwrite it",
                )
            if old != row:
                added += 1
            rows[row.run_id] = row
    if files:
        write_rows(rating_dir / ADJUDICATIONS_JSONL, [rows[r] for r in sorted(rows)])
    results = build_results(key, scores, list(rows.values()))
    write_rows(rating_dir / RESULTS_JSONL, results.final)
    return AdjudicationReport(results, added)
