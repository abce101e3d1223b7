"""The seal over dokimi's files in a run directory (dokimi.grading.evidence), with no container: what counts
as changed, removed and planted, and that a planted file is removed so nothing reads it."""

from __future__ import annotations

import os
from pathlib import Path

from dokimi.grading.evidence import seal
from dokimi.sandbox.specs import evidence_mounts


def _run_dir(tmp_path: Path) -> Path:
    run_dir = tmp_path / "run"
    (run_dir / "workspace").mkdir(parents=True)
    for name, text in {
        "task.json": "{}",
        "meta.json": "{}",
        "events.jsonl": "",
        "answer.txt": "done",
    }.items():
        (run_dir / name).write_text(text)
    return run_dir


def test_an_untouched_run_directory_has_no_problem_and_the_present_files_are_mounted_read_only(
    tmp_path: Path,
) -> None:
    run_dir = _run_dir(tmp_path)
    sealed = seal(run_dir, writes=("grade.json",))
    (run_dir / "grade.json").write_text("{}")  # what the container is meant to write
    (run_dir / "workspace" / "x.py").write_text("")  # the workspace is not dokimi's
    (run_dir / "scratch.log").write_text("")  # nor a file of the grader's own
    assert sealed.problems() == []
    mounts = evidence_mounts(run_dir, sealed.files)
    assert sorted(str(m.target) for m in mounts) == [
        "/eval/run/answer.txt", "/eval/run/events.jsonl", "/eval/run/meta.json", "/eval/run/task.json",
    ]  # fmt: skip
    assert all(m.read_only for m in mounts)


def test_a_changed_a_removed_and_a_planted_file_are_each_named_and_the_planted_ones_removed(
    tmp_path: Path,
) -> None:
    run_dir = _run_dir(tmp_path)
    sealed = seal(run_dir)
    (run_dir / "answer.txt").write_text("FORGED")
    (run_dir / "meta.json").unlink()
    (run_dir / "merge.json").write_text('{"mergeable": true}')
    (run_dir / "perf").mkdir()
    (run_dir / "perf" / "check.json").write_text("{}")
    os.symlink("/etc/passwd", run_dir / "result.json")
    assert sealed.problems() == [
        "meta.json was removed",
        "answer.txt was changed",
        "merge.json was planted (removed)",
        "perf/check.json was planted (removed)",
        "result.json was planted (removed)",
    ]
    assert not os.path.lexists(run_dir / "merge.json") and not os.path.lexists(run_dir / "result.json")
    assert not (run_dir / "perf" / "check.json").exists()


def test_a_link_planted_in_place_of_a_directory_on_the_way_is_removed(tmp_path: Path) -> None:
    run_dir = _run_dir(tmp_path)
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    (elsewhere / "check.json").write_text("{}")
    sealed = seal(run_dir)
    os.symlink(elsewhere, run_dir / "perf")
    assert sealed.problems() == ["perf/check.json was planted (removed)"]
    assert not os.path.lexists(run_dir / "perf")
    assert (elsewhere / "check.json").is_file()  # nothing followed through the link
