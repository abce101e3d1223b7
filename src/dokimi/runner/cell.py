"""One cell (task, arm, model, effort, rep) of a batch, start to finish, in its own run directory.

:func:`run_cell` does, in this order:

1. the workspace: the eight preparation steps into ``<run_dir>/workspace``;
2. the agent's container: the harness (read-only at /eval/harness) with the profile's argv, env and config
   files, the support scripts (read-only at /eval/support), a per-run HOME and config dir, ``--network none``
   unless ``--agent-network`` (or image.network public), as a non-root user; its stdout is ``agent.stdout``;
3. after it exits: ``events.jsonl`` and ``answer.txt`` (the trace converted), ``task.json`` (the task's own
   file, byte for byte) and ``meta.json``;
4. grading (:func:`dokimi.grading.grade.grade_cell`, in the batch's
   :class:`~dokimi.grading.environment.GradeEnvironment`);
5. ``result.json``, the framework's verdict (:func:`build_result`), written last and atomically.

A failure before the agent ran (a patch that does not apply, docker unable to start the container, a harness
that cannot start at all) leaves the cell without result.json: it is missing, and the next run fills it. A
sealed cell whose model's API failed it is an infra error (not graded, run again); one that got no model
answer by its own doing is graded and fails (:func:`model_reach`, docs/network.md). A failure on the host
after the agent ran (an unreadable trace, a read-only .git) is a grader failure: result.json says so, and the
batch is charged. When the run is cancelled (Ctrl-C, SIGTERM) no result.json is written for an unfinished
cell.

The cell function reads only its :class:`CellContext` and its key: no global state, so a pool of threads (or a
distributed engine) can run cells side by side.
"""

from __future__ import annotations

import contextlib
import dataclasses
import math
import shutil
import threading
import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Literal

from dokimi import safefs
from dokimi.batch import CellKey
from dokimi.checks.merge.judge import paths_in_diff_text
from dokimi.constants import CONTAINER_RUN_DIR, CONTAINER_SUPPORT, DRY_RUN_MOUNT
from dokimi.errors import DokimiError
from dokimi.gateway.boundary import infra_only_when_upstream_failed, read_gateway_records
from dokimi.gateway.prices import CHECKED
from dokimi.gateway.sealed import ALLOW_LIST, is_proxy_setting, observed_usage, passes_into_sealed_container
from dokimi.grading import merge as mergegrade
from dokimi.grading.entrypoints import hand_back_workspace, reduce_git_dir
from dokimi.grading.environment import GradeEnvironment
from dokimi.grading.gate import grader_failure, not_graded
from dokimi.grading.grade import CellFacts, GradedCell, grade_cell
from dokimi.grading.perf import oracle_variant_arm
from dokimi.harness.profile import AgentRequest, Placement, build_invocation
from dokimi.harness.runtime import container_launcher
from dokimi.harness.traces import END_OF_RUN_MARKER, convert_file, write_conversion
from dokimi.process import shutting_down
from dokimi.repo.arms import Arm
from dokimi.repo.rules import reviewer_prompt, rules_for_reviewer
from dokimi.repo.workspace import WorkspaceSource, prepare_workspace
from dokimi.rundir import (
    AGENT_STDERR,
    TASK_JSON,
    BatchLayout,
    RunDir,
    task_dir,
)
from dokimi.runner.plan import CellLimits
from dokimi.sandbox.container import Mount, container_name, give_to_container_user, run_container
from dokimi.sandbox.specs import CacheMount, ContainerSettings, agent_spec
from dokimi.schemas._base import write_document, write_text_atomic
from dokimi.schemas.meta import Meta
from dokimi.schemas.result import Result

if TYPE_CHECKING:
    from dokimi.gateway.boundary import ModelReach
    from dokimi.gateway.sealed import BatchSeal, SealAccount
    from dokimi.harness.traces import Conversion
    from dokimi.repo.manifest import LoadedTask
    from dokimi.repo.workspace import GuidanceOverlay, PreparedWorkspace
    from dokimi.schemas.manifest import RepoManifest
    from dokimi.schemas.profile import HarnessProfile
    from dokimi.schemas.review_rules import ReviewRule
    from dokimi.schemas.rubric import RepoRubric
    from dokimi.schemas.task import Task
    from dokimi.source import Repo

__all__ = [
    "AGENT_STDERR",
    "AgentRun",
    "CellContext",
    "CellOutcome",
    "CellStatus",
    "build_result",
    "run_cell",
]

#: Bytes of the harness's stdout (the trace) kept at each end: a real trace fits whole, a flood is cut.
AGENT_OUTPUT_CAP = 64 * 1024 * 1024
#: dokimi/support/end_of_run.sh, mounted at /eval/support.
END_OF_RUN_SCRIPT = "end_of_run.sh"
DRY_RUN_LAUNCHER = "dryrun_agent.py"
DRY_RUN_PORT = 47113
"""The scripted server's port on the agent container's own loopback in a dry run: fixed, so that a harness
that reads its endpoint from a config file (Codex) gets the URL written there before the container starts."""
CONTAINER_CONFIG = RunDir(CONTAINER_RUN_DIR).agent_config
CONTAINER_HOME = RunDir(CONTAINER_RUN_DIR).agent_home

CellStatus = Literal["finished", "skipped", "failed", "not_started", "interrupted", "lost"]
"""``lost``: the machine running the cell went away (a cluster node died) and the engine's one retry did
not finish it either; like ``interrupted`` it leaves no result.json, and the next run fills it."""


@dataclass(frozen=True)
class CellContext:
    """Everything a cell reads, fixed for the whole batch. Paths are the host's."""

    root: Path
    """The batch directory (<out>/<batch>)."""
    batch: str
    repo: Repo
    manifest: RepoManifest
    tasks: Mapping[str, LoadedTask]
    grading: GradeEnvironment
    """What grading needs: image, exported eval_dir, source dir, grade network, caches, judge, timeouts."""
    profile: HarnessProfile
    harness_bin: Path
    harness_version: str
    support_dir: Path
    agent_network: str | None
    """--agent-network as given (recorded in meta.json and result.json); None without it."""
    network: str
    """The docker network of the agent's container."""
    limits: Mapping[str, CellLimits]
    """Per task id."""
    dry_run: bool = False
    dry_run_scripts: Mapping[tuple[str, str], Path] = field(default_factory=dict)
    """(task, arm) -> the script the scripted model plays."""
    environ: Mapping[str, str] = field(default_factory=dict)
    """The caller's environment, read only through the profile's env_allow (empty for a dry run)."""
    force: bool = False
    overlays: Mapping[str, GuidanceOverlay] = field(default_factory=dict)
    """guidance:tree and guidance:at=REV arm -> the guidance files it puts onto every base (read once per
    batch)."""
    generated: Mapping[tuple[str, str], GuidanceOverlay] = field(default_factory=dict)
    """(task, model) -> the guidance files the harness's generator wrote (guidance:generated)."""
    sealed: BatchSeal | None = None
    """A sealed real run: the batch network, the model gateway and the egress proxy (None: --dry-run or
    --agent-network); on a cluster node, that node's seal."""
    cancel: threading.Event = field(default_factory=threading.Event)
    prep_lock: threading.Lock = field(default_factory=threading.Lock)
    """Workspace preparation reads the source through one git cat-file process: one cell at a time."""

    @property
    def layout(self) -> BatchLayout:
        return BatchLayout(self.root)

    @property
    def image(self) -> str:
        return self.grading.image

    @property
    def eval_content(self) -> Path:
        """The exported eval_dir (<batch>/_eval/content), mounted read-only in the grade container."""
        return self.grading.eval_content

    @property
    def caches(self) -> tuple[CacheMount, ...]:
        return self.grading.containers.caches

    @property
    def agent_containers(self) -> ContainerSettings:
        """The agent's container settings: the batch's image and caches on the agent's network."""
        return dataclasses.replace(self.grading.containers, network=self.network)

    def task(self, task_id: str) -> Task:
        loaded = self.tasks[task_id]
        assert loaded.task is not None
        return loaded.task

    def cell_task(self, key: CellKey) -> Task:
        """The task as the cell runs it: with the prompt variant the run chose (``--prompt-style``)."""
        return self.task(key.task).with_prompt(key.prompt)  # type: ignore[arg-type]

    def task_dir(self, task_id: str) -> Path:
        """The task's directory inside the exported eval_dir (where its patches are)."""
        return task_dir(self.eval_content, self.manifest, task_id)

    def overlay(self, key: CellKey) -> GuidanceOverlay | None:
        """The guidance files the cell's arm puts onto the base; None for the arms that keep or delete."""
        if Arm(key.arm).kind == "generated":
            return self.generated.get((key.task, key.model))
        return self.overlays.get(key.arm)


@dataclass
class CellOutcome:
    """What happened to one cell in this run."""

    key: CellKey
    status: CellStatus
    result: Result | None = None
    error: str | None = None
    seconds: float = 0.0
    charged_usd: float = 0.0
    node: str | None = None
    """Where it ran: this machine's host name, or the cluster node (``--executor ray``)."""


# --- result.json --------------------------------------------------------------------------------------------


def build_result(
    key: CellKey,
    task: Task,
    graded: GradedCell,
    agent: AgentRun,
    *,
    harness: str,
    harness_version: str | None,
    agent_network: str | None,
    base_date: str | None,
) -> Result:
    """result.json of one cell: the gate verdict, every metric measured and what the agent's run reported;
    in a sealed run the gateway's account is the cost and turns (:func:`dokimi.gateway.sealed.observed_usage`)
    and a cell whose upstream failed it is an infra error, one that got no model answer by its own doing a
    failure with its reason (:func:`model_reach`)."""
    verdict = graded.verdict
    account = agent.account
    infra = agent.infra_reason
    observed = observed_usage(account, _usable(agent.cost_usd), agent.turns)
    gateway = None if account is None else account.usage
    usage = None if gateway is None else {**gateway.to_json(), "prices_checked": CHECKED}
    cost, cost_source, simulated = _usable(observed.cost_usd), observed.cost_source, None
    if agent.dry_run:  # the scripted model's made-up figures are kept apart: a dry run pays nothing
        cost, cost_source = 0.0, "dry_run"
        simulated = {"cost_usd": _usable(agent.cost_usd), "tokens": agent.tokens}
    return Result.model_validate(
        {
            "schema": "repo_result.v1",
            "task": key.task,
            "arm": key.arm,
            "model": key.model,
            "effort": key.effort,
            "mode": task.mode,
            "rep": key.rep,
            "harness": harness,
            "harness_version": harness_version,
            "family": task.family,
            "gated": verdict.gated,
            "passed": verdict.passed,
            "score": verdict.score,
            "gated_with_score": task.gated_without_pass and task.score is not None,
            "gate_results": dict(verdict.gate_results),
            "metrics": dict(graded.metrics),
            "grader_failure": verdict.grader_failure,
            "grader_error": verdict.grader_error,
            "agent_rc": agent.rc,
            "agent_timed_out": agent.timed_out,
            "dry_run": agent.dry_run,
            "cost_usd": cost,
            "cost_source": cost_source,
            "simulated": simulated,
            "usage": usage,
            "judge_cost_usd": _usable(graded.judge_cost_usd),
            "judges": list(graded.judges),
            "infra_error": infra is not None,
            "infra_error_reason": infra,
            "no_model_answer": agent.failure_reason,
            "egress_attempts": None if account is None else account.egress_attempts,
            "egress_refused": None if account is None else account.egress_refused,
            "turns": observed.turns if observed.turns is None or observed.turns >= 0 else None,
            "late_trace_lines": agent.late_lines,
            "duration_s": _usable(agent.duration_s) or 0.0,
            "agent_network": agent_network,
            "base_date": base_date,
            "prompt_style": task.prompt_style,
            "prompt_variant": key.prompt,
        }
    )


def _usable(value: float | None) -> float | None:
    """A finite, non-negative number as it is; None for anything else. The cost comes from the harness's
    trace, which is untrusted: a value result.json refuses (1e400 parses as inf) must not break the cell."""
    if value is None or not math.isfinite(value) or value < 0:
        return None
    return float(value)


# --- the steps ----------------------------------------------------------------------------------------------


def reset_run_dir(run_dir: Path) -> None:
    """An empty run directory (what an earlier, unfinished attempt left is removed)."""
    if run_dir.is_symlink() or run_dir.is_file():
        run_dir.unlink()
    elif run_dir.exists():
        shutil.rmtree(run_dir)
    run_dir.mkdir(parents=True)


def prepare(ctx: CellContext, key: CellKey, run_dir: Path) -> PreparedWorkspace:
    rd = RunDir(run_dir)
    with ctx.prep_lock:
        prepared = prepare_workspace(
            WorkspaceSource(ctx.repo, ctx.manifest.eval_dir or "", ctx.manifest.guidance.globs),
            ctx.cell_task(key),
            arm=Arm(key.arm),
            profile=ctx.profile,
            dest=rd.workspace,
            patches_root=ctx.task_dir(key.task),
            overlay=ctx.overlay(key),
        )
    give_to_container_user(rd.workspace)
    return prepared


def agent_argv_and_env(
    ctx: CellContext,
    key: CellKey,
    run_dir: Path,
    *,
    prompt: str | None = None,
    seal_env: Mapping[str, str] | None = None,
    capture: str | None = None,
) -> tuple[list[str], dict[str, str]]:
    """The agent container's command and environment (and the profile's config files written). ``prompt``
    replaces the task's (the guidance generator's run). A sealed cell (``seal_env``) gets none of the
    caller's environment: its endpoint, dummy credentials and proxy variables come from the seal.
    ``capture`` (dry run) is where the scripted model server records the request bodies, as the container
    sees it."""
    task = ctx.cell_task(key)
    limits = ctx.limits[key.task]
    launcher = container_launcher(ctx.harness_bin)
    extra_env = dict(ctx.profile.dry_run_env) if ctx.dry_run else {}
    endpoint = f"http://127.0.0.1:{DRY_RUN_PORT}" if ctx.dry_run else None
    environ = ctx.environ
    if seal_env is not None:
        extra_env.update(seal_env)
        endpoint = seal_env.get(ctx.profile.endpoint_env or "")
        allow_list = ctx.sealed is not None and ctx.sealed.route.kind == ALLOW_LIST
        environ = sealed_environ(ctx.profile, ctx.environ, allow_list=allow_list)
    invocation = build_invocation(
        ctx.profile,
        AgentRequest(
            prompt=task.prompt if prompt is None else prompt,
            model=key.model,
            max_turns=limits.max_turns,
            budget=limits.budget_usd,
            tools="all",
            effort=key.effort,
        ),
        Placement(
            bin=launcher[-1],
            config_dir=CONTAINER_CONFIG,
            support_dir=CONTAINER_SUPPORT,
            in_container=True,
            home=str(CONTAINER_HOME),
        ),
        environ=environ,
        extra_env=extra_env,
        endpoint=endpoint,
        web=bool(task.egress),  # web tools only where the task's egress lets the network in
    )
    invocation.write_config_files(RunDir(run_dir).agent_config)
    argv = [*launcher[:-1], *invocation.argv]  # a Node harness: /eval/node /eval/harness/...js
    if ctx.dry_run:
        assert ctx.profile.endpoint_env is not None
        argv = [
            "python3",
            str(CONTAINER_SUPPORT / DRY_RUN_LAUNCHER),
            "--script",
            str(DRY_RUN_MOUNT),
            "--endpoint-env",
            ctx.profile.endpoint_env,
            "--port",
            str(DRY_RUN_PORT),
            *(["--capture", capture] if capture else []),
            "--",
            *argv,
        ]
    return end_of_run(argv), dict(invocation.env)


def end_of_run(argv: list[str]) -> list[str]:
    """The agent container's command: the harness under dokimi's end-of-run wrapper, which ends every other
    process of the agent's uid once the harness exited and then prints the end-of-run marker; the trace is
    read up to that line only (:func:`dokimi.harness.traces.convert_file`)."""
    return ["/bin/sh", str(CONTAINER_SUPPORT / END_OF_RUN_SCRIPT), END_OF_RUN_MARKER, "--", *argv]


@dataclass
class AgentRun:
    """How the agent's container ended, and what its trace reported (filled once the trace is read)."""

    rc: int | None
    timed_out: bool
    duration_s: float
    cost_usd: float | None = None
    turns: int | None = None
    late_lines: int = 0
    """Trace lines that arrived after the harness exited: dropped, counted (result.json late_trace_lines)."""
    account: SealAccount | None = None
    """The gateway's and the egress proxy's account of a sealed cell."""
    dry_run: bool = False
    """The harness talked to the scripted model (--dry-run): its cost and tokens are made up."""
    infra_reason: str | None = None
    """A sealed cell whose upstream failed it (:func:`model_reach`): an infra error, not graded."""
    failure_reason: str | None = None
    """A sealed cell that got no model answer by its own doing (a request the API refused as invalid, or none
    sent): graded, a failure, with this reason."""
    tokens: dict[str, int] = field(default_factory=dict)
    """The token counts the harness's trace reported, as it named them."""


def run_agent(
    ctx: CellContext,
    key: CellKey,
    run_dir: Path,
    *,
    prompt: str | None = None,
    script: Path | None = None,
    role: str = "agent",
    capture: str | None = None,
) -> AgentRun:
    """The agent's container, to its end or its timeout; stdout to agent.stdout, stderr to agent.stderr.

    ``prompt``, ``script``, ``role`` and ``capture`` serve the guidance generator (guidance:generated): its
    prompt, its dry-run script, the container name's last part, and (dry run) where the scripted server
    records the requests. A sealed cell is opened on the batch's gateway and egress proxy for the
    container's lifetime, and its account returned with the run."""
    rd = RunDir(run_dir)
    rd.agent_config.mkdir(exist_ok=True)
    rd.agent_home.mkdir(exist_ok=True)
    capture = capture if ctx.dry_run else None
    if ctx.sealed is None:
        return _run_agent_container(
            ctx, key, run_dir, prompt=prompt, script=script, role=role, capture=capture
        )
    public = ctx.manifest.image is not None and ctx.manifest.image.network == "public"
    rel = ctx.layout.rel(key.path(ctx.root))
    seal = ctx.sealed.open_cell(
        f"{rel}:{role}",
        run_dir,
        ctx.cell_task(key).egress,
        any_host=public,
        cap_usd=ctx.limits[key.task].budget_usd,
    )
    try:
        run = _run_agent_container(
            ctx, key, run_dir, prompt=prompt, script=script, role=role, seal_env=seal.env, capture=capture
        )
    finally:
        account = seal.close()
    run.account = account
    return run


def _run_agent_container(
    ctx: CellContext,
    key: CellKey,
    run_dir: Path,
    *,
    prompt: str | None,
    script: Path | None,
    role: str,
    seal_env: Mapping[str, str] | None = None,
    capture: str | None = None,
) -> AgentRun:
    argv, env = agent_argv_and_env(ctx, key, run_dir, prompt=prompt, seal_env=seal_env, capture=capture)
    spec = agent_spec(
        ctx.agent_containers,
        name=container_name(ctx.batch, ctx.layout.rel(key.path(ctx.root)), role),
        run_dir=run_dir,
        argv=argv,
        task=key.task,
        harness_bin=ctx.harness_bin,
        support_dir=ctx.support_dir,
        env=env,
    )
    if ctx.dry_run:
        script = script or ctx.dry_run_scripts[(key.task, key.arm)]
        spec = dataclasses.replace(spec, mounts=[*spec.mounts, Mount(script, DRY_RUN_MOUNT, read_only=True)])
    limits = ctx.limits[key.task]
    result = run_container(
        spec, timeout=limits.timeout_s, stdout_file=RunDir(run_dir).agent_stdout, max_output=AGENT_OUTPUT_CAP
    )
    safefs.write_text(RunDir(run_dir).agent_stderr, result.stderr, trusted=run_dir)
    return AgentRun(result.returncode, result.timed_out, result.duration, dry_run=ctx.dry_run)


def reviewer_rules_given(
    ctx: CellContext, key: CellKey, prepared: PreparedWorkspace, rubric: RepoRubric | None
) -> list[ReviewRule]:
    """The team rules a cell's agent gets in its prompt: in an arm with the rules (``ARM+rules``), a review
    task's reviewer gets what the judge would (the leak guard, then the rules its rubric cites and the
    confirmed rules whose paths match the diff under review); any other cell gets none."""
    task = ctx.cell_task(key)
    if not Arm(key.arm).rules or task.review_patch is None:
        return []
    patch = safefs.read_plain(ctx.task_dir(key.task) / task.review_patch, limit=64 * 1024 * 1024)
    paths = paths_in_diff_text(patch.decode("utf-8", "replace"))
    cited = (
        [rule for blocker in rubric.blockers for rule in blocker.house_rules] if rubric is not None else []
    )
    return rules_for_reviewer(ctx.grading.review_rules, prepared.base_date, paths, cited)


def write_run_files(
    ctx: CellContext,
    key: CellKey,
    run_dir: Path,
    prepared: PreparedWorkspace,
    *,
    review_rules: list[str] | None = None,
) -> Conversion:
    """events.jsonl, answer.txt, task.json and meta.json, after the agent's container exited.
    ``review_rules``: the ids of the team rules the agent's prompt held, in an arm that gives them."""
    rd = RunDir(run_dir)
    task = ctx.cell_task(key)
    conversion = convert_file(rd.agent_stdout, ctx.profile.trace)
    write_conversion(conversion, run_dir)
    task_json = ctx.task_dir(key.task) / TASK_JSON
    write_text_atomic(rd.task_json, task_json.read_bytes().decode("utf-8"))
    meta = Meta.model_validate(
        {
            "schema": "repo_meta.v1",
            "task": key.task,
            "batch": ctx.batch,
            "arm": key.arm,
            "harness": ctx.profile.name,
            "harness_version": ctx.harness_version,
            "model": key.model,
            "effort": key.effort,
            "mode": task.mode,
            "rep": key.rep,
            "base_rev": prepared.base_rev,
            "base_sha": prepared.base_sha,
            "base_date": prepared.base_date,
            "patches": prepared.meta_fields()["patches"],
            "start_sha": prepared.start_sha,
            "dry_run": ctx.dry_run,
            "prompt_variant": key.prompt,
            "agent_network": ctx.agent_network,
            "guidance_files": prepared.meta_fields()["guidance_files"],
            "guidance_source": prepared.guidance_source,
            "review_rules": review_rules,
        }
    )
    write_document(rd.meta_json, meta)
    return conversion


def cancelled(ctx: CellContext) -> bool:
    """The run is being stopped (Ctrl-C, SIGTERM, SIGHUP, or the caller's ``cancel``): what ends now ended
    because of it, and must not become a result."""
    return ctx.cancel.is_set() or shutting_down()


def _reason(exc: BaseException) -> str:
    if isinstance(exc, DokimiError):
        return exc.message
    return f"{type(exc).__name__}: {exc}"


class _NotGraded(Exception):
    """The model's API failed the cell (an infra error): nothing to grade."""


def sealed_environ(
    profile: HarnessProfile, environ: Mapping[str, str], *, allow_list: bool = False
) -> dict[str, str]:
    """What a sealed cell's harness may read of the caller's environment (through env_allow, as ever): no
    credential (see :func:`dokimi.gateway.sealed.passes_into_sealed_container`), no endpoint, no proxy. On
    the allow-list route the harness signs its own requests, so its credentials pass (never the host's
    proxy settings: the seal's proxy is its only way out)."""
    if allow_list:
        return {k: v for k, v in environ.items() if not is_proxy_setting(k)}
    return {k: v for k, v in environ.items() if passes_into_sealed_container(profile, k)}


def model_reach(run_dir: Path, agent: AgentRun) -> ModelReach | None:
    """Whether a sealed cell reached its model, else whose doing it was (the rule is
    :func:`dokimi.gateway.boundary.infra_only_when_upstream_failed`, read from the cell's gateway.jsonl, or
    on a cluster node from what the driver's gateway returned of it). None for an unsealed cell (dry run,
    --agent-network) or one on the allow-list route: there is no gateway to tell."""
    if agent.account is None or agent.account.usage is None:
        return None
    records = agent.account.records
    return infra_only_when_upstream_failed(
        read_gateway_records(RunDir(run_dir).gateway_jsonl) if records is None else records,
        agent_rc=agent.rc,
        timed_out=agent.timed_out,
        model_turns=agent.account.usage.turns,
    )


# --- the cell -----------------------------------------------------------------------------------------------


def cell_facts(
    ctx: CellContext,
    key: CellKey,
    prepared: PreparedWorkspace,
    rubric: RepoRubric | None,
    ignored_before: set[str],
) -> CellFacts:
    """What grading needs from the agent's side of the cell."""
    rel = ctx.layout.rel(key.path(ctx.root))
    task = ctx.cell_task(key)

    def prepare_oracle_variant(dest: Path) -> object:
        with ctx.prep_lock:
            return prepare_workspace(
                WorkspaceSource(ctx.repo, ctx.manifest.eval_dir or "", ctx.manifest.guidance.globs),
                task,
                arm=oracle_variant_arm(key.arm),
                profile=ctx.profile,
                dest=dest,
                patches_root=ctx.task_dir(key.task),
            )

    return CellFacts(
        start_sha=prepared.start_sha,
        base_date=prepared.base_date,
        rubric=rubric,
        ignored_before=frozenset(ignored_before),
        prepare=prepare_oracle_variant,
        container=lambda role: container_name(ctx.batch, rel, role),
        seed=key.rep,
    )


def run_cell(ctx: CellContext, key: CellKey) -> CellOutcome:
    """Run one cell (see the module docstring): the agent, then grading. Never raises for the cell's own
    failures: they are data."""
    start = time.monotonic()
    run_dir = key.path(ctx.root)
    if cancelled(ctx):
        return CellOutcome(key, "not_started")
    task = ctx.cell_task(key)
    try:
        reset_run_dir(run_dir)
        prepared = prepare(ctx, key, run_dir)
        rubric = mergegrade.load_rubric(ctx.task_dir(key.task))
        ignored_before: set[str] = set()
        if rubric is not None:
            ignored_before = mergegrade.before_agent(RunDir(run_dir).workspace, prepared.start_sha)
        given = reviewer_rules_given(ctx, key, prepared, rubric)
        agent = run_agent(ctx, key, run_dir, prompt=reviewer_prompt(task.prompt, given) if given else None)
    except (DokimiError, OSError) as exc:
        return CellOutcome(key, "failed", error=_reason(exc), seconds=time.monotonic() - start)
    if cancelled(ctx):
        return CellOutcome(key, "interrupted", seconds=time.monotonic() - start)

    reach = model_reach(run_dir, agent)
    if reach is not None and reach.verdict == "not_started":
        return CellOutcome(key, "failed", error=reach.reason, seconds=time.monotonic() - start)
    infra = reach.reason if reach is not None and reach.verdict == "infra" else None
    agent.infra_reason = infra
    agent.failure_reason = reach.reason if reach is not None and reach.verdict == "failure" else None
    try:
        conversion = write_run_files(
            ctx,
            key,
            run_dir,
            prepared,
            review_rules=[r.id for r in given] if Arm(key.arm).rules else None,
        )
        agent.cost_usd, agent.turns = conversion.cost_usd, conversion.turns
        agent.tokens = {k: v for k, v in conversion.usage.items() if type(v) is int and v >= 0}
        agent.late_lines = conversion.late_lines
        if infra is not None:
            raise _NotGraded
        graded = grade_cell(
            ctx.grading, run_dir, task, cell_facts(ctx, key, prepared, rubric, ignored_before)
        )
    except _NotGraded:
        graded = GradedCell(not_graded(task), {})
        with contextlib.suppress(DokimiError, OSError):  # else it stays the container user's: git refuses it
            reduce_git_dir(run_dir)
            hand_back_workspace(run_dir)
    except Exception as exc:
        # Any failure on the host after the agent ran counts against the run: an unreadable
        # trace, a read-only .git, docker refusing the grade container. Its reason is kept in result.json.
        # A cell the model's API failed stays an infra error: there was no agent run to fail.
        verdict = (
            not_graded(task)
            if infra is not None
            else grader_failure(task, f"host-side failure after the agent ran: {_reason(exc)}")
        )
        graded = GradedCell(verdict, {})
    if cancelled(ctx):
        return CellOutcome(key, "interrupted", seconds=time.monotonic() - start)
    result = build_result(
        key,
        task,
        graded,
        agent,
        harness=ctx.profile.name,
        harness_version=ctx.harness_version,
        agent_network=ctx.agent_network,
        base_date=prepared.base_date,
    )
    write_document(RunDir(run_dir).result_json, result)
    return CellOutcome(key, "finished", result=result, seconds=time.monotonic() - start)
