"""The grader isolation probe (``repo tasks check``): does the repository's grader expose the reference to the
code under test?

A probe workspace is the task's prepared workspace with a few lines appended to every Python module that is
not a test file (test files are what a grader puts back). Whenever the grader's tests import one of them, the
probe runs once in that process, at import and again at exit:

- it tries to read every file under /eval/content (every task's oracle patch and hidden tests) and
  /eval/source (the upstream history), one byte each, and to list both;
- it tries to open each of dokimi's files in /eval/run for writing (nothing is written), and to make a new
  file in /eval/run and in /eval/run/workspace: dokimi looks for those in the run directory and the real
  workspace afterwards (and removes them), so a copy of the workspace the tests ran in does not count;
- it writes what it found to /eval/probe, a directory dokimi mounts read-write in the grade container and in a
  built-in grader's test container for this run only (dokimi's isolation helper lets a confined process
  write it too): so a probe that ran and was kept from everything still reports that it ran.

:func:`grader_isolation_probe` grades the probe workspace once (the verdict is not looked at) and reads the
reports back as untrusted input: the reference is exposed when any file under /eval/content or /eval/source
could be read. A probe that never reported (no Python module in the workspace, or a grader that imports none)
measured nothing. A grader that isolates its tests without dokimi's helper, so that /eval/probe is out of
their reach too, also looks like one that never imported the probe.
"""

from __future__ import annotations

import dataclasses
import json
import os
import secrets
import shutil
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

from dokimi import safefs
from dokimi.constants import CONTAINER_EVAL_DIR, CONTAINER_PROBE, CONTAINER_RUN_DIR, CONTAINER_SOURCE_DIR
from dokimi.errors import DokimiError
from dokimi.grading.entrypoints import grade_run
from dokimi.rundir import EVIDENCE, RunDir
from dokimi.sandbox.container import give_to_container_user
from dokimi.support.builtin_grade import is_test_path

if TYPE_CHECKING:
    from dokimi.grading.environment import GradeEnvironment
    from dokimi.schemas.task import Task

__all__ = ["GraderProbe", "grader_isolation_probe", "inject_probe", "probe_code", "read_probe_reports"]

MAX_REPORTS = 1000
MAX_REPORT_BYTES = 1024 * 1024
MAX_EXAMPLES = 10
PLANTED_PREFIX = ".dokimi-grader-probe-"
"""The file the probe tries to make in /eval/run and the real workspace; dokimi looks for it afterwards."""
MAX_MODULES = 20000
"""Python modules the probe is appended to, at most (a generated tree is not all worth probing)."""

PROBE = """

def _dokimi_grader_probe():  # appended by dokimi's grader isolation probe (repo tasks check)
    import atexit, builtins, json, os
    nonce = {nonce!r}
    if getattr(builtins, "_dokimi_grader_probe_" + nonce, False):
        return
    setattr(builtins, "_dokimi_grader_probe_" + nonce, True)

    def opens(path, mode):
        try:
            with open(path, mode) as handle:
                if "r" in mode:
                    handle.read(1)
            return True
        except Exception:
            return False

    def readable(root):
        try:
            listable = bool(os.listdir(root)) or True
        except Exception:
            listable = False
        found = {{"listable": listable, "read": 0, "denied": 0, "examples": []}}
        for directory, _dirs, files in os.walk(root):
            for name in files:
                path = os.path.join(directory, name)
                if opens(path, "rb"):
                    found["read"] += 1
                    if len(found["examples"]) < {examples}:
                        found["examples"].append(path)
                else:
                    found["denied"] += 1
        return found

    def plant(directory):
        opens(os.path.join(directory, {planted!r} + nonce), "x")  # dokimi looks for it afterwards

    def probe(phase):
        run = {run!r}
        found = {{
            "nonce": nonce, "phase": phase, "pid": os.getpid(),
            "readable": {{root: readable(root) for root in ({content!r}, {source!r})}},
            "writable": [n for n in {evidence!r} if os.path.lexists(os.path.join(run, n))
                         and opens(os.path.join(run, n), "ab")],
        }}
        for directory in (run, {workspace!r}):
            plant(directory)
        name = "%d-%s-%s.json" % (os.getpid(), phase, os.urandom(4).hex())
        try:
            with open(os.path.join({channel!r}, name), "x") as out:
                json.dump(found, out)
        except Exception:
            pass

    probe("import")
    atexit.register(probe, "exit")


_dokimi_grader_probe()
"""


def probe_code(nonce: str) -> str:
    """The lines appended to each module (module docstring), with this probe's ``nonce``."""
    return PROBE.format(
        nonce=nonce,
        examples=MAX_EXAMPLES,
        content=str(CONTAINER_EVAL_DIR),
        source=str(CONTAINER_SOURCE_DIR),
        evidence=tuple(EVIDENCE),
        run=str(CONTAINER_RUN_DIR),
        workspace=str(RunDir(CONTAINER_RUN_DIR).workspace),
        channel=str(CONTAINER_PROBE),
        planted=PLANTED_PREFIX,
    )


def inject_probe(workspace: Path, nonce: str) -> int:
    """Append the probe to every Python module of ``workspace`` that is not a test file (none under .git);
    the number of modules it went into. Appended, not prepended: a module's ``from __future__`` imports and
    docstring stay first."""
    code = probe_code(nonce).encode()
    count = 0
    for directory, dirnames, filenames in os.walk(workspace):
        dirnames[:] = sorted(
            d for d in dirnames if d != ".git" and not os.path.islink(os.path.join(directory, d))
        )
        for name in sorted(filenames):
            path = Path(directory) / name
            rel = path.relative_to(workspace).as_posix()
            if not name.endswith(".py") or is_test_path(rel) or path.is_symlink() or not path.is_file():
                continue
            if count >= MAX_MODULES:
                return count
            with open(path, "ab") as handle:
                handle.write(code)
            count += 1
    return count


@dataclass
class GraderProbe:
    """What the probe found in one grading of the probe workspace."""

    modules: int = 0
    """Python modules the probe went into."""
    reports: int = 0
    """Reports it wrote (one per process and phase)."""
    readable: dict[str, int] = field(default_factory=dict)
    """/eval/content, /eval/source -> files the code under test could read there (any process, any phase)."""
    listable: list[str] = field(default_factory=list)
    """Of those two, the ones it could list."""
    examples: list[str] = field(default_factory=list)
    """Some of the files it read."""
    writable: list[str] = field(default_factory=list)
    """dokimi's files in the run directory it could open for writing."""
    planted: list[str] = field(default_factory=list)
    """Directories it made a file in: the run directory, the real workspace (found there by dokimi)."""
    error: str | None = None
    """Why the probe could not run to its end (the workspace could not be prepared, docker refused)."""

    @property
    def ran(self) -> bool:
        return self.reports > 0

    @property
    def exposed(self) -> bool | None:
        """Whether the code under test could read the reference; None when the probe never ran."""
        if not self.ran:
            return None
        return any(self.readable.values()) or bool(self.listable)


ROOTS = (str(CONTAINER_EVAL_DIR), str(CONTAINER_SOURCE_DIR))


def read_probe_reports(channel: Path, nonce: str) -> GraderProbe:
    """The reports under ``channel`` (the probe's /eval/probe on the host), read as untrusted input: only
    regular files carrying ``nonce``, each at most 1 MiB, at most 1000 of them, and of each only the values
    the probe can report."""
    found = GraderProbe()
    names = sorted(os.listdir(channel))[:MAX_REPORTS] if channel.is_dir() else []
    for name in names:
        try:
            data = json.loads(safefs.read_bytes(channel / name, trusted=channel, limit=MAX_REPORT_BYTES))
        except (DokimiError, OSError, ValueError, RecursionError):
            continue
        if isinstance(data, dict) and data.get("nonce") == nonce:
            found.reports += 1
            _add_report(found, data)
    return found


def _add_report(found: GraderProbe, data: dict[str, object]) -> None:
    readable = data.get("readable")
    for root in ROOTS:
        seen = readable.get(root) if isinstance(readable, dict) else None
        if not isinstance(seen, dict):
            continue
        count = seen.get("read")
        if isinstance(count, int) and not isinstance(count, bool) and count > 0:
            found.readable[root] = max(found.readable.get(root, 0), count)
        if seen.get("listable") is True and root not in found.listable:
            found.listable.append(root)
        examples = seen.get("examples")
        for example in examples if isinstance(examples, list) else []:
            if (
                isinstance(example, str)
                and example not in found.examples
                and len(found.examples) < MAX_EXAMPLES
            ):
                found.examples.append(example)
    values = data.get("writable")
    for value in values if isinstance(values, list) else []:
        if value in EVIDENCE and value not in found.writable:
            found.writable.append(value)


def grader_isolation_probe(
    environment: GradeEnvironment, run_dir: Path, task: Task, *, channel: Path, name: str
) -> GraderProbe:
    """Grade ``run_dir`` (a prepared workspace with its inputs, not graded yet) with the probe in its
    workspace and /eval/probe mounted from ``channel`` (made fresh here); what the probe reported."""
    nonce = secrets.token_hex(8)
    if channel.exists():
        shutil.rmtree(channel)
    channel.mkdir(parents=True)
    give_to_container_user(channel)  # the code under test writes here; nothing of it is trusted
    modules = inject_probe(RunDir(run_dir).workspace, nonce)
    probing = dataclasses.replace(environment, probe_dir=channel)
    error = None
    try:
        grade_run(probing, run_dir, task, name=name)
    except DokimiError as exc:
        error = exc.message
    found = read_probe_reports(channel, nonce)
    found.modules, found.error = modules, error
    found.planted = planted_files(run_dir, nonce)
    return found


def planted_files(run_dir: Path, nonce: str) -> list[str]:
    """Where the probe made its file: the run directory, the real workspace (a copy of the workspace the
    grader ran the tests in does not count), as the container saw them; each file found is removed."""
    found = []
    for directory, shown in (
        (run_dir, CONTAINER_RUN_DIR),
        (RunDir(run_dir).workspace, RunDir(CONTAINER_RUN_DIR).workspace),
    ):
        path = directory / f"{PLANTED_PREFIX}{nonce}"
        if safefs.kind(path, trusted=run_dir) is not None:
            safefs.remove(path, trusted=run_dir)
            found.append(str(shown))
    return found
