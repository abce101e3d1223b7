"""dokimi.batch: the layout the runner writes and report/compare read (slug, cell_dir, pin, plan, cells)."""

from __future__ import annotations

from pathlib import Path

import pytest

from dokimi.batch import CellKey, cell_dir, load_batch, slug, write_plan
from dokimi.errors import DocumentError
from tests.helpers.batches import start_cell, write_cell, write_json, write_pin
from tests.helpers.batches import write_plan as write_plan_literal


def test_slug_replaces_every_char_outside_the_safe_set() -> None:
    assert slug("guidance:none") == "guidance_none"
    assert (
        slug("us.anthropic.claude-haiku-4-5-20251001-v1:0") == "us.anthropic.claude-haiku-4-5-20251001-v1_0"
    )
    assert slug("a/b c") == "a_b_c"


def test_slug_never_names_the_parent_or_nothing() -> None:
    assert slug("..") == "__"
    assert slug(".") == "_"
    assert slug("") == "_"


def test_cell_dir_uses_default_for_no_effort() -> None:
    root = Path("/out/pilot")
    assert cell_dir(root, "t1", "guidance:raw", "m", None, 2) == root / "t1/guidance_raw/m/default/rep2"
    assert cell_dir(root, "t1", "guidance:raw", "m", "high", 0) == root / "t1/guidance_raw/m/high/rep0"


def test_a_cell_with_a_valid_result_is_finished(tmp_path: Path) -> None:
    write_pin(tmp_path)
    write_cell(tmp_path, "t1", "guidance:raw")
    batch = load_batch(tmp_path)
    assert [c.status for c in batch.cells] == ["finished"]
    assert batch.cells[0].key == CellKey("t1", "guidance:raw", "m1", None, 0)
    assert batch.pin is not None and batch.pin.image_pin == "tree"


def test_a_started_cell_without_result_is_missing_not_failed(tmp_path: Path) -> None:
    start_cell(tmp_path, "t1", "guidance:raw")
    batch = load_batch(tmp_path)
    assert [c.status for c in batch.cells] == ["missing"]
    assert batch.finished() == []


def test_a_planned_cell_that_never_started_is_missing(tmp_path: Path) -> None:
    write_plan_literal(tmp_path, [("t1", "a", "m1", None, 0), ("t1", "a", "m1", None, 1)])
    write_cell(tmp_path, "t1", "a", rep=0)
    batch = load_batch(tmp_path)
    assert [(c.rel, c.status) for c in batch.cells] == [
        ("t1/a/m1/default/rep0", "finished"),
        ("t1/a/m1/default/rep1", "missing"),
    ]
    assert batch.missing()[0].key == CellKey("t1", "a", "m1", None, 1)


def test_a_result_that_does_not_validate_makes_an_invalid_cell_not_a_crash(tmp_path: Path) -> None:
    run_dir = write_cell(tmp_path, "t1", "a")
    write_json(run_dir / "result.json", {"schema": "repo_result.v1", "task": "t1"})
    (run_dir.parent / "rep1").mkdir()
    (run_dir.parent / "rep1" / "result.json").write_text("{not json")
    batch = load_batch(tmp_path)
    assert [c.status for c in batch.cells] == ["invalid", "invalid"]
    assert all(c.error for c in batch.cells)


def test_a_result_naming_another_cell_is_invalid(tmp_path: Path) -> None:
    run_dir = write_cell(tmp_path, "t1", "a", rep=0)
    target = run_dir.parent / "rep5"
    run_dir.rename(target)
    batch = load_batch(tmp_path)
    assert batch.cells[0].status == "invalid"
    assert "names the cell t1/a/m1/default/rep0" in (batch.cells[0].error or "")


def test_an_unreadable_pin_is_reported_with_the_reason(tmp_path: Path) -> None:
    write_pin(tmp_path, image_pin="somewhere")
    batch = load_batch(tmp_path)
    assert batch.pin is None
    assert batch.pin_error is not None and "image_pin" in batch.pin_error


def test_no_pin_is_reported(tmp_path: Path) -> None:
    write_cell(tmp_path, "t1", "a")
    batch = load_batch(tmp_path)
    assert batch.pin is None and "no batch pin" in (batch.pin_error or "")


def test_write_plan_round_trips_and_sorts_no_effort_first(tmp_path: Path) -> None:
    cells = [
        CellKey("t", "a", "m", "high", 0),
        CellKey("t", "a", "m", None, 0),
        CellKey("t", "a", "m", None, 0),
    ]
    write_plan(tmp_path, cells)
    batch = load_batch(tmp_path)
    assert batch.plan == [CellKey("t", "a", "m", None, 0), CellKey("t", "a", "m", "high", 0)]


def test_a_bare_list_plan_is_accepted(tmp_path: Path) -> None:
    write_json(
        tmp_path / "_eval" / "plan.json", [{"task": "t", "arm": "a", "model": "m", "effort": None, "rep": 0}]
    )
    assert load_batch(tmp_path).plan == [CellKey("t", "a", "m", None, 0)]


def test_a_broken_plan_is_reported_not_raised(tmp_path: Path) -> None:
    write_json(tmp_path / "_eval" / "plan.json", {"schema": "repo_plan.v1", "cells": [{"task": "t"}]})
    batch = load_batch(tmp_path)
    assert batch.plan is None and batch.plan_error is not None


def test_a_missing_batch_directory_is_an_error(tmp_path: Path) -> None:
    with pytest.raises(DocumentError):
        load_batch(tmp_path / "nope")


def test_meta_is_read_on_demand(tmp_path: Path) -> None:
    write_cell(tmp_path, "t1", "a", meta=True)
    cell = load_batch(tmp_path).cells[0]
    meta = cell.meta()
    assert meta is not None and meta.base_sha == "b" * 40
