"""Mergeability grading (mergeability.md): the workspace diff, scope and test-integrity checks, the rubric
judge, the merge outcome, and ``repo rubric check``."""

from __future__ import annotations
