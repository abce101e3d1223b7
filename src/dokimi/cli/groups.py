"""The group class of every ``dokimi`` command group: an unknown sub-command is answered with the command the
user most likely meant, searched over the whole command tree (``repo task check`` -> did you mean ``repo tasks
check``?), not only among the group's own commands as click does.

``tests/cli/test_did_you_mean.py`` walks the tree and fails on a group of another class.
"""

from __future__ import annotations

from collections.abc import Iterator

import click

#: How alike two words must be (difflib's ratio) for one to be offered for the other.
CUTOFF = 0.6
MAX_SUGGESTIONS = 3


class SuggestingGroup(click.Group):
    """A click group whose "No such command" names the closest commands of the whole tree."""

    def resolve_command(
        self, ctx: click.Context, args: list[str]
    ) -> tuple[str | None, click.Command | None, list[str]]:
        try:
            return super().resolve_command(ctx, args)
        except click.UsageError as exc:
            name = args[0] if args else ""
            if exc.ctx is not ctx or not name or name.startswith("-") or self.get_command(ctx, name):
                raise
            prefix = _path_of(ctx)
            root = ctx.find_root()
            suggestions = did_you_mean(root.command, root, prefix, name, args[1] if len(args) > 1 else None)
            message = f"no such command `{' '.join([*prefix, name])}`"
            if suggestions:
                message += "; did you mean " + " or ".join(f"`{s}`" for s in suggestions) + "?"
            raise click.UsageError(message, ctx) from None


def _path_of(ctx: click.Context) -> list[str]:
    """The command words typed to reach ``ctx``'s group, without the program's name."""
    words: list[str] = []
    while ctx.parent is not None:
        words.append(ctx.info_name or "")
        ctx = ctx.parent
    return words[::-1]


def command_paths(group: click.Command, ctx: click.Context) -> Iterator[list[str]]:
    """Every command path under ``group`` (groups included), importing lazy commands as it goes."""
    if not isinstance(group, click.Group):
        return
    for name in group.list_commands(ctx):
        command = group.get_command(ctx, name)
        if command is None or getattr(command, "hidden", False):
            continue
        yield [name]
        for tail in command_paths(command, ctx):
            yield [name, *tail]


def _likeness(typed: list[str], path: list[str]) -> float | None:
    """How alike two command paths of the same length are, word by word (None when a word is too far)."""
    # here, not at the top: only a mistyped command pays for difflib (bench/bench_cli_start.py)
    import difflib

    total = 0.0
    for word, candidate in zip(typed, path, strict=True):
        ratio = 1.0 if word == candidate else difflib.SequenceMatcher(None, word, candidate).ratio()
        if ratio < CUTOFF:
            return None
        total += ratio
    return total


def did_you_mean(
    root: click.Command, ctx: click.Context, prefix: list[str], name: str, after: str | None
) -> list[str]:
    """The commands the user most likely meant by ``prefix name [after]`` (``name`` unknown in the group
    ``prefix`` names, ``after`` the word that followed it), best first: the command paths whose every word is
    close to the typed one (``repo task check`` -> ``repo tasks check``; with ``after`` as a sub-command
    first, then as an argument); failing that, the typed words with one group inserted (``repo check`` ->
    ``repo tasks check``)."""
    paths = list(command_paths(root, ctx))
    typed = [*prefix, name]
    scored: list[tuple[float, str]] = []
    for words in ([*typed, after], typed) if after is not None else (typed,):
        for path in paths:
            likeness = _likeness(words, path) if len(path) == len(words) else None
            if likeness is not None:
                scored.append((likeness, " ".join(path)))
        if scored:
            break
    if not scored:
        scored = [
            (0.0, " ".join(path))
            for path in paths
            if len(path) == len(typed) + 1 and path[: len(prefix)] == prefix and path[-1] == name
        ]
    scored.sort(key=lambda s: (-s[0], s[1]))
    return [s for _, s in scored][:MAX_SUGGESTIONS]
