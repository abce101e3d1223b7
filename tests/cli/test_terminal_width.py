"""Every command that prints a table fits 100 columns: no line is wider, no name is cut or wrapped (a name
is found whole on one line), constant columns are said once above the table; and the scan prints
``path:line: status`` lines, coloured only on a terminal."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from dokimi.batch import CellKey
from dokimi.cli.main import main
from dokimi.cli.tables import Col, fit_line, render_table
from tests.checks.scan._util import scan_files
from tests.helpers.batches import write_cell, write_pin, write_plan

WIDTH = 100
TASKS = ["fix_the_power_operator_associativity_bug_in_the_parser", "feature_variables_and_assignment", "t"]
ARMS = ["guidance:none", "guidance:raw", "guidance:at=v1.2.0-rc.1", "guidance:generated"]
MODEL = "claude-sonnet-4-5-20250929"
ANSI = re.compile(r"\x1b\[[0-9;]*m")


def assert_fits(text: str, names: list[str], width: int = WIDTH) -> None:
    lines = [ANSI.sub("", line) for line in text.splitlines()]
    assert lines, "nothing printed"
    # a single word longer than the width (a long path) stands alone on its line: it cannot be broken
    too_wide = [line for line in lines if len(line) > width and " " in line.strip()]
    assert not too_wide, too_wide
    for name in names:
        assert any(re.search(rf"(?<![\w:.=-]){re.escape(name)}(?![\w.=-]|:\w)", line) for line in lines), name


@pytest.fixture
def batch(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("COLUMNS", str(WIDTH))
    root = tmp_path / "wide-batch"
    write_pin(root)
    write_plan(root, [(t, a, MODEL, None, r) for t in TASKS for a in ARMS for r in (0, 1)])
    for i, task in enumerate(TASKS):
        for j, arm in enumerate(ARMS):
            for rep in (0, 1):
                write_cell(root, task, arm, model=MODEL, rep=rep, passed=(i + j + rep) % 3 != 0)
    return root


def test_report_fits_100_columns_with_arms_in_columns(
    batch: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["repo", "report", str(batch)]) == 0
    out = capsys.readouterr().out
    assert_fits(out, [*TASKS, *ARMS, MODEL])
    assert "arms in columns" in out
    assert f"every row: model {MODEL}, effort default" in out  # said once, not a column


@pytest.mark.slow
def test_compare_fits_100_columns(batch: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["repo", "compare", str(batch), "--baseline", "guidance:none"]) == 0
    assert_fits(capsys.readouterr().out, [*ARMS, MODEL, "sha256:eval1"])


@pytest.mark.slow
def test_plan_fits_100_columns(batch: Path, capsys: pytest.CaptureFixture[str]) -> None:
    args = [
        "repo",
        "plan",
        f"{batch}/guidance:raw",
        "--baseline",
        f"{batch}/guidance:none",
        "--effect",
        "0.2",
    ]
    assert main(args) == 0
    assert_fits(capsys.readouterr().out, ["reps", "power"])


@pytest.mark.slow
def test_doctor_fits_100_columns(monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.setenv("COLUMNS", str(WIDTH))
    main(["doctor"])
    assert_fits(capsys.readouterr().out, ["git", "docker client"])


def test_run_table_fits_100_columns(batch: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from dokimi.cli.run import _print_table
    from dokimi.runner.cell import CellOutcome
    from dokimi.runner.run import BatchRun
    from dokimi.schemas.batch import BatchPin

    pin = BatchPin.model_validate_json((batch / "_eval" / "batch.json").read_text())
    outcomes = [
        CellOutcome(CellKey(t, a, MODEL, None, r), "not_started") for t in TASKS for a in ARMS for r in (0, 1)
    ]
    _print_table(BatchRun(batch, pin, "claude-code", "2.1.328", pin.image, outcomes))
    assert_fits(capsys.readouterr().out, [*TASKS, *ARMS, MODEL])


def test_tasks_check_table_fits_100_columns(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    from dokimi.cli.tasks import _table
    from dokimi.runner.taskcheck import TaskReport, TasksCheck

    monkeypatch.setenv("COLUMNS", str(WIDTH))
    problem = "the oracle did not pass: " + "grader said the hidden tests failed " * 4
    reports = [
        TaskReport(task=t, status="ok" if n else "broken", problems=[] if n else [problem])
        for n, t in enumerate(TASKS)
    ]
    _table(
        TasksCheck(
            source="/some/where/calc@HEAD",
            manifest_id="calc",
            tree=None,
            image="dokimi/calc:" + "a" * 40,
            image_pin="tree",
            warm=False,
            network="none",
            tasks=reports,
            ok=False,
        )
    )
    out = capsys.readouterr().out
    assert_fits(out, [*TASKS, "dokimi/calc:" + "a" * 40])
    assert "\x1b[" not in out  # not a terminal: no colour


def test_a_table_too_wide_is_split_and_repeats_its_keys() -> None:
    columns = [Col("task", key=True), *(Col(f"measure number {n}", right=True) for n in range(12))]
    rows = [[name, *(f"{n}.{n}{n}{n}" for n in range(12))] for name in TASKS]
    lines = render_table(columns, rows, width=WIDTH)
    assert_fits("\n".join(lines), TASKS)
    assert sum(1 for line in lines if TASKS[0] in line) >= 2  # the key column is in every part


def test_prose_is_broken_between_list_items_and_never_inside_a_word() -> None:
    path = "/a/very/long/path/" + "x" * 90
    lines = fit_line(f"first thing, second thing; {path}, last", 60)
    assert lines[0] == "first thing, second thing;"
    assert any(path in line for line in lines)  # whole, on a line of its own
    assert all(len(line) <= 60 or " " not in line.strip() for line in lines)


def test_scan_prints_path_line_status_lines_and_colours_only_on_a_terminal(tmp_path: Path) -> None:
    from dokimi.checks.scan.report import render_text, view_of_result

    result = scan_files(tmp_path, {"AGENTS.md": "See `src/gone.py` and `lib/x.py`.\n", "src/a.py": ""})
    plain = render_text(view_of_result(result))
    assert "AGENTS.md:1: fail path src/gone.py: " in plain and "\x1b[" not in plain
    assert "AGENTS.md:1: unresolved path lib/x.py: " in plain
    coloured = render_text(view_of_result(result), color=True)
    assert "AGENTS.md:1: \x1b[31mfail\x1b[0m path src/gone.py" in coloured
    assert "AGENTS.md:1: \x1b[33munresolved\x1b[0m path lib/x.py" in coloured
