"""dokimi's built-in graders, run in the grade container: ``builtin:pytest`` and ``builtin:command CMD``.

Standard library only (it runs under the image's ``python3 -I``); it never imports dokimi, and it never
imports or runs a file of the workspace itself: only the test process it starts does.

How a run is graded, the way SWE-bench grades a patch:

1. **The tree under test.** A fresh directory at a path the workspace cannot predict (a random name under a
   private temporary directory) receives the agent's final workspace without ``.git`` and without bytecode
   caches. Every test file (``test_*.py``, ``*_test.py``, ``conftest.py``, ``pytest.ini``, anything under a
   ``tests``/``test`` directory) and every file the task's test patch touches is then put back exactly as it
   was at ``start_sha`` (an added one is removed), and the hidden tests (``test_patch``) are applied over it.
   The ``start_sha`` content is read from the workspace's object store and every object on the way (commit,
   trees, blobs) is hashed again, so an object the agent rewrote in ``.git`` is caught, not trusted.
2. **Isolated tests.** ``builtin:pytest`` runs pytest under ``python3 -I`` (no PYTHON* variables, no user
   site, no current directory on ``sys.path``), so a ``sitecustomize.py`` or a ``pytest.py`` in the tree is
   never imported at start-up; the tree's import roots (:func:`import_roots`: each project's ``src`` and
   directory, then the tree's root) go on ``sys.path`` only after pytest itself is imported, after the
   standard library and before site-packages, so the tree under test wins over a copy of its package
   installed in the image (editable or not) and shadows no standard module.
   ``addopts`` from the tree's configuration, PYTEST_ADDOPTS and PYTEST_PLUGINS are ignored.
   ``builtin:command`` runs the repository's command with ``PYTHONSAFEPATH=1`` and ``PYTHONNOUSERSITE=1``
   and without PYTHONPATH, PYTHONSTARTUP and PYTHONHOME.
3. **A report the tree cannot forge in advance.** pytest's results are written by a plugin to a report path
   and stamped with a random nonce; both reach the test process on its standard input (never its argv or
   environment), and a report without the nonce is no report. ``builtin:command`` substitutes ``{report}``
   with such a path for a runner that writes JUnit XML there. A test process that ends early (``os._exit(0)``
   in imported code) leaves no report, which fails the run whatever its exit code.
4. **The verdict.** pass only when every ``fail_to_pass`` id passed and no ``pass_to_pass`` id failed (or was
   not run). ``builtin:command`` without ``{report}`` passes when the command exits 0.

Limits: the tests run the agent's code, in the same container as this grader. Code that searches the test
process's memory for the nonce, or the container for this process, can still interfere; the built-in graders
close the cheap shortcuts (start-up hooks, shadow modules, exiting early, a report written in advance, edited
or added tests and conftest files), not a determined attack on the grader.

Usage (the framework builds these argv; ``{eval_dir}`` is /eval/content):

    python3 -I builtin_grade.py grade --contract /eval/run --eval-dir /eval/content --task ID pytest
    python3 -I builtin_grade.py grade --contract /eval/run --eval-dir /eval/content --task ID command -- CMD
    python3 -I builtin_grade.py oracle --contract /eval/run --eval-dir /eval/content --task ID

The task's directory is the directory named ID under the eval dir that holds a task.json (the one whose
bytes equal {run_dir}/task.json when there are several).

With no ``fail_to_pass`` ids in task.json, ``grade`` runs in discovery mode: it runs the test files the test
patch touches and records every test's outcome in ``details.outcomes`` (``repo task new`` reads them from
the null and the oracle workspaces to find FAIL_TO_PASS and PASS_TO_PASS), with ``pass: false``. In every
mode, ``details.collection_errors`` holds the first error line of each test file pytest could not collect
(an import that fails at this base, for example).
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import re
import secrets
import shutil
import signal
import stat
import subprocess
import sys
import tempfile
import xml.etree.ElementTree as ET
from pathlib import Path
from typing import Any

GRADE_JSON = "grade.json"
TEST_TIMEOUT_S = float(os.environ.get("DOKIMI_BUILTIN_TEST_TIMEOUT_S", "1800"))
MAX_IDS_IN_DETAILS = 200

TEST_FILE = re.compile(r"(^|/)(test_[^/]*\.py|[^/]*_test\.py|conftest\.py|pytest\.ini)$")
TEST_DIR = re.compile(r"(^|/)(tests?)/")

CHILD = r"""
import json, os, sys
config = json.loads(sys.stdin.readline())
sys.stdin.close()
sys.stdin = open(os.devnull)
import pytest
# the tree's import roots go after the standard library and before site-packages: the tree cannot shadow
# the standard library, and its code wins over a copy of itself installed in the image (editable or not)
installed = [i for i, p in enumerate(sys.path) if p.endswith(("site-packages", "dist-packages"))]
at = installed[0] if installed else len(sys.path)
sys.path[at:at] = config["roots"]
outcomes = {}
collect_errors = {}

def first_error_line(text):
    lines = [line.strip() for line in text.splitlines() if line.strip()]
    errors = [line[1:].strip() for line in lines if line.startswith("E ")]
    return ((errors or lines or ["(no message)"])[0])[:300]

class DokimiRecorder:
    def pytest_runtest_logreport(self, report):
        previous = outcomes.get(report.nodeid)
        if report.failed:
            outcomes[report.nodeid] = "failed"
        elif report.skipped:
            if previous != "failed":
                outcomes[report.nodeid] = "skipped"
        elif report.when == "call" and previous is None:
            outcomes[report.nodeid] = "passed"

    def pytest_collectreport(self, report):
        if report.failed:
            collect_errors[report.nodeid or "(collection)"] = first_error_line(report.longreprtext)

    def pytest_sessionfinish(self, session, exitstatus):
        path = config["report"]
        with open(path + ".tmp", "w", encoding="utf-8") as handle:
            json.dump({"nonce": config["nonce"], "outcomes": outcomes, "collect_errors": collect_errors,
                       "exitstatus": int(exitstatus)}, handle)
        os.replace(path + ".tmp", path)

code = pytest.main(config["args"], plugins=[DokimiRecorder()])
sys.exit(int(code))
"""


class GradeError(Exception):
    """The grader could not grade (a broken task, a missing input): a grader failure, never a verdict."""


# --- inputs -------------------------------------------------------------------------------------------------


def read_json(path: Path) -> dict[str, Any]:
    if path.is_symlink() or not path.is_file():
        raise GradeError(f"{path} is missing or not a regular file")
    data = json.loads(path.read_text(encoding="utf-8"))
    if not isinstance(data, dict):
        raise GradeError(f"{path} is not a JSON object")
    return data


def find_task_dir(eval_dir: Path, task_id: str, run_dir: Path) -> Path:
    """The directory of the task under the (read-only) eval dir."""
    wanted = (run_dir / "task.json").read_bytes()
    found = []
    for dirpath, dirnames, filenames in os.walk(eval_dir):
        dirnames.sort()
        if os.path.basename(dirpath) == task_id and "task.json" in filenames:
            found.append(Path(dirpath))
    for candidate in found:
        if (candidate / "task.json").read_bytes() == wanted:
            return candidate
    if found:
        return found[0]
    raise GradeError(f"no directory {task_id}/ with a task.json under {eval_dir}")


def id_list(task: dict[str, Any], key: str) -> list[str]:
    value = task.get(key, [])
    if not isinstance(value, list) or not all(isinstance(v, str) and v for v in value):
        raise GradeError(f"task.json {key} must be a list of test ids")
    return list(value)


def task_file(task_dir: Path, task: dict[str, Any], key: str) -> Path | None:
    name = task.get(key)
    if name is None:
        return None
    if not isinstance(name, str) or name.startswith("/") or ".." in name.split("/"):
        raise GradeError(f"task.json {key} must be a path inside the task directory")
    path = task_dir / name
    if not path.is_file():
        raise GradeError(f"task.json {key}: {name} is not a file of the task directory")
    return path


# --- the start tree, verified object by object --------------------------------------------------------------


class ObjectReader:
    """``git cat-file --batch`` over the workspace's object store; every object is hashed again."""

    def __init__(self, git_dir: Path) -> None:
        env = clean_git_env()
        env["GIT_NO_REPLACE_OBJECTS"] = "1"
        self.proc = subprocess.Popen(
            ["git", f"--git-dir={git_dir}", "-c", "core.hooksPath=/dev/null", "-c", "core.fsmonitor=false",
             "cat-file", "--batch"],
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env,
        )  # fmt: skip

    def read(self, oid: str, want: str) -> bytes:
        assert self.proc.stdin is not None and self.proc.stdout is not None
        self.proc.stdin.write(oid.encode() + b"\n")
        self.proc.stdin.flush()
        header = self.proc.stdout.readline().decode().split()
        if len(header) != 3 or header[1] != want:
            raise GradeError(f"object {oid} is missing from the workspace's git, or is not a {want}")
        size = int(header[2])
        body = self.proc.stdout.read(size)
        self.proc.stdout.read(1)
        algo = hashlib.sha256 if len(oid) == 64 else hashlib.sha1
        if algo(f"{want} {size}\0".encode() + body).hexdigest() != oid:
            raise GradeError(f"object {oid} in the workspace's git does not hash to its name (rewritten)")
        return body

    def close(self) -> None:
        if self.proc.stdin:
            self.proc.stdin.close()
        self.proc.wait(timeout=60)


def start_tree(git_dir: Path, start_sha: str) -> dict[str, tuple[str, bytes]]:
    """path -> (mode, content) of every file of ``start_sha`` (links: their target), verified."""
    reader = ObjectReader(git_dir)
    try:
        commit = reader.read(start_sha, "commit")
        match = re.match(rb"tree ([0-9a-f]{40,64})\n", commit)
        if not match:
            raise GradeError(f"commit {start_sha} has no tree")
        files: dict[str, tuple[str, bytes]] = {}
        pending = [("", match.group(1).decode())]
        hexlen = len(start_sha) // 2
        while pending:
            prefix, tree_oid = pending.pop()
            body = reader.read(tree_oid, "tree")
            i = 0
            while i < len(body):
                space = body.index(b" ", i)
                nul = body.index(b"\0", space)
                mode = body[i:space].decode()
                name = body[space + 1 : nul].decode("utf-8", "surrogateescape")
                oid = body[nul + 1 : nul + 1 + hexlen].hex()
                i = nul + 1 + hexlen
                path = f"{prefix}{name}"
                if mode == "40000":
                    pending.append((path + "/", oid))
                elif mode == "160000":
                    continue  # a submodule: nothing to restore
                else:
                    files[path] = (mode, reader.read(oid, "blob"))
        return files
    finally:
        reader.close()


# --- the tree under test ------------------------------------------------------------------------------------


def copy_workspace(workspace: Path, tree: Path) -> None:
    """The workspace's files without .git and bytecode caches; links are copied as links, never followed, and
    anything that is not a file, a directory or a link is left out."""
    for dirpath, dirnames, filenames in os.walk(workspace):
        rel = os.path.relpath(dirpath, workspace)
        target = tree if rel == "." else tree / rel
        keep = []
        for name in dirnames:
            path = os.path.join(dirpath, name)
            if (rel == "." and name == ".git") or name == "__pycache__":
                continue
            if os.path.islink(path):
                os.symlink(os.readlink(path), target / name)
                continue
            (target / name).mkdir()
            keep.append(name)
        dirnames[:] = keep
        for name in filenames:
            path = os.path.join(dirpath, name)
            info = os.lstat(path)
            if stat.S_ISLNK(info.st_mode):
                os.symlink(os.readlink(path), target / name)
            elif stat.S_ISREG(info.st_mode) and not name.endswith((".pyc", ".pyo")):
                shutil.copyfile(path, target / name, follow_symlinks=False)
                os.chmod(target / name, 0o755 if info.st_mode & 0o111 else 0o644)


def patch_paths(patch: bytes) -> set[str]:
    """The paths a git patch names (old and new sides)."""
    paths = set()
    for line in patch.decode("utf-8", "surrogateescape").splitlines():
        if line.startswith(("--- a/", "+++ b/")):
            paths.add(line[6:].rstrip("\t"))
        elif line.startswith("diff --git "):
            parts = line.split(" ")
            if len(parts) == 4 and parts[2].startswith("a/") and parts[3].startswith("b/"):
                paths.update((parts[2][2:], parts[3][2:]))
    return paths


def is_test_path(path: str) -> bool:
    return bool(TEST_FILE.search(path) or TEST_DIR.search(path))


def _remove(path: Path) -> None:
    if path.is_symlink() or path.is_file():
        path.unlink()
    elif path.is_dir():
        shutil.rmtree(path)


def _write(path: Path, mode: str, content: bytes) -> None:
    _remove(path)
    parent = path.parent
    # a link the agent put where a directory of a test file belongs is replaced by a real directory
    for ancestor in reversed(path.parents):
        if ancestor.is_symlink() or (ancestor.exists() and not ancestor.is_dir()):
            _remove(ancestor)
    parent.mkdir(parents=True, exist_ok=True)
    if mode == "120000":
        os.symlink(content.decode("utf-8", "surrogateescape"), path)
    else:
        path.write_bytes(content)
        os.chmod(path, 0o755 if mode == "100755" else 0o644)


def restore_tests(tree: Path, start: dict[str, tuple[str, bytes]], extra: set[str]) -> list[str]:
    """Every test path (and each path of ``extra``) as it was at start_sha; returns the paths the agent had
    changed, added or deleted."""
    present = set()
    for dirpath, dirnames, filenames in os.walk(tree):
        rel = os.path.relpath(dirpath, tree)
        for name in filenames + [d for d in dirnames if os.path.islink(os.path.join(dirpath, d))]:
            present.add(name if rel == "." else f"{rel}/{name}")
    wanted = {p for p in set(start) | present if is_test_path(p)} | extra
    changed = []
    for path in sorted(wanted):
        target = tree / path
        if path in start:
            mode, content = start[path]
            same = (
                not target.is_symlink() and target.is_file() and mode != "120000"
                and target.read_bytes() == content
            )  # fmt: skip
            if not same:
                changed.append(path)
                _write(target, mode, content)
        elif target.is_symlink() or target.exists():
            changed.append(path)
            _remove(target)
    return changed


def clean_git_env() -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("GIT_") or k.startswith("GIT_CONFIG")}
    env["GIT_TERMINAL_PROMPT"] = "0"
    return env


def apply_patch(tree: Path, patch: Path) -> None:
    env = clean_git_env()
    env["GIT_CEILING_DIRECTORIES"] = str(tree.parent)
    proc = subprocess.run(
        ["git", "-c", "core.hooksPath=/dev/null", "apply", "--whitespace=nowarn", str(patch)],
        cwd=tree, env=env, capture_output=True, text=True,
    )  # fmt: skip
    if proc.returncode != 0:
        raise GradeError(f"the test patch does not apply over start_sha: {proc.stderr.strip()[-500:]}")


def prepare_tree(
    run_dir: Path, task_dir: Path, task: dict[str, Any], private: Path
) -> tuple[Path, list[str], set[str]]:
    """The tree under test (step 1 of the module docstring): (tree, test paths the agent changed, paths the
    test patch touches)."""
    meta = read_json(run_dir / "meta.json")
    start_sha = meta.get("start_sha")
    if not isinstance(start_sha, str) or not re.fullmatch(r"[0-9a-f]{40}|[0-9a-f]{64}", start_sha):
        raise GradeError("meta.json has no start_sha")
    workspace = run_dir / "workspace"
    git_dir = workspace / ".git"
    if git_dir.is_symlink() or not git_dir.is_dir():
        raise GradeError(
            "the workspace has no .git directory, so start_sha cannot be read (the agent removed it)"
        )
    start = start_tree(git_dir, start_sha)
    tree = private / f"tree-{secrets.token_hex(8)}"
    tree.mkdir()
    copy_workspace(workspace, tree)
    test_patch = task_file(task_dir, task, "test_patch")
    touched = patch_paths(test_patch.read_bytes()) if test_patch else set()
    changed = restore_tests(tree, start, touched)
    if test_patch is not None:
        apply_patch(tree, test_patch)
    return tree, changed, touched


# --- running the tests --------------------------------------------------------------------------------------


def test_env(private: Path) -> dict[str, str]:
    """The environment of the test process: the image's, without what would let the tree hook Python or
    pytest, and with a bytecode cache outside the tree."""
    drop = ("PYTHONPATH", "PYTHONSTARTUP", "PYTHONHOME", "PYTHONUSERBASE", "PYTEST_ADDOPTS", "PYTEST_PLUGINS")
    env = {k: v for k, v in os.environ.items() if k not in drop and not k.startswith("GIT_")}
    env.update(
        PYTHONSAFEPATH="1", PYTHONNOUSERSITE="1", PYTHONDONTWRITEBYTECODE="1",
        PYTHONPYCACHEPREFIX=str(private / "pycache"),
    )  # fmt: skip
    return env


def run_process(argv: list[str], *, cwd: Path, env: dict[str, str], stdin: str) -> int | None:
    """Run in its own process group, killed whole at the end or on timeout; None on timeout."""
    try:
        proc = subprocess.Popen(
            argv, cwd=cwd, env=env, stdin=subprocess.PIPE, start_new_session=True, text=True,
            stdout=sys.stderr, stderr=sys.stderr,
        )  # fmt: skip
    except OSError as exc:
        raise GradeError(f"cannot run {argv[0]!r} in the image: {exc.strerror}") from None
    try:
        try:
            proc.communicate(stdin, timeout=TEST_TIMEOUT_S)
        except subprocess.TimeoutExpired:
            return None
        return proc.returncode
    finally:
        try:
            os.killpg(proc.pid, signal.SIGKILL)
        except (ProcessLookupError, PermissionError):
            pass
        proc.wait()


PROJECT_FILES = ("pyproject.toml", "setup.py", "setup.cfg")


def import_roots(tree: Path, targets: list[str]) -> list[str]:
    """Where the test process imports the code under test from, first match first: for every Python project
    on the way from a test file up to the tree's root (a directory holding pyproject.toml, setup.py or
    setup.cfg), nearest first, its ``src`` directory (a src layout) and the project directory itself; the
    tree's root last. pytest's own ``pythonpath`` setting goes in front of all of them."""
    projects: list[Path] = []
    for target in targets:
        directory = (tree / target.split("::", 1)[0]).parent
        while directory != tree and tree in directory.parents:
            if any((directory / name).is_file() for name in PROJECT_FILES) and directory not in projects:
                projects.append(directory)
            directory = directory.parent
    projects.sort(key=lambda path: -len(path.parts))
    roots: list[str] = []
    for project in [*projects, tree]:
        source = project / "src"
        if source.is_dir() and not source.is_symlink() and not (source / "__init__.py").exists():
            roots.append(str(source))
        roots.append(str(project))
    return roots


def run_pytest(
    tree: Path, private: Path, targets: list[str]
) -> tuple[dict[str, str] | None, str, dict[str, str]]:
    """(outcome by node id, or None when the run left no valid report; a note; the first error line of each
    test file pytest could not collect)."""
    child = private / f"runner-{secrets.token_hex(6)}.py"
    child.write_text(CHILD, encoding="utf-8")
    report = private / f"report-{secrets.token_hex(12)}.json"
    nonce = secrets.token_hex(16)
    args = ["-p", "no:cacheprovider", "-o", "addopts=", "--rootdir", str(tree), "-q", "-rN", *targets]
    config = {"nonce": nonce, "report": str(report), "roots": import_roots(tree, targets), "args": args}
    argv = [sys.executable, "-I", "-B", "-X", f"pycache_prefix={private / 'pycache'}", str(child)]
    code = run_process(argv, cwd=tree, env=test_env(private), stdin=json.dumps(config) + "\n")
    if code is None:
        return None, f"the tests ran past {TEST_TIMEOUT_S:.0f} s", {}
    try:
        data = json.loads(report.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return (
            None,
            f"the test process exited {code} without writing its report (it ended early or crashed)",
            {},
        )
    if not isinstance(data, dict) or data.get("nonce") != nonce or not isinstance(data.get("outcomes"), dict):
        return (
            None,
            "the report does not carry this run's nonce (it was not written by the grader's plugin)",
            {},
        )
    outcomes = {str(k): str(v) for k, v in data["outcomes"].items()}
    raw = data.get("collect_errors")
    errors = {str(k): str(v) for k, v in raw.items()} if isinstance(raw, dict) else {}
    note = f"pytest exited {code}" + (
        f"; collection errors in {', '.join(list(errors)[:5])}" if errors else ""
    )
    return outcomes, note, errors


def junit_ids(classname: str, name: str) -> list[str]:
    """Every id a JUnit test case answers to: ``classname::name``, ``classname.name``, and the pytest node ids
    the dotted class name can stand for (``tests.test_ops`` + ``test_add`` -> ``tests/test_ops.py::test_add``;
    ``tests.test_ops.TestX`` -> ``tests/test_ops.py::TestX::test_add`` too)."""
    if not classname:
        return [name]
    ids = [f"{classname}::{name}", f"{classname}.{name}"]
    parts = classname.split(".")
    for cut in range(1, len(parts) + 1):
        module = "/".join(parts[:cut]) + ".py"
        ids.append("::".join([module, *parts[cut:], name]))
    return ids


def junit_outcomes(path: Path, *, aliases: bool = True) -> dict[str, str]:
    """test id -> passed / failed / skipped, from a JUnit XML report: each case under every id of
    :func:`junit_ids` (``aliases``), or only under its first, ``classname::name`` (what discovery records)."""
    root = ET.parse(path).getroot()
    outcomes: dict[str, str] = {}
    for case in root.iter("testcase"):
        if case.find("failure") is not None or case.find("error") is not None:
            outcome = "failed"
        elif case.find("skipped") is not None:
            outcome = "skipped"
        else:
            outcome = "passed"
        ids = junit_ids(case.get("classname") or "", case.get("name") or "")
        for test_id in ids if aliases else ids[:1]:
            if outcomes.get(test_id) in (None, "passed"):
                outcomes[test_id] = outcome
    return outcomes


def run_command(
    tree: Path, private: Path, words: list[str], *, aliases: bool = True
) -> tuple[int | None, dict[str, str] | None, str]:
    """(exit code or None on timeout, JUnit outcomes when the command names {report}, note)."""
    report = private / f"report-{secrets.token_hex(12)}.xml"
    uses_report = any("{report}" in w for w in words)
    argv = [w.replace("{report}", str(report)) for w in words]
    code = run_process(argv, cwd=tree, env=test_env(private), stdin="")
    if code is None:
        return None, None, f"the command ran past {TEST_TIMEOUT_S:.0f} s"
    if not uses_report:
        return code, None, f"the command exited {code}"
    try:
        outcomes = junit_outcomes(report, aliases=aliases)
    except (OSError, ET.ParseError) as exc:
        return (
            code,
            None,
            f"the command exited {code} without a readable JUnit report ({exc.__class__.__name__})",
        )
    return code, outcomes, f"the command exited {code}"


# --- the verdict --------------------------------------------------------------------------------------------


def verdict(
    outcomes: dict[str, str] | None, f2p: list[str], p2p: list[str]
) -> tuple[bool, dict[str, Any], dict[str, Any]]:
    """(pass, metrics, details): every fail_to_pass id passed, no pass_to_pass id failed or went missing."""
    seen = outcomes or {}
    f2p_failing = [t for t in f2p if seen.get(t) != "passed"]
    p2p_broken = [t for t in p2p if seen.get(t) != "passed"]
    ok = outcomes is not None and not f2p_failing and not p2p_broken
    metrics = {
        "fail_to_pass": outcomes is not None and not f2p_failing,
        "pass_to_pass": outcomes is not None and not p2p_broken,
        "fail_to_pass_passed": len(f2p) - len(f2p_failing),
        "pass_to_pass_broken": len(p2p_broken),
    }
    details = {
        "fail_to_pass_not_passing": {t: seen.get(t, "not run") for t in f2p_failing[:MAX_IDS_IN_DETAILS]},
        "pass_to_pass_broken": {t: seen.get(t, "not run") for t in p2p_broken[:MAX_IDS_IN_DETAILS]},
    }
    return ok, metrics, details


def write_grade(run_dir: Path, document: dict[str, Any]) -> None:
    """grade.json, written last by this process (anything the tests wrote there is replaced)."""
    target = run_dir / GRADE_JSON
    tmp = run_dir / f".{GRADE_JSON}.{secrets.token_hex(6)}.tmp"
    tmp.write_text(json.dumps(document, indent=2, sort_keys=True) + "\n", encoding="utf-8")
    if target.is_symlink() or target.is_dir():
        _remove(target)
    os.replace(tmp, target)


def grade(args: argparse.Namespace) -> int:
    run_dir = Path(args.contract)
    task = read_json(run_dir / "task.json")
    grader = "builtin:pytest" if args.runner == "pytest" else "builtin:command"
    document: dict[str, Any] = {"schema": "repo_grade.v1", "task": str(task.get("id", "")), "grader": grader,
                      "pass": None, "metrics": {}, "details": {}, "errors": []}  # fmt: skip
    private = Path(tempfile.mkdtemp(prefix=f"g{secrets.token_hex(6)}-"))
    try:
        task_dir = find_task_dir(Path(args.eval_dir), args.task, run_dir)
        f2p, p2p = id_list(task, "fail_to_pass"), id_list(task, "pass_to_pass")
        tree, changed, touched = prepare_tree(run_dir, task_dir, task, private)
        # no ids yet (``repo task new`` is finding them): record every outcome; builtin:command without
        # {report} has no ids at all and is judged by its exit code
        reports = args.runner == "pytest" or any("{report}" in w for w in args.command)
        discovery = not f2p and reports
        if args.runner == "pytest":
            targets = (
                (f2p + p2p)
                if not discovery
                else sorted(
                    p for p in touched if is_test_path(p) and p.endswith(".py") and (tree / p).is_file()
                )
            )
            if not targets:
                raise GradeError(
                    "no test to run: task.json has no fail_to_pass ids and the test patch adds no test file"
                )
            outcomes, note, collection_errors = run_pytest(tree, private, targets)
            exit_code = None
        else:
            exit_code, outcomes, note = run_command(tree, private, list(args.command), aliases=not discovery)
            collection_errors = {}
        document["details"] = {"run": note, "tests_restored": changed[:MAX_IDS_IN_DETAILS]}
        if collection_errors:
            shown = sorted(collection_errors)[:MAX_IDS_IN_DETAILS]
            document["details"]["collection_errors"] = {path: collection_errors[path] for path in shown}
        if discovery:
            document["pass"] = False
            document["metrics"] = {"discovery": True}
            document["details"]["outcomes"] = outcomes
            document["details"]["exit_code"] = exit_code
        elif args.runner == "command" and outcomes is None:
            ok = exit_code == 0 and not any("{report}" in w for w in args.command)
            document["pass"] = ok
            document["metrics"] = {"exit_zero": exit_code == 0}
        else:
            ok, metrics, details = verdict(outcomes, f2p, p2p)
            if args.runner == "command":
                ok = ok and exit_code == 0
                metrics["exit_zero"] = exit_code == 0
            document["pass"] = ok
            document["metrics"] = metrics
            document["details"].update(details)
    except GradeError as exc:
        document["pass"] = None
        document["errors"] = [str(exc)]
    finally:
        shutil.rmtree(private, ignore_errors=True)
    write_grade(run_dir, document)
    return 0


def oracle(args: argparse.Namespace) -> int:
    """Apply the task's oracle_patch to the workspace (the reference solution, for ``repo tasks check``)."""
    run_dir = Path(args.contract)
    try:
        task = read_json(run_dir / "task.json")
        patch = task_file(find_task_dir(Path(args.eval_dir), args.task, run_dir), task, "oracle_patch")
    except GradeError as exc:
        print(exc, file=sys.stderr)
        return 1
    if patch is None:
        print("task.json has no oracle_patch (builtin:oracle applies it)", file=sys.stderr)
        return 1
    env = clean_git_env()
    proc = subprocess.run(
        ["git", "-c", "core.hooksPath=/dev/null", "apply", "--whitespace=nowarn", str(patch)],
        cwd=run_dir / "workspace", env=env, capture_output=True, text=True,
    )  # fmt: skip
    if proc.returncode != 0:
        print(f"oracle_patch does not apply: {proc.stderr.strip()}", file=sys.stderr)
    return proc.returncode


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="builtin_grade.py")
    sub = parser.add_subparsers(dest="step", required=True)
    for step in ("grade", "oracle"):
        p = sub.add_parser(step)
        p.add_argument("--contract", required=True)
        p.add_argument("--eval-dir", required=True)
        p.add_argument("--task", required=True)
        if step == "grade":
            p.add_argument("runner", choices=("pytest", "command"))
            p.add_argument("command", nargs=argparse.REMAINDER)
    args = parser.parse_args(argv)
    if args.step == "grade":
        if args.command and args.command[0] == "--":
            args.command = args.command[1:]
        if args.runner == "command" and not args.command:
            parser.error("builtin:command needs a command")
        return grade(args)
    return oracle(args)


if __name__ == "__main__":
    sys.exit(main())
