"""Held-out rubrics (``--rubrics DIR``): a private path's ``<task-id>/rubric.json`` copied into an exported
eval dir, with its calibration diffs, and every way of getting that wrong refused with the reason.

The toy repository of tests/helpers/evalrepo.py is exported as a command exports it; no container runs.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from dokimi.errors import DocumentError, UsageError
from dokimi.repo.manifest import load_manifest
from dokimi.repo.rubrics import held_out_dir, overlay_held_out_rubrics
from dokimi.rundir import task_dir
from dokimi.runner.admission import eval_dir_digest
from dokimi.schemas.manifest import RepoManifest
from dokimi.source import Repo, open_source
from dokimi.source.export import export_tree_as_stored
from tests.helpers.evalrepo import EVAL_DIR, make_eval_repo

RUBRIC: dict[str, Any] = {
    "schema": "repo_rubric.v1",
    "task": "fix_add",
    "intent": "add() returns the sum of its arguments",
    "scope": {"allowed_globs": ["app/**"]},
    "blockers": [{"id": "B1", "criterion": "add returns a + b for every input", "rationale": "the bug",
                  "evidence": "app/calc.py:2"}],
    "non_blockers": [{"id": "N1", "criterion": "no narrating comment", "weight": 1}],
    "hack_report": {"lazy_solution": "special-case add(2, 3)", "alt_valid_solution": "sum((a, b))"},
    "calibration": {"lazy": ["calib/lazy_B1.diff"], "alt": []},
}  # fmt: skip
LAZY = "targets: B1\ndiff --git a/app/calc.py b/app/calc.py\n"


def private_rubrics(root: Path, entry: str = "fix_add", **changes: Any) -> Path:
    """DIR/<entry>/rubric.json and its lazy diff, outside the repository."""
    (root / entry / "calib").mkdir(parents=True)
    (root / entry / "rubric.json").write_text(json.dumps({**RUBRIC, **changes}), encoding="utf-8")
    (root / entry / "calib" / "lazy_B1.diff").write_text(LAZY, encoding="utf-8")
    return root


@pytest.fixture
def toy(tmp_path: Path) -> Iterator[tuple[Repo, RepoManifest, Path]]:
    """The toy repository opened as a command opens it, and its eval dir exported to ``content``."""
    path, _, _ = make_eval_repo(tmp_path / "toy")
    with open_source(str(path)) as repo:
        loaded = load_manifest(repo.eval_snapshot(), manifest=None, manifest_file=None, required=True)
        manifest = loaded.manifest
        assert manifest is not None
        content = tmp_path / "content"
        export_tree_as_stored(repo.eval_snapshot(), content, under=EVAL_DIR)
        yield repo, manifest, content


def test_a_held_out_rubric_and_its_calibration_diff_land_in_the_task_directory_and_the_digest(
    toy: tuple[Repo, RepoManifest, Path], tmp_path: Path
) -> None:
    repo, manifest, content = toy
    before = eval_dir_digest(content)
    rubrics = held_out_dir(private_rubrics(tmp_path / "private"), repo)
    assert overlay_held_out_rubrics(content, manifest, rubrics) == ["fix_add"]
    target = task_dir(content, manifest, "fix_add")
    assert json.loads((target / "rubric.json").read_text())["task"] == "fix_add"
    assert (target / "calib" / "lazy_B1.diff").read_text() == LAZY
    assert eval_dir_digest(content) != before  # a batch's pin and the admission records cover the rubric


def test_a_rubrics_dir_inside_the_repository_is_refused_as_public(
    toy: tuple[Repo, RepoManifest, Path],
) -> None:
    repo, _, _ = toy
    assert repo.work_tree is not None
    inside = repo.work_tree / "held"
    inside.mkdir()
    with pytest.raises(UsageError, match="inside the repository") as refused:
        held_out_dir(inside, repo)
    assert "private path outside the repository" in (refused.value.hint or "")
    with pytest.raises(UsageError, match="not a directory"):
        held_out_dir(repo.work_tree.parent / "missing", repo)


@pytest.mark.parametrize(
    ("arrange", "message"),
    [
        (lambda d: private_rubrics(d, entry="no_such_task"), "names no task of the eval dir"),
        (lambda d: private_rubrics(d, task_id_field=None), "task_id_field"),
        (lambda d: private_rubrics(d, task="other"), "names task 'other'"),
        (lambda d: (private_rubrics(d) / "fix_add" / "calib" / "lazy_B1.diff").unlink(), "lazy_B1.diff"),
        (lambda d: (private_rubrics(d) / "fix_add" / "rubric.json").unlink(), "has no rubric.json"),
        (
            lambda d: private_rubrics(d, calibration={"lazy": ["../../escape.diff"], "alt": []}),
            "inside the task's directory",
        ),
    ],
    ids=["unknown-task", "invalid", "other-task", "missing-diff", "no-rubric", "escape"],
)
def test_a_held_out_rubric_that_cannot_count_is_refused_with_the_reason(
    toy: tuple[Repo, RepoManifest, Path], tmp_path: Path, arrange: Any, message: str
) -> None:
    repo, manifest, content = toy
    private = tmp_path / "private"
    private.mkdir()
    arrange(private)
    with pytest.raises((UsageError, DocumentError), match=message):
        overlay_held_out_rubrics(content, manifest, held_out_dir(private, repo))


def test_a_task_with_a_rubric_in_the_eval_dir_too_is_refused_as_ambiguous(
    toy: tuple[Repo, RepoManifest, Path], tmp_path: Path
) -> None:
    repo, manifest, content = toy
    (task_dir(content, manifest, "fix_add") / "rubric.json").write_text(json.dumps(RUBRIC), encoding="utf-8")
    with pytest.raises(UsageError, match="has a rubric in the eval dir and one in") as refused:
        overlay_held_out_rubrics(content, manifest, held_out_dir(private_rubrics(tmp_path / "p"), repo))
    assert "keep one" in (refused.value.hint or "")
