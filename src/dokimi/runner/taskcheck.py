"""``repo tasks check``: every task proven sound before any paid run, with no LLM.

Per task, in containers from the eval tree's image:

1. **null**: the workspace is prepared (arm guidance:raw) and left untouched. The isolation probe
   runs with the agent's mounts (:func:`dokimi.sandbox.probe.isolation_probe`); for a task with a rubric,
   the manifest's ``tests.list`` must print at least one test id there; then ``grade``. The null
   workspace must fail the gate; a score-only task must stay below ``score.max``.
2. **oracle**: a fresh workspace, ``oracle`` in a grade container, then ``grade``. It must pass the gate; a
   score-only task must reach ``score.max`` on ``score.metric``.

A grader failure on either workspace (a crash, a timeout, no or an invalid grade.json) is a grader bug and is
reported with its stderr. A task that cannot be prepared (a patch that does not apply), that an isolation rule
fails, or whose oracle fails, is broken. A task with ``egress`` is checked like any other: tasks check starts
a batch network with its firewall chain and the egress proxy (as a sealed ``repo run`` does), and the task's
entry points reach its egress hosts, and nothing else, through the proxy; every attempt is in the phase's
egress.jsonl (:mod:`dokimi.grading.egress`). Where that network cannot be made (no root, no iptables), such
a task is unsupported, with the reason: it never runs with a wider network than its egress.
Each task runs with its own network: ``image.network`` (none or docker's bridge); ``--warm``
runs both steps with a network (``--build-network``, default bridge) to fill the read-write caches for later
offline runs.

Null and oracle of every task are independent units of work; ``jobs`` of them run at once.
"""

from __future__ import annotations

import dataclasses
import json
import posixpath
import secrets
import shutil
import tempfile
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from contextlib import ExitStack
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Literal

from dokimi import safefs
from dokimi.errors import ContainerError, DokimiError, UsageError, WorkspaceError
from dokimi.gateway.sealed import SealedBatch
from dokimi.globs import is_glob
from dokimi.grading.entrypoints import GradeOutcome, run_entry_point, source_dir_for
from dokimi.grading.environment import GRADE_TIMEOUT_S, GradeEnvironment
from dokimi.grading.gate import GateVerdict, reaches_score_max
from dokimi.grading.grade import CellFacts, GradedCell, grade_cell
from dokimi.grading.merge import before_agent, load_rubric
from dokimi.grading.probe import GraderProbe, grader_isolation_probe
from dokimi.grading.testlist import list_command, run_tests_list
from dokimi.harness.profile import load_profile
from dokimi.repo.arms import ARM_BRIDGE, ARM_GENERATED, ARM_NONE, ARM_RAW, ARM_TREE, Arm
from dokimi.repo.manifest import load_tasks
from dokimi.repo.rubrics import held_out_dir, overlay_held_out_rubrics
from dokimi.repo.rules import load_review_rules
from dokimi.repo.workspace import GuidanceOverlay, WorkspaceSource, prepare_workspace
from dokimi.rundir import (
    CONTENT_DIR,
    EVAL_DIR_NAME,
    GRADER_PROBE,
    GRADER_PROBE_REPORTS,
    TASK_JSON,
    TASKS_CHECK_JSON,
    WORKSPACE,
    RunDir,
    task_dir,
    tasks_check_run_dir,
)
from dokimi.runner.admission import checked_against, eval_dir_digest, record_check
from dokimi.runner.guidance import build_overlays
from dokimi.sandbox.container import container_name
from dokimi.sandbox.docker import remove_batch_containers, require_docker
from dokimi.sandbox.image import BUILD_TIMEOUT_S, BuiltImage, build_image, use_image
from dokimi.sandbox.probe import DEFAULT_GUIDANCE_NAMES, ProbeResult, isolation_probe
from dokimi.sandbox.specs import agent_spec, image_env, prepare_agent_dirs, resolve_caches
from dokimi.schemas._base import make_output_dir, write_document, write_text_atomic
from dokimi.schemas.meta import no_agent_meta
from dokimi.schemas.tasks_check import (
    ArmCheck,
    CheckItem,
    GraderIsolation,
    PhaseReport,
    TaskReport,
    TasksCheck,
)
from dokimi.source.export import export_tree_as_stored

if TYPE_CHECKING:
    from dokimi.repo.manifest import LoadedManifest, LoadedTask
    from dokimi.repo.workspace import PreparedWorkspace, WorkspaceSource
    from dokimi.schemas.check_record import CheckedAgainst
    from dokimi.schemas.manifest import RepoManifest
    from dokimi.schemas.task import Task
    from dokimi.source import Repo

SCHEMA = "repo_tasks_check.v1"
WARM_NETWORK = "bridge"
STDERR_TAIL_LINES = 30

Phase = Literal["null", "oracle", "probe"]

# --- the report (printed by --json, written to <out>/tasks-check.json)
# -----------------------------------------


# --- options and progress
# -------------------------------------------------------------------------------------


@dataclass(frozen=True)
class CheckOptions:
    task_ids: Sequence[str] | None = None
    warm: bool = False
    jobs: int = 1
    image: str | None = None
    """--image: use this image instead of building one."""
    caches: Mapping[str, Path] = field(default_factory=dict)
    """--cache NAME=PATH overrides."""
    build_network: str | None = None
    out_dir: Path | None = None
    """Where run directories and the report go (kept); None: a temporary directory, removed afterwards."""
    source_dir: Path | None = None
    """{source_dir} for graders; default: the source's own git directory when it has full history."""
    grade_timeout_s: float = GRADE_TIMEOUT_S
    build_timeout_s: float = BUILD_TIMEOUT_S
    kill_grace_s: float | None = None
    """Grace between SIGTERM and the kill of a container at its timeout (default 10 s)."""
    egress_resolve: Mapping[str, str] = field(default_factory=dict)
    """--egress-resolve HOST=ADDRESS: the address the egress proxy uses for a host of a task's egress."""
    rubrics_dir: Path | None = None
    """--rubrics DIR: held-out rubrics from a private path, checked as the eval dir's are (and covered by the
    digest a real run's admission looks up)."""
    arms: Sequence[str] = ()
    """The guidance arms to prove sound (``--arm``, a run file's ``arms``); empty: every arm the manifest
    allows without a harness or a model (:data:`DEFAULT_ARMS`). guidance:raw always runs: the others are
    compared with it."""
    harness: str | None = None
    """The harness profile whose bridge guidance:bridge writes (default claude-code)."""
    strict: bool = False
    """--strict: a grader that exposes the reference to the code under test is an error, not a warning."""


ProgressFn = Callable[[str, str], None]
"""Called with (task id, event): ``null``, ``oracle`` (``null guidance:none``, ... for another arm) when such
a step is done."""

BASELINE_ARM = ARM_RAW
"""The arm every other is compared with: the repository as it is at the task's base."""
DEFAULT_ARMS = (ARM_RAW, ARM_NONE, ARM_TREE)
"""The arms tasks check proves sound when none is named: they need neither a harness nor a model."""


def checked_arms(named: Sequence[str]) -> list[Arm]:
    """guidance:raw first, then each named arm once (default :data:`DEFAULT_ARMS`); guidance:generated is
    written by a model during the run and cannot be checked here, so it is refused."""
    arms = [BASELINE_ARM, *(Arm(a) for a in (named or DEFAULT_ARMS))]
    if any(arm.kind == "generated" for arm in arms):
        raise UsageError(
            f"tasks check cannot prove {ARM_GENERATED} sound: a model writes its guidance during the run",
            hint="leave it out of --arm (a dry run of repo run checks it end to end)",
        )
    return list(dict.fromkeys(arms))


@dataclass
class _Shared:
    """The first unit to prepare a given workspace (task, phase, start commit) grades it; another arm that
    prepares the same commit waits for it and takes its outcome."""

    arm: str
    done: threading.Event = field(default_factory=threading.Event)
    outcome: _PhaseOutcome | None = None


@dataclass
class _Context:
    repo: Repo
    loaded: LoadedManifest
    manifest: RepoManifest
    options: CheckOptions
    out: Path
    grading: GradeEnvironment
    """Image, exported eval_dir, source dir, network (image.network's or --warm's), caches, timeouts."""
    batch: str
    all_task_ids: list[str]
    guidance_names: list[str]
    progress: ProgressFn | None
    arms: list[Arm] = field(default_factory=lambda: [BASELINE_ARM])
    overlays: dict[str, GuidanceOverlay] = field(default_factory=dict)
    profile: object | None = None
    """The harness profile guidance:bridge reads its bridge from (None without that arm)."""
    egress_refusal: str | None = None
    """Why tasks with egress cannot be checked here (the sealed network could not be made), or None."""
    shared: dict[tuple[str, str, str], _Shared] = field(default_factory=dict)
    lock: threading.Lock = field(default_factory=threading.Lock)


# --- entry
# ----------------------------------------------------------------------------------------------------


def require_runnable(manifest: RepoManifest | None) -> RepoManifest:
    """The manifest, if it has what tasks check needs: eval_dir, tasks and entry_points."""
    if manifest is None or not (manifest.eval_dir and manifest.tasks and manifest.entry_points):
        raise UsageError(
            "tasks check needs a manifest with eval_dir, tasks and entry_points; this one is guidance-only",
            hint="add eval_dir, tasks and entry_points (grade, oracle) to the manifest",
        )
    return manifest


def check_tasks(
    repo: Repo,
    loaded: LoadedManifest,
    options: CheckOptions | None = None,
    *,
    progress: ProgressFn | None = None,
    on_image: Callable[[BuiltImage], None] | None = None,
    on_total: Callable[[int], None] | None = None,
    on_build: Callable[[str], None] | None = None,
) -> TasksCheck:
    """Run the self-check over the manifest's tasks (or ``options.task_ids``).

    ``on_image`` gets the image once it is built or found, ``on_total`` the number of progress steps (two per
    task and arm), ``progress`` each finished step, ``on_build`` each step of an image build.
    """
    options = options or CheckOptions()
    manifest = require_runnable(loaded.manifest)
    assert manifest.eval_dir is not None and manifest.entry_points is not None
    snapshot = repo.eval_snapshot()
    tasks = load_tasks(snapshot, manifest)
    all_ids = [t.id for t in tasks]
    if options.task_ids:
        unknown = sorted(set(options.task_ids) - set(all_ids))
        if unknown:
            raise UsageError(
                f"--task {unknown[0]}: no such task in {manifest.tasks}",
                hint=f"tasks: {', '.join(all_ids) or '(none)'}",
            )
        tasks = [t for t in tasks if t.id in set(options.task_ids)]
    if options.jobs < 1:
        raise UsageError("-j must be at least 1")
    arms = checked_arms(options.arms)
    overlays = build_overlays(repo, manifest, arms)
    profile = _bridge_profile(options, arms)
    require_docker()
    source_dir = _source_dir(repo, manifest, options)
    # before the image build, which may take hours: a --cache NAME the manifest does not declare is a typo
    caches = resolve_caches(manifest.image, manifest.id, overrides=options.caches)
    if on_total is not None:
        modes = [t.task.mode if t.task is not None else None for t in tasks]
        runs = sum(1 for arm in arms for mode in modes if arm.runs_task(mode))
        on_total(2 * runs + len(tasks))  # and one grader isolation probe per task
    temporary = options.out_dir is None
    # absolute: a workspace's git runs in the workspace, where a relative --out names another directory
    out = Path(tempfile.mkdtemp(prefix="dokimi-tasks-check.")) if temporary else Path(options.out_dir or ".")
    out = out.absolute()
    try:
        make_output_dir(out)
        content = out / EVAL_DIR_NAME / CONTENT_DIR
        if content.exists():
            shutil.rmtree(content)
        export_tree_as_stored(snapshot, content, under=manifest.eval_dir)
        if options.rubrics_dir is not None:
            overlay_held_out_rubrics(content, manifest, held_out_dir(options.rubrics_dir, repo))
        image = (
            use_image(options.image)
            if options.image
            else build_image(
                repo,
                manifest,
                work_dir=content.parent,
                network=options.build_network,
                timeout_s=options.build_timeout_s,
                progress=on_build,
            )
        )
        if on_image is not None:
            on_image(image)
        batch = f"check{secrets.token_hex(4)}"
        grading = GradeEnvironment.for_manifest(
            manifest,
            image=image.ref,
            eval_content=content,
            source_dir=source_dir,
            caches=tuple(caches),
            batch=batch,
        )
        if options.warm:
            grading = grading.with_network(options.build_network or WARM_NETWORK)
        grading = dataclasses.replace(
            grading,
            grade_timeout_s=options.grade_timeout_s,
            kill_grace_s=options.kill_grace_s,
            review_rules=load_review_rules(content),
            mergeable_without_judge=True,
        )
        ctx = _Context(
            repo=repo,
            loaded=loaded,
            manifest=manifest,
            options=options,
            out=out,
            grading=grading,
            batch=batch,
            all_task_ids=all_ids,
            guidance_names=guidance_names(loaded.guidance_globs),
            progress=progress,
            arms=arms,
            overlays=overlays,
            profile=profile,
        )
        with ExitStack() as stack:
            if any(t.task is not None and t.task.egress for t in tasks) and not options.warm:
                ctx = _with_egress(ctx, stack, out / EVAL_DIR_NAME)
            reports = _run_all(ctx, tasks)
        report = TasksCheck(
            source=repo.label,
            manifest_id=manifest.id,
            tree=repo.rev,
            image=image.ref,
            image_pin=image.pin,
            warm=options.warm,
            network=grading.network,
            tasks=reports,
            ok=all(r.status == "ok" for r in reports),
        )
        if not temporary:
            write_document(out / TASKS_CHECK_JSON, report)
        _keep_records(repo, manifest.id, tasks, report, (content, image, None if temporary else out))
        return report
    finally:
        if temporary:
            shutil.rmtree(out, ignore_errors=True)


def _keep_records(
    repo: Repo,
    manifest_id: str,
    tasks: Sequence[LoadedTask],
    report: TasksCheck,
    where: tuple[Path, BuiltImage, Path | None],
) -> None:
    """Keep each task's verdict in dokimi's cache, keyed by what was checked (the exported eval_dir's digest,
    the base, the image), so a real run finds it wherever the report went (:mod:`dokimi.runner.admission`)."""
    content, image, out = where
    digest = eval_dir_digest(content)
    by_id = {r.task: r for r in report.tasks}
    verdicts = [(t.task, by_id[t.id].status, by_id[t.id].problems) for t in tasks if t.task is not None]

    def key(task: Task) -> CheckedAgainst:
        return checked_against(repo, task, manifest_id, digest, image=(image.ref, image.context_digest))

    record_check(
        "tasks_check",
        verdicts,
        key,
        source=report.source,
        report=None if out is None else out / TASKS_CHECK_JSON,
    )


def _with_egress(ctx: _Context, stack: ExitStack, log_dir: Path) -> _Context:
    """The sealed network and egress proxy for the entry points of tasks with egress (stopped with
    ``stack``); or, where it cannot be made, the reason those tasks are unsupported."""
    try:
        sealed = SealedBatch(
            ctx.batch, profile=None, environ={}, log_dir=log_dir, resolve=ctx.options.egress_resolve
        ).start()
    except DokimiError as exc:
        return dataclasses.replace(ctx, egress_refusal=exc.message)
    stack.callback(sealed.stop)
    return dataclasses.replace(ctx, grading=dataclasses.replace(ctx.grading, egress=sealed))


def _bridge_profile(options: CheckOptions, arms: Sequence[Arm]) -> object | None:
    """The harness profile guidance:bridge needs (``options.harness``, default claude-code), else None."""
    if ARM_BRIDGE not in arms:
        return None
    return load_profile(options.harness or "claude-code")


def guidance_names(globs: Sequence[str]) -> list[str]:
    """File names looked for above the workspace: the usual harness names and each glob's literal basename."""
    names = set(DEFAULT_GUIDANCE_NAMES)
    for pattern in globs:
        base = posixpath.basename(pattern)
        if base and not is_glob(base):
            names.add(base)
    return sorted(names)


def _source_dir(repo: Repo, manifest: RepoManifest, options: CheckOptions) -> Path | None:
    entry_points = manifest.entry_points
    assert entry_points is not None
    return source_dir_for(
        repo,
        (entry_points.grade, entry_points.oracle),
        given=options.source_dir,
        hint="pass --source-dir PATH (a full clone), or run from a local clone (<dir> or <dir>@<rev>)",
    )


# --- the units of work
# ----------------------------------------------------------------------------------------


@dataclass
class _PhaseOutcome:
    phase: Phase
    arm: str = BASELINE_ARM
    checks: list[CheckItem] = field(default_factory=list)
    report: PhaseReport | None = None
    same_as: str | None = None
    """Another arm whose workspace was the same commit, whose outcome this one took."""
    grader_probe: GraderProbe | None = None
    """The probe phase: what the grader isolation probe found."""


def _run_all(ctx: _Context, tasks: Sequence[LoadedTask]) -> list[TaskReport]:
    runnable: list[tuple[LoadedTask, Task]] = []
    reports: dict[str, TaskReport] = {}
    for loaded_task in tasks:
        early = _precheck(loaded_task, ctx.egress_refusal)
        if early is not None:
            reports[loaded_task.id] = early
            if ctx.progress:
                mode = loaded_task.task.mode if loaded_task.task is not None else None
                for arm in (a for a in ctx.arms if a.runs_task(mode)):
                    ctx.progress(loaded_task.id, _event("null", arm))
                    ctx.progress(loaded_task.id, _event("oracle", arm))
        else:
            assert loaded_task.task is not None
            runnable.append((loaded_task, loaded_task.task))
    units: list[tuple[LoadedTask, Task, Phase, str]] = [
        (lt, task, phase, arm)
        for arm in ctx.arms
        for lt, task in runnable
        if arm.runs_task(task.mode)  # an arm restricted to one mode proves that mode's tasks only
        for phase in ("null", "oracle")
    ]
    units += [(lt, task, "probe", BASELINE_ARM) for lt, task in runnable]
    pool = ThreadPoolExecutor(max_workers=ctx.options.jobs, thread_name_prefix="tasks-check")
    try:
        futures = [pool.submit(_run_phase, ctx, lt, task, phase, arm) for lt, task, phase, arm in units]
        outcomes = [future.result() for future in futures]
    except BaseException:
        # Ctrl-C: start nothing new, and end the running containers (their `docker run` then returns), so the
        # pool does not wait for a grader's full timeout.
        pool.shutdown(wait=False, cancel_futures=True)
        try:
            remove_batch_containers(ctx.batch)
        except DokimiError:
            pass  # each worker removes its own container too; the interruption is what to report
        raise
    finally:
        pool.shutdown(wait=True, cancel_futures=True)
    by_task: dict[str, list[_PhaseOutcome]] = {}
    for (lt, _task, _phase, _arm), outcome in zip(units, outcomes, strict=True):
        by_task.setdefault(lt.id, []).append(outcome)
    for lt, _task in runnable:  # the grader probe's outcome is a warning at most (_grader_isolation)
        reports[lt.id] = _verdict(lt.id, [o for o in by_task[lt.id] if o.phase != "probe"])
    for lt in tasks:
        reports[lt.id].warnings = [f"{w.location()}: {w.message}; {w.hint}" for w in lt.warnings]
    for lt, _task in runnable:
        _grader_isolation(reports[lt.id], by_task[lt.id], strict=ctx.options.strict)
    return [reports[t.id] for t in tasks]


def _precheck(loaded_task: LoadedTask, egress_refusal: str | None = None) -> TaskReport | None:
    """A task that cannot run at all: invalid task.json, an id that is not its directory, egress where the
    egress proxy's network cannot be made (``egress_refusal``)."""
    if loaded_task.task is None:
        problems = [str(error) for error in loaded_task.errors] or ["task.json cannot be read"]
        return TaskReport(
            task=loaded_task.id,
            status="broken",
            problems=problems,
            checks=[CheckItem(name=TASK_JSON, ok=False, detail="; ".join(problems))],
        )
    task = loaded_task.task
    if task.id != loaded_task.id:
        problem = f"task.json id {task.id!r} is not its directory name {loaded_task.id!r}"
        return TaskReport(
            task=loaded_task.id,
            status="broken",
            problems=[problem],
            checks=[CheckItem(name=TASK_JSON, ok=False, detail=problem)],
        )
    if task.egress and egress_refusal is not None:
        problem = (
            f"egress {', '.join(task.egress)} is reached through the egress proxy on a sealed network, which "
            f"cannot be made here: {egress_refusal}"
        )
        return TaskReport(
            task=task.id,
            status="unsupported",
            problems=[problem],
            checks=[CheckItem(name="egress", ok=False, detail=problem)],
        )
    return None


def _task_dir_in_content(ctx: _Context, task_id: str) -> Path:
    return task_dir(ctx.grading.eval_content, ctx.manifest, task_id)


def _write_inputs(ctx: _Context, run_dir: Path, task: Task, meta_fields: dict[str, object]) -> None:
    """The inputs a grader reads: task.json (the repository's own bytes), meta.json, empty trace and
    answer."""
    rd = RunDir(run_dir)
    shutil.copyfile(_task_dir_in_content(ctx, task.id) / TASK_JSON, rd.task_json)
    meta = no_agent_meta(meta_fields, task=task.id, mode=task.mode)
    write_document(rd.meta_json, meta)
    write_text_atomic(rd.events_jsonl, "")
    write_text_atomic(rd.answer_txt, "")


def _event(phase: str, arm: str) -> str:
    return phase if arm == BASELINE_ARM else f"{phase} {arm}"


def _named(name: str, arm: str) -> str:
    """A check's name, with the arm for every arm but the baseline."""
    return name if arm == BASELINE_ARM else f"{name} ({arm})"


def _run_phase(ctx: _Context, loaded_task: LoadedTask, task: Task, phase: Phase, arm: str) -> _PhaseOutcome:
    outcome = _PhaseOutcome(phase, arm)
    try:
        _phase_steps(ctx, task, phase, outcome)
    except DokimiError as exc:
        outcome.checks.append(
            CheckItem(name=_named(f"{phase}: {_step_of(exc)}", arm), ok=False, detail=str(exc))
        )
    finally:
        if ctx.progress is not None:
            with ctx.lock:
                ctx.progress(task.id, _event(phase, arm))
    return outcome


def _claim(ctx: _Context, key: tuple[str, str, str], arm: str) -> _Shared | None:
    """None when this unit grades the workspace ``key`` names; else the unit that does (it has started)."""
    with ctx.lock:
        shared = ctx.shared.get(key)
        if shared is None:
            ctx.shared[key] = _Shared(arm)
        return shared


def _publish(ctx: _Context, key: tuple[str, str, str], outcome: _PhaseOutcome) -> None:
    with ctx.lock:
        shared = ctx.shared[key]
    shared.outcome = outcome
    shared.done.set()


def _step_of(exc: DokimiError) -> str:
    if isinstance(exc, WorkspaceError):
        return WORKSPACE
    if isinstance(exc, ContainerError):
        return "container"
    return "setup"


def _phase_steps(ctx: _Context, task: Task, phase: Phase, outcome: _PhaseOutcome) -> None:
    assert ctx.manifest.eval_dir is not None and ctx.manifest.entry_points is not None
    arm = outcome.arm
    where = GRADER_PROBE if phase == "probe" else phase
    run_dir = tasks_check_run_dir(ctx.out, task.id, where, arm=None if arm == BASELINE_ARM else arm)
    if run_dir.exists():
        shutil.rmtree(run_dir)
    run_dir.mkdir(parents=True)
    prepared = prepare_workspace(
        WorkspaceSource(ctx.repo, ctx.manifest.eval_dir, ctx.loaded.guidance_globs),
        task,
        arm=Arm(arm),
        profile=ctx.profile,
        dest=RunDir(run_dir).workspace,
        patches_root=_task_dir_in_content(ctx, task.id),
        overlay=ctx.overlays.get(arm),
    )
    outcome.checks.append(
        CheckItem(name=_named(f"{phase}: workspace", arm), ok=True, detail=prepared.start_sha)
    )
    if phase == "probe":
        _grader_probe_steps(ctx, task, outcome, run_dir, prepared)
        return
    key = (task.id, phase, prepared.start_sha)
    owner = _claim(ctx, key, arm)
    # the same commit as another arm's: its grade is this arm's grade. The baseline always grades its own,
    # since only it runs the isolation probe
    if owner is not None and arm != BASELINE_ARM:
        owner.done.wait()
        outcome.same_as = owner.arm
        outcome.report = owner.outcome.report if owner.outcome is not None else None
        shutil.rmtree(run_dir, ignore_errors=True)
        return
    try:
        _graded_steps(ctx, task, phase, outcome, run_dir, prepared)
    finally:
        if owner is None:
            _publish(ctx, key, outcome)


def _graded_steps(
    ctx: _Context,
    task: Task,
    phase: Phase,
    outcome: _PhaseOutcome,
    run_dir: Path,
    prepared: PreparedWorkspace,
) -> None:
    """Everything after the workspace: the isolation probe (baseline arm), the oracle, grading, the gate."""
    arm = outcome.arm
    _write_inputs(ctx, run_dir, task, prepared.meta_fields())
    prepare_agent_dirs(run_dir, image_env(ctx.manifest.image, task=task.id).scratch)
    cell = f"{task.id}-{phase}" if arm == BASELINE_ARM else f"{task.id}-{phase}-{Arm(arm).kind}"
    facts = _facts(ctx, task, run_dir, prepared, cell)
    if phase == "null" and arm == BASELINE_ARM:
        probe = _probe(ctx, task, run_dir, cell)
        outcome.checks.append(
            CheckItem(name="isolation", ok=probe.ok, detail="; ".join(probe.problems) or None)
        )
        if facts.rubric is not None and list_command(ctx.grading) is not None:
            outcome.checks.append(_tests_list_check(ctx, task, run_dir, cell))
    elif phase == "oracle":
        oracle = run_entry_point(
            ctx.grading, run_dir, task, "oracle", name=container_name(ctx.batch, cell, "oracle")
        )
        failure = oracle.failure(ctx.options.grade_timeout_s)
        outcome.checks.append(CheckItem(name=_named("oracle runs", arm), ok=failure is None, detail=failure))
        if failure is not None:
            return
    started = time.monotonic()
    graded = grade_cell(ctx.grading, run_dir, task, facts)
    if task.egress and ctx.grading.egress is not None:
        outcome.checks.append(_egress_item(run_dir, _named(f"{phase}: egress", arm)))
    if graded.grade is None:  # a container before grade changed dokimi's files (dokimi.grading.evidence)
        detail = f"grader bug: {graded.verdict.grader_error}"
        outcome.checks.append(CheckItem(name=_named(f"{phase}: grade.json", arm), ok=False, detail=detail))
        return
    outcome.report = _phase_report(graded, time.monotonic() - started)
    outcome.checks.extend(
        c.model_copy(update={"name": _named(c.name, arm)})
        for c in _gate_checks(task, phase, graded.verdict, graded.grade)
    )


def _grader_probe_steps(
    ctx: _Context, task: Task, outcome: _PhaseOutcome, run_dir: Path, prepared: PreparedWorkspace
) -> None:
    """The grader isolation probe (dokimi.grading.probe): the prepared workspace with the probe in its Python
    modules, graded once; its verdict is not looked at."""
    _write_inputs(ctx, run_dir, task, prepared.meta_fields())
    prepare_agent_dirs(run_dir, image_env(ctx.manifest.image, task=task.id).scratch)
    outcome.grader_probe = grader_isolation_probe(
        ctx.grading,
        run_dir,
        task,
        channel=run_dir.with_name(GRADER_PROBE_REPORTS),
        name=container_name(ctx.batch, f"{task.id}-{GRADER_PROBE}", "grade"),
    )


def _grader_isolation(report: TaskReport, outcomes: Sequence[_PhaseOutcome], *, strict: bool) -> None:
    """The probe's finding in the task's report: what it read and could write; a reference the code under
    test can read is a warning (a problem under ``strict``)."""
    found = next((o.grader_probe for o in outcomes if o.phase == "probe"), None)
    if found is None:
        failed = [c.detail or c.name for o in outcomes if o.phase == "probe" for c in o.checks if not c.ok]
        report.warnings.append(
            f"grader isolation not measured: {'; '.join(failed) or 'the probe did not run'}"
        )
        return
    report.grader_isolation = GraderIsolation(
        measured=found.ran,
        reference_exposed=found.exposed,
        modules=found.modules,
        readable=found.readable,
        listable=found.listable,
        examples=found.examples,
        writable=found.writable,
        planted=found.planted,
        error=found.error,
    )
    message = grader_isolation_message(report.grader_isolation)
    if message is None:
        return
    if strict and found.exposed:
        report.problems.append(message)
        report.status = "broken"
    else:
        report.warnings.append(message)


def grader_isolation_message(found: GraderIsolation) -> str | None:
    """What a person is told of the probe's finding; None when the grader keeps the reference away."""
    if found.error is not None and not found.measured:
        return f"grader isolation not measured: {found.error}"
    if not found.measured:
        return None
    if not found.reference_exposed:
        return None
    read = ", ".join(f"{count} file(s) under {root}" for root, count in sorted(found.readable.items()))
    listed = ", ".join(found.listable)
    parts = [part for part in (read and f"read {read}", listed and f"listed {listed}") if part]
    wrote = found.writable + [f"new files in {d}" for d in found.planted]
    return (
        "the reference is exposed to the code under test: while the grader ran it, it "
        + " and ".join(parts)
        + (f" (for example {found.examples[0]})" if found.examples else "")
        + (f"; it could write {', '.join(wrote)}" if wrote else "")
        + '; run the tests with dokimi\'s isolation helper (docs/running.md, "What a grader must not trust")'
    )


def _egress_item(run_dir: Path, name: str) -> CheckItem:
    """What the entry points of a task with egress tried through the proxy (egress.jsonl): information, never
    a failure (a refused host is the grader's business, and its verdict says what came of it)."""
    try:
        text = safefs.read_text(RunDir(run_dir).egress_jsonl, trusted=run_dir)
    except (FileNotFoundError, safefs.UnsafePathError):
        text = ""
    lines = [json.loads(line) for line in text.splitlines() if line.strip()]
    refused = sorted({f"{r.get('host') or r.get('target')}" for r in lines if not r.get("allowed")})
    detail = f"{len(lines)} attempt(s) through the egress proxy, {len(refused)} host(s) refused"
    return CheckItem(name=name, ok=True, detail=detail + (f": {', '.join(refused)}" if refused else ""))


def _facts(ctx: _Context, task: Task, run_dir: Path, prepared: PreparedWorkspace, cell: str) -> CellFacts:
    """What grading needs to measure mergeable and perf_pass of the null and oracle workspaces as it does
    for a cell: the ignored files before the oracle ran, and how to prepare the perf check's oracle
    variant."""
    assert ctx.manifest.eval_dir is not None
    eval_dir = ctx.manifest.eval_dir
    rubric = load_rubric(_task_dir_in_content(ctx, task.id))
    ignored = before_agent(RunDir(run_dir).workspace, prepared.start_sha) if rubric is not None else set()

    def prepare_oracle_variant(dest: Path) -> object:
        return prepare_workspace(
            WorkspaceSource(ctx.repo, eval_dir, ctx.loaded.guidance_globs),
            task,
            arm=ARM_RAW,
            profile=None,
            dest=dest,
            patches_root=_task_dir_in_content(ctx, task.id),
        )

    return CellFacts(
        start_sha=prepared.start_sha,
        base_date=prepared.base_date,
        rubric=rubric,
        ignored_before=frozenset(ignored),
        prepare=prepare_oracle_variant,
        container=lambda role: container_name(ctx.batch, cell, role),
    )


def _tests_list_check(ctx: _Context, task: Task, run_dir: Path, cell: str) -> CheckItem:
    """tests.list on the untouched workspace of a task with a rubric: a batch compares every run's test ids
    with this list, so a command that fails or lists nothing leaves a removed test case unseen."""
    listed = run_tests_list(ctx.grading, run_dir, task, name=container_name(ctx.batch, cell, "tests-list"))
    if listed.ids is None:
        return CheckItem(name="null: tests.list", ok=False, detail=listed.failure)
    if not listed.ids:
        return CheckItem(name="null: tests.list", ok=False, detail="tests.list printed no test id")
    count = len(listed.ids)
    return CheckItem(name="null: tests.list", ok=True, detail=f"{count} test id{'s' if count != 1 else ''}")


def _probe(ctx: _Context, task: Task, run_dir: Path, cell: str) -> ProbeResult:
    spec = agent_spec(
        ctx.grading.containers,
        name=container_name(ctx.batch, cell, "probe"),
        run_dir=run_dir,
        argv=["true"],
        task=task.id,
    )
    return isolation_probe(
        spec,
        task_ids=ctx.all_task_ids,
        guidance_names=ctx.guidance_names,
        expect_no_network=ctx.grading.network == "none",
    )


def _phase_report(graded: GradedCell, duration: float) -> PhaseReport:
    verdict = graded.verdict
    assert graded.grade is not None
    stderr = graded.grade.entry.stderr_tail(STDERR_TAIL_LINES)
    return PhaseReport(
        gated=verdict.gated,
        passed=verdict.passed,
        score=verdict.score,
        gate_results=verdict.gate_results,
        metrics=dict(graded.metrics),
        grader_failure=verdict.grader_failure,
        grader_error=verdict.grader_error,
        grade_stderr=stderr or None if verdict.grader_failure else None,
        failing_tests=failing_tests(graded.grade.grade.details if graded.grade.grade is not None else {}),
        duration_s=round(duration, 3),
    )


def failing_tests(details: Mapping[str, object]) -> dict[str, str]:
    """Test id -> outcome of every test a built-in grader's grade.json lists as not passing (a FAIL_TO_PASS
    test not passing, a PASS_TO_PASS test broken): what an arm that changes the tests shows first."""
    failing: dict[str, str] = {}
    for key in ("fail_to_pass_not_passing", "pass_to_pass_broken"):
        value = details.get(key)
        if isinstance(value, dict):
            failing.update({str(k): str(v) for k, v in value.items()})
    return dict(sorted(failing.items()))


def _gate_checks(task: Task, phase: Phase, verdict: GateVerdict, graded: GradeOutcome) -> list[CheckItem]:
    """The rules of the self-check on one graded workspace."""
    if verdict.grader_failure:
        stderr = graded.entry.stderr_tail(STDERR_TAIL_LINES)
        detail = f"grader bug: {verdict.grader_error}"
        if stderr and stderr not in (verdict.grader_error or ""):
            detail += f"\n{stderr}"
        return [CheckItem(name=f"{phase}: grade.json", ok=False, detail=detail)]
    checks = [CheckItem(name=f"{phase}: grade.json", ok=True)]
    # a review task gated on its review checks alone keeps its score (recall) beside the gate: the untouched
    # workspace flags no decoy, so the score, not the gate, is what it must miss
    scored = task.score is not None and (not verdict.gated or task.gated_without_pass)
    if phase == "null":
        if scored and task.score is not None:
            reached = reaches_score_max(task, verdict)
            checks.append(
                CheckItem(
                    name="null stays below score.max",
                    ok=not reached,
                    detail=f"{task.score.metric} = {verdict.score} (max {float(task.score.max):g})",
                )
            )
        elif verdict.gated:
            checks.append(
                CheckItem(
                    name="null fails the gate",
                    ok=verdict.passed is False,
                    detail=None
                    if verdict.passed is False
                    else f"the untouched workspace passes: {_gates(verdict)}",
                )
            )
    else:
        if verdict.gated:
            checks.append(
                CheckItem(
                    name="oracle passes the gate",
                    ok=verdict.passed is True,
                    detail=None if verdict.passed else f"the oracle workspace fails: {_gates(verdict)}",
                )
            )
        if scored and task.score is not None:
            checks.append(
                CheckItem(
                    name="oracle reaches score.max",
                    ok=reaches_score_max(task, verdict),
                    detail=f"{task.score.metric} = {verdict.score} (max {task.score.max:g})",
                )
            )
    return checks


def _gates(verdict: GateVerdict) -> str:
    return ", ".join(f"{k}={v}" for k, v in sorted(verdict.gate_results.items())) or "(no gate entries)"


def same_outcome_as_baseline(phase: str, arm: str, baseline: PhaseReport, other: PhaseReport) -> CheckItem:
    """Under every arm the tests say what they say under guidance:raw: the same gate verdict, the same gate
    results, and the same tests failing. An arm that turns a test red (a repository test that reads a
    guidance file the arm removed) shows one agent a red suite the other arm's agent does not see."""
    changes: list[str] = []
    if (other.passed, other.grader_failure) != (baseline.passed, baseline.grader_failure):
        changes.append(f"the gate: {_shown_verdict(baseline)} -> {_shown_verdict(other)}")
    for metric in sorted(set(baseline.gate_results) | set(other.gate_results)):
        before, after = baseline.gate_results.get(metric), other.gate_results.get(metric)
        if before != after:
            changes.append(f"{metric}: {before} -> {after}")
    for test in sorted(set(baseline.failing_tests) | set(other.failing_tests)):
        before_t = baseline.failing_tests.get(test, "passed")
        after_t = other.failing_tests.get(test, "passed")
        if before_t != after_t:
            changes.append(f"{test}: {before_t} -> {after_t}")
    return CheckItem(
        name=f"{phase} under {arm} as under {BASELINE_ARM}",
        ok=not changes,
        detail=("the arm changes what the tests say: " + "; ".join(changes[:10])) if changes else None,
    )


def _shown_verdict(report: PhaseReport) -> str:
    if report.grader_failure:
        return "grader failure"
    return {True: "pass", False: "fail", None: "score-only"}[report.passed]


def _verdict(task_id: str, outcomes: Sequence[_PhaseOutcome]) -> TaskReport:
    checks = [check for outcome in outcomes for check in outcome.checks]
    baseline = {o.phase: o.report for o in outcomes if o.arm == BASELINE_ARM}
    for outcome in outcomes:
        reference = baseline.get(outcome.phase)
        if outcome.arm != BASELINE_ARM and outcome.report is not None and reference is not None:
            checks.append(same_outcome_as_baseline(outcome.phase, outcome.arm, reference, outcome.report))
    problems = [f"{c.name}: {c.detail}" if c.detail else c.name for c in checks if not c.ok]
    by_arm: dict[str, dict[str, _PhaseOutcome]] = {}
    for outcome in outcomes:
        by_arm.setdefault(outcome.arm, {})[outcome.phase] = outcome
    arms = [
        ArmCheck(
            arm=arm,
            null=phases["null"].report if "null" in phases else None,
            oracle=phases["oracle"].report if "oracle" in phases else None,
            same_workspace_as=next((o.same_as for o in phases.values() if o.same_as), None),
        )
        for arm, phases in by_arm.items()
    ]
    return TaskReport(
        task=task_id,
        status="ok" if not problems else "broken",
        problems=problems,
        checks=checks,
        null=baseline.get("null"),
        oracle=baseline.get("oracle"),
        arms=arms,
    )
