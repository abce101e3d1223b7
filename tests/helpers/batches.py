"""Literal batch directories for report and compare tests: result.json, meta.json and batch.json.

No containers, no runner: each helper writes the documents the runner would write, in the layout of
dokimi.batch, so tests state exactly which cells exist and what they say.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from dokimi.batch import EVAL_DIR_NAME, cell_dir

SHA_A = "a" * 40
SHA_B = "b" * 40


def write_json(path: Path, data: Any) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(data, indent=2, sort_keys=True) + "\n", encoding="utf-8")
    return path


def write_pin(batch: Path, **overrides: Any) -> dict[str, Any]:
    """_eval/batch.json pinned to a tree-tagged image unless overridden."""
    pin: dict[str, Any] = {
        "schema": "repo_batch.v1",
        "manifest_id": "calc",
        "source": "/src/calc@" + SHA_A,
        "tree": SHA_A,
        "eval_dir_digest": "sha256:eval1",
        "image": "dokimi/calc:" + SHA_A,
        "image_pin": "tree",
        "image_context_digest": "sha256:ctx1",
        "created_by": "0.1.0",
    }
    pin.update(overrides)
    write_json(batch / EVAL_DIR_NAME / "batch.json", pin)
    return pin


def write_plan(batch: Path, cells: list[tuple[str, str, str, str | None, int]]) -> None:
    """_eval/plan.json listing (task, arm, model, effort, rep) cells."""
    items = [{"task": t, "arm": a, "model": m, "effort": e, "rep": r} for t, a, m, e, r in cells]
    write_json(batch / EVAL_DIR_NAME / "plan.json", {"schema": "repo_plan.v1", "cells": items})


def write_cell(
    batch: Path,
    task: str,
    arm: str,
    *,
    model: str = "m1",
    effort: str | None = None,
    rep: int = 0,
    passed: bool | None = True,
    score: float | None = None,
    grader_failure: bool = False,
    meta: bool = False,
    meta_overrides: dict[str, Any] | None = None,
    **overrides: Any,
) -> Path:
    """A finished cell: result.json (and meta.json when ``meta``). ``passed=None`` makes a score-only cell.

    ``overrides`` replace result.json keys; ``meta_overrides`` replace meta.json keys.
    """
    run_dir = cell_dir(batch, task, arm, model, effort, rep, prompt=overrides.get("prompt_variant"))
    gated = passed is not None
    if grader_failure and gated:
        passed = False
    result: dict[str, Any] = {
        "schema": "repo_result.v1",
        "task": task,
        "arm": arm,
        "model": model,
        "effort": effort,
        "mode": None,
        "rep": rep,
        "harness": "claude-code",
        "harness_version": "2.1.328",
        "family": "fix",
        "gated": gated,
        "passed": passed,
        "score": score,
        "gate_results": {"pass": passed} if gated else {},
        "metrics": {},
        "grader_failure": grader_failure,
        "grader_error": "grade exited 1" if grader_failure else None,
        "agent_rc": 0,
        "agent_timed_out": False,
        "cost_usd": 0.5,
        "turns": 10,
        "duration_s": 12.0,
        "agent_network": None,
        "base_date": "2024-06-01T12:00:00+00:00",
        "prompt_style": None,
    }
    result.update(overrides)
    write_json(run_dir / "result.json", result)
    if meta:
        meta_doc: dict[str, Any] = {
            "schema": "repo_meta.v1",
            "task": task,
            "batch": batch.name,
            "arm": arm,
            "harness": "claude-code",
            "harness_version": result["harness_version"],
            "model": model,
            "effort": effort,
            "mode": result["mode"],
            "rep": rep,
            "base_rev": SHA_B,
            "base_sha": SHA_B,
            "base_date": result["base_date"],
            "patches": [],
            "start_sha": SHA_A,
            "agent_network": result["agent_network"],
        }
        meta_doc.update(meta_overrides or {})
        write_json(run_dir / "meta.json", meta_doc)
    return run_dir


def start_cell(
    batch: Path, task: str, arm: str, *, model: str = "m1", effort: str | None = None, rep: int = 0
) -> Path:
    """A cell that started (its run_dir exists) but has no result.json: missing."""
    run_dir = cell_dir(batch, task, arm, model, effort, rep)
    (run_dir / "workspace").mkdir(parents=True, exist_ok=True)
    return run_dir
