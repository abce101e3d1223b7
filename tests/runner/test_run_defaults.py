"""What a user expects of ``repo run`` without being told, with real containers and the fake harness:

- without ``--out`` the batch lands under ``$DOKIMI_HOME/runs/<manifest id>/``, out of the working tree,
  and the first line says where; ``repo report NAME`` then finds it by its name;
- a finished cell's workspace reads with ``git diff`` as the user who ran dokimi (root here), while what the
  agent's code planted in .git during grading (an fsmonitor, an external diff, a pager, an alias, a hook,
  a nested repository with its own fsmonitor) runs nothing on the host.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.helpers.git import commit, git_repo
from tests.helpers.runs import GRADE_PY, ORACLE_PY, fake_harness, task_json

pytestmark = pytest.mark.docker

MANIFEST = """\
schema: repo_manifest.v1
id: defaults-tiny
eval_dir: .agent-eval
image:
  dockerfile: .agent-eval/Dockerfile
  network: none
entry_points:
  grade: "sh -c 'python3 plant.py >&2; exec python3 {eval_dir}/grade.py {run_dir}'"
  oracle: "python3 {eval_dir}/oracle.py {run_dir}"
tasks: .agent-eval/tasks
"""
"""The tiny repository's manifest (an id of its own: other sessions remove runner-tiny's images), with a
grade that runs a file of the workspace first, as a test suite imports the code under test: the agent's code
runs at grade time with the workspace writable."""

#: The agent: fixes f.txt, leaves plant.py for grade time, and makes a nested repository (a gitlink in the
#: index) whose own config holds an fsmonitor.
AGENT = """\
#!/bin/sh
if [ "$1" = "--version" ]; then echo "fake-harness 1.0.0"; exit 0; fi
echo after > f.txt
cat > plant.py <<'EOF'
{plant}
EOF
g="git -c user.name=a -c user.email=a@b.c"
$g init -q sub && $g -C sub commit -q --allow-empty -m sub
printf '[core]\\n\\tfsmonitor = "touch {marker}-nested; false"\\n' >> sub/.git/config
$g add sub plant.py f.txt 2>/dev/null
echo "done"
"""

PLANT = """\
import os, shutil
marker = {marker!r}
evil = (
    "[core]\\n\\tfsmonitor = \\"touch " + marker + "-fsmonitor; false\\"\\n"
    "\\tpager = touch " + marker + "-pager\\n"
    "\\thooksPath = .git/evil-hooks\\n"
    "[diff]\\n\\texternal = \\"touch " + marker + "-external; true\\"\\n"
    "[alias]\\n\\tdiff = !touch " + marker + "-alias\\n"
)
def attempt(what, step):
    try:
        step()
        print("planted", what)
    except OSError as exc:
        print("refused", what, exc)
def append():
    with open(".git/config", "a") as config:
        config.write(evil)
def replace_dir():  # .git/config is mounted read-only: a new .git beside the old one, swapped in
    shutil.copytree(".git", ".git-new", symlinks=True, ignore=shutil.ignore_patterns("config"))
    with open(".git-new/config", "w") as config:
        config.write("[core]\\n\\trepositoryformatversion = 0\\n" + evil)
    os.rename(".git", ".git-old")
    os.rename(".git-new", ".git")
def hooks():
    for where in (".git/evil-hooks", ".git/hooks"):
        os.makedirs(where, exist_ok=True)
        for name in ("post-index-change", "pre-commit"):
            path = os.path.join(where, name)
            with open(path, "w") as hook:
                hook.write("#!/bin/sh\\ntouch " + marker + "-hook\\n")
            os.chmod(path, 0o755)
attempt("config", append)
attempt("hooks", hooks)
attempt("a new .git", replace_dir)
"""


def _repository(root: Path) -> tuple[Path, str]:
    repo = git_repo(root / "tiny", {"f.txt": "before\n", "README.md": "# tiny\n"})
    base = subprocess.run(
        ["git", "rev-parse", "HEAD"], cwd=repo, capture_output=True, text=True, check=True
    ).stdout.strip()
    files = {
        ".agent-eval/repo-eval.yaml": MANIFEST,
        ".agent-eval/Dockerfile": "FROM dokimi-base:bookworm\n",
        ".agent-eval/grade.py": GRADE_PY,
        ".agent-eval/oracle.py": ORACLE_PY,
        ".agent-eval/tasks/fix_f/task.json": task_json("fix_f", base),
    }
    return repo, commit(repo, "add the eval dir", files=files)


def _dokimi(args: list[str], cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "dokimi", *args],
        cwd=cwd, capture_output=True, text=True, timeout=600, check=False,
    )  # fmt: skip


@pytest.fixture
def finished_batch(docker_available: bool, tmp_path: Path, monkeypatch: pytest.MonkeyPatch):  # type: ignore[no-untyped-def]
    """One finished cell of the tiny repository, run without --out from a directory of its own, with
    DOKIMI_HOME in tmp_path: (the run, DOKIMI_HOME, the cwd, the marker prefix)."""
    home = tmp_path / "home"
    monkeypatch.setenv("DOKIMI_HOME", str(home))
    repo, eval_sha = _repository(tmp_path)
    marker = str(tmp_path / "ran")
    profile, binary = fake_harness(tmp_path / "harness")
    binary.write_text(AGENT.replace("{plant}", PLANT.format(marker=marker)).replace("{marker}", marker))
    cwd = tmp_path / "cwd"
    cwd.mkdir()
    done = _dokimi(
        ["repo", "run", f"{repo}@{eval_sha}", "--manifest", ".agent-eval/repo-eval.yaml", "--arm",
         "guidance:raw", "--model", "m", "--reps", "1", "--batch", "b", "--harness", str(profile), "--bin",
         str(binary), "--allow-unchecked"],
        cwd,
    )  # fmt: skip
    yield done, home, cwd, marker
    listed = subprocess.run(
        ["docker", "images", "-q", "--filter", "label=dokimi.repo.manifest-id=defaults-tiny"],
        capture_output=True, text=True, check=False,
    )  # fmt: skip
    if listed.stdout.split() and os.environ.get("DOKIMI_TEST_KEEP_IMAGES") != "1":
        subprocess.run(["docker", "rmi", "-f", *set(listed.stdout.split())], capture_output=True, check=False)


def test_a_batch_without_out_lands_under_dokimi_home_and_says_so_first(finished_batch) -> None:  # type: ignore[no-untyped-def]
    done, home, cwd, _ = finished_batch
    assert done.returncode == 0, done.stderr
    root = home / "runs" / "defaults-tiny" / "b"
    said = f"batch {root} (the default place; --out DIR puts batches elsewhere)"
    assert done.stderr.splitlines()[0] == said
    assert done.stdout.splitlines()[0].startswith(f"batch {root}")
    assert len(list(root.glob("fix_f/*/*/*/rep0/result.json"))) == 1
    assert list(cwd.iterdir()) == []  # nothing in the working directory
    reported = _dokimi(["repo", "report", "b"], cwd)  # found by its name
    assert reported.returncode == 0, reported.stderr
    assert "batch b: 1 finished" in reported.stdout


def test_a_finished_workspace_reads_with_git_as_root_and_runs_nothing_planted(finished_batch) -> None:  # type: ignore[no-untyped-def]
    done, home, _, marker = finished_batch
    assert done.returncode == 0, done.stderr
    (run_dir,) = (home / "runs" / "defaults-tiny" / "b").glob("fix_f/*/*/*/rep0")
    workspace = run_dir / "workspace"
    after_grade = run_dir / "agent-git" / "after-grade"
    # the attack was mounted: grade ran the agent's plant.py, and what it wrote is moved aside
    assert "planted a new .git" in (run_dir / "grade.stderr").read_text()
    assert "fsmonitor" in (after_grade / "config").read_text()
    assert (after_grade / "hooks" / "pre-commit").is_file() and (after_grade / "evil-hooks").is_dir()
    assert "Written by dokimi" in (workspace / ".git" / "config").read_text()
    assert "fsmonitor" in (after_grade / "nested" / "sub" / ".git" / "config").read_text()
    assert not os.path.lexists(workspace / "sub" / ".git")  # git would enter it with its GIT_DIR set
    if os.geteuid() == 0:  # given back to root: the directory and .git, not the work tree's files
        assert workspace.stat().st_uid == 0 and (workspace / ".git" / "config").stat().st_uid == 0
        assert (workspace / "f.txt").stat().st_uid != 0

    env = {k: v for k, v in os.environ.items() if not k.startswith("GIT_CONFIG")}
    env |= {"GIT_CONFIG_NOSYSTEM": "1", "GIT_CONFIG_GLOBAL": os.devnull, "PAGER": "cat"}
    for argv in (["diff"], ["diff", "HEAD"], ["status"], ["log", "-p", "-1"]):
        subprocess.run(["git", *argv], cwd=workspace, env=env, capture_output=True, check=False)
    diff = subprocess.run(["git", "diff", "HEAD", "--", "f.txt"], cwd=workspace, env=env, capture_output=True,
                          text=True, check=False)  # fmt: skip
    assert diff.returncode == 0, diff.stderr  # no "dubious ownership"
    assert "-before" in diff.stdout and "+after" in diff.stdout
    subprocess.run(["git", "commit", "-qm", "x", "--allow-empty"], cwd=workspace, env=env, check=True)
    ran = sorted(p.name for p in Path(marker).parent.iterdir() if p.name.startswith("ran-"))
    assert ran == []

    # the control: the planted fsmonitor is a command this git runs when a config names it
    control = f"touch {marker}-control; false"
    subprocess.run(["git", "-c", f"core.fsmonitor={control}", "status"], cwd=workspace, env=env,
                   capture_output=True, check=False)  # fmt: skip
    assert Path(f"{marker}-control").exists()
