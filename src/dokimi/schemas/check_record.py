"""dokimi_check_record.v1: what ``repo tasks check`` or ``repo rubric check`` found about one task, kept in
dokimi's cache (``<DOKIMI_HOME>/checks/``) and keyed by what it checked, so a real run finds it wherever the
check wrote its report (dokimi.runner.admission reads and writes them)."""

from __future__ import annotations

from typing import Literal

from pydantic import Field

from dokimi.schemas._base import Document


class CheckedAgainst(Document):
    """What a check checked a task against: change any of it and the record no longer speaks for the task."""

    manifest_id: str = Field(min_length=1)
    """The manifest's id."""
    task: str = Field(min_length=1)
    """The task id."""
    eval_dir_digest: str = Field(min_length=1)
    """Digest of the exported eval_dir (task.json, patches, graders, rubric: what the check ran)."""
    base_sha: str = Field(min_length=1)
    """The task's base, resolved to a commit."""
    image: str | None = None
    """The image the check ran in (tag or --image name); null for a rubric check, whose judge reads diffs."""
    image_context_digest: str | None = None
    """Digest of that image's build context; null for an --image of the caller's."""
    judge_model: str | None = None
    """A rubric check's primary judge (full model id); null for a tasks check."""


class CheckRecord(Document):
    """One task's verdict from one check."""

    schema_: Literal["dokimi_check_record.v1"] = Field("dokimi_check_record.v1", alias="schema")
    """Document type and version."""
    kind: Literal["tasks_check", "rubric_check"]
    """Which check wrote it."""
    checked: CheckedAgainst
    """What was checked: the record's key."""
    status: Literal["ok", "broken", "unsupported", "admitted", "not_admitted"]
    """``ok``, ``broken`` or ``unsupported`` (a tasks check); ``admitted`` or ``not_admitted`` (a rubric
    check)."""
    problems: list[str] = Field(default_factory=list)
    """Why it is not ok, one line each."""
    source: str
    """The source the check ran on, as given."""
    report: str | None = None
    """Where the check wrote its full report (--out), if anywhere."""
    checked_at: str
    """When (UTC, ISO 8601)."""
    dokimi_version: str
    """The dokimi that checked."""
