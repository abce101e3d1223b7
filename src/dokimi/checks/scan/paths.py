"""Path, glob and link claims resolved against one snapshot, one function per rule.

- :func:`resolve_path_claim`: a path in a code span or a command, tried at the file's directory and each
  ancestor; ok where found; else fail when its parent directory exists at one of those bases, ok_suffix when
  it ends a longer path in the tree, unresolved otherwise. A bare name that names some file or directory is
  ok_basename.
- :func:`resolve_glob_claim`: the same for a glob; ``*`` may span directories and ``**/`` matches zero or
  more.
- :func:`is_placeholder_path` / :func:`has_wildcard_dir`: such a claim is never fail.
- :func:`trailing_slash_on_file`: ``src/mod.py/`` is fail.
- :func:`is_github_action_ref`: ``actions/checkout@v6`` is not a path claim.
- :func:`split_blob_tree_link` (the ref-splitting rule) and :func:`resolve_link` for Markdown links.
- Paths inside a submodule are unresolved; symlinked directories are followed, as in a checkout.
"""

from __future__ import annotations

import bisect
import difflib
import functools
import itertools
import posixpath
import re
from collections.abc import Callable
from functools import cached_property
from typing import NamedTuple
from urllib.parse import unquote, urlsplit

from dokimi.checks.scan.verdict import FAIL, OK, OK_BASENAME, OK_SUFFIX, Verdict, fail, ok, unresolved
from dokimi.source.snapshot import Snapshot, normalize

PLACEHOLDER = re.compile(r"<[^<>/]+>|\{[^{}/]+\}|(?<![.])\.\.\.(?![.])")
ACTION_REF = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]*/[A-Za-z0-9_.-]+(/[A-Za-z0-9_./-]+)?@[A-Za-z0-9_.\-/]+$")
HEX_REF = re.compile(r"^[0-9a-f]{7,40}$")
VERSION_TAG = re.compile(r"^v?\d+(\.\d+)*([-+.][0-9A-Za-z.+-]*)?$")
DEFAULT_BRANCHES = frozenset({"main", "master", "HEAD", "trunk", "develop"})
MAX_SUGGEST_POOL = 200_000


def escapes_root(path: str) -> bool:
    return path == ".." or path.startswith("../")


def is_normal(path: str) -> bool:
    """Whether normpath leaves ``path`` (not empty, relative) as it is: no empty, ``.`` or ``..`` segment."""
    return (
        path not in ("", ".", "..")
        and "//" not in path
        and "/./" not in path
        and "/../" not in path
        and not path.startswith(("/", "./", "../"))
        and not path.endswith(("/", "/.", "/.."))
    )


def join(base: str, rel: str) -> str:
    """``base`` and ``rel`` joined and normalized ('' is the root; may start with ``..`` when it escapes)."""
    if is_normal(rel) and (not base or is_normal(base)):  # nothing for normpath to do (the usual case)
        return f"{base}/{rel}" if base else rel
    joined = posixpath.normpath(posixpath.join(base, rel)) if (base or rel) else ""
    return "" if joined == "." else joined


def bases_of(file: str) -> list[str]:
    """The file's directory and each of its ancestors, nearest first, ending with the root ''."""
    return list(_bases_of(file))


@functools.lru_cache(maxsize=1024)
def _bases_of(file: str) -> tuple[str, ...]:
    out = []
    directory = posixpath.dirname(file)
    while True:
        out.append(directory)
        if not directory:
            return tuple(out)
        directory = posixpath.dirname(directory)


class Tree:
    """The snapshot's listing with the indexes the rules need (built once, on first use)."""

    def __init__(self, snapshot: Snapshot) -> None:
        self.snapshot = snapshot
        self._by_extension: dict[str, list[str]] = {}
        self._by_shape: dict[str, dict[int, list[str]]] = {}
        self.verdicts: dict[tuple[object, ...], Verdict | None] = {}
        """Verdicts already reached, by rule and inputs: the tree does not change during a scan, and a
        guidance file often names one path several times."""
        self.suggestions: dict[str, str | None] = {}

    @cached_property
    def sorted_paths(self) -> list[str]:
        """Every file and directory (not the root), sorted: a prefix is a contiguous range.

        The listing is already in path order (git's tree order) and its directories nearly so, in the order it
        reaches them, so this is one sort of a few long runs, not of a shuffle. A path both listed and reached
        as a directory (none in a listing of a commit) is kept once."""
        snapshot = self.snapshot
        entries = snapshot.entries
        both = snapshot.dirs.intersection(entries)
        return sorted([*entries, *(d for d in snapshot.dirs_reached if d and d not in both)])

    def children(self, directory: str) -> list[str]:
        """Names directly inside ``directory`` (a range of the sorted listing, no index of the whole tree)."""
        cut = len(directory) + 1 if directory else 0
        return [p[cut:] for p in self.under(directory) if "/" not in p[cut:]]

    def under(self, directory: str) -> list[str]:
        """Files and directories below ``directory`` ('' is everything)."""
        if not directory:
            return self.sorted_paths
        lo = bisect.bisect_left(self.sorted_paths, directory + "/")
        hi = bisect.bisect_left(self.sorted_paths, directory + "0")  # '0' sorts right after '/'
        return self.sorted_paths[lo:hi]

    def resolve(self, path: str) -> str | None:
        """The in-tree path after following symlinks (of the path and its directories), or None."""
        path = normalize(path)
        snapshot = self.snapshot
        entry = snapshot.entries.get(path)
        if entry is not None and not entry.is_symlink:
            return path
        if path in snapshot.dirs:
            return path
        if not snapshot.has_symlinks:  # no link to follow: what is not listed dangles
            return None
        return snapshot.resolve(path).path

    def is_dir(self, path: str) -> bool:
        real = self.resolve(path)
        return real is not None and real in self.snapshot.dirs

    def is_file(self, path: str) -> bool:
        real = self.resolve(path)
        return real is not None and real in self.snapshot.entries and real not in self.snapshot.dirs

    def submodule_above(self, path: str) -> str | None:
        """The submodule that strictly contains ``path``, if any."""
        sub = self.snapshot.submodule_of(path)
        return sub if sub is not None and sub != normalize(path) else None

    def with_suffix(self, rel: str) -> list[str]:
        """Tree paths that end with ``/rel`` (a longer path ending with this one)."""
        name = posixpath.basename(rel)
        return sorted(p for p in self.snapshot.by_basename.get(name, []) if p.endswith("/" + rel))

    # --- suggestions -------------------------------------------------------------------------------------

    def basenames_by_length(self, ext: str) -> dict[int, list[str]]:
        """Basenames whose extension is ``ext`` (the text from their last dot, if not the first character;
        '' for none), by length: the pool a similar name is looked for in. Built per extension asked for."""
        found = self._by_shape.get(ext)
        if found is None:
            found = {}
            names = self.snapshot.by_basename
            # unsorted: difflib ranks a pool by (score, name), not by its order
            for name in [n for n in names if n.endswith(ext)] if ext else names:
                dot = name.rfind(".")
                if (name[dot:] if dot > 0 else "") == ext:
                    found.setdefault(len(name), []).append(name)
            self._by_shape[ext] = found
        return found

    def with_extension(self, ext: str) -> list[str]:
        """Files and directories, sorted, whose name ends with ``ext`` (``.txt``) and is longer than it.

        One filter of the listing per extension asked for, not an index of every extension."""
        found = self._by_extension.get(ext)
        if found is None:
            found = [
                p for p in self.sorted_paths if p.endswith(ext) and p != ext and not p.endswith("/" + ext)
            ]
            self._by_extension[ext] = found
        return found

    def files_ending(self, suffixes: tuple[str, ...]) -> list[str]:
        """Listed paths that end with one of ``suffixes``: the candidates an adapter's inputs are chosen from,
        found by one C-level test per path instead of a Python function call per path."""
        return [p for p in self.snapshot.entries if p.endswith(suffixes)]

    def similar_names(self, name: str) -> list[str]:
        ext = posixpath.splitext(name)[1]
        pool: list[str] = []
        by_length = self.basenames_by_length(ext)
        for length in range(len(name) - 2, len(name) + 3):
            pool.extend(by_length.get(length, []))
        return pool

    def suggest_path(self, missing: str) -> str | None:
        """The closest path in the tree: the same name elsewhere (a move), a similar name in the parent
        directory (a rename), or a similar name anywhere. Kept per Tree (an lru_cache on the method would
        keep every Tree, and its snapshot, alive after its scan)."""
        if missing in self.suggestions:
            return self.suggestions[missing]
        found = self.suggestions[missing] = self._suggest_path(missing)
        return found

    def _suggest_path(self, missing: str) -> str | None:
        name = posixpath.basename(missing)
        parent = posixpath.dirname(missing)
        moved = self.snapshot.by_basename.get(name, [])
        if moved:
            return _closest(missing, moved)
        siblings = self.children(parent) if self.is_dir(parent) else []
        close = difflib.get_close_matches(name, siblings, n=1, cutoff=0.6)
        if close:
            return join(parent, close[0])
        close = difflib.get_close_matches(name, self.similar_names(name), n=1, cutoff=0.75)
        if close:
            return _closest(missing, self.snapshot.by_basename[close[0]])
        return None


def _closest(target: str, candidates: list[str]) -> str:
    return max(sorted(candidates), key=lambda c: difflib.SequenceMatcher(None, target, c).ratio())


def relative(path: str, start: str) -> str:
    """``posixpath.relpath(path, start)`` for two tree paths, without the two ``os.getcwd()`` calls relpath
    makes to turn them absolute first (the current directory drops out of a relation between two relative
    paths). Anything not in normal form goes to relpath itself."""
    if not (is_normal(path) and is_normal(start)):
        return posixpath.relpath(path, start)
    to, frm = path.split("/"), start.split("/")
    common = 0
    for a, b in zip(to, frm, strict=False):  # stops at the shorter
        if a != b:
            break
        common += 1
    return "/".join([".."] * (len(frm) - common) + to[common:]) or "."


def did_you_mean(candidate: str | None, base: str = "") -> str | None:
    if candidate is None:
        return None
    shown = relative(candidate, base) if base else candidate
    return f"did you mean {shown}?"


# --- shapes ------------------------------------------------------------------------------------------------


def is_placeholder_path(text: str) -> bool:
    """``out/<run>/grade.json``, ``tasks/{task}/task.json``, ``src/.../x.py``: never fail."""
    return bool(PLACEHOLDER.search(text))


def has_wildcard_dir(text: str) -> bool:
    """A wildcard in the directory part (``src/*/x.py``): never fail."""
    directory = posixpath.dirname(text.rstrip("/"))
    return any(ch in directory for ch in "*?[")


def is_github_action_ref(text: str) -> bool:
    """``actions/checkout@v6`` or ``owner/repo/path@ref``: a GitHub Action reference, not a path."""
    return bool(ACTION_REF.match(text))


def trailing_slash_on_file(text: str, tree: Tree, real: str) -> bool:
    """``src/mod.py/`` names a file as if it were a directory: fail."""
    return text.endswith("/") and real in tree.snapshot.entries and real not in tree.snapshot.dirs


# --- path claims --------------------------------------------------------------------------------------------


def resolve_path_claim(text: str, bases: list[str], tree: Tree) -> Verdict:
    """A path tried at each base (the file's directory and its ancestors, or the cd directory)."""
    key = ("path", text, *bases)
    found = tree.verdicts.get(key)
    if found is None:
        found = tree.verdicts[key] = _resolve_path_claim(text, bases, tree)
    return found


def _resolve_path_claim(text: str, bases: list[str], tree: Tree) -> Verdict:
    if is_placeholder_path(text) or has_wildcard_dir(text):
        return resolve_glob_claim(text, bases, tree)
    rel = normalize(text)
    if not rel:
        return ok("the repository root")
    for base in bases:
        full = join(base, rel)
        if escapes_root(full):
            continue
        sub = tree.submodule_above(full)
        if sub is not None:
            return unresolved(f"inside submodule {sub}, whose files the tree does not hold")
        real = tree.resolve(full)
        if real is not None:
            if trailing_slash_on_file(text, tree, real):
                return fail(
                    f"{full} is a file, but the trailing slash names a directory", f"write {text[:-1]}"
                )
            shown = full if real == full else f"{full} (-> {real})"
            return ok(f"found: {shown}")
    return missing_path(text, rel, bases, tree)


def missing_path(text: str, rel: str, bases: list[str], tree: Tree) -> Verdict:
    """The rules for a path found at no base: a bare name is ok_basename when some file or directory has that
    name, else unresolved (the scan's choice: with no directory part, its parent proves nothing); a path with
    a directory part is fail when that parent exists at a base, ok_suffix when it ends a longer path, else
    unresolved."""
    if "/" not in rel:
        named = tree.snapshot.by_basename.get(rel)
        if named:
            more = f" (and {len(named) - 1} more)" if len(named) > 1 else ""
            return Verdict(OK_BASENAME, f"a bare name; the tree has {sorted(named)[0]}{more}")
        return unresolved(
            "a bare name of nothing in the tree (a file made at run time?); only a path with a "
            "directory part can show a rename"
        )
    for base in bases:
        full = join(base, rel)
        if escapes_root(full):
            continue
        parent = posixpath.dirname(full)
        if tree.is_dir(parent):
            where = f"{parent}/" if parent else "the repository root"
            return fail(
                f"no such file or directory: {full} ({where} exists)", did_you_mean(tree.suggest_path(full))
            )
    longer = tree.with_suffix(rel)
    if longer:
        more = f" (and {len(longer) - 1} more)" if len(longer) > 1 else ""
        return Verdict(OK_SUFFIX, f"ends a longer path: {longer[0]}{more}")
    tried = ", ".join(f"{b}/" if b else "the root" for b in bases[:3])
    return unresolved(f"not in the tree, and no parent directory of it exists at {tried} (a build output?)")


# --- globs -------------------------------------------------------------------------------------------------


@functools.lru_cache(maxsize=16384)
def scan_glob_regex(pattern: str) -> re.Pattern[str]:
    """The scan's claim-glob dialect: ``*`` may span directories, ``**/`` matches zero or more directories,
    ``?`` one character but ``/``, ``[...]`` a class. Placeholders (``<x>``, ``{x}``) match like ``*``."""
    pattern = PLACEHOLDER.sub("*", pattern)
    out = []
    i = 0
    while i < len(pattern):
        ch = pattern[i]
        if pattern.startswith("**/", i):
            out.append("(?:.*/)?")
            i += 3
        elif ch == "*":
            while i < len(pattern) and pattern[i] == "*":
                i += 1
            out.append(".*")
        elif ch == "?":
            out.append("[^/]")
            i += 1
        elif ch == "[":
            end = pattern.find("]", i + 2)
            if end == -1:
                out.append(re.escape(ch))
                i += 1
            else:
                body = pattern[i + 1 : end]
                if body.startswith("!"):
                    body = "^" + body[1:]
                out.append(f"[{body}]")
                i = end + 1
        else:
            out.append(re.escape(ch))
            i += 1
    return re.compile("".join(out) + r"/?\Z")


STARS = re.compile(r"\*+")


def glob_matcher(pattern: str) -> Callable[[str], bool]:
    """Whether a path matches ``pattern`` as :func:`scan_glob_regex` says, without compiling a regex for the
    common glob of literal text and ``*`` alone (``src/*.py``): prefix, suffix and the parts between found in
    order, as ``.*`` would. Any other glob, and any path the shortcut cannot judge (one holding a newline,
    which ``.`` does not match, or ending in ``/``), goes to the regex, compiled on first need."""
    plain = PLACEHOLDER.sub("*", pattern)
    if any(ch in plain for ch in "?[") or "**/" in plain:
        return lambda path: bool(scan_glob_regex(pattern).match(path))
    parts = STARS.split(plain)
    first, middle, last = parts[0], parts[1:-1], parts[-1]
    shortest = len(first) + len(last)

    def match(path: str) -> bool:
        if "\n" in path or path.endswith("/"):
            return bool(scan_glob_regex(pattern).match(path))
        if len(parts) == 1:
            return path == first
        if len(path) < shortest or not path.startswith(first) or not path.endswith(last):
            return False
        pos, end = len(first), len(path) - len(last)
        for part in middle:
            found = path.find(part, pos, end)
            if found < 0:
                return False
            pos = found + len(part)
        return True

    return match


#: Candidate paths tried by :func:`glob_matcher`'s Python steps before the glob's regex is compiled for the
#: rest: a match is usually among the first (then compiling would cost more than it saves); a glob that
#: matches nothing goes through every candidate, which the regex does by C-level steps.
REGEX_FROM = 64


def first_match(pattern: str, paths: list[str]) -> str | None:
    """The first of ``paths`` that ``pattern`` matches (as :func:`scan_glob_regex` says), or None."""
    match = glob_matcher(pattern)
    found = next((path for path in paths[:REGEX_FROM] if match(path)), None)
    if found is not None or len(paths) <= REGEX_FROM:
        return found
    return next(filter(scan_glob_regex(pattern).match, itertools.islice(paths, REGEX_FROM, None)), None)


def glob_literal_dir(pattern: str) -> str | None:
    """The directory part of a glob when it holds no wildcard (``src`` for ``src/*.zzz``), else None."""
    pattern = PLACEHOLDER.sub("*", pattern)
    directory = posixpath.dirname(pattern.rstrip("/"))
    return None if any(ch in directory for ch in "*?[") else directory


def _glob_prefix(pattern: str) -> str:
    literal = []
    for part in PLACEHOLDER.sub("*", pattern).split("/")[:-1]:
        if any(ch in part for ch in "*?["):
            break
        literal.append(part)
    return "/".join(literal)


def suffix_candidates(pattern: str, tree: Tree) -> list[str]:
    """Paths a glob could end: with its last segment's name when literal; else, when its first segment is
    literal, the paths below the directories of that name (``**/src/**/*.txt`` can only match below a
    directory named ``src``); else with its extension; else all. Sorted, as :attr:`Tree.sorted_paths` is."""
    plain = PLACEHOLDER.sub("*", pattern.rstrip("/"))
    last = plain.rsplit("/", 1)[-1]
    if not any(ch in last for ch in "*?["):
        return sorted(tree.snapshot.by_basename.get(last, []))
    first, slash, _ = plain.partition("/")
    if slash and first and not any(ch in first for ch in "*?["):
        dirs = tree.snapshot.dirs
        below = [tree.under(d) for d in tree.snapshot.by_basename.get(first, []) if d in dirs]
        return (
            sorted({p for paths in below for p in paths}) if len(below) > 1 else [*below[0]] if below else []
        )
    ext = posixpath.splitext(last)[1]
    if ext and not any(ch in ext for ch in "*?["):
        return tree.with_extension(ext)
    return tree.sorted_paths


def resolve_glob_claim(text: str, bases: list[str], tree: Tree) -> Verdict:
    """A glob (or a placeholder path) tried at each base: ok when something matches; fail when its literal
    parent directory exists and nothing in it matches; ok_suffix; unresolved. Placeholders and wildcard
    directories are never fail."""
    key = ("glob", text, *bases)
    found = tree.verdicts.get(key)
    if found is None:
        found = tree.verdicts[key] = _resolve_glob_claim(text, bases, tree)
    return found


def _resolve_glob_claim(text: str, bases: list[str], tree: Tree) -> Verdict:
    rel = normalize(text.rstrip("/")) if text.rstrip("/") else ""
    # a glob without a directory part (`*.mk`) has no parent to prove anything, like a bare name
    never_fail = is_placeholder_path(text) or has_wildcard_dir(text) or "/" not in rel
    for base in bases:
        full = join(base, rel)
        if escapes_root(full):
            continue
        found = first_match(full, tree.under(_glob_prefix(full)))
        if found is not None:
            return ok(f"matches {found}")
    if not never_fail:
        directory = glob_literal_dir(rel)
        assert directory is not None
        for base in bases:
            full_dir = join(base, directory)
            if not escapes_root(full_dir) and tree.is_dir(full_dir):
                where = f"{full_dir}/" if full_dir else "the repository root"
                return fail(f"nothing in {where} matches {join(base, rel)}")
    candidates = suffix_candidates(rel, tree)
    if candidates:
        longer = next(filter(scan_glob_regex("**/" + rel).match, candidates), None)
        if longer is not None:
            return Verdict(OK_SUFFIX, f"ends a longer path: {longer}")
    why = (
        "a placeholder"
        if is_placeholder_path(text)
        else "a wildcard directory"
        if has_wildcard_dir(text)
        else "a bare glob"
        if "/" not in rel
        else "a glob"
    )
    return unresolved(f"{why} that matches nothing in the tree (a build output?)")


# --- links -------------------------------------------------------------------------------------------------


class RepoUrl(NamedTuple):
    host: str
    owner: str
    name: str


def parse_repo_url(url: str | None) -> RepoUrl | None:
    """``https://github.com/o/r(.git)``, ``git@github.com:o/r.git`` or ``ssh://git@host/o/r``: host, owner,
    name."""
    if not url:
        return None
    scp = re.match(r"^[^/@:]+@([^/:]+):(.+)$", url)
    if scp:
        host, path = scp.group(1), scp.group(2)
    else:
        parts = urlsplit(url)
        if not parts.hostname:
            return None
        host, path = parts.hostname, parts.path
    segs = [s for s in path.strip("/").split("/") if s]
    if len(segs) < 2:
        return None
    name = segs[1][:-4] if segs[1].endswith(".git") else segs[1]
    return RepoUrl(host.lower(), segs[0].lower(), name.lower())


def is_one_segment_ref(ref: str, default_branches: frozenset[str]) -> bool:
    """A default branch, a commit or a version tag is one segment of a blob/tree link."""
    return ref in default_branches or bool(HEX_REF.match(ref)) or bool(VERSION_TAG.match(ref))


def ref_start(segs: list[str]) -> int:
    """Index of the ref's name: ``refs/heads/`` and ``refs/tags/`` belong to the ref."""
    return 2 if len(segs) >= 3 and segs[0] == "refs" and segs[1] in ("heads", "tags") else 0


def split_blob_tree_link(segs: list[str], default_branches: frozenset[str]) -> list[tuple[str, str]]:
    """The (ref, path) splits to try for the ``<ref>/<path>`` part of a blob or tree link, shortest ref first.

    ``refs/heads/`` and ``refs/tags/`` belong to the ref. A one-segment ref (default branch, commit, version
    tag) is tried alone; any other ref at each slash. A split that leaves no path (a link to a ref alone) is
    dropped.
    """
    start = ref_start(segs)
    if start < len(segs) and is_one_segment_ref(segs[start], default_branches):
        cuts = [start + 1]
    else:
        cuts = list(range(start + 1, len(segs)))
    return [("/".join(segs[:k]), "/".join(segs[k:])) for k in cuts if k < len(segs)]


def resolve_blob_tree_link(
    kind: str, segs: list[str], tree: Tree, default_branches: frozenset[str]
) -> Verdict | None:
    """ok when some split's path is in the tree; else a blob link fails, and so does a tree link on a
    one-segment ref; a tree link on any other ref is unresolved (it may name a branch). None: a link to a ref
    alone."""
    splits = split_blob_tree_link(segs, default_branches)
    if not splits:
        return None
    for ref, path in splits:
        sub = tree.submodule_above(path)
        if sub is not None:
            return unresolved(f"inside submodule {sub}")
        if tree.resolve(path) is not None:
            return ok(f"ref {ref}, path {path} is in the tree")
    start = ref_start(segs)
    one_segment = is_one_segment_ref(segs[start], default_branches)
    tried = "; ".join(f"{ref} + {path}" for ref, path in splits[:4])
    if kind == "blob" or one_segment:
        return fail(
            f"{kind} link: no <ref>/<path> split names a path in the tree (tried {tried})",
            did_you_mean(tree.suggest_path(splits[0][1])),
        )
    return unresolved(
        f"tree link: no split names a path in the tree (tried {tried}); the ref may be a branch"
    )


def resolve_link(
    target: str, file: str, tree: Tree, *, source: RepoUrl | None, default_branches: frozenset[str]
) -> Verdict | None:
    """A Markdown link target from ``file``. None when it is not checked (external, a bare #anchor, a ref
    alone). The #fragment and ?query are not checked."""
    key = ("link", target, posixpath.dirname(file), source, default_branches)
    if key in tree.verdicts:
        return tree.verdicts[key]
    found = tree.verdicts[key] = _resolve_link(
        target, file, tree, source=source, default_branches=default_branches
    )
    return found


def _resolve_link(
    target: str, file: str, tree: Tree, *, source: RepoUrl | None, default_branches: frozenset[str]
) -> Verdict | None:
    target = target.strip()
    if not target or target.startswith("#"):
        return None
    if is_absolute_link(target):
        return _absolute_link(target, tree, source, default_branches)
    path = re.split(r"[#?]", target, maxsplit=1)[0]
    full = link_path(target, file)
    if full is None:
        return None
    if escapes_root(full):
        return unresolved("leaves the repository")
    sub = tree.submodule_above(full)
    if sub is not None:
        return unresolved(f"inside submodule {sub}, whose files the tree does not hold")
    real = tree.resolve(full)
    if real is not None:
        if trailing_slash_on_file(path, tree, real):
            return fail(f"{full} is a file, but the trailing slash names a directory", f"write {path[:-1]}")
        return ok(f"found: {full}" if real == full else f"found: {full} (-> {real})")
    return fail(
        f"no such file or directory: {full}", did_you_mean(tree.suggest_path(full), posixpath.dirname(file))
    )


def is_absolute_link(target: str) -> bool:
    """A link with a scheme (``https:``, ``mailto:``) or to another host (``//host/x``)."""
    return bool(re.match(r"^[A-Za-z][A-Za-z0-9+.-]*:", target)) or target.startswith("//")


def link_path(target: str, file: str) -> str | None:
    """The tree path a relative link of ``file`` names (without its ``?query`` and ``#fragment``; from the
    root for ``/path``; may start with ``..`` when it leaves the tree); None for no path (``#x``, ``?x``)."""
    path = re.split(r"[#?]", target.strip(), maxsplit=1)[0]
    if not path:
        return None
    if path.startswith("/"):
        return join("", path.lstrip("/"))
    return join(posixpath.dirname(file), path)


def _absolute_link(
    target: str, tree: Tree, source: RepoUrl | None, default_branches: frozenset[str]
) -> Verdict | None:
    if source is None:
        return None
    parts = urlsplit(target)
    if parts.scheme not in ("http", "https") or (parts.hostname or "").lower() != source.host:
        return None
    segs = [s for s in parts.path.split("/") if s]
    if len(segs) < 3 or segs[0].lower() != source.owner:
        return None
    name = segs[1][:-4] if segs[1].endswith(".git") else segs[1]
    if name.lower() != source.name or segs[2] not in ("blob", "tree"):
        return None
    return resolve_blob_tree_link(segs[2], [unquote(s) for s in segs[3:]], tree, default_branches)


__all__ = [
    "FAIL",
    "OK",
    "OK_BASENAME",
    "OK_SUFFIX",
    "Tree",
    "bases_of",
    "has_wildcard_dir",
    "is_github_action_ref",
    "is_placeholder_path",
    "resolve_glob_claim",
    "resolve_link",
    "resolve_path_claim",
    "split_blob_tree_link",
]
