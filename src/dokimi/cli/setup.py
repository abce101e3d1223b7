"""``dokimi setup``: prepare this machine (docker daemon, offline base image) with the script the package
carries. Thin: runs dokimi/setup/base_image.sh and passes its exit code on."""

from __future__ import annotations

import click

from dokimi.cli._common import echo, note
from dokimi.constants import EXIT_FOUND_PROBLEMS, EXIT_OK
from dokimi.process import Bounds, run


@click.command("setup")
def setup() -> int:
    """Start the docker daemon if none answers and build the base image offline from the Debian mirror named
    in the machine's apt sources (about a minute the first time, about a second when it is there).
    Idempotent. Needs root or sudo for the daemon and debootstrap."""
    # here, not at the top: a command's --help loads no library code (bench/bench_cli_start.py)
    from dokimi.setup import script_path

    note(f"running {script_path()} (about a minute when the base image is built)")
    completed = run(["bash", str(script_path())], timeout=1800, bounds=Bounds(max_output=1 << 20))
    echo(completed.stdout, nl=False)
    echo(completed.stderr, nl=False, err=True)
    if completed.returncode != 0:
        note("setup failed: the lines above say which step")
        return EXIT_FOUND_PROBLEMS
    return EXIT_OK
