"""repo_run.v1: what ``repo run --json`` prints, the summary of one run of a batch (docs/running.md).

It describes this invocation, not the batch: ``skipped`` cells finished in an earlier run, ``not_started``
ones were held back by ``--max-batch-usd`` or a cancel. The batch's own record is its directory
(``repo report`` reads it).
"""

from __future__ import annotations

from typing import Literal

from pydantic import Field

from dokimi.schemas._base import Document
from dokimi.schemas.batch import BatchPin


class CellCounts(Document):
    """How this run ended for a set of cells (a group, or the whole run)."""

    cells: int = Field(ge=0)
    """Planned cells in this run."""
    ran: int = Field(ge=0)
    """Cells run to a result.json now."""
    skipped: int = Field(ge=0)
    """Cells skipped because an earlier run finished them."""
    failed: int = Field(ge=0)
    """Cells that failed before their agent ran: no result.json, the next run fills them."""
    not_started: int = Field(ge=0)
    """Cells never started (--max-batch-usd)."""
    interrupted: int = Field(ge=0)
    """Cells stopped by Ctrl-C or a signal: no result.json."""
    lost: int = Field(0, ge=0)
    """Cells whose cluster node went away twice (``--executor ray``): no result.json, the next run fills
    them."""


class RunGroup(CellCounts):
    """The cells of one (task, arm, model, effort) in this run."""

    task: str
    """Task id."""
    arm: str
    """Arm, for example ``guidance:none``."""
    prompt: Literal["spec", "issue"] | None = None
    """The prompt variant the run chose (``--prompt-style``); null: the task's own prompt."""
    model: str
    """Model id as passed to the harness."""
    effort: str
    """Reasoning effort; ``default`` for the harness default."""
    passed: int = Field(ge=0)
    """Cells with a result.json whose gate held (a grader failure never passes)."""
    graded: int = Field(ge=0)
    """Gated cells with a result.json (ran now or skipped): what ``passed`` is out of."""
    scored: int = Field(0, ge=0)
    """Score-only cells with a result.json (their task has ``score`` and no gate verdict): their result is
    ``score_mean``, never a pass."""
    score_mean: float | None = None
    """The mean of score.metric over the ``scored`` cells that measured it; null when none did."""
    grader_failures: int = Field(ge=0)
    """Cells with a result.json whose grading failed (counted as failures)."""
    infra_errors: int = Field(0, ge=0)
    """Cells whose result.json says they never reached their model: not graded, run again next time."""


class NodeCounts(Document):
    """What one machine ran in this run (``--executor ray``: one row per cluster node)."""

    node: str
    """``<host>/<Ray node id prefix>`` on a cluster; the host name with the local executor."""
    ran: int = Field(ge=0)
    """Cells run to a result.json on it."""
    passed: int = Field(ge=0)
    """Of those, cells whose gate held."""
    failed: int = Field(ge=0)
    """Cells that failed before their agent ran on it."""
    interrupted: int = Field(ge=0)
    """Cells stopped on it by Ctrl-C or a signal."""
    seconds: float = Field(ge=0)
    """Wall-clock seconds its cells took, added up."""


class RunFailure(Document):
    """A cell that failed before its agent ran."""

    cell: str
    """The cell's path relative to the batch (task/arm/model/effort/repN)."""
    error: str | None
    """Why."""


class RunSummary(CellCounts):
    """repo_run.v1: the summary ``repo run --json`` prints."""

    schema_: Literal["repo_run.v1"] = Field("repo_run.v1", alias="schema")
    """Document type and version."""
    batch: str
    """The batch directory."""
    pin: BatchPin
    """The batch's pin (_eval/batch.json)."""
    harness: str
    """Harness profile name."""
    harness_version: str
    """The version the harness reported inside the image."""
    image: str
    """The image the cells ran in."""
    complete: bool
    """Every planned cell has a result.json that is not an infra error (exit 0); false: rerun to fill the
    missing ones and run the infra errors again (exit 1)."""
    infra_errors: int = Field(0, ge=0)
    """Cells of this run that never reached their model (infra errors)."""
    spent_usd: float = Field(ge=0)
    """What the batch has spent, earlier runs included; a cell without a reported cost is charged its cap. 0
    for a dry run (the rubric judge, a real model, apart)."""
    dry_run: bool = False
    """The batch is a dry run: every agent talked to dokimi's scripted model, and nothing was paid."""
    simulated_usd: float | None = None
    """A dry run's made-up cost: what the harnesses of this run's cells reported for the scripted answers.
    Never spent, never charged to a budget; null for a real run or when no harness reported a figure."""
    stopped_by_budget: bool
    """--max-batch-usd held back cells."""
    groups: list[RunGroup]
    """Per (task, arm, model, effort), sorted."""
    executor: Literal["local", "ray"] = "local"
    """Where the cells ran: ``local`` (-j threads on this machine) or ``ray`` (a Ray cluster)."""
    nodes: list[NodeCounts] = Field(default_factory=list)
    """Per machine that ran a cell in this run, sorted by name (cells lost with their node count nowhere)."""
    failures: list[RunFailure]
    """Cells that failed before their agent ran, with the reason."""
    warnings: list[str]
    """What the run warned about (--agent-network)."""
