"""The batch and run-directory layout: every path and file name dokimi reads or writes under a batch, a run
directory or an exported eval_dir, spelled here and nowhere else.

A batch (``repo run``)::

    <out>/<batch>/_eval/batch.json          the pin (repo_batch.v1)
    <out>/<batch>/_eval/plan.json           the planned cells (repo_plan.v1)
    <out>/<batch>/_eval/manifest.json       the manifest the batch ran with
    <out>/<batch>/_eval/content/            eval_dir exported from the eval tree ({eval_dir}, read-only)
    <out>/<batch>/_eval/support/            dokimi's helper scripts (/eval/support, read-only)
    <out>/<batch>/_eval/dry-run/            the scripts of a --dry-run
    <out>/<batch>/_eval/judge-cache/        the rubric judge's verdict cache
    <out>/<batch>/_eval/regrade/            scratch run directories of ``repo regrade``
    <out>/<batch>/_eval/reference/<task>/   the task's reference: reference.json and its run/ directory
    <out>/<batch>/<task>/<arm>/<model>/<effort>/rep<N>/      one cell = one run directory

A run directory ({run_dir}, /eval/run in every container): the inputs of grade (workspace/, task.json,
meta.json, events.jsonl, answer.txt), the agent's raw output, what grading writes (grade.json, workspace.diff,
workspace_diff.json, tests_list.json, own_tests.json, merge.json, review.json, perf/check.json) and
result.json, written last.
:class:`RunDir` names them.

A task directory inside an exported eval_dir is :func:`task_dir` (the one formula). Code outside this module
uses these names; a literal file name of a run directory anywhere else is a bug (a test checks it).
"""

from __future__ import annotations

import posixpath
import re
from dataclasses import dataclass
from pathlib import Path, PurePath
from typing import TYPE_CHECKING, Final, Generic, TypeVar

if TYPE_CHECKING:
    from dokimi.schemas.manifest import RepoManifest

P = TypeVar("P", bound=PurePath)

# --- one run directory --------------------------------------------------------------------------------------

WORKSPACE: Final = "workspace"
TASK_JSON: Final = "task.json"
META_JSON: Final = "meta.json"
EVENTS_JSONL: Final = "events.jsonl"
ANSWER_TXT: Final = "answer.txt"
GRADE_JSON: Final = "grade.json"
GRADE_RUN_JSON: Final = "grade_run.json"
"""How the grade container ended (repo_grade_run.v1), written after it exited."""
RESULT_JSON: Final = "result.json"
AGENT_STDOUT: Final = "agent.stdout"
AGENT_STDERR: Final = "agent.stderr"
STATIC_JSON: Final = "static.json"
"""{out} of the static entry point."""
WORKSPACE_DIFF: Final = "workspace.diff"
WORKSPACE_DIFF_JSON: Final = "workspace_diff.json"
MERGE_JSON: Final = "merge.json"
TESTS_LIST_JSON: Final = "tests_list.json"
"""The test ids ``tests.list`` printed in the agent's workspace before grade (repo_tests_list.v1)."""
REVIEW_JSON: Final = "review.json"
"""The review checks of a review task's answer (repo_review_check.v1)."""
OWN_TESTS_JSON: Final = "own_tests.json"
"""Whether the agent's own tests fail on the base (repo_own_tests.v1)."""
OWN_TESTS_DIR: Final = "own-tests"
"""The trees the agent's own tests run in (agent/, base/), each with tree/ and home/; removed once run."""
GRADE_HOME: Final = "grade-home"
"""HOME of the grade container, made empty before each entry point."""
AGENT_GIT: Final = "agent-git"
"""Where the workspace's .git/config and .git/hooks are moved before grading."""
AFTER_GRADE: Final = "after-grade"
"""Under agent-git/: what the code under test left in the workspace's .git during grading, moved aside when
the finished workspace is handed back."""
BUILTIN_TESTS: Final = "builtin-tests"
"""A built-in grader's work: tree/ (the tree under test), home/, out/ (the test process's report),
prepared.json (what the prepare step put back and which tests run), prepare.stdout and prepare.stderr."""
TESTS_TREE: Final = "tree"
"""The tree under test of a container that runs tests alone (builtin-tests/, own-tests/agent/, ...)."""
TESTS_HOME: Final = "home"
"""Its HOME, made fresh for it."""
BUILTIN_OUT: Final = "out"
BUILTIN_PREPARED: Final = "prepared.json"
BUILTIN_PREPARE_LOGS: Final = ("prepare.stdout", "prepare.stderr")
"""The prepare step's stdout and stderr, in builtin-tests/ (grade.stdout and grade.stderr are the tests')."""
PYTEST_STREAM: Final = "report.jsonl"
"""builtin:pytest's report in out/: the stream of dokimi/support/pytest_stream.py."""
JUNIT_REPORT: Final = "report.xml"
"""builtin:command's ``{report}`` in out/."""
AGENT_HOME: Final = "home"
AGENT_CONFIG: Final = "config"
AGENT_TMP: Final = "tmp"
NOT_RETURNED: Final = "not-returned.txt"
GATEWAY_JSONL: Final = "gateway.jsonl"
"""A sealed cell's model requests and responses, as the model gateway relayed them."""
EGRESS_JSONL: Final = "egress.jsonl"
"""Every connection attempt through the egress proxy: the agent's, then its entry points' (``by``)."""
"""With ``--executor ray``: what of the run directory stayed on its node (over workspace_mb)."""
PERF_DIR: Final = "perf"
"""The cell's perf directory: out/ (the documents), oracle/ (the oracle variant), check.json."""
PERF_CHECK_JSON: Final = "check.json"
PERF_OUT_DIR: Final = "out"
PERF_ORACLE_DIR: Final = "oracle"
PERF_EMPTY_DIR: Final = "empty"
VALIDATION_DIR: Final = "validation"
"""A task's validation commands: public/ and hidden/ (each tree/, home/, out/ while they run),
prepared.json (the prepare step's), commands.json (what ran and its output)."""
VALIDATION_COMMANDS_JSON: Final = "commands.json"
VALIDATION_PUBLIC: Final = "public"
VALIDATION_HIDDEN: Final = "hidden"
PERF_STDOUT: Final = "perf.stdout"
PERF_STDERR: Final = "perf.stderr"

ENTRY_KINDS_WITH_LOGS: Final = ("grade", "oracle", "static")


def entry_stdout(kind: str) -> str:
    """``<kind>.stdout``: what an entry point printed."""
    return f"{kind}.stdout"


def entry_stderr(kind: str) -> str:
    """``<kind>.stderr``."""
    return f"{kind}.stderr"


#: Entries of a run directory that belong to the framework; image.env may not claim them.
RUN_DIR_ENTRIES: Final = frozenset(
    {
        WORKSPACE,
        TASK_JSON,
        META_JSON,
        EVENTS_JSONL,
        ANSWER_TXT,
        GRADE_JSON,
        GRADE_RUN_JSON,
        RESULT_JSON,
        AGENT_STDOUT,
        AGENT_STDERR,
        *(entry_stdout(kind) for kind in ENTRY_KINDS_WITH_LOGS),
        *(entry_stderr(kind) for kind in ENTRY_KINDS_WITH_LOGS),
        PERF_STDOUT,
        PERF_STDERR,
        WORKSPACE_DIFF,
        WORKSPACE_DIFF_JSON,
        MERGE_JSON,
        TESTS_LIST_JSON,
        REVIEW_JSON,
        OWN_TESTS_JSON,
        OWN_TESTS_DIR,
        PERF_DIR,
        GRADE_HOME,
        AGENT_GIT,
        AGENT_HOME,
        AGENT_CONFIG,
        AGENT_TMP,
        NOT_RETURNED,
        BUILTIN_TESTS,
        GATEWAY_JSONL,
        EGRESS_JSONL,
        VALIDATION_DIR,
    }
)

#: What dokimi writes into a run directory, and grade.json once dokimi has read it: the evidence of a run.
#: Every container that runs after the agent's sees these read-only, and none may change one or make one
#: dokimi has not written yet (dokimi.grading.evidence). Paths relative to the run directory.
EVIDENCE: Final = (
    TASK_JSON,
    META_JSON,
    EVENTS_JSONL,
    ANSWER_TXT,
    AGENT_STDOUT,
    AGENT_STDERR,
    WORKSPACE_DIFF,
    WORKSPACE_DIFF_JSON,
    TESTS_LIST_JSON,
    GRADE_JSON,
    GRADE_RUN_JSON,
    STATIC_JSON,
    MERGE_JSON,
    REVIEW_JSON,
    OWN_TESTS_JSON,
    *(entry_stdout(kind) for kind in ENTRY_KINDS_WITH_LOGS),
    *(entry_stderr(kind) for kind in ENTRY_KINDS_WITH_LOGS),
    PERF_STDOUT,
    PERF_STDERR,
    f"{PERF_DIR}/{PERF_CHECK_JSON}",
    GATEWAY_JSONL,
    EGRESS_JSONL,
    f"{VALIDATION_DIR}/{VALIDATION_COMMANDS_JSON}",
    RESULT_JSON,
)

#: The inputs a grade reads besides workspace/, plus the raw trace (what a regrade copies).
GRADE_INPUTS: Final = (TASK_JSON, META_JSON, EVENTS_JSONL, ANSWER_TXT, AGENT_STDOUT)


@dataclass(frozen=True)
class RunDir(Generic[P]):
    """One run directory and the path of everything in it, on the host (a ``Path``) or in a container
    (``RunDir(CONTAINER_RUN_DIR)``, a ``PurePosixPath``): the one way to a run directory's file
    (tests/architecture/test_rundir_names.py refuses ``run_dir / GRADE_JSON`` elsewhere)."""

    path: P

    def __truediv__(self, name: str) -> P:
        return self.path / name

    @property
    def workspace(self) -> P:
        return self.path / WORKSPACE

    @property
    def task_json(self) -> P:
        return self.path / TASK_JSON

    @property
    def meta_json(self) -> P:
        return self.path / META_JSON

    @property
    def events_jsonl(self) -> P:
        return self.path / EVENTS_JSONL

    @property
    def answer_txt(self) -> P:
        return self.path / ANSWER_TXT

    @property
    def agent_stdout(self) -> P:
        return self.path / AGENT_STDOUT

    @property
    def agent_stderr(self) -> P:
        return self.path / AGENT_STDERR

    @property
    def agent_home(self) -> P:
        return self.path / AGENT_HOME

    @property
    def agent_config(self) -> P:
        return self.path / AGENT_CONFIG

    @property
    def agent_tmp(self) -> P:
        return self.path / AGENT_TMP

    @property
    def agent_git(self) -> P:
        return self.path / AGENT_GIT

    @property
    def grade_home(self) -> P:
        return self.path / GRADE_HOME

    @property
    def grade_json(self) -> P:
        return self.path / GRADE_JSON

    @property
    def grade_run_json(self) -> P:
        return self.path / GRADE_RUN_JSON

    @property
    def static_json(self) -> P:
        return self.path / STATIC_JSON

    @property
    def builtin_tests(self) -> P:
        return self.path / BUILTIN_TESTS

    @property
    def workspace_diff(self) -> P:
        return self.path / WORKSPACE_DIFF

    @property
    def workspace_diff_json(self) -> P:
        return self.path / WORKSPACE_DIFF_JSON

    @property
    def tests_list_json(self) -> P:
        return self.path / TESTS_LIST_JSON

    @property
    def merge_json(self) -> P:
        return self.path / MERGE_JSON

    @property
    def own_tests_json(self) -> P:
        return self.path / OWN_TESTS_JSON

    @property
    def own_tests_dir(self) -> P:
        return self.path / OWN_TESTS_DIR

    @property
    def review_json(self) -> P:
        return self.path / REVIEW_JSON

    @property
    def perf_dir(self) -> P:
        return self.path / PERF_DIR

    @property
    def perf_stdout(self) -> P:
        return self.path / PERF_STDOUT

    @property
    def perf_stderr(self) -> P:
        return self.path / PERF_STDERR

    @property
    def not_returned(self) -> P:
        return self.path / NOT_RETURNED

    @property
    def gateway_jsonl(self) -> P:
        return self.path / GATEWAY_JSONL

    @property
    def egress_jsonl(self) -> P:
        return self.path / EGRESS_JSONL

    @property
    def result_json(self) -> P:
        return self.path / RESULT_JSON

    @property
    def perf_check_json(self) -> P:
        return self.path / PERF_DIR / PERF_CHECK_JSON

    @property
    def perf_out(self) -> P:
        """The perf entry point's documents of the cell's own variant."""
        return self.path / PERF_DIR / PERF_OUT_DIR

    @property
    def validation(self) -> P:
        """A task's validation commands: their trees while they run, prepared.json, commands.json."""
        return self.path / VALIDATION_DIR

    @property
    def validation_commands_json(self) -> P:
        return self.path / VALIDATION_DIR / VALIDATION_COMMANDS_JSON

    @property
    def perf_oracle(self) -> P:
        """Where a cell keeps its oracle variant for the perf check (a run directory of its own)."""
        return self.path / PERF_DIR / PERF_ORACLE_DIR


# --- the eval directory -------------------------------------------------------------------------------------

RUBRIC_JSON: Final = "rubric.json"
"""tasks/<id>/rubric.json: the maintainer's rubric (mergeability)."""
REVIEW_RULES_JSON: Final = "review_rules.json"
"""<eval_dir>/review_rules.json: the team's review rules."""
ORACLE_PATCH: Final = "oracle.patch"


def tasks_rel(manifest: RepoManifest) -> str:
    """The tasks directory relative to eval_dir (``.`` when they are the same)."""
    eval_dir = (manifest.eval_dir or "").strip("/")
    tasks = (manifest.tasks or "").strip("/")
    return posixpath.relpath(tasks, eval_dir) if eval_dir else tasks or "."


def task_dir(content: Path, manifest: RepoManifest, task_id: str) -> Path:
    """A task's directory inside an exported eval_dir (``content``): where its task.json, patches and rubric
    are. The one formula; every caller uses it."""
    return content / tasks_rel(manifest) / task_id


# --- a batch ------------------------------------------------------------------------------------------------

LOCK_FILE: Final = ".dokimi-writer.lock"
"""The lock file of a batch's one writer (``repo run``, ``repo regrade``); it names the holder."""
EVAL_DIR_NAME: Final = "_eval"
"""The batch's own directory (pin, plan, exported eval content); never a task."""
BATCH_JSON: Final = "batch.json"
PLAN_JSON: Final = "plan.json"
MANIFEST_COPY: Final = "manifest.json"
CONTENT_DIR: Final = "content"
SUPPORT_DIR: Final = "support"
DRY_RUN_DIR: Final = "dry-run"
JUDGE_CACHE_DIR: Final = "judge-cache"
REGRADE_DIR: Final = "regrade"
REFERENCE_DIR: Final = "reference"
"""``_eval/reference/<task>/``: what a task's runs are compared with, measured once per batch."""
REFERENCE_JSON: Final = "reference.json"
REFERENCE_RUN_DIR: Final = "run"
"""The scratch run directory of a task's reference (the base workspace, then the oracle and its grade)."""
RUBRIC_CHECK_JSON: Final = "rubric-check.json"
"""``repo rubric check --out``: the admission record of the rubrics (beside tasks-check.json)."""
TASKS_CHECK_JSON: Final = "tasks-check.json"
"""``repo tasks check --out``: the report, beside ``_eval/content`` and ``<task>/<null|oracle>/``."""
DEFAULT_EFFORT_SLUG: Final = "default"
"""The effort component of a cell path when no effort is set."""

_UNSAFE = re.compile(r"[^A-Za-z0-9._-]")
REP_DIR = re.compile(r"^rep(\d+)$")


def slug(value: str) -> str:
    """A path component for ``value``: every char outside ``[A-Za-z0-9._-]`` becomes ``_``.

    ``guidance:none`` -> ``guidance_none``. The empty string and a value of dots only (``.``, ``..``), which
    would name no directory or the parent, become underscores of the same length (at least one).
    """
    out = _UNSAFE.sub("_", value)
    if not out.strip("."):
        out = "_" * max(1, len(out))
    return out


def effort_slug(effort: str | None) -> str:
    """The effort component of a cell path: ``default`` when no effort is set."""
    return DEFAULT_EFFORT_SLUG if effort is None else slug(effort)


def cell_dir(
    batch_root: Path,
    task: str,
    arm: str,
    model: str,
    effort: str | None,
    rep: int,
    *,
    prompt: str | None = None,
) -> Path:
    """The run_dir of one cell: ``<batch>/<task>/<arm>/<model>/<effort>/rep<N>``; a prompt variant a run chose
    (``--prompt-style``) joins the arm's directory: ``<arm>.prompt-<style>``."""
    arm_dir = slug(arm) if prompt is None else f"{slug(arm)}.prompt-{slug(prompt)}"
    return batch_root / slug(task) / arm_dir / slug(model) / effort_slug(effort) / f"rep{rep}"


@dataclass(frozen=True)
class BatchLayout:
    """Where everything of one batch is (see the module docstring)."""

    root: Path

    @property
    def name(self) -> str:
        return self.root.name

    @property
    def eval_root(self) -> Path:
        return self.root / EVAL_DIR_NAME

    @property
    def pin(self) -> Path:
        return self.eval_root / BATCH_JSON

    @property
    def plan(self) -> Path:
        return self.eval_root / PLAN_JSON

    @property
    def manifest_copy(self) -> Path:
        return self.eval_root / MANIFEST_COPY

    @property
    def content(self) -> Path:
        return self.eval_root / CONTENT_DIR

    @property
    def support(self) -> Path:
        return self.eval_root / SUPPORT_DIR

    @property
    def dry_run(self) -> Path:
        return self.eval_root / DRY_RUN_DIR

    @property
    def judge_cache(self) -> Path:
        return self.eval_root / JUDGE_CACHE_DIR

    @property
    def regrade(self) -> Path:
        return self.eval_root / REGRADE_DIR

    @property
    def references(self) -> Path:
        return self.eval_root / REFERENCE_DIR

    def reference_json(self, task: str) -> Path:
        """``_eval/reference/<task>/reference.json`` (repo_task_reference.v1)."""
        return self.references / slug(task) / REFERENCE_JSON

    def reference_run_dir(self, task: str) -> Path:
        """The run directory the task's reference was measured in (kept for inspection)."""
        return self.references / slug(task) / REFERENCE_RUN_DIR

    def rel(self, run_dir: Path) -> str:
        """A run directory's path relative to the batch (``task/arm/model/effort/repN``)."""
        return run_dir.relative_to(self.root).as_posix()


def batch_root_of(run_dir: Path) -> Path | None:
    """The batch a run directory belongs to: the nearest parent with ``_eval/batch.json``; None outside a
    batch."""
    return next((p for p in run_dir.parents if BatchLayout(p).pin.is_file()), None)


GRADER_PROBE: Final = "grader-probe"
"""``repo tasks check``: the run directory of a task's grader isolation probe, beside null and oracle."""
GRADER_PROBE_REPORTS: Final = "grader-probe-reports"
"""Beside it: what the probe reported (mounted at /eval/probe while it ran)."""


def tasks_check_run_dir(out: Path, task_id: str, phase: str, *, arm: str | None = None) -> Path:
    """``repo tasks check``: the run directory of one task's null or oracle workspace; under another arm than
    guidance:raw, ``<phase>-<arm>`` with the arm's ``:`` and ``=`` as ``_`` (``null-guidance_none``)."""
    if arm is None:
        return out / task_id / phase
    return out / task_id / f"{phase}-{re.sub(r'[^A-Za-z0-9._-]+', '_', arm)}"
