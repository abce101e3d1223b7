"""Running the repository's entry points (grade, oracle, static) in the grade container of a
:class:`~dokimi.grading.environment.GradeEnvironment`, and reading what
grade writes as the untrusted input it is.

Commands. An entry point is split like a shell word list (``shlex.split``) and each word gets the placeholders
substituted once; nothing passes through a shell, so a value never needs quoting and is never re-read as code.
A repository that wants a pipeline writes ``sh -c '...'`` itself. Placeholders: {eval_dir} /eval/content,
{run_dir} /eval/run, {task} the task id, {source_dir} /eval/source (grade and oracle only; mounted only when
the entry point names it), {out} /eval/run/static.json (static only). The cwd is /eval/run/workspace.

Before grade (:func:`move_agent_git`): the workspace's ``.git/config`` and ``.git/hooks`` are moved to
{run_dir}/agent-git/, so a filter, diff driver, alias, include or hook the agent configured does not run in
the grader. A minimal ``.git/config`` takes the config's place (:data:`MINIMAL_GIT_CONFIG`: the repository
format, the neutral identity), so ``git diff``, ``git status`` and a grader's ``git stash`` still work. A
``.git`` that is not a plain directory (a link, a gitdir file) is moved there whole: the grader then sees no
repository, which is the agent's doing. Nothing on the host follows a link the agent made.

grade.json is read with :func:`read_grade`: no file, a link, more than :data:`MAX_GRADE_BYTES`, not JSON, not
repo_grade.v1, or breaking a rule of grade.json is each a grader failure with that reason, never an exception.
"""

from __future__ import annotations

import os
import shlex
import shutil
import stat
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Literal

from dokimi import safefs
from dokimi.constants import CONTAINER_EVAL_DIR, CONTAINER_RUN_DIR, CONTAINER_SOURCE_DIR
from dokimi.errors import DocumentError, SourceError, UsageError
from dokimi.grading.environment import GRADE_TIMEOUT_S, GradeEnvironment
from dokimi.grading.gate import GateVerdict, evaluate_gate
from dokimi.rundir import (
    AGENT_GIT,
    GRADE_JSON,
    STATIC_JSON,
    WORKSPACE,
    entry_stderr,
    entry_stdout,
)
from dokimi.sandbox.container import KILL_GRACE_S, ContainerResult, give_to_container_user, run_container
from dokimi.sandbox.specs import GradeMounts, fresh_grade_home, grade_spec, substitute, uses_placeholder
from dokimi.workspace import NEUTRAL_EMAIL, NEUTRAL_NAME

if TYPE_CHECKING:
    from dokimi.schemas.grade import RepoGrade
    from dokimi.schemas.task import Task

__all__ = [
    "ENTRY_KINDS",
    "GRADE_TIMEOUT_S",
    "MAX_GRADE_BYTES",
    "EntryKind",
    "EntryPointResult",
    "GradeOutcome",
    "entry_argv",
    "grade_run",
    "move_agent_git",
    "needs_source_dir",
    "read_grade",
    "run_entry_point",
]

EntryKind = Literal["grade", "oracle", "static"]
ENTRY_KINDS: tuple[EntryKind, ...] = ("grade", "oracle", "static")

MAX_GRADE_BYTES = 16 * 1024 * 1024
STDERR_TAIL_LINES = 20

MINIMAL_GIT_CONFIG = f"""\
# Written by dokimi before grading. The agent's .git/config and .git/hooks are in {{{{run_dir}}}}/{AGENT_GIT}.
[core]
\trepositoryformatversion = {{version}}
\tfilemode = true
\tbare = false
\tlogallrefupdates = true
{{extensions}}[user]
\tname = {NEUTRAL_NAME}
\temail = {NEUTRAL_EMAIL}
"""


# --- commands
# -------------------------------------------------------------------------------------------------


def placeholder_values(kind: EntryKind, *, task: str | None) -> dict[str, str]:
    """The container-side value of each placeholder an entry point of this kind may use."""
    values = {"eval_dir": str(CONTAINER_EVAL_DIR), "run_dir": str(CONTAINER_RUN_DIR)}
    if task is not None:
        values["task"] = task
    if kind in ("grade", "oracle"):
        values["source_dir"] = str(CONTAINER_SOURCE_DIR)
    if kind == "static":
        values["out"] = str(CONTAINER_RUN_DIR / STATIC_JSON)
    return values


def entry_argv(command: str, kind: EntryKind, *, task: str | None) -> list[str]:
    """``entry_points.<kind>`` as an argv: shell-like words, each with its placeholders substituted once. A
    built-in grader (``builtin:pytest``, ``builtin:command CMD``, ``builtin:oracle``) becomes dokimi's support
    script (dokimi.builtin_graders)."""
    from dokimi.builtin_graders import builtin_argv, is_builtin

    if is_builtin(command):
        if kind == "static" or task is None:
            raise UsageError(f"entry_points.{kind}: a built-in grader serves grade and oracle only")
        return builtin_argv(command, kind, task=task, values=placeholder_values(kind, task=task))
    try:
        words = shlex.split(command)
    except ValueError as exc:
        raise UsageError(f"entry_points.{kind}: cannot split {command!r}: {exc}") from None
    if not words:
        raise UsageError(f"entry_points.{kind} is empty")
    values = placeholder_values(kind, task=task)
    return [substitute(word, values, where=f"entry_points.{kind}") for word in words]


def needs_source_dir(command: str) -> bool:
    """Whether an entry point names {source_dir} (which is what makes the framework mount it)."""
    return uses_placeholder(command, "source_dir")


# --- the agent's git configuration
# ------------------------------------------------------------------------------


def _agent_config_value(config: Path, key: str) -> str | None:
    from dokimi.source.git import run_git

    if not config.is_file() or config.is_symlink():
        return None
    try:
        out = run_git(["config", "--file", str(config), "--no-includes", "--get", key], check=False)
    except SourceError:
        return None
    return out.decode("utf-8", "replace").strip() or None


def minimal_git_config(agent_config: Path | None) -> str:
    """The config put in place of the agent's: only the repository format is carried over (a sha256
    repository stays readable); nothing else of the agent's."""
    version = "0"
    extensions = ""
    if agent_config is not None and _agent_config_value(agent_config, "extensions.objectformat") == "sha256":
        version = "1"
        extensions = "[extensions]\n\tobjectformat = sha256\n"
    return MINIMAL_GIT_CONFIG.format(version=version, extensions=extensions)


def move_agent_git(run_dir: Path) -> list[str]:
    """Move the workspace's .git/config and .git/hooks to {run_dir}/agent-git/ and put a minimal config in
    place; returns what was moved (names under agent-git/). Running it again is harmless (a regrade)."""
    workspace = run_dir / WORKSPACE
    dot_git = workspace / ".git"
    aside = run_dir / AGENT_GIT
    if aside.is_symlink() or (aside.exists() and not aside.is_dir()):
        aside.unlink()
    aside.mkdir(exist_ok=True)
    moved: list[str] = []
    try:
        st = os.lstat(dot_git)
    except FileNotFoundError:
        return moved
    if not stat.S_ISDIR(st.st_mode):  # a link or a gitdir file: the agent's; the grader gets no repository
        _replace(dot_git, aside / "dotgit")
        return ["dotgit"]
    config = dot_git / "config"
    if (
        config.is_file()
        and not config.is_symlink()
        and config.read_text(errors="replace").startswith("# Written by dokimi before grading.")
    ):
        return moved  # moved already (a regrade); the agent's is in agent-git/
    for name in ("config", "hooks"):
        entry = dot_git / name
        if os.path.lexists(entry):
            _replace(entry, aside / name)
            moved.append(name)
    agent_config = aside / "config" if "config" in moved else None
    (dot_git / "config").write_text(minimal_git_config(agent_config))
    return moved


def _replace(source: Path, target: Path) -> None:
    if target.is_symlink() or target.is_file():
        target.unlink()
    elif target.is_dir():
        shutil.rmtree(target)
    os.rename(source, target)


# --- grade.json
# -----------------------------------------------------------------------------------------------


def read_grade(path: Path) -> tuple[RepoGrade | None, str | None]:
    """grade.json as untrusted input: (the document, None), or (None, why it cannot be used)."""
    from dokimi.schemas._base import read_document
    from dokimi.schemas.grade import RepoGrade

    try:
        st = os.lstat(path)
    except FileNotFoundError:
        return None, f"grade wrote no {GRADE_JSON}"
    if stat.S_ISLNK(st.st_mode):
        return None, f"{GRADE_JSON} is a symbolic link, not a file"
    if not stat.S_ISREG(st.st_mode):
        return None, f"{GRADE_JSON} is not a regular file"
    if st.st_size > MAX_GRADE_BYTES:
        return None, f"{GRADE_JSON} is {st.st_size} bytes, over the {MAX_GRADE_BYTES} byte limit"
    try:
        return read_document(path, RepoGrade), None
    except DocumentError as exc:
        where = f"line {exc.line}: " if exc.line else ""
        key = f"{exc.key}: " if exc.key else ""
        return None, f"invalid {GRADE_JSON}: {where}{key}{exc.message}"


# --- running
# --------------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class EntryPointResult:
    kind: EntryKind
    argv: tuple[str, ...]
    container: ContainerResult

    @property
    def returncode(self) -> int | None:
        return self.container.returncode

    @property
    def timed_out(self) -> bool:
        return self.container.timed_out

    @property
    def ok(self) -> bool:
        return self.container.ok

    def stderr_tail(self, lines: int = STDERR_TAIL_LINES) -> str:
        return "\n".join(self.container.stderr.rstrip().splitlines()[-lines:])

    def failure(self, timeout: float) -> str | None:
        """Why this run failed, or None: a timeout, or a non-zero exit with the end of its stderr."""
        if self.timed_out:
            return f"{self.kind} ran past its timeout of {timeout:g} s and was stopped"
        if self.returncode != 0:
            tail = self.stderr_tail()
            return f"{self.kind} exited {self.returncode}" + (f":\n{tail}" if tail else "")
        return None


def entry_command(environment: GradeEnvironment, kind: EntryKind) -> str:
    """``entry_points.<kind>`` of the environment's manifest; a UsageError when it has none."""
    command = getattr(environment.entry_points, kind)
    if not command:
        raise UsageError(f"the manifest has no entry_points.{kind}", hint=f"add entry_points.{kind}")
    return str(command)


def run_entry_point(
    environment: GradeEnvironment,
    run_dir: Path,
    task: Task | None,
    kind: EntryKind,
    *,
    name: str,
    env: Mapping[str, str] | None = None,
) -> EntryPointResult:
    """Run one entry point in a grade container (fresh grade-home; {source_dir} mounted only when the command
    names it). Its stdout and stderr are kept as {run_dir}/<kind>.stdout and <kind>.stderr."""
    command = entry_command(environment, kind)
    argv = entry_argv(command, kind, task=task.id if task is not None else None)
    mount_source = environment.source_dir if needs_source_dir(command) else None
    if needs_source_dir(command) and environment.source_dir is None:
        raise UsageError(
            f"entry_points.{kind} uses {{source_dir}}, but there is no full clone of the source to mount",
            hint="run from a local clone with full history (<dir> or <dir>@<rev>), or pass --source-dir",
        )
    fresh_grade_home(run_dir)
    from dokimi.builtin_graders import is_builtin
    from dokimi.support import support_dir

    mounts = GradeMounts(
        environment.eval_content, mount_source, support_dir() if is_builtin(command) else None
    )
    spec = grade_spec(
        environment.containers_for(task),
        mounts,
        name=name,
        run_dir=run_dir,
        argv=argv,
        task=task.id if task is not None else None,
        env=env,
    )
    _give_top_level(run_dir)
    grace = KILL_GRACE_S if environment.kill_grace_s is None else environment.kill_grace_s
    result = run_container(
        spec,
        timeout=environment.grade_timeout_s,
        stdout_file=run_dir / entry_stdout(kind),
        kill_grace_s=grace,
    )
    safefs.write_text(run_dir / entry_stderr(kind), result.stderr, trusted=run_dir)
    return EntryPointResult(kind, tuple(argv), result)


def _give_top_level(run_dir: Path) -> None:
    """The run directory itself and the directories dokimi made in it become the container user's (the
    workspace was handed over when it was prepared)."""
    from dokimi.harness.runas import harness_identity

    who = harness_identity()
    if who is None:
        return
    os.chown(run_dir, who.uid, who.gid)
    for child in run_dir.iterdir():
        if child.name == WORKSPACE or child.is_symlink():
            continue
        give_to_container_user(child)


@dataclass(frozen=True)
class GradeOutcome:
    """One grading: the grade.json (when usable), the verdict, and how the grade container ended."""

    grade: RepoGrade | None
    verdict: GateVerdict
    entry: EntryPointResult

    @property
    def grader_failure(self) -> bool:
        return self.verdict.grader_failure


def grade_run(environment: GradeEnvironment, run_dir: Path, task: Task, *, name: str) -> GradeOutcome:
    """Grade one run directory: move the agent's git configuration aside, run ``grade``, read grade.json and
    evaluate the gate. A non-zero exit or a timeout is a grader failure even when a grade.json was written."""
    move_agent_git(run_dir)
    stale = run_dir / GRADE_JSON
    if os.path.lexists(stale):
        stale.unlink()
    entry = run_entry_point(environment, run_dir, task, "grade", name=name)
    error = entry.failure(environment.grade_timeout_s)
    grade: RepoGrade | None = None
    if error is None:
        grade, error = read_grade(run_dir / GRADE_JSON)
    return GradeOutcome(grade, evaluate_gate(task, grade, error=error), entry)
