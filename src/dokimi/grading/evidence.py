"""The evidence of a run cannot be changed by the code under test.

Every container that runs after the agent's with the run directory mounted (grade, oracle, static,
``tests.list``, the perf check) may run the agent's code: a grader that imports or runs the workspace runs it.
So each of them runs through :func:`run_sealed`:

1. **sealed before**: each file of :data:`dokimi.rundir.EVIDENCE` present in the run directory (task.json,
   meta.json, events.jsonl, answer.txt, agent.stdout, what grading wrote so far: workspace.diff,
   tests_list.json, grade.json once read, merge.json, ...) is hashed (sha256) and mounted read-only over the
   writable run directory (:func:`dokimi.sandbox.specs.evidence_mounts`);
2. **checked after**: each sealed file must still hash the same, and no file of that list may have appeared
   that dokimi did not write (a planted merge.json, result.json or grade_run.json, a workspace.diff for a task
   without a rubric). A planted file is removed, so no report, export or regrade reads it. Either is
   :class:`EvidenceChanged`: the cell is a grader failure with that reason.

What a container is meant to write is left out of both (``writes``): grade.json for ``grade``, static.json for
``static``, answer.txt for ``oracle`` (a review task's oracle writes the gold answer), and the logs dokimi
itself writes while it runs (``<kind>.stdout``, ``<kind>.stderr``).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Collection, Mapping
from dataclasses import dataclass
from pathlib import Path

from dokimi import safefs
from dokimi.errors import DokimiError
from dokimi.rundir import EVIDENCE
from dokimi.sandbox.container import (
    DEFAULT_OUTPUT_CAP,
    KILL_GRACE_S,
    ContainerResult,
    ContainerSpec,
    run_container,
)
from dokimi.sandbox.specs import evidence_mounts

__all__ = ["EvidenceChanged", "Seal", "run_sealed", "seal"]

REGULAR = "a regular file"


class EvidenceChanged(DokimiError):
    """A container changed, removed or planted one of dokimi's files in the run directory; ``result`` is how
    the container ended."""

    def __init__(self, message: str, result: ContainerResult) -> None:
        super().__init__(message)
        self.result = result


def _state(run_dir: Path, name: str) -> str | None:
    """What ``name`` is in the run directory: None (absent), ``sha256:<hex>`` of a regular file, or what else
    it is (a link, a directory, unreachable through a link)."""
    path = run_dir / name
    try:
        kind = safefs.kind(path, trusted=run_dir)
        if kind != REGULAR:
            return kind
        return "sha256:" + safefs.digest(path, trusted=run_dir)
    except FileNotFoundError:
        return None
    except safefs.UnsafePathError as exc:
        return f"unreachable ({exc.message})"


@dataclass(frozen=True)
class Seal:
    """The evidence of one run directory as it was before a container ran."""

    run_dir: Path
    states: Mapping[str, str]
    """Evidence path -> its state (:func:`_state`), for each one present."""
    writes: frozenset[str]
    """What the container is meant to write: neither sealed nor checked."""

    @property
    def files(self) -> list[str]:
        """The sealed regular files (what is mounted read-only)."""
        return [name for name, state in self.states.items() if state.startswith("sha256:")]

    def problems(self) -> list[str]:
        """What changed since the seal: a sealed file changed or gone, a file dokimi has not written planted
        (removed here, so nothing reads it)."""
        found: list[str] = []
        for name in EVIDENCE:
            if name in self.writes:
                continue
            before, now = self.states.get(name), _state(self.run_dir, name)
            if before == now:
                continue
            if before is None:
                _remove_planted(self.run_dir, name)
                found.append(f"{name} was planted (removed)")
            elif now is None:
                found.append(f"{name} was removed")
            else:
                found.append(f"{name} was changed")
        return found


def seal(run_dir: Path, *, writes: Collection[str] = ()) -> Seal:
    """Hash the evidence present in ``run_dir``, leaving out ``writes``."""
    skip = frozenset(writes)
    states = {}
    for name in EVIDENCE:
        if name in skip:
            continue
        state = _state(run_dir, name)
        if state is not None:
            states[name] = state
    return Seal(run_dir, states, skip)


def _remove_planted(run_dir: Path, name: str) -> None:
    """Remove a planted evidence path; when a directory on its way is not a directory (a link planted in its
    place), that entry goes."""
    try:
        safefs.remove(run_dir / name, trusted=run_dir)
    except safefs.UnsafePathError:
        first = name.split("/", 1)[0]
        if safefs.kind(run_dir / first, trusted=run_dir) != "a directory":
            safefs.remove(run_dir / first, trusted=run_dir)


def run_sealed(
    spec: ContainerSpec,
    run_dir: Path,
    *,
    what: str,
    writes: Collection[str] = (),
    timeout: float,
    stdout_file: Path | None = None,
    kill_grace_s: float = KILL_GRACE_S,
    max_output: int = DEFAULT_OUTPUT_CAP,
) -> ContainerResult:
    """Run a container that mounts ``run_dir`` (as /eval/run) with dokimi's evidence sealed (module
    docstring): read-only mounts for the files present, and the check afterwards. ``what`` names the container
    in the error (``grade``, ``tests.list``, ``perf``); the other options are
    :func:`~dokimi.sandbox.container.run_container`'s. Raises :class:`EvidenceChanged` when the check fails,
    whatever the container's exit."""
    sealed = seal(run_dir, writes=writes)
    spec = dataclasses.replace(spec, mounts=[*spec.mounts, *evidence_mounts(run_dir, sealed.files)])
    result = run_container(
        spec, timeout=timeout, stdout_file=stdout_file, kill_grace_s=kill_grace_s, max_output=max_output
    )
    problems = sealed.problems()
    if problems:
        why = f"{what} changed dokimi's files in the run directory: {'; '.join(problems)}"
        raise EvidenceChanged(why, result)
    return result
