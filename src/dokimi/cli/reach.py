"""``dokimi repo reach``: probe which guidance files a harness really loads."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

import click

from dokimi.cli._common import (
    FiniteFloat,
    check_manifest_choice,
    echo,
    emit_json,
    json_option,
    manifest_options,
    note,
    out_option,
    source_argument,
)
from dokimi.constants import EXIT_FOUND_PROBLEMS, EXIT_OK

if TYPE_CHECKING:
    from dokimi.schemas.reach import GuidanceReach


@click.command("reach")
@source_argument
@manifest_options
@click.option("--model", required=True, help="Model id, passed to the harness as an opaque string.")
@click.option(
    "--harness",
    default="claude-code",
    show_default=True,
    metavar="NAME|PATH",
    help="A built-in harness profile, or the path of a harness_profile.v1 file.",
)
@click.option(
    "--bin", "bin_", metavar="PATH", help="The harness executable (default: the profile's bin on PATH)."
)
@click.option(
    "--scenarios",
    default="root,cwd,read",
    show_default=True,
    help="Scenario kinds: root (cwd=.), cwd (cwd=<dir>), read (read=<dir>), all (all=.: started at the "
    "root with every tool a run gives the agent).",
)
@click.option("--only", metavar="SCENARIO", help="Run only this scenario, e.g. cwd=sub or read=sub.")
@click.option(
    "--dry-run",
    is_flag=True,
    help="Point the harness at the scripted model server (zero cost); payload capture settles every cell.",
)
@click.option(
    "--no-capture",
    is_flag=True,
    help="On a real run, do not put the capturing proxy between the harness and its endpoint "
    "(payload stays null).",
)
@click.option(
    "--timeout",
    type=FiniteFloat(min=0, min_open=True),
    default=300.0,
    show_default=True,
    help="Seconds per scenario.",
)
@out_option("reach")
@click.option("--salt", help="Token salt (default: random, recorded in reach.json; reuse it to reproduce).")
@click.option(
    "--verbose",
    "-v",
    is_flag=True,
    help="Print the full table, one line per (scenario, file), instead of the summary per file.",
)
@json_option
def reach(
    source: str,
    manifest: str | None,
    manifest_file: Path | None,
    model: str,
    harness: str,
    bin_: str | None,
    scenarios: str,
    only: str | None,
    dry_run: bool,
    no_capture: bool,
    timeout: float,
    out: Path,
    salt: str | None,
    verbose: bool,
    as_json: bool,
) -> int:
    """Probe which guidance files HARNESS puts in front of the model, scenario by scenario.

    Writes OUT/reach.json (guidance_reach.v1) and OUT/traces/<scenario>/, and prints a summary: per guidance
    file, the scenarios that loaded it (--verbose: every (scenario, file) cell). Exits 1 when a scenario gave
    no usable answer (class error), 0 otherwise.
    """
    # here, not at the top: a command's --help loads no library code (bench/bench_cli_start.py)
    from dokimi.checks.reach import ReachOptions, run_reach
    from dokimi.harness.profile import load_profile
    from dokimi.repo.manifest import load_manifest
    from dokimi.source import open_source

    check_manifest_choice(manifest, manifest_file)
    if timeout <= 0:
        raise click.BadParameter("must be > 0", param_hint="--timeout")
    kinds = [k.strip() for k in scenarios.split(",") if k.strip()]
    profile = load_profile(harness)
    with open_source(source) as repo:
        snapshot = repo.eval_snapshot()
        loaded = load_manifest(snapshot, manifest=manifest, manifest_file=manifest_file, required=False)
        if loaded.defaulted:
            note(f"no manifest: probing the default guidance globs {', '.join(loaded.guidance_globs)}")
        eval_dir = loaded.manifest.eval_dir if loaded.manifest is not None else None
        options = ReachOptions(
            model=model,
            scenarios=kinds,
            only=only,
            dry_run=dry_run,
            capture=not no_capture,
            timeout=timeout,
            salt=salt,
            bin=bin_,
            progress=note,
        )
        document = run_reach(
            snapshot,
            profile,
            globs=loaded.guidance_globs,
            eval_dir=eval_dir,
            out=out,
            options=options,
            source_label=source,
        )
    failed = [s for s in document.scenarios if s.error is not None]
    if as_json:
        emit_json(document)
    elif verbose:
        _render(document)
        note(f"wrote {out / 'reach.json'}")
    else:
        _render_summary(document)
        note(f"wrote {out / 'reach.json'} (--verbose prints every scenario's cells)")
    return EXIT_FOUND_PROBLEMS if failed else EXIT_OK


#: Scenario names shown in one summary cell before the rest is counted.
SHOWN_SCENARIOS = 4


def _heading(document: GuidanceReach) -> None:
    title = f"{document.harness} {document.harness_version}, {document.model}"
    echo(title + (" (dry run: classes are what the request bytes held)" if document.dry_run else ""))
    if document.capture == "proxy":
        echo(f"payload captured through a proxy in front of {document.capture_upstream}")
    elif document.capture_missing:
        echo(f"payload not captured: {document.capture_missing}")


def _scenario_list(names: list[str], total: int) -> str:
    """``every scenario``, ``-``, or the first names and how many more."""
    if not names:
        return "-"
    if len(names) == total and total > 1:
        return "every scenario"
    shown = ", ".join(names[:SHOWN_SCENARIOS])
    return shown + (f" +{len(names) - SHOWN_SCENARIOS} more" if len(names) > SHOWN_SCENARIOS else "")


def _render_summary(document: GuidanceReach) -> None:
    """Per guidance file: in how many of the scenarios that ran it was loaded (both tokens), truncated,
    fetched (only after a tool read it) or not loaded, and where it was loaded; then the scenarios that gave
    no usable answer. The full table is ``--verbose``."""
    # here, not at the top: a command's --help loads no library code (bench/bench_cli_start.py)
    from dokimi.cli.tables import Col, print_lines, render_table

    _heading(document)
    ran = [s.name for s in document.scenarios if s.error is None]
    errors = [s for s in document.scenarios if s.error is not None]
    counts = f"{len(document.scenarios)} scenario(s), {len(document.files)} guidance file(s)"
    echo(f"{counts}; {len(errors)} error(s)")
    order = [s.name for s in document.scenarios]
    by_file: dict[str, dict[str, list[str]]] = {f.path: {} for f in document.files}
    for r in document.records:
        by_file.setdefault(r.file, {}).setdefault(r.class_.value, []).append(r.scenario)
    rows = []
    for path, classes in by_file.items():
        loaded = sorted(classes.get("loaded", []), key=order.index)
        rows.append([
            path,
            f"{len(loaded)}/{len(ran)}",
            str(len(classes.get("truncated", []))),
            str(len(classes.get("fetched", []))),
            str(len(classes.get("not_loaded", []))),
            _scenario_list(loaded, len(ran)),
        ])  # fmt: skip
    columns = [
        Col("file", key=True), Col("loaded", right=True), Col("truncated", right=True),
        Col("fetched", right=True), Col("not loaded", right=True), Col("loaded in", droppable=False),
    ]  # fmt: skip
    print_lines(render_table(columns, rows))
    for s in errors:
        echo(f"error in {s.name}: {s.error}")
    wordy = [s.name for s in document.scenarios if s.prose]
    if wordy:
        echo(f"prose in {_scenario_list(wordy, len(order))}: read their traces before trusting not loaded")
    for u in document.unresolved:
        echo(f"unresolved link {u.path}: {u.reason}")


def _render(document: GuidanceReach) -> None:
    """One line per (scenario, file): narrow enough for any terminal, easy to grep."""
    _heading(document)
    aliases = {
        f.path: [a.path + (" (copy)" if a.alias_kind == "copy" else "") for a in f.aliases]
        for f in document.files
    }
    width = max((len(r.file) for r in document.records), default=4)
    by_scenario: dict[str, list[str]] = {}
    for r in document.records:
        payload = ""
        if r.payload is not None:
            payload = f"  payload head={'y' if r.payload.head else 'n'} tail={'y' if r.payload.tail else 'n'}"
        via = f"  (also {', '.join(aliases[r.file])})" if aliases.get(r.file) else ""
        by_scenario.setdefault(r.scenario, []).append(
            f"  {r.file.ljust(width)}  {r.class_.value:<10}{payload}{via}"
        )
    for s in document.scenarios:
        echo(f"{s.name}" + (f"  error: {s.error}" if s.error else ""))
        for line in by_scenario.get(s.name, []):
            echo(line)
        if s.unknown:
            echo(f"  unknown tokens: {' '.join(s.unknown)}")
        if s.prose:
            echo(f"  prose words: {s.prose} (read {s.trace_dir} before trusting not_loaded)")
    for u in document.unresolved:
        echo(f"unresolved link {u.path}: {u.reason}")
