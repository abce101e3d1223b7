"""Running the performance check of one cell: the repository's ``perf`` entry point, once per
slot of every round and size, in the grade container, in the order
:func:`~dokimi.checks.perf.protocol.plan_rounds` gives.

Variants and their trees. ``--variant candidate`` runs with the cell's run directory at /eval/run (cwd: the
agent's workspace). ``--variant oracle`` (the baseline and the control) runs with the oracle variant's run
directory at /eval/run: a workspace prepared like the cell's, with the ``oracle`` entry point applied
(:func:`prepare_oracle_variant`; under ``{run_dir}/perf/oracle``). Each variant keeps its own tree
between invocations, so a build is made once per variant and reused by later rounds. In a candidate's
container the oracle variant's directory is covered by an empty read-only mount: the agent's code, which the
benchmark runs, can neither read nor slow down the baseline.

One invocation. ``entry_points.perf`` is split like the other entry points (shlex, no shell); the
placeholders are {eval_dir}, {run_dir}, {task}, {out} (``/eval/run/perf/out/<n>.json``) and {variant}. The
environment carries the rest (:func:`dokimi.checks.perf.spec.perf_env`). The command writes repo_perf.v1 to
{out}, read at once as untrusted input (no link, at most :data:`MAX_PERF_BYTES`, the task's metric,
``repeats`` values, the variant asked for). stdout and stderr of every invocation are appended to
``perf.stdout`` and ``perf.stderr`` of the cell.

Failures. A candidate invocation that fails (non-zero exit, timeout, no valid document) fails the check: the
agent's tree cannot be measured, as a grader crash fails the run. An oracle or control invocation that fails
is the benchmark's bug: the check is not measured (``perf_pass`` null). docker failing to run a container at
all raises ContainerError (an environment problem). The whole check is written to
``{run_dir}/perf/check.json``.
"""

from __future__ import annotations

import os
import re
import stat
from collections.abc import Callable, Mapping
from dataclasses import dataclass, replace
from pathlib import Path, PurePosixPath
from typing import TYPE_CHECKING

from dokimi import safefs
from dokimi.checks.perf.protocol import (
    NOISE_FLOOR,
    PerfReport,
    RoundMeasurement,
    Slot,
    evaluate,
    plan_rounds,
    variant_of,
)
from dokimi.checks.perf.spec import TaskPerf, perf_env, task_perf
from dokimi.constants import CONTAINER_EVAL_DIR, CONTAINER_RUN_DIR
from dokimi.errors import DocumentError, DokimiError, UsageError
from dokimi.grading.checks import framework_document
from dokimi.grading.egress import entry_egress
from dokimi.grading.entrypoints import needs_source_dir, run_entry_point
from dokimi.grading.environment import GradeEnvironment
from dokimi.grading.evidence import run_sealed
from dokimi.grading.finished import open_finished_batch
from dokimi.harness.profile import load_profile
from dokimi.repo.arms import ARM_NONE, Arm
from dokimi.repo.workspace import WorkspaceSource, prepare_workspace
from dokimi.rundir import (
    META_JSON,
    PERF_EMPTY_DIR,
    PERF_STDERR,
    PERF_STDOUT,
    TASK_JSON,
    RunDir,
    batch_root_of,
    task_dir,
)
from dokimi.sandbox.container import Mount, container_name, give_to_container_user
from dokimi.sandbox.specs import GradeMounts, command_argv, fresh_grade_home, grade_spec
from dokimi.schemas._base import read_document, write_document
from dokimi.schemas.grading import PerfCheckDoc
from dokimi.schemas.meta import Meta
from dokimi.schemas.perf import RepoPerf
from dokimi.schemas.task import Task
from dokimi.source import open_source

if TYPE_CHECKING:
    from dokimi.grading.grade import CellFacts
    from dokimi.schemas.grade import RepoGrade

__all__ = [
    "PERF",
    "PerfCheck",
    "PrepareWorkspace",
    "oracle_variant_arm",
    "oracle_variant_dir",
    "perf_argv",
    "perf_metrics",
    "prepare_oracle_variant",
    "read_perf",
    "read_perf_check",
    "run_perf_check",
]

PrepareWorkspace = Callable[[Path], object]
"""Prepares a workspace at the given path exactly as the cell's was prepared (same base, patches and arm)."""
MAX_PERF_BYTES = 4 * 1024 * 1024

_PLACEHOLDER = re.compile(r"\{(eval_dir|source_dir|run_dir|out|task|variant)\}")


def oracle_variant_dir(run_dir: Path) -> Path:
    """Where a cell keeps its oracle variant (a run directory of its own)."""
    return RunDir(run_dir).perf_oracle


def perf_argv(command: str, *, variant: str, out: PurePosixPath, task: str) -> list[str]:
    """``entry_points.perf`` as an argv: shell-like words, each with its placeholders substituted once."""
    values = {
        "eval_dir": str(CONTAINER_EVAL_DIR),
        "run_dir": str(CONTAINER_RUN_DIR),
        "out": str(out),
        "task": task,
        "variant": variant,
    }
    return command_argv(
        command,
        values,
        where="entry_points.perf",
        placeholders=_PLACEHOLDER,
        hint="{source_dir} is for grade and oracle only",
    )


def read_perf(path: Path) -> tuple[RepoPerf | None, str | None]:
    """A repo_perf.v1 document as untrusted input: (document, None) or (None, why it cannot be used)."""
    try:
        st = os.lstat(path)
    except FileNotFoundError:
        return None, f"perf wrote no {path.name}"
    if not stat.S_ISREG(st.st_mode):
        return None, f"{path.name} is not a regular file"
    if st.st_size > MAX_PERF_BYTES:
        return None, f"{path.name} is {st.st_size} bytes, over the {MAX_PERF_BYTES} byte limit"
    try:
        return read_document(path, RepoPerf), None
    except DocumentError as exc:
        where = f"line {exc.line}: " if exc.line else ""
        key = f"{exc.key}: " if exc.key else ""
        return None, f"invalid repo_perf.v1: {where}{key}{exc.message}"


def _problem(doc: RepoPerf, perf: TaskPerf, *, variant: str, size: Mapping[str, object] | None) -> str | None:
    if doc.metric != perf.metric:
        return f"metric {doc.metric!r}, but the task measures {perf.metric!r}"
    if len(doc.values) != perf.repeats:
        return f"{len(doc.values)} values, but the task asks for repeats={perf.repeats}"
    if doc.variant != variant:
        return f"variant {doc.variant!r}, but {variant!r} was run"
    if doc.size is not None and size is not None and dict(doc.size) != dict(size):
        return f"size {doc.size}, but {dict(size)} was asked for"
    return None


@dataclass
class PerfCheck:
    """The outcome of one cell's perf check."""

    report: PerfReport
    invocations: int
    document: PerfCheckDoc | None = None
    """What was written to perf/check.json."""

    @property
    def metrics(self) -> dict[str, bool | float | None]:
        """``perf_ratio``, ``perf_pass``, ``perf_scaling_ok`` for result.json's metrics."""
        return self.report.metrics()


def _fresh(path: Path, trusted: Path) -> None:
    """An empty directory at ``path`` below ``trusted``: whatever was there (a link a container left)
    removed, not followed."""
    safefs.remove(path, trusted=trusted)
    safefs.makedirs(path, trusted=trusted)


def _append(path: Path, header: str, text: str) -> None:
    tail = "\n" if text and not text.endswith("\n") else ""
    safefs.append_text(path, f"== {header} ==\n{text}{tail}", trusted=path.parent)


def run_perf_check(
    environment: GradeEnvironment,
    run_dir: Path,
    task: Task,
    *,
    oracle_run_dir: Path,
    name: str,
    seed: int = 0,
    noise_floor: float = NOISE_FLOOR,
) -> PerfCheck:
    """Measure the cell at ``run_dir`` against the oracle variant at ``oracle_run_dir`` (see the module
    docstring), evaluate the protocol, write ``{run_dir}/perf/check.json`` and return the check."""
    perf = task_perf(task)
    command = environment.entry_points.perf
    if perf is None or command is None:
        raise UsageError(f"task {task.id} has no perf check", hint="see docs/perf.md")
    timeout = environment.perf_timeout_s
    if not RunDir(oracle_run_dir).workspace.is_dir():
        raise UsageError(
            f"{oracle_run_dir}/workspace does not exist: the oracle variant was not prepared",
            hint="prepare it with dokimi.grading.perf.prepare_oracle_variant",
        )
    perf_dir = RunDir(run_dir).perf_dir
    if safefs.kind(perf_dir, trusted=run_dir) not in (None, "a directory"):  # a link the grader left
        safefs.remove(perf_dir, trusted=run_dir)
    safefs.makedirs(perf_dir, trusted=run_dir)
    out_dirs = {"candidate": RunDir(run_dir).perf_out, "oracle": RunDir(oracle_run_dir).perf_out}
    _fresh(out_dirs["candidate"], run_dir)
    _fresh(out_dirs["oracle"], oracle_run_dir)
    empty = perf_dir / PERF_EMPTY_DIR
    _fresh(empty, run_dir)
    os.chmod(empty, 0o555)
    for log in (PERF_STDOUT, PERF_STDERR):
        safefs.write_text(run_dir / log, "", trusted=run_dir)
    give_to_container_user(*out_dirs.values(), oracle_run_dir)
    hidden: list[Mount] = []
    if oracle_run_dir.resolve().is_relative_to(run_dir.resolve()):
        rel = oracle_run_dir.resolve().relative_to(run_dir.resolve())
        hidden = [Mount(empty, CONTAINER_RUN_DIR / PurePosixPath(rel.as_posix()), read_only=True)]

    measurements: list[RoundMeasurement] = []
    error: tuple[Slot, str] | None = None
    invocations = 0
    for round_index, order in enumerate(plan_rounds(perf.rounds, seed)):
        for size_index in perf.size_indices:
            size = perf.sizes[size_index] if perf.sizes is not None and size_index is not None else None
            values: dict[Slot, list[float]] = {}
            for slot in order:
                variant = variant_of(slot)
                variant_dir = run_dir if variant == "candidate" else oracle_run_dir
                label = f"r{round_index}-s{'' if size_index is None else size_index}-{slot}"
                out_name = f"{label}.json"
                out_host = out_dirs[variant] / out_name
                out_container = RunDir(CONTAINER_RUN_DIR).perf_out / out_name
                argv = perf_argv(command, variant=variant, out=out_container, task=task.id)
                fresh_grade_home(variant_dir)
                with entry_egress(environment, task, run_dir, by="perf", name=name) as (settings, extra):
                    spec = grade_spec(
                        settings,
                        GradeMounts(environment.eval_content),
                        name=name,
                        run_dir=variant_dir,
                        argv=argv,
                        task=task.id,
                        env={**perf_env(perf, variant=variant, size_index=size_index), **extra},
                    )
                    if variant == "candidate" and hidden:
                        spec = replace(spec, mounts=[*spec.mounts, *hidden])
                    give_to_container_user(RunDir(variant_dir).grade_home)
                    result = run_sealed(spec, variant_dir, what=f"perf ({slot})", timeout=timeout)
                invocations += 1
                _append(RunDir(run_dir).perf_stdout, f"{label} ({variant})", result.stdout)
                _append(RunDir(run_dir).perf_stderr, f"{label} ({variant})", result.stderr)
                why: str | None = None
                if result.timed_out:
                    why = f"perf ({slot}) ran past its timeout of {timeout:g} s"
                elif result.returncode != 0:
                    tail = "\n".join(result.stderr.rstrip().splitlines()[-20:])
                    why = f"perf ({slot}) exited {result.returncode}" + (f":\n{tail}" if tail else "")
                else:
                    doc, why = read_perf(out_host)
                    if doc is not None:
                        why = _problem(doc, perf, variant=variant, size=size)
                        if why is None:
                            values[slot] = list(doc.values)
                if why is not None:
                    error = (slot, why)
                    break
            if error is not None:
                break
            measurements.append(RoundMeasurement(round_index, size_index, values))
        if error is not None:
            break

    if error is not None:
        slot, why = error
        report = PerfReport()
        report.error = why
        if slot == "candidate":
            report.passed = False
            report.reason = f"the candidate cannot be measured: {why}"
        else:
            report.passed = None
            report.reason = f"the oracle's perf run failed (a benchmark bug; not measured): {why}"
    else:
        report = evaluate(measurements, perf.tolerance, sizes=perf.sizes, floor=noise_floor)
    check = PerfCheck(report, invocations)
    document = PerfCheckDoc.model_validate(
        {
            "task": task.id,
            "seed": seed,
            "plan": [list(order) for order in plan_rounds(perf.rounds, seed)],
            "tolerance": perf.tolerance,
            "metric": perf.metric,
            "noise_floor": noise_floor,
            "invocations": invocations,
            "metrics": check.metrics,
            **report.to_json(),
        }
    )
    write_document(RunDir(run_dir).perf_check_json, document)
    check.document = document
    return check


def oracle_variant_arm(arm: str) -> Arm:
    """The arm the oracle variant is prepared with: the cell's, except for an overlay arm, whose guidance
    files are not kept with the batch; guidance does not change what the oracle measures, so its variant is
    the base's code without guidance."""
    parsed = Arm(arm)
    return ARM_NONE if parsed.overlays else parsed


def prepare_oracle_variant(
    environment: GradeEnvironment, run_dir: Path, task: Task, *, prepare: PrepareWorkspace, name: str
) -> Path:
    """Make the cell's oracle variant: a workspace prepared exactly as the cell's (``prepare`` makes it: same
    base, patches and arm, under whatever lock the caller needs), with the cell's task.json and meta.json
    beside it, and the ``oracle`` entry point applied. Returns its run directory (:func:`oracle_variant_dir`).
    Raises UsageError when the oracle fails."""
    target = oracle_variant_dir(run_dir)
    _fresh(target, run_dir)
    prepare(RunDir(target).workspace)
    for name_ in (TASK_JSON, META_JSON):  # as they are: a link a grader left is copied as the link
        safefs.copy_entry(
            run_dir / name_, target / name_, trusted=run_dir, target_trusted=run_dir, limit=16 << 20
        )
    give_to_container_user(target)
    entry = run_entry_point(environment, target, task, "oracle", name=name)
    failure = entry.failure(environment.grade_timeout_s)
    if failure is not None:
        raise UsageError(f"the oracle variant for perf could not be made: {failure}")
    return target


def perf_metrics(
    environment: GradeEnvironment,
    run_dir: Path,
    task: Task,
    *,
    prepare: PrepareWorkspace,
    container: Callable[[str], str],
    seed: int,
) -> PerfCheckDoc | None:
    """perf/check.json (perf_ratio, perf_pass and perf_scaling_ok) for a task with a ``perf`` object: the
    cell's workspace measured against its oracle variant, in the grade container. None for other tasks.
    ``container`` names the container of a role (``perf-oracle``, ``perf``)."""
    if task_perf(task) is None or environment.entry_points.perf is None:
        return None
    oracle_dir = prepare_oracle_variant(
        environment, run_dir, task, prepare=prepare, name=container("perf-oracle")
    )
    check = run_perf_check(
        environment, run_dir, task, oracle_run_dir=oracle_dir, name=container("perf"), seed=seed
    )
    return check.document


def check_finished_cell(
    run_dir: Path,
    *,
    seed: int = 0,
    caches: dict[str, Path] | None = None,
    source_dir: Path | None = None,
    noise_floor: float = NOISE_FLOOR,
) -> PerfCheck:
    """``repo perf RUN_DIR``: the perf check of a cell of a batch that ``repo run`` wrote, in the batch's
    image with its exported eval_dir. The oracle variant under ``{run_dir}/perf/oracle`` is reused when it
    exists, otherwise prepared from the batch's source (same task, base and arm). result.json is not
    changed. Raises UsageError when the cell, the batch or the task cannot be checked."""
    run_dir = Path(run_dir).absolute()
    cell = RunDir(run_dir)
    root = batch_root_of(run_dir)
    if root is None or not cell.task_json.is_file():
        raise UsageError(f"{run_dir} is not a cell of a batch", hint="give <out>/<batch>/<task>/.../rep<N>")
    finished = open_finished_batch(root, caches=caches, hint="check a batch that repo run wrote")
    try:
        task = read_document(cell.task_json, Task)
        meta = read_document(cell.meta_json, Meta)
        perf = task_perf(task)
    except DocumentError as exc:
        raise UsageError(f"cannot check {run_dir}: {exc}") from None
    if perf is None:
        raise UsageError(f"task {task.id} has no perf object", hint="see docs/perf.md")
    manifest = finished.manifest
    entry = manifest.entry_points
    if entry is None or entry.perf is None:
        raise UsageError("the batch's manifest has no entry_points.perf", hint="see docs/perf.md")
    rel = finished.layout.rel(run_dir)
    batch = finished.layout.name
    oracle = oracle_variant_dir(run_dir)
    environment = finished.environment
    if not RunDir(oracle).workspace.is_dir():
        try:
            profile = load_profile(meta.harness)
        except DokimiError:
            profile = None
        with open_source(finished.pin.source) as repo:
            if needs_source_dir(entry.oracle):
                environment = replace(environment, source_dir=source_dir or repo.git_dir)

            def prepare(dest: Path) -> object:
                return prepare_workspace(
                    WorkspaceSource(repo, manifest.eval_dir or "", manifest.guidance.globs),
                    task,
                    arm=oracle_variant_arm(meta.arm),
                    profile=profile,
                    dest=dest,
                    patches_root=task_dir(finished.layout.content, manifest, task.id),
                )

            prepare_oracle_variant(
                environment, run_dir, task, prepare=prepare, name=container_name(batch, rel, "perf-oracle")
            )
    return run_perf_check(
        environment,
        run_dir,
        task,
        oracle_run_dir=oracle,
        name=container_name(batch, rel, "perf"),
        seed=seed,
        noise_floor=noise_floor,
    )


def read_perf_check(run_dir: Path) -> PerfCheckDoc | None:
    """perf/check.json of a finished run directory; None when absent or unreadable."""
    return framework_document(RunDir(run_dir).perf_check_json, PerfCheckDoc)


@dataclass
class _StartedPerf:
    environment: GradeEnvironment
    run_dir: Path
    task: Task
    facts: CellFacts
    cost_usd: float | None = None
    judges: tuple[str, ...] = ()

    def finish(self, grade: RepoGrade | None) -> PerfCheckDoc | None:
        facts = self.facts
        return perf_metrics(
            self.environment,
            self.run_dir,
            self.task,
            prepare=facts.prepare,
            container=facts.container,
            seed=facts.seed,
        )


class Perf:
    """The framework check of a task with a ``perf`` object: after grade, the cell's workspace measured
    against its oracle variant (perf/check.json). Nothing runs before grade."""

    name = "perf"

    def start(
        self, environment: GradeEnvironment, run_dir: Path, task: Task, facts: CellFacts
    ) -> _StartedPerf | None:
        if task_perf(task) is None or environment.entry_points.perf is None:
            return None
        return _StartedPerf(environment, run_dir, task, facts)

    def read(self, run_dir: Path) -> PerfCheckDoc | None:
        return read_perf_check(run_dir)


PERF = Perf()
"""The perf check as a framework check (:mod:`dokimi.grading.checks`)."""
