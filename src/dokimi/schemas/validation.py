"""repo_validation.v1: what ``repo validate --json`` prints (dokimi.checks.validate builds it)."""

from __future__ import annotations

from typing import Literal

from pydantic import Field

from dokimi.schemas._base import Document

Severity = Literal["error", "warning"]


class Finding(Document):
    """One problem found by a rule."""

    severity: Severity
    """``error`` makes the manifest invalid (exit 1); ``warning`` does not."""
    code: str
    """The rule that found it: the name of its ``check_*`` function without the prefix (``base_resolves``)."""
    message: str
    """What is wrong, naming the offending value."""
    file: str | None = None
    """The manifest or task.json (path inside the source; the local path for --manifest-file)."""
    line: int | None = None
    """1-based line of the offending key in ``file``, when known."""
    task: str | None = None
    """The task id (its directory name), for a finding about one task."""
    key: str | None = None
    """Dotted key inside ``file`` (``entry_points.grade``, ``gate[1].min``)."""
    fix: str | None = None
    """What to change."""

    def text(self) -> str:
        """``error: file:line: key: message; fix [code]``."""
        place = ""
        if self.file:
            place = self.file if self.line is None else f"{self.file}:{self.line}"
        elif self.task:
            place = f"task {self.task}"
        if self.key:
            place = f"{place}: {self.key}" if place else self.key
        body = f"{place}: {self.message}" if place else self.message
        if self.fix:
            body += f"; {self.fix}"
        return f"{self.severity}: {body} [{self.code}]"


class ValidationReport(Document):
    """repo_validation.v1: the result of ``repo validate`` (printed by ``--json``)."""

    schema_: Literal["repo_validation.v1"] = Field(default="repo_validation.v1", alias="schema")
    """Document type and version."""
    valid: bool
    """True when there is no error (warnings allowed)."""
    source: str
    """The source as given on the command line."""
    eval_rev: str | None
    """Full SHA of the eval tree; null for a working tree."""
    manifest: str
    """Path of the manifest (inside the source, or the local --manifest-file path)."""
    guidance_only: bool
    """True when the manifest has no eval_dir/tasks/entry_points (scan and reach only)."""
    tasks: int
    """Number of task directories with a task.json."""
    bases: int
    """Number of distinct task bases that resolved (commits the guidance globs were evaluated at)."""
    guidance_files: int
    """Distinct guidance files matched over all bases (or the eval tree for a guidance-only manifest)."""
    errors: list[Finding]
    """Findings that make the manifest invalid, sorted by file, line and code."""
    warnings: list[Finding]
    """Findings that do not, sorted the same way."""
    rules: list[str]
    """The rules that ran, in order."""
