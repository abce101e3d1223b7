"""``dokimi repo perf`` on what is not a finished cell: a usage error (exit 2) naming the fix."""

from __future__ import annotations

from pathlib import Path

import pytest

from dokimi.cli.main import main


def test_a_directory_that_is_not_a_cell_of_a_batch_exits_2(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["repo", "perf", str(tmp_path)]) == 2
    assert "is not a cell of a batch" in capsys.readouterr().err


def test_a_cell_of_a_batch_whose_task_has_no_perf_object_exits_2(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    root = tmp_path / "batch"
    (root / "_eval").mkdir(parents=True)
    (root / "_eval" / "batch.json").write_text("{}")
    cell = root / "t" / "guidance_raw" / "m" / "default" / "rep0"
    cell.mkdir(parents=True)
    (cell / "task.json").write_text("{}")
    assert main(["repo", "perf", str(cell)]) == 2
    assert "error:" in capsys.readouterr().err
