"""``repo task new``: a task mined from a fix, the way SWE-bench turns a pull request into an instance.

From a fix commit (``--from-commit SHA``, base ``SHA^``) or a merged pull request (``--from-pr MERGE``, base
the merge's first parent, so the task is the whole pull request): the diff is split by the test globs into
the hidden tests (``tests.patch``) and the code part, the reference solution (``oracle.patch``). The commit
message, minus what gives the fix away (the changed files' names, code, issue references, trailers), is the
draft prompt. Then, with a built-in grade, the null and oracle workspaces are graded in discovery mode and
every test the test patch touches is classified: FAIL_TO_PASS (fails before the fix, passes after it) and
PASS_TO_PASS (passes both times). Those ids go into task.json, and ``repo tasks check`` runs on the task.

Only files are written: the task directory under the manifest's ``tasks``; nothing is committed.
"""

from __future__ import annotations

import json
import posixpath
import re
import shutil
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from dokimi import safefs
from dokimi.controls import strip_controls
from dokimi.errors import DokimiError, UsageError
from dokimi.globs import match_any
from dokimi.home import cache_directory
from dokimi.rundir import ORACLE_PATCH, TASK_JSON, RunDir, entry_stderr, tasks_check_run_dir
from dokimi.schemas._base import load_json
from dokimi.schemas.task_new import SkipReason
from dokimi.source.git import run_git

#: Which changed files are tests (the hidden part) when ``--tests`` is not given.
DEFAULT_TEST_GLOBS = (
    "**/test_*.py",
    "**/*_test.py",
    "**/conftest.py",
    "**/tests/**",
    "**/test/**",
    "tests/**",
    "test/**",
)
TEST_PATCH = "tests.patch"
TASK_ID = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,99}$")
_TRAILER = re.compile(r"^[A-Za-z][A-Za-z-]*(-by|-authored-by)?:\s", re.IGNORECASE)
_ISSUE_REF = re.compile(
    r"\b(fix(es|ed)?|close[sd]?|resolve[sd]?|see|refs?)\s+#\d+[.,;:]?\s*|\s*\(#\d+\)|#\d+", re.IGNORECASE
)


@dataclass(frozen=True)
class Fix:
    """A fix read from git: the commit, its base, the changed paths split in two, the message."""

    sha: str
    base_rev: str
    """task.json's ``base``: ``<sha>^`` (the fix's parent; for a merge, its first parent)."""
    message: str
    test_paths: list[str]
    code_paths: list[str]


@dataclass
class MinedTask:
    """What ``repo task new`` made and found."""

    task_id: str
    directory: Path
    fix: Fix
    prompt: str
    fail_to_pass: list[str] = field(default_factory=list)
    pass_to_pass: list[str] = field(default_factory=list)
    failing_with_fix: list[str] = field(default_factory=list)
    """Tests the test patch touches that fail even with the fix (left out of both lists)."""
    checked: bool = False
    """Whether the null and oracle checks ran (a built-in grade)."""
    check_ok: bool | None = None
    check_problems: list[str] = field(default_factory=list)
    collection_errors: dict[str, dict[str, str]] = field(default_factory=dict)
    """Phase (``null``, ``oracle``) -> test file -> the first error line of why pytest could not collect
    it."""
    evidence: Path | None = None
    """The kept run directories of the null and oracle grades (when the task is not sound)."""
    removed: bool = False
    """Whether the task directory was removed again (no test tells the fix from no fix)."""


# --- reading the fix ----------------------------------------------------------------------------------------


def _git_text(git_dir: Path, *args: str) -> str:
    return run_git(list(args), git_dir=git_dir).decode("utf-8", "replace")


def read_fix(git_dir: Path, rev: str, *, merge: bool, test_globs: Sequence[str]) -> Fix:
    """The fix at ``rev``: a single-parent commit, or (``merge``) a merge commit whose first parent is the
    base. The changed paths are split by ``test_globs``; both parts must be non-empty."""
    sha = _git_text(git_dir, "rev-parse", "--verify", "--end-of-options", f"{rev}^{{commit}}").strip()
    parents = _git_text(git_dir, "rev-list", "--parents", "-n", "1", sha).split()[1:]
    if merge and len(parents) < 2:
        raise UsageError(
            f"{rev} is not a merge commit (it has {len(parents)} parent)",
            hint="--from-pr takes the merge commit of a pull request; use --from-commit for a single fix",
        )
    if not merge and len(parents) != 1:
        what = "a merge commit" if len(parents) > 1 else "the first commit (no parent)"
        raise UsageError(
            f"{rev} is {what}",
            hint="--from-commit takes a commit with one parent; for a merged pull request use --from-pr",
        )
    paths = changed_paths(git_dir, sha)
    tests, code = split_paths(paths, test_globs)
    if not tests:
        raise UsageError(
            f"{sha[:12]} changes no test file: none of {', '.join(test_globs)} matches "
            + ", ".join(paths[:5]),
            hint="pick a fix that adds or changes a test, or name its tests with --tests GLOB",
        )
    if not code:
        raise UsageError(
            f"{sha[:12]} changes only tests, so there is no fix for the agent to make",
            hint="pick the commit that changes the code, or narrow --tests",
        )
    message = _git_text(git_dir, "log", "-1", "--format=%B", sha)
    return Fix(sha, f"{sha}^", message, tests, code)


def changed_paths(git_dir: Path, sha: str) -> list[str]:
    """The paths a commit changes against its first parent (no renames: a rename is a delete and an add)."""
    raw = run_git(
        ["diff", "--no-renames", "--no-ext-diff", "--name-only", "-z", f"{sha}^1", sha, "--"], git_dir=git_dir
    )
    return [p for p in raw.decode("utf-8", "surrogateescape").split("\0") if p]


def split_paths(paths: Sequence[str], test_globs: Sequence[str]) -> tuple[list[str], list[str]]:
    """(the tests, the code) of a fix's changed paths: a path some test glob matches is a test."""
    tests = [p for p in paths if match_any(test_globs, p)]
    return tests, [p for p in paths if p not in set(tests)]


def patch_of(git_dir: Path, fix: Fix, paths: Sequence[str]) -> bytes:
    """``git diff --binary`` of ``paths`` between the base and the fix (no renames, no external diff)."""
    return run_git(
        ["diff", "--binary", "--no-renames", "--no-ext-diff", "--no-textconv", "--full-index",
         f"{fix.sha}^1", fix.sha, "--", *paths],
        git_dir=git_dir,
    )  # fmt: skip


def draft_prompt(message: str, changed: Sequence[str]) -> str:
    """The commit message as a draft prompt, minus what gives the fix away: trailers (Signed-off-by, ...),
    issue references, and lines naming a changed file or holding code (indented, fenced, in backticks); and
    minus its terminal escapes and other control characters (:func:`dokimi.controls.strip_controls`): a
    commit message is text the repository's authors wrote, and task.json keeps none of them."""
    message = strip_controls(message)
    names = {p for path in changed for p in (path, posixpath.basename(path), posixpath.splitext(path)[0])}
    kept: list[str] = []
    fenced = False
    for line in message.strip().splitlines():
        stripped = line.strip()
        if stripped.startswith("```"):
            fenced = not fenced
            continue
        if fenced or _TRAILER.match(stripped) or line.startswith(("    ", "\t")) or "`" in line:
            continue
        if any(name and name in line for name in names):
            continue
        line = _ISSUE_REF.sub("", line).rstrip()
        if stripped and not line.strip():
            continue  # nothing left of it
        kept.append(line)
    text = "\n".join(kept).strip()
    text = re.sub(r"\n{3,}", "\n\n", text)
    return text or "Describe the problem the agent must fix (what goes wrong, not how to fix it)."


# --- writing the task ---------------------------------------------------------------------------------------


_PULL_REQUEST = (
    re.compile(r"^Merge pull request #(\d+)\b"),  # a GitHub merge commit
    re.compile(r"\(#(\d+)\)\s*$"),  # a GitHub squash merge's subject
    re.compile(r"^See merge request [^\s!]+!(\d+)\s*$", re.MULTILINE),  # a GitLab merge commit
)


def pull_request_number(message: str) -> int | None:
    """The pull request a fix came from, as its commit message names it (``Merge pull request #12``, a
    subject ending in ``(#12)``, ``See merge request group/project!12``); None when it names none. It becomes
    task.json's ``source_pr``, which the review-rule miner leaves out."""
    subject = message.strip().splitlines()[0] if message.strip() else ""
    for pattern, text in zip(_PULL_REQUEST, (subject, subject, message), strict=True):
        found = pattern.search(text)
        if found:
            return int(found.group(1))
    return None


def write_task(
    directory: Path, task_id: str, fix: Fix, *, prompt: str, grader: str, tests: bytes, oracle: bytes
) -> dict[str, Any]:
    """The task directory: task.json (with ``source_pr`` when the fix's message names its pull request),
    tests.patch, oracle.patch. Refuses an existing directory."""
    if directory.exists():
        raise UsageError(
            f"{directory} already exists", hint="pick another task id, or remove that directory first"
        )
    directory.mkdir(parents=True)
    (directory / TEST_PATCH).write_bytes(tests)
    (directory / ORACLE_PATCH).write_bytes(oracle)
    task: dict[str, Any] = {
        "id": task_id,
        "family": "fix",
        "base": fix.base_rev,
        "prompt": prompt,
        "grader": grader,
        "test_patch": TEST_PATCH,
        "oracle_patch": ORACLE_PATCH,
        "fail_to_pass": [],
        "pass_to_pass": [],
    }
    pull = pull_request_number(fix.message)
    if pull is not None:
        task["source_pr"] = pull
    write_task_json(directory, task)
    return task


def write_task_json(directory: Path, task: dict[str, Any]) -> None:
    (directory / TASK_JSON).write_text(json.dumps(task, indent=2, ensure_ascii=False) + "\n")


def classify(null: dict[str, str], oracle: dict[str, str]) -> tuple[list[str], list[str], list[str]]:
    """(FAIL_TO_PASS, PASS_TO_PASS, failing with the fix) from the outcomes of the null and oracle runs."""
    f2p = sorted(t for t, o in oracle.items() if o == "passed" and null.get(t) != "passed")
    p2p = sorted(t for t, o in oracle.items() if o == "passed" and null.get(t) == "passed")
    failing = sorted(t for t, o in oracle.items() if o != "passed")
    return f2p, p2p, failing


@dataclass(frozen=True)
class PhaseOutcomes:
    """What the discovery grade of one phase (``null``: the base, ``oracle``: with the fix) recorded."""

    outcomes: dict[str, str]
    """Test id -> passed, failed or skipped."""
    collection_errors: dict[str, str]
    """Test file -> the first error line of what stopped pytest from collecting it."""


@dataclass(frozen=True)
class Discovery:
    """The tests classified from the null and oracle outcomes, and the collection errors of each phase."""

    fail_to_pass: list[str]
    pass_to_pass: list[str]
    failing_with_fix: list[str]
    collection_errors: dict[str, dict[str, str]]
    """Phase (``null``, ``oracle``) -> test file -> its first error line; phases without errors left out."""


def _stderr_tail(run_dir: Path, lines: int = 15) -> str:
    path = run_dir / entry_stderr("grade")
    try:  # what the code under test printed: read as hostile
        text = safefs.read_text(path, trusted=run_dir)
    except (OSError, DokimiError):
        return ""
    return "\n".join(f"    {line}" for line in text.rstrip().splitlines()[-lines:])


def phase_outcomes(out: Path, task_id: str, phase: str) -> PhaseOutcomes:
    """``details.outcomes`` and ``details.collection_errors`` of the discovery grade of one phase, from the
    tasks check's run directory; a DokimiError naming the kept grader output when there are none."""
    run_dir = tasks_check_run_dir(out, task_id, phase)
    path = RunDir(run_dir).grade_json
    stderr = run_dir / entry_stderr("grade")
    try:  # written in the grade container, where the code under test ran: read as hostile
        data = load_json(safefs.read_bytes(path, trusted=run_dir))
    except FileNotFoundError:
        raise DokimiError(
            f"the {phase} run of {task_id} left no grade.json (its run directory is kept: {run_dir})",
            hint=f"read {stderr}",
        ) from None
    except (DokimiError, OSError, ValueError) as exc:
        raise DokimiError(
            f"the {phase} run's grade.json cannot be read: {exc}", path=path, hint=f"read {stderr}"
        ) from None
    details = data.get("details") if isinstance(data, dict) else None
    details = details if isinstance(details, dict) else {}
    outcomes = details.get("outcomes")
    raw_errors = details.get("collection_errors")
    errors = {str(k): str(v) for k, v in raw_errors.items()} if isinstance(raw_errors, dict) else {}
    if isinstance(outcomes, dict):
        return PhaseOutcomes({str(k): str(v) for k, v in outcomes.items()}, errors)
    listed = data.get("errors") if isinstance(data, dict) else None
    why = "; ".join(map(str, listed)) if isinstance(listed, list) and listed else str(details.get("run"))
    tail = _stderr_tail(run_dir)
    raise DokimiError(
        f"the {phase} run recorded no test outcomes: {why}"
        + (f"\n  the grader's output ends:\n{tail}" if tail else ""),
        path=path,
        hint=f"the whole output is kept in {stderr}; check that the tests run in the image",
    )


CheckFn = Callable[[Path | None], Any]
"""Runs ``repo tasks check`` on the new task (its run directories kept under the path given) and returns the
TasksCheck report."""


def discover(task: dict[str, Any], run_check: CheckFn, evidence: Path) -> Discovery:
    """Grade the null and oracle workspaces in discovery mode (no ids yet) and classify the tests. The run
    directories go to ``evidence``, which the caller keeps when something went wrong."""
    report = run_check(evidence)
    phases: dict[str, PhaseOutcomes] = {}
    try:
        for phase in ("null", "oracle"):
            phases[phase] = phase_outcomes(evidence, task["id"], phase)
    except DokimiError as exc:
        problems = [p for t in getattr(report, "tasks", []) for p in t.problems]
        if problems:
            exc.message += "\n  (tasks check: " + "; ".join(problems) + ")"
        raise
    f2p, p2p, failing = classify(phases["null"].outcomes, phases["oracle"].outcomes)
    errors = {phase: got.collection_errors for phase, got in phases.items() if got.collection_errors}
    return Discovery(f2p, p2p, failing, errors)


def evidence_directory(task_id: str) -> Path:
    """Where ``repo task new`` keeps the null and oracle run directories (grade.json, grade.stderr, the
    workspaces) of one mining: under dokimi's cache, removed again when the task comes out sound."""

    stamp = time.strftime("%Y%m%dT%H%M%S", time.gmtime())
    directory = cache_directory() / "task-new" / f"{stamp}-{task_id}"
    directory.mkdir(parents=True, exist_ok=True)
    return directory


def keep_patches(task_dir: Path, evidence: Path) -> None:
    """Copy the task's patches into the evidence directory before a half-made task directory is removed."""
    for name in (TEST_PATCH, ORACLE_PATCH, TASK_JSON):
        if (task_dir / name).is_file():
            shutil.copyfile(task_dir / name, evidence / name)


# --- a range of fixes (--from-log) --------------------------------------------------------------------------

#: Why a commit of a range made no task, each said with a detail.
SKIP_REASONS: dict[SkipReason, str] = {
    "no_test": "no test",
    "only_tests": "only tests",
    "no_failing_test": "no failing-before test",
    "flaky": "flaky",
    "not_sound": "not sound",
    "mined": "already a task",
    "error": "grader error",
}
MAX_COMMITS = 1000
TASK_ID_SLUG = 40


@dataclass
class LogCommit:
    """A commit of the range, and what became of it: a task, or a skip with its reason."""

    sha: str
    subject: str
    fix: Fix | None = None
    task_id: str | None = None
    skip: SkipReason | None = None
    """A key of :data:`SKIP_REASONS`; None while it is still a candidate, and for a task made."""
    detail: str = ""
    """Why it was skipped, in a line (the test ids that changed outcome, tasks check's problems, ...)."""
    fail_to_pass: list[str] = field(default_factory=list)
    pass_to_pass: list[str] = field(default_factory=list)

    def skip_with(self, reason: SkipReason, detail: str) -> None:
        self.skip, self.detail = reason, detail


def log_commits(git_dir: Path, rev_range: str) -> list[LogCommit]:
    """The commits of ``rev_range`` (``A..B``, ``B --not A``-style ranges git accepts), oldest first, merges
    left out (their fixes are their commits'): at most :data:`MAX_COMMITS`."""
    if rev_range.startswith("-"):
        raise UsageError(f"--from-log {rev_range!r}: a range, not an option", hint="for example v1.2..main")
    try:
        raw = run_git(
            ["log", "--reverse", "--no-merges", "--format=%H%x00%s", "--end-of-options", rev_range, "--"],
            git_dir=git_dir,
        )
    except DokimiError as exc:
        raise UsageError(
            f"--from-log {rev_range}: git cannot read that range ({exc.message.splitlines()[0]})",
            hint="give a range of this repository's history, for example v1.2..main or HEAD~20..HEAD",
        ) from None
    commits = []
    for line in raw.decode("utf-8", "replace").splitlines():
        sha, _, subject = line.partition("\0")
        commits.append(LogCommit(sha, strip_controls(subject)))
    if not commits:
        raise UsageError(f"--from-log {rev_range}: no commit in that range (merges are left out)")
    if len(commits) > MAX_COMMITS:
        raise UsageError(
            f"--from-log {rev_range}: {len(commits)} commits, more than {MAX_COMMITS}",
            hint="mine a shorter range at a time",
        )
    return commits


def read_log_commit(git_dir: Path, commit: LogCommit, test_globs: Sequence[str]) -> None:
    """Read the commit as a fix, or mark it skipped: it changes no test, or only tests."""
    tests, code = split_paths(changed_paths(git_dir, commit.sha), test_globs)
    if not tests:
        commit.skip_with("no_test", "changes no file the test globs match")
    elif not code:
        commit.skip_with("only_tests", "changes only tests: no fix for the agent to make")
    else:
        message = _git_text(git_dir, "log", "-1", "--format=%B", commit.sha)
        commit.fix = Fix(commit.sha, f"{commit.sha}^", message, tests, code)


def log_task_id(commit: LogCommit, taken: set[str]) -> str:
    """A task id from the subject and the short SHA (``fix-total-of-empty-cart-1a2b3c4``), unique among
    ``taken``."""
    slug = re.sub(r"[^a-z0-9]+", "-", commit.subject.lower()).strip("-")[:TASK_ID_SLUG].strip("-")
    for length in range(7, 41):
        task_id = f"{slug or 'fix'}-{commit.sha[:length]}"
        if task_id not in taken:
            return task_id
    raise UsageError(f"no free task id for {commit.sha}")


def outcome_changes(first: dict[str, str], second: dict[str, str]) -> list[str]:
    """The tests whose outcome differs between two runs of the same workspace (a test in one run only
    counts): ``id: failed then passed``."""
    changed = []
    for test in sorted(set(first) | set(second)):
        a, b = first.get(test, "absent"), second.get(test, "absent")
        if a != b:
            changed.append(f"{test}: {a} then {b}")
    return changed
