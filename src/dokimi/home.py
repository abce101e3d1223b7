"""Where dokimi keeps its own files on this machine (clones, build logs, caches, private env files)."""

from __future__ import annotations

import os
from pathlib import Path


def cache_directory() -> Path:
    """DOKIMI_HOME, else $XDG_CACHE_HOME/dokimi, else ~/.cache/dokimi."""
    home = os.environ.get("DOKIMI_HOME")
    if home:
        return Path(home)
    xdg = os.environ.get("XDG_CACHE_HOME")
    return (Path(xdg) if xdg else Path.home() / ".cache") / "dokimi"
