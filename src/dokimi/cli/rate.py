"""``dokimi repo rate``: human scoring of blinded artifacts (docs/rating.md).

    rate export BATCH --out DIR [--seed S] [--sample N] [--marker TEXT]...
    rate import RATINGS.jsonl... --key DIR/key.json [--replace]
    rate adjudicate [ADJUDICATIONS.jsonl...] --key DIR/key.json [--replace]
    rate reblind ID --key DIR/key.json --marker TEXT...
    rate summary --key DIR/key.json [--json]

Exit codes: 0 done; 1 done with something to act on (export withheld or skipped artifacts, import set runs
aside for a blinding leak, disagreements wait for an adjudicator, a re-blinded artifact still leaks); 2 bad
input (a row that does not validate, with file:line), a refused adjudicator, a bad option.
"""

from __future__ import annotations

from pathlib import Path

import click

from dokimi.cli._common import echo, emit_json, json_option, note
from dokimi.cli.groups import SuggestingGroup
from dokimi.constants import EXIT_FOUND_PROBLEMS, EXIT_OK


def _key_option(func: click.decorators.FC) -> click.decorators.FC:
    return click.option(
        "--key",
        "key",
        required=True,
        type=click.Path(dir_okay=False, path_type=Path),
        help="The private key.json written by export (the files of the rating live beside it).",
    )(func)


def _marker_option(func: click.decorators.FC) -> click.decorators.FC:
    return click.option(
        "--marker",
        "markers",
        multiple=True,
        metavar="TEXT",
        help="A literal condition marker to redact as well (a prompt-template token). Repeatable.",
    )(func)


@click.group("rate", cls=SuggestingGroup)
def rate() -> None:
    """Human scoring of blinded artifacts: export -> raters -> import -> adjudicate -> summary."""


@rate.command("export")
@click.argument("batch", metavar="BATCH", type=click.Path(file_okay=False, path_type=Path))
@click.option(
    "--out",
    "out",
    required=True,
    type=click.Path(file_okay=False, path_type=Path),
    help="The rating directory: blinded/ goes to raters, key.json stays private.",
)
@click.option(
    "--seed",
    type=int,
    default=None,
    help="Seed of the sample and the ids (default: random, kept in the key).",
)
@click.option(
    "--sample", type=int, default=None, metavar="N", help="Export a random sample of N finished cells."
)
@click.option(
    "--key-file",
    "key_file",
    type=click.Path(dir_okay=False, path_type=Path),
    default=None,
    help="Where to write the key (default OUT/key.json; never inside OUT/blinded).",
)
@_marker_option
@json_option
def export(
    batch: Path,
    out: Path,
    seed: int | None,
    sample: int | None,
    key_file: Path | None,
    markers: tuple[str, ...],
    as_json: bool,
) -> int:
    """Write one blinded artifact per finished cell of BATCH into OUT/blinded/, and the key.

    Condition markers (arms, model ids, harness names and versions, banners, phase headings, guidance file
    names, the batch and cell paths, timestamps, --marker tokens) are redacted. An artifact with a marker
    that cannot be redacted (a path in its diff) is withheld (OUT/withheld/) and listed: exit 1.
    """
    # here, not at the top: a command's --help loads no library code (bench/bench_cli_start.py)
    from dokimi.rating.export import export_batch

    report = export_batch(batch, out, seed=seed, sample=sample, markers=markers, key_path=key_file)
    if as_json:
        emit_json(report.to_json())
    else:
        echo(
            f"{len(report.blinded)} artifacts in {out / 'blinded'} (of {report.finished} finished cells); "
            f"{report.redactions} redacted; key (keep it from raters): {report.key}; seed {report.seed}"
        )
        for run_id, findings in sorted(report.withheld.items()):
            where = "; ".join(f"{f.file}:{f.line} {f.category} {f.marker!r}" for f in findings[:5])
            echo(f"potential leak: {run_id} withheld ({where})")
        for item in report.unexported:
            echo(f"not exported: {item.cell}: {item.reason}")
    return EXIT_FOUND_PROBLEMS if report.problems else EXIT_OK


@rate.command("import")
@click.argument("ratings", nargs=-1, required=True, type=click.Path(dir_okay=False, path_type=Path))
@_key_option
@click.option("--replace", is_flag=True, help="Overwrite a rater's earlier, different row for the same run.")
@json_option
def import_(ratings: tuple[Path, ...], key: Path, replace: bool, as_json: bool) -> int:
    """Validate raters' rows (repo_rating.v1, one per line) and merge them into raters.jsonl beside KEY.

    A row missing an outcome is an error (score false when unsure). A row with blinding_leak sets its run
    aside for re-blinding (exit 1).
    """
    # here, not at the top: a command's --help loads no library code (bench/bench_cli_start.py)
    from dokimi.rating.scores import import_ratings

    report = import_ratings(list(ratings), key, replace=replace)
    if as_json:
        emit_json(report.to_json())
    else:
        echo(f"{report.imported} rows imported, {report.unchanged} unchanged; {report.total} in raters.jsonl")
        for row in report.leaks:
            echo(
                f"blinding leak: {row.run_id} ({row.rater}: {row.blinding_leak}): set aside; "
                f"re-blind with `dokimi repo rate reblind {row.run_id} --key {key} --marker TEXT`"
            )
    return EXIT_FOUND_PROBLEMS if report.leaks else EXIT_OK


@rate.command("adjudicate")
@click.argument("adjudications", nargs=-1, type=click.Path(dir_okay=False, path_type=Path))
@_key_option
@click.option("--replace", is_flag=True, help="Overwrite an earlier, different adjudication of the same run.")
@json_option
def adjudicate_cmd(adjudications: tuple[Path, ...], key: Path, replace: bool, as_json: bool) -> int:
    """List the raters' disagreements per outcome; take ADJUDICATIONS (repo_adjudication.v1 rows); write
    results.jsonl beside KEY. An adjudicator who rated the run is refused. Exit 1 while runs are pending."""
    # here, not at the top: a command's --help loads no library code (bench/bench_cli_start.py)
    from dokimi.rating.scores import adjudicate

    report = adjudicate(list(adjudications), key, replace=replace)
    results = report.results
    if as_json:
        emit_json(report.to_json())
    else:
        for item in results.disagreements:
            state = f"adjudicated by {item.adjudication.adjudicator}" if item.adjudication else "PENDING"
            echo(f"{item.run_id}: {state}")
            for outcome in item.outcomes:
                values = ", ".join(f"{s.rater}={getattr(s, outcome)}" for s in item.scores)
                echo(f"  {outcome}: {values}")
            for score in item.scores:
                if score.notes:
                    echo(f"  notes {score.rater}: {score.notes}")
        adjudicated = sum(1 for r in results.final if r.adjudicated)
        echo(
            f"{len(results.final)} runs final ({adjudicated} adjudicated), {len(results.pending)} pending, "
            f"{len(results.excluded)} excluded, {len(results.unrated)} unrated; "
            f"wrote {key.parent / 'results.jsonl'}"
        )
    return EXIT_FOUND_PROBLEMS if results.pending else EXIT_OK


@rate.command("reblind")
@click.argument("run_id", metavar="ID")
@_key_option
@_marker_option
@json_option
def reblind_cmd(run_id: str, key: Path, markers: tuple[str, ...], as_json: bool) -> int:
    """Blind the run behind ID again with the reported --marker redacted, under a new id (ID is retired).
    Exit 1 when the new artifact still has a marker that cannot be redacted (it stays excluded)."""
    # here, not at the top: a command's --help loads no library code (bench/bench_cli_start.py)
    from dokimi.rating.export import reblind

    report = reblind(key, run_id, markers=markers)
    if as_json:
        emit_json(report.to_json())
    else:
        echo(f"{run_id} re-blinded as {report.new_id} ({report.status})")
        for finding in report.leaks:
            echo(f"potential leak: {finding.file}:{finding.line} {finding.category} {finding.marker!r}")
    return EXIT_FOUND_PROBLEMS if report.leaks else EXIT_OK


def _fmt(value: float | None) -> str:
    return "-" if value is None else f"{value:.2f}"


@rate.command("summary")
@_key_option
@json_option
def summary_cmd(key: Path, as_json: bool) -> int:
    """Per (arm, model, effort) and outcome: rate with a Wilson 95% interval, and RFR; Cohen's kappa per
    outcome between raters; blinding leaks and excluded runs apart."""
    # here, not at the top: a command's --help loads no library code (bench/bench_cli_start.py)
    from dokimi.rating.summary import summary

    doc = summary(key)
    if as_json:
        emit_json(doc)
        return EXIT_OK
    # here, not at the top: a command's --help loads no library code (bench/bench_cli_start.py)
    from dokimi.cli.tables import Col, fit_line, print_lines, render_table, terminal_width

    width = terminal_width()
    rows = [
        [
            row.arm,
            row.model,
            row.effort or "default",
            row.outcome,
            f"{row.k}/{row.n}",
            _fmt(row.rate),
            f"[{_fmt(row.ci_low)}, {_fmt(row.ci_high)}]",
        ]
        for row in doc.rates
    ]
    columns = [Col("arm", key=True), Col("model"), Col("effort"), Col("outcome", key=True)]
    columns += [Col(n, right=True, droppable=False) for n in ("k/n", "rate", "95% CI")]
    title = f"rates ({doc.final} final runs, {doc.adjudicated} adjudicated)"
    lines = render_table(columns, rows, width=width, title=title)
    if doc.kappa:
        agreement = [
            [f"{k.rater_a} / {k.rater_b}", k.outcome, str(k.n), _fmt(k.agreement), _fmt(k.kappa)]
            for k in doc.kappa
        ]
        kappa_columns = [Col("raters", key=True), Col("outcome", key=True)]
        kappa_columns += [Col(n, right=True, droppable=False) for n in ("n", "agreement", "kappa")]
        lines += ["", *render_table(kappa_columns, agreement, width=width, title="rater agreement")]
    lines.append(f"blinding leaks: {doc.blinding_leaks}; withheld at export: {doc.withheld}")
    for item in doc.excluded:
        lines += fit_line(
            f"excluded {item.run_id} ({item.arm}, {item.model}, {item.effort or 'default'}): "
            f"{item.reason}: {item.detail}",
            width,
        )
    print_lines(lines)
    if doc.pending:
        note(f"pending adjudication: {', '.join(doc.pending)}")
    if doc.unrated:
        note(f"unrated: {', '.join(doc.unrated)}")
    return EXIT_OK
