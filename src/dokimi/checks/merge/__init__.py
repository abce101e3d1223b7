"""Mergeability grading: the workspace diff, scope and test-integrity checks, the rubric
judge, the merge outcome, and ``repo rubric check`` (docs/mergeability.md)."""

from __future__ import annotations

from dokimi.checks.merge.diff import ChangedFile, WorkspaceDiff, empty_diff, list_ignored, take_workspace_diff
from dokimi.checks.merge.integrity import TESTS_BLOCKER, IntegrityVerdict, check_test_integrity
from dokimi.checks.merge.judge import (
    DEFAULT_JUDGE_HARNESS,
    JudgeInput,
    JudgeOptions,
    JudgeVerdict,
    cache_key,
    judge_harness,
    render_judge_input,
    require_full_model_id,
    run_judge,
)
from dokimi.checks.merge.outcome import MergeOutcome, explain_merge, grade_metrics_of, merge_outcome
from dokimi.checks.merge.scope import ScopeVerdict, check_scope

__all__ = [
    "DEFAULT_JUDGE_HARNESS",
    "TESTS_BLOCKER",
    "ChangedFile",
    "IntegrityVerdict",
    "JudgeInput",
    "JudgeOptions",
    "JudgeVerdict",
    "MergeOutcome",
    "ScopeVerdict",
    "WorkspaceDiff",
    "cache_key",
    "check_scope",
    "check_test_integrity",
    "empty_diff",
    "explain_merge",
    "grade_metrics_of",
    "judge_harness",
    "list_ignored",
    "merge_outcome",
    "render_judge_input",
    "require_full_model_id",
    "run_judge",
    "take_workspace_diff",
]
