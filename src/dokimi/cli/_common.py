"""Options and output helpers shared by the commands. The only place a shared option is spelled, and the only
way a command prints: :func:`echo` and :func:`note` for lines, :func:`emit_json` for documents,
:func:`print_above` over a progress bar (and ``dokimi.cli.tables.print_lines`` for tables). Each shows the
control characters of what it prints as escapes (:func:`dokimi.controls.escape_controls`): a commit message, a
file name, a grader's reason or an agent's output is text dokimi did not write, and a terminal would obey the
escape sequences it holds (a title, a clipboard write, a cleared screen). tests/architecture checks that no
command prints another way."""

from __future__ import annotations

import json
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any, Self, TypeVar

import click

F = TypeVar("F", bound=Callable[..., Any])


def source_argument(func: F) -> F:
    return click.argument("source", metavar="SOURCE")(func)


def manifest_options(func: F) -> F:
    """``--manifest PATH`` (inside the source) or ``--manifest-file PATH`` (on the host), not both."""
    func = click.option(
        "--manifest-file",
        "manifest_file",
        type=click.Path(dir_okay=False, path_type=Path),
        help="Read the manifest from this local file instead of the source tree.",
    )(func)
    func = click.option(
        "--manifest",
        "manifest",
        metavar="PATH",
        help="Path of repo-eval.yaml inside the source, relative to the repository root.",
    )(func)
    return func


def working_tree_options(func: F) -> F:
    """``-C/--repo DIR`` (a working tree with the manifest, default ``.``) and ``--manifest PATH`` inside it:
    the commands that write into the repository (repo task new, repo rules)."""
    func = click.option(
        "--manifest", "manifest", metavar="PATH", help="Path of repo-eval.yaml inside the repository."
    )(func)
    return click.option(
        "-C",
        "--repo",
        "repo_dir",
        type=click.Path(file_okay=False, exists=True, path_type=Path),
        default=Path("."),
        show_default=True,
        help="The repository (a working tree with the manifest).",
    )(func)


def json_option(func: F) -> F:
    return click.option("--json", "as_json", is_flag=True, help="Print the result as JSON on stdout.")(func)


def rubrics_option(func: F) -> F:
    """``--rubrics DIR``: held-out rubrics (``repo run``, ``repo tasks check``, ``repo rubric check``)."""
    return click.option(
        "--rubrics",
        "rubrics_dir",
        type=click.Path(file_okay=False, path_type=Path),
        metavar="DIR",
        help="Held-out rubrics from a private path outside the repository: DIR/<task-id>/rubric.json, with "
        "the calibration diffs it names (docs/mergeability.md).",
    )(func)


def run_file_option(help_text: str) -> Callable[[F], F]:
    """``-c/--config FILE``: a run file (repo_run_file.v1), read by ``repo run`` and ``repo tasks check``."""
    return click.option(
        "-c",
        "--config",
        "run_file",
        type=click.Path(dir_okay=False, path_type=Path),
        metavar="FILE",
        help=help_text,
    )


def out_option(default: str | None = None) -> Callable[[F], F]:
    def deco(func: F) -> F:
        return click.option(
            "--out",
            "out",
            type=click.Path(path_type=Path),
            default=default,
            show_default=default is not None,
            help="Where to write the output.",
        )(func)

    return deco


def check_manifest_choice(manifest: str | None, manifest_file: Path | None) -> None:
    if manifest and manifest_file:
        raise click.UsageError("give --manifest or --manifest-file, not both")


def emit_json(document: Any) -> None:
    """Print a document as sorted, indented JSON (deterministic output; control characters as escapes)."""
    # here, not at the top: a command's --help loads no library code (bench/bench_cli_start.py)
    from dokimi.controls import json_safe

    if hasattr(document, "model_dump"):
        document = document.model_dump(mode="json", by_alias=True, exclude_none=False)
    sys.stdout.write(json_safe(json.dumps(document, indent=2, sort_keys=True, ensure_ascii=False)) + "\n")


def shown(text: object) -> str:
    """``text`` as a command prints it: control characters (and names that are not UTF-8) as escapes."""
    # here, not at the top: a command's --help loads no library code (bench/bench_cli_start.py)
    from dokimi.controls import escape_controls

    return escape_controls(str(text))


def echo(text: object = "", *, err: bool = False, nl: bool = True) -> None:
    """Print ``text`` on stdout (stderr with ``err``), its control characters shown as escapes."""
    click.echo(shown(text), err=err, nl=nl)


def print_above(console: Any, text: object) -> None:
    """A line printed through a rich console (above a progress bar): escaped, and never read as markup
    (``[link=...]``, ``[bold]`` in a grader's reason stay text)."""
    console.print(shown(text), markup=False, highlight=False, emoji=False)


def stderr_console() -> Any:
    """A rich console on stderr (progress, tables for humans). Imported lazily: rich is not free to import."""
    # here, not at the top: a command's --help loads no library code (bench/bench_cli_start.py)
    from rich.console import Console

    return Console(stderr=True, highlight=False)


def progress_bar() -> Any:
    """The progress bar of long commands (tasks check, run): description, bar, done/total, elapsed; on
    stderr, removed when done. Callers create it only when stderr is a terminal."""
    # here, not at the top: a command's --help loads no library code (bench/bench_cli_start.py)
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

    return Progress(
        TextColumn("{task.description}", markup=False),  # a description may name a task: text, not markup
        BarColumn(),
        MofNCompleteColumn(),
        TimeElapsedColumn(),
        console=stderr_console(),
        transient=True,
    )


class LiveBar:
    """The progress bar of a long command, shown while the command runs when ``live`` (stderr is a terminal)
    and absent otherwise: ``bar`` is None then, and each subclass says what its steps show."""

    def __init__(self, live: bool) -> None:
        self.live = live
        self.bar: Any = None

    def __enter__(self) -> Self:
        if self.live:
            self.bar = progress_bar()
            self.bar.start()
        return self

    def __exit__(self, *exc: object) -> None:
        if self.bar is not None:
            self.bar.stop()

    def above_or_note(self, text: str) -> None:
        """``text`` above the bar, or as a note on stderr when there is none."""
        if self.bar is not None:
            print_above(self.bar.console, text)
        else:
            note(text)


def deliver_document(
    doc: Any,
    *,
    as_json: bool,
    html_file: Path | None,
    render_html: Callable[[Any], str],
    print_text: Callable[[Any], None],
) -> int:
    """The output of a command that builds one document (report, compare): the HTML page when asked, then
    the document as JSON or as text, then its warnings on stderr."""
    if html_file is not None:
        # here, not at the top: a command's --help loads no library code (bench/bench_cli_start.py)
        from dokimi.schemas._base import write_output

        write_output(html_file, render_html(doc))
        note(f"wrote {html_file}")
    if as_json:
        emit_json(doc)
        return 0
    print_text(doc)
    for warning in doc.warnings:
        note(f"warning: {warning.code}: {warning.message}")
    return 0


def note(message: str) -> None:
    """One line for the human on stderr."""
    echo(message, err=True)


class FiniteFloat(click.FloatRange):
    """A FloatRange that refuses NaN and infinity (``--timeout nan`` passes a plain FloatRange, since every
    comparison with NaN is false, and would switch the timeout off)."""

    name = "finite number"

    def convert(self, value: Any, param: click.Parameter | None, ctx: click.Context | None) -> Any:
        # here, not at the top: a command's --help loads no library code (bench/bench_cli_start.py)
        import math

        number = super().convert(value, param, ctx)
        if isinstance(number, float) and not math.isfinite(number):
            self.fail(f"{value!r} is not a finite number", param, ctx)
        return number


def parse_resolve(values: tuple[str, ...]) -> dict[str, str]:
    """``--egress-resolve HOST=ADDRESS`` (repeatable): host name (lower-cased) -> IP address."""
    # here, not at the top: a command's --help loads no library code (bench/bench_cli_start.py)
    import ipaddress

    out: dict[str, str] = {}
    for value in values:
        host, sep, address = value.partition("=")
        try:
            ipaddress.ip_address(address)
        except ValueError:
            raise click.BadParameter(
                f"{value!r}: expected HOST=ADDRESS with an IP address", param_hint="--egress-resolve"
            ) from None
        if not sep or not host:
            raise click.BadParameter(f"{value!r}: expected HOST=ADDRESS", param_hint="--egress-resolve")
        out[host.lower()] = address
    return out
