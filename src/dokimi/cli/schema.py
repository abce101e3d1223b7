"""``dokimi schema NAME``: print the JSON Schema of a document; ``--list`` lists the names."""

from __future__ import annotations

import sys

import click

from dokimi.cli._common import echo
from dokimi.constants import EXIT_OK, EXIT_USAGE


@click.command("schema")
@click.argument("name", required=False)
@click.option("--list", "list_names", is_flag=True, help="List the document names and their schema files.")
def schema(name: str | None, list_names: bool) -> int:
    """Print the JSON Schema of document NAME (sorted keys, indent 2).

    NAME is a registry name (repo_grade.v1, task.json, events.jsonl, ...) or its schema file's stem (task,
    events). The same text is committed under schemas/<stem>.schema.json."""
    # here, not at the top: a command's --help loads no library code (bench/bench_cli_start.py)
    from dokimi.schemas import SCHEMAS
    from dokimi.schemas.export import resolve_name, schema_file_name, schema_text

    if list_names:
        width = max(len(known) for known in SCHEMAS)
        for known in SCHEMAS:
            echo(f"{known:<{width}}  schemas/{schema_file_name(known)}")
        return EXIT_OK
    if name is None:
        echo("error: give a document NAME or --list; known: " + ", ".join(SCHEMAS), err=True)
        return EXIT_USAGE
    resolved = resolve_name(name)
    if resolved is None:
        echo(f"error: unknown document {name!r}; known: " + ", ".join(SCHEMAS), err=True)
        return EXIT_USAGE
    module_name = SCHEMAS[resolved].split(":")[0]
    try:
        text = schema_text(resolved)
    except ModuleNotFoundError as exc:
        if exc.name != module_name:
            raise
        echo(f"error: {resolved}: its model ({module_name}) is not built yet", err=True)
        return EXIT_USAGE
    sys.stdout.write(text)
    return EXIT_OK
