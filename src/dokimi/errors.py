"""The errors dokimi raises for situations a user can fix.

A DokimiError is printed without a traceback and ends the CLI with exit code 2 (usage or environment). What a
*check* finds (a dead link, an invalid task) is data in a report, never an exception. Anything else that
escapes
is a bug in dokimi: it keeps its traceback and exits 3.
"""

from __future__ import annotations

import shlex
from collections.abc import Sequence
from pathlib import Path


class DokimiError(Exception):
    """An error the user can act on: it names the place (path, line, key) and the fix (hint)."""

    def __init__(
        self,
        message: str,
        *,
        path: str | Path | None = None,
        line: int | None = None,
        key: str | None = None,
        hint: str | None = None,
    ) -> None:
        super().__init__(message)
        self.message = message
        self.path = str(path) if path is not None else None
        self.line = line
        self.key = key
        self.hint = hint

    def location(self) -> str:
        """``path:line: key`` with whichever parts are known."""
        place = ""
        if self.path:
            place = self.path if self.line is None else f"{self.path}:{self.line}"
        if self.key:
            place = f"{place}: {self.key}" if place else self.key
        return place

    def __str__(self) -> str:
        place = self.location()
        text = f"{place}: {self.message}" if place else self.message
        if self.hint:
            text += f"\n  fix: {self.hint}"
        return text


class UsageError(DokimiError):
    """The command line asks for something that cannot be done."""


class ManifestError(DokimiError):
    """The manifest cannot be read at all (not YAML, not a mapping); rule violations are report findings."""


class DocumentError(DokimiError):
    """A document (JSON/YAML) is unreadable or does not match its schema."""


class SourceError(DokimiError):
    """A source (dir, dir@rev, url@rev) cannot be opened, fetched or resolved."""


class PrerequisiteError(DokimiError):
    """A tool dokimi needs (git, docker, a harness CLI) is missing or not working."""


class ContainerError(DokimiError):
    """docker failed to build or run a container."""


class ProcessError(DokimiError):
    """A subprocess failed. Shows the command, its exit code and the tail of its stderr."""

    def __init__(
        self,
        argv: Sequence[str],
        returncode: int | None,
        stdout: str = "",
        stderr: str = "",
        *,
        message: str | None = None,
        hint: str | None = None,
    ) -> None:
        self.argv = list(argv)
        self.returncode = returncode
        self.stdout = stdout
        self.stderr = stderr
        what = "timed out" if returncode is None else f"exited {returncode}"
        text = message or f"`{shlex.join(self.argv)}` {what}"
        tail = "\n".join(stderr.strip().splitlines()[-12:])
        if tail and message is None:
            text += "\n" + "\n".join("    " + line for line in tail.splitlines())
        super().__init__(text, hint=hint)


class WorkspaceError(DokimiError):
    """A workspace cannot be prepared: a base that does not resolve, a patch that does not
    apply."""
