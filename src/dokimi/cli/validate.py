"""``dokimi repo validate SOURCE --manifest PATH | --manifest-file PATH [--strict] [--json]``
(docs/validate.md).

Exit codes: 0 valid (warnings allowed), 1 invalid, 2 could not run (unreadable source, no manifest, a manifest
that is not a YAML mapping).
"""

from __future__ import annotations

from pathlib import Path

import click

from dokimi.cli._common import (
    check_manifest_choice,
    echo,
    emit_json,
    json_option,
    manifest_options,
    source_argument,
)
from dokimi.constants import EXIT_FOUND_PROBLEMS, EXIT_OK


@click.command("validate")
@source_argument
@manifest_options
@click.option(
    "--strict",
    is_flag=True,
    help="Every warning is an error (exit 1): a task.json key that spells like a framework key, a glob that "
    "matches nothing, ...",
)
@json_option
def validate(
    source: str, manifest: str | None, manifest_file: Path | None, strict: bool, as_json: bool
) -> int:
    """Validate the manifest and every task.json against SOURCE (<dir>, <dir>@<rev> or <url>@<rev>).

    Every task base must resolve in the source, and the guidance globs are evaluated at each base. One line
    per finding, then a summary; --json prints a repo_validation.v1 document. Exit 0 valid (warnings allowed,
    unless --strict), 1 invalid, 2 could not run.
    """
    # here, not at the top: a command's --help loads no library code (bench/bench_cli_start.py)
    from dokimi.checks.validate import validate_repo
    from dokimi.source import open_source

    check_manifest_choice(manifest, manifest_file)
    with open_source(source) as repo:
        report = validate_repo(repo, manifest=manifest, manifest_file=manifest_file, strict=strict)
    if as_json:
        emit_json(report)
    else:
        for finding in [*report.errors, *report.warnings]:
            echo(finding.text())
        verdict = "valid" if report.valid else "invalid"
        kind = (
            "guidance-only manifest"
            if report.guidance_only
            else f"{report.tasks} tasks over {report.bases} bases"
        )
        echo(
            f"{verdict}: {report.manifest}: {len(report.errors)} error(s), "
            f"{len(report.warnings)} warning(s); "
            f"{kind}; {report.guidance_files} guidance file(s)"
        )
    return EXIT_OK if report.valid else EXIT_FOUND_PROBLEMS
