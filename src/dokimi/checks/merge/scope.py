"""The scope check: deterministic, from the workspace diff. One function per rule.

- every changed path, the old and the new side, matches ``allowed_globs``;
- no changed path matches ``denied_globs``;
- no ignored file the run created matches ``denied_globs`` (build output under ignored paths is not a
  violation by itself, so ignored files are never checked against ``allowed_globs``);
- at most ``max_changed_lines`` added plus deleted lines;
- at most ``max_files`` distinct paths touched (a move touches two).

Globs are dokimi's one dialect (:mod:`dokimi.globs`): ``**`` crosses ``/``, ``*`` and ``?`` do not.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from dokimi.checks.merge.diff import WorkspaceDiff
from dokimi.globs import match_any
from dokimi.schemas.rubric import Scope


@dataclass(frozen=True)
class ScopeVerdict:
    """Whether the change stays in scope, and every reason it does not."""

    passed: bool
    problems: list[str] = field(default_factory=list)
    outside_allowed: list[str] = field(default_factory=list)
    denied: list[str] = field(default_factory=list)
    denied_ignored: list[str] = field(default_factory=list)
    changed_lines: int = 0
    files: int = 0

    def to_json(self) -> dict[str, Any]:
        return {
            "passed": self.passed,
            "problems": self.problems,
            "outside_allowed": self.outside_allowed,
            "denied": self.denied,
            "denied_ignored": self.denied_ignored,
            "changed_lines": self.changed_lines,
            "files": self.files,
        }


def paths_outside_allowed(diff: WorkspaceDiff, scope: Scope) -> list[str]:
    """Changed paths (old and new side) that match no allowed glob."""
    return [path for path in diff.paths if not match_any(scope.allowed_globs, path)]


def paths_denied(diff: WorkspaceDiff, scope: Scope) -> list[str]:
    """Changed paths (old and new side) that match a denied glob."""
    return [path for path in diff.paths if match_any(scope.denied_globs, path)]


def ignored_created_denied(diff: WorkspaceDiff, scope: Scope) -> list[str]:
    """Ignored files the run created under a denied glob: a .gitignore line cannot hide such a write."""
    return [path for path in diff.ignored_created if match_any(scope.denied_globs, path)]


def too_many_lines(diff: WorkspaceDiff, scope: Scope) -> str | None:
    if scope.max_changed_lines is not None and diff.changed_lines > scope.max_changed_lines:
        return f"{diff.changed_lines} changed lines; the limit is {scope.max_changed_lines}"
    return None


def too_many_files(diff: WorkspaceDiff, scope: Scope) -> str | None:
    count = len(diff.paths)
    if scope.max_files is not None and count > scope.max_files:
        return f"{count} files touched; the limit is {scope.max_files}"
    return None


def check_scope(diff: WorkspaceDiff, scope: Scope) -> ScopeVerdict:
    """The scope verdict of one workspace diff."""
    outside = paths_outside_allowed(diff, scope)
    denied = paths_denied(diff, scope)
    denied_ignored = ignored_created_denied(diff, scope)
    problems = [f"{p}: outside allowed_globs" for p in outside]
    problems += [f"{p}: matches denied_globs" for p in denied]
    problems += [f"{p}: ignored file the run created, matches denied_globs" for p in denied_ignored]
    problems += [p for p in (too_many_lines(diff, scope), too_many_files(diff, scope)) if p is not None]
    return ScopeVerdict(
        passed=not problems,
        problems=problems,
        outside_allowed=outside,
        denied=denied,
        denied_ignored=denied_ignored,
        changed_lines=diff.changed_lines,
        files=len(diff.paths),
    )
