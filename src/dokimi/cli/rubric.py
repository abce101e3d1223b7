"""``dokimi repo rubric``: draft a task's rubric, approve it, and admit it by calibrating the judge
(docs/mergeability.md). Thin: options -> dokimi.runner.rubric_draft, dokimi.repo.rubrics,
dokimi.checks.merge.calibrate -> text or --json.

Exit codes of ``check``: 0 every expectation held, 1 one did not (or no task has a rubric), 2 could not run
(bad model id, no harness binary, no manifest). ``draft`` and ``approve``: 0 written, 2 could not (no such
task, an existing rubric without --force, an answer that is not a rubric).
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
    rubrics_option,
    source_argument,
    working_tree_options,
)
from dokimi.cli.groups import SuggestingGroup
from dokimi.constants import EXIT_FOUND_PROBLEMS, EXIT_OK
from dokimi.errors import UsageError
from dokimi.rundir import RUBRIC_CHECK_JSON, RUBRIC_JSON


@click.group("rubric", cls=SuggestingGroup)
def rubric() -> None:
    """Mergeability rubrics: draft one, approve it, calibrate the judge on known diffs (draft and check are
    paid: they call a model)."""


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
@rubrics_option
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
    rubrics_dir: Path | None,
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
    if second_model is not None:
        # here, not at the top: a command's --help loads no library code (bench/bench_cli_start.py)
        from dokimi.analysis.vendors import second_judge_of_another_family

        problem = second_judge_of_another_family(model, second_model)
        if problem is not None:
            raise click.UsageError(f"--second-model: {problem}")
    judge_harness(model, judge)  # a model alias, a harness that cannot judge or no executable: exit 2
    if second_model is not None:
        judge_harness(second_model, second or judge)
    inputs = CheckInputs(
        model=model,
        second_model=second_model,
        judge=judge,
        second_judge=second,
        task_ids=list(task_ids) or None,
        rubrics_dir=rubrics_dir,
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
        from dokimi.schemas._base import make_output_dir, write_document
        from dokimi.schemas.rubric_check import RubricCheckDoc

        make_output_dir(out)
        write_document(out / RUBRIC_CHECK_JSON, RubricCheckDoc.model_validate(report.to_json()))
    if as_json:
        emit_json(report.to_json())
    else:
        for row in report.rows:
            mark = {True: "ok  ", False: "FAIL", None: "n/a "}[row.ok]
            verdict = row.verdict if row.verdict is not None and row.verdict.ok else None
            failed = (", ".join(verdict.blockers_failed()) or "none") if verdict is not None else "-"
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
            for b in a.blockers:
                kappa = "-" if b["kappa"] is None else f"{b['kappa']:.2f}"
                agreed = f"agreed on {b['agreed']} of {b['cells']} rows"
                echo(f"  {b['task']} {b['blocker']}: kappa {kappa}, {agreed}")
            for item in a.disagreements:
                echo(f"  disagree: {item}")
    return EXIT_OK if report.ok else EXIT_FOUND_PROBLEMS


@rubric.command("draft")
@click.argument("task_id", metavar="TASK")
@click.option("--model", "model", required=True, metavar="FULL_ID", help="The drafting model's full id.")
@click.option(
    "--harness",
    "harness",
    default="claude-code",
    show_default=True,
    metavar="NAME|PATH",
    help="The harness the drafter runs through (as the judge: claude-code, codex, gemini-cli).",
)
@click.option(
    "--bin", "bin_", type=click.Path(dir_okay=False, path_type=Path), help="The harness's executable."
)
@click.option("--timeout", type=FiniteFloat(min=1), default=600.0, show_default=True, help="For the call.")
@click.option(
    "--image",
    "image",
    metavar="REF",
    help="Run the oracle in this image instead of building the eval tree's.",
)
@click.option("--force", is_flag=True, help="Replace an existing rubric.json (it may be approved work).")
@working_tree_options
@json_option
def draft(
    task_id: str,
    model: str,
    harness: str,
    bin_: Path | None,
    timeout: float,
    image: str | None,
    force: bool,
    repo_dir: Path,
    manifest: str | None,
    as_json: bool,
) -> int:
    """Draft tasks/TASK/rubric.json with an LLM in the maintainer role (a paid model call), from the task's
    prompt, the oracle's change (its entry point's, run in a container, else oracle.patch), the guidance
    files at the task's base and the review rules that apply to the change; never from an agent's output.
    The rubric is a draft until `repo rubric approve TASK --by NAME`; until then its results are
    provisional. Then calibrate it with `repo rubric check`."""
    # here, not at the top: a command's --help loads no library code (bench/bench_cli_start.py)
    from dokimi.checks.merge.judge import JudgeOptions, judge_harness
    from dokimi.repo.manifest import load_manifest
    from dokimi.runner.rubric_draft import DraftRequest, draft_task_rubric
    from dokimi.schemas.rubric import rubric_problems
    from dokimi.source import open_source
    from dokimi.source.git import toplevel

    options = JudgeOptions(bin=bin_, profile=harness, timeout=timeout)
    judge_harness(model, options)  # a model alias, a harness that cannot judge or no executable: exit 2
    repo_dir = toplevel(repo_dir) or repo_dir
    with open_source(str(repo_dir)) as repo:
        loaded = load_manifest(repo.eval_snapshot(), manifest=manifest, manifest_file=None, required=True)
        request = DraftRequest(task_id=task_id, model=model, judge=options, image=image, force=force)
        written = draft_task_rubric(repo, loaded, repo_dir, request)
    rubric_doc = written.drafted.rubric
    summary = {
        "rubric": str(written.rubric_path),
        "lazy_diff": str(written.lazy_path) if written.lazy_path else None,
        "status": str(rubric_doc.status),
        "blockers": [b.id for b in rubric_doc.blockers],
        "non_blockers": [n.id for n in rubric_doc.non_blockers],
        "inputs": rubric_doc.drafted.inputs if rubric_doc.drafted else [],
        "cost_usd": written.drafted.cost_usd,
    }
    if as_json:
        emit_json(summary)
        return EXIT_OK
    echo(f"wrote {written.rubric_path} (draft): {len(rubric_doc.blockers)} blockers, "
         f"{len(rubric_doc.non_blockers)} non-blockers")  # fmt: skip
    if written.lazy_path is not None:
        echo(f"wrote {written.lazy_path}: the drafter's lazy change, for repo rubric check")
    echo("read: " + ", ".join(summary["inputs"]))  # type: ignore[arg-type]
    for problem in rubric_problems(rubric_doc, task_id=task_id):
        echo(f"warning: {problem}")
    echo(f"next: review it blocker by blocker, then `dokimi repo rubric approve {task_id} --by NAME`")
    return EXIT_OK


@rubric.command("approve")
@click.argument("task_id", metavar="TASK")
@click.option("--by", "by", required=True, metavar="NAME", help="The maintainer who reviewed the rubric.")
@click.option("--note", "note", help="What was changed in review, or what to keep in mind.")
@working_tree_options
@json_option
def approve(
    task_id: str, by: str, note: str | None, repo_dir: Path, manifest: str | None, as_json: bool
) -> int:
    """Record that a maintainer reviewed tasks/TASK/rubric.json blocker by blocker and approves it: its
    status becomes approved, with who, when and the digest of what was approved. Results of a batch run
    under the draft stay provisional; an edit after approval makes it provisional again."""
    # here, not at the top: a command's --help loads no library code (bench/bench_cli_start.py)
    from dokimi.repo.manifest import load_manifest, load_tasks
    from dokimi.repo.rubrics import approve_rubric
    from dokimi.schemas.rubric import rubric_problems
    from dokimi.source import open_source
    from dokimi.source.git import toplevel

    repo_dir = toplevel(repo_dir) or repo_dir
    with open_source(str(repo_dir)) as repo:
        loaded = load_manifest(repo.eval_snapshot(), manifest=manifest, manifest_file=None, required=True)
        m = loaded.manifest
        tasks = {t.id: t for t in load_tasks(repo.eval_snapshot(), m)} if m is not None and m.tasks else {}
    if task_id not in tasks:
        raise UsageError(f"{task_id}: the repository has no such task", hint=", ".join(sorted(tasks)) or None)
    approved = approve_rubric(repo_dir / tasks[task_id].dir / RUBRIC_JSON, by=by, note=note or "")
    record = approved.rubric.approval
    assert record is not None
    if as_json:
        emit_json(
            {"rubric": str(approved.path), "already": approved.already, "approval": record.model_dump()}
        )
    elif approved.already:
        echo(f"{approved.path} is already approved, as it reads, by {record.by} on {record.at}")
    else:
        echo(f"approved {approved.path} by {record.by} on {record.at} ({record.digest})")
        for problem in rubric_problems(approved.rubric, task_id=task_id):
            echo(f"warning: {problem}")
    return EXIT_OK
