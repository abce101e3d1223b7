"""``dokimi repo export BATCH --format inspect [--out DIR] [--json]``: a batch in another tool's format.

Exit codes: 0 the logs were written, 2 not a batch, no finished cell, or inspect-ai missing.
"""

from __future__ import annotations

from pathlib import Path

import click

from dokimi.cli._common import echo, emit_json, json_option, note
from dokimi.constants import EXIT_OK
from dokimi.errors import UsageError


@click.command("export")
@click.argument("batch", metavar="BATCH", type=click.Path(file_okay=False, path_type=Path))
@click.option(
    "--format",
    "fmt",
    type=click.Choice(["inspect"]),
    required=True,
    help="inspect: Inspect AI eval logs (one per arm, model, effort and mode), for `inspect view`.",
)
@click.option(
    "--out",
    "out",
    type=click.Path(file_okay=False, path_type=Path),
    default=None,
    help="Directory for the logs (default: BATCH-inspect beside the batch).",
)
@json_option
def export(batch: Path, fmt: str, out: Path | None, as_json: bool) -> int:
    """Write the finished cells of BATCH (<out>/<batch>) as Inspect AI eval logs: each cell is a sample (task
    and rep as id and epoch) with the prompt, the agent's tool calls and outputs, the final answer, and the
    grade as its score. Open them with `inspect view --log-dir DIR`."""
    # here, not at the top: a command's --help loads no library code (bench/bench_cli_start.py)
    from dokimi.analysis.inspect_export import export_inspect
    from dokimi.batch import load_batch

    loaded = load_batch(batch)
    if not any(c.status == "finished" for c in loaded.cells):
        raise UsageError(
            f"{batch}: no finished cell to export", hint="give <out>/<batch>, the directory repo run wrote"
        )
    target = out if out is not None else loaded.root.parent / f"{loaded.root.name}-inspect"
    logs = export_inspect(loaded, target)
    if as_json:
        emit_json(
            {
                "format": fmt,
                "logs": [
                    {"path": str(log.path), "arm": log.arm, "model": log.model, "effort": log.effort,
                     "mode": log.mode, "samples": log.samples}
                    for log in logs
                ],
            }
        )  # fmt: skip
    else:
        for log in logs:
            echo(f"{log.path}: {log.samples} samples ({log.arm}, {log.model})")
        note(f"open them with: inspect view --log-dir {target}")
    return EXIT_OK
