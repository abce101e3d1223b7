"""Names you can find again: container paths, artifact names, exit codes, labels."""

from __future__ import annotations

from pathlib import PurePosixPath
from typing import Final

from dokimi.rundir import RunDir

MAX_REPS: Final = 1000
"""The most repetitions per cell a batch or a study may ask for (``--reps``, ``reps:``)."""
MAX_CELLS: Final = 100_000
"""The most cells one ``repo run`` may plan: tasks x arms x models x efforts x reps. Both bounds are checked
before any work, so a typo (``--reps 99999999999``) is a clear error instead of a plan that never ends."""

# Exit codes: 0 fine, 1 a check found problems, 2 usage or environment, 3 a bug in dokimi, 130 Ctrl-C.
EXIT_OK: Final = 0
EXIT_FOUND_PROBLEMS: Final = 1
EXIT_USAGE: Final = 2
EXIT_BUG: Final = 3
EXIT_INTERRUPTED: Final = 130

# Fixed paths inside every container.
CONTAINER_RUN_DIR: Final = PurePosixPath("/eval/run")
CONTAINER_EVAL_DIR: Final = PurePosixPath("/eval/content")
CONTAINER_SOURCE_DIR: Final = PurePosixPath("/eval/source")
CONTAINER_WORKSPACE: Final = RunDir(CONTAINER_RUN_DIR).workspace
CONTAINER_HARNESS: Final = PurePosixPath("/eval/harness")
CONTAINER_SUPPORT: Final = PurePosixPath("/eval/support")
#: Where a dry-run cell's script is mounted (read-only) in the agent's container: a neutral name.
DRY_RUN_MOUNT: Final = PurePosixPath("/eval/dry-run/script.json")
CONTAINER_TEST_OUT: Final = PurePosixPath("/eval/out")
"""Where a built-in grader's test container keeps its report (its only writable place besides the tree)."""
CONTAINER_PROBE: Final = PurePosixPath("/eval/probe")
"""Where tasks check's grader isolation probe writes what it found (mounted for that run only)."""

# The five placeholders of the manifest.
PLACEHOLDERS: Final = ("eval_dir", "source_dir", "run_dir", "out", "task")

DEFAULT_EVAL_DIR: Final = ".agent-eval"
DEFAULT_MANIFEST_NAME: Final = "repo-eval.yaml"

# Guidance globs used when no manifest is given (contract, top: scan and reach).
#: The instruction files the supported harnesses load by themselves (docs/reach.md measures which, where).
DEFAULT_INSTRUCTION_GLOBS: Final = (
    "**/AGENTS.md",
    "**/CLAUDE.md",
    ".github/copilot-instructions.md",
    ".github/instructions/*.md",
)
#: Where the supported harnesses look for skills (a skill is a directory holding a SKILL.md), in the
#: directory they start in and its ancestors: Claude Code .claude/skills; Codex .agents/skills; Gemini CLI
#: .gemini/skills and .agents/skills; Copilot CLI .github/skills, .claude/skills and .agents/skills; OpenCode
#: .opencode/skills, .claude/skills and .agents/skills; Qwen Code .qwen/skills (each harness's own docs).
SKILL_DIRS: Final = (
    ".claude/skills",
    ".agents/skills",
    ".github/skills",
    ".gemini/skills",
    ".opencode/skills",
    ".qwen/skills",
)
#: The file that makes a directory a skill (the Agent Skills format).
SKILL_FILE: Final = "SKILL.md"
#: A skill's SKILL.md is guidance; its scripts and other files are not (dokimi.checks.scan.skills). The arms
#: remove or replace a skill whole (dokimi.repo.workspace.guidance_with_skills).
DEFAULT_SKILL_GLOBS: Final = tuple(f"**/{directory}/*/SKILL.md" for directory in SKILL_DIRS)
DEFAULT_GUIDANCE_GLOBS: Final = (*DEFAULT_INSTRUCTION_GLOBS, *DEFAULT_SKILL_GLOBS)

# Docker labels and names.
LABEL_BATCH: Final = "dokimi.batch"
LABEL_MANAGED: Final = "dokimi.managed"
LABEL_OWNER_LOCK: Final = "dokimi.owner_lock"
"""The lock file the dokimi process that started a container holds while it runs (dokimi.sandbox.owner)."""
CONTAINER_PREFIX: Final = "dokimi-"
BASE_IMAGE: Final = "dokimi-base:bookworm"

# Largest guidance file the scan reads.
MAX_GUIDANCE_BYTES: Final = 2 * 1024 * 1024

# Build systems the manifest may name in build_systems; each selects an L0 claim-check adapter.
BUILD_SYSTEMS: Final = frozenset(
    {"bazel", "make", "cmake", "meson", "ninja", "python", "pytest", "npm", "cargo", "go", "maven", "gradle"}
)


#: The classes of an L0 scan status; a status is its class or a refinement after ``_`` (``ok_suffix``).
STATUS_CLASSES = ("ok", "unresolved", "fail")


def status_class(status: str) -> str:
    """The part of a status before the first ``_``: ``ok_suffix`` -> ``ok``."""
    return status.split("_", 1)[0]
