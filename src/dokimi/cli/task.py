"""``dokimi repo task new ID --from-commit SHA | --from-pr MERGE [--tests GLOB]``: a task mined from a fix
(dokimi.repo.mining), its tests classified and the task checked. ``repo task new --from-log RANGE [-j N]``:
every fix of a range (dokimi.runner.minelog), exit 0 once the range is mined whatever was skipped, 2 on a bad
range or manifest, 130 on Ctrl-C (no candidate's task directory left).

Exit codes: 0 the task is written and sound (the null workspace fails, the oracle passes); 1 it is not sound:
tasks check finds a problem (the task directory stays, to be fixed), or no test goes from failing to passing
(the task directory is removed again: it is no task); 2 nothing could be mined (not a fix commit, no test in
it, an existing task directory, no docker). Whenever the task is not sound or mining stops half-way, the null
and oracle run directories (grade.json, grade.stderr, the workspaces) are kept under dokimi's cache and their
path is printed; a half-made task directory is removed, its patches kept with them.
"""

from __future__ import annotations

import contextlib
import shutil
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

import click

from dokimi.cli._common import (
    LiveBar,
    echo,
    emit_json,
    json_option,
    note,
    working_tree_options,
)
from dokimi.cli.groups import SuggestingGroup
from dokimi.constants import EXIT_FOUND_PROBLEMS, EXIT_OK
from dokimi.errors import UsageError

if TYPE_CHECKING:
    from dokimi.repo.mining import MinedTask

MAX_LISTED = 20
PHASE_WORDS = {"null": "before the fix", "oracle": "with the fix"}


@click.group("task", cls=SuggestingGroup)
def task() -> None:
    """Make tasks: mine a fix commit or a merged pull request into a task."""


@task.command("new")
@click.argument("task_id", metavar="[ID]", required=False)
@click.option(
    "--from-commit", "from_commit", metavar="SHA", help="A fix commit; the task's base is its parent."
)
@click.option(
    "--from-pr",
    "from_pr",
    metavar="MERGE",
    help="The merge commit of a pull request; base: its first parent.",
)
@click.option(
    "--from-log",
    "from_log",
    metavar="RANGE",
    help="Every fix of a range of history (v1.2..main, HEAD~50..HEAD; merges left out), each made into a "
    "task named after its subject and SHA, or skipped with the reason: no test, only tests, no "
    "failing-before test, flaky (a test changes outcome between two runs), not sound.",
)
@click.option(
    "-j",
    "--jobs",
    type=click.IntRange(min=1),
    help="With --from-log: candidates graded side by side (default 1).",
)
@click.option(
    "--tests",
    "test_globs",
    multiple=True,
    metavar="GLOB",
    help="Which changed files are tests, the hidden part (repeatable; default: test_*.py, *_test.py, "
    "conftest.py and tests/ or test/ directories).",
)
@working_tree_options
@click.option("--image", metavar="IMAGE", help="Check in this local image instead of building one.")
@json_option
def new(
    task_id: str | None,
    from_commit: str | None,
    from_pr: str | None,
    from_log: str | None,
    jobs: int | None,
    test_globs: tuple[str, ...],
    repo_dir: Path,
    manifest: str | None,
    image: str | None,
    as_json: bool,
) -> int:
    """Mine the fix FROM-COMMIT (or the pull request merged by FROM-PR) into task ID: its test changes
    become the hidden tests (tests.patch), its code changes the reference solution (oracle.patch), its
    message, minus what gives the fix away, the draft prompt. With a built-in grade, the null and oracle
    workspaces are then graded to find FAIL_TO_PASS and PASS_TO_PASS test ids, and tasks check runs on the
    task. Edit the prompt in task.json afterwards.

    With --from-log RANGE instead (no ID): every fix of the range, a table of what became of each (--json: a
    repo_task_mining.v1 document); exit 0 once the range is mined, whatever was skipped."""
    # here, not at the top: a command's --help loads no library code (bench/bench_cli_start.py)
    from dokimi.repo.builtin_graders import is_builtin
    from dokimi.repo.manifest import load_manifest
    from dokimi.repo.mining import (
        DEFAULT_TEST_GLOBS,
        TASK_ID,
        draft_prompt,
        patch_of,
        read_fix,
        write_task,
    )
    from dokimi.source import open_source

    if sum(x is not None for x in (from_commit, from_pr, from_log)) != 1:
        raise click.UsageError("give --from-commit SHA, --from-pr MERGE or --from-log RANGE (one of them)")
    if from_log is not None:
        if task_id is not None:
            raise click.UsageError("--from-log names each task itself: give no ID")
        return _from_log(from_log, test_globs, repo_dir, manifest, image, jobs or 1, as_json)
    if jobs is not None:
        raise click.UsageError("-j/--jobs is for --from-log")
    if task_id is None:
        raise click.UsageError("give the new task's ID")
    if not TASK_ID.match(task_id):
        raise click.UsageError(f"{task_id!r}: a task id is letters, digits, '.', '_' and '-'")
    globs = list(test_globs) or list(DEFAULT_TEST_GLOBS)
    # here, not at the top: a command's --help loads no library code (bench/bench_cli_start.py)
    from dokimi.source.git import toplevel

    repo_dir = toplevel(repo_dir) or repo_dir  # run from a subdirectory: the task goes under the root's tasks
    with open_source(str(repo_dir)) as repo:
        loaded = load_manifest(repo.eval_snapshot(), manifest=manifest, manifest_file=None, required=True)
        m = loaded.manifest
        if m is None or m.tasks is None or m.entry_points is None:
            raise UsageError(
                "the manifest has no tasks directory and entry points",
                hint="run `dokimi repo init` first, or add eval_dir, tasks and entry_points",
            )
        if repo.git_dir is None:
            raise UsageError(f"{repo_dir} is not a git repository", hint="task new reads the fix from git")
        fix = read_fix(
            repo.git_dir, from_pr or from_commit or "", merge=from_pr is not None, test_globs=globs
        )
        tests = patch_of(repo.git_dir, fix, fix.test_paths)
        oracle = patch_of(repo.git_dir, fix, fix.code_paths)
        builtin = is_builtin(m.entry_points.grade)
        grader = m.entry_points.grade.split()[0] if builtin else "builtin:pytest"
        directory = repo_dir / m.tasks / task_id
        prompt = draft_prompt(fix.message, [*fix.test_paths, *fix.code_paths])
        data = write_task(directory, task_id, fix, prompt=prompt, grader=grader, tests=tests, oracle=oracle)
    # here, not at the top: a command's --help loads no library code (bench/bench_cli_start.py)
    from dokimi.repo.mining import MinedTask

    mined = MinedTask(task_id, directory, fix, prompt)
    note(f"wrote {_shown(directory)}: task.json, tests.patch ({len(fix.test_paths)} file(s)), oracle.patch "
         f"({len(fix.code_paths)} file(s)); base {fix.base_rev}")  # fmt: skip
    if builtin:
        with _half_made_removed(mined):
            if _has_test_ids(m.entry_points.grade):
                _discover_and_check(repo_dir, manifest, image, mined, data)
            else:  # builtin:command without {report}: its exit code decides, there are no ids to find
                note("checking the task: the null workspace must fail, the oracle must pass ...")
                _record_check(mined, _check(repo_dir, manifest, image, task_id, mined.evidence))
        _drop_evidence_of_a_sound_task(mined)
    else:
        note(
            "the manifest's grade is not a built-in, so the tests were not classified: your grader reads "
            "tests.patch and oracle.patch (or switch to grade: builtin:pytest)"
        )
    if as_json:
        emit_json(_summary(mined))
    else:
        _print(mined)
    ok = mined.check_ok is not False and (not builtin or mined.checked)
    return EXIT_OK if ok else EXIT_FOUND_PROBLEMS


def _check(
    repo_dir: Path,
    manifest: str | None,
    image: str | None,
    task_id: str,
    out: Path | None,
    *,
    discovery: bool = False,
) -> Any:
    """repo tasks check on one task, from a freshly opened working tree (it holds the new files): under
    guidance:raw alone to find the tests (``discovery``), else under every arm tasks check proves."""
    # here, not at the top: a command's --help loads no library code (bench/bench_cli_start.py)
    from dokimi.repo.arms import ARM_RAW
    from dokimi.repo.manifest import load_manifest
    from dokimi.runner.taskcheck import CheckOptions, check_tasks
    from dokimi.source import open_source

    with open_source(str(repo_dir)) as repo:
        loaded = load_manifest(repo.eval_snapshot(), manifest=manifest, manifest_file=None, required=True)
        arms = [ARM_RAW] if discovery else []
        options = CheckOptions(task_ids=[task_id], out_dir=out, image=image, arms=arms)
        return check_tasks(
            repo,
            loaded,
            options,
            on_image=lambda built: note(f"image {built.ref} ({'built' if built.built else 'reused'})"),
            on_build=note,
        )


@contextlib.contextmanager
def _half_made_removed(mined: MinedTask) -> Iterator[None]:
    """The null and oracle run directories go to an evidence directory; when mining stops half-way (an error,
    Ctrl-C), the task directory is removed, its patches kept with the evidence, and both paths are said."""
    # here, not at the top: a command's --help loads no library code (bench/bench_cli_start.py)
    from dokimi.repo.mining import evidence_directory, keep_patches

    mined.evidence = evidence_directory(mined.task_id)
    try:
        yield
    except BaseException:
        keep_patches(mined.directory, mined.evidence)
        shutil.rmtree(mined.directory, ignore_errors=True)
        note(
            f"removed the half-made task directory {_shown(mined.directory)}; its patches and the grader's "
            f"output are kept in {mined.evidence}"
        )
        raise


def _drop_evidence_of_a_sound_task(mined: MinedTask) -> None:
    if mined.evidence is not None and mined.check_ok is True:
        shutil.rmtree(mined.evidence, ignore_errors=True)
        mined.evidence = None


def _discover_and_check(
    repo_dir: Path,
    manifest: str | None,
    image: str | None,
    mined: MinedTask,
    data: dict[str, Any],
) -> None:
    # here, not at the top: a command's --help loads no library code (bench/bench_cli_start.py)
    from dokimi.repo.mining import discover, keep_patches, write_task_json

    assert mined.evidence is not None
    note("grading the null and the oracle workspaces to find FAIL_TO_PASS and PASS_TO_PASS ...")
    found = discover(
        data,
        lambda out: _check(repo_dir, manifest, image, mined.task_id, out, discovery=True),
        mined.evidence,
    )
    mined.fail_to_pass, mined.pass_to_pass = found.fail_to_pass, found.pass_to_pass
    mined.failing_with_fix, mined.collection_errors = found.failing_with_fix, found.collection_errors
    data["fail_to_pass"], data["pass_to_pass"] = found.fail_to_pass, found.pass_to_pass
    write_task_json(mined.directory, data)
    if not found.fail_to_pass:
        mined.check_ok = False
        mined.check_problems = [
            "no test fails before the fix and passes after it: the task cannot tell a fix from no fix",
        ]
        # a task without a FAIL_TO_PASS test is no task: it leaves the tasks directory, its evidence is kept
        keep_patches(mined.directory, mined.evidence)
        shutil.rmtree(mined.directory, ignore_errors=True)
        mined.removed = True
        return
    note("checking the task: the null workspace must fail, the oracle must pass ...")
    _record_check(mined, _check(repo_dir, manifest, image, mined.task_id, mined.evidence / "check"))


def _has_test_ids(grade: str) -> bool:
    """builtin:pytest, and builtin:command with a JUnit {report}, grade by test ids; builtin:command without
    one grades by its exit code alone."""
    # here, not at the top: a command's --help loads no library code (bench/bench_cli_start.py)
    from dokimi.repo.builtin_graders import uses_report

    return grade.split()[0] == "builtin:pytest" or uses_report(grade)


def _record_check(mined: MinedTask, report: Any) -> None:
    (result,) = report.tasks
    mined.checked = True
    mined.check_ok = result.status == "ok"
    mined.check_problems = list(result.problems)


def _summary(mined: MinedTask) -> Any:
    # here, not at the top: a command's --help loads no library code (bench/bench_cli_start.py)
    from dokimi.schemas.task_new import CollectionError, TaskNew

    return TaskNew(
        task=mined.task_id,
        directory=str(mined.directory),
        fix=mined.fix.sha,
        base=mined.fix.base_rev,
        test_files=mined.fix.test_paths,
        code_files=mined.fix.code_paths,
        prompt=mined.prompt,
        fail_to_pass=mined.fail_to_pass,
        pass_to_pass=mined.pass_to_pass,
        failing_with_fix=mined.failing_with_fix,
        checked=mined.checked,
        ok=mined.check_ok,
        problems=mined.check_problems,
        collection_errors=[
            CollectionError.model_validate({"phase": phase, "file": path, "error": line})
            for phase, files in mined.collection_errors.items()
            for path, line in sorted(files.items())
        ],
        evidence=str(mined.evidence) if mined.evidence is not None else None,
        removed=mined.removed,
    )


def _shown(path: Path) -> str:
    """``path`` relative to the working directory when it is below it (as the user typed it), else whole."""
    try:
        return str(path.resolve().relative_to(Path.cwd().resolve()))
    except ValueError:
        return str(path)


def _listed(ids: list[str]) -> str:
    shown = "\n".join(f"  {i}" for i in ids[:MAX_LISTED])
    more = (
        f"\n  ... and {len(ids) - MAX_LISTED} more (task.json lists them all)"
        if len(ids) > MAX_LISTED
        else ""
    )
    return shown + more if ids else "  (none)"


def _print(mined: MinedTask) -> None:
    echo(f"task {mined.task_id}: {_shown(mined.directory)}")
    echo(f"base {mined.fix.base_rev}")
    if mined.checked and not mined.fail_to_pass:
        echo("test ids: none (the grade command's exit code decides)")
    else:
        echo(f"FAIL_TO_PASS ({len(mined.fail_to_pass)}):\n{_listed(mined.fail_to_pass)}")
        echo(f"PASS_TO_PASS ({len(mined.pass_to_pass)}):\n{_listed(mined.pass_to_pass)}")
    if mined.failing_with_fix:
        echo(f"failing even with the fix, left out ({len(mined.failing_with_fix)}):")
        echo(_listed(mined.failing_with_fix))
    if mined.collection_errors:
        echo("collection errors (pytest could not import the test file):")
        for phase, files in mined.collection_errors.items():
            for path, line in sorted(files.items()):
                echo(f"  {PHASE_WORDS.get(phase, phase)}: {path}: {line}")
    if mined.checked:
        verdict = "sound (the null workspace fails, the oracle passes)" if mined.check_ok else "NOT sound"
        echo(f"tasks check: {verdict}")
    for problem in mined.check_problems:
        echo(f"problem: {problem}")
    if mined.removed:
        echo(f"removed {_shown(mined.directory)}: without a FAIL_TO_PASS test it is no task")
    if mined.evidence is not None:
        echo(f"kept: {mined.evidence} (the null and oracle run directories: grade.json, grade.stderr)")
    echo("draft prompt (edit it in task.json: say what is wrong, not how to fix it):")
    for line in mined.prompt.splitlines():
        echo(f"  {line}")


# --- --from-log ---------------------------------------------------------------------------------------------


class _MiningBar(LiveBar):
    """The progress of --from-log on a terminal: one bar per step over every candidate; notes above it."""

    def __init__(self, live: bool) -> None:
        super().__init__(live)
        self.current: Any = None

    def note(self, text: str) -> None:
        self.above_or_note(text)

    def phase(self, text: str, total: int) -> None:
        if self.bar is not None:
            if self.current is not None:
                self.bar.remove_task(self.current)
            self.current = self.bar.add_task(text, total=total)
        else:
            note(f"{text} ...")

    def advance(self) -> None:
        if self.bar is not None and self.current is not None:
            self.bar.advance(self.current)


def _from_log(
    rev_range: str,
    test_globs: tuple[str, ...],
    repo_dir: Path,
    manifest: str | None,
    image: str | None,
    jobs: int,
    as_json: bool,
) -> int:
    # here, not at the top: a command's --help loads no library code (bench/bench_cli_start.py)
    import sys

    from dokimi.repo.mining import DEFAULT_TEST_GLOBS
    from dokimi.runner.minelog import LogOptions, mine_log

    options = LogOptions(rev_range, tuple(test_globs or DEFAULT_TEST_GLOBS), manifest, image, jobs)
    with _MiningBar(live=sys.stderr.isatty() and not as_json) as bar:
        mined = mine_log(repo_dir, options, bar)
    if as_json:
        emit_json(_mining_document(mined))
    else:
        _print_mining(mined)
    return EXIT_OK


def _mining_document(mined: Any) -> Any:
    # here, not at the top: a command's --help loads no library code (bench/bench_cli_start.py)
    from dokimi.schemas.task_new import MinedCommit, TaskMining

    return TaskMining(
        range=mined.rev_range,
        tasks_dir=str(mined.tasks_dir),
        made=len(mined.made),
        skipped=dict(mined.skipped_by_reason),
        commits=[
            MinedCommit(
                sha=c.sha,
                subject=c.subject,
                task=c.task_id if c.skip is None else None,
                skipped=c.skip,
                detail=c.detail,
                fail_to_pass=c.fail_to_pass if c.skip is None else [],
                pass_to_pass=c.pass_to_pass if c.skip is None else [],
            )
            for c in mined.commits
        ],
        image=mined.image,
        jobs=mined.jobs,
        evidence=str(mined.evidence) if mined.evidence is not None else None,
    )


def _print_mining(mined: Any) -> None:
    # here, not at the top: a command's --help loads no library code (bench/bench_cli_start.py)
    from dokimi.cli.tables import Col, fit_line, print_lines, render_table, terminal_width
    from dokimi.repo.mining import SKIP_REASONS

    width = terminal_width()
    skipped = sum(mined.skipped_by_reason.values())
    title = f"--from-log {mined.rev_range}: {len(mined.made)} task(s) made in {_shown(mined.tasks_dir)}, " + (
        f"{skipped} commit(s) skipped" if skipped else "nothing skipped"
    )
    rows = [
        [
            c.sha[:10],
            c.task_id if c.skip is None else f"skipped: {SKIP_REASONS[c.skip]}",
            str(len(c.fail_to_pass)) if c.skip is None else "-",
            str(len(c.pass_to_pass)) if c.skip is None else "-",
        ]
        for c in mined.commits
    ]
    columns = [Col("commit", key=True), Col("task", key=True), Col("F2P", right=True), Col("P2P", right=True)]
    lines = render_table(columns, rows, width=width, title=title)
    reasons = [c for c in mined.commits if c.skip is not None]
    if reasons:
        lines.append("why each was skipped:")
        for c in reasons:
            lines += fit_line(f"  {c.sha[:10]} {SKIP_REASONS[c.skip]}: {c.detail} ({c.subject})", width)
    if mined.evidence is not None:
        lines += fit_line(
            f"kept: {mined.evidence} (the run directories and patches of the skips that were graded)", width
        )
    if mined.made:
        lines += fit_line(
            "edit each new task's prompt in its task.json: it is the commit message minus what gives the fix "
            "away",
            width,
        )
    print_lines(lines)
