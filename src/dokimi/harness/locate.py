"""Where a harness executable is: the one lookup ``dokimi doctor``, ``repo run``, ``repo reach`` and the judge
share, so a binary doctor reports as found is the binary a run uses.

The order, first hit wins:

1. ``--bin`` (a path, or a name looked up on PATH): the user said which one;
2. the environment variable of the harness (``DOKIMI_CLAUDE_BIN`` for claude-code; for another profile
   ``DOKIMI_<NAME>_BIN``, the profile name upper-cased with ``-`` as ``_``);
3. the pinned install of ``scripts/install-harness.sh`` under ``$DOKIMI_TOOLS`` (default
   ``~/.cache/dokimi/tools``), when it is there;
4. the profile's ``bin`` on PATH.

The pinned install comes before PATH because a harness on PATH is often a different version, or a Node
script that does not run inside an image without Node.
"""

from __future__ import annotations

import os
import shutil
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

from dokimi.errors import PrerequisiteError

#: The Claude Code version scripts/install-harness.sh installs.
CLAUDE_CODE_VERSION = "2.1.328"

#: What scripts/install-harness.sh installs per harness: (version, the executable under its prefix). The
#: versions are the built-in profiles' ``verification.version`` (a test checks they agree).
PINNED_INSTALLS: dict[str, tuple[str, str]] = {
    "claude-code": (CLAUDE_CODE_VERSION, "node_modules/@anthropic-ai/claude-code-linux-x64/claude"),
    "codex": ("0.169.0", "node_modules/@openai/codex-linux-x64/vendor/x86_64-unknown-linux-musl/bin/codex"),
    "gemini-cli": ("0.61.0", "node_modules/@google/gemini-cli/bundle/gemini.js"),
    "copilot": ("1.0.102", "node_modules/@github/copilot-linux-x64/copilot"),
    "opencode": ("1.18.33", "node_modules/opencode-linux-x64/bin/opencode"),
    "qwen-code": ("0.24.4", "node_modules/@qwen-code/qwen-code/cli-entry.js"),
    "aider": ("0.86.2", "aider.py"),
}

Origin = Literal["--bin", "environment", "installed", "PATH"]


@dataclass(frozen=True)
class Located:
    """A harness executable and how it was found (doctor shows the origin)."""

    path: Path
    origin: Origin
    detail: str
    """``--bin``, the variable's name, the install directory, or ``PATH``."""


def env_names(harness: str) -> list[str]:
    """The environment variables that name the executable of ``harness`` (a profile name)."""
    names = [f"DOKIMI_{harness.upper().replace('-', '_')}_BIN"]
    if harness == "claude-code":
        names.insert(0, "DOKIMI_CLAUDE_BIN")
    return names


def tools_dir() -> Path:
    """Where scripts/install-harness.sh installs: ``$DOKIMI_TOOLS``, else ``~/.cache/dokimi/tools``."""
    return Path(os.environ.get("DOKIMI_TOOLS") or Path.home() / ".cache" / "dokimi" / "tools")


def installed_path(harness: str) -> Path | None:
    """The path scripts/install-harness.sh puts the pinned executable of ``harness`` at (None when the script
    installs no such harness)."""
    if harness not in PINNED_INSTALLS:
        return None
    version, executable = PINNED_INSTALLS[harness]
    return tools_dir() / f"{harness}-{version}" / executable


def _executable(path: Path) -> bool:
    return path.is_file() and os.access(path, os.X_OK)


def _install_hint(harness: str, default_bin: str) -> str:
    names = " or ".join(env_names(harness))
    if installed_path(harness) is not None:
        return f"run scripts/install-harness.sh (then it is found), or pass --bin PATH, or set {names}"
    return f"install {default_bin}, or pass --bin PATH, or set {names}"


def _from_value(value: str, origin: Origin, detail: str, hint: str) -> Located:
    if "/" in value:
        path = Path(value).expanduser()
        if not _executable(path):
            raise PrerequisiteError(
                f"harness executable {value} (from {detail}) is missing or not executable", hint=hint
            )
        return Located(path.resolve(), origin, detail)
    found = shutil.which(value)
    if found is None:
        raise PrerequisiteError(f"harness executable `{value}` (from {detail}) is not on PATH", hint=hint)
    return Located(Path(found).resolve(), origin, detail)


def locate_harness(harness: str, default_bin: str, override: str | Path | None = None) -> Located:
    """The executable of the harness profile ``harness`` whose ``bin`` is ``default_bin``, looked up in the
    order of this module's docstring. Raises PrerequisiteError naming every place it looked."""
    hint = _install_hint(harness, default_bin)
    if override is not None and str(override):
        return _from_value(str(override), "--bin", "--bin", hint)
    for name in env_names(harness):
        value = os.environ.get(name)
        if value:
            return _from_value(value, "environment", name, hint)
    pinned = installed_path(harness)
    if pinned is not None and _executable(pinned):
        return Located(pinned.resolve(), "installed", str(tools_dir()))
    found = shutil.which(default_bin)
    if found is not None:
        return Located(Path(found).resolve(), "PATH", "PATH")
    looked = ["--bin (not given)", *(f"${name} (not set)" for name in env_names(harness))]
    if pinned is not None:
        looked.append(f"{pinned} (not there)")
    looked.append(f"`{default_bin}` (not on PATH)")
    raise PrerequisiteError(f"no {harness} executable: looked at " + ", ".join(looked), hint=hint)
