"""``dokimi repo init [DIR]``: the manifest and the Dockerfile of a new evaluation (dokimi.repo.scaffold), and
the next three commands.

Exit codes: 0 written; 2 a file already exists (nothing is written) or DIR is not a directory.
"""

from __future__ import annotations

from pathlib import Path

import click

from dokimi.cli._common import echo, emit_json, json_option
from dokimi.constants import DEFAULT_EVAL_DIR, EXIT_OK


@click.command("init")
@click.argument("directory", metavar="[DIR]", default=".", type=click.Path(path_type=Path))
@click.option(
    "--eval-dir",
    default=DEFAULT_EVAL_DIR,
    show_default=True,
    metavar="PATH",
    help="The evaluation directory, relative to DIR (hidden from every agent).",
)
@click.option(
    "--grade",
    metavar="BUILTIN",
    help="The grade entry point (default: builtin:pytest for a pytest project, else "
    "builtin:command make test).",
)
@json_option
def init(directory: Path, eval_dir: str, grade: str | None, as_json: bool) -> int:
    """Start evaluating the repository in DIR: write a commented manifest (with its $schema line), a
    Dockerfile template that lists what the image must hold, and an empty tasks directory, then print the
    next three commands. Never overwrites a file."""
    # here, not at the top: a command's --help loads no library code (bench/bench_cli_start.py)
    from dokimi.repo.scaffold import init_repo

    result = init_repo(directory, eval_dir=eval_dir, grade=grade)
    if as_json:
        # here, not at the top: a command's --help loads no library code (bench/bench_cli_start.py)
        from dokimi.schemas.init import InitReport

        emit_json(
            InitReport(
                written=[str(p) for p in result.written], grade=result.grade, next=result.next_commands
            )
        )
        return EXIT_OK
    for path in result.written:
        echo(f"wrote {path}")
    echo(f"grade: {result.grade}")
    echo("next:")
    for command in result.next_commands:
        echo(f"  {command}")
    return EXIT_OK
