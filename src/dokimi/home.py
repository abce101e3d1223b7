"""Where dokimi keeps its own files on this machine: clones, build logs, caches, env files, batches."""

from __future__ import annotations

import os
import re
from pathlib import Path

RUNS = "runs"


def cache_directory() -> Path:
    """DOKIMI_HOME, else $XDG_CACHE_HOME/dokimi, else ~/.cache/dokimi."""
    home = os.environ.get("DOKIMI_HOME")
    if home:
        return Path(home)
    xdg = os.environ.get("XDG_CACHE_HOME")
    return (Path(xdg) if xdg else Path.home() / ".cache") / "dokimi"


def path_component(value: str) -> str:
    """``value`` as one safe path component: characters other than letters, digits, ``.``, ``_`` and ``-``
    become ``_``, and a name of dots only (``..``) becomes underscores."""
    out = re.sub(r"[^A-Za-z0-9._-]", "_", value)
    return out if out.strip(".") else "_" * max(1, len(out))


def runs_root() -> Path:
    """``<DOKIMI_HOME>/runs``: every repository's batches, one directory per manifest id."""
    return cache_directory() / RUNS


def default_batches_directory(manifest_id: str) -> Path:
    """Where the batches of a repository live unless ``--out`` says otherwise: ``<DOKIMI_HOME>/runs/<id>``
    (absolute: the first line of ``repo run`` names it), out of the user's working tree."""
    return (runs_root() / path_component(manifest_id)).absolute()
