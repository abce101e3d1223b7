"""Running a harness on the host as a non-root user when dokimi runs as root.

Claude Code refuses ``--permission-mode bypassPermissions`` as root, and no harness needs root. So when dokimi
runs as root, a harness started on the host (the reach probe) runs as uid/gid ``DOKIMI_HARNESS_UID``
(default 1000) through ``setpriv --reuid --regid --clear-groups``, which execs the harness in place: the pid,
and so the process group dokimi kills, stay the same. Everything the harness touches (its cwd, HOME and
config dir) is handed to that user, and an executable that user cannot reach (one under /root, mode 0700) is
hard-linked, or copied, into a world-readable directory under the system temp dir, once per binary.
"""

from __future__ import annotations

import hashlib
import os
import shutil
import tempfile
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from dokimi import safefs
from dokimi.errors import PrerequisiteError, UsageError
from dokimi.harness.runtime import is_node_script, is_python_script, package_root

DEFAULT_UID = 1000
UID_ENV = "DOKIMI_HARNESS_UID"


@dataclass(frozen=True)
class RunAs:
    uid: int
    gid: int


def harness_identity() -> RunAs | None:
    """Who the harness runs as: None (the caller itself) unless dokimi runs as root."""
    if os.geteuid() != 0:
        return None
    raw = os.environ.get(UID_ENV, str(DEFAULT_UID))
    try:
        uid = int(raw)
    except ValueError:
        raise UsageError(
            f"{UID_ENV}={raw!r} is not a number", hint="set it to a non-root uid, e.g. 1000"
        ) from None
    if uid == 0:
        raise UsageError(
            f"{UID_ENV}=0: the harness must not run as root (Claude Code refuses bypassPermissions as root)",
            hint="set it to a non-root uid, e.g. 1000",
        )
    return RunAs(uid, uid)


def wrap_argv(argv: Sequence[str], who: RunAs | None) -> list[str]:
    """argv unchanged for None; else prefixed with setpriv, which execs it as that user."""
    if who is None:
        return list(argv)
    setpriv = shutil.which("setpriv")
    if setpriv is None:
        raise PrerequisiteError(
            "setpriv is needed to run the harness as a non-root user (dokimi runs as root)",
            hint="install util-linux (Debian: apt-get install -y util-linux), or run dokimi as non-root",
        )
    return [setpriv, f"--reuid={who.uid}", f"--regid={who.gid}", "--clear-groups", "--", *argv]


def give_to(path: Path, who: RunAs | None) -> None:
    """chown -R -h path to the harness user (nothing for None): by descriptor, never following a link, so a
    link an agent left in a directory being handed over changes only the link (:mod:`dokimi.safefs`)."""
    if who is None:
        return
    path = Path(os.path.abspath(path))
    safefs.chown_tree(path, who.uid, who.gid, trusted=path.parent)


def _reachable_by_others(path: Path) -> bool:
    path = path.resolve()
    if (path.stat().st_mode & 0o005) != 0o005:
        return False
    return all(parent.stat().st_mode & 0o001 for parent in path.parents)


def reachable_binary(binary: Path, who: RunAs | None) -> Path:
    """A path to ``binary`` the harness user can execute: itself, or a link or copy in a shared directory."""
    if who is None or _reachable_by_others(binary):
        return binary
    real = binary.resolve()
    st = real.stat()
    key = hashlib.sha256(f"{real}:{st.st_size}:{st.st_mtime_ns}".encode()).hexdigest()[:12]
    shared = Path(tempfile.gettempdir()) / f"dokimi-bin-{key}"
    package = _package_root(real)
    if package is not None:
        return _mirror_package(package, real, shared)
    target = shared / real.name
    if target.exists():
        return target
    shared.mkdir(mode=0o755, exist_ok=True)
    os.chmod(shared, 0o755)
    staging = shared / f".{real.name}.{os.getpid()}"
    try:
        os.link(real, staging)
    except OSError:
        shutil.copy2(real, staging)
    os.chmod(staging, 0o755)
    os.replace(staging, target)
    return target


def _package_root(real: Path) -> Path | None:
    """The directory to mirror whole: a Node program's npm prefix, a Python launcher's directory (its
    packages), or ``<root>`` of a ``<root>/bin/<exe>`` layout with a ``*-resources`` directory beside ``bin``
    (Codex: ``codex-resources/bwrap`` is its sandbox, found relative to the executable); None for a
    self-contained binary."""
    if is_node_script(real):  # a Node program needs its whole npm prefix (every dependency)
        return package_root(real)
    if is_python_script(real):  # a Python launcher: its packages are in the directory beside it
        return real.parent
    root = real.parent.parent
    if real.parent.name != "bin":
        return None
    try:
        return root if any(p.is_dir() and p.name.endswith("-resources") for p in root.iterdir()) else None
    except OSError:
        return None


def _mirror_package(root: Path, real: Path, shared: Path) -> Path:
    """The whole package directory, hard-linked (or copied) into ``shared``, readable by everyone."""
    target = shared / "pkg" / real.relative_to(root)
    if target.exists():
        return target
    shared.mkdir(mode=0o755, exist_ok=True)
    os.chmod(shared, 0o755)
    staging = shared / f".pkg.{os.getpid()}"
    shutil.rmtree(staging, ignore_errors=True)

    def link_or_copy(src: str, dst: str) -> object:
        try:
            os.link(src, dst)
        except OSError:
            shutil.copy2(src, dst)
        return dst

    shutil.copytree(root, staging, symlinks=True, copy_function=link_or_copy)
    for path in [staging, *staging.rglob("*")]:
        if not path.is_symlink():
            os.chmod(
                path,
                (path.stat().st_mode & 0o777)
                | (0o755 if path.is_dir() or os.access(path, os.X_OK) else 0o644),
            )
    try:
        os.replace(staging, shared / "pkg")
    except OSError:  # another process mirrored it first
        shutil.rmtree(staging, ignore_errors=True)
    return target
