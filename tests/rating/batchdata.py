"""A literal batch for the rating tests: four cells over two guidance arms with condition markers planted in
every file raters could read, a cell whose diff comes from a real git workspace, and a cell whose diff touches
a guidance file (a marker that cannot be redacted)."""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

from dokimi.batch import cell_dir
from tests.helpers.batches import write_cell, write_json, write_pin
from tests.helpers.git import commit, git_repo, write_files

MODEL = "claude-sonnet-4-5-20250929"
HARNESS_VERSION = "2.1.328"
BATCH = "pilot-7"
TASK = "fix_div"
ARMS = ("guidance:none", "guidance:raw")

#: Strings no file of the raters' directory may contain (case-insensitive).
CONDITION_STRINGS = (
    "guidance:none",
    "guidance:raw",
    "guidance_none",
    "guidance_raw",
    "guidance:bridge",
    MODEL,
    "claude",
    "sonnet",
    "claude-code",
    "Claude Code",
    HARNESS_VERSION,
    BATCH,
    "2024-06-01T12:00",
    "Phase 2",
    "AGENTS.md",
    "high",
)

DIFF = """\
diff --git a/src/calc.py b/src/calc.py
index 1111111..2222222 100644
--- a/src/calc.py
+++ b/src/calc.py
@@ -1,2 +1,3 @@ def div(a, b):
 def div(a, b):
+    # fixed with Claude Code on guidance:raw, see AGENTS.md
     return a / b
"""

ANSWER = """\
## Phase 2: Implement
I followed AGENTS.md. Done by Claude Code {version} as {model} on arm {arm} at 2024-06-01T12:00:00Z.
⏺ Bash(pytest -q)
Co-Authored-By: Claude <noreply@anthropic.com>
Criterion 1 -> src/calc.py:2 -> tests/test_calc.py::test_div_by_zero.
"""

GRADE_STDOUT = "hidden tests in /runs/{batch}/{rel} at 2024-06-01T12:00:03Z\n3 passed, 0 failed\n"

TASK_JSON = {
    "id": TASK,
    "family": "fix",
    "base": "a" * 40,
    "prompt": "Make div(a, 0) raise ZeroDivisionError with a clear message.",
    "grader": "grade.sh",
    "effort": "high",
}


def _files(batch: Path, run_dir: Path, arm: str) -> None:
    rel = run_dir.relative_to(batch).as_posix()
    (run_dir / "answer.txt").write_text(ANSWER.format(version=HARNESS_VERSION, model=MODEL, arm=arm))
    (run_dir / "grade.stdout").write_text(GRADE_STDOUT.format(batch=BATCH, rel=rel))
    (run_dir / "agent.stdout").write_text(json.dumps({"type": "system", "model": MODEL}) + "\n")
    write_json(run_dir / "task.json", TASK_JSON)


@dataclass
class RatingBatch:
    root: Path
    cells: dict[str, Path]
    """name -> run_dir: none0, none1, raw0, raw1, git (a real workspace), leak (CLAUDE.md in the diff)."""


def make_batch(tmp_path: Path, *, with_git: bool = True, with_leak: bool = True) -> RatingBatch:
    batch = tmp_path / "runs" / BATCH
    write_pin(batch)
    cells: dict[str, Path] = {}
    for arm in ARMS:
        for rep in (0, 1):
            run_dir = write_cell(
                batch,
                TASK,
                arm,
                model=MODEL,
                rep=rep,
                passed=rep == 0,
                meta=True,
                harness_version=HARNESS_VERSION,
            )
            (run_dir / "workspace.diff").write_text(DIFF)
            _files(batch, run_dir, arm)
            cells[f"{arm.split(':')[1]}{rep}"] = run_dir
    if with_git:
        run_dir = cell_dir(batch, TASK, "guidance:raw", MODEL, "high", 0)
        workspace = git_repo(run_dir / "workspace", {"src/calc.py": "def div(a, b):\n    return a / b\n"})
        start = commit(workspace, "start")
        write_files(
            workspace,
            {
                "src/calc.py": "def div(a, b):\n    if b == 0:\n        raise ZeroDivisionError('b')\n"
                "    return a / b\n",
                "tests/test_new.py": "# sonnet wrote this\n",
            },
        )
        write_cell(
            batch,
            TASK,
            "guidance:raw",
            model=MODEL,
            effort="high",
            rep=0,
            passed=False,
            meta=True,
            harness_version=HARNESS_VERSION,
            meta_overrides={"start_sha": start},
        )
        _files(batch, run_dir, "guidance:raw")
        cells["git"] = run_dir
    if with_leak:
        run_dir = write_cell(
            batch,
            TASK,
            "guidance:none",
            model=MODEL,
            rep=2,
            passed=True,
            meta=True,
            harness_version=HARNESS_VERSION,
        )
        (run_dir / "workspace.diff").write_text(
            "diff --git a/CLAUDE.md b/CLAUDE.md\nnew file mode 100644\n--- /dev/null\n+++ b/CLAUDE.md\n"
            "@@ -0,0 +1 @@\n+notes\n"
        )
        _files(batch, run_dir, "guidance:none")
        cells["leak"] = run_dir
    return RatingBatch(batch, cells)
