"""The grade environment: everything grading a run directory needs that does not come from the run
directory, fixed once per batch (or per tasks check, or per regrade) and passed whole.

An entry point takes ``(environment, run_dir, task)``: the image and its ``image`` block, the exported
eval_dir ({eval_dir}), the source's git directory ({source_dir}), the entry-point commands, the network, the
caches, the batch label, the timeouts and the kill grace. Nothing here changes while a batch runs, so the
same object is shared by every cell (and can be sent to another process).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from dokimi.sandbox.container import KILL_GRACE_S
from dokimi.sandbox.specs import CacheMount, ContainerSettings, docker_network

if TYPE_CHECKING:
    from dokimi.checks.merge import JudgeOptions
    from dokimi.gateway.sealed import EgressRoute
    from dokimi.schemas.grading import TaskReferenceDoc
    from dokimi.schemas.manifest import EntryPoints, Image, RepoManifest, TestsBlock
    from dokimi.schemas.review_rules import RepoReviewRules
    from dokimi.schemas.task import Task

__all__ = ["GRADE_TIMEOUT_S", "PERF_TIMEOUT_S", "GradeEnvironment", "JudgeSettings"]

GRADE_TIMEOUT_S = 3600.0
"""Default timeout of one grade, oracle or static container."""
PERF_TIMEOUT_S = 3600.0
"""Default timeout of one perf invocation."""


@dataclass(frozen=True)
class JudgeSettings:
    """``repo run --judge-model``: the primary judge (its verdict is the only one that counts)."""

    model: str
    options: JudgeOptions


@dataclass(frozen=True)
class GradeEnvironment:
    """What every grade container of a batch shares (see the module docstring)."""

    containers: ContainerSettings
    """Image, image block, network (image.network's), caches and batch label."""
    eval_content: Path
    """The exported eval_dir, mounted read-only at /eval/content."""
    source_dir: Path | None
    """The source's git directory, mounted read-only at /eval/source when an entry point names it."""
    entry_points: EntryPoints
    tests: TestsBlock | None = None
    """The manifest's ``tests`` block (test integrity, mergeability)."""
    judge: JudgeSettings | None = None
    """The rubric judge for tasks with a rubric.json (mergeability); None: not run."""
    second_judge: JudgeSettings | None = None
    """A second judge of another model family: its verdicts are stored for the judges' agreement only and
    never change a run's score."""
    review_rules: RepoReviewRules | None = None
    """<eval_dir>/review_rules.json, whose cited and path-matching rules the judge gets."""
    references: Mapping[str, TaskReferenceDoc] = dataclasses.field(default_factory=dict)
    """Per task id with a rubric: what its runs are compared with (the oracle run's ``tests_skipped``, the
    base workspace's test list), measured once per batch before the cells (test integrity). A task missing
    here has those rules not measured."""
    mergeable_without_judge: bool = False
    """``tasks check``: without a judge, a run that passes every deterministic check (pass and the other gate
    entries, scope, test integrity) is mergeable; the judge's part is ``repo rubric check``'s. A batch keeps
    it False: there, mergeable is never true without the judge."""
    egress_network: str | None = None
    """``--agent-network``: the network of a task with egress in a run that is not sealed."""
    egress: EgressRoute | None = None
    """A sealed run's (or tasks check's) batch network and egress proxy: an entry point of a task with
    ``egress`` joins that network and reaches the task's hosts, and only them, through the proxy
    (:mod:`dokimi.grading.egress`). Belongs to one process: a cluster node puts its own in."""
    grade_timeout_s: float = GRADE_TIMEOUT_S
    perf_timeout_s: float = PERF_TIMEOUT_S
    kill_grace_s: float | None = None
    """Grace between SIGTERM and the kill of a container at its timeout (default: the container module's)."""
    probe_dir: Path | None = None
    """``tasks check``'s grader isolation probe (dokimi.grading.probe): the directory its reports go to,
    mounted read-write at /eval/probe in the grade container and a built-in grader's test container; None in
    every other grading."""

    @property
    def kill_grace(self) -> float:
        """``kill_grace_s``, or the container module's default when it is None."""
        return KILL_GRACE_S if self.kill_grace_s is None else self.kill_grace_s

    @classmethod
    def for_manifest(
        cls,
        manifest: RepoManifest,
        *,
        image: str,
        eval_content: Path,
        source_dir: Path | None,
        caches: tuple[CacheMount, ...] = (),
        batch: str | None = None,
    ) -> GradeEnvironment:
        """The environment of a batch of ``manifest``: image.network's network, the manifest's entry points
        and tests block; timeouts at their defaults (``dataclasses.replace`` changes them)."""
        assert manifest.entry_points is not None
        network = docker_network(manifest.image.network if manifest.image else "none")
        return cls(
            containers=ContainerSettings(image, manifest.image, network, tuple(caches), batch),
            eval_content=eval_content,
            source_dir=source_dir,
            entry_points=manifest.entry_points,
            tests=manifest.tests,
        )

    @property
    def image(self) -> str:
        return self.containers.image

    @property
    def image_config(self) -> Image | None:
        return self.containers.image_config

    @property
    def batch(self) -> str | None:
        return self.containers.batch

    @property
    def network(self) -> str:
        return self.containers.network

    def network_for(self, task: Task | None) -> str:
        """Entry points run with image.network; a task with egress gets --agent-network in a run that is not
        sealed (a sealed one puts them on its network: :mod:`dokimi.grading.egress`)."""
        if task is not None and task.egress and self.egress_network:
            return self.egress_network
        return self.containers.network

    def containers_for(self, task: Task | None) -> ContainerSettings:
        """The container settings of one task's grade containers (its network)."""
        network = self.network_for(task)
        if network == self.containers.network:
            return self.containers
        return dataclasses.replace(self.containers, network=network)

    def with_network(self, network: str) -> GradeEnvironment:
        """The same environment on another network (``tasks check --warm``)."""
        return dataclasses.replace(self, containers=dataclasses.replace(self.containers, network=network))
