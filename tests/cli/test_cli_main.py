"""The `dokimi` command itself: --version, the command listing, unbuilt commands, and the exit codes of the
top-level handler (0 fine, 2 usage or environment, 3 bug, 130 Ctrl-C)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import click
import pytest

from dokimi import __version__
from dokimi.cli import app as cli_app
from dokimi.cli import main as cli_main
from dokimi.errors import SourceError

ROOT = Path(__file__).resolve().parents[2]

#: The commands of the contract (the top of spec/contract.md): each must be listed by `dokimi repo --help`.
CONTRACT_COMMANDS = ("validate", "fetch", "scan", "reach", "tasks", "run", "report", "compare")


# Commands the tests register in the table, as a real command module would export them.
@click.command("interrupted")
def interrupted() -> int:
    raise KeyboardInterrupt


@click.command("crashes")
def crashes() -> int:
    raise RuntimeError("a bug in dokimi")


@click.command("refuses")
def refuses() -> int:
    raise SourceError("/nowhere: no such directory", hint="give an existing <dir>")


@pytest.fixture
def extra_commands(monkeypatch: pytest.MonkeyPatch) -> None:
    table = dict(cli_app.REPO_COMMANDS)
    for name in ("interrupted", "crashes", "refuses"):
        table[name] = (f"tests.cli.test_cli_main:{name}", f"test command {name}")
    table["not-built"] = ("dokimi.cli.no_such_module_yet:command", "Something a later issue builds.")
    monkeypatch.setattr(cli_app.repo, "lazy", table)


def test_version_prints_the_package_version(capsys: pytest.CaptureFixture[str]) -> None:
    assert cli_main.main(["--version"]) == 0
    assert capsys.readouterr().out == f"dokimi, version {__version__}\n"


def listed_commands(help_text: str) -> dict[str, str]:
    """The ``Commands:`` section of a help text: name -> short help (wrapped lines joined)."""
    rows: dict[str, str] = {}
    name = ""
    for line in help_text.split("Commands:", 1)[1].splitlines():
        if line.startswith("  ") and line[2] != " ":
            name, _, text = line.strip().partition(" ")
            rows[name] = text.strip()
        elif line.strip() and name:
            rows[name] += " " + line.strip()
    return rows


def test_repo_help_lists_every_command_of_the_contract(capsys: pytest.CaptureFixture[str]) -> None:
    assert cli_main.main(["repo", "--help"]) == 0
    rows = listed_commands(capsys.readouterr().out)
    assert set(CONTRACT_COMMANDS) <= set(rows)
    assert not any("not implemented" in rows[name] for name in ("validate", "fetch"))


def test_an_unbuilt_command_is_marked_in_the_listing_and_exits_2_when_run(
    extra_commands: None, capsys: pytest.CaptureFixture[str]
) -> None:
    assert cli_main.main(["repo", "--help"]) == 0
    rows = listed_commands(capsys.readouterr().out)
    assert rows["not-built"] == "Something a later issue builds. (not implemented yet)"
    assert rows["refuses"] == "test command refuses"
    assert cli_main.main(["repo", "not-built", "--anything", "x"]) == 2
    assert "`not-built` is not implemented yet" in capsys.readouterr().err


def test_ctrl_c_inside_a_command_exits_130(extra_commands: None) -> None:
    assert cli_main.main(["repo", "interrupted"]) == 130


def test_a_dokimi_error_exits_2_with_the_fix_and_no_traceback(
    extra_commands: None, capsys: pytest.CaptureFixture[str]
) -> None:
    assert cli_main.main(["repo", "refuses"]) == 2
    err = capsys.readouterr().err
    assert err == "error: /nowhere: no such directory\n  fix: give an existing <dir>\n"


def test_a_bug_exits_3_with_its_traceback_never_1(
    extra_commands: None, capsys: pytest.CaptureFixture[str]
) -> None:
    assert cli_main.main(["repo", "crashes"]) == 3
    err = capsys.readouterr().err
    assert "Traceback" in err and "RuntimeError: a bug in dokimi" in err and "this is a bug in dokimi" in err


def test_a_usage_error_exits_2(capsys: pytest.CaptureFixture[str]) -> None:
    assert cli_main.main(["repo", "validate"]) == 2
    assert "Missing argument 'SOURCE'" in capsys.readouterr().err


@pytest.mark.slow
def test_cli_py_runs_from_the_checkout_without_installing(tmp_path: Path) -> None:
    """`python cli.py repo validate ...` as the spec writes it, from another directory, without dokimi on
    sys.path: cli.py puts src/ there itself."""
    proc = subprocess.run(
        [sys.executable, "-I", str(ROOT / "cli.py"), "repo", "validate", str(tmp_path / "missing")],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert proc.returncode == 2, proc.stderr
    assert proc.stderr.startswith("error: ") and "no such directory" in proc.stderr
