"""Dry runs (``repo run --dry-run``): the real harness against the scripted model server, at zero cost.

The model is replaced, nothing else: the agent's container, its mounts and its ``--network none`` are those
of a paid run. :mod:`dokimi.runner.dryrun_agent` (copied into the support directory with ``mockmodel.py``)
starts the server on the container's own loopback and the harness with the profile's ``endpoint_env``
pointing at it.

Which script a cell plays, per (task, arm), first match wins:

1. ``--dry-run-script ARM=FILE``: that file for every task of that arm;
2. ``--dry-run-script FILE``: that file for every task of every other arm;
3. otherwise a script **derived from the task's oracle** (:func:`oracle_script`): before any cell runs, the
   repository's own ``oracle`` entry point runs once per (task, arm) in a grade container on a scratch run
   directory whose workspace is prepared exactly like a cell's. What it changed (``git add -A`` then
   ``git diff --cached --binary <start_sha>``, so new, deleted and binary files are included) and the
   answer.txt it wrote are the script: the agent applies exactly that diff with Bash tool calls (the diff
   travels base64-encoded inside the commands, in chunks, into a file under ``$HOME``, then ``git apply``),
   and its final message is the oracle's answer (for a review task, the gold answer), else a fixed sentence.

A harness whose model calls no tools (Aider: its profile's ``script_tools.text_edits``) gets the same change
as text edits instead (:func:`search_replace_script`): every changed file as one SEARCH/REPLACE block holding
its whole content before and after, after the answer. The reply is played twice: Aider first adds the files
the reply names to the chat and asks again, then applies the blocks of the second.

So a dry run passes the gate exactly where ``tasks check`` says the oracle does, and an explicit script per
arm makes arms behave differently (the e2e test gives guidance:none a script that changes nothing).
"""

from __future__ import annotations

import base64
import dataclasses
import json
import os
import re
import shutil
from collections.abc import Callable, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import TYPE_CHECKING, Any

from dokimi.batch import CellKey, slug
from dokimi.errors import UsageError
from dokimi.grading.entrypoints import run_entry_point
from dokimi.repo.arms import ARM_NONE, Arm
from dokimi.rundir import TASK_JSON, RunDir
from dokimi.runner.cell import prepare, reset_run_dir
from dokimi.sandbox.container import container_name
from dokimi.schemas._base import write_document, write_text_atomic
from dokimi.schemas.meta import Meta
from dokimi.source.git import run_git
from dokimi.support.mockmodel import ScriptError, load_script, parse_script

if TYPE_CHECKING:
    from dokimi.runner.cell import CellContext
    from dokimi.schemas.profile import ScriptTool

__all__ = [
    "CHUNK_CHARS",
    "FIXED_ANSWER",
    "FileChange",
    "NO_CHANGE_ANSWER",
    "apply_patch_turns",
    "check_script_file",
    "oracle_script",
    "parse_script_options",
    "script_for",
    "search_replace_blocks",
    "search_replace_script",
    "write_script",
]

CHUNK_CHARS = 48 * 1024
"""Base64 characters per Bash command: well under Linux's 128 KiB limit on one argument string."""
PATCH_FILE = '"$HOME/.dokimi-dry-run.patch"'
FIXED_ANSWER = "I applied the fix."
DERIVE_TIMEOUT_S = 3600.0
NO_CHANGE_ANSWER = "I made no change."


def apply_patch_turns(diff: bytes, command_tool: ScriptTool | None = None) -> list[dict[str, Any]]:
    """Shell tool calls that write ``diff`` to a file under $HOME (base64, in chunks) and ``git apply`` it.

    ``command_tool`` is the harness's shell tool (its profile's ``script_tools.command``); Claude Code's
    ``Bash`` by default."""
    if not diff:
        return []
    name, arg = (command_tool.name, command_tool.arg) if command_tool is not None else ("Bash", "command")
    encoded = base64.b64encode(diff).decode("ascii")
    chunks = [encoded[i : i + CHUNK_CHARS] for i in range(0, len(encoded), CHUNK_CHARS)]
    turns: list[dict[str, Any]] = []
    for index, chunk in enumerate(chunks):
        redirect = ">" if index == 0 else ">>"
        command = f"printf '%s' '{chunk}' | base64 -d {redirect} {PATCH_FILE}"
        if index == len(chunks) - 1:
            command += f" && git apply --whitespace=nowarn {PATCH_FILE} && unlink {PATCH_FILE}"
        turns.append({"tool_use": {"name": name, "input": {arg: command}}})
    return turns


def oracle_script(diff: bytes, answer: str, command_tool: ScriptTool | None = None) -> list[dict[str, Any]]:
    """The script that makes the agent do what the oracle did: apply ``diff``, then answer ``answer``."""
    final = answer.strip() or (FIXED_ANSWER if diff else NO_CHANGE_ANSWER)
    return [*apply_patch_turns(diff, command_tool), {"final": final}]


@dataclasses.dataclass(frozen=True)
class FileChange:
    """One file the oracle changed: its content before (None: new) and after (None: deleted)."""

    path: str
    old: bytes | None
    new: bytes | None


AIDER_MARKER_RE = re.compile(rb"^(<{5,9} SEARCH|={5,9}|>{5,9} REPLACE)\s*$", re.MULTILINE)
"""A line Aider's SEARCH/REPLACE parser reads as a marker, wherever it stands."""


def _edit_text(change: FileChange, which: str) -> str:
    data = getattr(change, which) or b""
    why = None
    if b"\0" in data:
        why = "it is binary"
    elif AIDER_MARKER_RE.search(data):
        why = "it has a line Aider reads as a SEARCH/REPLACE marker"
    else:
        try:
            text = data.decode("utf-8")
        except UnicodeDecodeError:
            why = "it is not UTF-8 text"
    if why is not None:
        raise UsageError(
            f"dry run: the oracle's change to {change.path} cannot be written as an Aider edit: {why}",
            hint="give this arm a script with --dry-run-script",
        )
    text = text.replace("\r\n", "\n")
    return text if not text or text.endswith("\n") else text + "\n"


def search_replace_blocks(changes: Sequence[FileChange]) -> str:
    """Aider's ``diff`` edit format for ``changes``: per file its path, then one block replacing its whole
    content (an empty SEARCH creates a new file). Aider deletes no file and edits text only: a deleted,
    binary or non-UTF-8 file, or one holding a line Aider reads as a marker, is refused (UsageError)."""
    blocks = []
    for change in changes:
        if change.new is None:
            raise UsageError(
                f"dry run: the oracle deletes {change.path}, and Aider cannot delete a file",
                hint="give this arm a script with --dry-run-script",
            )
        if "\n" in change.path or change.path != change.path.strip():
            raise UsageError(f"dry run: Aider cannot name the file {change.path!r} in an edit")
        old, new = _edit_text(change, "old"), _edit_text(change, "new")
        blocks.append(f"{change.path}\n```\n<<<<<<< SEARCH\n{old}=======\n{new}>>>>>>> REPLACE\n```\n")
    return "\n".join(blocks)


def search_replace_script(changes: Sequence[FileChange], answer: str) -> list[dict[str, Any]]:
    """The script that makes Aider do what the oracle did: the answer, then every change as a SEARCH/REPLACE
    block, played twice (Aider adds the files a reply names to the chat and asks again before it applies
    anything; when the reply names no file it applies the first and never asks for the second)."""
    final = answer.strip() or (FIXED_ANSWER if changes else NO_CHANGE_ANSWER)
    reply = final + "\n" + ("\n" + search_replace_blocks(changes) if changes else "")
    return [{"text": reply}, {"final": reply}]


def write_script(path: Path, turns: Sequence[Mapping[str, Any]]) -> Path:
    """Write a script (a JSON list of turns) after checking it plays."""
    try:
        parse_script(list(turns), source=str(path))
    except ScriptError as exc:  # a bug: the scripts dokimi writes always play
        raise AssertionError(str(exc)) from exc
    write_text_atomic(path, json.dumps(list(turns), indent=2, sort_keys=True) + "\n")
    return path


def check_script_file(path: Path) -> Path:
    """A --dry-run-script file must exist and play (the mock model's own parser); UsageError otherwise."""
    if path.suffix in (".yaml", ".yml"):
        raise UsageError(
            f"--dry-run-script {path}: the server inside the container reads JSON only",
            hint="write the script as a JSON list of turns (docs/mock-model.md)",
        )
    try:
        load_script(path)
    except ScriptError as exc:
        raise UsageError(
            f"--dry-run-script: {exc}", hint="see docs/mock-model.md for the script format"
        ) from None
    return path.resolve()


def parse_script_options(values: Sequence[str], arms: Sequence[str]) -> dict[str | None, Path]:
    """``--dry-run-script`` values: ``ARM=FILE`` (ARM one of the run's arms) or ``FILE`` (key None: every arm
    without its own). A value whose part before the first ``=`` is not an arm of the run is a file name."""
    chosen: dict[str | None, Path] = {}
    for value in values:
        arm: str | None = None
        name = value
        head, sep, tail = value.partition("=")
        if sep and head in arms:
            arm, name = head, tail
        if arm in chosen:
            raise UsageError(f"--dry-run-script given twice for {arm or 'every arm'}")
        chosen[arm] = check_script_file(Path(name))
    return chosen


def script_for(arm: str, explicit: Mapping[str | None, Path]) -> Path | None:
    """The explicit script of ``arm`` (its own, else the one for every arm); None: derive from the oracle."""
    return explicit.get(arm) or explicit.get(None)


# --- deriving scripts from the oracle (needs docker) --------------------------------------------------------

ORACLE_MODEL = "dry-run-oracle"
"""The model named in the meta.json of an oracle derivation's scratch run directory."""


def oracle_diff(workspace: Path, start_sha: str) -> bytes:
    """What changed in ``workspace`` since ``start_sha``: every file, new and deleted ones included, binary
    safe (``git add -A`` into the index, then ``git diff --cached --binary``)."""
    base = [
        "-c",
        "safe.directory=*",
        "-c",
        "core.autocrlf=false",
        "--git-dir",
        str(workspace / ".git"),
        "--work-tree",
        str(workspace),
    ]
    run_git([*base, "add", "-A", "-f"], cwd=workspace, what="git add (dry-run oracle diff)")
    return run_git(
        [*base, "diff", "--cached", "--binary", "--no-ext-diff", "--no-textconv", "--no-color", start_sha],
        cwd=workspace,
        what="git diff (dry-run oracle diff)",
    )


def oracle_changes(workspace: Path, start_sha: str) -> list[FileChange]:
    """Every file the index (after :func:`oracle_diff`'s ``git add -A``) changes since ``start_sha``, with its
    content before and after: one ``git diff --name-status`` and one ``git cat-file --batch`` for them all."""
    base = ["-c", "safe.directory=*", "--git-dir", str(workspace / ".git"), "--work-tree", str(workspace)]
    listed = run_git(
        [*base, "diff", "--cached", "--name-status", "--no-renames", "-z", start_sha],
        cwd=workspace,
        what="git diff (dry-run oracle changes)",
    ).split(b"\0")
    entries: list[tuple[str, str]] = []
    for code, raw in zip(listed[0:-1:2], listed[1::2], strict=False):
        try:
            path = raw.decode("utf-8")
        except UnicodeDecodeError:
            path = ""
        if not path or "\n" in path:
            raise UsageError(f"dry run: Aider cannot name the file {raw!r} in an edit (not a UTF-8 line)")
        entries.append((code.decode("ascii", "replace")[:1], path))
    wanted: list[str] = []
    for status, path in entries:
        wanted += [f"{start_sha}:{path}" if status != "A" else "", f":{path}" if status != "D" else ""]
    asked = [w for w in wanted if w]
    batch = run_git(
        [*base, "cat-file", "--batch"],
        cwd=workspace,
        input="".join(f"{w}\n" for w in asked).encode("utf-8"),
        what="git cat-file (dry-run oracle changes)",
    )
    contents: dict[str, bytes] = {}
    at = 0
    for name in asked:
        end = batch.index(b"\n", at)
        header = batch[at:end].split()
        if header[-1] == b"missing":
            raise UsageError(f"dry run: git has no {name} for the oracle's change")
        size = int(header[2])
        contents[name] = batch[end + 1 : end + 1 + size]
        at = end + 1 + size + 1
    return [
        FileChange(path, contents.get(old) if old else None, contents.get(new) if new else None)
        for (_, path), old, new in zip(entries, wanted[0::2], wanted[1::2], strict=True)
    ]


def derive_oracle_script(ctx: CellContext, task_id: str, arm: str, dest: Path) -> Path:
    """Run the task's oracle on a scratch run directory prepared like a cell of ``arm`` and write the script
    that makes the agent do the same (see the module docstring). Reused when ``dest`` exists already: the
    batch is pinned to its eval tree, so the oracle is the same."""
    if dest.is_file():
        return dest
    assert ctx.manifest.entry_points is not None
    task = ctx.task(task_id)
    scratch = dest.with_suffix(".run")
    reset_run_dir(scratch)
    try:
        # guidance:generated's files are per model, and the oracle has none: its diff is taken from the
        # start commit, so the base without guidance gives the same script.
        parsed = Arm(arm)
        prep_arm = ARM_NONE if parsed.kind == "generated" else parsed
        prepared = prepare(ctx, CellKey(task_id, prep_arm, ORACLE_MODEL, None, 0), scratch)
        write_text_atomic(RunDir(scratch).task_json, (ctx.task_dir(task_id) / TASK_JSON).read_text("utf-8"))
        meta = {
            "schema": "repo_meta.v1",
            "task": task_id,
            "batch": ctx.batch,
            "arm": arm,
            "harness": ctx.profile.name,
            "model": ORACLE_MODEL,
            "mode": task.mode,
            "rep": 0,
            "patches": prepared.meta_fields()["patches"],
            **{k: v for k, v in prepared.meta_fields().items() if k not in ("arm", "patches")},
        }
        write_document(RunDir(scratch).meta_json, Meta.model_validate(meta))
        environment = dataclasses.replace(ctx.grading, grade_timeout_s=DERIVE_TIMEOUT_S)
        entry = run_entry_point(
            environment,
            scratch,
            task,
            "oracle",
            name=container_name(ctx.batch, f"dry-run-{task_id}-{arm}", "oracle"),
        )
        failure = entry.failure(DERIVE_TIMEOUT_S)
        if failure:
            raise UsageError(
                f"dry run: the oracle of task {task_id} failed, so no script can be derived: {failure}",
                hint="`dokimi repo tasks check` shows why; or give this arm a script with --dry-run-script",
            )
        diff = oracle_diff(RunDir(scratch).workspace, prepared.start_sha)
        answer_file = RunDir(scratch).answer_txt
        answer = answer_file.read_text("utf-8", errors="replace") if answer_file.is_file() else ""
        if ctx.profile.script_tools.text_edits == "search-replace":
            changes = oracle_changes(RunDir(scratch).workspace, prepared.start_sha)
            return write_script(dest, search_replace_script(changes, answer))
        return write_script(dest, oracle_script(diff, answer, ctx.profile.script_tools.command))
    finally:
        shutil.rmtree(scratch, ignore_errors=True)


def dry_run_scripts(
    ctx: CellContext,
    cells: Sequence[CellKey],
    explicit: Mapping[str | None, Path],
    directory: Path,
    note: Callable[[str], None],
    *,
    jobs: int = 1,
) -> dict[tuple[str, str], Path]:
    """The script of every (task, arm) among ``cells``: the explicit one, else one derived from the oracle
    (``<directory>/<task>/<arm>.json``), derived on ``jobs`` threads."""

    chosen: dict[tuple[str, str], Path] = {}
    derive: list[tuple[str, str]] = []
    for key in cells:
        pair = (key.task, key.arm)
        if pair in chosen or pair in derive:
            continue
        given = script_for(key.arm, explicit)
        if given is not None:
            chosen[pair] = given
        else:
            derive.append(pair)
    if derive:
        fresh = [p for p in derive if not (directory / slug(p[0]) / f"{slug(p[1])}.json").is_file()]
        if fresh:
            note(f"dry run: deriving {len(fresh)} script(s) from the oracle")
        with ThreadPoolExecutor(max_workers=max(1, jobs), thread_name_prefix="dokimi-oracle") as pool:
            paths = pool.map(
                lambda pair: derive_oracle_script(
                    ctx, pair[0], pair[1], directory / slug(pair[0]) / f"{slug(pair[1])}.json"
                ),
                derive,
            )
            for pair, path in zip(derive, paths, strict=True):
                chosen[pair] = path
    for path in set(chosen.values()):
        os.chmod(path, 0o644)
    return chosen
