"""``repo init``: the files a repository needs to be evaluated, written once, commented for the person who
edits them next.

Writes ``<eval_dir>/repo-eval.yaml`` (the manifest, with a ``$schema`` line for editors that points at the
JSON Schema written beside it), ``<eval_dir>/Dockerfile`` (a template that says what the image must hold) and
``<eval_dir>/tasks/`` (empty). The grader is ``builtin:pytest`` when the repository looks like a pytest
project, else ``builtin:command`` with a command to replace. An existing file is never overwritten.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from pathlib import Path

from dokimi.constants import BASE_IMAGE, DEFAULT_EVAL_DIR, DEFAULT_GUIDANCE_GLOBS, DEFAULT_MANIFEST_NAME
from dokimi.errors import UsageError
from dokimi.globs import match_glob
from dokimi.schemas.export import schema_text

SCHEMA_FILE = "repo_manifest.v1.schema.json"
PYTEST_GRADE = "builtin:pytest"
COMMAND_GRADE = "builtin:command make test"

MANIFEST_TEMPLATE = """\
# yaml-language-server: $schema={schema_file}
# How dokimi evaluates coding agents on this repository. Paths are relative to the repository root.
# Every key and its meaning: `dokimi schema repo_manifest.v1` (the JSON Schema beside this file).
schema: repo_manifest.v1
id: {id}

# Everything agents must not see: the tasks with their hidden tests and reference fixes, the Dockerfile.
# dokimi deletes this directory from every agent workspace and mounts it read-only for graders only.
eval_dir: {eval_dir}

# The guidance files (AGENTS.md and the like) that the arms compare: guidance:none removes every file these
# globs match at a task's base, guidance:raw keeps them.
{globs_comment}guidance:
  globs: [{globs}]

image:
  # Agents and graders run in this image; see the comments in the Dockerfile for what it must hold.
  dockerfile: {eval_dir}/Dockerfile
  # none: no network for the agent's commands and the graders, so dependencies belong in the image.
  network: none
  # This machine's proxy, package index and CA certificates, for the image build only (never in the image):
  # build: {{from_host: [proxy, pip, ca]}}

entry_points:
  # {grade_comment}
  grade: {grade}
  # oracle is builtin:oracle unless you name your own: it applies each task's oracle.patch.

# One directory per task, each with a task.json. `dokimi repo task new ID --from-commit SHA` makes one from a
# fix commit: the fix's tests become the hidden tests, its code the reference solution.
tasks: {eval_dir}/tasks
"""

PYTEST_COMMENT = (
    "builtin:pytest grades like SWE-bench: the agent's tree with the task's tests put back, the\n"
    "  # FAIL_TO_PASS tests must pass and no PASS_TO_PASS test may break."
)
COMMAND_COMMENT = (
    "builtin:command runs a command in the agent's tree with the task's tests put back; it passes when\n"
    "  # the command exits 0. Replace `make test` with your test command; write {report} where it can\n"
    "  # write a JUnit XML report, and the task's FAIL_TO_PASS / PASS_TO_PASS ids decide instead."
)

DOCKERFILE_TEMPLATE = """\
# The image every agent and every grader of this repository runs in. dokimi builds it before
# `repo tasks check` and `repo run`, once per revision of the eval directory.
#
# It must hold:
#   - python3: the harness's hook and dokimi's built-in graders run with it;
#   - git: the built-in graders read the workspace's start commit with it;
#   - pytest, for grade: builtin:pytest;
#   - every build and test dependency of the repository, installed here: agents and graders run without
#     network (image.network: none in repo-eval.yaml).
# It should not hold the repository's code: each run gets its own tree at /eval/run/workspace.
#
# {base} is Debian bookworm with python3, pytest, pip, venv and git (dokimi's scripts/setup.sh builds it
# offline); any image with python3, git and pytest works.
FROM {base}
ENV PYTHONDONTWRITEBYTECODE=1

# Your dependencies, in a virtual environment (Debian's python3 refuses a system-wide pip install); COPY
# names files of the repository, relative to its root. Lock files, proxies and CA certificates: see
# "Dependencies" in dokimi's docs/your-repo.md.
# COPY requirements.txt /tmp/requirements.txt
# RUN python3 -m venv --system-site-packages /opt/venv \\
#     && /opt/venv/bin/pip install --no-cache-dir -r /tmp/requirements.txt
# ENV PATH=/opt/venv/bin:$PATH
"""


@dataclass(frozen=True)
class InitResult:
    """What ``repo init`` wrote, and what to run next."""

    written: list[Path]
    grade: str
    next_commands: list[str]


def repository_id(directory: Path) -> str:
    """The manifest ``id``: the directory's name in lower case, other characters as ``-``."""
    name = re.sub(r"[^a-z0-9._-]+", "-", directory.resolve().name.lower()).strip("-.")
    return name or "repo"


def looks_like_pytest(directory: Path) -> bool:
    """A pytest project at the root or in a directory just below it (``python/`` of a repository with
    several languages): a pytest configuration, a conftest.py, or test_*.py files under tests/ or test/."""
    below = sorted(p for p in directory.iterdir() if p.is_dir() and not p.name.startswith("."))
    return any(_pytest_project(project) for project in (directory, *below))


def _pytest_project(directory: Path) -> bool:
    for name in ("pytest.ini", "conftest.py"):
        if (directory / name).is_file():
            return True
    for name in ("pyproject.toml", "setup.cfg", "tox.ini"):
        path = directory / name
        if path.is_file() and "pytest" in path.read_text(encoding="utf-8", errors="replace"):
            return True
    return any(
        (directory / tests).is_dir() and any((directory / tests).rglob("test_*.py"))
        for tests in ("tests", "test")
    )


def guidance_globs_for(directory: Path) -> tuple[list[str], str]:
    """The default guidance globs that match a file of ``directory`` (a glob that matches nothing at any task
    base only adds a warning), with a comment saying which were left out; ``**/AGENTS.md`` when none
    matches."""
    files = [
        str(p.relative_to(directory))
        for p in directory.rglob("*")
        if p.is_file() and ".git" not in p.relative_to(directory).parts
    ]
    matched = [g for g in DEFAULT_GUIDANCE_GLOBS if any(match_glob(g, f) for f in files)]
    left_out = [g for g in DEFAULT_GUIDANCE_GLOBS if g not in matched]
    if not matched:
        return ["**/AGENTS.md"], "No guidance file yet: add an AGENTS.md, or list your own files."
    comment = "Not listed because nothing matches them yet: " + ", ".join(left_out) + "." if left_out else ""
    return matched, comment


def init_repo(directory: Path, *, eval_dir: str = DEFAULT_EVAL_DIR, grade: str | None = None) -> InitResult:
    """Write the manifest, the Dockerfile, the manifest's JSON Schema and the tasks directory under
    ``directory/eval_dir``. Raises UsageError, writing nothing, when one of the files exists."""
    if not directory.is_dir():
        raise UsageError(f"{directory}: no such directory")
    if eval_dir.startswith("/") or ".." in eval_dir.split("/") or eval_dir.strip("/") in ("", "."):
        raise UsageError(f"--eval-dir {eval_dir!r} must be a subdirectory, relative to the repository root")
    eval_dir = eval_dir.strip("/")
    root = directory / eval_dir
    files = {
        root / DEFAULT_MANIFEST_NAME: "",
        root / "Dockerfile": DOCKERFILE_TEMPLATE.format(base=BASE_IMAGE),
        root / SCHEMA_FILE: schema_text("repo_manifest.v1"),
    }
    existing = [path for path in files if path.exists() or path.is_symlink()]
    if existing:
        raise UsageError(
            f"{existing[0]} already exists; repo init never overwrites a file",
            hint="edit the existing files, or move them away and run repo init again",
        )
    grade = grade or (PYTEST_GRADE if looks_like_pytest(directory) else COMMAND_GRADE)
    globs, globs_comment = guidance_globs_for(directory)
    files[root / DEFAULT_MANIFEST_NAME] = MANIFEST_TEMPLATE.format(
        schema_file=SCHEMA_FILE,
        id=repository_id(directory),
        eval_dir=eval_dir,
        globs=", ".join(f'"{g}"' for g in globs),
        globs_comment=f"# {globs_comment}\n" if globs_comment else "",
        grade=grade if grade == PYTEST_GRADE else json.dumps(grade),
        grade_comment=PYTEST_COMMENT if grade == PYTEST_GRADE else COMMAND_COMMENT,
    )
    (root / "tasks").mkdir(parents=True, exist_ok=True)
    for path, text in files.items():
        path.write_text(text, encoding="utf-8")
    where = "" if directory.resolve() == Path.cwd().resolve() else f" -C {directory}"
    source = "." if not where else str(directory)
    return InitResult(
        written=list(files),
        grade=grade,
        next_commands=[
            f"dokimi repo task new fix_first --from-commit <SHA of a fix with a test>{where}",
            f"dokimi repo validate {source}",
            f"dokimi repo tasks check {source}",
        ],
    )
