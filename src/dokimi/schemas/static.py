"""repo_static.v1: the claims a repository's own ``static`` entry point checks.

An untrusted document: only ``schema`` and, per claim, ``file``, ``line`` and ``status`` are required. Every
other key, per claim and at the top level, is free-form and kept. The status class is the part before the
first ``_`` (``ok_basename`` counts as ``ok``); it must be ``ok``, ``unresolved`` or ``fail``.
"""

from __future__ import annotations

from typing import Literal

from pydantic import Field, field_validator

from dokimi.constants import STATUS_CLASSES, status_class
from dokimi.schemas._base import OpenDocument

__all__ = ["STATUS_CLASSES", "RepoStatic", "StaticClaim", "status_class"]


class StaticClaim(OpenDocument):
    """One claim a repository checked itself; keys beyond these are kept as they are."""

    file: str = Field(min_length=1)
    """Guidance file, relative to the repository root."""
    line: int = Field(ge=0)
    """1-based line of the claim in ``file`` (0 when the claim is about the whole file)."""
    status: str = Field(min_length=1)
    """``ok``, ``unresolved`` or ``fail``, optionally refined after a ``_`` (``ok_basename``)."""

    @field_validator("status")
    @classmethod
    def _known_class(cls, value: str) -> str:
        if status_class(value) not in STATUS_CLASSES:
            raise ValueError(f"status class {status_class(value)!r} is not one of ok, unresolved, fail")
        return value


class RepoStatic(OpenDocument):
    """The output of a repository's ``static`` entry point, merged into the L0 scan with ``--static``."""

    schema_: Literal["repo_static.v1"] = Field(alias="schema")
    """Document type and version."""
    claims: list[StaticClaim] = Field(default_factory=list)
    """The claims the repository checked."""
