"""``repo regrade``: grading must be deterministic (contract §4.2), so regrade a sample of finished cells.

For each sampled cell, the grade inputs of its run directory (workspace/, task.json, meta.json, events.jsonl,
answer.txt, agent.stdout) are copied into a scratch run directory under ``<batch>/_eval/regrade/``; the
batch's ``grade`` entry point runs there in the batch's image with the batch's exported eval_dir, exactly as
the cell's own grade did, and the verdict is computed by the same code (:func:`dokimi.runner.cell.verdict`).
The original grade.json and result.json are never touched.

Every metric of either result, every gate entry, the verdict (``passed``), ``score`` and ``grader_failure``
are compared for exact equality: a deterministic grader gives the same value, so any difference is flagged
with the name of what moved. The sample is drawn from the finished cells sorted by path, with
``random.Random(seed)``, so the same seed regrades the same cells.
"""

from __future__ import annotations

import random
import shutil
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from dokimi.constants import AGENT_STDOUT, ANSWER_TXT, EVENTS_JSONL, META_JSON, TASK_JSON

if TYPE_CHECKING:
    from dokimi.batch import Cell
    from dokimi.schemas.result import Result

__all__ = [
    "GRADE_INPUTS",
    "Mismatch",
    "RegradedCell",
    "compare_results",
    "copy_grade_inputs",
    "sample_cells",
]

GRADE_INPUTS = (TASK_JSON, META_JSON, EVENTS_JSONL, ANSWER_TXT, AGENT_STDOUT)
"""Files of a run directory a regrade copies (besides workspace/): the §4 inputs and the raw trace."""
WORKSPACE = "workspace"
AGENT_GIT = "agent-git"


@dataclass(frozen=True)
class Mismatch:
    """One value that moved between the stored result and the regrade."""

    what: str
    """``passed``, ``score``, ``grader_failure``, ``gate:<metric>`` or ``metric:<name>``."""
    original: Any
    regraded: Any


@dataclass
class RegradedCell:
    """The outcome of regrading one cell."""

    rel: str
    """The cell's path relative to the batch."""
    mismatches: list[Mismatch] = field(default_factory=list)
    error: str | None = None
    """Why the cell could not be regraded at all (a host-side problem, not a mismatch)."""
    grader_error: str | None = None
    """The regrade's grader error, when the regrade was a grader failure."""

    @property
    def matches(self) -> bool:
        return self.error is None and not self.mismatches


def _same(a: Any, b: Any) -> bool:
    """Exact equality that keeps booleans and numbers apart (True is not 1 here)."""
    return type(a) is type(b) and a == b if isinstance(a, bool) or isinstance(b, bool) else a == b


def compare_results(original: Result, regraded: Result) -> list[Mismatch]:
    """Every value of the verdict that differs between two results of one cell, named."""
    found: list[Mismatch] = []
    for name in ("passed", "score", "grader_failure", "gated"):
        a, b = getattr(original, name), getattr(regraded, name)
        if not _same(a, b):
            found.append(Mismatch(name, a, b))
    for metric in sorted(set(original.gate_results) | set(regraded.gate_results)):
        a, b = original.gate_results.get(metric), regraded.gate_results.get(metric)
        if not _same(a, b) or (metric in original.gate_results) != (metric in regraded.gate_results):
            found.append(Mismatch(f"gate:{metric}", a, b))
    for metric in sorted(set(original.metrics) | set(regraded.metrics)):
        a, b = original.metrics.get(metric), regraded.metrics.get(metric)
        if not _same(a, b) or (metric in original.metrics) != (metric in regraded.metrics):
            found.append(Mismatch(f"metric:{metric}", a, b))
    return found


def sample_cells(cells: Sequence[Cell], n: int | None, seed: int) -> list[Cell]:
    """``n`` of ``cells`` drawn with ``seed`` (all of them when ``n`` is None or not smaller), by path."""
    ordered = sorted(cells, key=lambda c: c.rel)
    if n is None or n >= len(ordered):
        return ordered
    picked = random.Random(seed).sample(ordered, n)
    return sorted(picked, key=lambda c: c.rel)


def copy_grade_inputs(run_dir: Path, scratch: Path, *, copy: Callable[..., Any] = shutil.copy2) -> None:
    """Copy what grade reads from ``run_dir`` into the fresh directory ``scratch``.

    The workspace is copied with its symlinks as links. Its ``.git/config`` and ``.git/hooks`` were moved to
    agent-git/ before the original grade; they are not restored, so the regrade sees what the grade saw.
    """
    scratch.mkdir(parents=True)
    shutil.copytree(run_dir / WORKSPACE, scratch / WORKSPACE, symlinks=True, copy_function=copy)
    for name in GRADE_INPUTS:
        source = run_dir / name
        if source.is_file():
            copy(source, scratch / name)
