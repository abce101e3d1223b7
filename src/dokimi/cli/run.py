"""``dokimi repo run SOURCE --arm A[,B] --model M[,N] --reps N --batch NAME [...]`` (docs/running.md).

Exit codes: 0 every planned cell has a result.json; 1 some cells are still missing (a cell failed before its
agent ran, or ``--max-batch-usd`` stopped new cells): run the same command again to fill them; 2 usage or
environment (no docker, a batch pinned to another eval tree, an invalid task); 130 Ctrl-C. SIGTERM and SIGHUP
(dokimi.process) kill the running children, the runner then removes the batch's containers, and the CLI ends
with that signal; finished cells stay, unfinished ones have no result.json.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any

import click

from dokimi.cli._common import (
    FiniteFloat,
    LiveBar,
    check_manifest_choice,
    emit_json,
    json_option,
    manifest_options,
    note,
    parse_resolve,
    print_above,
    rubrics_option,
    run_file_option,
    source_argument,
)
from dokimi.constants import EXIT_FOUND_PROBLEMS, EXIT_OK, MAX_REPS
from dokimi.errors import DokimiError
from dokimi.process import Terminated

if TYPE_CHECKING:
    from dokimi.batch import CellKey
    from dokimi.runner.cell import CellOutcome
    from dokimi.runner.run import BatchRun
    from dokimi.schemas.run_summary import RunGroup


def _caches(values: tuple[str, ...]) -> dict[str, Path]:
    out: dict[str, Path] = {}
    for value in values:
        name, sep, path = value.partition("=")
        if not sep or not name or not path:
            raise click.BadParameter(f"{value!r}: expected NAME=PATH", param_hint="--cache")
        out[name] = Path(path)
    return out


def _host_port(value: str | None) -> str | None:
    """``--gateway-listen HOST:PORT``: an IP address or a name, and a port (0: any free one)."""
    if value is None:
        return None
    host, sep, port = value.rpartition(":")
    if not sep or not host.strip("[]") or not port.isdigit() or not 0 <= int(port) < 65536:
        raise click.BadParameter(f"{value!r}: expected HOST:PORT", param_hint="--gateway-listen")
    return value


def _prices(values: tuple[str, ...]) -> dict[str, Any]:
    # here, not at the top: a command's --help loads no library code (bench/bench_cli_start.py)
    from dokimi.gateway.prices import parse_price

    out: dict[str, Any] = {}
    for value in values:
        try:
            model, price = parse_price(value)
        except ValueError as e:
            raise click.BadParameter(str(e), param_hint="--price") from None
        if model in out and out[model] != price:
            raise click.BadParameter(f"{model!r} is given two prices", param_hint="--price")
        out[model] = price
    return out


class _Reporter(LiveBar):
    """Progress for a human: a rich bar on a terminal, nothing otherwise (errors are noted either way)."""

    def __init__(self, live: bool) -> None:
        super().__init__(live)
        self.task_id: Any = None
        self.root: Path | None = None

    def note(self, text: str) -> None:
        if self.bar is not None:
            print_above(self.bar.console, text)

    def batch(self, root: Path, *, default_place: bool) -> None:
        """The first line: where the batch is (a batch without --out lands outside the working tree)."""
        self.root = root
        where = " (the default place; --out DIR puts batches elsewhere)" if default_place else ""
        self.above_or_note(f"batch {root}{where}")

    def planned(self, total: int, done: int) -> None:
        if self.bar is not None:
            self.task_id = self.bar.add_task("cells", total=total, completed=done)

    def cell_started(self, key: CellKey) -> None:
        pass

    def cell_done(self, outcome: CellOutcome) -> None:
        key = outcome.key
        where = f"{key.task} {key.arm} {key.model} {key.effort or 'default'} rep{key.rep}"
        on = f" on {outcome.node}" if outcome.node else ""
        message = None
        if outcome.status == "failed":
            message = f"cell {where} failed before its agent ran{on}: {outcome.error}"
        elif outcome.status == "lost":
            message = f"cell {where} lost (no result.json; the next run fills it): {outcome.error}"
        if message is not None:
            if self.bar is not None:
                print_above(self.bar.console, message)
            else:
                note(message)
        if self.bar is not None and self.task_id is not None:
            self.bar.advance(self.task_id)


def _result_cell(row: RunGroup) -> str:
    """The ``pass`` column: passes over gated cells, or for a score-only task the mean score (a score-only
    cell never passes: its result is the score)."""
    parts = [f"{row.passed}/{row.graded}"] if row.graded or not row.scored else []
    if row.scored:
        parts.append("score -" if row.score_mean is None else f"score {row.score_mean:g}")
    return ", ".join(parts)


def _prompt_styles(values: tuple[str, ...]) -> list[str]:
    """--prompt-style values: spec and issue, each once."""
    # here, not at the top: a command's --help loads no library code (bench/bench_cli_start.py)
    from dokimi.runner.plan import parse_list

    styles = parse_list(values)
    unknown = [s for s in styles if s not in ("spec", "issue")]
    if unknown:
        raise click.BadParameter(f"{unknown[0]!r}: give spec or issue", param_hint="--prompt-style")
    return styles


def _spend(run: BatchRun) -> str:
    """The batch's spend; for a dry run, that nothing was spent (the harness's figure labelled simulated)."""
    if not run.dry_run:
        return f"batch spend so far ${run.spent_usd:.4f}"
    simulated = run.simulated_usd
    return "DRY RUN: nothing spent" + (
        f" (the harnesses reported ${simulated:.4f} for the scripted answers: simulated, never paid)"
        if simulated is not None
        else ""
    )


def _print_table(run: BatchRun) -> None:
    # here, not at the top: a command's --help loads no library code (bench/bench_cli_start.py)
    from dokimi.cli.tables import Col, fit_line, print_lines, render_table, terminal_width
    from dokimi.runner.run import group_rows

    width = terminal_width()
    groups = group_rows(run)
    infra = any(row.infra_errors for row in groups)
    prompts = any(row.prompt for row in groups)
    columns = [Col("task", key=True), Col("arm", key=True), *([Col("prompt", key=True)] if prompts else [])]
    columns += [Col("model"), Col("effort")]
    columns += [
        Col(n, right=True, droppable=n not in ("cells", "pass")) for n in ("cells", "ran", "skipped", "pass")
    ]
    names = ("grader fail", *(("infra err",) if infra else ()), "failed", "not started")
    columns += [Col(n, right=True) for n in names]
    rows = [
        [
            row.task,
            row.arm,
            *([row.prompt or "-"] if prompts else []),
            row.model,
            row.effort,
            str(row.cells),
            str(row.ran),
            str(row.skipped),
            _result_cell(row),
            str(row.grader_failures),
            *([str(row.infra_errors)] if infra else []),
            str(row.failed),
            str(row.not_started + row.interrupted + row.lost),
        ]  # fmt: skip
        for row in groups
    ]
    title = f"batch {run.root}" + (" (DRY RUN: the scripted model, not a real one)" if run.dry_run else "")
    lines = render_table(columns, rows, width=width, title=title)
    lines += fit_line(
        f"{run.count('finished')} ran, {run.count('skipped')} skipped (finished earlier), "
        f"{run.count('failed')} failed before the agent ran, {run.count('not_started')} not started; "
        f"{_spend(run)}; "
        f"harness {run.harness} {run.harness_version}; image {run.image}",
        width,
    )
    if run.executor == "ray":
        # here, not at the top: a command's --help loads no library code (bench/bench_cli_start.py)
        from dokimi.runner.run import node_rows

        lost = run.count("lost")
        per_node = ", ".join(f"{row.node}: {row.ran} ran, {row.failed} failed" for row in node_rows(run))
        lines += fit_line(
            f"ray nodes: {per_node or 'none ran a cell'}"
            + (f"; {lost} lost with their node" if lost else ""),
            width,
        )
    print_lines(lines)


def _stopped_note(root: Path | None) -> str:
    """What a user reads after Ctrl-C or SIGTERM: what is kept, and how to go on."""
    # here, not at the top: a command's --help loads no library code (bench/bench_cli_start.py)
    from dokimi.batch import load_batch

    if root is None:
        return "interrupted before the batch started: nothing was run"
    try:
        finished = len(load_batch(root).finished())
    except DokimiError:
        finished = 0
    return (
        f"interrupted: the batch {root} keeps its {finished} finished cell(s); cells that were running have "
        "no result.json (missing, not failed). Run the same command again to fill them."
    )


#: run file key -> the click parameter it stands for
_RUN_FILE_KEYS: dict[str, str] = {
    "arms": "arms", "models": "models", "reps": "reps", "batch": "batch", "harness": "harness",
    "bin": "bin_", "tasks": "tasks", "efforts": "efforts", "out": "out", "manifest": "manifest",
    "manifest_file": "manifest_file", "agent_network": "agent_network", "timeout_s": "timeout_s",
    "max_turns": "max_turns", "budget_usd": "budget_usd", "max_batch_usd": "max_batch_usd", "jobs": "jobs",
    "prices": "prices",
}  # fmt: skip
_RUN_FILE_PATHS = frozenset({"bin", "out", "manifest_file"})


def apply_run_file(ctx: click.Context, path: Path) -> dict[str, Any]:
    """The command's parameters with the run file's values filled in wherever the command line did not give
    the option (an option on the command line wins). Paths in the file are relative to its directory."""
    # here, not at the top: a command's --help loads no library code (bench/bench_cli_start.py)
    from click.core import ParameterSource

    from dokimi.schemas._base import read_document
    from dokimi.schemas.run_file import RunFile

    document = read_document(path, RunFile)
    merged = dict(ctx.params)
    for key, param in _RUN_FILE_KEYS.items():
        value = getattr(document, key)
        if value is None or ctx.get_parameter_source(param) == ParameterSource.COMMANDLINE:
            continue
        if key in _RUN_FILE_PATHS and (key != "bin" or "/" in value):
            relative = path.parent / Path(value).expanduser()
            value = str(relative) if key == "bin" else relative
        merged[param] = tuple(value) if isinstance(value, list) else value
    return merged


@click.command("run")
@source_argument
@run_file_option(
    "A run file (repo_run_file.v1) holding arms, models, reps, batch, harness and the other options "
    "below; an option on the command line wins over it."
)
@manifest_options
@click.option(
    "--arm",
    "arms",
    multiple=True,
    metavar="A[,B]",
    help="Arms (repeatable or comma-separated): guidance:none, guidance:raw, guidance:bridge, guidance:tree "
    "(today's guidance on every base), guidance:at=REV (revision REV's), guidance:generated (the harness's "
    "own generator, e.g. /init).",
)
@click.option(
    "--model",
    "models",
    multiple=True,
    metavar="ID[,ID]",
    help="Model ids passed to the harness as they are.",
)
@click.option("--reps", type=click.IntRange(min=1, max=MAX_REPS), help="Repetitions per cell.")
@click.option("--batch", metavar="NAME", help="Batch name: the directory <out>/<NAME>.")
@click.option(
    "--out",
    type=click.Path(file_okay=False, path_type=Path),
    help="Where batches live (default: $DOKIMI_HOME/runs/<manifest id>, DOKIMI_HOME being ~/.cache/dokimi "
    "unless set).",
)
@click.option("--task", "tasks", multiple=True, metavar="ID", help="Only these tasks (repeatable).")
@click.option(
    "--harness",
    default="claude-code",
    show_default=True,
    metavar="NAME|PATH",
    help="A built-in harness profile or the path of a profile file.",
)
@click.option("--bin", "bin_", metavar="PATH", help="The harness executable (mounted at /eval/harness).")
@click.option(
    "--effort",
    "efforts",
    multiple=True,
    metavar="E[,E]",
    help="Reasoning efforts, each a cell dimension (default: the task's, else the harness default).",
)
@click.option(
    "--prompt-style",
    "prompt_styles",
    multiple=True,
    metavar="S[,S]",
    help="Prompt variants, each a cell dimension like an arm: spec (the task's prompt) and issue (its "
    "prompt_issue); reports and comparisons split them. Default: each task's own prompt.",
)
@click.option(
    "--agent-network",
    metavar="NET",
    help="UNSEALED escape hatch: put the agent's container on this docker network instead of the batch's "
    "internal one; it then reaches any host that network reaches, with your real credentials, and the "
    "model gateway sees nothing (warned about, recorded, flagged by repo report).",
)
@click.option(
    "--egress-resolve",
    "egress_resolve",
    multiple=True,
    metavar="HOST=ADDRESS",
    help="The address the egress proxy connects to for HOST (like curl --resolve): an internal mirror, "
    "or a name your DNS does not know. A mapped host may be a private address.",
)
@click.option(
    "--timeout",
    "timeout_s",
    type=FiniteFloat(min=0, min_open=True),
    metavar="S",
    help="Agent wall-clock cap in seconds unless task.json sets timeout_s (default 1800).",
)
@click.option(
    "--max-turns",
    type=click.IntRange(min=1),
    metavar="N",
    help="Turn cap unless task.json sets max_turns (default 100).",
)
@click.option(
    "--budget",
    "budget_usd",
    type=FiniteFloat(min=0, min_open=True),
    metavar="USD",
    help="Cost cap per run unless task.json sets budget_usd (default 1).",
)
@click.option(
    "--max-batch-usd",
    type=FiniteFloat(min=0, min_open=True),
    metavar="USD",
    help="Start no new cell once the batch has spent this much (unknown cost counts as the cap).",
)
@click.option(
    "--price",
    "prices",
    multiple=True,
    metavar="MODEL=IN,OUT",
    help="USD per million input and output tokens of a model dokimi's price table lacks (repeatable; "
    "IN,OUT,CACHE_WRITE,CACHE_READ for exact cache rates). A sealed run refuses an unpriced model, since "
    "the model gateway counts every request's cost; recorded in the batch's batch.json.",
)
@click.option(
    "-j",
    "--jobs",
    type=click.IntRange(min=1),
    help="Cells run side by side (default 1; with --executor ray, one per CPU of the cluster).",
)
@click.option(
    "--executor",
    type=click.Choice(["local", "ray"]),
    default="local",
    show_default=True,
    help="Where cells run: this machine, or a Ray cluster (docs/scale.md).",
)
@click.option(
    "--ray-address",
    metavar="ADDR",
    help="With --executor ray: the cluster's HOST:PORT (default: RAY_ADDRESS, else the cluster this machine "
    "runs; `local` starts a throwaway one).",
)
@click.option(
    "--shared-out",
    is_flag=True,
    help="With --executor ray: every node mounts --out at the same path, so run directories are moved "
    "there instead of sent back to this machine.",
)
@click.option(
    "--gateway-listen",
    metavar="HOST:PORT",
    callback=lambda ctx, param, value: _host_port(value),
    help="With --executor ray, a sealed run: where this machine's model gateway listens for the nodes "
    "(default: its address in the Ray cluster, a free port). Open that port to the nodes (docs/scale.md).",
)
@click.option("--force", is_flag=True, help="Run cells again even when they have a result.json.")
@click.option(
    "--allow-unchecked",
    is_flag=True,
    help="Run tasks that no repo tasks check (or, gated on mergeable, no repo rubric check) proved sound on "
    "this eval_dir, base and image; batch.json records which and why. A dry run never needs it.",
)
@click.option(
    "--dry-run",
    is_flag=True,
    help="Zero cost: the real harness against the scripted model server inside the container, with "
    "a script derived from each task's oracle.",
)
@click.option(
    "--dry-run-script",
    "dry_run_scripts",
    multiple=True,
    metavar="[ARM=]FILE",
    help="With --dry-run: play FILE (a JSON list of turns) for ARM, or for every arm.",
)
@click.option("--image", metavar="IMG", help="Run in this image instead of building the eval tree's.")
@click.option("--cache", "caches", multiple=True, metavar="NAME=PATH", help="Host directory of a cache.")
@click.option(
    "--source-dir",
    type=click.Path(file_okay=False, path_type=Path),
    help="A full clone of the source for {source_dir} (default: the source's own git directory).",
)
@click.option(
    "--judge-model",
    metavar="FULL_ID",
    help="Judge tasks that have a rubric.json with this model (a full model id, never an alias).",
)
@click.option(
    "--judge-harness",
    metavar="NAME|PATH",
    help="The harness the judge runs through: claude-code (default), codex, gemini-cli, or a profile with a "
    "judge block.",
)
@click.option(
    "--judge-bin", metavar="PATH", help="The judge harness's executable (default: found as doctor finds it)."
)
@click.option(
    "--second-judge-model",
    metavar="FULL_ID",
    help="A second rubric judge (a different model family): its verdicts give the judges' agreement (kappa) "
    "in the report, never a run's score.",
)
@click.option(
    "--second-judge-harness",
    metavar="NAME|PATH",
    help="The harness the second judge runs through (default: --judge-harness).",
)
@click.option("--second-judge-bin", metavar="PATH", help="The second judge harness's executable.")
@rubrics_option
@json_option
@click.pass_context
def run(
    ctx: click.Context,
    source: str,
    run_file: Path | None,
    manifest: str | None,
    manifest_file: Path | None,
    arms: tuple[str, ...],
    models: tuple[str, ...],
    reps: int | None,
    batch: str | None,
    out: Path | None,
    tasks: tuple[str, ...],
    harness: str,
    bin_: str | None,
    efforts: tuple[str, ...],
    prompt_styles: tuple[str, ...],
    agent_network: str | None,
    timeout_s: float | None,
    max_turns: int | None,
    budget_usd: float | None,
    max_batch_usd: float | None,
    prices: tuple[str, ...],
    jobs: int | None,
    executor: str,
    ray_address: str | None,
    shared_out: bool,
    gateway_listen: str | None,
    force: bool,
    allow_unchecked: bool,
    dry_run: bool,
    dry_run_scripts: tuple[str, ...],
    image: str | None,
    caches: tuple[str, ...],
    source_dir: Path | None,
    judge_model: str | None,
    judge_harness: str | None,
    judge_bin: str | None,
    second_judge_model: str | None,
    second_judge_harness: str | None,
    second_judge_bin: str | None,
    rubrics_dir: Path | None,
    egress_resolve: tuple[str, ...],
    as_json: bool,
) -> int:
    """Run agents on SOURCE: one cell per (task, arm, model, effort, rep) under OUT/BATCH.

    Each cell prepares its workspace, runs the harness in the agent's container, converts its trace, grades
    the run in the grade container and writes result.json last. A rerun skips finished cells and fills the
    missing ones; a batch stays on the eval tree it started with. Exit 0 when every planned cell is done,
    1 when some are still missing (rerun to fill them), 2 on a usage or environment problem. --json prints a
    repo_run.v1 document.
    """
    # here, not at the top: a command's --help loads no library code (bench/bench_cli_start.py)
    from dokimi.repo.arms import Arm
    from dokimi.runner.dryrun import parse_script_options
    from dokimi.runner.plan import parse_list
    from dokimi.runner.run import RunOptions, run_batch, run_summary

    if run_file is not None:
        merged = apply_run_file(ctx, run_file)
        manifest, manifest_file, arms, models = (
            merged["manifest"], merged["manifest_file"], merged["arms"], merged["models"]
        )  # fmt: skip
        reps, batch, out, tasks, harness, bin_ = (
            merged["reps"], merged["batch"], merged["out"], merged["tasks"], merged["harness"], merged["bin_"]
        )  # fmt: skip
        efforts, agent_network, timeout_s = merged["efforts"], merged["agent_network"], merged["timeout_s"]
        max_turns, budget_usd = merged["max_turns"], merged["budget_usd"]
        max_batch_usd, jobs, prices = merged["max_batch_usd"], merged["jobs"], merged["prices"]
    missing = [
        f"{option} (or {key}: in a run file)"
        for option, key, value in (
            ("--arm", "arms", arms),
            ("--model", "models", models),
            ("--reps", "reps", reps),
            ("--batch", "batch", batch),
        )  # fmt: skip
        if not value
    ]
    if missing:
        raise click.UsageError("missing " + ", ".join(missing))
    assert reps is not None and batch is not None
    check_manifest_choice(manifest, manifest_file)
    arm_list = parse_list(arms)
    if dry_run_scripts and not dry_run:
        raise click.UsageError("--dry-run-script needs --dry-run")
    if executor != "ray" and (ray_address or shared_out or gateway_listen):
        raise click.UsageError("--ray-address, --shared-out and --gateway-listen need --executor ray")
    if judge_model is not None and second_judge_model is not None:
        # here, not at the top: a command's --help loads no library code (bench/bench_cli_start.py)
        from dokimi.analysis.vendors import second_judge_of_another_family

        problem = second_judge_of_another_family(judge_model, second_judge_model)
        if problem is not None:
            raise click.UsageError(f"--second-judge-model: {problem}")
    options = RunOptions(
        source=source,
        manifest=manifest,
        manifest_file=manifest_file,
        arms=tuple(Arm(arm) for arm in arm_list),
        models=tuple(parse_list(models)),
        reps=reps,
        batch=batch,
        out=out,
        tasks=tuple(parse_list(tasks)),
        harness=harness,
        bin=bin_,
        efforts=tuple(parse_list(efforts)),
        prompt_styles=tuple(_prompt_styles(prompt_styles)),
        agent_network=agent_network,
        timeout_s=timeout_s,
        max_turns=max_turns,
        budget_usd=budget_usd,
        max_batch_usd=max_batch_usd,
        prices=_prices(prices),
        jobs=jobs,
        force=force,
        allow_unchecked=allow_unchecked,
        dry_run=dry_run,
        dry_run_scripts=parse_script_options(dry_run_scripts, arm_list),
        image=image,
        caches=_caches(caches),
        source_dir=source_dir,
        judge_model=judge_model,
        judge_harness=judge_harness,
        judge_bin=judge_bin,
        second_judge_model=second_judge_model,
        second_judge_harness=second_judge_harness,
        second_judge_bin=second_judge_bin,
        rubrics_dir=rubrics_dir,
        egress_resolve=parse_resolve(egress_resolve),
        executor="ray" if executor == "ray" else "local",
        ray_address=ray_address,
        shared_out=shared_out,
        gateway_listen=gateway_listen,
    )

    reporter = _Reporter(live=sys.stderr.isatty() and not as_json)
    try:
        with reporter:
            result = run_batch(options, progress=reporter)
    except (KeyboardInterrupt, Terminated):
        note(_stopped_note(reporter.root))
        raise
    for warning in result.warnings:
        note(f"warning: {warning}")
    if result.infra_errors:
        note(
            f"{result.infra_errors} infra error(s): cell(s) the model's API failed (down, overloaded, or "
            "refusing the batch's credentials; result.json says why); they count in no rate, and the next "
            "run of this batch runs them again"
        )
    if result.stopped_by_budget:
        note(
            f"--max-batch-usd {max_batch_usd}: spent ${result.spent_usd:.4f}, and the cap of the next cell "
            f"did not fit in what is left, so {result.count('not_started')} cell(s) were not started"
        )
    if as_json:
        emit_json(run_summary(result))
    else:
        _print_table(result)
    return EXIT_OK if result.complete else EXIT_FOUND_PROBLEMS
