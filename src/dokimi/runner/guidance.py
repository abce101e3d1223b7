"""The guidance files of the framework-made arms, built once per batch before any cell runs.

- ``guidance:tree``: the files the manifest's guidance globs match in the eval tree (today's AGENTS.md), read
  once and written onto every base in place of the base's own
  (:func:`dokimi.repo.workspace.overlay_guidance`).
- ``guidance:at=REV``: the same from revision REV, resolved to a commit once per run; two drafts of a guidance
  file compare as two arms.
- ``guidance:generated``: the files the harness's own guidance generator wrote (Claude Code's ``/init``), run
  once per (task, model) at the task's base, prepared as ``guidance:none``, in a container with the agent's
  mounts and network. They are kept under ``<batch>/_eval/generated/<task>/<model>/`` with a
  ``generated.json`` (repo_generated.v1: the files and their blob SHAs, the generator's cost, turns and
  duration), and every rep of that (task, model) reuses them. In a dry run the scripted model plays a script
  that writes them. The generator's cost is the arm's set-up cost: reported apart from the cells' own.
"""

from __future__ import annotations

import base64
import os
import shutil
import stat
import time
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from dokimi import globs
from dokimi.batch import EVAL_DIR_NAME, CellKey, slug
from dokimi.errors import DokimiError, UsageError
from dokimi.gateway.sealed import observed_usage
from dokimi.harness.traces import convert_file
from dokimi.repo.arms import ARM_NONE, Arm
from dokimi.repo.workspace import (
    GuidanceFile,
    GuidanceOverlay,
    blob_sha,
    guidance_patterns,
    overlay_from_snapshot,
)
from dokimi.rundir import RunDir
from dokimi.runner.cell import _usable, prepare, reset_run_dir, run_agent
from dokimi.runner.dryrun import write_script
from dokimi.safefs import UnsafePathError, read_bytes
from dokimi.schemas._base import read_document, write_document
from dokimi.schemas.generated import Generated

if TYPE_CHECKING:
    from dokimi.runner.cell import CellContext
    from dokimi.schemas.manifest import RepoManifest
    from dokimi.source import Repo

__all__ = [
    "GENERATED_DIR",
    "GENERATED_JSON",
    "build_overlays",
    "dry_run_generator_script",
    "generate_guidance",
    "generated_overlays",
    "read_generated",
]

GENERATED_DIR = "generated"
"""Under ``<batch>/_eval/``: one directory per (task, model) of guidance:generated."""
GENERATED_JSON = "generated.json"
GENERATED_FILES = "files"
GENERATOR_STDOUT = "generator.stdout"
GENERATOR_REQUESTS = "generator.requests.jsonl"
"""Dry run: the request bodies the harness sent the scripted model while generating."""
DRY_RUN_CAPTURE_IN_CONTAINER = "/eval/run/home/.dokimi-generator-requests.jsonl"
"""Where the scripted server records them inside the container (the per-run HOME is writable)."""
CAPTURE_LIMIT = 64 * 1024 * 1024
DRY_RUN_GUIDANCE = "CLAUDE.md"
"""The file the dry-run generator script writes (what Claude Code's /init writes)."""
DRY_RUN_GUIDANCE_TEXT = (
    "# Guidance written by the harness's generator (dry run)\n\n"
    "This file stands for what `/init` writes: an overview of the repository for the agent.\n"
)


def build_overlays(repo: Repo, manifest: RepoManifest, arms: Sequence[Arm]) -> dict[str, GuidanceOverlay]:
    """The overlay of every guidance:tree and guidance:at=REV arm among ``arms``; UsageError for an arm dokimi
    cannot build or a REV that does not resolve to a commit of the source."""
    overlays: dict[str, GuidanceOverlay] = {}
    globs = manifest.guidance.globs
    eval_dir = manifest.eval_dir or ""
    for arm in arms:
        kind = arm.kind
        if kind == "tree":
            overlays[arm] = overlay_from_snapshot(
                repo.eval_snapshot(), globs, origin="tree", eval_dir=eval_dir
            )
        elif kind == "at":
            rev = arm.revision or ""
            sha = repo.resolve(rev)
            if sha is None:
                raise UsageError(
                    f"arm {arm}: {rev} is not a commit of {repo.label}",
                    hint="name a commit, branch or tag the source has (fetch it first for a clone)",
                )
            overlays[arm] = overlay_from_snapshot(repo.snapshot(sha), globs, origin="at", eval_dir=eval_dir)
    return overlays


# --- guidance:generated -------------------------------------------------------------------------------------


def _pair_dir(root: Path, task: str, model: str) -> Path:
    return root / EVAL_DIR_NAME / GENERATED_DIR / slug(task) / slug(model)


def read_generated(directory: Path) -> tuple[Generated, GuidanceOverlay] | None:
    """The record and the files of one (task, model) generation, or None when it is absent or unreadable
    (then it is generated again). The files are read without following links, and only those the record
    lists with a matching blob SHA count: anything else under the directory is ignored."""
    record_path = directory / GENERATED_JSON
    if not record_path.is_file():
        return None
    try:
        record = read_document(record_path, Generated)
    except DokimiError:
        return None
    files: list[GuidanceFile] = []
    for item in record.files:
        stored = directory / GENERATED_FILES / item.path
        try:
            if item.mode == "120000":
                data = os.fsencode(os.readlink(stored))
            else:
                fd = os.open(stored, os.O_RDONLY | os.O_NOFOLLOW)
                with os.fdopen(fd, "rb") as handle:
                    data = handle.read()
        except OSError:
            return None
        if blob_sha(data) != item.sha:
            return None
        files.append(GuidanceFile(item.path, item.mode, data))
    return record, GuidanceOverlay("generated", None, tuple(files))


def dry_run_generator_script() -> list[dict[str, Any]]:
    """The script the scripted model plays for the generator in a dry run: one Bash call that writes
    :data:`DRY_RUN_GUIDANCE` at the repository root, then a final answer."""
    encoded = base64.b64encode(DRY_RUN_GUIDANCE_TEXT.encode()).decode("ascii")
    return [
        {
            "tool_use": {
                "name": "Bash",
                "input": {
                    "command": f"printf '%s' '{encoded}' | base64 -d > {DRY_RUN_GUIDANCE}",
                    "description": "write the repository guidance",
                },
            }
        },
        {"final": f"I wrote {DRY_RUN_GUIDANCE}."},
    ]


def _generator_prompt(ctx: CellContext) -> str:
    prompt = ctx.profile.guidance_init
    if not prompt:
        raise UsageError(
            f"arm guidance:generated needs the harness's guidance generator, and profile {ctx.profile.name} "
            "declares none (guidance_init)",
            hint="use a harness whose profile sets guidance_init (claude-code: /init), or leave the arm out",
        )
    return prompt


def generate_guidance(ctx: CellContext, task_id: str, model: str, *, script: Path | None = None) -> Path:
    """Run the harness's generator for (task, model) and keep what it wrote; returns the pair's directory.

    The workspace is the task's base prepared as guidance:none (so the generator sees no developer guidance)
    in a scratch run directory; the generator runs in a container with the agent's mounts, network, user and
    limits, with the profile's ``guidance_init`` as its prompt. Every file of the result that the guidance
    globs or the harness's guidance names match, and that the generator added or changed, is kept. An
    existing record is reused."""
    directory = _pair_dir(ctx.root, task_id, model)
    if read_generated(directory) is not None:
        return directory
    prompt = _generator_prompt(ctx)
    scratch = directory.with_name(directory.name + ".run")
    reset_run_dir(scratch)
    start = time.monotonic()
    try:
        key = CellKey(task_id, ARM_NONE, model, None, 0)
        prepared = prepare(ctx, key, scratch)
        patterns = guidance_patterns(ctx.manifest.guidance.globs, ctx.profile.guidance.names)
        before = {path: sha for path, _mode, sha in prepared.guidance}
        agent = run_agent(
            ctx,
            key,
            scratch,
            prompt=prompt,
            script=script,
            role="generate",
            capture=DRY_RUN_CAPTURE_IN_CONTAINER,
        )
        workspace = RunDir(scratch).workspace
        written = _changed_guidance(workspace, patterns, before)
        conversion = convert_file(RunDir(scratch).agent_stdout, ctx.profile.trace)
        observed = observed_usage(agent.account, _usable(conversion.cost_usd), conversion.turns)
        if directory.exists():
            shutil.rmtree(directory)
        (directory / GENERATED_FILES).mkdir(parents=True)
        records = []
        for path, mode, data in written:
            target = directory / GENERATED_FILES / path
            target.parent.mkdir(parents=True, exist_ok=True)
            if mode == "120000":
                os.symlink(os.fsdecode(data), target)
            else:
                target.write_bytes(data)
            records.append({"path": path, "mode": mode, "sha": blob_sha(data)})
        shutil.copyfile(RunDir(scratch).agent_stdout, directory / GENERATOR_STDOUT)
        if RunDir(scratch).agent_stderr.is_file():
            shutil.copyfile(RunDir(scratch).agent_stderr, directory / "generator.stderr")
        if ctx.dry_run:  # what the harness sent the scripted model: the generator's real prompt
            _keep_capture(scratch, directory)
        record = Generated.model_validate(
            {
                "schema": "repo_generated.v1",
                "task": task_id,
                "model": model,
                "harness": ctx.profile.name,
                "harness_version": ctx.harness_version,
                "prompt": prompt,
                "dry_run": ctx.dry_run,
                "base_sha": prepared.base_sha,
                "files": records,
                "agent_rc": agent.rc,
                "agent_timed_out": agent.timed_out,
                "cost_usd": 0.0 if ctx.dry_run else observed.cost_usd,
                "cost_source": "dry_run" if ctx.dry_run else observed.cost_source,
                "turns": observed.turns if observed.turns is None or observed.turns >= 0 else None,
                "duration_s": round(time.monotonic() - start, 3),
            }
        )
        write_document(directory / GENERATED_JSON, record)
        return directory
    finally:
        shutil.rmtree(scratch, ignore_errors=True)


def _keep_capture(scratch: Path, directory: Path) -> None:
    """Copy the dry run's request capture out of the container's HOME (written inside the agent's container:
    read without following links, size-capped; absent when the server never started)."""
    home = scratch / "home"
    try:
        data = read_bytes(home / Path(DRY_RUN_CAPTURE_IN_CONTAINER).name, trusted=home, limit=CAPTURE_LIMIT)
    except (FileNotFoundError, UnsafePathError):
        return
    (directory / GENERATOR_REQUESTS).write_bytes(data)


def _changed_guidance(
    workspace: Path, patterns: Sequence[str], before: Mapping[str, str]
) -> list[tuple[str, str, bytes]]:
    """(path, mode, bytes) of every file under ``workspace`` that ``patterns`` match and that is new or
    changed against ``before`` (path -> blob SHA). The generator ran as the agent: links are kept as links
    (never followed), only regular files up to :data:`MAX_GUIDANCE_BYTES` are read (a FIFO, a device or a
    huge file is skipped), and .git and linked directories are not entered."""

    found: list[tuple[str, str, bytes]] = []
    for dirpath, dirnames, filenames in os.walk(workspace):
        dirnames[:] = [d for d in dirnames if d != ".git" and not os.path.islink(os.path.join(dirpath, d))]
        for name in filenames:
            full = os.path.join(dirpath, name)
            rel = os.path.relpath(full, workspace).replace(os.sep, "/")
            if not globs.match_any(patterns, rel):
                continue
            st = os.lstat(full)
            if stat.S_ISLNK(st.st_mode):
                mode, data = "120000", os.fsencode(os.readlink(full))
            elif stat.S_ISREG(st.st_mode):
                try:
                    data = read_bytes(Path(full), trusted=workspace, limit=MAX_GUIDANCE_BYTES)
                except (FileNotFoundError, UnsafePathError):
                    continue
                mode = "100755" if st.st_mode & 0o111 else "100644"
            else:
                continue
            if before.get(rel) != blob_sha(data):
                found.append((rel, mode, data))
    return sorted(found)


MAX_GUIDANCE_BYTES = 2 * 1024 * 1024
"""A generated guidance file larger than this is not kept (the scan's limit for a guidance file)."""


def generated_overlays(
    ctx: CellContext,
    cells: Sequence[CellKey],
    note: Callable[[str], None],
    *,
    dry_run_script: Path | None = None,
) -> dict[tuple[str, str], GuidanceOverlay]:
    """The generated guidance of every (task, model) among the guidance:generated ``cells``: generated once
    (one pair at a time: the generator shares the batch's machine with nothing else yet) and reused."""
    pairs = sorted({(c.task, c.model) for c in cells if Arm(c.arm).kind == "generated"})
    if not pairs:
        return {}
    _generator_prompt(ctx)
    fresh = [p for p in pairs if read_generated(_pair_dir(ctx.root, *p)) is None]
    if fresh:
        note(f"guidance:generated: running the harness's generator for {len(fresh)} (task, model) pair(s)")
    out: dict[tuple[str, str], GuidanceOverlay] = {}
    for task_id, model in pairs:
        directory = generate_guidance(ctx, task_id, model, script=dry_run_script)
        loaded = read_generated(directory)
        if loaded is None:  # a bug: generate_guidance just wrote it
            raise AssertionError(f"generated guidance of {task_id}/{model} cannot be read back")
        out[(task_id, model)] = loaded[1]
    return out


def write_dry_run_generator_script(directory: Path) -> Path:
    """The dry-run generator script as a file the agent's container mounts."""
    directory.mkdir(parents=True, exist_ok=True)
    path = write_script(directory / "generator.json", dry_run_generator_script())
    os.chmod(path, 0o644)
    return path
