"""repo_run_file.v1: the run file ``repo run -c run.yaml`` reads, so a study's arms, models, reps, batch and
harness are written once instead of on every command line.

An option given on the command line wins over the run file. Relative paths in the file (``bin``, ``out``,
``manifest_file``) are relative to the run file's directory, so the file means the same from any working
directory.
"""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import AfterValidator, Field

from dokimi.constants import MAX_REPS
from dokimi.schemas._base import Document, not_blank

SCHEMA_NAME = "repo_run_file.v1"

NonEmpty = Annotated[str, Field(min_length=1), AfterValidator(not_blank)]


class RunFile(Document):
    """repo_run_file.v1: the options of ``repo run`` a study keeps in a file (``repo run SOURCE -c FILE``)."""

    schema_: Literal["repo_run_file.v1"] = Field(alias="schema")
    """Document type and version: ``repo_run_file.v1``."""
    arms: list[NonEmpty] | None = Field(default=None, min_length=1)
    """Arms, for example ``[guidance:none, guidance:raw]`` (``--arm``)."""
    models: list[NonEmpty] | None = Field(default=None, min_length=1)
    """Model ids passed to the harness as they are (``--model``)."""
    reps: Annotated[int, Field(strict=True, ge=1, le=MAX_REPS)] | None = None
    """Repetitions per cell (``--reps``), 1 to 1000."""
    batch: NonEmpty | None = None
    """Batch name: the directory ``<out>/<batch>`` (``--batch``)."""
    harness: NonEmpty | None = None
    """A built-in harness profile name or the path of a profile file (``--harness``)."""
    bin: NonEmpty | None = None
    """The harness executable (``--bin``); default: found the way ``dokimi doctor`` finds it."""
    tasks: list[NonEmpty] | None = None
    """Only these tasks (``--task``)."""
    efforts: list[NonEmpty] | None = None
    """Reasoning efforts, each a cell dimension (``--effort``)."""
    out: NonEmpty | None = None
    """Where batches live (``--out``; default ``$DOKIMI_HOME/runs/<manifest id>``, DOKIMI_HOME being
    ``~/.cache/dokimi`` unless set)."""
    manifest: NonEmpty | None = None
    """Path of repo-eval.yaml inside the source (``--manifest``)."""
    manifest_file: NonEmpty | None = None
    """A manifest outside the source (``--manifest-file``)."""
    agent_network: NonEmpty | None = None
    """Docker network of the agent's container (``--agent-network``)."""
    timeout_s: Annotated[float, Field(gt=0, allow_inf_nan=False)] | None = None
    """Agent wall-clock cap in seconds unless task.json sets ``timeout_s`` (``--timeout``)."""
    max_turns: Annotated[int, Field(strict=True, ge=1)] | None = None
    """Turn cap unless task.json sets ``max_turns`` (``--max-turns``)."""
    budget_usd: Annotated[float, Field(gt=0, allow_inf_nan=False)] | None = None
    """Cost cap per run in US dollars unless task.json sets ``budget_usd`` (``--budget``)."""
    max_batch_usd: Annotated[float, Field(gt=0, allow_inf_nan=False)] | None = None
    """Start no new cell once the batch has spent this much (``--max-batch-usd``)."""
    jobs: Annotated[int, Field(strict=True, ge=1)] | None = None
    """Cells run side by side (``-j``)."""
    prices: list[NonEmpty] | None = None
    """Prices of models the price table lacks, each ``MODEL=IN,OUT`` in USD per million tokens
    (``--price``)."""
