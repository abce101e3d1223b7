"""dokimi's built-in graders, the container side: ``builtin:pytest`` and ``builtin:command CMD``.

Standard library only (it runs under the image's ``python3 -I``); it never imports dokimi. A built-in grade
is two containers and a verdict on the host (dokimi.grading.builtin):

1. **prepare** (this script, in the grade container: the run directory with dokimi's files read-only,
   {eval_dir}): the tree under test is made in ``OUT/tree`` from the agent's final workspace without ``.git``
   and without bytecode caches. Every test file (``test_*.py``, ``*_test.py``, ``conftest.py``,
   ``pytest.ini``, anything under a ``tests``/``test`` directory) and every file the task's test patch touches
   is then put back exactly as it was at ``start_sha`` (an added one is removed), and the hidden tests
   (``test_patch``) are applied over it. The ``start_sha`` content is read from the workspace's object store
   and every object on the way (commit, trees, blobs) is hashed again, so an object the agent rewrote in
   ``.git`` is caught, not trusted. ``OUT/prepared.json`` says what was put back and which tests run. No code
   of the workspace runs in this step.
2. **the tests**, in a container of their own that holds only that tree (at /eval/run/workspace), a fresh
   HOME, an empty report directory (/eval/out), the caches and dokimi's support scripts: no {eval_dir}, no
   {source_dir}, no run directory. ``builtin:pytest`` runs ``pytest_stream.py`` there (plugin autoload off,
   an isolated interpreter, each outcome streamed to /eval/out/report.jsonl); ``builtin:command`` runs the
   repository's command through :func:`command` (``{report}`` is /eval/out/report.xml, for a runner that
   writes JUnit XML there).
3. **the verdict**, on the host, from the report the test process left (dokimi.repo.builtin_graders.verdict):
   pass only when every ``fail_to_pass`` id passed and no ``pass_to_pass`` id failed or went missing.

The code under test runs only in step 2, where it can read nothing of the reference and write nothing dokimi
reads but its own report; it can still forge the outcomes of its own tests (see pytest_stream.py).

Usage (dokimi builds these argv):

    python3 -I builtin_grade.py prepare --contract /eval/run --eval-dir /eval/content --task ID \
        --out /eval/run/builtin-tests (pytest | command)
    python3 -I builtin_grade.py command --report /eval/out/report.xml -- CMD...
    python3 -I builtin_grade.py oracle --contract /eval/run --eval-dir /eval/content --task ID
    python3 -I builtin_grade.py validation --contract /eval/run --eval-dir /eval/content --task ID \
        --out /eval/run/validation [--public] [--hidden]

``validation`` makes the trees a task's validation commands run on (dokimi.grading.validation), the same
way: ``OUT/public/tree`` the agent's files as it left them (without ``.git`` and bytecode caches) for
``validation_commands``, ``OUT/hidden/tree`` the tree under test above for ``hidden_validation_commands``;
``OUT/prepared.json`` holds ``error`` when they cannot be made. No code of the workspace runs in it either.

The task's directory is the directory named ID under the eval dir that holds a task.json (the one whose
bytes equal {run_dir}/task.json when there are several).

With no ``fail_to_pass`` ids in task.json, the run is in discovery mode: it runs the test files the test patch
touches and records every test's outcome (``repo task new`` reads them from the null and the oracle
workspaces to find FAIL_TO_PASS and PASS_TO_PASS), with ``pass: false``. In every mode of builtin:pytest,
``details.collection_errors`` holds the first error line of each test file pytest could not collect (an
import that fails at this base, for example).
"""

from __future__ import annotations

import argparse
import hashlib
import importlib.util
import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

PREPARED_JSON = "prepared.json"
TREE = "tree"
REPORT_PLACEHOLDER = "{report}"
NOT_RUN = "builtin:command cannot run "
"""How the command step says the image lacks the command (a grader error, not a failed test run)."""
NOT_RUN_EXIT = 127

TEST_FILE = re.compile(r"(^|/)(test_[^/]*\.py|[^/]*_test\.py|conftest\.py|pytest\.ini)$")
TEST_DIR = re.compile(r"(^|/)(tests?)/")


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
    """The workspace's files in the new directory ``tree``, without .git and bytecode; links are copied as
    links, never followed, and anything that is not a file, a directory or a link is left out (the isolation
    helper's copy, isolated.py beside this file)."""
    spec = importlib.util.spec_from_file_location(
        "dokimi_support_isolated", Path(__file__).parent / "isolated.py"
    )
    assert spec is not None and spec.loader is not None
    isolated = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = isolated
    spec.loader.exec_module(isolated)
    isolated.copy_tree(workspace, tree)


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
    run_dir: Path, task_dir: Path, task: dict[str, Any], tree: Path
) -> tuple[list[str], set[str]]:
    """The tree under test at ``tree`` (step 1 of the module docstring): (test paths the agent changed, paths
    the test patch touches)."""
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
    copy_workspace(workspace, tree)
    test_patch = task_file(task_dir, task, "test_patch")
    touched = patch_paths(test_patch.read_bytes()) if test_patch else set()
    changed = restore_tests(tree, start, touched)
    if test_patch is not None:
        apply_patch(tree, test_patch)
    return changed, touched


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


def prepare(args: argparse.Namespace) -> int:
    """Step 1: the tree under test in OUT/tree, and OUT/prepared.json: ``restored`` (test paths put back),
    ``targets`` (the pytest ids or files to run), ``roots`` (builtin:pytest's import roots, relative to the
    tree: :func:`import_roots`), ``discovery``, ``fail_to_pass``, ``pass_to_pass``, and
    ``error`` when the task cannot be graded (a broken task, a missing or rewritten .git: grader failure)."""
    run_dir, out = Path(args.contract), Path(args.out)
    document: dict[str, Any] = {"restored": [], "targets": [], "discovery": False, "error": None}
    try:
        task = read_json(run_dir / "task.json")
        task_dir = find_task_dir(Path(args.eval_dir), args.task, run_dir)
        f2p, p2p = id_list(task, "fail_to_pass"), id_list(task, "pass_to_pass")
        changed, touched = prepare_tree(run_dir, task_dir, task, out / TREE)
        reports = args.runner == "pytest" or args.uses_report
        discovery = not f2p and reports
        targets: list[str] = []
        if args.runner == "pytest":
            tree = out / TREE
            found = sorted(
                p for p in touched if is_test_path(p) and p.endswith(".py") and (tree / p).is_file()
            )
            targets = found if discovery else f2p + p2p
            if not targets:
                raise GradeError(
                    "no test to run: task.json has no fail_to_pass ids and the test patch adds no test file"
                )
        tree = out / TREE
        roots = [os.path.relpath(r, tree) for r in import_roots(tree, targets)] if targets else []
        document.update(
            restored=changed, targets=targets, discovery=discovery, fail_to_pass=f2p, pass_to_pass=p2p,
            roots=roots,
        )  # fmt: skip
    except GradeError as exc:
        document["error"] = str(exc)
    (out / PREPARED_JSON).write_text(json.dumps(document, sort_keys=True) + "\n", encoding="utf-8")
    return 0


def validation(args: argparse.Namespace) -> int:
    """The trees of the validation commands (module docstring) and OUT/prepared.json (``error``)."""
    run_dir, out = Path(args.contract), Path(args.out)
    document: dict[str, Any] = {"error": None}
    try:
        if args.public:
            (out / "public").mkdir(exist_ok=True)
            copy_workspace(run_dir / "workspace", out / "public" / TREE)
        if args.hidden:
            task = read_json(run_dir / "task.json")
            task_dir = find_task_dir(Path(args.eval_dir), args.task, run_dir)
            (out / "hidden").mkdir(exist_ok=True)
            prepare_tree(run_dir, task_dir, task, out / "hidden" / TREE)
    except GradeError as exc:
        document["error"] = str(exc)
    (out / PREPARED_JSON).write_text(json.dumps(document, sort_keys=True) + "\n", encoding="utf-8")
    return 0


def test_env() -> dict[str, str]:
    """The environment of builtin:command's process: the container's, without what would let the tree hook
    Python or pytest, with plugin autoload off and bytecode kept out of the tree."""
    drop = ("PYTHONPATH", "PYTHONSTARTUP", "PYTHONHOME", "PYTHONUSERBASE", "PYTEST_ADDOPTS", "PYTEST_PLUGINS")
    env = {k: v for k, v in os.environ.items() if k not in drop and not k.startswith("GIT_")}
    env.update(
        PYTHONSAFEPATH="1", PYTHONNOUSERSITE="1", PYTHONDONTWRITEBYTECODE="1",
        PYTEST_DISABLE_PLUGIN_AUTOLOAD="1",
    )  # fmt: skip
    return env


def command(args: argparse.Namespace) -> int:
    """Step 2 of builtin:command: the repository's command with ``{report}`` replaced, in place of this
    process (its exit code is the container's)."""
    words = [w.replace(REPORT_PLACEHOLDER, args.report) for w in args.command]
    os.dup2(2, 1)  # everything the command prints goes to stderr (grade.stderr)
    try:
        os.execvpe(words[0], words, test_env())
    except OSError as exc:
        print(f"{NOT_RUN}{words[0]!r} in the image: {exc.strerror}", file=sys.stderr)
        return NOT_RUN_EXIT


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
    for step in ("prepare", "oracle", "validation"):
        p = sub.add_parser(step)
        p.add_argument("--contract", required=True)
        p.add_argument("--eval-dir", required=True)
        p.add_argument("--task", required=True)
        if step == "prepare":
            p.add_argument("--out", required=True)
            p.add_argument("--uses-report", action="store_true", help="builtin:command names {report}")
            p.add_argument("runner", choices=("pytest", "command"))
        if step == "validation":
            p.add_argument("--out", required=True)
            p.add_argument("--public", action="store_true", help="make public/tree")
            p.add_argument("--hidden", action="store_true", help="make hidden/tree")
    p = sub.add_parser("command")
    p.add_argument("--report", required=True)
    p.add_argument("command", nargs=argparse.REMAINDER)
    args = parser.parse_args(argv)
    if args.step == "prepare":
        return prepare(args)
    if args.step == "validation":
        return validation(args)
    if args.step == "command":
        if args.command[:1] == ["--"]:
            args.command = args.command[1:]
        if not args.command:
            parser.error("builtin:command needs a command")
        return command(args)
    return oracle(args)


if __name__ == "__main__":
    sys.exit(main())
