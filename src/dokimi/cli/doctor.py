"""``dokimi doctor``: is this machine ready (docker, git, the harness CLI, images, disk), with the fix for
each gap. Thin: dokimi.checks.doctor does the checks.

Exit codes: 0 everything required is there (warnings allowed), 1 something required is missing.
"""

from __future__ import annotations

from pathlib import Path

import click

from dokimi.cli._common import emit_json, json_option
from dokimi.constants import EXIT_FOUND_PROBLEMS, EXIT_OK


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

    from dokimi.checks.doctor import run_doctor

    report = run_doctor(claude_bin=claude_bin)
    if as_json:
        emit_json(report)
    else:
        from dokimi.cli.tables import (
            Col,
            color_on,
            colored,
            fit_line,
            print_lines,
            render_table,
            terminal_width,
        )

        width, color = terminal_width(), color_on()
        rows = [
            [
                check.name + ("" if check.required else " (recommended)"),
                colored(check.status, check.status, color=color),
            ]
            for check in report.checks
        ]
        lines = render_table([Col("check", key=True), Col("status", droppable=False)], rows, width=width)
        for check in report.checks:
            if check.detail:
                lines += fit_line(f"  {check.name}: {check.detail}", width, indent="    ")
            if check.fix:
                lines += fit_line(f"  {check.name}: fix: {check.fix}", width, indent="    ")
        lines.append("ready" if report.ok else "not ready: fix what is missing")
        print_lines(lines)
    return EXIT_OK if report.ok else EXIT_FOUND_PROBLEMS
