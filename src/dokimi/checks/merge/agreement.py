"""Two rubric judges on the same diffs: Cohen's kappa per blocker and over every blocker verdict, with the
places they disagree (docs/mergeability.md). Pure functions over the verdicts' JSON; the report (over a
batch's cells) and ``repo rubric check`` (over its calibration rows) share them.

The second judge's verdicts measure agreement only: nothing here changes a score.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Mapping, Sequence
from typing import Any

from dokimi.stats import cohen_kappa

__all__ = ["BlockerPair", "blocker_agreement", "paired_blockers"]

BlockerPair = tuple[str, str, str, str, str]
"""(task, blocker id, where: a cell or a rubric-check row, primary verdict, second verdict)."""


def _blocker_verdicts(verdict: Mapping[str, Any]) -> dict[str, str]:
    return {
        str(item["id"]): item["verdict"]
        for item in verdict.get("items") or []
        if isinstance(item, Mapping)
        and item.get("kind") == "blocker"
        and isinstance(item.get("verdict"), str)
    }


def paired_blockers(
    task: str, where: str, first: Mapping[str, Any] | None, second: Mapping[str, Any] | None
) -> list[BlockerPair]:
    """Every blocker both judges gave a verdict on for one diff (a judge that failed gave none), in the
    primary's order."""
    if not first or not second or first.get("failure") or second.get("failure"):
        return []
    theirs = _blocker_verdicts(second)
    return [
        (task, blocker, where, verdict, theirs[blocker])
        for blocker, verdict in _blocker_verdicts(first).items()
        if blocker in theirs
    ]


def blocker_agreement(pairs: Sequence[BlockerPair]) -> dict[str, Any]:
    """Cohen's kappa over every blocker verdict pooled, and per task and blocker: how many diffs both judged,
    how many they agreed on, kappa (None when undefined: one verdict throughout), and where they disagreed
    (``where: primary vs second``)."""
    by_item: dict[tuple[str, str], list[BlockerPair]] = defaultdict(list)
    for pair in pairs:
        by_item[(pair[0], pair[1])].append(pair)
    blockers = [
        {
            "task": task,
            "blocker": blocker,
            "cells": len(found),
            "agreed": sum(1 for p in found if p[3] == p[4]),
            "kappa": cohen_kappa([p[3] for p in found], [p[4] for p in found]),
            "disagreements": sorted(f"{p[2]}: {p[3]} vs {p[4]}" for p in found if p[3] != p[4]),
        }
        for (task, blocker), found in sorted(by_item.items())
    ]
    return {
        "blocker_items": len(pairs),
        "kappa_blockers": cohen_kappa([p[3] for p in pairs], [p[4] for p in pairs]),
        "blockers": blockers,
    }
