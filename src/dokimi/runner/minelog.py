"""``repo task new --from-log RANGE``: every fix of a range of history mined into a task, or skipped with the
reason (docs/your-repo.md, "Many fixes at once").

A commit of the range (merges left out) becomes a task when it changes a test and code, a test fails before
it and passes after it, no test it touches changes outcome between two runs of the same workspace, and
``repo tasks check`` then proves the task sound. Otherwise it is skipped, and the reason is one of
:data:`dokimi.repo.mining.SKIP_REASONS`: no test, only tests, no failing-before test, flaky, not sound,
already a task, a grader error.

The steps, each over every candidate at once so the image is built (or found) once and ``--jobs`` grades
candidates side by side: (1) git only: read each commit, write the task directories of the candidates; (2)
the null and oracle workspaces graded in discovery mode, twice (two tasks checks under guidance:raw); (3) the
FAIL_TO_PASS and PASS_TO_PASS ids written into each task.json; (4) ``repo tasks check`` over the tasks left.
A task directory exists only for a task made: a skipped candidate's directory is removed (its patches kept
with the evidence), and so is every candidate's when mining stops half-way (an error, Ctrl-C). The run
directories are kept under dokimi's cache while a skip needs them, and removed when every commit made a task.
"""

from __future__ import annotations

import contextlib
import json
import shutil
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Protocol

from dokimi.errors import DokimiError, UsageError
from dokimi.repo.arms import ARM_RAW
from dokimi.repo.builtin_graders import is_builtin, uses_report
from dokimi.repo.manifest import load_manifest
from dokimi.repo.mining import (
    LogCommit,
    PhaseOutcomes,
    classify,
    draft_prompt,
    evidence_directory,
    keep_patches,
    log_commits,
    log_task_id,
    outcome_changes,
    patch_of,
    phase_outcomes,
    read_log_commit,
    write_task,
    write_task_json,
)
from dokimi.rundir import TASK_JSON
from dokimi.runner.taskcheck import CheckOptions, check_tasks
from dokimi.sandbox.image import BuiltImage
from dokimi.schemas.task_new import SkipReason
from dokimi.schemas.tasks_check import TasksCheck
from dokimi.source import open_source
from dokimi.source.git import toplevel

PHASES = ("null", "oracle")
DISCOVERY_RUNS = 2
"""How many times each workspace is graded to find its tests: a test whose outcome differs is flaky."""


@dataclass(frozen=True)
class LogOptions:
    """``repo task new --from-log``'s options as plain values."""

    rev_range: str
    test_globs: tuple[str, ...]
    manifest: str | None = None
    image: str | None = None
    jobs: int = 1


class MiningProgress(Protocol):
    """What mining a range reports while it runs (the CLI draws it; the library never prints)."""

    def note(self, text: str) -> None: ...

    def phase(self, text: str, total: int) -> None:
        """A step over every candidate starts: ``total`` units of work follow, each reported by
        :meth:`advance`."""

    def advance(self) -> None: ...


class QuietMining:
    def note(self, text: str) -> None:
        pass

    def phase(self, text: str, total: int) -> None:
        pass

    def advance(self) -> None:
        pass


@dataclass
class LogMining:
    """What ``--from-log`` did with each commit of the range."""

    rev_range: str
    tasks_dir: Path
    commits: list[LogCommit]
    image: str | None = None
    evidence: Path | None = None
    """The run directories kept (null, oracle, tasks check) for the skips that needed a grade; None when
    nothing is kept."""
    jobs: int = 1
    skipped_by_reason: dict[SkipReason, int] = field(default_factory=dict)

    @property
    def made(self) -> list[LogCommit]:
        return [c for c in self.commits if c.task_id is not None and c.skip is None]


CheckRun = Callable[[Sequence[str], Path, Sequence[str], str], TasksCheck]
"""Runs ``repo tasks check`` on these task ids, its run directories under the path, under these arms (empty:
the default arms), from a freshly opened working tree; the text says what the step is (the progress bar's)."""


def mine_log(repo_dir: Path, options: LogOptions, progress: MiningProgress | None = None) -> LogMining:
    """Mine every fix of ``options.rev_range`` in the working tree ``repo_dir`` (see the module docstring)."""
    progress = progress or QuietMining()
    repo_dir = toplevel(repo_dir) or repo_dir
    with open_source(str(repo_dir)) as repo:
        loaded = load_manifest(
            repo.eval_snapshot(), manifest=options.manifest, manifest_file=None, required=True
        )
        m = loaded.manifest
        if m is None or m.tasks is None or m.entry_points is None:
            raise UsageError(
                "the manifest has no tasks directory and entry points",
                hint="run `dokimi repo init` first, or add eval_dir, tasks and entry_points",
            )
        if repo.git_dir is None:
            raise UsageError(f"{repo_dir} is not a git repository", hint="--from-log reads fixes from git")
        grade = m.entry_points.grade
        if not is_builtin(grade) or not (grade.split()[0] == "builtin:pytest" or uses_report(grade)):
            raise UsageError(
                "--from-log tells a fix with a failing test from the rest by the test ids the built-in "
                f"grader reports, and the manifest's grade is {grade.split()[0]!r}",
                hint="use grade: builtin:pytest (or builtin:command with a JUnit {report}), or mine one "
                "commit at a time with --from-commit",
            )
        tasks_dir = repo_dir / m.tasks
        commits = log_commits(repo.git_dir, options.rev_range)
        progress.note(f"{len(commits)} commit(s) in {options.rev_range}")
        already = _mined_bases(tasks_dir)
        taken = {p.name for p in tasks_dir.iterdir()} if tasks_dir.is_dir() else set()
        for commit in commits:
            if f"{commit.sha}^" in already:
                commit.skip_with("mined", f"task {already[f'{commit.sha}^']} is mined from it")
                continue
            read_log_commit(repo.git_dir, commit, options.test_globs)
            if commit.fix is not None:
                commit.task_id = log_task_id(commit, taken)
                taken.add(commit.task_id)
        result = LogMining(options.rev_range, tasks_dir, commits, jobs=options.jobs)
        candidates = [c for c in commits if c.skip is None]
        if not candidates:
            _count(result)
            return result
        evidence = evidence_directory("from-log")
        result.evidence = evidence

        def run_check(task_ids: Sequence[str], out: Path, arms: Sequence[str], text: str) -> TasksCheck:
            return _check(repo_dir, options, _Step(list(task_ids), out, list(arms), text), progress, result)

        with _half_made_removed(candidates, tasks_dir, evidence, progress):
            for commit in candidates:
                assert commit.fix is not None and commit.task_id is not None
                fix = commit.fix
                write_task(
                    tasks_dir / commit.task_id,
                    commit.task_id,
                    fix,
                    prompt=draft_prompt(fix.message, [*fix.test_paths, *fix.code_paths]),
                    grader=grade.split()[0],
                    tests=patch_of(repo.git_dir, fix, fix.test_paths),
                    oracle=patch_of(repo.git_dir, fix, fix.code_paths),
                )
            discover_tests(candidates, tasks_dir, evidence, run_check)
            check_made(candidates, tasks_dir, evidence, run_check)
    _drop_evidence(result)
    _count(result)
    return result


@dataclass(frozen=True)
class _Step:
    task_ids: list[str]
    out: Path
    arms: list[str]
    text: str


def _check(
    repo_dir: Path, options: LogOptions, step: _Step, progress: MiningProgress, result: LogMining
) -> TasksCheck:
    with open_source(str(repo_dir)) as repo:  # freshly opened: the working tree holds the new tasks
        loaded = load_manifest(
            repo.eval_snapshot(), manifest=options.manifest, manifest_file=None, required=True
        )
        check = CheckOptions(
            task_ids=step.task_ids, out_dir=step.out, image=options.image, arms=step.arms, jobs=options.jobs
        )

        def on_image(built: BuiltImage) -> None:
            if result.image is None:
                result.image = built.ref
                progress.note(f"image {built.ref} ({'built' if built.built else 'reused'})")

        return check_tasks(
            repo,
            loaded,
            check,
            progress=lambda _task, _event: progress.advance(),
            on_image=on_image,
            on_total=lambda total: progress.phase(step.text, total),
            on_build=progress.note,
        )


def discover_tests(candidates: list[LogCommit], tasks_dir: Path, evidence: Path, run_check: CheckRun) -> None:
    """Grade each candidate's null and oracle workspaces :data:`DISCOVERY_RUNS` times (guidance:raw only),
    then skip the flaky ones (a test changed outcome between runs) and those where no test fails before the
    fix and passes after it; the others get their FAIL_TO_PASS and PASS_TO_PASS ids in task.json."""
    runs: list[dict[str, dict[str, PhaseOutcomes]]] = []
    for number in range(1, DISCOVERY_RUNS + 1):
        alive = [c for c in candidates if c.skip is None]
        if not alive:
            return
        out = evidence / f"discovery-{number}"
        text = f"grading {len(alive)} candidate(s) before and after the fix, run {number} of {DISCOVERY_RUNS}"
        run_check([c.task_id or "" for c in alive], out, [ARM_RAW], text)
        found: dict[str, dict[str, PhaseOutcomes]] = {}
        for commit in alive:
            assert commit.task_id is not None
            try:
                found[commit.task_id] = {p: phase_outcomes(out, commit.task_id, p) for p in PHASES}
            except DokimiError as exc:
                _skip(commit, tasks_dir, evidence, "error", exc.message.splitlines()[0])
        runs.append(found)
    for commit in candidates:
        if commit.skip is not None:
            continue
        assert commit.task_id is not None
        first, second = runs[0][commit.task_id], runs[-1][commit.task_id]
        changed = [
            f"{phase}: {change}"
            for phase in PHASES
            for change in outcome_changes(first[phase].outcomes, second[phase].outcomes)
        ]
        if changed:
            more = f" (and {len(changed) - 3} more)" if len(changed) > 3 else ""
            _skip(commit, tasks_dir, evidence, "flaky", "; ".join(changed[:3]) + more)
            continue
        f2p, p2p, _failing = classify(first["null"].outcomes, first["oracle"].outcomes)
        if not f2p:
            errors = sorted({f"{f}: {e}" for p in PHASES for f, e in first[p].collection_errors.items()})
            why = "no test fails before the fix and passes after it"
            _skip(commit, tasks_dir, evidence, "no_failing_test", why + (f" ({errors[0]})" if errors else ""))
            continue
        commit.fail_to_pass, commit.pass_to_pass = f2p, p2p
        task_json = tasks_dir / commit.task_id / TASK_JSON
        data = _read_task_json(task_json)
        data["fail_to_pass"], data["pass_to_pass"] = f2p, p2p
        write_task_json(tasks_dir / commit.task_id, data)


def check_made(candidates: list[LogCommit], tasks_dir: Path, evidence: Path, run_check: CheckRun) -> None:
    """``repo tasks check`` (its default arms) over the tasks left: a task it does not prove sound is
    skipped with its problems."""
    alive = [c for c in candidates if c.skip is None]
    if not alive:
        return
    text = f"tasks check of {len(alive)} task(s)"
    report = run_check([c.task_id or "" for c in alive], evidence / "check", [], text)
    by_id = {t.task: t for t in report.tasks}
    for commit in alive:
        assert commit.task_id is not None
        checked = by_id.get(commit.task_id)
        if checked is None or checked.status != "ok":
            problems = "; ".join(checked.problems) if checked is not None else "tasks check did not report it"
            _skip(commit, tasks_dir, evidence, "not_sound", problems or (checked.status if checked else ""))


def _skip(commit: LogCommit, tasks_dir: Path, evidence: Path, reason: SkipReason, detail: str) -> None:
    """A candidate skipped after its task directory was written: the directory leaves the tasks directory,
    its patches kept with the evidence."""
    commit.skip_with(reason, detail)
    assert commit.task_id is not None
    _remove_task_dir(tasks_dir / commit.task_id, evidence / "patches" / commit.task_id)


def _remove_task_dir(directory: Path, kept: Path) -> None:
    if directory.is_dir():
        kept.mkdir(parents=True, exist_ok=True)
        keep_patches(directory, kept)
        shutil.rmtree(directory, ignore_errors=True)


@contextlib.contextmanager
def _half_made_removed(
    candidates: list[LogCommit], tasks_dir: Path, evidence: Path, progress: MiningProgress
) -> Iterator[None]:
    """On an error or Ctrl-C before the last step ends, no candidate's task directory is left: each goes,
    its patches kept with the evidence, and the note says so."""
    try:
        yield
    except BaseException:
        removed = 0
        for commit in candidates:
            if commit.task_id is not None and (tasks_dir / commit.task_id).is_dir():
                _remove_task_dir(tasks_dir / commit.task_id, evidence / "patches" / commit.task_id)
                removed += 1
        progress.note(
            f"stopped: removed {removed} half-made task director{'y' if removed == 1 else 'ies'} from "
            f"{tasks_dir}; their patches and the run directories so far are kept in {evidence}"
        )
        raise


def _read_task_json(path: Path) -> dict[str, object]:
    data = json.loads(path.read_text(encoding="utf-8"))
    assert isinstance(data, dict)
    return data


def _mined_bases(tasks_dir: Path) -> dict[str, str]:
    """``base`` -> task id of every task already in the tasks directory (a rerun of a range skips them)."""
    bases: dict[str, str] = {}
    if not tasks_dir.is_dir():
        return bases
    for task_json in sorted(tasks_dir.glob(f"*/{TASK_JSON}")):
        try:
            data = json.loads(task_json.read_text(encoding="utf-8"))
        except (OSError, ValueError):
            continue
        base = data.get("base") if isinstance(data, dict) else None
        if isinstance(base, str):
            bases[base] = task_json.parent.name
    return bases


def _drop_evidence(result: LogMining) -> None:
    """The run directories of the tasks made go; the whole evidence directory when no skip needs it."""
    if result.evidence is None:
        return
    graded_skips = [c for c in result.commits if c.skip in ("no_failing_test", "flaky", "not_sound", "error")]
    if not graded_skips:
        shutil.rmtree(result.evidence, ignore_errors=True)
        result.evidence = None
        return
    for commit in result.made:
        for run in result.evidence.iterdir():
            if commit.task_id and (run / commit.task_id).is_dir():
                shutil.rmtree(run / commit.task_id, ignore_errors=True)


def _count(result: LogMining) -> None:
    counts: dict[SkipReason, int] = {}
    for commit in result.commits:
        if commit.skip is not None:
            counts[commit.skip] = counts.get(commit.skip, 0) + 1
    result.skipped_by_reason = counts
