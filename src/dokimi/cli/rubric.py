"""``dokimi repo rubric check``: admit rubrics by calibrating the judge
(docs/mergeability.md). Thin: options -> dokimi.checks.merge.calibrate -> a table or --json.

Exit codes: 0 every expectation held, 1 one did not (or no task has a rubric), 2 could not run (bad model id,
no harness binary, no manifest).
"""

from __future__ import annotations

from pathlib import Path

import click

from dokimi.cli._common import (
    FiniteFloat,
    check_manifest_choice,
    echo,
    emit_json,
    json_option,
    manifest_options,
    source_argument,
)
from dokimi.cli.groups import SuggestingGroup
from dokimi.constants import EXIT_FOUND_PROBLEMS, EXIT_OK


@click.group("rubric", cls=SuggestingGroup)
def rubric() -> None:
    """Mergeability rubrics: calibrate the judge on known diffs (paid: it calls the judge model)."""


@rubric.command("check")
@source_argument
@manifest_options
@click.option("--task", "task_ids", multiple=True, metavar="ID", help="Check only this task (repeatable).")
@click.option("--model", "model", required=True, metavar="FULL_ID", help="The primary judge's full model id.")
@click.option(
    "--second-model",
    "second_model",
    metavar="FULL_ID",
    help="A second judge (another model family): report Cohen's kappa and the disagreements.",
)
@click.option(
    "--harness",
    "harness",
    default="claude-code",
    show_default=True,
    metavar="NAME|PATH",
    help="The harness the judge runs through: claude-code, codex, gemini-cli, or a profile with a judge "
    "block.",
)
@click.option(
    "--bin", "bin_", type=click.Path(dir_okay=False, path_type=Path), help="The judge harness's executable."
)
@click.option(
    "--second-harness",
    "second_harness",
    metavar="NAME|PATH",
    help="The second judge's harness (default: --harness).",
)
@click.option(
    "--second-bin",
    "second_bin",
    type=click.Path(dir_okay=False, path_type=Path),
    help="The second judge harness's executable.",
)
@click.option(
    "--cache-dir",
    "cache_dir",
    type=click.Path(file_okay=False, path_type=Path),
    help="Verdict cache (keyed by the rendered input, the model id and the decoding parameters).",
)
@click.option("--timeout", type=FiniteFloat(min=1), default=600.0, show_default=True, help="Per judge call.")
@click.option(
    "--image",
    "image",
    metavar="REF",
    help="Run the oracle in this image instead of building the eval tree's (the oracle row's change is the "
    "oracle entry point's, in a container, as in repo tasks check).",
)
@click.option(
    "--out",
    "out",
    type=click.Path(file_okay=False, path_type=Path),
    help="Record the admission in OUT/rubric-check.json; repo run --out OUT then refuses a task gated on "
    "mergeable whose rubric was not admitted.",
)
@json_option
def check(
    source: str,
    manifest: str | None,
    manifest_file: Path | None,
    task_ids: tuple[str, ...],
    model: str,
    second_model: str | None,
    harness: str,
    bin_: Path | None,
    second_harness: str | None,
    second_bin: Path | None,
    cache_dir: Path | None,
    timeout: float,
    image: str | None,
    out: Path | None,
    as_json: bool,
) -> int:
    """For every task of SOURCE with a rubric.json: the untouched workspace must fail a blocker, the change
    the oracle entry point makes (run in a container, as tasks check runs it) must be mergeable with every
    blocker passing, each calibration.lazy diff must fail the blocker it
    targets (also with a persuasive reviewer comment inserted), and each calibration.alt diff must be
    mergeable. Exit 1 if any expectation fails."""
    # here, not at the top: a command's --help loads no library code (bench/bench_cli_start.py)
    from dokimi.checks.merge.calibrate import CheckInputs
    from dokimi.checks.merge.judge import JudgeOptions, judge_harness
    from dokimi.repo.manifest import load_manifest
    from dokimi.runner.rubric_oracle import OracleImage, check_rubrics_with_oracle
    from dokimi.source import open_source

    check_manifest_choice(manifest, manifest_file)
    judge = JudgeOptions(bin=bin_, profile=harness, cache_dir=cache_dir, timeout=timeout)
    second = None
    if second_harness is not None or second_bin is not None:
        second_profile = second_harness or harness
        second = JudgeOptions(
            bin=second_bin or (bin_ if second_profile == harness else None),
            profile=second_profile,
            cache_dir=cache_dir,
            timeout=timeout,
        )
    if second is not None and second_model is None:
        raise click.UsageError("--second-harness and --second-bin need --second-model")
    judge_harness(model, judge)  # a model alias, a harness that cannot judge or no executable: exit 2
    if second_model is not None:
        judge_harness(second_model, second or judge)
    inputs = CheckInputs(
        model=model,
        second_model=second_model,
        judge=judge,
        second_judge=second,
        task_ids=list(task_ids) or None,
    )
    with open_source(source) as repo:
        loaded = load_manifest(
            repo.eval_snapshot(), manifest=manifest, manifest_file=manifest_file, required=True
        )
        report = check_rubrics_with_oracle(repo, loaded, inputs, OracleImage(image=image))
        # here, not at the top: a command's --help loads no library code (bench/bench_cli_start.py)
        from dokimi.runner.admission import keep_rubric_records

        keep_rubric_records(repo, loaded, report, out)
    if out is not None:
        # here, not at the top: a command's --help loads no library code (bench/bench_cli_start.py)
        from dokimi.rundir import RUBRIC_CHECK_JSON
        from dokimi.schemas._base import make_output_dir, write_document
        from dokimi.schemas.rubric_check import RubricCheckDoc

        make_output_dir(out)
        write_document(out / RUBRIC_CHECK_JSON, RubricCheckDoc.model_validate(report.to_json()))
    if as_json:
        emit_json(report.to_json())
    else:
        for row in report.rows:
            mark = {True: "ok  ", False: "FAIL", None: "n/a "}[row.ok]
            failed = ", ".join(row.verdict.blockers_failed()) if row.verdict and row.verdict.ok else "-"
            line = (
                f"{mark} {row.task}  {row.kind:<12} {row.name}  (expect {row.expectation}; blockers failed: "
            )
            echo(line + f"{failed})" + (f"\n     {row.detail}" if row.detail else ""))
        if report.skipped:
            echo(f"no rubric.json: {', '.join(report.skipped)}")
        if report.agreement is not None:
            a = report.agreement
            echo(
                f"second judge {a.model}: kappa mergeable {a.kappa_mergeable}, blockers {a.kappa_blockers} "
                f"over {a.items} items"
            )
            for item in a.disagreements:
                echo(f"  disagree: {item}")
    return EXIT_OK if report.ok else EXIT_FOUND_PROBLEMS
