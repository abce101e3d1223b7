"""``repo run``: a batch of cells, one per (task, arm, model, effort, rep), under ``<out>/<batch>/``.

Before any cell (:func:`prepare_batch`):

1. the manifest and its tasks are loaded from the eval tree; a guidance-only manifest, a task that does not
   validate, and a task with ``egress`` in a run that is not sealed (a dry run, unless ``--agent-network``)
   are refused;
2. eval_dir is exported to ``<batch>/_eval/content`` (mounted read-only as {eval_dir} for graders);
3. the pin (``_eval/batch.json``): a batch stays on its eval tree, its revision or, for a working tree, its
   eval_dir and image-context digests; a run from another eval tree into the same batch is refused (exit 2)
   with both pins named;
4. the image is built from the eval tree (``dokimi/<id>:<sha>``, or a context digest) unless ``--image``;
5. the harness reports its version inside the image (version_cmd with the harness at /eval/harness);
6. the isolation probe runs with the agent's mounts and must pass;
7. ``_eval/plan.json`` gets every planned cell (the union with earlier runs of the batch);
8. the guidance files of guidance:tree and guidance:at=REV are read, and guidance:generated's are generated
   once per (task, model) or reused (:mod:`dokimi.runner.guidance`);
9. each task with a rubric gets its reference, measured once per batch or read back: ``tests.list`` on the
   base workspace and the oracle run's ``tests_skipped``, which test integrity compares every run with
   (:mod:`dokimi.runner.references`);
10. for ``--dry-run``, the script of every (task, arm) is chosen or derived from the oracle
   (:mod:`dokimi.runner.dryrun`).

Then the cells run on an executor (:mod:`dokimi.runner.executor`): a pool of ``-j`` threads here, or a Ray
cluster (:mod:`dokimi.runner.ray_executor`), each cell through :func:`dokimi.runner.cell.run_cell`. A cell
with a valid result.json is skipped unless ``--force``. ``--max-batch-usd`` starts no new cell once the batch
(its earlier cells included) has spent that much; a cell whose cost is unknown is charged its cap. Cancelling
(Ctrl-C or SIGTERM: set ``cancel``) starts no new cell, stops the running containers, and writes no
result.json for an unfinished cell.
"""

from __future__ import annotations

import contextlib
import dataclasses
import math
import os
import shutil
import threading
from collections.abc import Callable, Mapping, Sequence
from concurrent.futures import FIRST_COMPLETED, Future, wait
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

import dokimi.support.mockmodel
from dokimi import __version__
from dokimi.batch import CellKey, batch_writer, load_batch, load_cell, read_pin, read_plan, write_plan
from dokimi.checks.merge import DEFAULT_JUDGE_HARNESS, JudgeOptions, judge_harness
from dokimi.errors import ContainerError, UsageError
from dokimi.gateway.prices import Price, with_prices
from dokimi.gateway.sealed import GATEWAY, SealedBatch, model_route, unpriced_models
from dokimi.grading.environment import GradeEnvironment, JudgeSettings
from dokimi.grading.gate import gate_key
from dokimi.grading.verdict import read_cell
from dokimi.harness.profile import AgentRequest, Placement, build_invocation, load_profile, resolve_bin
from dokimi.harness.runas import harness_identity, reachable_binary
from dokimi.home import default_batches_directory
from dokimi.repo.arms import ARM_GENERATED, Arm
from dokimi.repo.manifest import load_manifest, load_tasks
from dokimi.repo.rubrics import held_out_dir, overlay_held_out_rubrics
from dokimi.repo.rules import load_review_rules
from dokimi.rundir import CONTENT_DIR, EVAL_DIR_NAME, BatchLayout, RunDir
from dokimi.runner import dryrun_agent
from dokimi.runner.admission import admission_refusal, checked_against, unadmitted
from dokimi.runner.cell import CellContext, CellOutcome
from dokimi.runner.dispatch import ExecutorSettings, cluster_session, open_executor
from dokimi.runner.dryrun import dry_run_scripts
from dokimi.runner.executor import ExecutorName
from dokimi.runner.guidance import build_overlays, generated_overlays, write_dry_run_generator_script
from dokimi.runner.plan import (
    DEFAULT_BUDGET_USD,
    SpendLedger,
    batch_budget,
    cell_limits,
    charge_of,
    check_batch_name,
    check_cell_count,
    check_cell_paths,
    egress_refusal,
    pin_refusal,
    plan_cells,
)
from dokimi.runner.ray_executor import CELL_CPUS, driver_address
from dokimi.runner.ray_seal import seal_the_nodes
from dokimi.runner.references import with_references
from dokimi.sandbox.container import container_name
from dokimi.sandbox.docker import require_docker
from dokimi.sandbox.harness_version import harness_version_in_image
from dokimi.sandbox.image import build_image, context_digest, use_image
from dokimi.sandbox.probe import DEFAULT_GUIDANCE_NAMES, isolation_probe
from dokimi.sandbox.specs import agent_spec, docker_network, resolve_caches
from dokimi.schemas._base import write_document, write_text_atomic
from dokimi.schemas.batch import BatchPin
from dokimi.schemas.meta import GuidanceFileRecord
from dokimi.schemas.run_summary import NodeCounts, RunFailure, RunGroup, RunSummary
from dokimi.source import open_source
from dokimi.source.export import export_tree_as_stored
from dokimi.support import support_dir

if TYPE_CHECKING:
    from dokimi.gateway.budget import Budget
    from dokimi.repo.manifest import LoadedTask
    from dokimi.repo.workspace import GuidanceOverlay
    from dokimi.schemas.manifest import RepoManifest
    from dokimi.schemas.profile import HarnessProfile
    from dokimi.schemas.result import Result
    from dokimi.schemas.task import Task
    from dokimi.source import Repo

__all__ = [
    "BatchRun",
    "Progress",
    "QuietProgress",
    "RunOptions",
    "group_rows",
    "prepare_batch",
    "run_batch",
    "run_summary",
]

DERIVE_TIMEOUT_S = 3600.0


@dataclass(frozen=True)
class RunOptions:
    """``repo run``'s options as plain values."""

    source: str
    arms: tuple[Arm, ...]
    """Parsed where they come in (the command line, a run or study file)."""
    models: tuple[str, ...]
    reps: int
    batch: str
    out: Path | None = None
    """Where batches live; None: ``<DOKIMI_HOME>/runs/<manifest id>`` (:func:`batches_directory`)."""
    manifest: str | None = None
    manifest_file: Path | None = None
    tasks: tuple[str, ...] = ()
    harness: str = "claude-code"
    bin: str | None = None
    efforts: tuple[str, ...] = ()
    prompt_styles: tuple[str, ...] = ()
    """--prompt-style: the prompt variants every task runs with (``spec``, ``issue``), each a cell dimension;
    empty: each task's own prompt."""
    agent_network: str | None = None
    timeout_s: float | None = None
    max_turns: int | None = None
    budget_usd: float | None = None
    max_batch_usd: float | None = None
    jobs: int | None = None
    """-j: cells at once (default 1 here; with ``--executor ray`` one per CPU of the cluster)."""
    force: bool = False
    allow_unchecked: bool = False
    """--allow-unchecked: run tasks no tasks check (or rubric check) admitted; batch.json records them."""
    dry_run: bool = False
    dry_run_scripts: Mapping[str | None, Path] = field(default_factory=dict)
    """--dry-run-script: arm (None: every arm) -> script file."""
    image: str | None = None
    caches: Mapping[str, Path] = field(default_factory=dict)
    source_dir: Path | None = None
    judge_model: str | None = None
    """--judge-model: the full model id of the rubric judge; None: the judge is not run."""
    judge_harness: str | None = None
    """--judge-harness: the profile the judge runs through (default claude-code)."""
    judge_bin: str | None = None
    """--judge-bin: the judge harness's executable on the host (default: --bin when the judge runs through the
    agents' harness, else found)."""
    second_judge_model: str | None = None
    """--second-judge-model: a second rubric judge for the judges' agreement; None: none."""
    second_judge_harness: str | None = None
    """--second-judge-harness: the second judge's profile (default: the judge's)."""
    second_judge_bin: str | None = None
    """--second-judge-bin: its executable (default: the judge's, when both run through one harness)."""
    rubrics_dir: Path | None = None
    """--rubrics DIR: held-out rubrics from a private path (``DIR/<task-id>/rubric.json``), copied into the
    batch's exported eval dir, whose digest (the pin) then covers them."""
    egress_resolve: Mapping[str, str] = field(default_factory=dict)
    """--egress-resolve HOST=ADDRESS: the address the egress proxy uses for a host name (like curl's
    --resolve); a mapped name may be a private address."""
    executor: ExecutorName = "local"
    """--executor: ``local`` (a pool of -j threads) or ``ray`` (a Ray cluster, docs/scale.md)."""
    ray_address: str | None = None
    """--ray-address: the cluster to join (default: RAY_ADDRESS, else a running local cluster)."""
    shared_out: bool = False
    """--shared-out: every node sees --out at the same path, so run directories are moved, not shipped."""
    prices: Mapping[str, Price] = field(default_factory=dict)
    """--price MODEL=IN,OUT: USD per million tokens of a model the price table lacks (sealed runs refuse an
    unpriced model); recorded in batch.json."""
    gateway_listen: str | None = None
    """--gateway-listen HOST:PORT: with ``--executor ray``, where the driver's model gateway listens for the
    nodes (default: this machine's address in the cluster, a free port)."""


class Progress(Protocol):
    """What a batch reports while it runs (the CLI draws it; the library never prints)."""

    def note(self, text: str) -> None: ...

    def batch(self, root: Path, *, default_place: bool) -> None:
        """Where the batch is: said first, before anything is built (``default_place``: no ``--out``)."""

    def planned(self, total: int, done: int) -> None: ...

    def cell_started(self, key: CellKey) -> None: ...

    def cell_done(self, outcome: CellOutcome) -> None: ...


class QuietProgress:
    """Reports nothing (library callers, benchmarks)."""

    def note(self, text: str) -> None:
        pass

    def batch(self, root: Path, *, default_place: bool) -> None:
        pass

    def planned(self, total: int, done: int) -> None:
        pass

    def cell_started(self, key: CellKey) -> None:
        pass

    def cell_done(self, outcome: CellOutcome) -> None:
        pass


@dataclass
class BatchRun:
    """The outcome of one ``repo run``."""

    root: Path
    pin: BatchPin
    harness: str
    harness_version: str
    image: str
    outcomes: list[CellOutcome] = field(default_factory=list)
    spent_usd: float = 0.0
    warnings: list[str] = field(default_factory=list)
    stopped_by_budget: bool = False
    interrupted: bool = False
    executor: ExecutorName = "local"
    dry_run: bool = False
    """Every cell played the scripted model: nothing was spent, whatever the harness reported."""

    @property
    def simulated_usd(self) -> float | None:
        """A dry run's made-up cost: what the harnesses reported for the scripted answers (never spent); None
        when none reported a figure."""
        simulated = [o.result.simulated for o in self.outcomes if o.result is not None]
        figures = [s.cost_usd for s in simulated if s is not None and s.cost_usd is not None]
        return round(sum(figures), 6) if figures else None

    def count(self, status: str) -> int:
        return sum(1 for outcome in self.outcomes if outcome.status == status)

    @property
    def complete(self) -> bool:
        """Every planned cell of this run has a result.json (ran now or earlier) that is not an infra error
        (a cell the model's API failed runs again next time)."""
        return all(o.status in ("finished", "skipped") for o in self.outcomes) and not self.infra_errors

    @property
    def infra_errors(self) -> int:
        """Cells of this run the model's API failed (infra errors)."""
        return sum(1 for o in self.outcomes if o.result is not None and o.result.infra_error)


def group_rows(run: BatchRun) -> list[RunGroup]:
    """The run's cells per (task, arm, prompt variant, model, effort), sorted: what ran, was skipped, passed,
    failed; a score-only task's cells give their mean score instead of a pass count."""
    counters = (
        "cells", "ran", "skipped", "passed", "graded", "scored", "grader_failures", "infra_errors", "failed",
        "not_started",
    )  # fmt: skip
    groups: dict[tuple[str, str, str, str, str], dict[str, int]] = {}
    scores: dict[tuple[str, str, str, str, str], list[float]] = {}
    for outcome in run.outcomes:
        key = outcome.key
        group = (key.task, key.arm, key.prompt or "", key.model, key.effort or "default")
        row = groups.setdefault(group, dict.fromkeys((*counters, "interrupted", "lost"), 0))
        row["cells"] += 1
        if outcome.status == "finished":
            row["ran"] += 1
        else:
            row[outcome.status] += 1
        result = outcome.result
        if result is not None and result.infra_error:
            row["infra_errors"] += 1
        elif result is not None and not result.gated:
            row["scored"] += 1
            row["grader_failures"] += int(result.grader_failure)
            if result.score is not None and not result.grader_failure:
                scores.setdefault(group, []).append(result.score)
        elif result is not None:
            row["graded"] += 1
            row["passed"] += int(read_cell(result).passed)
            row["grader_failures"] += int(result.grader_failure)
    return [
        RunGroup.model_validate(
            {
                "task": t,
                "arm": a,
                "prompt": p or None,
                "model": m,
                "effort": e,
                **counts,
                "score_mean": _mean(scores.get((t, a, p, m, e))),
            }
        )  # fmt: skip
        for (t, a, p, m, e), counts in sorted(groups.items())
    ]


def _mean(values: Sequence[float] | None) -> float | None:
    return round(sum(values) / len(values), 6) if values else None


def node_rows(run: BatchRun) -> list[NodeCounts]:
    """What each machine ran in this run, sorted by name (skipped cells ran nowhere now; a lost cell's node
    is gone)."""
    rows: dict[str, dict[str, Any]] = {}
    for outcome in run.outcomes:
        if outcome.node is None or outcome.status not in ("finished", "failed", "interrupted"):
            continue
        row = rows.setdefault(
            outcome.node, {"ran": 0, "passed": 0, "failed": 0, "interrupted": 0, "seconds": 0.0}
        )
        row["ran" if outcome.status == "finished" else outcome.status] += 1
        result = outcome.result
        row["passed"] += int(result is not None and read_cell(result).passed)
        row["seconds"] += outcome.seconds
    return [
        NodeCounts(node=name, **{**row, "seconds": round(row["seconds"], 3)})
        for name, row in sorted(rows.items())
    ]


def run_summary(run: BatchRun) -> RunSummary:
    """The repo_run.v1 document of one run (what ``repo run --json`` prints)."""
    return RunSummary(
        schema="repo_run.v1",
        infra_errors=run.infra_errors,
        batch=str(run.root),
        pin=run.pin,
        harness=run.harness,
        harness_version=run.harness_version,
        image=run.image,
        cells=len(run.outcomes),
        ran=run.count("finished"),
        skipped=run.count("skipped"),
        failed=run.count("failed"),
        not_started=run.count("not_started"),
        interrupted=run.count("interrupted"),
        lost=run.count("lost"),
        complete=run.complete,
        spent_usd=round(run.spent_usd, 6),
        dry_run=run.dry_run,
        simulated_usd=run.simulated_usd if run.dry_run else None,
        stopped_by_budget=run.stopped_by_budget,
        groups=group_rows(run),
        executor=run.executor,
        nodes=node_rows(run),
        failures=[
            RunFailure(cell=o.key.path(run.root).relative_to(run.root).as_posix(), error=o.error)
            for o in run.outcomes
            if o.status == "failed"
        ],
        warnings=list(run.warnings),
    )


# --- batch preparation --------------------------------------------------------------------------------------


def _load(opts: RunOptions, repo: Repo) -> tuple[RepoManifest, dict[str, LoadedTask], list[str]]:
    loaded = load_manifest(
        repo.eval_snapshot(), manifest=opts.manifest, manifest_file=opts.manifest_file, required=True
    )
    manifest = loaded.manifest
    assert manifest is not None
    if not manifest.has_tasks or manifest.entry_points is None:
        raise UsageError(
            f"manifest {loaded.path} is guidance-only (no eval_dir, tasks and entry_points), so there is "
            "nothing to run",
            path=loaded.path,
            hint="add eval_dir, tasks and entry_points (grade, oracle) to the manifest",
        )
    tasks = {t.id: t for t in load_tasks(repo.eval_snapshot(), manifest)}
    chosen = list(opts.tasks) or sorted(tasks)
    unknown = [t for t in chosen if t not in tasks]
    if unknown:
        raise UsageError(
            f"--task {unknown[0]}: no such task in {manifest.tasks}",
            hint=f"tasks: {', '.join(sorted(tasks)) or '(none)'}",
        )
    for task_id in chosen:
        item = tasks[task_id]
        if item.task is None or item.errors:
            first = item.errors[0] if item.errors else None
            raise UsageError(
                f"task {task_id} is not valid: {first.message if first else 'unreadable'}",
                path=item.path,
                hint="`dokimi repo validate` lists every problem; fix them, or leave the task out (--task)",
            )
    return manifest, {t: tasks[t] for t in chosen}, chosen


def export_eval_dir(
    repo: Repo, manifest: RepoManifest, eval_root: Path, rubrics_dir: Path | None = None
) -> tuple[Path, str]:
    """eval_dir of the eval tree into a staging directory under ``<batch>/_eval``, with the held-out rubrics
    of ``rubrics_dir`` in it (:func:`dokimi.repo.rubrics.overlay_held_out_rubrics`); returns it and its
    digest. :func:`publish_eval_dir` makes it the batch's content once the pin allows it."""
    eval_root.mkdir(parents=True, exist_ok=True)
    staging = eval_root / f".{CONTENT_DIR}.{os.getpid()}.{threading.get_ident()}"
    if staging.exists():
        shutil.rmtree(staging)
    export_tree_as_stored(repo.eval_snapshot(), staging, under=manifest.eval_dir or "")
    if rubrics_dir is not None:
        overlay_held_out_rubrics(staging, manifest, held_out_dir(rubrics_dir, repo))
    return staging, "sha256:" + context_digest(staging)


def publish_eval_dir(staging: Path, digest: str, eval_root: Path) -> Path:
    """``<batch>/_eval/content`` from the staging export: kept as it is when it holds the same content."""
    content = eval_root / CONTENT_DIR
    if content.is_dir() and "sha256:" + context_digest(content) == digest:
        shutil.rmtree(staging)
    else:
        if content.exists():
            shutil.rmtree(content)
        os.replace(staging, content)
    _world_readable(content)
    return content


def _world_readable(root: Path) -> None:
    """Directories 0755 and files a+r, so the container user reads the read-only mount."""
    for dirpath, _dirs, filenames in os.walk(root):
        os.chmod(dirpath, 0o755)
        for name in filenames:
            path = os.path.join(dirpath, name)
            if not os.path.islink(path):
                os.chmod(path, os.stat(path).st_mode | 0o444)


def compose_support_dir(target: Path) -> Path:
    """/eval/support: dokimi's helper scripts (dokimi.support), the scripted model server and the dry-run
    launcher, all standard-library-only files."""
    if target.exists():
        shutil.rmtree(target)
    target.mkdir(parents=True)
    files = [
        p
        for p in support_dir().iterdir()
        if p.is_file() and p.suffix in (".py", ".sh") and p.name != "__init__.py"
    ]
    files += [Path(dokimi.support.mockmodel.__file__), Path(dryrun_agent.__file__)]
    for source in files:
        shutil.copyfile(source, target / source.name)
        os.chmod(target / source.name, 0o644)
    os.chmod(target, 0o755)
    return target


def batch_prices(old: BatchPin | None, given: Mapping[str, Price], batch: str) -> dict[str, Price]:
    """The prices of a batch: those its batch.json recorded, and the run's ``--price``; a different price
    for a model the batch already priced is refused (one batch, one price per model)."""
    prices = {} if old is None else {m: Price(**p.model_dump()) for m, p in old.prices.items()}
    for model, price in given.items():
        if model in prices and prices[model] != price:
            was = prices[model]
            raise UsageError(
                f"--price {model}: batch {batch} priced it at {was.input:g},{was.output:g} (USD per million "
                f"input and output tokens), this run at {price.input:g},{price.output:g}",
                hint="a batch keeps one price per model: give the recorded one (or none), or start a new "
                "batch",
            )
        prices[model] = price
    return prices


def check_priced(models: Sequence[str], prices: Mapping[str, Price]) -> None:
    """Refuse a sealed run of a model neither the price table nor ``--price`` knows: its model gateway
    could not count what the cell spends, nor hold it to its cap."""
    missing = unpriced_models(models, with_prices(prices))
    if missing:
        raise UsageError(
            f"model {', '.join(missing)} is not in dokimi's price table, and a sealed run counts the cost "
            "of every model request at the gateway (and holds each cell to its --budget with it)",
            hint="give its price as the vendor lists it, in USD per million input and output tokens: "
            + " ".join(f"--price {m}=IN,OUT" for m in missing),
        )


def make_pin(
    opts: RepoManifest,
    repo: Repo,
    source: str,
    eval_digest: str,
    image: Any,
    prices: Mapping[str, Price] | None = None,
    guidance: Mapping[str, GuidanceOverlay] | None = None,
    *,
    dry_run: bool = False,
) -> BatchPin:
    return BatchPin.model_validate(
        {
            "schema": "repo_batch.v1",
            "manifest_id": opts.id,
            "source": source,
            "tree": repo.rev,
            "eval_dir_digest": eval_digest,
            "image": image.ref,
            "image_pin": image.pin,
            "image_context_digest": (
                None if image.context_digest is None else _prefixed(image.context_digest)
            ),
            "created_by": __version__,
            "dry_run": dry_run,
            "guidance": pinned_guidance(guidance or {}),
            "prices": {m: dataclasses.asdict(p) for m, p in (prices or {}).items()},
        }
    )


def _prefixed(digest: str) -> str:
    return digest if digest.startswith("sha256:") else "sha256:" + digest


def pinned_guidance(overlays: Mapping[str, GuidanceOverlay]) -> dict[str, list[GuidanceFileRecord]]:
    """The batch pin's guidance: per overlay arm (guidance:tree, guidance:at=REV), its files as meta.json
    records them (path, mode, blob SHA), sorted by path."""
    return {
        arm: [
            GuidanceFileRecord(path=f.path, mode=f.mode, sha=f.sha)
            for f in sorted(overlay.files, key=lambda f: f.path)
        ]
        for arm, overlay in sorted(overlays.items())
    }


def check_admission(opts: RunOptions, repo: Repo, tasks: Sequence[Task], pin: BatchPin) -> dict[str, str]:
    """A real run admits only tasks proven sound on what it runs (:mod:`dokimi.runner.admission`): refused
    (UsageError, naming the commands to run) unless ``--allow-unchecked``, which returns task -> why, for
    batch.json. A dry run is never held back."""
    if opts.dry_run:
        return {}
    keys = {}
    for task in tasks:
        image = (pin.image, pin.image_context_digest)
        check_key = checked_against(repo, task, pin.manifest_id, pin.eval_dir_digest, image=image)
        rubric_key = None
        if "mergeable" in {gate_key(entry) for entry in task.gate}:
            rubric_key = checked_against(
                repo, task, pin.manifest_id, pin.eval_dir_digest, judge_model=opts.judge_model
            )
        keys[task.id] = (check_key, rubric_key)
    why = unadmitted(keys)
    refusal = admission_refusal(why, opts.source, opts.judge_model)
    if refusal is not None and not opts.allow_unchecked:
        raise UsageError(
            refusal,
            hint="fix and check them, leave them out with --task, or run them anyway with --allow-unchecked "
            "(batch.json records it)",
        )
    return why


def check_and_write_pin(root: Path, pin: BatchPin, batch: str) -> None:
    """Write the pin of a new batch; refuse a run from another eval tree into an existing one."""
    old, error = read_pin(root)
    if old is None and error is not None and BatchLayout(root).pin.exists():
        raise UsageError(f"batch {batch}: its pin cannot be read: {error}", hint="start a new batch")
    if old is not None:
        refusal = pin_refusal(old, pin, batch)
        if refusal is not None:
            raise refusal
        # a model priced for the first time in this run (batch_prices merged), an arm run for the first time
        guidance = {**pin.guidance, **old.guidance}
        unchecked = {**old.unchecked, **pin.unchecked}
        if (pin.prices, guidance, unchecked) != (old.prices, old.guidance, old.unchecked):
            update = {"prices": pin.prices, "guidance": guidance, "unchecked": unchecked}
            write_document(BatchLayout(root).pin, old.model_copy(update=update))
        return
    write_document(BatchLayout(root).pin, pin)


def probe_isolation(ctx: CellContext, task_ids: Sequence[str], scratch: Path) -> None:
    """The isolation probe with the agent's mounts; refuses the batch when the agent could see too much."""
    run_dir = scratch / "probe"
    if run_dir.exists():
        shutil.rmtree(run_dir)
    RunDir(run_dir).workspace.mkdir(parents=True)
    spec = agent_spec(
        ctx.agent_containers,
        name=container_name(ctx.batch, EVAL_DIR_NAME, "probe"),
        run_dir=run_dir,
        argv=["true"],
        task=None,
        harness_bin=ctx.harness_bin,
        support_dir=ctx.support_dir,
    )
    literal = [g.rsplit("/", 1)[-1] for g in ctx.manifest.guidance.globs]
    names = {*DEFAULT_GUIDANCE_NAMES, *ctx.profile.guidance.names, *(n for n in literal if "*" not in n)}
    result = isolation_probe(
        spec, task_ids=list(task_ids), guidance_names=sorted(names), expect_no_network=ctx.network == "none"
    )
    shutil.rmtree(run_dir, ignore_errors=True)
    if not result.ok:
        raise ContainerError(
            "the isolation probe failed: " + "; ".join(result.problems),
            hint="the agent's container must see neither the eval content, the source, task names nor "
            "guidance above the workspace",
        )


def check_efforts(profile: HarnessProfile, efforts: Sequence[str]) -> None:
    """Refuse, before any cell, an effort the profile cannot pass (the profile carries the effort)."""
    for effort in efforts:
        build_invocation(
            profile,
            AgentRequest(prompt="", model="model", max_turns=1, budget=1.0, tools="all", effort=effort),
            Placement(bin="harness", config_dir="/config", support_dir="/support"),
            environ={},
        )


SEALED = "sealed"
"""What :func:`_agent_network` returns for a sealed real run (the batch network is made later)."""


def _agent_network(opts: RunOptions, manifest: RepoManifest, profile: HarnessProfile) -> str:
    """--agent-network (unsealed, warned), else for a dry run image.network (the scripted model runs inside
    the container), and so for a harness whose profile declares no model route at all (neither
    endpoint_env nor egress: it calls no model), else :data:`SEALED`: the batch's internal network, the model
    gateway and the egress proxy."""
    if opts.agent_network:
        return opts.agent_network
    if opts.dry_run or not (profile.endpoint_env or profile.egress):
        return docker_network(manifest.image.network if manifest.image else "none")
    model_route(profile, os.environ)  # refuse a harness neither route can serve before any work
    return SEALED


def agent_network_warning(network: str) -> str:
    """The loud warning of ``--agent-network``: the run is not sealed."""
    return (
        f"--agent-network {network}: THIS RUN IS NOT SEALED. The agent's container joins docker network "
        f"{network!r} instead of the batch's internal network, so its commands can reach any host that "
        "network reaches (the upstream repository and its fix included) and the model API with the real "
        "credential from your environment; the model gateway does not see, record or price its calls. "
        "meta.json and result.json record it and repo report flags every such cell"
    )


def judge_settings(opts: RunOptions, root: Path, *, second: bool = False) -> JudgeSettings | None:
    """The rubric judge of this batch (or its second judge): a full model id only (never an alias), run
    through a harness that can judge, verdicts cached per batch. A judge's executable defaults to --bin only
    when it runs through the agents' harness."""
    model = opts.second_judge_model if second else opts.judge_model
    if model is None:
        return None
    if second and opts.judge_model is None:
        raise UsageError("--second-judge-model needs --judge-model: the second judge only measures agreement")
    harness = opts.judge_harness or DEFAULT_JUDGE_HARNESS
    binary = opts.judge_bin or (opts.bin if harness == opts.harness else None)
    if second:
        second_harness = opts.second_judge_harness or harness
        binary = opts.second_judge_bin or (binary if second_harness == harness else None)
        harness = second_harness
    judge_harness(
        model, JudgeOptions(bin=binary, profile=harness)
    )  # refuses an alias, a harness that cannot judge
    return JudgeSettings(
        model, JudgeOptions(bin=binary, profile=harness, cache_dir=BatchLayout(root).judge_cache)
    )


@dataclass
class PreparedBatch:
    ctx: CellContext
    pin: BatchPin
    cells: list[CellKey]
    warnings: list[str]
    budget: Budget | None = None
    """The batch's budget, shared with the model gateway of a sealed run (None: made by execute_cells)."""
    sealed: SealedBatch | None = None
    """A sealed run's network, gateway and proxy on this machine: stopped when the run ends."""


def check_run_options(opts: RunOptions) -> None:
    """What no batch can run with: no arm or model (an empty ``--arm ''``), no worker, and a limit that is
    not a finite number above zero (``--timeout nan`` would switch the timeout off, ``--budget nan`` the
    budget)."""
    if opts.jobs is not None and opts.jobs < 1:
        raise UsageError(f"-j {opts.jobs}: at least one worker")
    for option, values in (("--arm", opts.arms), ("--model", opts.models)):
        if not values or any(not str(v).strip() for v in values):
            raise UsageError(
                f"{option} names nothing to run: {', '.join(repr(v) for v in values) or 'none given'}",
                hint=f"give at least one non-empty value to {option}",
            )
    for option, value in (
        ("--timeout", opts.timeout_s),
        ("--budget", opts.budget_usd),
        ("--max-batch-usd", opts.max_batch_usd),
    ):
        if value is not None and not (math.isfinite(value) and value > 0):
            raise UsageError(f"{option} {value}: must be a finite number above zero")


def prepare_batch(
    opts: RunOptions,
    repo: Repo,
    *,
    cancel: threading.Event,
    progress: Progress,
) -> PreparedBatch:
    """Steps 1-8 of the module docstring; returns the context every cell runs with."""
    check_batch_name(opts.batch)
    check_run_options(opts)
    manifest, tasks, task_ids = _load(opts, repo)
    check_cell_count(
        [tasks[t].task for t in task_ids],  # type: ignore[misc]
        opts.arms,
        opts.models,
        opts.efforts,
        opts.reps,
        opts.prompt_styles,
    )
    overlays = build_overlays(repo, manifest, opts.arms)
    profile = load_profile(opts.harness)
    if any(arm.kind == "generated" for arm in opts.arms) and not profile.guidance_init:
        raise UsageError(
            f"arm {ARM_GENERATED} needs the harness's own guidance generator, and profile {profile.name} "
            "declares none (guidance_init)",
            hint="use a harness whose profile sets guidance_init (claude-code: /init), or leave the arm out",
        )
    if opts.dry_run and not profile.endpoint_env:
        raise UsageError(
            f"harness {profile.name} has no endpoint_env, so a dry run cannot point it at the scripted model",
            hint="add endpoint_env to the profile, or run without --dry-run",
        )
    check_efforts(profile, opts.efforts)
    harness_bin = reachable_binary(resolve_bin(profile, opts.bin), harness_identity())
    network = _agent_network(opts, manifest, profile)
    for task_id in task_ids:
        refusal = egress_refusal(tasks[task_id].task, opts.agent_network, sealed=network == SEALED)  # type: ignore[arg-type]
        if refusal:
            raise UsageError(refusal, path=tasks[task_id].path)
    warnings = [f"{w.location()}: {w.message}; {w.hint}" for t in task_ids for w in tasks[t].warnings]
    if opts.agent_network and opts.agent_network != "none":
        warnings.append(agent_network_warning(opts.agent_network))
    if opts.dry_run and opts.max_batch_usd is not None:
        warnings.append(
            f"--max-batch-usd {opts.max_batch_usd:g} does not apply to a dry run: the scripted model costs "
            "nothing, so no cell is held back (the harness's own figures are kept apart, as simulated)"
        )
    require_docker()

    assert opts.out is not None, "run_batch resolves the default --out"
    root = (opts.out / opts.batch).absolute()
    layout = BatchLayout(root)
    eval_root = layout.eval_root
    progress.note(f"exporting {manifest.eval_dir} to {layout.content}")
    old_pin, _ = read_pin(root)
    prices = batch_prices(old_pin, opts.prices, opts.batch)
    if network == SEALED and _gateway_route(profile):
        check_priced(opts.models, prices)
    staging, eval_digest = export_eval_dir(repo, manifest, eval_root, opts.rubrics_dir)
    try:
        if old_pin is not None:  # refuse early, before an image build, on what is known already
            provisional = old_pin.model_copy(
                update={
                    "manifest_id": manifest.id,
                    "tree": repo.rev,
                    "eval_dir_digest": eval_digest,
                    "dry_run": opts.dry_run,
                    "guidance": pinned_guidance(overlays),
                }
            )
            early = pin_refusal(old_pin, provisional, opts.batch, image_known=False)
            if early is not None:
                raise early
        progress.note("resolving the image" if opts.image else "building the image (reused when it exists)")
        image = (
            use_image(opts.image)
            if opts.image
            else build_image(repo, manifest, work_dir=eval_root, progress=progress.note)
        )
        pin = make_pin(
            manifest, repo, opts.source, eval_digest, image, prices, guidance=overlays, dry_run=opts.dry_run
        )
        unchecked = check_admission(opts, repo, [tasks[t].task for t in task_ids], pin)  # type: ignore[misc]
        pin = pin.model_copy(update={"unchecked": unchecked})
        if unchecked:
            warnings.append(
                f"--allow-unchecked: running {len(unchecked)} task(s) no check proved sound "
                f"({', '.join(unchecked)}); batch.json records them and why"
            )
        check_and_write_pin(root, pin, opts.batch)
        content = publish_eval_dir(staging, eval_digest, eval_root)
    finally:
        if staging.exists():
            shutil.rmtree(staging, ignore_errors=True)
    write_text_atomic(
        layout.manifest_copy,
        manifest.model_dump_json(by_alias=True, exclude_none=False, indent=2) + "\n",
    )
    support = compose_support_dir(layout.support)
    progress.note("asking the harness for its version inside the image")
    version = harness_version_in_image(
        profile, image=image.ref, harness_bin=harness_bin, batch=opts.batch, scratch=eval_root
    )
    caches = tuple(resolve_caches(manifest.image, manifest.id, overrides=opts.caches))
    source_dir = opts.source_dir or (repo.git_dir if repo.git_dir is not None and not repo.promisor else None)
    limits = {
        t: cell_limits(
            tasks[t].task,  # type: ignore[arg-type]
            timeout_s=opts.timeout_s,
            max_turns=opts.max_turns,
            budget_usd=opts.budget_usd,
        )
        for t in task_ids
    }
    grading = GradeEnvironment.for_manifest(
        manifest,
        image=image.ref,
        eval_content=content,
        source_dir=source_dir,
        caches=caches,
        batch=opts.batch,
    )
    grading = dataclasses.replace(
        grading,
        # entry points never get the agent's egress; only an unsealed run's task with egress gets
        # --agent-network (its entry points have no other way to those hosts)
        egress_network=opts.agent_network if network != SEALED else None,
        judge=judge_settings(opts, root),
        second_judge=judge_settings(opts, root, second=True),
        review_rules=load_review_rules(content),
    )
    rules_arms = [arm for arm in opts.arms if arm.rules]
    if rules_arms and grading.review_rules is None:
        raise UsageError(
            f"arm {rules_arms[0]} gives review tasks the team's review rules, and the eval dir has no "
            "review_rules.json",
            hint="mine them first (repo rules mine), or leave the +rules arm out",
        )
    ctx = CellContext(
        root=root,
        batch=opts.batch,
        repo=repo,
        manifest=manifest,
        tasks=tasks,
        grading=grading,
        profile=profile,
        harness_bin=harness_bin,
        harness_version=version,
        support_dir=support,
        agent_network=opts.agent_network,
        network=network,
        limits=limits,
        dry_run=opts.dry_run,
        environ={} if opts.dry_run else dict(os.environ),
        force=opts.force,
        cancel=cancel,
        overlays=overlays,
    )
    # a dry run pays nothing: no budget applies to it
    budget = batch_budget(
        None if opts.dry_run else opts.max_batch_usd, _spent_so_far(root, limits, opts.budget_usd)
    )
    sealed = None
    if network == SEALED:
        sealed = start_sealed(opts, profile, eval_root, prices, budget, progress)
        ctx = dataclasses.replace(
            ctx,
            network=sealed.network,
            sealed=sealed,
            grading=dataclasses.replace(ctx.grading, egress=sealed),
        )
    try:
        return dataclasses.replace(
            _prepare_cells(opts, ctx, task_ids, pin, warnings, progress), budget=budget, sealed=sealed
        )
    except BaseException:
        if sealed is not None:
            sealed.stop()
        raise


def _gateway_route(profile: HarnessProfile) -> bool:
    """Whether a sealed run of ``profile`` goes through the model gateway (else the allow-list route)."""
    return model_route(profile, os.environ).kind == GATEWAY


def start_sealed(
    opts: RunOptions,
    profile: HarnessProfile,
    eval_root: Path,
    prices: Mapping[str, Price],
    budget: Budget | None,
    progress: Progress,
) -> SealedBatch:
    """The batch network, the model gateway and the egress proxy of a sealed run; with ``--executor ray``
    the gateway also listens for the cluster's nodes (docs/scale.md). ``prices``: the batch's ``--price``
    rows, over the price table."""
    progress.note("starting the batch network, the model gateway and the egress proxy")
    sealed = SealedBatch(
        opts.batch,
        profile=profile,
        environ=os.environ,
        log_dir=eval_root,
        resolve=opts.egress_resolve,
        prices=with_prices(prices),
        budget=budget,
        cluster=gateway_listen_address(opts) if opts.executor == "ray" else None,
    ).start()
    if opts.executor == "ray":
        try:
            progress.note("sealing every node of the cluster (its network, firewall chain, proxy and relay)")
            seal_the_nodes(sealed, CELL_CPUS)
        except BaseException:
            sealed.stop()
            raise
    return sealed


def gateway_listen_address(opts: RunOptions) -> tuple[str, int]:
    """Where the driver's gateway listens for a cluster's nodes: ``--gateway-listen HOST:PORT``, else this
    machine's address in the Ray cluster and a free port."""
    if opts.gateway_listen:
        host, _, port = opts.gateway_listen.rpartition(":")
        return host.strip("[]"), int(port)
    return driver_address(), 0


def _prepare_cells(
    opts: RunOptions,
    ctx: CellContext,
    task_ids: list[str],
    pin: BatchPin,
    warnings: list[str],
    progress: Progress,
) -> PreparedBatch:
    """The probe, the plan, the references and the dry-run scripts (steps 6-10 of the module docstring)."""
    root, tasks, layout = ctx.root, ctx.tasks, ctx.layout
    progress.note("isolation probe")
    probe_isolation(ctx, task_ids, layout.eval_root)
    cells = plan_cells(
        [tasks[t].task for t in task_ids],  # type: ignore[misc]
        opts.arms,
        opts.models,
        opts.efforts,
        opts.reps,
        opts.prompt_styles,
    )
    earlier, _ = read_plan(root)
    write_plan(root, check_cell_paths([*(earlier or []), *cells]))
    todo_cells = [c for c in cells if opts.force or not _finished(root, c)]
    if any(Arm(c.arm).kind == "generated" for c in todo_cells):
        script = write_dry_run_generator_script(layout.dry_run) if opts.dry_run else None
        generated = generated_overlays(ctx, todo_cells, progress.note, dry_run_script=script)
        ctx = _replace_ctx(ctx, generated=generated)
    ctx = with_references(ctx, todo_cells, progress.note)
    if opts.dry_run:
        todo = [c for c in cells if opts.force or not _finished(root, c)]
        scripts = dry_run_scripts(
            ctx, todo, opts.dry_run_scripts, layout.dry_run, progress.note, jobs=opts.jobs or 1
        )
        ctx = _replace_ctx(ctx, dry_run_scripts=scripts)
    return PreparedBatch(ctx, pin, cells, warnings)


def _replace_ctx(ctx: CellContext, **changes: Any) -> CellContext:
    return dataclasses.replace(ctx, **changes)


def finished_result(root: Path, key: CellKey) -> Result | None:
    """The cell's result.json when it validates and names the cell (the only proof a cell is done). An
    infra_error cell was failed by the model's API: it is not done, and runs again like a missing cell."""
    path = key.path(root)
    if not RunDir(path).result_json.is_file():
        return None
    cell = load_cell(root, path, key)
    return cell.result if cell.status == "finished" else None


def _finished(root: Path, key: CellKey) -> bool:
    return finished_result(root, key) is not None


def _spent_so_far(root: Path, limits: Mapping[str, Any], budget_usd: float | None) -> float:
    """What the batch's cells with a result.json cost (infra errors and the judge included); a cell with no
    known cost is charged its cap."""
    total = 0.0
    for result in load_batch(root).all_results():
        cap = limits[result.task].budget_usd if result.task in limits else (budget_usd or DEFAULT_BUDGET_USD)
        total += charge_of(result.cost_usd, cap) + (result.judge_cost_usd or 0.0)  # a dry run's cost is 0
    return total


# --- running the cells --------------------------------------------------------------------------------------


def execute_cells(
    prepared: PreparedBatch,
    *,
    jobs: int | None,
    max_batch_usd: float | None,
    budget_usd: float | None,
    progress: Progress,
    cell_function: Callable[[CellContext, CellKey], CellOutcome] | None = None,
    executor: ExecutorSettings | None = None,
) -> tuple[list[CellOutcome], SpendLedger, bool]:
    """Run every planned cell that is not finished (all with --force) on an executor: ``jobs`` threads here
    (``local``), or a Ray cluster (``ray``: ``jobs`` cells in flight, default one per CPU of the cluster).

    The loop is the same for both: a cell starts only when a slot is free and the batch budget has room for
    its cap, and a cancel starts nothing more and stops what runs. Returns the outcomes in plan order, the
    ledger, and whether the budget stopped new cells.
    """

    ctx = prepared.ctx
    outcomes: dict[CellKey, CellOutcome] = {}
    todo: list[CellKey] = []
    for key in prepared.cells:
        done = None if ctx.force else finished_result(ctx.root, key)
        if done is not None:
            outcomes[key] = CellOutcome(key, "skipped", result=done)
        else:
            todo.append(key)
    # a dry run pays nothing: no budget applies to it (its cells cost 0, their simulated figures apart)
    ledger = (
        SpendLedger(max_batch_usd, budget=prepared.budget)
        if prepared.budget is not None
        else SpendLedger(
            None if ctx.dry_run else max_batch_usd, _spent_so_far(ctx.root, ctx.limits, budget_usd)
        )
    )
    progress.planned(len(prepared.cells), len(prepared.cells) - len(todo))
    stopped = False
    pending = list(reversed(todo))
    running: dict[Future[CellOutcome], CellKey] = {}
    if not pending:
        return [outcomes[key] for key in prepared.cells], ledger, stopped
    settings = executor or ExecutorSettings()
    with open_executor(settings, ctx, jobs=jobs, cell_function=cell_function) as cells:
        try:
            while pending or running:
                while pending and len(running) < cells.slots and not ctx.cancel.is_set():
                    if not ledger.reserve(pending[-1], ctx.limits[pending[-1].task].budget_usd):
                        break  # it may fit once a running cell has spent less than its cap
                    key = pending.pop()
                    progress.cell_started(key)
                    running[cells.submit(key)] = key
                if not running:
                    stopped = bool(pending) and not ctx.cancel.is_set()
                    break
                completed, _ = wait(list(running), return_when=FIRST_COMPLETED)
                for future in completed:
                    key = running.pop(future)
                    try:
                        outcome = future.result()
                    finally:
                        ledger.release(key)
                    if outcome.status == "finished" and outcome.result is not None:
                        outcome.charged_usd = ledger.charge_result(
                            outcome.result,
                            ctx.limits[key.task].budget_usd,
                            # the gateway settled a sealed cell's requests into the shared budget already
                            metered=prepared.budget is not None and outcome.result.cost_source == "gateway",
                        )
                    outcomes[key] = outcome
                    progress.cell_done(outcome)
        except BaseException:
            ctx.cancel.set()
            cells.stop()
            for future in running:
                future.cancel()
            raise
    for key in pending:
        outcomes[key] = CellOutcome(key, "not_started")
    return [outcomes[key] for key in prepared.cells if key in outcomes], ledger, stopped


def batches_directory(opts: RunOptions, repo: Repo) -> Path:
    """``--out`` when given; else ``<DOKIMI_HOME>/runs/<manifest id>``: a batch lands outside the user's
    working tree, under the repository's id, wherever the command runs from."""
    if opts.out is not None:
        return opts.out
    loaded = load_manifest(
        repo.eval_snapshot(), manifest=opts.manifest, manifest_file=opts.manifest_file, required=True
    )
    assert loaded.manifest is not None
    return default_batches_directory(loaded.manifest.id)


def run_batch(
    opts: RunOptions,
    *,
    progress: Progress | None = None,
    cancel: threading.Event | None = None,
) -> BatchRun:
    """Prepare the batch and run its cells (see the module docstring)."""
    progress = progress or QuietProgress()
    cancel = cancel or threading.Event()
    check_batch_name(opts.batch)
    with contextlib.ExitStack() as stack:
        if opts.out is not None:  # the lock first: a second writer is refused before any clone
            progress.batch((opts.out / opts.batch).absolute(), default_place=False)
            stack.enter_context(batch_writer((opts.out / opts.batch).absolute(), "repo run"))
        repo = stack.enter_context(open_source(opts.source))
        if opts.out is None:
            opts = dataclasses.replace(opts, out=batches_directory(opts, repo))
            assert opts.out is not None
            progress.batch((opts.out / opts.batch).absolute(), default_place=True)
            stack.enter_context(batch_writer((opts.out / opts.batch).absolute(), "repo run"))
        stack.enter_context(cluster_session(opts.executor, opts.ray_address))
        prepared = prepare_batch(opts, repo, cancel=cancel, progress=progress)
        try:
            outcomes, ledger, stopped = execute_cells(
                prepared,
                jobs=opts.jobs,
                max_batch_usd=opts.max_batch_usd,
                budget_usd=opts.budget_usd,
                progress=progress,
                executor=ExecutorSettings(
                    opts.executor, opts.ray_address, opts.shared_out, opts.source, opts.bin
                ),
            )
        finally:
            if prepared.sealed is not None:
                prepared.sealed.stop()
    ctx = prepared.ctx
    return BatchRun(
        root=ctx.root,
        pin=prepared.pin,
        harness=ctx.profile.name,
        harness_version=ctx.harness_version,
        image=ctx.image,
        outcomes=outcomes,
        spent_usd=ledger.spent_usd,
        warnings=prepared.warnings,
        stopped_by_budget=stopped,
        interrupted=cancel.is_set(),
        executor=opts.executor,
        dry_run=opts.dry_run,
    )
