"""The ``dokimi`` click application: assembles the command groups, nothing else (the entry point, with its
exit codes, is dokimi.cli.main).

Commands are listed in tables (name -> "module:attribute", short help) and imported only when invoked, so that
``dokimi --help`` and ``dokimi --version`` stay fast. A command whose module is not built yet says so and
exits 2.
"""

from __future__ import annotations

import copy
import importlib
import importlib.util
from typing import Any

import click

from dokimi import __version__
from dokimi.cli._common import echo
from dokimi.cli.groups import SuggestingGroup
from dokimi.constants import EXIT_USAGE

#: Top-level commands: name -> (import path, short help).
TOP_COMMANDS: dict[str, tuple[str, str]] = {
    "repo": ("dokimi.cli.app:repo", "Evaluate agents on a repository (the contract's commands)."),
    "schema": ("dokimi.cli.schema:schema", "Print the JSON Schema of a document (repo_manifest.v1, ...)."),
    "doctor": (
        "dokimi.cli.doctor:doctor",
        "Check docker, git, harness CLIs and images, with the fix for each.",
    ),
    "mock-model": ("dokimi.cli.mockmodel:mock_model", "A scripted model server for zero-cost dry runs."),
    "setup": ("dokimi.cli.setup:setup", "Start the docker daemon and build the base image, offline."),
    "ci": ("dokimi.cli.ci:ci", "dokimi in pull requests: the GitHub Action's scan and pilot A/B."),
}

#: ``dokimi repo`` commands, in the order of the contract.
REPO_COMMANDS: dict[str, tuple[str, str]] = {
    "init": ("dokimi.cli.init:init", "Start evaluating a repository: a manifest and a Dockerfile to edit."),
    "task": ("dokimi.cli.task:task", "Make a task from a fix commit or a merged pull request."),
    "validate": ("dokimi.cli.validate:validate", "Validate the manifest and every task against a snapshot."),
    "fetch": ("dokimi.cli.fetch:fetch", "Clone or update a bare, blob-less cache of <url>@<rev>."),
    "scan": (
        "dokimi.cli.scan:scan",
        "L0: check every mechanically checkable claim in the guidance, offline.",
    ),
    "reach": ("dokimi.cli.reach:reach", "Probe which guidance files a harness really loads."),
    "tasks": ("dokimi.cli.tasks:tasks", "Task self-check: null fails, oracle passes (no LLM)."),
    "run": ("dokimi.cli.run:run", "Run agents: one cell per (task, arm, model, effort, rep)."),
    "report": (
        "dokimi.cli.report:report",
        "Pass rates with Wilson intervals per (task, arm, model, effort).",
    ),
    "compare": ("dokimi.cli.compare:compare", "Compare arms with paired, task-level statistics."),
    "plan": ("dokimi.cli.plan:plan", "Tasks x reps for 80% power, simulated on a pilot batch."),
    "study": ("dokimi.cli.study:study", "A guidance study from one file: run it, then one report."),
    "regrade": ("dokimi.cli.regrade:regrade", "Regrade a sample of finished cells and flag every mismatch."),
    "rubric": ("dokimi.cli.rubric:rubric", "Mergeability rubrics: draft, approve, calibrate the judge."),
    "rules": ("dokimi.cli.rules:rules", "Team review rules: mine review comments, triage, evaluate."),
    "rate": ("dokimi.cli.rate:rate", "Human scoring of blinded artifacts, with adjudication."),
    "perf": ("dokimi.cli.perf:perf", "Performance check of a finished cell against its oracle."),
    "export": ("dokimi.cli.export:export", "Write a batch as Inspect AI eval logs, for inspect view."),
}


_CHECKED: set[click.Command] = set()
"""Commands whose options already refuse empty values (:func:`refuse_empty_values`)."""


def _not_built(name: str, short: str) -> click.Command:
    def callback(**_: Any) -> int:
        echo(f"dokimi: `{name}` is not implemented yet in dokimi {__version__}.", err=True)
        return EXIT_USAGE

    return click.Command(
        name,
        callback=callback,
        help=f"{short}\n\nNot implemented yet: exits 2.",
        short_help=f"{short} (not implemented yet)",
        context_settings={"ignore_unknown_options": True, "allow_extra_args": True},
        params=[click.Argument(["args"], nargs=-1, type=click.UNPROCESSED)],
    )


def _built(target: str) -> bool:
    """Whether the module of ``target`` ("module:attribute") exists."""
    module_name = target.split(":")[0]
    return module_name == __name__ or importlib.util.find_spec(module_name) is not None


_REFUSING_EMPTY: dict[type[Any], type[Any]] = {}


def _refusing_empty(kind: type[Any]) -> type[Any]:
    """``kind`` (a text or path type) made to refuse a value with nothing in it but blanks and commas
    (:func:`dokimi.schemas._base.not_blank`, the rule run and study files follow too)."""
    if kind not in _REFUSING_EMPTY:

        def convert(self: Any, value: Any, param: click.Parameter | None, ctx: click.Context | None) -> Any:
            # here, not at the top: a command's --help loads no library code (bench/bench_cli_start.py)
            from dokimi.schemas._base import not_blank

            if isinstance(value, str):
                try:
                    not_blank(value)
                except ValueError as exc:
                    self.fail(str(exc), param, ctx)
            return kind.convert(self, value, param, ctx)

        _REFUSING_EMPTY[kind] = type(f"NonEmpty{kind.__name__}", (kind,), {"convert": convert})
    return _REFUSING_EMPTY[kind]


def refuse_empty_values(command: click.Command) -> click.Command:
    """Every text or path option and argument of ``command`` (and of its subcommands) refuses an empty
    value, one that is only blanks or commas: a list option would otherwise read ``--task ''`` as no filter
    (every task runs), ``--effort ''`` would mean the default, ``--out ''`` the working directory."""
    for param in command.params:
        if isinstance(param.type, (click.types.StringParamType, click.Path)) and not getattr(
            param, "is_flag", False
        ):
            refusing: Any = copy.copy(param.type)
            refusing.__class__ = _refusing_empty(type(param.type))
            param.type = refusing
    if isinstance(command, click.Group):
        for sub in command.commands.values():
            refuse_empty_values(sub)
    return command


class LazyGroup(SuggestingGroup):
    """A group whose commands are imported on first use."""

    def __init__(self, *args: Any, lazy: dict[str, tuple[str, str]], **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.lazy = lazy

    def list_commands(self, ctx: click.Context) -> list[str]:
        return [*self.lazy, *sorted(super().list_commands(ctx))]

    def get_command(self, ctx: click.Context, cmd_name: str) -> click.Command | None:
        if cmd_name not in self.lazy:
            return super().get_command(ctx, cmd_name)
        target, short = self.lazy[cmd_name]
        module_name, attr = target.split(":")
        if module_name == __name__:
            return globals()[attr]  # type: ignore[no-any-return]
        try:
            module = importlib.import_module(module_name)
        except ModuleNotFoundError as exc:
            if exc.name != module_name:
                raise
            return _not_built(cmd_name, short)
        command = getattr(module, attr)
        assert isinstance(command, click.Command)
        if command not in _CHECKED:
            _CHECKED.add(command)
            refuse_empty_values(command)
        return command

    def format_commands(self, ctx: click.Context, formatter: click.HelpFormatter) -> None:
        # Short help comes from the table, so listing commands imports none of them; a command whose module
        # does not exist yet says so here too (find_spec locates a module without importing it).
        rows = [
            (name, short if _built(target) else f"{short} (not implemented yet)")
            for name, (target, short) in self.lazy.items()
        ]
        if rows:
            with formatter.section("Commands"):
                formatter.write_dl(rows)


@click.group(
    cls=LazyGroup,
    lazy=TOP_COMMANDS,
    context_settings={"help_option_names": ["-h", "--help"]},
)
@click.version_option(__version__, "--version", prog_name="dokimi")
def cli() -> None:
    """dokimi: measure coding agents on real repositories, and whether the guidance helps them."""


@click.group(cls=LazyGroup, lazy=REPO_COMMANDS)
def repo() -> None:
    """Evaluate agents on a repository: validate, scan, reach, tasks check, run, report, compare.

    SOURCE is <dir> (a working tree), <dir>@<rev> or <url>@<rev> everywhere a command takes one.
    """
