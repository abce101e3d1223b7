"""repo_readiness.v1: the L0 scan of a repository's guidance, claim by claim."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import Field, field_validator

from dokimi.schemas._base import Document
from dokimi.schemas.static import STATUS_CLASSES, status_class

ClaimSource = Literal["framework", "repository"]


class Claim(Document):
    """One mechanically checkable claim in a guidance file and what the scan found."""

    file: str
    """Guidance file the claim is in, relative to the repository root (the file a symlink names)."""
    line: int = Field(ge=0)
    """1-based line; a command continued with backslashes is reported at its first line."""
    kind: str
    """What was checked: link, path, glob, identifier, python_script, make_target, bazel_label, ..."""
    claim: str
    """The claim's text as written (a command's word, a link target, a code span)."""
    status: str
    """ok, ok_suffix, ok_basename, unresolved, fail (or a refinement after ``_``). Only fail counts against
    the guidance; unresolved needs a human look."""
    why: str
    """What the scan found, in words."""
    fix: str | None = None
    """For a fail with a close match in the tree: ``did you mean ...?``."""
    source: ClaimSource = "framework"
    """framework (this scan) or repository (merged from the repository's static entry point, --static)."""
    extra: dict[str, Any] = Field(default_factory=dict)
    """Free-form keys of a repository claim, kept as they were."""
    suppressed: str | None = None
    """What silenced this claim (an inline ``<!-- dokimi: ignore -->`` comment, or an entry of the manifest's
    ``scan.ignore``, with its why). A suppressed claim keeps its status and counts neither in ``counts``
    nor in the gate."""

    @field_validator("status")
    @classmethod
    def _known_class(cls, value: str) -> str:
        if status_class(value) not in STATUS_CLASSES:
            raise ValueError(f"status class {status_class(value)!r} is not one of ok, unresolved, fail")
        return value


class GuidanceFile(Document):
    """A file the scan considered: matched by a guidance glob or named in also_scan."""

    path: str
    """Path as matched, relative to the repository root."""
    origin: Literal["glob", "also_scan"]
    """Why it is scanned."""
    scanned_as: str | None
    """The file actually read (symlinks followed); None when it cannot be read."""
    state: Literal["scanned", "alias", "unreadable"]
    """scanned; alias (a symlink to another file that is scanned once, as the file it names); unreadable."""
    reason: str | None = None
    """Why it cannot be read (dangles, escapes the tree, binary, over 2 MB)."""
    claims: int = 0
    """Claims found in it (0 for an alias: they count under the file it names)."""


class Warning_(Document):
    """Guidance the manifest names but the tree lacks, or cannot be read."""

    kind: Literal[
        "glob_no_match", "also_scan_missing", "no_guidance", "unreadable", "static", "suppression_unused"
    ]
    """What is wrong (``suppression_unused``: a suppression that silences no claim)."""
    path: str | None = None
    """The glob or file concerned."""
    message: str
    """In words, with the reason."""
    gate: bool
    """Whether it fails --fail-on-fail (a glob with no match does not)."""


class BuildSystems(Document):
    """Which claim-check adapters ran, and why."""

    adapters: list[str]
    """Adapter names: bazel, make, cmake, pytest, pre-commit."""
    selected_by: Literal["manifest", "detected"]
    """The manifest's build_systems, or detected from files in the tree."""
    why: dict[str, str] = Field(default_factory=dict)
    """Per adapter, the file or setting that selected it."""


class StaticMerge(Document):
    """The repository's own checks (repo_static.v1) merged with --static or --run-static."""

    path: str
    """Where the document was read from."""
    merged: bool
    """False when the document was invalid (then the command exits 1)."""
    error: str | None = None
    """Why it was not merged."""
    replaced: int = 0
    """Framework claims replaced by a repository claim on the same (file, line, claim)."""
    top_level: dict[str, Any] = Field(default_factory=dict)
    """Free-form top-level keys of the document, kept."""


class Gate(Document):
    """The --fail-on-fail verdict."""

    passed: bool
    """True when no claim fails, no also_scan file is missing, every guidance file is readable and some
    guidance matched."""
    reasons: list[str] = Field(default_factory=list)
    """Why it did not pass."""


class RepoReadiness(Document):
    """repo_readiness.v1: every claim of the guidance files of one snapshot, with warnings and counts."""

    schema_: Literal["repo_readiness.v1"] = Field("repo_readiness.v1", alias="schema")
    """Document type and version."""
    source: str
    """The source as given (dir, dir@rev, url@rev)."""
    rev: str | None
    """Full SHA of the snapshot; null for a working tree."""
    manifest: str | None
    """The manifest read, or null when the default globs were used."""
    guidance_globs: list[str]
    """Globs that chose the guidance files."""
    also_scan: list[str]
    """Files the manifest asks the scan to check too."""
    defaulted: bool
    """True when no manifest was found and the default globs were used."""
    build_systems: BuildSystems
    """Adapters that ran."""
    files: list[GuidanceFile]
    """Every guidance file considered, sorted by path."""
    claims: list[Claim]
    """Every claim, sorted by (file, line, claim, kind)."""
    counts: dict[str, int]
    """Claims per status class (ok, unresolved, fail) after the merge, suppressed claims left out."""
    suppressed: int = 0
    """Claims silenced by a suppression (not in ``counts``)."""
    by_source: dict[str, dict[str, int]]
    """Claims per status class of each side (framework, repository), counted before the merge, suppressed
    claims left out."""
    warnings: list[Warning_]
    """Globs with no match, missing also_scan files, no guidance, unreadable files, an invalid --static."""
    static: StaticMerge | None = None
    """The merged repo_static.v1 document, if any."""
    gate: Gate
    """What --fail-on-fail decides."""
