"""``dokimi mock-model serve``: the scripted model server, for zero-cost dry runs of a harness setup."""

from __future__ import annotations

import threading
from pathlib import Path

import click

from dokimi.cli._common import echo
from dokimi.cli.groups import SuggestingGroup
from dokimi.constants import EXIT_OK
from dokimi.errors import DocumentError, PrerequisiteError


@click.group("mock-model", cls=SuggestingGroup)
def mock_model() -> None:
    """A scripted Anthropic Messages API server on loopback (docs/mock-model.md)."""


@mock_model.command("serve")
@click.option(
    "--script",
    "script",
    required=True,
    type=click.Path(exists=True, dir_okay=False, path_type=Path),
    help="JSON (or YAML) list of turns to play.",
)
@click.option(
    "--port", type=click.IntRange(0, 65535), default=0, show_default=True, help="0 picks a free port."
)
@click.option(
    "--capture",
    type=click.Path(dir_okay=False, path_type=Path),
    help="Append one JSON line per request received (path, headers, body).",
)
@click.option(
    "--main-model", help="Only requests for this model play the script; others get a canned answer."
)
def serve(script: Path, port: int, capture: Path | None, main_model: str | None) -> int:
    """Serve SCRIPT until Ctrl-C. Prints the base URL (for ANTHROPIC_BASE_URL) as the first line of stdout."""
    # here, not at the top: a command's --help loads no library code (bench/bench_cli_start.py)
    from dokimi.support.mockmodel import MockModelServer, ScriptError

    try:
        server = MockModelServer(script, capture_path=capture, main_model=main_model, port=port)
    except ScriptError as exc:
        raise DocumentError(str(exc), hint="see docs/mock-model.md for the script format") from exc
    try:
        server.start()
    except OSError as exc:
        raise PrerequisiteError(
            f"cannot listen on 127.0.0.1:{port}: {exc.strerror or exc}",
            hint="pick another --port, or --port 0 for any free one",
        ) from None
    with server:
        echo(server.url)
        echo(
            f"mock-model: serving {server.turns_left} turn(s); run the harness with "
            f"ANTHROPIC_BASE_URL={server.url} ANTHROPIC_API_KEY=dummy",
            err=True,
        )
        threading.Event().wait()  # until Ctrl-C (130) or SIGTERM/SIGHUP (ends with that signal)
    return EXIT_OK
