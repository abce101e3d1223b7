"""What each guidance arm of a batch really put in front of the agent, read from the cells' meta.json.

An arm's name says what was meant; meta.json's ``guidance_files`` (every guidance file in the start commit,
with its blob SHA) says what happened. guidance:raw on bases that predate the repository's AGENTS.md has no
guidance at all, the same as guidance:none: :func:`arm_guidance` makes that visible per arm as the number of
tasks whose workspace had any guidance file, and the distinct files seen. guidance:generated also reports its
generator's cost (``_eval/generated/*/*/generated.json``), which is not part of any cell's cost.

Pure: it reads the batch directory only.
"""

from __future__ import annotations

from collections import defaultdict
from pathlib import Path
from typing import TYPE_CHECKING

from dokimi.errors import DokimiError
from dokimi.repo.workspace import skill_directory
from dokimi.schemas._base import read_document
from dokimi.schemas.generated import Generated
from dokimi.schemas.report import ArmGuidance, ReportWarning, SeenGuidanceFile

if TYPE_CHECKING:
    from dokimi.batch import Batch

__all__ = ["GENERATED_GLOB", "arm_guidance", "generation_records", "warn_same_guidance"]

GENERATED_GLOB = "_eval/generated/*/*/generated.json"
"""Where guidance:generated keeps one record per (task, model) under a batch."""


def generation_records(root: Path) -> list[Generated]:
    """Every readable generated.json of the batch at ``root``, sorted by (task, model)."""
    records: list[Generated] = []
    for path in sorted(root.glob(GENERATED_GLOB)):
        try:
            records.append(read_document(path, Generated))
        except DokimiError:
            continue
    return sorted(records, key=lambda r: (r.task, r.model))


def arm_guidance(batch: Batch) -> list[ArmGuidance]:
    """Per arm: tasks with finished cells, how many had any guidance file at the agent's start (in any of
    their cells), cells without a record, the distinct (path, blob SHA) seen, the skills among them (counted
    apart), and for guidance:generated the generator's pairs and cost."""
    tasks: dict[str, set[str]] = defaultdict(set)
    with_guidance: dict[str, set[str]] = defaultdict(set)
    unrecorded: dict[str, int] = defaultdict(int)
    seen: dict[str, dict[tuple[str, str], set[str]]] = defaultdict(lambda: defaultdict(set))
    skills: dict[str, set[str]] = defaultdict(set)
    with_skills: dict[str, set[str]] = defaultdict(set)
    sources: dict[str, set[str]] = defaultdict(set)
    for cell in batch.finished():
        result = cell.result
        assert result is not None
        arm = result.arm
        tasks[arm].add(result.task)
        meta = cell.meta()
        if meta is None or meta.guidance_files is None:
            unrecorded[arm] += 1
            continue
        if meta.guidance_source:
            sources[arm].add(meta.guidance_source)
        if meta.guidance_files:
            with_guidance[arm].add(result.task)
        for item in meta.guidance_files:
            seen[arm][(item.path, item.sha)].add(result.task)
            skill = skill_directory(item.path)
            if skill is not None:
                skills[arm].add(skill)
                with_skills[arm].add(result.task)
    generated = generation_records(batch.root)
    out: list[ArmGuidance] = []
    for arm in sorted(tasks):
        gen_pairs = len(generated) if arm == "guidance:generated" else 0
        costs = [r.cost_usd for r in generated if r.cost_usd is not None] if gen_pairs else []
        out.append(
            ArmGuidance(
                arm=arm,
                tasks=len(tasks[arm]),
                tasks_with_guidance=len(with_guidance[arm]),
                cells_unrecorded=unrecorded[arm],
                sources=sorted(sources[arm]),
                files=[
                    SeenGuidanceFile(path=path, sha=sha, tasks=len(task_ids))
                    for (path, sha), task_ids in sorted(seen[arm].items())
                ],
                skills=sorted(skills[arm]),
                tasks_with_skills=len(with_skills[arm]),
                generated_pairs=gen_pairs,
                generation_cost_usd=round(sum(costs), 6) if costs else None,
                generation_cost_unknown=gen_pairs - len(costs),
            )
        )
    return out


def _task_guidance(batch: Batch) -> dict[str, dict[str, frozenset[tuple[str, str]] | None]]:
    """arm -> task -> the (path, blob SHA) its cells started with; None when the cells disagree or one has no
    record (then nothing is claimed about that task)."""
    out: dict[str, dict[str, frozenset[tuple[str, str]] | None]] = defaultdict(dict)
    for cell in batch.finished():
        result = cell.result
        assert result is not None
        meta = cell.meta()
        files = (
            None
            if meta is None or meta.guidance_files is None
            else frozenset((f.path, f.sha) for f in meta.guidance_files)
        )
        tasks = out[result.arm]
        if result.task not in tasks:
            tasks[result.task] = files
        elif tasks[result.task] != files:
            tasks[result.task] = None
    return out


def warn_same_guidance(batch: Batch) -> list[ReportWarning]:
    """Two arms whose agents started every shared task with exactly the same guidance files: they measure
    the same thing. The usual case is guidance:raw on bases that predate the repository's guidance, which is
    guidance:none under another name; guidance:tree or guidance:at=REV is the arm that carries today's."""
    per_arm = _task_guidance(batch)
    arms = sorted(per_arm)
    found: list[ReportWarning] = []
    for i, first in enumerate(arms):
        for second in arms[i + 1 :]:
            shared = sorted(set(per_arm[first]) & set(per_arm[second]))
            if not shared:
                continue
            a, b = per_arm[first], per_arm[second]
            if all(a[t] is not None and a[t] == b[t] for t in shared):
                what = "no guidance at all" if all(not a[t] for t in shared) else "the same guidance files"
                found.append(
                    ReportWarning(
                        code="same_guidance",
                        message=f"{first} and {second} started all {len(shared)} shared task(s) with {what}: "
                        "the two arms measure the same thing (bases older than the guidance make "
                        "guidance:raw equal guidance:none; guidance:tree puts today's files onto every base)",
                    )
                )
    return found
