"""An unknown sub-command is answered with the command the user most likely meant, in every group of the
command tree: a group of another class than SuggestingGroup fails here."""

from __future__ import annotations

import click
import pytest

from dokimi.cli.app import cli
from dokimi.cli.groups import SuggestingGroup, command_paths
from dokimi.cli.main import main
from dokimi.constants import EXIT_USAGE


def _tree() -> list[tuple[list[str], click.Command]]:
    ctx = click.Context(cli, info_name="dokimi")
    found: list[tuple[list[str], click.Command]] = [([], cli)]
    for path in command_paths(cli, ctx):
        command: click.Command | None = cli
        for word in path:
            assert isinstance(command, click.Group)
            command = command.get_command(ctx, word)
        assert command is not None
        found.append((path, command))
    return found


def _error(argv: list[str], capsys: pytest.CaptureFixture[str]) -> str:
    assert main(argv) == EXIT_USAGE
    return capsys.readouterr().err


def test_every_group_of_the_tree_suggests() -> None:
    groups = [" ".join(path) or "dokimi" for path, c in _tree() if isinstance(c, click.Group)]
    assert {"dokimi", "repo", "repo task", "repo tasks", "repo rules", "mock-model"} <= set(groups)
    others = [
        " ".join(path) or "dokimi"
        for path, c in _tree()
        if isinstance(c, click.Group) and not isinstance(c, SuggestingGroup)
    ]
    assert others == []


def test_a_command_typed_in_the_wrong_group_names_the_right_one(capsys: pytest.CaptureFixture[str]) -> None:
    err = _error(["repo", "task", "check"], capsys)
    assert "no such command `repo task check`; did you mean `repo tasks check`?" in err
    assert "Usage: dokimi repo task" in err


@pytest.mark.parametrize(
    ("argv", "meant"),
    [
        (["repo", "taks", "check", "."], "repo tasks check"),  # a typo in the group, the command right
        (["repo", "reprot", "repo-runs/x"], "repo report"),  # the word after it is an argument
        (["run", "."], "repo run"),  # the group left out
        (["reop"], "repo"),
    ],
)
def test_typos_and_missing_groups_are_answered(
    argv: list[str], meant: str, capsys: pytest.CaptureFixture[str]
) -> None:
    assert f"did you mean `{meant}`" in _error(argv, capsys)


def test_a_word_like_no_command_gets_no_guess(capsys: pytest.CaptureFixture[str]) -> None:
    err = _error(["repo", "zzzzzz"], capsys)
    assert "no such command `repo zzzzzz`" in err and "did you mean" not in err


def test_every_command_of_every_group_is_found_from_a_one_letter_typo(
    capsys: pytest.CaptureFixture[str],
) -> None:
    """For each command of each group: its name with the last letter doubled suggests it."""
    checked = 0
    for path, _ in _tree():
        if not path or len(path[-1]) < 3:
            continue
        typo = [*path[:-1], path[-1] + path[-1][-1]]
        err = _error(typo, capsys)
        assert f"`{' '.join(path)}`" in err.split("did you mean", 1)[1], (typo, err)
        checked += 1
    assert checked >= 30
