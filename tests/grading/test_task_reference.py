"""A batch's task references on disk: measured once, stored, read back by a resumed batch and by regrade."""

from __future__ import annotations

from pathlib import Path

from dokimi.grading.reference import load_references, not_measured, read_reference, stored_references
from dokimi.rundir import BatchLayout
from dokimi.schemas._base import write_document
from dokimi.schemas.grading import TaskReferenceDoc


def reference(task: str, skipped: float | None = 1.0) -> TaskReferenceDoc:
    return TaskReferenceDoc(
        task=task, oracle_tests_skipped=skipped, oracle_note=None, base_tests=["t::a"], base_tests_note=None
    )


def test_a_reference_is_measured_once_and_read_back_afterwards(tmp_path: Path) -> None:
    layout = BatchLayout(tmp_path / "batch")
    calls: list[str] = []

    def measure(task_id: str) -> TaskReferenceDoc:
        calls.append(task_id)
        return reference(task_id)

    first = load_references(layout, ["t1", "t2"], measure)
    assert calls == ["t1", "t2"] and first["t1"] == reference("t1")
    assert layout.reference_json("t1").is_file()
    again = load_references(layout, ["t1", "t2"], measure)
    assert calls == ["t1", "t2"] and again == first  # read back, not measured again
    assert stored_references(layout) == first  # what repo regrade grades with


def test_a_reference_that_could_not_be_measured_is_not_stored(tmp_path: Path) -> None:
    layout = BatchLayout(tmp_path / "batch")
    assert load_references(layout, ["t1"], lambda task_id: None) == {}
    assert not layout.reference_json("t1").exists()
    assert load_references(layout, ["t1"]) == {}  # regrade: no stored reference, the rules stay unmeasured
    why = not_measured("t1", "docker refused")
    assert why.oracle_tests_skipped is None and why.base_tests is None and why.oracle_note == "docker refused"


def test_a_stored_reference_of_another_task_or_a_link_is_not_read(tmp_path: Path) -> None:
    layout = BatchLayout(tmp_path / "batch")
    write_document(layout.reference_json("t1"), reference("t2"))
    assert read_reference(layout, "t1") is None and stored_references(layout) == {}
    target = tmp_path / "elsewhere.json"
    write_document(target, reference("t3"))
    layout.reference_json("t3").parent.mkdir(parents=True)
    layout.reference_json("t3").symlink_to(target)
    assert read_reference(layout, "t3") is None and stored_references(layout) == {}
