"""Where a harness executable is: the one lookup ``dokimi doctor``, ``repo run``, ``repo reach`` and the judge
share, so a binary doctor reports as found is the binary a run uses.

The order, first hit wins:

1. ``--bin`` (a path, or a name looked up on PATH): the user said which one;
2. the environment variable of the harness (``DOKIMI_CLAUDE_BIN`` for claude-code; for another profile
   ``DOKIMI_<NAME>_BIN``, the profile name upper-cased with ``-`` as ``_``);
3. the pinned install of ``scripts/install-harness.sh`` under ``$DOKIMI_TOOLS`` (default
   ``~/.cache/dokimi/tools``), when it is there: ``<name>-<version>/<executable>``, all three read from the
   profile (its ``verification`` block is the pin, the one place a harness's version is spelled);
4. the profile's ``bin`` on PATH.

The pinned install comes before PATH because a harness on PATH is often a different version, or a Node
script that does not run inside an image without Node.
"""

from __future__ import annotations

import os
import shutil
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Literal

from dokimi.errors import PrerequisiteError

if TYPE_CHECKING:
    from dokimi.schemas.profile import HarnessProfile

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


def installed_path(profile: HarnessProfile) -> Path | None:
    """The path scripts/install-harness.sh puts the pinned executable of ``profile`` at (None when the
    profile names no install: no ``verification.executable``)."""
    pin = profile.verification
    if pin is None or pin.executable is None:
        return None
    return tools_dir() / f"{profile.name}-{pin.version}" / pin.executable


def _executable(path: Path) -> bool:
    return path.is_file() and os.access(path, os.X_OK)


def _install_hint(profile: HarnessProfile) -> str:
    names = " or ".join(env_names(profile.name))
    if installed_path(profile) is not None:
        return f"run scripts/install-harness.sh (then it is found), or pass --bin PATH, or set {names}"
    return f"install {profile.bin}, or pass --bin PATH, or set {names}"


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


def locate_harness(profile: HarnessProfile, override: str | Path | None = None) -> Located:
    """The executable of the harness ``profile``, looked up in the order of this module's docstring. Raises
    PrerequisiteError naming every place it looked."""
    harness, default_bin = profile.name, profile.bin
    hint = _install_hint(profile)
    if override is not None and str(override):
        return _from_value(str(override), "--bin", "--bin", hint)
    for name in env_names(harness):
        value = os.environ.get(name)
        if value:
            return _from_value(value, "environment", name, hint)
    pinned = installed_path(profile)
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
