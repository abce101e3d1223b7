"""generated.json (repo_generated.v1): what the harness's guidance generator wrote for one (task, model).

``repo run`` with the arm ``guidance:generated`` runs the harness's own generator (Claude Code's ``/init``)
once per (task, model) at the task's base, prepared without guidance, and keeps the files it wrote under
``<batch>/_eval/generated/<task>/<model>/files/`` beside this record. Every rep of that (task, model) starts
from those files. Its cost is the arm's set-up cost, reported apart from the cells' own.
"""

from __future__ import annotations

from typing import Literal

from pydantic import Field

from dokimi.schemas._base import Document
from dokimi.schemas.meta import SHA40, GuidanceFileRecord


class Generated(Document):
    """The record of one generation."""

    schema_: Literal["repo_generated.v1"] = Field("repo_generated.v1", alias="schema")
    """Document type and version."""
    task: str = Field(min_length=1)
    """Task id: the generator ran at this task's base."""
    model: str = Field(min_length=1)
    """Model id the generator ran with (the cells' model)."""
    harness: str = Field(min_length=1)
    """Harness profile name."""
    harness_version: str | None = None
    """Harness version inside the image."""
    prompt: str = Field(min_length=1)
    """The generator's prompt (the profile's ``guidance_init``, for example ``/init``)."""
    dry_run: bool = False
    """True when the scripted model played the generator (its files are the script's, not a model's)."""
    base_sha: str = Field(pattern=SHA40)
    """The task's base, resolved."""
    files: list[GuidanceFileRecord]
    """The guidance files the generator added or changed (matched by the guidance globs or the harness's
    guidance names), with their blob SHAs; empty when it wrote none."""
    agent_rc: int | None = None
    """The generator's exit status; null when it was killed."""
    agent_timed_out: bool = False
    """True when the generator ran past the task's timeout."""
    cost_usd: float | None = Field(default=None, ge=0)
    """What the generator's run cost: the model gateway's account in a sealed run, else what the harness's
    trace reports; 0 in a dry run (the scripted model costs nothing); null when unknown."""
    cost_source: Literal["gateway", "harness", "harness_allow_list", "dry_run"] | None = None
    """Where cost_usd comes from (``dry_run``: nothing was paid)."""
    turns: int | None = Field(default=None, ge=0)
    """Turns of the generator's run, as its trace reports them."""
    duration_s: float = Field(ge=0)
    """Wall-clock seconds of the whole generation (preparation included)."""
