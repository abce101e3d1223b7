"""``dokimi repo scan``: the L0 scan. Thin: options -> dokimi.checks.scan -> text, JSON or SARIF.

The usual arguments are read without click (dokimi.cli.scan_lean, from the entry point); this command reads
the others: --help, --run-static, --static, and every argument error.
"""

from __future__ import annotations

import contextlib
from pathlib import Path

import click

from dokimi.cli._common import check_manifest_choice, manifest_options, source_argument
from dokimi.cli.scan_lean import run_scan
from dokimi.runner.scan_run import RUN_TIMEOUT_S


@click.command("scan")
@source_argument
@manifest_options
@click.option(
    "--static",
    "static",
    type=click.Path(dir_okay=False, path_type=Path),
    help="Merge a repo_static.v1 document (the repository's own checks).",
)
@click.option(
    "--run-static",
    "run_static",
    is_flag=True,
    help="Run the manifest's static entry point in its image and merge its output like --static.",
)
@click.option(
    "--run",
    "run",
    is_flag=True,
    help="Also run each command of the guidance in the manifest's image, offline, as an agent would (L1).",
)
@click.option(
    "--run-timeout",
    "run_timeout",
    type=click.FloatRange(min=1),
    metavar="SECONDS",
    default=RUN_TIMEOUT_S,
    show_default=True,
    help="With --run: seconds each command may take.",
)
@click.option(
    "--out",
    "out",
    type=click.Path(dir_okay=False, path_type=Path),
    help="Write the repo_readiness.v1 document to this file.",
)
@click.option("--json", "as_json", is_flag=True, help="Print the repo_readiness.v1 document on stdout.")
@click.option(
    "--format",
    "fmt",
    type=click.Choice(["text", "json", "sarif"]),
    default=None,
    help="stdout format: text (default), json (repo_readiness.v1) or sarif (SARIF 2.1.0).",
)
@click.option(
    "--all", "show_all", is_flag=True, help="Text: list ok claims too, not only fail and unresolved."
)
@click.option(
    "--fail-on-fail",
    "fail_on_fail",
    is_flag=True,
    help="Exit 1 on a fail claim, a missing also_scan file, an unreadable guidance file or no guidance.",
)
def scan(
    source: str,
    manifest: str | None,
    manifest_file: Path | None,
    static: Path | None,
    run_static: bool,
    run: bool,
    run_timeout: float,
    out: Path | None,
    as_json: bool,
    fmt: str | None,
    show_all: bool,
    fail_on_fail: bool,
) -> int:
    """Check every mechanically checkable claim in the guidance of SOURCE, offline: links, paths, globs,
    identifiers, commands, and build targets (bazel, make, cmake, pytest, pre-commit). With --run, each
    command of the guidance also runs in the repository's image, offline."""
    check_manifest_choice(manifest, manifest_file)
    if as_json and fmt not in (None, "json"):
        raise click.UsageError("--json prints JSON; it cannot be combined with --format " + str(fmt))
    if static is not None and run_static:
        raise click.UsageError("give --static or --run-static, not both")
    with contextlib.ExitStack() as stack:
        if run_static:
            # here, not at the top: a command's --help loads no library code (bench/bench_cli_start.py)
            import tempfile

            scratch = stack.enter_context(tempfile.TemporaryDirectory(prefix="dokimi-static."))
            static = _run_static(source, manifest, manifest_file, out_dir=Path(scratch), out=out)
        return run_scan(
            source=source,
            manifest=manifest,
            manifest_file=manifest_file,
            static_path=static,
            out=out,
            fmt="json" if as_json else (fmt or "text"),
            show_all=show_all,
            fail_on_fail=fail_on_fail,
            run_timeout_s=run_timeout if run else None,
        )


def _run_static(
    source: str, manifest: str | None, manifest_file: Path | None, *, out_dir: Path, out: Path | None
) -> Path:
    """Run the manifest's static entry point in the image; its document is kept beside --out (as
    ``<out>.static.json``) when one is given, else it lives in ``out_dir``, which the caller removes."""
    # here, not at the top: a command's --help loads no library code (bench/bench_cli_start.py)
    from dokimi.repo.manifest import load_manifest
    from dokimi.runner.static import run_static
    from dokimi.schemas._base import write_output
    from dokimi.source import open_source

    with open_source(source) as repo:
        snapshot = repo.eval_snapshot()
        try:
            loaded = load_manifest(snapshot, manifest=manifest, manifest_file=manifest_file, required=True)
        finally:
            snapshot.close()
        written = Path(run_static(repo, loaded, image=None, out_dir=out_dir))
    if out is None:
        return written
    kept = out.with_name(out.stem + ".static.json")
    write_output(kept, written.read_text(encoding="utf-8"))
    return kept
