"""``dokimi repo scan`` without click: the usual arguments read here, and the scan's work and output.

The scan is what pre-commit runs on every commit, a new process each time, so its start-up is most of its
time. :func:`lean_scan_arguments` reads the usual arguments (one SOURCE and the scan's options, each value
option at most once, every value well formed); anything else (--help, -h, --static, --run-static, an unknown
option, a missing SOURCE, a value click would refuse) returns None, and the click command
(dokimi.cli.scan) reads the arguments instead, with its messages and exit codes. Both end in
:func:`run_scan`, so the output is the same either way.
"""

from __future__ import annotations

import os
import stat
import sys
from pathlib import Path
from typing import Any

from dokimi.constants import EXIT_FOUND_PROBLEMS, EXIT_OK

#: Flags of `repo scan` -> keyword of run_scan.
FLAGS = {"--json": "as_json", "--all": "show_all", "--fail-on-fail": "fail_on_fail"}
#: Options with a value -> keyword of run_scan.
VALUED = {"--manifest": "manifest", "--manifest-file": "manifest_file", "--out": "out", "--format": "fmt"}
#: Options whose value click reads as a file path that may be missing but must not be a directory.
FILE_PATHS = ("manifest_file", "out")
FORMATS = ("text", "json", "sarif")


def lean_scan_arguments(args: list[str]) -> dict[str, Any] | None:
    """The keywords of :func:`run_scan` for ``repo scan SOURCE [options]``, or None when click must read the
    arguments (anything but the usual: see the module's docstring)."""
    if len(args) < 3 or args[0] != "repo" or args[1] != "scan":
        return None
    found: dict[str, Any] = {"source": None, "manifest": None, "manifest_file": None, "out": None}
    found.update({"fmt": None, "as_json": False, "show_all": False, "fail_on_fail": False})
    seen: set[str] = set()
    rest = args[2:]
    at = 0
    while at < len(rest):
        arg = rest[at]
        at += 1
        if arg in FLAGS:
            found[FLAGS[arg]] = True
            continue
        name, equals, value = arg.partition("=")
        if name in VALUED:
            if name in seen:
                return None
            seen.add(name)
            if not equals:
                if at == len(rest):
                    return None
                value = rest[at]
                at += 1
            if not value or value.startswith("-"):
                return None
            found[VALUED[name]] = value
            continue
        if not arg or arg.startswith("-") or found["source"] is not None:
            return None
        found["source"] = arg
    if found["source"] is None or (found["manifest"] and found["manifest_file"]):
        return None
    if found["fmt"] is not None and found["fmt"] not in FORMATS:
        return None
    if found["as_json"] and found["fmt"] not in (None, "json"):
        return None
    for key in FILE_PATHS:
        if found[key] is not None:
            if not plain_file_path(found[key]):
                return None
            found[key] = Path(found[key])
    found["fmt"] = "json" if found.pop("as_json") else (found["fmt"] or "text")
    found["static_path"] = None
    return found


def plain_file_path(value: str) -> bool:
    """Whether click's ``Path(dir_okay=False)`` takes ``value`` as it is: missing, or readable and not a
    directory."""
    try:
        mode = os.stat(value).st_mode
    except OSError:
        return True
    return not stat.S_ISDIR(mode) and os.access(value, os.R_OK)


def run_scan(
    *,
    source: str,
    manifest: str | None,
    manifest_file: Path | None,
    static_path: Path | None,
    out: Path | None,
    fmt: str,
    show_all: bool,
    fail_on_fail: bool,
    run_timeout_s: float | None = None,
) -> int:
    """Scan, write the document when asked (--out, --json, a --static merge), print the text or SARIF, and
    return the exit code. ``run_timeout_s``: ``--run``, each command of the guidance run in the image with
    that timeout (dokimi.runner.scan_run)."""
    start_listing(source)
    # here, not at the top: a command's --help loads no library code (bench/bench_cli_start.py)
    from dokimi.checks.scan import render_text, scan_result, to_sarif, view_of_document, view_of_result
    from dokimi.checks.scan.report import summary_line, use_color

    scanned = scan_result(source, manifest=manifest, manifest_file=manifest_file, cache_items=True)
    if scanned.defaulted:
        note(f"no manifest: scanning the default guidance globs {', '.join(scanned.globs)}")
    if run_timeout_s is not None:
        # here, not at the top: a command's --help loads no library code (bench/bench_cli_start.py)
        from dokimi.checks.scan.engine import guidance_commands
        from dokimi.runner.scan_run import run_guidance_commands

        commands = guidance_commands(scanned.result.items)
        note(f"run: {len(commands)} command{'s' if len(commands) != 1 else ''} of the guidance, offline")
        ran = run_guidance_commands(
            source,
            commands,
            manifest=manifest,
            manifest_file=manifest_file,
            timeout_s=run_timeout_s,
            progress=note,
        )
        scanned.result.add_claims(ran)
    invalid_static = False
    if static_path is None and out is None and fmt != "json":
        # the text and SARIF outputs need no document: no pydantic models to build (a fast pre-commit hook)
        view = view_of_result(scanned.result)
    else:
        # here, not at the top: a command's --help loads no library code (bench/bench_cli_start.py)
        from dokimi.checks.scan import merge_static, static_not_merged
        from dokimi.schemas._base import dump_document, write_output

        document = scanned.document()
        if static_path is not None:
            # here, not at the top: a command's --help loads no library code (bench/bench_cli_start.py)
            from dokimi.errors import DocumentError
            from dokimi.schemas._base import read_document
            from dokimi.schemas.static import RepoStatic

            try:
                static_doc = read_document(static_path, RepoStatic)
            except DocumentError as exc:
                invalid_static = True
                document = static_not_merged(document, path=str(static_path), error=str(exc))
            else:
                document = merge_static(document, static_doc, path=str(static_path))
        if out is not None:
            write_output(out, dump_document(document))
        if fmt == "json":
            sys.stdout.write(dump_document(document))
        view = view_of_document(document)
    if fmt == "sarif":
        # here, not at the top: a command's --help loads no library code (bench/bench_cli_start.py)
        import json

        sys.stdout.write(json.dumps(to_sarif(view), indent=2, sort_keys=True) + "\n")
    elif fmt == "text":
        sys.stdout.write(render_text(view, show_all=show_all, color=use_color(sys.stdout)))
    if fmt != "text":
        note(summary_line(view))
    if invalid_static:
        return EXIT_FOUND_PROBLEMS
    if fail_on_fail and not view.gate_passed:
        return EXIT_FOUND_PROBLEMS
    return EXIT_OK


def start_listing(source: str) -> None:
    """For a working-tree SOURCE (what pre-commit runs: ``repo scan .``), start git's listing of it before
    the scan's modules are imported, so git runs while Python imports them (dokimi.source.git.start_ahead).
    The scan then collects what it asks for; anything else is the usual way."""
    path = Path(source)
    if path.is_dir():
        # here, not at the top: a command's --help loads no library code (bench/bench_cli_start.py)
        from dokimi.source.git import start_worktree_listing

        start_worktree_listing(path.resolve())


def note(message: str) -> None:
    """One line for the human on stderr (what dokimi.cli._common.note writes, without importing click)."""
    # here, not at the top: a command's --help loads no library code (bench/bench_cli_start.py)
    from dokimi.controls import escape_controls

    sys.stderr.write(escape_controls(message) + "\n")
    sys.stderr.flush()
