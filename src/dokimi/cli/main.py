"""The ``dokimi`` command's entry point: the exit codes of every command, and the lean path of ``repo scan``.

``dokimi repo scan`` with its usual arguments is what pre-commit runs on every commit: it goes straight to the
scan (dokimi.cli.scan_lean), without importing click or the command tables. Everything else, and ``repo scan``
with anything unusual (--help, an error in its arguments), goes to the click application (dokimi.cli.app).
"""

from __future__ import annotations

import sys
from collections.abc import Sequence

from dokimi import __version__
from dokimi.constants import EXIT_BUG, EXIT_INTERRUPTED, EXIT_OK, EXIT_USAGE


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point: returns the exit code (0 fine, 1 found problems, 2 usage/environment, 3 bug, 130
    Ctrl-C)."""
    try:
        # inside the try: a Ctrl-C while they load ends with 130, never a traceback (every command loads them)
        from dokimi.errors import DokimiError
        from dokimi.process import Terminated, exit_with_signal, install_signal_handlers

        install_signal_handlers()
    except KeyboardInterrupt:  # Ctrl-C before the handlers are in place: no traceback either
        return EXIT_INTERRUPTED
    args = list(argv) if argv is not None else sys.argv[1:]
    never_fail_to_encode()
    try:
        return run_command(args)
    except DokimiError as exc:
        say(f"error: {exc}")
        return EXIT_USAGE
    except KeyboardInterrupt:
        say("interrupted")
        return EXIT_INTERRUPTED
    except Terminated as exc:
        exit_with_signal(exc.signum)
        return 128 + exc.signum
    except BrokenPipeError:
        return EXIT_OK
    except Exception:  # a bug in dokimi: keep the traceback, never look like "found problems"
        import traceback  # only here: it costs every start a few ms (textwrap, linecache, tokenize)

        traceback.print_exc()
        say(
            f"dokimi {__version__}, Python {sys.version.split()[0]}: this is a bug in dokimi; "
            "please report it with the traceback above."
        )
        return EXIT_BUG


def never_fail_to_encode() -> None:
    """stdout and stderr write what they cannot encode as a backslash escape: a name that is not UTF-8 (read
    from a directory an agent named) must never end a command with UnicodeEncodeError."""
    for stream in (sys.stdout, sys.stderr):
        reconfigure = getattr(stream, "reconfigure", None)
        if reconfigure is not None:
            try:
                reconfigure(errors="backslashreplace")
            except (ValueError, OSError):  # a stream already closed, or one that cannot change
                pass


def run_command(args: list[str]) -> int:
    """The lean ``repo scan`` when its arguments are the usual ones, else the click application."""
    # here, not at the top: a command's --help loads no library code (bench/bench_cli_start.py)
    from dokimi.cli.scan_lean import lean_scan_arguments, run_scan

    lean = lean_scan_arguments(args)
    if lean is None:
        return run_click(args)
    try:
        return run_scan(**lean)
    except (EOFError, KeyboardInterrupt):  # what click does with them: a new line, then exit 130
        say("")
        return EXIT_INTERRUPTED


def run_click(args: list[str]) -> int:
    # here, not at the top: a command's --help loads no library code (bench/bench_cli_start.py)
    import click

    from dokimi.cli.app import cli

    try:
        rv = cli.main(args=args, prog_name="dokimi", standalone_mode=False)
    except click.exceptions.Exit as exc:
        return int(exc.exit_code)
    except click.exceptions.Abort:
        return EXIT_INTERRUPTED
    except click.ClickException as exc:
        exc.show()
        return EXIT_USAGE
    if isinstance(rv, int):
        return rv
    return EXIT_OK


def say(message: str) -> None:
    """One line on stderr (what ``click.echo(message, err=True)`` writes), control characters escaped: an
    error names a path or quotes a document dokimi did not write."""
    # here, not at the top: a command's --help loads no library code (bench/bench_cli_start.py)
    from dokimi.controls import escape_controls

    sys.stderr.write(escape_controls(message) + "\n")
    sys.stderr.flush()


if __name__ == "__main__":
    sys.exit(main())
