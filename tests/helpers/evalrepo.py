"""A toy repository with a complete eval dir, for the container and tasks check tests.

Commit 1 is the code (a bug in ``add``, nested guidance); commit 2 adds ``.agent-eval/``: the manifest, a
Dockerfile (FROM the local base image, with an ENTRYPOINT that would fail if dokimi did not empty it), one
grader script that dispatches on task.json's ``grader``, and an oracle that applies ``oracle.patch`` and
copies ``gold_answer.txt`` to answer.txt. Task bases are commit 1.

Graders (task.json ``grader``):

- ``calc``: imports the workspace's ``app.calc`` and passes when ``add(2, 3) == 5``;
- ``recall``: score-only, the share of ``gold.txt`` lines found in answer.txt;
- ``always_pass``: passes whatever the workspace holds (so the null workspace passes: a broken task);
- ``crash``: raises; ``hang``: sleeps ten minutes; ``invalid``: writes a grade.json with ``"pass": "yes"``;
- ``inspect``: passes and reports, as metrics, what the grade container sees (for the isolation tests).
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from tests.helpers.git import commit, git_repo

EVAL_DIR = ".agent-eval"
MANIFEST_PATH = f"{EVAL_DIR}/repo-eval.yaml"
BASE_IMAGE = "dokimi-base:bookworm"

MANIFEST = """\
schema: repo_manifest.v1
id: toy
eval_dir: .agent-eval
guidance:
  globs: ["**/AGENTS.md"]
image:
  dockerfile: .agent-eval/Dockerfile
  env: {TOY_SCRATCH: "{run_dir}/scratch"}
  network: none
entry_points:
  grade: "python3 {eval_dir}/grade.py {run_dir}"
  oracle: "python3 {eval_dir}/oracle.py {run_dir} {task}"
  static: "python3 {eval_dir}/static.py --out {out}"
tasks: .agent-eval/tasks
"""

DOCKERFILE = f"""\
FROM {BASE_IMAGE}
COPY .agent-eval/tools/ /opt/toy-tools/
ENTRYPOINT ["/bin/false"]
"""

GRADER = r"""
import json, os, subprocess, sys, time
from pathlib import Path

run_dir = Path(sys.argv[1])
task = json.loads((run_dir / "task.json").read_text())
ws = run_dir / "workspace"
grade = {"schema": "repo_grade.v1", "task": task["id"], "grader": task["grader"], "pass": None,
         "metrics": {}, "details": {}, "errors": []}
kind = task["grader"]
if kind == "calc":
    sys.path.insert(0, str(ws))
    try:
        from app.calc import add
        ok = add(2, 3) == 5
    except Exception as exc:
        ok = False
        grade["details"]["error"] = repr(exc)
    grade["pass"] = ok
    grade["metrics"]["add_ok"] = ok
elif kind == "recall":
    gold_file = Path("/eval/content") / "tasks" / task["id"] / "gold.txt"
    gold = [line for line in gold_file.read_text().splitlines() if line]
    answer = (run_dir / "answer.txt").read_text() if (run_dir / "answer.txt").exists() else ""
    grade["metrics"]["recall"] = sum(1 for g in gold if g in answer) / len(gold)
elif kind == "always_pass":
    grade["pass"] = True
elif kind == "crash":
    raise RuntimeError("the toy grader exploded")
elif kind == "hang":
    time.sleep(600)
elif kind == "invalid":
    grade["pass"] = "yes"
elif kind == "inspect":
    git = lambda *a: subprocess.run(["git", *a], cwd=ws, capture_output=True, text=True)
    status = git("status", "--porcelain")
    git("diff", "HEAD")
    home = Path(os.environ["HOME"])
    grade["pass"] = True
    grade["metrics"] = {
        "uid": os.getuid(),
        "hooks_visible": (ws / ".git" / "hooks").exists(),
        "filter_ran": (Path("/tmp") / "toy-filter-ran").exists(),
        "hook_ran": (Path("/tmp") / "toy-hook-ran").exists(),
        "git_status_ok": status.returncode == 0,
        "home_is_grade_home": str(home) == "/eval/run/grade-home",
        "home_entries": len([p for p in home.iterdir() if p.name != ".gitconfig"]),
        "global_config_neutral": (
            Path(os.environ["GIT_CONFIG_GLOBAL"]).read_text().startswith("# Written by dokimi")
            and os.environ.get("GIT_CONFIG_NOSYSTEM") == "1"
            and os.environ.get("GIT_ATTR_NOSYSTEM") == "1"
        ),
        "nousersite": os.environ.get("PYTHONNOUSERSITE") == "1",
        "hooks_path_off": git("config", "core.hooksPath").stdout.strip() == "/dev/null",
        "eval_dir_writable": os.access("/eval/content", os.W_OK),
        "source_visible": Path("/eval/source").exists(),
        "scratch_set": os.environ.get("TOY_SCRATCH") == "/eval/run/scratch",
    }
    grade["details"]["git_status"] = status.stdout + status.stderr
(run_dir / "grade.json").write_text(json.dumps(grade))
cache = Path("/cache/toy")
if cache.is_dir():  # a declared cache (read-write in every run)
    (cache / (task["id"] + ".txt")).write_text("filled by grade\n")
"""

ORACLE = r"""
import shutil, subprocess, sys
from pathlib import Path

run_dir, task_id = Path(sys.argv[1]), sys.argv[2]
task_dir = Path("/eval/content/tasks") / task_id
patch = task_dir / "oracle.patch"
if patch.exists():
    subprocess.run(["git", "apply", str(patch)], cwd=run_dir / "workspace", check=True)
gold = task_dir / "gold_answer.txt"
if gold.exists():
    shutil.copyfile(gold, run_dir / "answer.txt")
"""

STATIC = r"""
import json, sys
out = sys.argv[sys.argv.index("--out") + 1]
claims = [{"file": "AGENTS.md", "line": 1, "status": "ok", "kind": "path", "claim": "app/calc.py"}]
open(out, "w").write(json.dumps({"schema": "repo_static.v1", "claims": claims, "checker": "toy"}))
"""

ORACLE_PATCH = """\
diff --git a/app/calc.py b/app/calc.py
--- a/app/calc.py
+++ b/app/calc.py
@@ -1,2 +1,2 @@
 def add(a, b):
-    return a - b
+    return a + b
"""

CODE: dict[str, str] = {
    "AGENTS.md": "# toy\nRun the tests with python3 -m pytest.\n",
    "app/AGENTS.md": "# app guidance\n",
    "app/__init__.py": "",
    "app/calc.py": "def add(a, b):\n    return a - b\n",
}


def task_json(task_id: str, base: str, grader: str, **extra: Any) -> str:
    data = {
        "id": task_id,
        "family": "fix",
        "base": base,
        "prompt": f"Do {task_id}.",
        "grader": grader,
        **extra,
    }
    return json.dumps(data, indent=2) + "\n"


#: task id -> (grader, task.json extras, extra files in the task directory)
TASKS: dict[str, tuple[str, dict[str, Any], dict[str, str]]] = {
    "fix_add": ("calc", {}, {"oracle.patch": ORACLE_PATCH}),
    "review_recall": (
        "recall",
        {"family": "review", "score": {"metric": "recall", "max": 1.0}},
        {"gold.txt": "app/calc.py:2\n", "gold_answer.txt": "app/calc.py:2: subtracts instead of adding\n"},
    ),
}


def make_eval_repo(
    path: Path,
    *,
    tasks: Mapping[str, tuple[str, dict[str, Any], dict[str, str]]] = TASKS,
    code: Mapping[str, str] | None = None,
    dockerfile: str = DOCKERFILE,
    manifest: str = MANIFEST,
) -> tuple[Path, str, str]:
    """The toy repository at ``path``: (path, base SHA, eval SHA)."""
    repo = git_repo(path, dict(code if code is not None else CODE), msg="code")
    base = commit(repo, "base")
    files: dict[str, str | None] = {
        MANIFEST_PATH: manifest,
        f"{EVAL_DIR}/Dockerfile": dockerfile,
        f"{EVAL_DIR}/tools/marker.txt": "toy tooling\n",
        f"{EVAL_DIR}/grade.py": GRADER,
        f"{EVAL_DIR}/oracle.py": ORACLE,
        f"{EVAL_DIR}/static.py": STATIC,
    }
    for task_id, (grader, extra, task_files) in tasks.items():
        files[f"{EVAL_DIR}/tasks/{task_id}/task.json"] = task_json(task_id, base, grader, **extra)
        for name, content in task_files.items():
            files[f"{EVAL_DIR}/tasks/{task_id}/{name}"] = content
    head = commit(repo, "eval dir", files=files)
    return repo, base, head
