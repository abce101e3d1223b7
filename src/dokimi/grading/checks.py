"""The framework's own checks of a cell, beside the repository's grade: one small protocol.

Mergeability (:data:`dokimi.grading.merge.MERGEABILITY`: merge.json) and the perf check
(:data:`dokimi.grading.perf.PERF`: perf/check.json) keep it; :data:`dokimi.grading.grade.FRAMEWORK_CHECKS`
lists them in the order grading runs them. A check

- ``start``\\ s after the agent and before the grade container (mergeability takes the workspace diff and asks
  the judge then, before a grader restores the hidden tests); it answers None when the task does not ask for
  it (no rubric, no ``perf``);
- ``finish``\\ es after a grade without a grader failure: it writes its document into the run directory and
  returns it;
- ``read``\\ s its document back from a finished run directory (``repo regrade``, ``repo report``).

Every document has ``metrics``, which the gate reads beside grade.json's, once
(:func:`dokimi.grading.verdict.gate_over`). docs/architecture.md says where a new check goes.
"""

from __future__ import annotations

import os
import stat
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Protocol, TypeVar

from dokimi.errors import DocumentError
from dokimi.grading.gate import MetricValue
from dokimi.schemas._base import read_document

if TYPE_CHECKING:
    from pydantic import BaseModel

    from dokimi.grading.environment import GradeEnvironment
    from dokimi.grading.grade import CellFacts
    from dokimi.schemas.grade import RepoGrade
    from dokimi.schemas.task import Task

__all__ = ["CheckDocument", "FrameworkCheck", "StartedCheck", "framework_document"]

MAX_DOCUMENT_BYTES = 16 * 1024 * 1024
M = TypeVar("M", bound="BaseModel")


class CheckDocument(Protocol):
    """What a check wrote into the run directory: its metrics are the gate's to read."""

    @property
    def metrics(self) -> Mapping[str, MetricValue]: ...


class StartedCheck(Protocol):
    """A check of one cell, started before its grade."""

    @property
    def cost_usd(self) -> float | None:
        """What it paid a model for this cell (the judges); None when nothing."""
        ...

    @property
    def judges(self) -> tuple[str, ...]:
        """The model ids of the judges it asked about this cell, the primary first; empty for none."""
        ...

    def finish(self, grade: RepoGrade | None) -> CheckDocument | None:
        """After a grade without grader failure: the document, written into the run directory."""
        ...


class FrameworkCheck(Protocol):
    """One of the framework's checks (see the module docstring)."""

    name: str

    def start(
        self, environment: GradeEnvironment, run_dir: Path, task: Task, facts: CellFacts
    ) -> StartedCheck | None:
        """Before the grade container: what must be taken then; None when the task does not ask for it."""
        ...

    def read(self, run_dir: Path) -> CheckDocument | None:
        """The check's document in a finished run directory; None when absent or unreadable."""
        ...


def framework_document(path: Path, model: type[M]) -> M | None:
    """A document the framework wrote into the run directory, or None when it is absent. The directory is
    shared with the grader, so a link or a non-file in its place counts as absent."""
    try:
        st = os.lstat(path)
    except FileNotFoundError:
        return None
    if not stat.S_ISREG(st.st_mode) or st.st_size > MAX_DOCUMENT_BYTES:
        return None
    try:
        return read_document(path, model)
    except DocumentError:
        return None
