"""Build-system adapters, by name: one table, every built-in visible here."""

from __future__ import annotations

from dokimi.checks.scan.adapters.base import Adapter, Check, Ctx, Inputs
from dokimi.checks.scan.adapters.bazel import BazelAdapter
from dokimi.checks.scan.adapters.cmake import CMakeAdapter
from dokimi.checks.scan.adapters.make import MakeAdapter
from dokimi.checks.scan.adapters.precommit import PreCommitAdapter
from dokimi.checks.scan.adapters.pytest import PytestAdapter

ADAPTERS: dict[str, Adapter] = {
    "bazel": BazelAdapter(),
    "make": MakeAdapter(),
    "cmake": CMakeAdapter(),
    "pytest": PytestAdapter(),
    "pre-commit": PreCommitAdapter(),
}

#: Other spellings accepted in the manifest's build_systems.
ALIASES = {
    "precommit": "pre-commit",
    "pre_commit": "pre-commit",
    "bazelisk": "bazel",
    "gmake": "make",
    "ctest": "cmake",
}

__all__ = ["ADAPTERS", "ALIASES", "Adapter", "Check", "Ctx", "Inputs"]
