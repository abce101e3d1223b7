"""Loading the manifest (repo-eval.yaml) and the tasks it names, from a snapshot or a local file.

- :func:`load_manifest` finds and reads the manifest (``--manifest`` inside the source, ``--manifest-file`` on
  the host, else ``.agent-eval/repo-eval.yaml`` when present). A manifest that cannot be read at all (not
  UTF-8, not YAML, duplicate keys, not a mapping) raises :class:`~dokimi.errors.ManifestError` naming
  file:line.
- :func:`load_tasks` reads every ``<tasks>/<id>/task.json`` in one batch; a task that cannot be parsed or does
  not fit :class:`~dokimi.schemas.task.Task` is returned with its errors, never raised.
- :func:`guidance_files_at` lists the files the guidance globs match in one tree (the dokimi glob dialect).
"""

from __future__ import annotations

import posixpath
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from dokimi import safefs
from dokimi.constants import DEFAULT_EVAL_DIR, DEFAULT_GUIDANCE_GLOBS, DEFAULT_MANIFEST_NAME
from dokimi.errors import DocumentError, DokimiError, ManifestError, SourceError
from dokimi.globs import filter_paths, is_glob, literal_prefix
from dokimi.rundir import TASK_JSON
from dokimi.schemas._base import (
    MAX_DOCUMENT_BYTES,
    LazyMarked,
    Marked,
    decode_text,
    load_json,
    parse_json,
    parse_yaml,
    validation_errors,
)
from dokimi.schemas.manifest import RepoManifest
from dokimi.schemas.task import Task, misspelled_task_keys
from dokimi.source.snapshot import Snapshot, normalize

DEFAULT_MANIFEST_PATH = f"{DEFAULT_EVAL_DIR}/{DEFAULT_MANIFEST_NAME}"
TASK_FILE = TASK_JSON


@dataclass
class LoadedManifest:
    """The manifest as loaded, or the default guidance globs when there is none and none is required."""

    manifest: RepoManifest | None
    path: str | None
    """Where it came from: the path inside the source, or the local file given by --manifest-file."""
    marked: Marked | None
    """The parsed YAML with the line of every key (for file:line in findings)."""
    guidance_globs: list[str]
    also_scan: list[str]
    defaulted: bool
    """True when no manifest was found and the default globs are used."""
    from_file: bool = False
    """True when the manifest was read from the host (--manifest-file), not from the source tree."""


@dataclass
class LoadedTask:
    """One task directory: its task.json parsed (``task`` is None when it is unreadable or invalid)."""

    id: str
    """The directory name (which the task's ``id`` must equal)."""
    dir: str
    """Path of the task directory, relative to the repository root."""
    path: str
    """Path of its task.json, relative to the repository root."""
    task: Task | None
    marked: Marked | None
    errors: list[DokimiError] = field(default_factory=list)
    warnings: list[DokimiError] = field(default_factory=list)
    """What does not stop the task: a key spelled like a framework key (:func:`near_miss_warnings`). Keys the
    framework does not read belong to the repository's grader, so no command refuses a task for one."""


# --- manifest ---------------------------------------------------------------------------------------------


def read_manifest_marked(
    snapshot: Snapshot, *, manifest: str | None, manifest_file: Path | None
) -> tuple[Marked, str, bool] | None:
    """Find and parse the manifest: ``(marked, path, from_file)``, or None when none is given and the default
    location does not exist. Raises ManifestError when it cannot be read or is not a YAML mapping."""
    if manifest and manifest_file:
        raise ManifestError("give --manifest or --manifest-file, not both")
    if manifest_file is not None:
        name = str(manifest_file)
        try:
            raw = safefs.read_plain(Path(manifest_file), limit=MAX_DOCUMENT_BYTES)
        except FileNotFoundError:
            raise ManifestError("no such file", path=name, hint="check the --manifest-file path") from None
        except safefs.UnsafePathError as exc:
            raise ManifestError(exc.message, path=name) from None
        except OSError as exc:
            raise ManifestError(f"cannot read: {exc.strerror}", path=name) from None
        return _parse_manifest(raw, name), name, True
    if manifest:
        path = normalize(manifest)
        if manifest.startswith("/") or path == ".." or path.startswith("../"):
            raise ManifestError(
                f"{manifest}: --manifest is a path inside the source, relative to its root",
                hint="use --manifest-file for a file outside the source",
            )
    else:
        path = DEFAULT_MANIFEST_PATH
        if not snapshot.is_file(path):
            return None
    if not snapshot.is_file(path):
        what = "a directory" if snapshot.is_dir(path) else "no such file"
        raise ManifestError(
            f"{what} in {snapshot.label}",
            path=path,
            hint="give its path relative to the repository root, or --manifest-file for a local file",
        )
    try:
        raw = snapshot.read(path)
    except SourceError as exc:
        raise ManifestError(exc.message, path=path, hint=exc.hint) from None
    return _parse_manifest(raw, path), path, False


class ManifestUnreadable(ManifestError):
    """The manifest exists but is not a YAML mapping (binary, not UTF-8, bad YAML, a duplicate key, nested
    too deep, an alias bomb): for ``repo validate`` a finding about the document (exit 1), for every other
    command an error (exit 2)."""


def _parse_manifest(raw: bytes, name: str) -> Marked:
    try:
        marked = parse_yaml(decode_text(raw, name), name)
    except DocumentError as exc:
        raise ManifestUnreadable(
            exc.message, path=exc.path, line=exc.line, key=exc.key, hint=exc.hint
        ) from None
    if not isinstance(marked.data, dict):
        kind = "empty" if marked.data is None else f"a YAML {type(marked.data).__name__}"
        raise ManifestUnreadable(
            f"the manifest must be a mapping (schema: repo_manifest.v1, id: ...), but it is {kind}",
            path=name,
            line=1,
            hint="start the file with `schema: repo_manifest.v1`",
        )
    return marked


def manifest_model_errors(marked: Marked) -> tuple[RepoManifest | None, list[DocumentError]]:
    """Validate parsed manifest data against repo_manifest.v1: the model, or None and one error per
    problem."""
    try:
        return RepoManifest.model_validate(marked.data), []
    except ValidationError as exc:
        return None, validation_errors(exc, marked, RepoManifest)


def load_manifest(
    snapshot: Snapshot, *, manifest: str | None, manifest_file: Path | None, required: bool
) -> LoadedManifest:
    """Load the manifest for a command. With none found: the default globs, unless ``required``.

    Raises ManifestError when the manifest cannot be read or does not fit repo_manifest.v1 (the first problem,
    with file:line: key; ``repo validate`` reports every problem instead).
    """
    found = read_manifest_marked(snapshot, manifest=manifest, manifest_file=manifest_file)
    if found is None:
        if required:
            raise ManifestError(
                f"no manifest: {DEFAULT_MANIFEST_PATH} does not exist in {snapshot.label}",
                hint="give --manifest PATH (inside the source) or --manifest-file PATH (a local file)",
            )
        return LoadedManifest(
            None, None, None, list(DEFAULT_GUIDANCE_GLOBS), [], defaulted=True, from_file=False
        )
    marked, path, from_file = found
    model, errors = manifest_model_errors(marked)
    if model is None:
        first = errors[0]
        message = first.message
        if len(errors) > 1:
            message += f" (and {len(errors) - 1} more; `dokimi repo validate` lists them all)"
        raise ManifestError(message, path=first.path, line=first.line, key=first.key)
    return LoadedManifest(
        model,
        path,
        marked,
        list(model.guidance.globs),
        list(model.guidance.also_scan),
        defaulted=False,
        from_file=from_file,
    )


# --- tasks ------------------------------------------------------------------------------------------------


def task_dirs(snapshot: Snapshot, tasks_dir: str) -> list[str]:
    """Immediate subdirectories of ``tasks_dir`` in the tree, sorted (paths relative to the root)."""
    tasks_dir = normalize(tasks_dir)
    return sorted(d for d in snapshot.dirs if d and posixpath.dirname(d) == tasks_dir)


def load_tasks(snapshot: Snapshot, manifest: RepoManifest) -> list[LoadedTask]:
    """Every ``<tasks>/<id>/task.json`` of the tree, read in one batch, sorted by directory name.

    A directory without task.json is not a task (``repo validate`` warns about it). Parse and schema problems
    go into ``LoadedTask.errors``; nothing is raised for a bad task.
    """
    if manifest.tasks is None:
        return []
    dirs = [d for d in task_dirs(snapshot, manifest.tasks) if snapshot.exists(f"{d}/{TASK_FILE}")]
    paths = [f"{d}/{TASK_FILE}" for d in dirs]
    blobs: dict[str, bytes] = {}
    unreadable: dict[str, str] = {}
    try:
        blobs = snapshot.read_many(paths)
    except SourceError:
        for path in paths:  # find which one; rare, so one by one is fine
            try:
                blobs[path] = snapshot.read(path)
            except SourceError as exc:
                unreadable[path] = exc.message
    loaded = []
    for directory, path in zip(dirs, paths, strict=True):
        task_id = posixpath.basename(directory)
        if path in unreadable:
            error = DocumentError(f"cannot read: {unreadable[path]}", path=path)
            loaded.append(LoadedTask(task_id, directory, path, None, None, [error]))
            continue
        loaded.append(parse_task(blobs[path], path=path, task_id=task_id, directory=directory))
    return loaded


class _DuplicateKey(ValueError):
    pass


def _refuse_duplicates(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for key, value in pairs:
        if key in out:
            raise _DuplicateKey(key)
        out[key] = value
    return out


def near_miss_warnings(marked: Marked, path: str) -> list[DokimiError]:
    """A task.json key that is not the framework's but spells like one (``gates``, ``oracle_paths``): a
    warning naming the key it resembles, never an error. The contract gives every key the framework does not
    read to the repository's grader, which may well read ``oracle_paths``; a typo of ``gate`` would leave the
    default gate in force, which the warning says."""
    return [
        DocumentError(
            f"spells like {close!r}, a key dokimi reads: if it is a typo, {close!r} is unset and its "
            "default applies; a key your grader reads is fine (keys dokimi does not read are the grader's)",
            path=path,
            line=marked.line((key,)),
            key=key,
            hint=f"did you mean {close!r}?",
        )
        for key, close in misspelled_task_keys(marked.data)
    ]


def parse_task(raw: bytes, *, path: str, task_id: str, directory: str) -> LoadedTask:
    """Parse one task.json (duplicate keys refused) and validate it against Task, keeping every error."""
    try:
        text = decode_text(raw, path)
        try:
            data = load_json(text, object_pairs_hook=_refuse_duplicates)
        except ValueError:  # not JSON, too deep, or a duplicate key: the full parser names the line
            parse_json(text, path)
            raise DocumentError("not valid JSON", path=path) from None
        marked: Marked = LazyMarked(data, path, text=text)
    except DocumentError as exc:
        return LoadedTask(task_id, directory, path, None, None, [exc])
    if not isinstance(marked.data, dict):
        error = DocumentError("task.json must be a JSON object", path=path, line=1)
        return LoadedTask(task_id, directory, path, None, marked, [error])
    near_misses = near_miss_warnings(marked, path)
    try:
        task = Task.model_validate(marked.data)
    except ValidationError as exc:
        errors: list[DokimiError] = list(validation_errors(exc, marked, Task))
        return LoadedTask(task_id, directory, path, None, marked, errors, near_misses)
    return LoadedTask(task_id, directory, path, task, marked, [], near_misses)


# --- guidance ---------------------------------------------------------------------------------------------


def _last_segment(path: str) -> str:
    return path[path.rfind("/") + 1 :]


def match_globs(globs: Sequence[str], paths: Sequence[str]) -> dict[str, list[str]]:
    """For each glob, the paths it matches (sorted).

    One pass over ``paths`` narrows the candidates of every glob at once (a literal last segment is looked up
    by basename, a literal directory prefix by prefix), so 20,000 paths cost little; the match itself is
    always :func:`dokimi.globs.filter_paths`.
    """
    candidates: dict[str, list[str]] = {}
    by_basename: dict[str, list[str]] = {}
    by_prefix: list[tuple[str, str]] = []
    everything: list[str] = []
    exact: list[str] = []
    for pattern in dict.fromkeys(globs):
        norm = pattern[2:] if pattern.startswith("./") else pattern
        candidates[pattern] = []
        last = _last_segment(norm)
        if not is_glob(norm):
            exact.append(pattern)
        elif not is_glob(last) and last != "**":
            by_basename.setdefault(last, []).append(pattern)
        elif literal_prefix(norm):
            by_prefix.append((literal_prefix(norm) + "/", pattern))
        else:
            everything.append(pattern)
    if by_basename or by_prefix:
        for path in paths:
            hits = by_basename.get(path[path.rfind("/") + 1 :])
            if hits:
                for pattern in hits:
                    candidates[pattern].append(path)
            for prefix, pattern in by_prefix:
                if path.startswith(prefix):
                    candidates[pattern].append(path)
    out: dict[str, list[str]] = {}
    path_set = set(paths) if exact else set()
    for pattern in candidates:
        norm = pattern[2:] if pattern.startswith("./") else pattern
        if pattern in exact:
            out[pattern] = [norm] if norm in path_set else []
            continue
        pool: Sequence[str] = paths if pattern in everything else candidates[pattern]
        out[pattern] = sorted(filter_paths(norm, pool))
    return out


def guidance_files_at(snapshot: Snapshot, globs: Sequence[str]) -> list[str]:
    """The files (and symlinks) of ``snapshot`` that any of ``globs`` matches, sorted; submodules excluded."""
    paths = [p for p, e in snapshot.entries.items() if not e.is_submodule]
    matched: set[str] = set()
    for files in match_globs(globs, paths).values():
        matched.update(files)
    return sorted(matched)
