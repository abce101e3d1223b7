"""``dokimi repo perf RUN_DIR [--seed S] [--cache NAME=PATH] [--json]``: the performance check
of one finished cell.

Exit codes: 0 the check passed; 1 it failed, or could not be measured (a noisy host, a broken benchmark);
2 not a cell of a batch, no perf object or entry point, no docker, the batch's image missing.
"""

from __future__ import annotations

from pathlib import Path

import click

from dokimi.cli._common import echo, emit_json, json_option
from dokimi.constants import EXIT_FOUND_PROBLEMS, EXIT_OK


@click.command("perf")
@click.argument("run_dir", metavar="RUN_DIR", type=click.Path(file_okay=False, path_type=Path))
@click.option("--seed", type=int, default=0, show_default=True, help="Seed of the shuffled round order.")
@click.option("--cache", "caches", multiple=True, metavar="NAME=PATH", help="Host directory of a cache.")
@click.option(
    "--source-dir",
    type=click.Path(file_okay=False, path_type=Path),
    help="A full clone of the source for the oracle's {source_dir} (default: the batch's source).",
)
@json_option
def perf(run_dir: Path, seed: int, caches: tuple[str, ...], source_dir: Path | None, as_json: bool) -> int:
    """Measure the cell at RUN_DIR against the task's oracle with entry_points.perf.

    Every round runs the candidate once and the oracle twice (the second run is the control), in shuffled
    order; a round whose control leaves its noise band is dropped. The check fails when the median
    candidate/oracle ratio exceeds the task's tolerance and lies outside the measured noise. The details go to
    RUN_DIR/perf/check.json; result.json is not changed.
    """
    # here, not at the top: a command's --help loads no library code (bench/bench_cli_start.py)
    from dokimi.cli.run import _caches
    from dokimi.grading.perf import check_finished_cell

    check = check_finished_cell(run_dir, seed=seed, caches=_caches(caches), source_dir=source_dir)
    report = check.report
    if as_json:
        emit_json(
            {"run_dir": str(run_dir), "invocations": check.invocations, **check.metrics, **report.to_json()}
        )
    else:
        state = {True: "pass", False: "FAIL", None: "not measured"}[report.passed]
        ratio = "-" if report.ratio is None else f"{report.ratio:.3g}x"
        echo(f"perf: {state} (median ratio {ratio}, {check.invocations} runs)")
        echo(f"  {report.reason}")
    return EXIT_OK if report.passed is True else EXIT_FOUND_PROBLEMS
