"""``dokimi doctor``: is this machine ready (docker, git, the harness CLI, images, disk), with the fix for
each gap. Thin: dokimi.checks.doctor does the checks.

Exit codes: 0 everything required is there (warnings allowed), 1 something required is missing.
"""

from __future__ import annotations

from pathlib import Path

import click

from dokimi.cli._common import echo, emit_json, json_option
from dokimi.constants import EXIT_FOUND_PROBLEMS, EXIT_OK


@click.command("doctor")
@click.option(
    "--bin",
    "claude_bin",
    type=click.Path(dir_okay=False, path_type=Path),
    help="The harness CLI to check (then required); default: where scripts/install-harness.sh puts it.",
)
@click.option(
    "--clean-stale",
    is_flag=True,
    help="Instead of checking: remove the containers whose dokimi process has ended. A container of a "
    "dokimi that still runs (a batch in progress, yours or another user's) is never removed.",
)
@click.option(
    "--clean-batch",
    "clean_batch",
    type=click.Path(file_okay=False, exists=True, path_type=Path),
    metavar="DIR",
    help="Instead of checking: remove the containers left by the batch <out>/<batch>; refused while a run "
    "or regrade of it is running.",
)
@json_option
def doctor(claude_bin: Path | None, clean_stale: bool, clean_batch: Path | None, as_json: bool) -> int:
    """Check docker (client, daemon, base image, leftovers), git, the Claude Code CLI and free disk, and say
    how to fix each gap. Exit 1 when something required is missing. --clean-stale and --clean-batch remove
    containers left behind instead, and only those (exit 0)."""

    # here, not at the top: a command's --help loads no library code (bench/bench_cli_start.py)
    from dokimi.checks.doctor import run_doctor

    if clean_stale and clean_batch is not None:
        raise click.UsageError("give --clean-stale or --clean-batch, not both")
    if clean_stale or clean_batch is not None:
        return _clean(clean_batch, as_json)

    report = run_doctor(claude_bin=claude_bin)
    if as_json:
        emit_json(report)
    else:
        # here, not at the top: a command's --help loads no library code (bench/bench_cli_start.py)
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


def _clean(batch_dir: Path | None, as_json: bool) -> int:
    """Remove the containers dokimi left behind: every one whose dokimi process has ended, or only those of
    one batch, while holding its writer lock (so no run of it starts meanwhile, and a running one refuses
    the clean)."""
    # here, not at the top: a command's --help loads no library code (bench/bench_cli_start.py)
    from contextlib import nullcontext

    from dokimi.batch import batch_writer
    from dokimi.checks.doctor import clean_left_containers
    from dokimi.sandbox.docker import require_docker

    require_docker()
    root = None if batch_dir is None else batch_dir.absolute()
    with nullcontext() if root is None else batch_writer(root, "dokimi doctor --clean-batch"):
        report = clean_left_containers(batch=None if root is None else root.name)
    if as_json:
        emit_json(report)
        return EXIT_OK
    for name in report.removed:
        echo(f"removed {name}")
    for name, why in report.kept.items():
        echo(f"kept {name}: {why}")
    for name in report.networks:
        echo(f"removed network {name} and its firewall chain")
    echo(f"{len(report.removed)} removed, {len(report.kept)} kept")
    return EXIT_OK
