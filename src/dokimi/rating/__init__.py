"""Human scoring of blinded artifacts (docs/rating.md): export, import, adjudicate, summary.

The workflow and its files: docs/rating.md.
"""

from __future__ import annotations

from dokimi.rating.blinding import REDACTED, Category, MarkerSet, marker_set, scrub_diff, scrub_text
from dokimi.rating.export import ExportReport, ReblindReport, export_batch, reblind
from dokimi.rating.scores import (
    AdjudicationReport,
    ImportReport,
    Results,
    adjudicate,
    build_results,
    import_ratings,
)
from dokimi.rating.summary import regression_free, summary

__all__ = [
    "REDACTED",
    "AdjudicationReport",
    "Category",
    "ExportReport",
    "ImportReport",
    "MarkerSet",
    "ReblindReport",
    "Results",
    "adjudicate",
    "build_results",
    "export_batch",
    "import_ratings",
    "marker_set",
    "reblind",
    "regression_free",
    "scrub_diff",
    "scrub_text",
    "summary",
]
