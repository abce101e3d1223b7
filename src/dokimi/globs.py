"""The one glob dialect of dokimi, used by validate, scan, arms, scope and review rules.

- ``**`` crosses ``/`` (``a/**`` is everything under ``a``; ``**/x`` matches ``x`` at any depth, the root
too);
- ``*`` and ``?`` never cross ``/``;
- ``[...]`` character classes; no extglob (``!(a|b)``), no brace expansion, no negation;
- dot files are matched like any other file;
- paths are relative to the repository root, POSIX separators.

Python's fnmatch does not follow these rules (its ``*`` crosses ``/``); never use it for repository paths.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from functools import lru_cache

MAGIC = frozenset("*?[")


def is_glob(pattern: str) -> bool:
    """Whether ``pattern`` has a wildcard of this dialect."""
    return any(ch in pattern for ch in MAGIC)


class _AnyDirectory:
    """``**/NAME`` with a literal NAME: a path whose last part is NAME, at any depth (the root included, and
    hidden directories: GLOBSTAR with DOTGLOB). The default guidance globs are all of this form, so a scan
    with no manifest needs no glob engine."""

    def __init__(self, name: str) -> None:
        self.name = name
        self.suffix = "/" + name

    def match(self, path: str) -> bool:
        path = path.rstrip("/")  # as wcmatch: a trailing slash (a directory) matches too
        if path == self.name:
            return True
        if not path.endswith(self.suffix):
            return False
        framed = "/" + path
        return "/./" not in framed and "/../" not in framed  # as wcmatch: ** never crosses . or ..


#: A path with an empty, ``.`` or ``..`` part, or a trailing slash: wcmatch has rules of its own for those.
IRREGULAR = re.compile(r"(?:^|/)\.{0,2}(?:/|$)")
#: A pattern part :class:`_Simple` can match: literal characters and single ``*`` wildcards (no ``?``,
#: class, escape or ``**`` inside a part), or a whole ``**`` part.
SIMPLE_PART = re.compile(r"\*\*|(?:[^*?\[\\/]|\*(?!\*))+")


class _Simple:
    """A pattern of literal parts, ``*`` within parts and whole ``**`` parts (``docs/**/*.md``), matched by a
    regex of its own on the paths of a listing: ``*`` is ``[^/]*`` (dot files included), ``**`` zero or more
    directories (one or more parts when it ends the pattern). A path with an empty, ``.`` or ``..`` part or
    a trailing slash goes to wcmatch, whose import (about 8 ms) the scan of a listing then never pays."""

    def __init__(self, pattern: str) -> None:
        self.pattern = pattern
        parts = pattern.split("/")
        out = []
        for i, part in enumerate(parts):
            last = i == len(parts) - 1
            if part == "**":
                out.append(r"[^/]+(?:/[^/]+)*" if last else r"(?:[^/]+/)*")
            else:
                out.append(
                    "[^/]*".join(re.escape(piece) for piece in part.split("*")) + ("" if last else "/")
                )
        self.regex = re.compile("".join(out))

    def match(self, path: str) -> bool:
        if IRREGULAR.search(path) is not None:
            return bool(_wcmatch(self.pattern).match(path))  # type: ignore[attr-defined]
        return self.regex.fullmatch(path) is not None


def _simple(pattern: str) -> bool:
    """Whether :class:`_Simple` can match ``pattern``: every part simple, none empty, ``.`` or ``..``."""
    parts = pattern.split("/")
    return all(SIMPLE_PART.fullmatch(part) and part not in (".", "..") for part in parts)


@lru_cache(maxsize=4096)
def _compiled(pattern: str) -> object:
    name = pattern[3:]
    if pattern.startswith("**/") and name and "/" not in name and not is_glob(name):
        return _AnyDirectory(name)
    if _simple(pattern):
        return _Simple(pattern)
    return _wcmatch(pattern)


@lru_cache(maxsize=4096)
def _wcmatch(pattern: str) -> object:
    from wcmatch import glob as _wc  # imported on the first pattern or path that needs it (about 8 ms)

    # Not set, on purpose: BRACE, EXTGLOB, NEGATE, SPLIT, MINUSNEGATE, GLOBTILDE.
    return _wc.compile(pattern, flags=_wc.GLOBSTAR | _wc.DOTGLOB | _wc.FORCEUNIX)


def match_glob(pattern: str, path: str) -> bool:
    """Whether ``path`` (a repository-relative file path) matches ``pattern``."""
    return bool(_compiled(pattern).match(path))  # type: ignore[attr-defined]


def filter_paths(pattern: str, paths: Iterable[str]) -> list[str]:
    """The paths ``pattern`` matches, in their given order."""
    paths = list(paths)
    if not paths:
        return []
    compiled = _compiled(pattern)
    return [p for p in paths if compiled.match(p)]  # type: ignore[attr-defined]


def match_any(patterns: Iterable[str], path: str) -> bool:
    return any(match_glob(p, path) for p in patterns)


def literal_prefix(pattern: str) -> str:
    """The directory part of ``pattern`` before its first wildcard (``src/a/*.py`` -> ``src/a``)."""
    parts = pattern.split("/")
    literal: list[str] = []
    for part in parts[:-1]:
        if is_glob(part):
            break
        literal.append(part)
    return "/".join(literal)
