"""Names you can find again: container paths, artifact names, exit codes, labels."""

from __future__ import annotations

from pathlib import PurePosixPath
from typing import Final

# Exit codes (DESIGN.md, "Rules of the house").
EXIT_OK: Final = 0
EXIT_FOUND_PROBLEMS: Final = 1
EXIT_USAGE: Final = 2
EXIT_BUG: Final = 3
EXIT_INTERRUPTED: Final = 130

# Fixed paths inside every container (contract §1.1).
CONTAINER_RUN_DIR: Final = PurePosixPath("/eval/run")
CONTAINER_EVAL_DIR: Final = PurePosixPath("/eval/content")
CONTAINER_SOURCE_DIR: Final = PurePosixPath("/eval/source")
CONTAINER_WORKSPACE: Final = CONTAINER_RUN_DIR / "workspace"
CONTAINER_HARNESS: Final = PurePosixPath("/eval/harness")
CONTAINER_SUPPORT: Final = PurePosixPath("/eval/support")

# The five placeholders of the manifest (contract §2).
PLACEHOLDERS: Final = ("eval_dir", "source_dir", "run_dir", "out", "task")

# Entries of a run directory that belong to the framework; image.env may not claim them (contract §2).
RUN_DIR_ENTRIES: Final = frozenset(
    {
        "workspace",
        "task.json",
        "meta.json",
        "events.jsonl",
        "answer.txt",
        "grade.json",
        "result.json",
        "agent.stdout",
        "agent.stderr",
        "grade.stdout",
        "grade.stderr",
        "oracle.stdout",
        "oracle.stderr",
        "static.stdout",
        "static.stderr",
        "perf.stdout",
        "perf.stderr",
        "workspace.diff",
        "workspace_diff.json",
        "merge.json",
        "perf",
        "grade-home",
        "agent-git",
        "home",
        "config",
        "tmp",
    }
)

# Artifact names in a run (cell) directory.
TASK_JSON: Final = "task.json"
META_JSON: Final = "meta.json"
EVENTS_JSONL: Final = "events.jsonl"
ANSWER_TXT: Final = "answer.txt"
GRADE_JSON: Final = "grade.json"
RESULT_JSON: Final = "result.json"
AGENT_STDOUT: Final = "agent.stdout"

DEFAULT_EVAL_DIR: Final = ".agent-eval"
DEFAULT_MANIFEST_NAME: Final = "repo-eval.yaml"

# Guidance globs used when no manifest is given (contract, top: scan and reach).
DEFAULT_GUIDANCE_GLOBS: Final = (
    "**/AGENTS.md",
    "**/CLAUDE.md",
    ".github/copilot-instructions.md",
    ".github/instructions/*.md",
)

# Docker labels and names.
LABEL_BATCH: Final = "dokimi.batch"
LABEL_MANAGED: Final = "dokimi.managed"
CONTAINER_PREFIX: Final = "dokimi-"
BASE_IMAGE: Final = "dokimi-base:bookworm"

# Largest guidance file the scan reads (contract §8).
MAX_GUIDANCE_BYTES: Final = 2 * 1024 * 1024

# Build systems the manifest may name in build_systems (contract §2); each selects an L0 claim-check adapter.
BUILD_SYSTEMS: Final = frozenset(
    {"bazel", "make", "cmake", "meson", "ninja", "python", "pytest", "npm", "cargo", "go", "maven", "gradle"}
)


#: The classes of an L0 scan status; a status is its class or a refinement after ``_`` (``ok_suffix``).
STATUS_CLASSES = ("ok", "unresolved", "fail")


def status_class(status: str) -> str:
    """The part of a status before the first ``_``: ``ok_suffix`` -> ``ok``."""
    return status.split("_", 1)[0]
