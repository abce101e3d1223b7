"""``dokimi repo regrade BATCH [--sample N] [--seed S] [--from-files] [--json]``: grading must be
deterministic.

Exit codes: 0 every sampled cell regraded to the same verdict and metrics; 1 a mismatch (each listed with the
metric that moved) or a cell that could not be regraded; 2 not a batch, no docker, the batch's image missing.
"""

from __future__ import annotations

from pathlib import Path

import click

from dokimi.cli._common import echo, emit_json, json_option, note
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
@click.option(
    "--from-files",
    is_flag=True,
    help="Recompute the verdicts from the files grading left (grade.json, merge.json, perf/check.json); "
    "no container.",
)
@click.option(
    "--judge-bin", help="The executable of the harness the rubric judge ran through (merge.json names it)."
)
@json_option
def regrade(
    batch: Path,
    sample: int | None,
    seed: int,
    caches: tuple[str, ...],
    source_dir: Path | None,
    from_files: bool,
    judge_bin: str | None,
    as_json: bool,
) -> int:
    """Regrade a sample of BATCH's finished cells from copies of their run directories.

    The batch's grade entry point runs again in its image on a copy of each sampled cell's inputs; the
    original grade.json and result.json are never touched. For a task with a rubric the judge runs again on
    the stored diff, its verdict cache bypassed. Every metric, gate entry and the verdict are compared; each
    mismatch is listed with what moved. Exit 1 on any mismatch. --json prints a repo_regrade.v1 document.

    --from-files runs no container: the verdict of each sampled cell is recomputed from the files its
    grading left, with the same gate function as the run.
    """
    # here, not at the top: a command's --help loads no library code (bench/bench_cli_start.py)
    from dokimi.cli.run import _caches
    from dokimi.grading.regrade import regrade_batch, regrade_document, regrade_from_files

    if from_files:
        report = regrade_from_files(batch, sample=sample, seed=seed)
    else:
        report = regrade_batch(
            batch,
            sample=sample,
            seed=seed,
            caches=_caches(caches),
            source_dir=source_dir,
            progress=None,
            judge_bin=judge_bin,
        )
    if as_json:
        emit_json(regrade_document(report))
    else:
        for cell in report.cells:
            if cell.error is not None:
                echo(f"error     {cell.rel}: {cell.error}")
            elif cell.mismatches:
                moved = "; ".join(f"{m.what}: {m.original!r} -> {m.regraded!r}" for m in cell.mismatches)
                echo(f"mismatch  {cell.rel}: {moved}")
            else:
                echo(f"same      {cell.rel}")
        echo(
            f"{len(report.cells)} of {report.finished} finished cell(s) regraded (seed {report.seed}): "
            f"{len(report.mismatched)} mismatch(es), {len(report.errors)} could not be regraded"
        )
        if report.mismatched:
            note(f"the regrade of each mismatched cell is kept under {batch}/_eval/regrade/ for inspection")
    return EXIT_OK if report.ok else EXIT_FOUND_PROBLEMS
