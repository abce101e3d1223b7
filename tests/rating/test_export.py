"""rate export: blinded artifacts, the private key, stable ids, withheld leaks (scoring-rubric.md)."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from dokimi.errors import UsageError
from dokimi.rating.export import FIXED_MTIME, export_batch, reblind
from dokimi.rating.scores import read_key
from tests.rating.batchdata import CONDITION_STRINGS, MODEL, make_batch


def _all_text(root: Path) -> dict[str, str]:
    return {p.relative_to(root).as_posix(): p.read_text() for p in root.rglob("*") if p.is_file()}


@pytest.mark.slow
def test_no_file_handed_to_raters_contains_an_arm_model_harness_or_batch_string(tmp_path: Path) -> None:
    data = make_batch(tmp_path)
    out = tmp_path / "rating"
    report = export_batch(data.root, out, seed=1)
    files = _all_text(out / "blinded")
    assert len(report.blinded) == 5 and len(files) >= 5 * 4
    leaks = [
        (name, s) for name, text in files.items() for s in CONDITION_STRINGS if s.lower() in text.lower()
    ]
    assert leaks == []
    # every directory name is an id; no cell path, arm slug or model slug appears in a path either
    for path in (out / "blinded").rglob("*"):
        rel = path.relative_to(out / "blinded").as_posix().lower()
        assert not any(s.lower() in rel for s in CONDITION_STRINGS), rel


def test_an_artifact_keeps_what_raters_score_and_leaves_out_the_harness_trace(tmp_path: Path) -> None:
    data = make_batch(tmp_path, with_git=False, with_leak=False)
    out = tmp_path / "rating"
    report = export_batch(data.root, out, seed=1)
    art = out / "blinded" / report.blinded[0]
    assert sorted(p.relative_to(art).as_posix() for p in art.rglob("*") if p.is_file()) == [
        "answer.txt",
        "diff.patch",
        "logs/grade.stdout",
        "task.txt",
    ]
    answer = (art / "answer.txt").read_text()
    assert "Criterion 1 -> src/calc.py:2 -> tests/test_calc.py::test_div_by_zero." in answer
    assert "[redacted]" in answer
    diff = (art / "diff.patch").read_text()
    assert diff.startswith("diff --git a/src/calc.py b/src/calc.py\n")
    assert "+    # fixed with [redacted] on [redacted], see [redacted]\n" in diff
    assert "3 passed, 0 failed" in (art / "logs" / "grade.stdout").read_text()
    task = (art / "task.txt").read_text()
    assert "ZeroDivisionError" in task and "fix_div" in task


@pytest.mark.slow
def test_a_cell_without_workspace_diff_gets_git_diff_of_its_workspace_from_start_sha(tmp_path: Path) -> None:
    data = make_batch(tmp_path, with_leak=False)
    out = tmp_path / "rating"
    export_batch(data.root, out, seed=3)
    key = read_key(out / "key.json")
    (run_id,) = [i for i, e in key.artifacts.items() if e.effort == "high"]
    diff = (out / "blinded" / run_id / "diff.patch").read_text()
    assert "+    if b == 0:\n" in diff
    assert "+++ b/tests/test_new.py\n" in diff  # untracked files are part of the change
    assert "+# [redacted] wrote this" in diff
    assert not (data.cells["git"] / "workspace" / ".git" / "index.lock").exists()


def test_the_key_maps_every_id_to_its_cell_and_is_not_in_the_raters_directory(tmp_path: Path) -> None:
    data = make_batch(tmp_path)
    out = tmp_path / "rating"
    report = export_batch(data.root, out, seed=1)
    assert report.key == out / "key.json" and report.key.is_file()
    assert not any(p.name == "key.json" for p in (out / "blinded").rglob("*"))
    key = read_key(report.key)
    cells = {e.cell for e in key.artifacts.values()}
    assert cells == {p.relative_to(data.root).as_posix() for p in data.cells.values()}
    assert {e.model for e in key.artifacts.values()} == {MODEL}
    assert (out / "blinded" / "ids.txt").read_text().split() == sorted(report.blinded)


def test_a_key_inside_the_raters_directory_is_refused(tmp_path: Path) -> None:
    data = make_batch(tmp_path, with_git=False, with_leak=False)
    out = tmp_path / "rating"
    with pytest.raises(UsageError, match="inside the raters' directory"):
        export_batch(data.root, out, seed=1, key_path=out / "blinded" / "key.json")


@pytest.mark.slow
def test_ids_are_stable_for_a_seed_and_change_with_it(tmp_path: Path) -> None:
    data = make_batch(tmp_path, with_git=False)

    def mapping(name: str, seed: int) -> dict[str, str]:
        export_batch(data.root, tmp_path / name, seed=seed)
        return {i: e.cell for i, e in read_key(tmp_path / name / "key.json").artifacts.items()}

    first, again, other = mapping("a", 11), mapping("b", 11), mapping("c", 12)
    assert first == again
    assert set(first) != set(other)
    assert all(len(i) == 10 and int(i, 16) >= 0 for i in first)


def test_a_seeded_sample_takes_n_cells_and_the_same_ones_again(tmp_path: Path) -> None:
    data = make_batch(tmp_path, with_git=False, with_leak=False)
    one = export_batch(data.root, tmp_path / "a", seed=5, sample=2)
    two = export_batch(data.root, tmp_path / "b", seed=5, sample=2)
    assert len(one.blinded) == 2 and one.finished == 4
    assert read_key(one.key).artifacts == read_key(two.key).artifacts


@pytest.mark.slow
def test_file_times_do_not_reveal_the_order_of_the_cells(tmp_path: Path) -> None:
    data = make_batch(tmp_path, with_git=False, with_leak=False)
    out = tmp_path / "rating"
    export_batch(data.root, out, seed=1)
    times = {os.stat(p).st_mtime for p in (out / "blinded").rglob("*")}
    assert times == {FIXED_MTIME}


def test_a_marker_in_a_diff_path_cannot_be_redacted_and_withholds_the_artifact(tmp_path: Path) -> None:
    data = make_batch(tmp_path, with_git=False)
    out = tmp_path / "rating"
    report = export_batch(data.root, out, seed=1)
    (withheld,) = report.withheld
    assert {f.marker for f in report.withheld[withheld]} == {"CLAUDE.md"}
    assert report.problems
    assert (out / "withheld" / withheld / "diff.patch").is_file()
    assert not (out / "blinded" / withheld).exists()
    assert withheld not in (out / "blinded" / "ids.txt").read_text()
    assert read_key(report.key).artifacts[withheld].status == "withheld"


def test_a_second_export_into_the_same_directory_is_refused(tmp_path: Path) -> None:
    data = make_batch(tmp_path, with_git=False, with_leak=False)
    export_batch(data.root, tmp_path / "rating", seed=1)
    with pytest.raises(UsageError, match="already holds an export"):
        export_batch(data.root, tmp_path / "rating", seed=2)


def test_extra_markers_are_redacted(tmp_path: Path) -> None:
    data = make_batch(tmp_path, with_git=False, with_leak=False)
    (data.cells["raw0"] / "answer.txt").write_text("<<EXPLORE-STEP>> looked around\n")
    report = export_batch(data.root, tmp_path / "rating", seed=1, markers=["<<EXPLORE-STEP>>"])
    texts = "".join(_all_text(tmp_path / "rating" / "blinded").values())
    assert "EXPLORE-STEP" not in texts and report.redactions > 0


@pytest.mark.slow
def test_reblind_retires_the_id_and_redacts_the_reported_marker(tmp_path: Path) -> None:
    data = make_batch(tmp_path, with_git=False, with_leak=False)
    (data.cells["raw0"] / "answer.txt").write_text("Plan-o-matic v3 says: done\n")
    out = tmp_path / "rating"
    export_batch(data.root, out, seed=1)
    key = read_key(out / "key.json")
    (old,) = [
        i for i, e in key.artifacts.items() if e.cell.endswith("guidance_raw/" + MODEL + "/default/rep0")
    ]
    with pytest.raises(UsageError, match="changes nothing"):
        reblind(out / "key.json", old)
    report = reblind(out / "key.json", old, markers=["Plan-o-matic v3"])
    key = read_key(out / "key.json")
    assert key.artifacts[old].status == "retired" and key.artifacts[old].reblinded_as == report.new_id
    assert key.artifacts[report.new_id].reblind_of == old and report.status == "blinded"
    assert not (out / "blinded" / old).exists()
    assert (out / "blinded" / report.new_id / "answer.txt").read_text() == "[redacted] says: done\n"
    assert old not in (out / "blinded" / "ids.txt").read_text()
    assert json.loads((out / "key.json").read_text())["markers"] == ["Plan-o-matic v3"]
