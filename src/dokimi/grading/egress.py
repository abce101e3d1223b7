"""The egress of an entry point: a task's ``egress`` hosts, reached from its grade, oracle, static, tests.list
and perf containers through the sealed run's egress proxy, and nothing else.

The contract says a task's hosts are reached by "this task's agent and entry points" through the proxy. In a
sealed run (and in ``tasks check``) the environment holds the batch network and its proxy
(:attr:`~dokimi.grading.environment.GradeEnvironment.egress`); :func:`entry_egress` puts an entry point of
a task with egress on that network with a proxy cell of its own, limited to the task's hosts. The proxy
logs each attempt to a file outside the run directory while the container runs (the run directory is
writable there); once the container has exited, dokimi appends the lines to the run directory's
``egress.jsonl`` with ``by`` naming the entry point, so a grader can neither hide nor forge an attempt
(egress.jsonl is evidence: :mod:`dokimi.grading.evidence`).
"""

from __future__ import annotations

import dataclasses
import json
import os
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING

from dokimi import safefs
from dokimi.rundir import RunDir

if TYPE_CHECKING:
    from dokimi.grading.environment import GradeEnvironment
    from dokimi.sandbox.specs import ContainerSettings
    from dokimi.schemas.task import Task

__all__ = ["append_attempts", "entry_egress"]

#: The most of a staged log read back into the run directory (one line per attempt).
STAGED_LIMIT = 64 * 1024 * 1024


@contextmanager
def entry_egress(
    environment: GradeEnvironment, task: Task | None, run_dir: Path, *, by: str, name: str
) -> Iterator[tuple[ContainerSettings, dict[str, str]]]:
    """The container settings and extra variables of one entry point's container: as ever, or, for a task
    with egress in a sealed run, the batch network and the proxy variables of a cell limited to the task's
    hosts (logged to ``run_dir``/egress.jsonl with ``by`` once the container has exited)."""
    settings = environment.containers_for(task)
    route = environment.egress
    if task is None or not task.egress or route is None:
        yield settings, {}
        return
    fd, staged = tempfile.mkstemp(prefix="dokimi-egress-", suffix=".jsonl")
    os.close(fd)
    try:
        opening = route.open_egress(name, task.egress, Path(staged))
        try:
            yield dataclasses.replace(settings, network=route.network), dict(opening.env)
        finally:
            opening.close()
            append_attempts(run_dir, Path(staged), by)
    finally:
        os.unlink(staged)


def append_attempts(run_dir: Path, staged: Path, by: str) -> int:
    """The proxy's lines of one entry point (dokimi's own file; at most :data:`STAGED_LIMIT` bytes of them),
    each with ``by``, appended to the run directory's egress.jsonl; how many."""
    lines: list[str] = []
    size = 0
    with staged.open(encoding="utf-8", errors="replace") as f:
        for line in f:
            size += len(line)
            if size > STAGED_LIMIT:
                break
            if line.strip():
                lines.append(json.dumps({**json.loads(line), "by": by}, sort_keys=True) + "\n")
    if lines:
        safefs.append_text(RunDir(run_dir).egress_jsonl, "".join(lines), trusted=run_dir)
    return len(lines)
