"""meta.json: what the framework prepared for one run, written to {run_dir} before
grade.

Graders read the upstream base (``base_sha``) and the commit the agent started from (``start_sha``) here
and never derive either from the workspace, whose history starts at ``start_sha``'s parent chain of one
commit.
"""

from __future__ import annotations

from collections.abc import Mapping
from enum import StrEnum
from typing import Any, Literal

from pydantic import Field, field_validator

from dokimi.schemas._base import Document

SHA40 = r"^[0-9a-f]{40}$"
"""A full, lower-case git object name."""


class Mode(StrEnum):
    """The way of using an agent a task models; arms are compared within one mode."""

    INTERACTIVE = "interactive"
    AUTONOMOUS = "autonomous"
    REVIEW = "review"


class AppliedPatch(Document):
    """One patch applied to the workspace before the agent started."""

    path: str = Field(min_length=1)
    """Path of the patch file, as task.json names it (relative to the task directory)."""
    sha: str = Field(min_length=1)
    """Digest of the patch file's bytes, so a regrade can tell that the same patch was applied."""
    kind: Literal["setup", "review"] | None = None
    """``setup`` for a setup_patches entry (step 4 of the workspace preparation), ``review`` for
    review_patch (step 7); null when the writer gave the ``{path: sha}`` form, which lists setup patches
    first and the review patch last."""


class GuidanceFileRecord(Document):
    """One guidance file present in the workspace when the agent started."""

    path: str = Field(min_length=1)
    """Repository path in the workspace."""
    mode: str = Field(pattern=r"^(100644|100755|120000)$")
    """Git mode: ``100644``, ``100755``, or ``120000`` for a symlink (whose blob is the link text)."""
    sha: str = Field(pattern=SHA40)
    """Git blob SHA of the file as committed in the start commit; equal to the blob of the same file in the
    revision it was copied from (``git rev-parse REV:path``)."""


class Meta(Document):
    """meta.json in every run directory: the run's coordinates and the commits it started from."""

    schema_: Literal["repo_meta.v1"] = Field("repo_meta.v1", alias="schema")
    """Document type and version. Dokimi writes it; graders may ignore it."""
    task: str = Field(min_length=1)
    """Task id (the task directory's name)."""
    batch: str | None = None
    """Batch name under the output directory; null for a run outside a batch (tasks check)."""
    arm: str = Field(min_length=1)
    """The arm the workspace was prepared with, for example ``guidance:none`` or ``guidance:raw``."""
    harness: str = Field(min_length=1)
    """Harness profile name, for example ``claude-code``."""
    harness_version: str | None = None
    """What the harness reported as its version inside the image; null for a run with no agent
    (null/oracle)."""
    model: str = Field(min_length=1)
    """Model id exactly as passed to the harness (an opaque string)."""
    effort: str | None = None
    """Reasoning effort of the harness; null when the harness default was used."""
    mode: Mode | None = None
    """The task's agent mode; null when the task declares none."""
    rep: int = Field(ge=0)
    """Repetition index of this cell."""
    base_rev: str = Field(min_length=1)
    """The task's ``base`` as written in task.json (a SHA, optionally with a trailing ``^``)."""
    base_sha: str = Field(pattern=SHA40)
    """``base_rev`` resolved to the full 40-character commit SHA in the upstream repository."""
    base_date: str | None = None
    """Committer date of ``base_sha``, ISO 8601; reports split results by it against a model's cutoff."""
    patches: list[AppliedPatch] = Field(default_factory=list)
    """Every patch applied, in the order applied. A ``{path: sha}`` object is accepted on input."""
    start_sha: str = Field(pattern=SHA40)
    """Workspace HEAD after preparation (step 7): the commit the agent starts from and graders
    diff from. It is not an upstream commit."""
    dry_run: bool = False
    """The agent talked to dokimi's scripted model (``repo run --dry-run``), not to a real one."""
    prompt_variant: Literal["spec", "issue"] | None = None
    """The prompt variant the run chose (``repo run --prompt-style``): ``issue`` means the agent was told the
    task's ``prompt_issue``, not its ``prompt``; null: the task's own prompt."""
    agent_network: str | None = None
    """The docker network given to the agent's container by ``--agent-network``; null when it had none."""
    guidance_files: list[GuidanceFileRecord] | None = None
    """Every file in the start commit that the manifest's guidance globs or the harness's own guidance names
    (CLAUDE.md, AGENTS.md, ...) match, with its blob SHA: what the arm really put in front of the agent.
    Empty: no guidance at all. Null: not recorded (a run directory written before dokimi recorded it)."""
    guidance_source: str | None = None
    """Where an arm's guidance files came from: ``tree <sha>`` (guidance:tree: the eval tree), ``at <sha>``
    (guidance:at=REV, resolved), ``generated`` (guidance:generated: the harness's generator, see
    ``_eval/generated/``); null for the arms that keep or delete the base's own."""
    review_rules: list[str] | None = None
    """The ids of the team review rules the agent's prompt held, in an arm that gives them (``ARM+rules``:
    a review task's reviewer gets the rules its rubric cites and the confirmed rules whose paths match the
    diff under review); empty when none applied; null in an arm that gives none."""

    @field_validator("patches", mode="before")
    @classmethod
    def _patches_from_mapping(cls, value: Any) -> Any:
        """Accept ``{"path": "sha", ...}`` (setup patches in order, then the review patch) as well as the
        list."""
        if isinstance(value, dict):
            return [{"path": path, "sha": sha} for path, sha in value.items()]
        return value


def no_agent_meta(
    prepared: Mapping[str, Any], *, task: str, mode: str | None, batch: str | None = None, model: str = "none"
) -> Meta:
    """meta.json of a run directory where no agent ran (a tasks check's null and oracle, a rubric check's
    oracle row, a batch's task reference): the workspace's fields as prepared, harness ``none``."""
    return Meta.model_validate(
        {
            **prepared,
            "schema": "repo_meta.v1",
            "task": task,
            "batch": batch,
            "harness": "none",
            "harness_version": None,
            "model": model,
            "mode": mode,
            "effort": None,
            "rep": 0,
            "agent_network": None,
        }
    )
