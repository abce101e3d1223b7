"""The built-in graders (builtin:pytest, builtin:command) in the real grade container: a real fix passes, the
null workspace fails, and the three grader tricks (a workspace sitecustomize.py, a pytest.py shadow,
os._exit(0) in imported code) fail against them, while each of them does fool a naive ``python3 -m pytest``
grader (the control)."""

from __future__ import annotations

import json
import secrets
import shutil
import subprocess
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from dokimi.grading.entrypoints import GradeOutcome, grade_run, run_entry_point
from dokimi.grading.environment import GradeEnvironment
from dokimi.repo.arms import ARM_RAW
from dokimi.repo.manifest import LoadedManifest, load_manifest, load_tasks
from dokimi.repo.workspace import WorkspaceSource, prepare_workspace
from dokimi.sandbox.container import container_name
from dokimi.sandbox.image import BuiltImage, build_image
from dokimi.sandbox.specs import ContainerSettings, image_env, prepare_agent_dirs
from dokimi.schemas.manifest import EntryPoints
from dokimi.schemas.task import Task
from dokimi.source import Repo, open_source
from dokimi.source.export import export_tree_as_stored
from tests.helpers.git import commit, git, git_repo

pytestmark = pytest.mark.docker

EVAL = ".agent-eval"
PYTEST = "builtin:pytest"
COMMAND = "builtin:command python3 -m pytest -p no:cacheprovider -o addopts= --junitxml={report} tests"
NAIVE = "env PYTHONPATH=. python3 -m pytest -p no:cacheprovider -q tests"

MANIFEST = f"""\
schema: repo_manifest.v1
id: byo-builtin
eval_dir: {EVAL}
image: {{dockerfile: {EVAL}/Dockerfile, network: none}}
entry_points:
  grade: {PYTEST}
tasks: {EVAL}/tasks
"""

OPS_BUGGY = "def add(a, b):\n    return a - b\n\n\ndef mul(a, b):\n    return a * b\n"
TESTS_BEFORE = "from pkg import mul\n\n\ndef test_mul():\n    assert mul(2, 3) == 6\n"
TEST_ADD = "\n\ndef test_add():\n    from pkg import add\n\n    assert add(2, 3) == 5\n"


@dataclass
class Project:
    path: Path
    repo: Repo
    loaded: LoadedManifest
    image: BuiltImage
    content: Path
    task: Task


@pytest.fixture(scope="module")
def project(docker_available: bool, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Project]:
    root = tmp_path_factory.mktemp("byo")
    path = git_repo(
        root / "repo",
        {
            "pkg/__init__.py": "from pkg.ops import add, mul\n",
            "pkg/ops.py": OPS_BUGGY,
            "tests/test_ops.py": TESTS_BEFORE,
            "pytest.ini": "[pytest]\npythonpath = .\n",
        },
    )
    buggy = git(path, "rev-parse", "HEAD").strip()
    fixed = commit(
        path,
        "fix add",
        files={
            "pkg/ops.py": OPS_BUGGY.replace("a - b", "a + b"),
            "tests/test_ops.py": TESTS_BEFORE + TEST_ADD,
        },
    )
    oracle = git(path, "diff", "--binary", buggy, fixed, "--", "pkg")
    tests = git(path, "diff", "--binary", buggy, fixed, "--", "tests")
    task = {
        "id": "fix_add", "family": "fix", "base": buggy, "prompt": "add subtracts; fix it", "grader": PYTEST,
        "test_patch": "tests.patch", "oracle_patch": "oracle.patch",
        "fail_to_pass": ["tests/test_ops.py::test_add"], "pass_to_pass": ["tests/test_ops.py::test_mul"],
    }  # fmt: skip
    commit(
        path,
        "eval",
        files={
            f"{EVAL}/repo-eval.yaml": MANIFEST,
            f"{EVAL}/Dockerfile": "FROM dokimi-base:bookworm\n",
            f"{EVAL}/tasks/fix_add/task.json": json.dumps(task, indent=2) + "\n",
            f"{EVAL}/tasks/fix_add/tests.patch": tests,
            f"{EVAL}/tasks/fix_add/oracle.patch": oracle,
        },
    )
    with open_source(str(path)) as repo:
        loaded = load_manifest(repo.eval_snapshot(), manifest=None, manifest_file=None, required=True)
        assert loaded.manifest is not None
        image = build_image(repo, loaded.manifest, work_dir=root)
        content = root / "content"
        export_tree_as_stored(repo.eval_snapshot(), content, under=EVAL)
        (parsed,) = load_tasks(repo.eval_snapshot(), loaded.manifest)
        assert parsed.task is not None, parsed.errors
        yield Project(path, repo, loaded, image, content, parsed.task)


def _run_dir(project: Project, tmp_path: Path) -> Path:
    """A run directory as the runner leaves it before grading (the workspace untouched so far)."""
    run_dir = tmp_path / f"run-{secrets.token_hex(3)}"
    run_dir.mkdir()
    prepared = prepare_workspace(
        WorkspaceSource(project.repo, EVAL, project.loaded.guidance_globs),
        project.task,
        arm=ARM_RAW,
        dest=run_dir / "workspace",
        patches_root=project.content / "tasks" / "fix_add",
    )
    shutil.copyfile(project.content / "tasks" / "fix_add" / "task.json", run_dir / "task.json")
    meta = {**prepared.meta_fields(), "task": "fix_add", "harness": "none", "model": "none", "rep": 0}
    (run_dir / "meta.json").write_text(json.dumps(meta))
    (run_dir / "events.jsonl").write_text("")
    (run_dir / "answer.txt").write_text("")
    assert project.loaded.manifest is not None
    prepare_agent_dirs(run_dir, image_env(project.loaded.manifest.image, task="fix_add").scratch)
    return run_dir


def _environment(
    project: Project, *, grade: str = "true", static: str | None = None, image_config: bool = True
) -> GradeEnvironment:
    manifest = project.loaded.manifest
    return GradeEnvironment(
        containers=ContainerSettings(
            project.image.ref, manifest.image if manifest is not None and image_config else None, "none"
        ),
        eval_content=project.content,
        source_dir=None,
        entry_points=EntryPoints(grade=grade, oracle="true", static=static),
        grade_timeout_s=300,
    )


def _grade(project: Project, run_dir: Path, command: str) -> GradeOutcome:
    return grade_run(
        _environment(project, grade=command),
        run_dir,
        project.task,
        name=container_name(f"bg{secrets.token_hex(3)}", "fix_add", "grade"),
    )


def _naive_exit_code(project: Project, run_dir: Path) -> int | None:
    """The control: what ``python3 -m pytest`` in the workspace says (the exit code a naive grader trusts)."""
    result = run_entry_point(
        _environment(project, static=NAIVE, image_config=False),
        run_dir,
        project.task,
        "static",
        name=container_name(f"bn{secrets.token_hex(3)}", "fix_add", "grade"),
    )
    return result.returncode


def _passed(outcome: GradeOutcome) -> bool | None:
    assert outcome.grade is not None, outcome
    return outcome.grade.pass_


@pytest.mark.parametrize("command", [PYTEST, COMMAND])
def test_the_fix_passes_and_the_null_workspace_fails(project: Project, tmp_path: Path, command: str) -> None:
    untouched = _run_dir(project, tmp_path)
    null = _grade(project, untouched, command)
    assert _passed(null) is False and not null.grader_failure
    assert null.grade is not None and null.grade.metrics["fail_to_pass"] is False
    fixed = _run_dir(project, tmp_path)
    ops = fixed / "workspace" / "pkg" / "ops.py"
    ops.write_text(ops.read_text().replace("a - b", "a + b"))
    outcome = _grade(project, fixed, command)
    assert _passed(outcome) is True, outcome.grade
    assert outcome.grade is not None and outcome.grade.metrics["pass_to_pass"] is True


SITECUSTOMIZE = """\
# would make every test report pass, and leaves a mark that it ran
import os
open("/eval/run/sitecustomize-ran", "w").close()
try:
    import _pytest.reports as reports
    original = reports.TestReport.__init__
    def forced(self, *args, **kwargs):
        original(self, *args, **kwargs)
        self.outcome = "passed"
    reports.TestReport.__init__ = forced
except Exception:
    pass
"""

PYTEST_SHADOW = """\
# a pytest that reports every test it is given as passed, and exits 0
import sys
open("/eval/run/shadow-ran", "w").close()
class _Report:
    failed = False
    skipped = False
    passed = True
    when = "call"
    def __init__(self, nodeid):
        self.nodeid = nodeid
def main(args=None, plugins=()):
    for plugin in plugins:
        for arg in args or []:
            if "::" in arg:
                plugin.pytest_runtest_logreport(_Report(arg))
        plugin.pytest_sessionfinish(None, 0)
    return 0
if __name__ == "__main__":
    sys.exit(0)
"""


def _trick(run_dir: Path, trick: str) -> None:
    workspace = run_dir / "workspace"
    if trick == "sitecustomize":
        (workspace / "sitecustomize.py").write_text(SITECUSTOMIZE)
    elif trick == "pytest_shadow":
        (workspace / "pytest.py").write_text(PYTEST_SHADOW)
    else:
        init = workspace / "pkg" / "__init__.py"
        init.write_text(init.read_text() + "import os\nos._exit(0)\n")


@pytest.mark.parametrize("trick", ["sitecustomize", "pytest_shadow", "os_exit"])
def test_each_grader_trick_fools_a_naive_pytest_run(project: Project, tmp_path: Path, trick: str) -> None:
    run_dir = _run_dir(project, tmp_path)
    (run_dir / "workspace" / "tests" / "test_ops.py").write_text(TESTS_BEFORE + TEST_ADD)  # the hidden test
    _trick(run_dir, trick)
    code = _naive_exit_code(project, run_dir)
    if trick == "sitecustomize":
        # python3 -m pytest puts the workspace on sys.path, so its sitecustomize runs and forces every pass
        assert (run_dir / "sitecustomize-ran").exists() and code == 0
    else:
        assert code == 0


@pytest.mark.parametrize("command", [PYTEST, COMMAND])
@pytest.mark.parametrize("trick", ["sitecustomize", "pytest_shadow", "os_exit"])
def test_each_grader_trick_fails_against_the_builtin_graders(
    project: Project, tmp_path: Path, trick: str, command: str
) -> None:
    run_dir = _run_dir(project, tmp_path)
    _trick(run_dir, trick)
    outcome = _grade(project, run_dir, command)
    assert _passed(outcome) is False, outcome.grade
    assert not (run_dir / "sitecustomize-ran").exists()
    assert not (run_dir / "shadow-ran").exists()


def test_edited_tests_and_an_added_conftest_are_put_back(project: Project, tmp_path: Path) -> None:
    run_dir = _run_dir(project, tmp_path)
    workspace = run_dir / "workspace"
    (workspace / "tests" / "test_ops.py").write_text(
        "def test_add():\n    pass\n\n\ndef test_mul():\n    pass\n"
    )
    (workspace / "conftest.py").write_text(
        "import pytest\n\n\n@pytest.hookimpl(hookwrapper=True)\ndef pytest_runtest_makereport(item, call):\n"
        "    outcome = yield\n    outcome.get_result().outcome = 'passed'\n"
    )
    outcome = _grade(project, run_dir, PYTEST)
    assert _passed(outcome) is False
    assert outcome.grade is not None
    assert sorted(outcome.grade.details["tests_restored"]) == ["conftest.py", "tests/test_ops.py"]


def test_a_rewritten_object_in_the_workspace_git_is_a_grader_failure(
    project: Project, tmp_path: Path
) -> None:
    """The start tree is read from the workspace's .git and every object is hashed again: an agent that
    replaces the stored test file (to make the restored tests trivial) is caught."""
    import zlib

    run_dir = _run_dir(project, tmp_path)
    workspace = run_dir / "workspace"
    safe = ["git", "-c", "safe.directory=*"]  # the workspace belongs to the container user
    oid = subprocess.run(
        [*safe, "rev-parse", "HEAD:tests/test_ops.py"],
        cwd=workspace,
        capture_output=True,
        text=True,
        check=True,
    ).stdout.strip()
    objects = workspace / ".git" / "objects"
    for pack in sorted((objects / "pack").glob("*.pack")):  # every object loose, so one can be replaced
        moved = tmp_path / pack.name
        shutil.move(pack, moved)
        pack.with_suffix(".idx").unlink()
        subprocess.run([*safe, "unpack-objects", "-q"], cwd=workspace, input=moved.read_bytes(), check=True)
    loose = objects / oid[:2] / oid[2:]
    assert loose.is_file()
    loose.chmod(0o644)
    fake = b"def test_mul():\n    pass\n"
    loose.write_bytes(zlib.compress(b"blob %d\0" % len(fake) + fake))
    outcome = _grade(project, run_dir, PYTEST)
    assert outcome.grader_failure
    assert outcome.grade is not None and "does not hash to its name" in " ".join(outcome.grade.errors)
