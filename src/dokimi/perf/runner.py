"""Running the performance check of one cell (agent-modes §3): the repository's ``perf`` entry point, once per
slot of every round and size, in the grade container, in the order :func:`~dokimi.perf.protocol.plan_rounds`
gives.

Variants and their trees. ``--variant candidate`` runs with the cell's run directory at /eval/run (cwd: the
agent's workspace). ``--variant oracle`` (the baseline and the control) runs with the oracle variant's run
directory at /eval/run: a workspace prepared like the cell's, with the ``oracle`` entry point applied
(:func:`prepare_oracle_variant`; by default under ``{run_dir}/perf/oracle``). Each variant keeps its own tree
between invocations, so a build is made once per variant and reused by later rounds. In a candidate's
container the oracle variant's directory is covered by an empty read-only mount: the agent's code, which the
benchmark runs, can neither read nor slow down the baseline.

One invocation. ``entry_points.perf`` is split like the other entry points (shlex, no shell); the
placeholders are {eval_dir}, {run_dir}, {task}, {out} (``/eval/run/perf/out/<n>.json``) and {variant}. The
environment carries the rest (:func:`dokimi.perf.spec.perf_env`). The command writes repo_perf.v1 to {out},
read at once as untrusted input (no link, at most :data:`MAX_PERF_BYTES`, the task's metric, ``repeats``
values, the variant asked for). stdout and stderr of every invocation are appended to ``perf.stdout`` and
``perf.stderr`` of the cell.

Failures. A candidate invocation that fails (non-zero exit, timeout, no valid document) fails the check: the
agent's tree cannot be measured, as a grader crash fails the run. An oracle or control invocation that fails
is the benchmark's bug: the check is not measured (``perf_pass`` null). docker failing to run a container at
all raises ContainerError (an environment problem). The whole check is written to
``{run_dir}/perf/check.json``.
"""

from __future__ import annotations

import json
import os
import re
import shlex
import shutil
import stat
from collections.abc import Mapping, Sequence
from contextlib import AbstractContextManager, nullcontext
from dataclasses import dataclass, replace
from pathlib import Path, PurePosixPath
from typing import TYPE_CHECKING

from dokimi.constants import CONTAINER_EVAL_DIR, CONTAINER_RUN_DIR
from dokimi.errors import DocumentError, DokimiError, UsageError
from dokimi.perf.protocol import (
    NOISE_FLOOR,
    PerfReport,
    RoundMeasurement,
    Slot,
    evaluate,
    plan_rounds,
    variant_of,
)
from dokimi.perf.spec import TaskPerf, perf_env

if TYPE_CHECKING:
    from dokimi.sandbox.specs import CacheMount
    from dokimi.schemas.manifest import Image
    from dokimi.schemas.perf import RepoPerf
    from dokimi.schemas.profile import HarnessProfile
    from dokimi.schemas.task import Task
    from dokimi.source import Repo

__all__ = [
    "PERF_DIR",
    "PerfCheck",
    "oracle_variant_dir",
    "perf_argv",
    "prepare_oracle_variant",
    "read_perf",
    "run_perf_check",
]

PERF_DIR = "perf"
"""The cell's perf directory: out/ (the documents), oracle/ (the oracle variant), check.json."""
ORACLE_VARIANT = "oracle"
OUT_DIR = "out"
CHECK_JSON = "check.json"
EMPTY_DIR = "empty"
PERF_TIMEOUT_S = 3600.0
MAX_PERF_BYTES = 4 * 1024 * 1024

_PLACEHOLDER = re.compile(r"\{(eval_dir|source_dir|run_dir|out|task|variant)\}")


def oracle_variant_dir(run_dir: Path) -> Path:
    """Where a cell keeps its oracle variant (a run directory of its own)."""
    return run_dir / PERF_DIR / ORACLE_VARIANT


def perf_argv(command: str, *, variant: str, out: PurePosixPath, task: str) -> list[str]:
    """``entry_points.perf`` as an argv: shell-like words, each with its placeholders substituted once."""
    try:
        words = shlex.split(command)
    except ValueError as exc:
        raise UsageError(f"entry_points.perf: cannot split {command!r}: {exc}") from None
    if not words:
        raise UsageError("entry_points.perf is empty")
    values = {
        "eval_dir": str(CONTAINER_EVAL_DIR),
        "run_dir": str(CONTAINER_RUN_DIR),
        "out": str(out),
        "task": task,
        "variant": variant,
    }

    def one(match: re.Match[str]) -> str:
        name = match.group(1)
        if name not in values:
            raise UsageError(
                f"entry_points.perf: placeholder {{{name}}} has no value here",
                hint="{source_dir} is for grade and oracle only",
            )
        return values[name]

    return [_PLACEHOLDER.sub(one, word) for word in words]


def read_perf(path: Path) -> tuple[RepoPerf | None, str | None]:
    """A repo_perf.v1 document as untrusted input: (document, None) or (None, why it cannot be used)."""
    from dokimi.schemas._base import read_document
    from dokimi.schemas.perf import RepoPerf

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

    @property
    def metrics(self) -> dict[str, bool | float | None]:
        """``perf_ratio``, ``perf_pass``, ``perf_scaling_ok`` for result.json's metrics."""
        return self.report.metrics()


def _fresh(path: Path) -> None:
    if path.is_symlink() or path.is_file():
        path.unlink()
    elif path.is_dir():
        shutil.rmtree(path)
    path.mkdir(parents=True)


def _append(path: Path, header: str, text: str) -> None:
    with path.open("a", encoding="utf-8") as handle:
        handle.write(f"== {header} ==\n{text}")
        if text and not text.endswith("\n"):
            handle.write("\n")


def run_perf_check(
    perf: TaskPerf,
    command: str,
    *,
    image: str,
    run_dir: Path,
    oracle_run_dir: Path,
    eval_content: Path,
    image_config: Image | None,
    task: str,
    network: str,
    name: str,
    caches: Sequence[CacheMount] = (),
    env: Mapping[str, str] | None = None,
    batch: str | None = None,
    seed: int = 0,
    timeout: float = PERF_TIMEOUT_S,
    noise_floor: float = NOISE_FLOOR,
) -> PerfCheck:
    """Measure the cell at ``run_dir`` against the oracle variant at ``oracle_run_dir`` (see the module
    docstring), evaluate the protocol, write ``{run_dir}/perf/check.json`` and return the check."""
    from dokimi.sandbox.container import Mount, give_to_container_user, run_container
    from dokimi.sandbox.specs import fresh_grade_home, grade_spec

    if not (oracle_run_dir / "workspace").is_dir():
        raise UsageError(
            f"{oracle_run_dir}/workspace does not exist: the oracle variant was not prepared",
            hint="prepare it with dokimi.perf.runner.prepare_oracle_variant",
        )
    perf_dir = run_dir / PERF_DIR
    perf_dir.mkdir(exist_ok=True)
    out_dirs = {"candidate": perf_dir / OUT_DIR, "oracle": oracle_run_dir / PERF_DIR / OUT_DIR}
    for directory in out_dirs.values():
        _fresh(directory)
    empty = perf_dir / EMPTY_DIR
    _fresh(empty)
    os.chmod(empty, 0o555)
    for log in ("perf.stdout", "perf.stderr"):
        (run_dir / log).write_text("", encoding="utf-8")
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
                out_container = CONTAINER_RUN_DIR / PERF_DIR / OUT_DIR / out_name
                argv = perf_argv(command, variant=variant, out=out_container, task=task)
                fresh_grade_home(variant_dir)
                spec = grade_spec(
                    name=name,
                    image=image,
                    run_dir=variant_dir,
                    argv=argv,
                    eval_content=eval_content,
                    source_dir=None,
                    image_config=image_config,
                    task=task,
                    network=network,
                    caches=caches,
                    env={**(env or {}), **perf_env(perf, variant=variant, size_index=size_index)},
                    batch=batch,
                )
                if variant == "candidate" and hidden:
                    spec = replace(spec, mounts=[*spec.mounts, *hidden])
                give_to_container_user(variant_dir / "grade-home")
                result = run_container(spec, timeout=timeout)
                invocations += 1
                _append(run_dir / "perf.stdout", f"{label} ({variant})", result.stdout)
                _append(run_dir / "perf.stderr", f"{label} ({variant})", result.stderr)
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
    document = {
        "task": task,
        "seed": seed,
        "plan": [list(order) for order in plan_rounds(perf.rounds, seed)],
        "tolerance": perf.tolerance,
        "metric": perf.metric,
        "noise_floor": noise_floor,
        "invocations": invocations,
        "metrics": check.metrics,
        **report.to_json(),
    }
    text = json.dumps(document, indent=2, sort_keys=True, ensure_ascii=False) + "\n"
    from dokimi.schemas._base import write_text_atomic

    write_text_atomic(perf_dir / CHECK_JSON, text)
    return check


def prepare_oracle_variant(
    repo: Repo,
    task: Task,
    *,
    run_dir: Path,
    eval_dir: str,
    guidance_globs: Sequence[str],
    arm: str,
    profile: HarnessProfile | None,
    patches_root: Path,
    oracle_command: str,
    image: str,
    eval_content: Path,
    source_dir: Path | None,
    image_config: Image | None,
    network: str,
    name: str,
    caches: Sequence[CacheMount] = (),
    batch: str | None = None,
    timeout: float = PERF_TIMEOUT_S,
    prep_lock: AbstractContextManager[object] | None = None,
) -> Path:
    """Make the cell's oracle variant: the workspace prepared exactly as the cell's (same base, patches and
    arm), with the cell's task.json and meta.json beside it, and the ``oracle`` entry point applied. Returns
    its run directory (:func:`oracle_variant_dir`). Raises UsageError when the oracle fails. ``prep_lock``
    (the runner's ``CellContext.prep_lock``) is held while the workspace is prepared, not while the oracle
    runs."""
    from dokimi.runner.entrypoints import run_entry_point
    from dokimi.sandbox.container import give_to_container_user
    from dokimi.workspace import ARM_NONE, OVERLAY_ARMS, arm_kind, prepare_workspace

    if arm_kind(arm) in OVERLAY_ARMS:
        # The arm's guidance files are not kept with the batch, and guidance does not change what the oracle
        # measures: its variant is the base's code without guidance.
        arm = ARM_NONE
    target = oracle_variant_dir(run_dir)
    _fresh(target)
    with prep_lock if prep_lock is not None else nullcontext():
        prepare_workspace(
            repo,
            task,
            eval_dir=eval_dir,
            guidance_globs=list(guidance_globs),
            arm=arm,
            profile=profile,
            dest=target / "workspace",
            patches_root=patches_root,
        )
    for name_ in ("task.json", "meta.json"):
        if (run_dir / name_).is_file():
            shutil.copyfile(run_dir / name_, target / name_)
    give_to_container_user(target)
    entry = run_entry_point(
        "oracle",
        oracle_command,
        image=image,
        run_dir=target,
        eval_content=eval_content,
        source_dir=source_dir,
        image_config=image_config,
        task=task.id,
        network=network,
        name=name,
        caches=caches,
        timeout=timeout,
        batch=batch,
    )
    failure = entry.failure(timeout)
    if failure is not None:
        raise UsageError(f"the oracle variant for perf could not be made: {failure}")
    return target


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
    from dokimi.batch import EVAL_DIR_NAME, read_pin
    from dokimi.perf.spec import task_perf
    from dokimi.runner.entrypoints import needs_source_dir
    from dokimi.sandbox.container import container_name
    from dokimi.sandbox.docker import image_exists, require_docker
    from dokimi.sandbox.specs import docker_network, resolve_caches
    from dokimi.schemas._base import read_document
    from dokimi.schemas.manifest import RepoManifest
    from dokimi.schemas.meta import Meta
    from dokimi.schemas.task import Task

    run_dir = Path(run_dir).absolute()
    root = next((p for p in run_dir.parents if (p / EVAL_DIR_NAME / "batch.json").is_file()), None)
    if root is None or not (run_dir / "task.json").is_file():
        raise UsageError(f"{run_dir} is not a cell of a batch", hint="give <out>/<batch>/<task>/.../rep<N>")
    pin, why = read_pin(root)
    if pin is None:
        raise UsageError(f"{root}: {why}", hint="check a batch that repo run wrote")
    try:
        manifest = read_document(root / EVAL_DIR_NAME / "manifest.json", RepoManifest)
        task = read_document(run_dir / "task.json", Task)
        meta = read_document(run_dir / "meta.json", Meta)
        perf = task_perf(task)
    except DocumentError as exc:
        raise UsageError(f"cannot check {run_dir}: {exc}") from None
    if perf is None:
        raise UsageError(f"task {task.id} has no perf object", hint="see docs/perf.md")
    entry = manifest.entry_points
    if entry is None or entry.perf is None:
        raise UsageError("the batch's manifest has no entry_points.perf", hint="see docs/perf.md")
    content = root / EVAL_DIR_NAME / "content"
    require_docker()
    if not image_exists(pin.image):
        raise UsageError(
            f"the batch's image {pin.image} is not on this docker daemon",
            hint="rebuild it with `repo run` on the batch's eval tree (a rerun skips finished cells)",
        )
    cache_mounts = resolve_caches(manifest.image, manifest.id, overrides=caches)
    network = docker_network(manifest.image.network if manifest.image else "none")
    rel = run_dir.relative_to(root).as_posix()
    oracle = oracle_variant_dir(run_dir)
    if not (oracle / "workspace").is_dir():
        from dokimi.harness.profile import load_profile
        from dokimi.source import open_source

        try:
            profile = load_profile(meta.harness)
        except DokimiError:
            profile = None
        with open_source(pin.source) as repo:
            if needs_source_dir(entry.oracle) and source_dir is None:
                source_dir = repo.git_dir
            eval_dir = (manifest.eval_dir or "").strip("/")
            task_rel = (manifest.tasks or "").strip("/").removeprefix(eval_dir).strip("/")
            prepare_oracle_variant(
                repo,
                task,
                run_dir=run_dir,
                eval_dir=manifest.eval_dir or "",
                guidance_globs=manifest.guidance.globs,
                arm=meta.arm,
                profile=profile,
                patches_root=content / task_rel / task.id,
                oracle_command=entry.oracle,
                image=pin.image,
                eval_content=content,
                source_dir=source_dir,
                image_config=manifest.image,
                network=network,
                name=container_name(pin_name(root), rel, "perf-oracle"),
                caches=cache_mounts,
                batch=pin_name(root),
            )
    return run_perf_check(
        perf,
        entry.perf,
        image=pin.image,
        run_dir=run_dir,
        oracle_run_dir=oracle,
        eval_content=content,
        image_config=manifest.image,
        task=task.id,
        network=network,
        name=container_name(pin_name(root), rel, "perf"),
        caches=cache_mounts,
        batch=pin_name(root),
        seed=seed,
        noise_floor=noise_floor,
    )


def pin_name(root: Path) -> str:
    """The batch's name: its directory's."""
    return root.name
