"""``dokimi doctor``: is this machine ready (docker, git, the harness CLI, images, disk), with the fix for
each gap. Thin: dokimi.sandbox.doctor does the checks.

Exit codes: 0 everything required is there (warnings allowed), 1 something required is missing.
"""

from __future__ import annotations

from pathlib import Path

import click

from dokimi.cli._common import emit_json, json_option, stdout_console
from dokimi.constants import EXIT_FOUND_PROBLEMS, EXIT_OK

MARKS = {"ok": "[green]ok[/green]", "missing": "[red]missing[/red]", "warn": "[yellow]warn[/yellow]"}


@click.command("doctor")
@click.option(
    "--bin",
    "claude_bin",
    type=click.Path(dir_okay=False, path_type=Path),
    help="The harness CLI to check (then required); default: where scripts/install-harness.sh puts it.",
)
@json_option
def doctor(claude_bin: Path | None, as_json: bool) -> int:
    """Check docker (client, daemon, base image, leftovers), git, the Claude Code CLI and free disk, and say
    how to fix each gap. Exit 1 when something required is missing."""
    from rich.table import Table

    from dokimi.sandbox.doctor import run_doctor

    report = run_doctor(claude_bin=claude_bin)
    if as_json:
        emit_json(report)
    else:
        table = Table(show_header=True)
        for column in ("check", "status", "detail", "fix"):
            table.add_column(column, overflow="fold")
        for check in report.checks:
            name = check.name + ("" if check.required else " (recommended)")
            table.add_row(name, MARKS[check.status], check.detail, check.fix or "")
        console = stdout_console()
        console.print(table)
        console.print("ready" if report.ok else "not ready: fix what is missing")
    return EXIT_OK if report.ok else EXIT_FOUND_PROBLEMS
