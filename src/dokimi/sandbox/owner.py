"""Which dokimi process started a container, and whether it still runs: the rule ``dokimi doctor`` cleans by.

Every container dokimi starts carries the label ``dokimi.owner_lock=<path>``: a file under
``<DOKIMI_HOME>/owners/`` that the starting process holds an exclusive ``flock`` on for as long as it runs
(one file per process, taken when it starts its first container). The kernel releases the lock when the
process ends, however it ends (SIGKILL, a crash, a closed terminal), so:

- the lock is held: the container belongs to a dokimi that still runs (a batch in progress, another user's
  tasks check): it is never removed;
- the lock is free, or its file is gone from a directory we can read: the process that started the container
  has ended, and the container is left behind;
- the file cannot be opened (another user's home) or the label is missing (a container of an older dokimi):
  nobody can tell, so it is treated as live.

A pid alone would not do: pids are reused, and a process in another PID namespace is invisible.
"""

from __future__ import annotations

import fcntl
import os
import socket
import threading
from enum import StrEnum
from pathlib import Path

from dokimi.home import cache_directory

__all__ = ["OWNERS_DIR", "Owner", "owner_lock", "owner_of"]

OWNERS_DIR = "owners"
"""Under DOKIMI_HOME: one lock file per dokimi process that started a container."""

_held: tuple[int, Path] | None = None
"""(pid, path) of the lock this process holds; the open file stays open for the life of the process."""
_held_file: int | None = None
_lock = threading.Lock()


class Owner(StrEnum):
    """What a container's owner lock says about the process that started it."""

    LIVE = "live"
    """Its lock is held: the process still runs."""
    ENDED = "ended"
    """Its lock is free (or its file is gone): the process has ended and left the container behind."""
    UNKNOWN = "unknown"
    """No label, or a lock file this user cannot open: treated as live."""


def owner_lock() -> Path:
    """The lock file of this process, taken (``flock``, exclusive) on the first call and held until the
    process ends. A forked child that starts containers takes its own."""
    global _held, _held_file
    with _lock:
        if _held is not None and _held[0] == os.getpid():
            return _held[1]
        root = cache_directory() / OWNERS_DIR
        root.mkdir(parents=True, exist_ok=True)
        _sweep_ended(root)
        path = root / f"{socket.gethostname()}-{os.getpid()}-{os.urandom(4).hex()}.lock"
        # locked under another name first, so a sweep never sees the file before it is held
        fresh = path.with_suffix(".new")
        fd = os.open(fresh, os.O_RDWR | os.O_CREAT | os.O_EXCL | os.O_CLOEXEC, 0o644)
        fcntl.flock(fd, fcntl.LOCK_EX)
        os.rename(fresh, path)
        _held, _held_file = (os.getpid(), path), fd
        return path


def owner_of(label: str | None) -> Owner:
    """Whether the process that started a container (its ``dokimi.owner_lock`` label) still runs. Taking
    the lock for a moment is the test: it succeeds only when nobody holds it."""
    if not label:
        return Owner.UNKNOWN
    path = Path(label)
    if not path.is_absolute() or path.parent.name != OWNERS_DIR:
        return Owner.UNKNOWN
    if _held is not None and _held[1] == path and _held[0] == os.getpid():
        return Owner.LIVE
    try:
        fd = os.open(path, os.O_RDONLY | os.O_CLOEXEC | os.O_NOFOLLOW)
    except FileNotFoundError:
        return Owner.ENDED if os.access(path.parent, os.R_OK | os.X_OK) else Owner.UNKNOWN
    except OSError:
        return Owner.UNKNOWN
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        return Owner.LIVE
    except OSError:
        return Owner.UNKNOWN
    finally:
        os.close(fd)
    return Owner.ENDED


def _sweep_ended(root: Path) -> None:
    """Remove the lock files of processes that have ended (nobody holds them). Their containers, if any are
    left, still name the path: a missing file reads as ended too."""
    for entry in root.iterdir():
        if entry.suffix == ".lock" and owner_of(str(entry)) is Owner.ENDED:
            try:
                entry.unlink()
            except OSError:
                pass
