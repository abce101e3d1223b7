"""``dokimi repo study run|report FILE``: a whole guidance study from one file (repo_study.v1).

``run`` runs the study's batch (every arm, model and rep; a rerun fills only what is missing) and then writes
its report; ``report`` writes the report from the batch alone. The report (repo_study_report.v1, and the same
in Markdown) goes beside the batch as study-report.json and study-report.md.

Exit codes: 0 the report was written (``run``: and every cell finished), 1 ``run`` left cells unfinished,
2 a bad study file or option.
"""

from __future__ import annotations

import dataclasses
import sys
from pathlib import Path

import click

from dokimi.cli._common import echo, emit_json, json_option
from dokimi.cli.groups import SuggestingGroup
from dokimi.constants import EXIT_FOUND_PROBLEMS, EXIT_OK

STUDY_FILE = click.Path(exists=True, dir_okay=False, path_type=Path)
OUT = click.option(
    "--out",
    type=click.Path(file_okay=False, path_type=Path),
    default=None,
    help="Where batches live (default: the study file's out, relative to the file, else "
    "$DOKIMI_HOME/runs/<manifest id>).",
)


@click.group("study", cls=SuggestingGroup)
def study() -> None:
    """A guidance study from one file: run it, then one report (question, arms as applied, paired result
    with intervals, power, cost per arm)."""


def _deliver(report: object, as_json: bool) -> None:
    # here, not at the top: a command's --help loads no library code (bench/bench_cli_start.py)
    from dokimi.analysis.study import render_markdown, write_study_report
    from dokimi.schemas.study import StudyReport

    assert isinstance(report, StudyReport)
    json_path, md_path = write_study_report(report)
    if as_json:
        emit_json(report)
    else:
        echo(render_markdown(report), nl=False)
    echo(f"wrote {json_path} and {md_path}", err=True)


@study.command("run")
@click.argument("study_file", metavar="FILE", type=STUDY_FILE)
@click.option(
    "--source", default=None, metavar="DIR[@REV]|URL@REV", help="The repository (overrides the file)."
)
@click.option(
    "--bin", "bin_", default=None, metavar="PATH", help="The harness executable (overrides the file)."
)
@OUT
@click.option(
    "--dry-run", is_flag=True, help="The real harness against the scripted model server, at zero cost."
)
@click.option(
    "--dry-run-script",
    "dry_run_scripts",
    multiple=True,
    metavar="[ARM=]FILE",
    help="With --dry-run: play FILE (a JSON list of turns) for ARM, or for every arm.",
)
@click.option("-j", "--jobs", type=click.IntRange(min=1), default=None, help="Cells run side by side.")
@click.option(
    "--allow-unchecked",
    is_flag=True,
    help="Run tasks no repo tasks check proved sound (as repo run --allow-unchecked; batch.json records it).",
)
@json_option
def run(
    study_file: Path,
    source: str | None,
    bin_: str | None,
    out: Path | None,
    dry_run: bool,
    dry_run_scripts: tuple[str, ...],
    jobs: int | None,
    allow_unchecked: bool,
    as_json: bool,
) -> int:
    """Run the study's batch, then write its report."""
    # here, not at the top: a command's --help loads no library code (bench/bench_cli_start.py)
    from dokimi.analysis.study import build_study_report, load_study, run_options
    from dokimi.cli.run import _Reporter
    from dokimi.runner.dryrun import parse_script_options
    from dokimi.runner.run import run_batch

    spec = load_study(study_file)
    options = run_options(
        spec,
        study_file,
        source=source,
        bin=bin_,
        out=out,
        dry_run=dry_run,
        dry_run_scripts=parse_script_options(dry_run_scripts, spec.arms),
        jobs=jobs,
    )
    if allow_unchecked:
        options = dataclasses.replace(options, allow_unchecked=True)
    with _Reporter(live=sys.stderr.isatty() and not as_json) as reporter:
        result = run_batch(options, progress=reporter)
    for warning in result.warnings:
        echo(f"warning: {warning}", err=True)
    _deliver(build_study_report(spec, study_file, out=result.root.parent), as_json)
    if not result.complete:
        echo("some cells did not finish: run the study again to fill them", err=True)
        return EXIT_FOUND_PROBLEMS
    return EXIT_OK


@study.command("report")
@click.argument("study_file", metavar="FILE", type=STUDY_FILE)
@OUT
@json_option
def report(study_file: Path, out: Path | None, as_json: bool) -> int:
    """Write the study's report from its batch (no git, no docker)."""
    # here, not at the top: a command's --help loads no library code (bench/bench_cli_start.py)
    from dokimi.analysis.study import build_study_report, load_study

    spec = load_study(study_file)
    _deliver(build_study_report(spec, study_file, out=out), as_json)
    return EXIT_OK
