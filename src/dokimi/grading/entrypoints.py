"""Running the repository's entry points (grade, oracle, static) in the grade container of a
:class:`~dokimi.grading.environment.GradeEnvironment`, and reading what
grade writes as the untrusted input it is.

Commands. An entry point is split like a shell word list (``shlex.split``) and each word gets the placeholders
substituted once; nothing passes through a shell, so a value never needs quoting and is never re-read as code.
A repository that wants a pipeline writes ``sh -c '...'`` itself. Placeholders: {eval_dir} /eval/content,
{run_dir} /eval/run, {task} the task id, {source_dir} /eval/source (grade and oracle only; mounted only when
the entry point names it), {out} /eval/run/static.json (static only). The cwd is /eval/run/workspace.

Before grading (:func:`reduce_git_dir`): the workspace's ``.git`` is reduced to objects, refs, HEAD,
packed-refs, the index and a config dokimi writes; everything else (config, hooks, commondir, gitdir files,
info/, alternates, worktrees, modules, ...) is moved to {run_dir}/agent-git/, so a filter, diff driver,
alias, include, hook or other git directory the agent configured is used neither by dokimi's diff nor by the
grader. The minimal config (:data:`MINIMAL_GIT_CONFIG`: the repository format, the neutral identity) keeps
``git diff``, ``git status`` and a grader's ``git stash`` working. A ``.git`` that is not a plain directory (a
link, a gitdir file) is moved there whole: the grader then sees no repository, which is the agent's doing.
Nothing on the host follows a link the agent made.

grade.json is read with :func:`read_grade`: no file, a link, more than :data:`MAX_GRADE_BYTES`, not JSON, not
repo_grade.v1, or breaking a rule of grade.json is each a grader failure with that reason, never an exception.
"""

from __future__ import annotations

import os
import stat
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Literal

from dokimi import safefs
from dokimi.constants import CONTAINER_EVAL_DIR, CONTAINER_RUN_DIR, CONTAINER_SOURCE_DIR
from dokimi.errors import DocumentError, UsageError
from dokimi.grading import builtin
from dokimi.grading.egress import entry_egress
from dokimi.grading.environment import GRADE_TIMEOUT_S, GradeEnvironment
from dokimi.grading.evidence import EvidenceChanged, run_sealed
from dokimi.grading.gate import GateVerdict, evaluate_gate
from dokimi.harness.runas import harness_identity
from dokimi.repo.builtin_graders import builtin_argv, is_builtin
from dokimi.repo.workspace import NEUTRAL_EMAIL, NEUTRAL_NAME
from dokimi.rundir import (
    AFTER_GRADE,
    AGENT_GIT,
    ANSWER_TXT,
    GRADE_JSON,
    STATIC_JSON,
    WORKSPACE,
    RunDir,
    entry_stderr,
    entry_stdout,
)
from dokimi.sandbox.container import ContainerResult
from dokimi.sandbox.specs import GradeMounts, command_argv, fresh_grade_home, grade_spec, uses_placeholder
from dokimi.schemas._base import read_document, write_document
from dokimi.schemas.grade import RepoGrade
from dokimi.schemas.grading import GradeRun

if TYPE_CHECKING:
    from dokimi.schemas.task import Task
    from dokimi.source import Repo

__all__ = [
    "ENTRY_KINDS",
    "GRADE_TIMEOUT_S",
    "MAX_GRADE_BYTES",
    "EntryKind",
    "EntryPointResult",
    "GradeOutcome",
    "entry_argv",
    "give_top_level",
    "grade_run",
    "hand_back_workspace",
    "move_agent_git",
    "needs_source_dir",
    "read_grade",
    "run_entry_point",
    "source_dir_for",
]

EntryKind = Literal["grade", "oracle", "static"]
ENTRY_KINDS: tuple[EntryKind, ...] = ("grade", "oracle", "static")
#: What each entry point is meant to write of dokimi's files in the run directory (dokimi.grading.evidence):
#: grade its grade.json, static its {out}, oracle the gold answer of a review task.
ENTRY_WRITES: dict[EntryKind, tuple[str, ...]] = {
    "grade": (GRADE_JSON,),
    "oracle": (ANSWER_TXT,),
    "static": (STATIC_JSON,),
}

MAX_GRADE_BYTES = 16 * 1024 * 1024
STDERR_TAIL_LINES = 20

MINIMAL_GIT_CONFIG_FIRST_LINE = "# Written by dokimi before grading."
MINIMAL_GIT_CONFIG = f"""\
{MINIMAL_GIT_CONFIG_FIRST_LINE} The agent's other .git entries are in {{{{run_dir}}}}/{AGENT_GIT}.
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
        values["out"] = str(RunDir(CONTAINER_RUN_DIR).static_json)
    return values


def entry_argv(command: str, kind: EntryKind, *, task: str | None) -> list[str]:
    """``entry_points.<kind>`` as an argv: shell-like words, each with its placeholders substituted once. A
    built-in grader (``builtin:pytest``, ``builtin:command CMD``, ``builtin:oracle``) becomes dokimi's support
    script (dokimi.repo.builtin_graders)."""
    if is_builtin(command):
        if kind == "static" or task is None:
            raise UsageError(f"entry_points.{kind}: a built-in grader serves grade and oracle only")
        return builtin_argv(command, kind, task=task, values=placeholder_values(kind, task=task))
    return command_argv(command, placeholder_values(kind, task=task), where=f"entry_points.{kind}")


def needs_source_dir(command: str) -> bool:
    """Whether an entry point names {source_dir} (which is what makes the framework mount it)."""
    return uses_placeholder(command, "source_dir")


def source_dir_for(
    repo: Repo, commands: Iterable[str | None], *, given: Path | None, hint: str
) -> Path | None:
    """{source_dir} for these entry points: None when none of them names it, ``given`` (resolved) when the
    caller has a full clone, else the source's own git directory, which must be a local repository with its
    blobs (a fetched, blob-less clone is not)."""
    if not any(command and needs_source_dir(command) for command in commands):
        return None
    if given is not None:
        return given.resolve()
    if repo.git_dir is None or repo.promisor:
        raise UsageError(
            "an entry point uses {source_dir}, which needs a full clone of the source with its blobs",
            hint=hint,
        )
    return repo.git_dir


# --- the agent's git configuration
# ------------------------------------------------------------------------------


#: What a reduced .git keeps: what git needs to diff and to show the agent's commits and staged changes.
#: Everything else the agent could have put there (config, hooks, commondir, a gitdir file, info/ with
#: attributes or exclude, worktrees/, modules/, logs/, shallow, ...) is moved aside.
KEPT_IN_GIT_DIR = frozenset({"objects", "refs", "HEAD", "packed-refs", "index"})
#: Inside objects/: files that send git to read objects elsewhere.
OBJECTS_ALTERNATES = ("info/alternates", "info/http-alternates")
MAX_AGENT_CONFIG_BYTES = 1024 * 1024


def _agent_object_format(config: Path, trusted: Path) -> str | None:
    """``extensions.objectformat`` of the agent's moved config, read as text (no git, no include, no link,
    no FIFO): the one value of it dokimi carries over."""
    try:
        text = safefs.read_text(config, trusted=trusted, limit=MAX_AGENT_CONFIG_BYTES)
    except (OSError, safefs.UnsafePathError):
        return None
    section = ""
    for raw in text.splitlines():
        line = raw.strip()
        if line.startswith("["):
            section = line.strip("[]").strip().lower()
        elif section == "extensions" and "=" in line:
            key, _, value = line.partition("=")
            if key.strip().lower() == "objectformat":
                return value.strip().strip('"').lower()
    return None


def minimal_git_config(object_format: str | None) -> str:
    """The config put in place of the agent's: only the repository format is carried over (a sha256
    repository stays readable); nothing else of the agent's."""
    version = "0"
    extensions = ""
    if object_format == "sha256":
        version = "1"
        extensions = "[extensions]\n\tobjectformat = sha256\n"
    return MINIMAL_GIT_CONFIG.format(version=version, extensions=extensions)


def reduce_git_dir(run_dir: Path) -> list[str]:
    """Reduce the workspace's .git to what git needs to diff, before anything (dokimi's own diff on the host,
    then grade) reads it: objects (without alternates), refs, HEAD, packed-refs, the index and a config
    dokimi writes (:data:`MINIMAL_GIT_CONFIG`). Everything else is moved to {run_dir}/agent-git/ (config,
    hooks, commondir, gitdir files, info/attributes, info/alternates, worktrees, modules and anything the
    agent added), so no filter, diff driver, alias, include, hook, alternate object store or other git
    directory of the agent's is used by dokimi or by the grader. A ``.git`` that is not a plain directory (a
    link, a gitdir file) is moved aside whole: the grader then sees no repository, which is the agent's
    doing. No link is followed (:mod:`dokimi.safefs`). Returns what was moved (names under agent-git/);
    running it again (a regrade's copy) moves nothing more."""
    return _reduce_git_dir(run_dir, RunDir(run_dir).agent_git)


def _reduce_git_dir(run_dir: Path, aside: Path) -> list[str]:
    """:func:`reduce_git_dir`, moving what it takes out of .git to ``aside``."""
    rd = RunDir(run_dir)
    dot_git = rd.workspace / ".git"
    kind = safefs.kind(aside, trusted=run_dir)
    if kind is not None and kind != "a directory":
        safefs.remove(aside, trusted=run_dir)
    safefs.makedirs(aside, trusted=run_dir)
    kind = safefs.kind(dot_git, trusted=run_dir)
    if kind is None:
        return []
    if kind != "a directory":
        safefs.rename(dot_git, aside / "dotgit", trusted=run_dir)
        return ["dotgit"]
    moved: list[str] = []
    config = dot_git / "config"
    object_format = _agent_object_format(rd.agent_git / "config", run_dir)
    ours = False
    if safefs.kind(config, trusted=run_dir) == "a regular file":
        head = safefs.read_bytes(config, trusted=run_dir, limit=MAX_AGENT_CONFIG_BYTES)
        ours = head == minimal_git_config(object_format).encode()
    for name in _names(dot_git, run_dir):
        if name in KEPT_IN_GIT_DIR or (ours and name == "config"):
            continue
        safefs.rename(dot_git / name, aside / name, trusted=run_dir)
        moved.append(name)
    for name in sorted(KEPT_IN_GIT_DIR):  # a kept name that is a link goes too: git would follow it
        if safefs.kind(dot_git / name, trusted=run_dir) == "a symbolic link":
            safefs.rename(dot_git / name, aside / name, trusted=run_dir)
            moved.append(name)
    if safefs.kind(dot_git / "objects" / "info", trusted=run_dir) == "a directory":
        for relative in OBJECTS_ALTERNATES:
            entry = dot_git / "objects" / relative
            if safefs.kind(entry, trusted=run_dir) is not None:
                flat = "objects-" + relative.replace("/", "-")
                safefs.rename(entry, aside / flat, trusted=run_dir)
                moved.append(flat)
    if not ours:
        if "config" in moved and aside == rd.agent_git:
            object_format = _agent_object_format(aside / "config", run_dir)
        safefs.write_text(config, minimal_git_config(object_format), trusted=run_dir)
    return moved


def hand_back_workspace(run_dir: Path) -> list[str]:
    """The workspace of a finished cell, made safe and readable for the user who ran dokimi, once its last
    container is gone (docs/running.md, "A finished workspace").

    Grade ran the agent's code with the workspace writable, so its .git may hold config, hooks or a gitdir
    file again: :func:`reduce_git_dir` runs once more, what it takes out going to
    {run_dir}/agent-git/after-grade/, and .git/config is dokimi's own again, byte for byte. Then, when dokimi
    runs as root (the containers ran as another uid), the workspace directory itself and its whole .git are
    given back to root, links changed themselves and none followed, so root's ``git diff`` there works
    without "dubious ownership", and what git then reads as the repository's configuration is the file dokimi
    just wrote, never one the agent or the code under test wrote. Every other ``.git`` of the work tree (a
    nested repository, a gitfile) goes to agent-git/after-grade/nested/ first: git enters a submodule with
    its GIT_DIR set, which skips the ownership check, so a nested repository's own config (an fsmonitor)
    would run. The work tree's other files stay the container user's. Returns what was moved."""
    rd = RunDir(run_dir)
    if safefs.kind(rd.workspace, trusted=run_dir) != "a directory":
        return []
    aside = rd.agent_git / AFTER_GRADE
    moved = _reduce_git_dir(run_dir, aside)
    for relative in nested_git_entries(run_dir):
        safefs.rename(rd.workspace / relative, aside / NESTED / relative, trusted=run_dir)
        moved.append(f"{NESTED}/{relative}")
    if harness_identity() is not None:
        uid, gid = os.geteuid(), os.getegid()
        safefs.chown_tree(rd.workspace, uid, gid, trusted=run_dir, recursive=False)
        if safefs.kind(rd.workspace / ".git", trusted=run_dir) == "a directory":
            safefs.chown_tree(rd.workspace / ".git", uid, gid, trusted=run_dir)
    return moved


NESTED = "nested"


def nested_git_entries(run_dir: Path) -> list[str]:
    """Every ``.git`` below the workspace other than its own (a directory, a gitfile, a link), as paths
    relative to the workspace, found without following a link; none is looked into."""
    found: list[str] = []
    with safefs.parent_fd(RunDir(run_dir).workspace / "_", trusted=run_dir) as (top, _name):
        for root, dirs, files, _fd in os.fwalk(".", dir_fd=top, follow_symlinks=False):
            if root == ".":
                dirs[:] = [d for d in dirs if d != ".git"]
                continue
            if ".git" in dirs or ".git" in files:
                found.append(os.path.join(root[2:], ".git"))
            dirs[:] = [d for d in dirs if d != ".git"]
    return sorted(found)


def _names(directory: Path, trusted: Path) -> list[str]:
    """The entries of ``directory``, reached without following links, sorted."""
    with safefs.parent_fd(directory / "_", trusted=trusted) as (fd, _name):
        return sorted(os.listdir(fd))


#: Kept as the old name: callers of the first version.
move_agent_git = reduce_git_dir


# --- grade.json
# -----------------------------------------------------------------------------------------------


def read_grade(path: Path) -> tuple[RepoGrade | None, str | None]:
    """grade.json as untrusted input: (the document, None), or (None, why it cannot be used)."""
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
        return read_document(path, RepoGrade, trusted=path.parent), None
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
    mounts = GradeMounts(environment.eval_content, mount_source, probe=environment.probe_dir)
    with entry_egress(environment, task, run_dir, by=kind, name=name) as (settings, egress_env):
        spec = grade_spec(
            settings,
            mounts,
            name=name,
            run_dir=run_dir,
            argv=argv,
            task=task.id if task is not None else None,
            env={**(env or {}), **egress_env},
        )
        give_top_level(run_dir)
        try:
            result = run_sealed(
                spec,
                run_dir,
                what=kind,
                writes=(*ENTRY_WRITES[kind], entry_stdout(kind), entry_stderr(kind)),
                timeout=environment.grade_timeout_s,
                stdout_file=run_dir / entry_stdout(kind),
                kill_grace_s=environment.kill_grace,
            )
        except EvidenceChanged as exc:
            safefs.write_text(run_dir / entry_stderr(kind), exc.result.stderr, trusted=run_dir)
            raise
    safefs.write_text(run_dir / entry_stderr(kind), result.stderr, trusted=run_dir)
    return EntryPointResult(kind, tuple(argv), result)


def give_top_level(run_dir: Path) -> None:
    """The run directory itself and the directories dokimi made in it become the container user's (the
    workspace was handed over when it was prepared)."""
    who = harness_identity()
    if who is None:
        return
    os.chown(run_dir, who.uid, who.gid)
    for name in sorted(os.listdir(run_dir)):
        if name == WORKSPACE:
            continue
        safefs.chown_tree(run_dir / name, who.uid, who.gid, trusted=run_dir)


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
    """Grade one run directory: move the agent's git configuration aside, run ``grade``, record how it ended
    (grade_run.json), read grade.json and evaluate the gate. A non-zero exit or a timeout is a grader failure
    even when a grade.json was written. A built-in grader runs its tests in a container of their own and
    dokimi writes grade.json (:mod:`dokimi.grading.builtin`)."""
    rd = RunDir(run_dir)
    move_agent_git(run_dir)
    for stale in (rd.grade_json, rd.grade_run_json):
        if os.path.lexists(stale):
            stale.unlink()
    try:
        if is_builtin(entry_command(environment, "grade")):
            builtin.begin(run_dir)
            entry = run_entry_point(environment, run_dir, task, "grade", name=name)
            tests = builtin.after_prepare(
                environment,
                run_dir,
                task,
                prepare_failure=entry.failure(environment.grade_timeout_s),
                name=name,
            )
            if tests.container is not None:
                entry = EntryPointResult("grade", tests.argv, tests.container)
            error = tests.error
        else:
            entry = run_entry_point(environment, run_dir, task, "grade", name=name)
            error = entry.failure(environment.grade_timeout_s)
    except EvidenceChanged as exc:  # what grade wrote is not read: the run is a grader failure
        argv = entry_argv(entry_command(environment, "grade"), "grade", task=task.id)
        entry = EntryPointResult("grade", tuple(argv), exc.result)
        error = exc.message
    ran = GradeRun(returncode=entry.returncode, timed_out=entry.timed_out, failure=error)
    safefs.remove(rd.grade_run_json, trusted=run_dir)  # whatever the grader left in its place
    write_document(rd.grade_run_json, ran)
    grade: RepoGrade | None = None
    if error is None:
        grade, error = read_grade(rd.grade_json)
    return GradeOutcome(grade, evaluate_gate(task, grade, error=error), entry)
