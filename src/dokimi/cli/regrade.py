"""``dokimi repo regrade BATCH [--sample N] [--seed S] [--json]``: grading must be deterministic.

Exit codes: 0 every sampled cell regraded to the same verdict and metrics; 1 a mismatch (each listed with the
metric that moved) or a cell that could not be regraded; 2 not a batch, no docker, the batch's image missing.
"""

from __future__ import annotations

from pathlib import Path

import click

from dokimi.cli._common import emit_json, json_option, note
from dokimi.constants import EXIT_FOUND_PROBLEMS, EXIT_OK


@click.command("regrade")
@click.argument("batch", metavar="BATCH", type=click.Path(file_okay=False, path_type=Path))
@click.option("--sample", type=click.IntRange(min=1), metavar="N", help="Regrade N cells (default: all).")
@click.option("--seed", type=int, default=0, show_default=True, help="Seed of the sample.")
@click.option("--cache", "caches", multiple=True, metavar="NAME=PATH", help="Host directory of a cache.")
@click.option(
    "--source-dir",
    type=click.Path(file_okay=False, path_type=Path),
    help="A full clone of the source for {source_dir} (default: the batch's source).",
)
@json_option
def regrade(
    batch: Path,
    sample: int | None,
    seed: int,
    caches: tuple[str, ...],
    source_dir: Path | None,
    as_json: bool,
) -> int:
    """Regrade a sample of BATCH's finished cells from copies of their run directories.

    The batch's grade entry point runs again in its image on a copy of each sampled cell's inputs; the
    original grade.json and result.json are never touched. Every metric, gate entry and the verdict are
    compared; each mismatch is listed with what moved. Exit 1 on any mismatch. --json prints a
    repo_regrade.v1 document.
    """
    from dokimi.cli.run import _caches
    from dokimi.grading.regrade import regrade_batch, regrade_document

    report = regrade_batch(
        batch, sample=sample, seed=seed, caches=_caches(caches), source_dir=source_dir, progress=None
    )
    if as_json:
        emit_json(regrade_document(report))
    else:
        for cell in report.cells:
            if cell.error is not None:
                click.echo(f"error     {cell.rel}: {cell.error}")
            elif cell.mismatches:
                moved = "; ".join(f"{m.what}: {m.original!r} -> {m.regraded!r}" for m in cell.mismatches)
                click.echo(f"mismatch  {cell.rel}: {moved}")
            else:
                click.echo(f"same      {cell.rel}")
        click.echo(
            f"{len(report.cells)} of {report.finished} finished cell(s) regraded (seed {report.seed}): "
            f"{len(report.mismatched)} mismatch(es), {len(report.errors)} could not be regraded"
        )
        if report.mismatched:
            note(f"the regrade of each mismatched cell is kept under {batch}/_eval/regrade/ for inspection")
    return EXIT_OK if report.ok else EXIT_FOUND_PROBLEMS
