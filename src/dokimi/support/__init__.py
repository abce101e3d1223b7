"""Helper scripts the framework mounts read-only at /eval/support (``{support_dir}`` in a profile).

Each script here is stdlib-only and runnable by the image's ``python3``; nothing in this directory may import
dokimi. :func:`support_dir` is the directory on the host.
"""

from __future__ import annotations

from pathlib import Path

NO_BACKGROUND_HOOK = "no_background_hook.py"
"""The Claude Code PreToolUse hook that refuses backgrounded shell commands."""


def support_dir() -> Path:
    """The support directory on the host (mount it at constants.CONTAINER_SUPPORT in a container)."""
    return Path(__file__).resolve().parent
