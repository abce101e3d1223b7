"""repo_init.v1: what ``repo init --json`` prints."""

from __future__ import annotations

from typing import Literal

from pydantic import Field

from dokimi.schemas._base import Document


class InitReport(Document):
    """repo_init.v1: the files ``repo init`` wrote and the commands to run next."""

    schema_: Literal["repo_init.v1"] = Field(default="repo_init.v1", alias="schema")
    """Document type and version."""
    written: list[str]
    """The files written: the manifest, the Dockerfile, the manifest's JSON Schema."""
    grade: str
    """The grade entry point the manifest names."""
    next: list[str]
    """The next three commands: make a task from a fix, validate, tasks check."""
