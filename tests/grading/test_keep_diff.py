"""Every cell keeps the agent's diff (workspace.diff and workspace_diff.json), rubric or not; for a task
without a rubric no verdict reads it, so a workspace git cannot read keeps nothing and grading goes on."""

from __future__ import annotations

import json
from pathlib import Path

from dokimi.grading.merge import keep_diff_to_show
from dokimi.rundir import WORKSPACE, WORKSPACE_DIFF, WORKSPACE_DIFF_JSON
from tests.helpers.git import commit, git_repo


def test_a_cell_without_a_rubric_keeps_the_agent_s_diff(tmp_path: Path) -> None:
    workspace = tmp_path / "run" / WORKSPACE
    start = commit(git_repo(workspace), "base", files={"calc/parser.py": "old = 1\n", "README.md": "calc\n"})
    (workspace / "calc" / "parser.py").write_text("new = 2\n")
    (workspace / "calc" / "added.py").write_text("x = 1\n")
    keep_diff_to_show(tmp_path / "run", start)
    text = (tmp_path / "run" / WORKSPACE_DIFF).read_text()
    assert "-old = 1\n+new = 2" in text and "+++ b/calc/added.py" in text
    record = json.loads((tmp_path / "run" / WORKSPACE_DIFF_JSON).read_text())
    assert [(f["status"], f["new_path"]) for f in record["files"]] == [
        ("A", "calc/added.py"),
        ("M", "calc/parser.py"),
    ]
    assert record["ignored_created"] is None  # only mergeability measures the ignored files


def test_a_workspace_git_cannot_read_keeps_no_diff_and_raises_nothing(tmp_path: Path) -> None:
    workspace = tmp_path / "run" / WORKSPACE
    workspace.mkdir(parents=True)
    (workspace / ".git").symlink_to("/etc")  # the agent replaced its .git
    keep_diff_to_show(tmp_path / "run", "a" * 40)
    assert not (tmp_path / "run" / WORKSPACE_DIFF).exists()
