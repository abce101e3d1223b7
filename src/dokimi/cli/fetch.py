"""``dokimi repo fetch <url>@<rev>``: clone or update the cached bare, blob-less clone."""

from __future__ import annotations

from pathlib import Path

import click

from dokimi.cli._common import echo, emit_json, json_option
from dokimi.constants import EXIT_OK
from dokimi.errors import UsageError


@click.command("fetch")
@click.argument("source", metavar="URL@REV")
@click.option(
    "--cache-dir",
    type=click.Path(file_okay=False, path_type=Path),
    help="Cache directory (default: DOKIMI_HOME, else $XDG_CACHE_HOME/dokimi, else ~/.cache/dokimi).",
)
@json_option
def fetch(source: str, cache_dir: Path | None, as_json: bool) -> int:
    """Clone URL into the cache as a bare, blob-less repository (or update it) and resolve REV.

    Git never prompts: set up a credential helper (https) or ssh-agent and known_hosts (ssh) first.
    """
    # fetch imports hashlib and tempfile, which a scan of a working tree never needs
    from dokimi.source import parse_source
    from dokimi.source.fetch import ensure_clone

    spec = parse_source(source)
    if spec.kind != "url_rev":
        raise UsageError(f"{source}: repo fetch takes <url>@<rev>", hint="a local directory needs no fetch")
    assert spec.url is not None and spec.rev is not None
    clone = ensure_clone(spec.url, spec.rev, cache_dir=cache_dir)
    if as_json:
        emit_json(
            {
                "url": clone.url,
                "rev": spec.rev,
                "sha": clone.sha,
                "git_dir": str(clone.git_dir),
                "fetched": clone.fetched,
            }
        )
    else:
        echo(f"{clone.sha}  {clone.git_dir}")
    return EXIT_OK
