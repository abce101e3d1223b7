"""``dokimi repo tasks check``: the self-check before paid runs (docs/running.md). Thin: options ->
dokimi.runner.taskcheck -> a table or --json.

Exit codes: 0 every task is ok, 1 a task is broken or unsupported, 2 could not run (no docker, no manifest, an
image that does not build).
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import click

from dokimi.cli._common import (
    FiniteFloat,
    check_manifest_choice,
    emit_json,
    json_option,
    manifest_options,
    note,
    parse_resolve,
    progress_bar,
    rubrics_option,
    run_file_option,
    shown,
    source_argument,
)
from dokimi.cli.groups import SuggestingGroup
from dokimi.constants import EXIT_FOUND_PROBLEMS, EXIT_OK


@click.group("tasks", cls=SuggestingGroup)
def tasks() -> None:
    """Task self-check: the null workspace fails, the oracle passes (no LLM)."""


def _parse_caches(values: tuple[str, ...]) -> dict[str, Path]:
    caches: dict[str, Path] = {}
    for value in values:
        name, sep, path = value.partition("=")
        if not sep or not name or not path:
            raise click.BadParameter(f"{value!r}: write NAME=PATH", param_hint="--cache")
        caches[name] = Path(path).expanduser()
    return caches


@tasks.command("check")
@source_argument
@run_file_option(
    "A run file (repo_run_file.v1): its arms are checked (and its harness writes guidance:bridge)."
)
@manifest_options
@click.option(
    "--arm",
    "arms",
    multiple=True,
    metavar="A[,B]",
    help="Guidance arms to prove sound (repeatable or comma-separated; default guidance:raw, guidance:none, "
    "guidance:tree). guidance:raw always runs: every other arm's tests must say what they say under it.",
)
@click.option(
    "--harness",
    metavar="NAME|PATH",
    help="The harness profile whose bridge guidance:bridge writes (default claude-code).",
)
@click.option("--task", "task_ids", multiple=True, metavar="ID", help="Check only this task (repeatable).")
@click.option("--warm", is_flag=True, help="Run null and oracle with a network, to fill the caches.")
@click.option(
    "-j", "--jobs", type=click.IntRange(min=1), default=1, show_default=True, help="Null/oracle runs at once."
)
@click.option("--image", "image", metavar="IMAGE", help="Use this local image instead of building one.")
@click.option(
    "--cache",
    "caches",
    multiple=True,
    metavar="NAME=PATH",
    help="Host directory of a declared cache (default ~/.cache/dokimi/caches/<id>/<name>).",
)
@click.option(
    "--build-network",
    "build_network",
    metavar="NET",
    help="docker network of the image build (and of --warm runs; default: docker's bridge).",
)
@click.option(
    "--source-dir",
    "source_dir",
    type=click.Path(file_okay=False, path_type=Path),
    help="Full clone mounted as {source_dir} (default: the source's own git directory).",
)
@click.option(
    "--grade-timeout",
    "grade_timeout",
    type=FiniteFloat(min=1),
    default=3600.0,
    show_default=True,
    help="Seconds for each oracle and grade run.",
)
@click.option(
    "--out",
    "out",
    type=click.Path(file_okay=False, path_type=Path),
    help="Keep the run directories and tasks-check.json here (default: a temporary directory).",
)
@click.option(
    "--judge-model",
    "--judge-bin",
    hidden=True,
    expose_value=False,
    callback=lambda ctx, param, value: _no_judge(value),
)
@click.option(
    "--strict",
    is_flag=True,
    help="A grader that lets the code under test read the reference (the grader isolation probe) makes the "
    "task broken, not only a warning.",
)
@click.option(
    "--egress-resolve",
    "egress_resolve",
    multiple=True,
    metavar="HOST=ADDRESS",
    help="The address the egress proxy connects to for HOST of a task's egress (like curl --resolve): an "
    "internal mirror, or a name your DNS does not know. A mapped host may be a private address.",
)
@rubrics_option
@json_option
def check(
    source: str,
    run_file: Path | None,
    manifest: str | None,
    manifest_file: Path | None,
    task_ids: tuple[str, ...],
    warm: bool,
    jobs: int,
    image: str | None,
    caches: tuple[str, ...],
    build_network: str | None,
    source_dir: Path | None,
    grade_timeout: float,
    out: Path | None,
    arms: tuple[str, ...],
    harness: str | None,
    strict: bool,
    egress_resolve: tuple[str, ...],
    rubrics_dir: Path | None,
    as_json: bool,
) -> int:
    """Prove every task of SOURCE sound before a paid run: per task, the prepared workspace fails the gate,
    the oracle's passes it (score-only tasks reach score.max), grade.json is valid, and the agent's container
    sees neither the tasks nor {source_dir}; under every guidance arm checked, and with the tests saying
    under each arm what they say under guidance:raw. A grader isolation probe also says whether the grader
    lets the code under test read the reference (a warning; an error with --strict). Exit 1 if any task is
    broken or unsupported."""
    # here, not at the top: a command's --help loads no library code (bench/bench_cli_start.py)
    from dokimi.repo.manifest import load_manifest
    from dokimi.runner.taskcheck import CheckOptions, check_tasks
    from dokimi.source import open_source

    check_manifest_choice(manifest, manifest_file)
    named, harness = _arms_and_harness(arms, harness, run_file)
    options = CheckOptions(
        task_ids=list(task_ids) or None,
        warm=warm,
        jobs=jobs,
        image=image,
        caches=_parse_caches(caches),
        build_network=build_network,
        out_dir=out,
        source_dir=source_dir,
        grade_timeout_s=grade_timeout,
        arms=named,
        harness=harness,
        strict=strict,
        egress_resolve=parse_resolve(egress_resolve),
        rubrics_dir=rubrics_dir,
    )
    with open_source(source) as repo:
        loaded = load_manifest(
            repo.eval_snapshot(), manifest=manifest, manifest_file=manifest_file, required=True
        )
        with _Progress(enabled=sys.stderr.isatty() and not as_json) as progress:
            report = check_tasks(
                repo,
                loaded,
                options,
                progress=progress.advance,
                on_total=progress.set_total,
                on_image=lambda built: note(
                    f"image {built.ref} ({'built' if built.built else 'reused'}, pin {built.pin})"
                ),
                on_build=note,
            )
    if as_json:
        emit_json(report)
    else:
        _table(report)
        if out is not None:
            note(f"run directories and tasks-check.json: {out}")
    return EXIT_OK if report.ok else EXIT_FOUND_PROBLEMS


def _no_judge(value: object) -> None:
    """tasks check makes no model call: the judge's part of a rubric is admitted by repo rubric check."""
    if value is not None:
        raise click.UsageError(
            "tasks check makes no model call, so it takes no judge: run `dokimi repo rubric check SOURCE "
            "--model FULL_ID` to admit the judge's part of each rubric"
        )


def _arms_and_harness(
    arms: tuple[str, ...], harness: str | None, run_file: Path | None
) -> tuple[list[str], str | None]:
    """--arm (comma-separated or repeated) wins over the run file's arms; --harness over its harness."""
    named = [a.strip() for value in arms for a in value.split(",") if a.strip()]
    if run_file is not None:
        # here, not at the top: a command's --help loads no library code (bench/bench_cli_start.py)
        from dokimi.schemas._base import read_document
        from dokimi.schemas.run_file import RunFile

        document = read_document(run_file, RunFile)
        named = named or list(document.arms or [])
        harness = harness or document.harness
    return named, harness


class _Progress:
    """A rich progress bar on a terminal (total: null and oracle of every task); nothing otherwise."""

    def __init__(self, *, enabled: bool) -> None:
        self.enabled = enabled
        self._bar: Any = None
        self._task: Any = None

    def __enter__(self) -> _Progress:
        if self.enabled:
            self._bar = progress_bar()
            self._bar.__enter__()
            self._task = self._bar.add_task("tasks check", total=None)
        return self

    def advance(self, task_id: str, event: str) -> None:
        if self._bar is None:
            return
        self._bar.update(self._task, advance=1, description=shown(f"{task_id}: {event} done"))

    def set_total(self, total: int) -> None:
        if self._bar is not None:
            self._bar.update(self._task, total=total)

    def __exit__(self, *exc: object) -> None:
        if self._bar is not None:
            self._bar.__exit__(None, None, None)


def _phase_cell(phase: Any) -> str:
    if phase is None:
        return "-"
    if phase.grader_failure:
        return "grader failure"
    if phase.gated:
        return "pass" if phase.passed else "fail"
    return f"score {phase.score:g}" if phase.score is not None else "score -"


def _table(report: Any) -> None:
    # here, not at the top: a command's --help loads no library code (bench/bench_cli_start.py)
    from dokimi.cli.tables import Col, color_on, colored, fit_line, print_lines, render_table, terminal_width

    width = terminal_width()
    color = color_on()
    status_of = {"ok": "ok", "broken": "fail", "unsupported": "warn"}
    rows = [
        [
            task.task,
            colored(task.status, status_of[task.status], color=color),
            _phase_cell(task.null),
            _phase_cell(task.oracle),
            _isolation_cell(task.grader_isolation),
            _arms_cell(task),
        ]
        for task in report.tasks
    ]
    columns = [
        Col("task", key=True), Col("status", droppable=False), Col("null"), Col("oracle"), Col("grader"),
        Col("other arms"),
    ]  # fmt: skip
    lines = render_table(
        columns, rows, width=width, title=f"tasks check: {report.manifest_id} ({report.image})"
    )
    for task in report.tasks:
        for problem in task.problems:
            lines += fit_line(f"  {task.task}: {problem}", width)
        for warning in task.warnings:
            lines += fit_line(f"  {task.task}: warning: {warning}", width)
    arms = list(dict.fromkeys(a.arm for t in report.tasks for a in t.arms))
    if arms:
        lines += fit_line(
            f"arms: {', '.join(arms)} (null and oracle under each, compared with {arms[0]})", width
        )
    broken = sum(1 for t in report.tasks if t.status != "ok")
    verdict = "all tasks ok" if report.ok else f"{broken} of {len(report.tasks)} task(s) not ok"
    lines.append(f"{verdict}{' (warm)' if report.warm else ''}")
    print_lines(lines)


def _isolation_cell(found: Any) -> str:
    """The grader isolation probe's finding: ``isolated``, ``exposed``, or ``-`` when it measured nothing."""
    if found is None or not found.measured:
        return "-"
    return "exposed" if found.reference_exposed else "isolated"


def _arms_cell(task: Any) -> str:
    """``same`` when every other arm is sound and its tests say what they say under guidance:raw, else the
    arms that are not; ``-`` when no other arm ran."""
    if len(task.arms) < 2:
        return "-"
    baseline = task.arms[0].arm
    failed = [c.name for c in task.checks if not c.ok]

    def differs(arm: str) -> bool:
        return any(n.endswith(f"({arm})") or n.endswith(f"under {arm} as under {baseline}") for n in failed)

    changed = [a.arm for a in task.arms[1:] if differs(a.arm)]
    return "same" if not changed else "differ: " + ", ".join(changed)
