"""Identifiers in code spans, looked up in the text of every tracked file in ONE ``git grep`` call.

Shapes: snake_case, CamelCase (two humps), ALL_CAPS with an underscore, and dotted names (``pkg.mod.func``).
Found (as a whole word) in a file outside the guidance -> ok. Not found -> unresolved: the name may belong to
a tool, a library or a service outside the tree (for ALL_CAPS a rule of the scan; for the other shapes this
is the scan's choice, because an identifier that appears nowhere is not proof of a mistake). The one fail: a
dotted name whose prefix is a module of the tree (``pkg/mod.py`` or ``pkg/mod/__init__.py``) while the next
part is a name that module never spells (``pkg.mod.gone``): that module is the only place it can live. The
prefix must be at least ``pkg.mod`` and importable under that name (``image.env`` does not name
``src/x/sandbox/image.py``).
"""

from __future__ import annotations

import difflib
import functools
import os
import posixpath
import re
import sys
import threading
from collections import defaultdict
from collections.abc import Iterable
from pathlib import Path

from dokimi.checks.scan.paths import Tree
from dokimi.checks.scan.verdict import Verdict, fail, ok, unresolved
from dokimi.source import git
from dokimi.source.snapshot import Snapshot

ALL_CAPS = re.compile(r"^_*[A-Z][A-Z0-9]*(_[A-Z0-9]+)+_*$")
SNAKE = re.compile(r"^_*[a-z][a-z0-9]*(_[a-z0-9]+)+_*$|^__[a-z][a-z0-9_]*__$")
CAMEL = re.compile(r"^[A-Z][a-z0-9]+([A-Z][A-Za-z0-9]*)+$|^[a-z][a-z0-9]*([A-Z][a-z0-9]+)+$")
DOTTED = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*(\.[A-Za-z_][A-Za-z0-9_]*)+$")
DEFINED = re.compile(
    r"^\s*(?:async\s+)?(?:def|class)\s+([A-Za-z_][A-Za-z0-9_]*)|^([A-Za-z_][A-Za-z0-9_]*)\s*[:=]", re.M
)


def identifier_shape(text: str) -> str | None:
    """all_caps, snake_case, camel_case, dotted or None (``foo()`` counts as ``foo``)."""
    text = text[:-2] if text.endswith("()") else text
    if ALL_CAPS.match(text):
        return "all_caps"
    if SNAKE.match(text):
        return "snake_case"
    if CAMEL.match(text):
        return "camel_case"
    if DOTTED.match(text):
        return "dotted"
    return None


def search_words(
    snapshot: Snapshot, words: Iterable[str], *, exclude: Iterable[str], perl: bool = True
) -> dict[str, set[str]]:
    """Which files (outside ``exclude``) hold each word as a whole word: one ``git grep -w -o`` call.

    What a file holds is what ``git grep -F -w -o`` with one pattern per word reports, but asked as ONE
    pattern (:func:`grep_pattern`): git tries each of many patterns on every line, so a grep for 500 words
    took 10 times one for 50.

    A binary file does not count, by git's own rule (what ``git grep -I`` skips). In a repository the grep
    runs with ``-a`` and the rule is applied afterwards to the files that matched only
    (:meth:`Snapshot.binary_files`): ``-I`` would look up the attributes of every file of the tree, which
    doubled the time of the grep. A directory outside git keeps ``-I`` (no repository to ask about
    attributes). ``perl=False`` asks what a git built without PCRE is asked."""
    wanted = sorted({w for w in words if w})
    found: dict[str, set[str]] = {w: set() for w in wanted}
    if not wanted:
        return found
    excluded = [f":(exclude,literal){p}" for p in sorted(set(exclude))]
    common = ["-z", "-o", "-w", "--no-color", "-H", "--threads", str(grep_threads())]
    if snapshot.rev is not None and snapshot.git_dir is not None:
        if snapshot.promisor:
            # fetch imports hashlib and tempfile, which a scan of a working tree never needs
            from dokimi.source.fetch import prefetch_blobs

            oids = [e.oid for e in snapshot.entries.values() if e.kind == "blob" and e.oid]
            prefetch_blobs(snapshot.git_dir, oids, commit=snapshot.rev)
        head, tail = ["grep", "-a", *common], [snapshot.rev, "--", ".", *excluded]
        git_dir, cwd = snapshot.git_dir, None
        prefix = f"{snapshot.rev}:"
    else:
        root = snapshot.work_tree
        assert root is not None
        mode = ["--untracked", "-a"] if snapshot.git_dir is not None else ["--no-index", "-I"]
        head, tail = ["grep", *mode, *common], ["--", ".", *excluded]
        git_dir, cwd = None, Path(root)
        prefix = ""
    syntax, pattern = grep_pattern(wanted, perl=perl)
    status, out = git.run_git_status(
        [*head, syntax, "-f", "-", *tail], git_dir=git_dir, cwd=cwd, input=pattern
    )
    if status not in (0, 1) and syntax == "-P":  # a git built without PCRE ("USE_LIBPCRE")
        syntax, pattern = grep_pattern(wanted, perl=False)
        argv = [*head, syntax, "-f", "-", *tail]
        out = git.run_git_status(argv, git_dir=git_dir, cwd=cwd, input=pattern)[1]
    holders: defaultdict[str, set[str]] = defaultdict(set)
    for path, match in grep_records(out, prefix):
        holders[match].add(path)
    matched = set().union(*holders.values())
    binary = snapshot.binary_files(matched) if snapshot.git_dir is not None and matched else set()
    for word, files in holders.items():
        if word in found:  # a wanted word is ASCII, so its match decodes the same with any error handler
            found[word].update(files - binary if binary else files)
    return found


def grep_records(out: bytes, prefix: str) -> set[tuple[str, str]]:
    """The distinct (path, match) records of ``git grep -z -o -H`` output (``path\\0match\\n`` each, the
    path after ``prefix`` when it starts with it), by C-level steps: the output decoded whole (records split
    at ASCII bytes decode the same whole or one by one), cut at newlines, made unique (a word a file holds
    many times is one record) before a Python step per distinct record. A line without a NUL (the first part
    of a path holding a newline) is no record, and the rest of such a path is read as a path, as a scan for
    ``path\\0match\\n`` records reads it."""
    lines = out.decode("utf-8", "surrogateescape").split("\n")
    records: set[tuple[str, str]] = set()
    for line in set(lines[:-1]):  # (the last part follows the last newline: no record)
        path, nul, match = line.partition("\0")
        if nul:
            records.add((path[len(prefix) :] if prefix and path.startswith(prefix) else path, match))
    return records


WORD_CHARS = re.compile(r"[A-Za-z0-9_]+")


def grep_pattern(words: list[str], *, perl: bool = True) -> tuple[str, bytes]:
    """One pattern for ``git grep -w -o`` that reports, on every line, the same matches as one ``-F``
    pattern per word: git takes, among the whole-word matches of all patterns, the one that starts first
    and, of those, the longest, then goes on after it.

    A Perl regex (:func:`word_trie_pattern`): the words as a trie, each word bounded by non-word characters
    inside the match, longer words tried before the shorter words they start with. With a dotted name
    (``pkg.mod.x``) a shorter word can be whole where a longer one at the same start is not (``pkg.mod`` in
    ``pkg.mod.y``), which the boundaries inside the match decide. As a trie the regex follows the text one
    character at a time instead of trying every word at every position: 565 words over 3.4 MB took 0.59 s
    as a list of alternatives and 0.08 s as a trie.

    Without PCRE (``perl=False``, a git built without it): words of word characters only as an extended
    regex, longest first (its match is the leftmost-longest, and of words that start at the same place only
    the one that ends where the run of word characters ends can be whole, the longest that matches there);
    with a dotted name, one ``-F`` pattern per word."""
    ordered = sorted(words, key=lambda w: (-len(w), w))
    if perl:
        return "-P", word_trie_pattern(ordered).encode() + b"\n"
    if all(WORD_CHARS.fullmatch(w) for w in ordered):
        return "-E", ("(" + "|".join(ordered) + ")\n").encode()
    return "-F", "\n".join(ordered).encode() + b"\n"


#: Longest word put in the trie: its nesting grows with the word's length and PCRE refuses a pattern nested
#: more than 250 groups deep; longer words (not identifiers anyone writes) go in a list of alternatives.
TRIE_WORD_LIMIT = 100
Trie = dict[str, "Trie"]
NOT_WORD_BEFORE, NOT_WORD_AFTER = "(?<![A-Za-z0-9_])", "(?![A-Za-z0-9_])"


def word_trie_pattern(ordered: list[str]) -> str:
    """A Perl regex matching, at a position, the longest of ``ordered`` (longest first) that is a whole word
    there. A trie: at each branch the text picks at most one child, so the words that can match at a
    position all lie on one path, and trying the longer continuation before stopping at a shorter word
    tries them longest first, as the list of alternatives did."""
    short = [w for w in ordered if len(w) <= TRIE_WORD_LIMIT]
    long = [re.escape(w) for w in ordered if len(w) > TRIE_WORD_LIMIT]
    root: Trie = {}
    for word in short:
        node = root
        for char in word:
            node = node.setdefault(char, {})
        node[""] = {}
    body = "|".join([*long, _trie_regex(root)] if short else long)
    return f"{NOT_WORD_BEFORE}(?:{body}){NOT_WORD_AFTER}"


def _trie_regex(node: Trie) -> str:
    """The regex of a trie node: its children as alternatives (a run of single children as one literal),
    optional when a word ends here (greedy: the longer word is tried first)."""
    literal = ""
    while len(node) == 1 and "" not in node:
        ((char, node),) = node.items()
        literal += _escape(char)
    children = sorted(char for char in node if char)
    if not children:
        return literal
    alternatives = [_escape(char) + _trie_regex(node[char]) for char in children]
    rest = alternatives[0] if len(alternatives) == 1 else "(?:" + "|".join(alternatives) + ")"
    return literal + (f"(?:{rest})?" if "" in node else rest)


@functools.lru_cache(maxsize=512)
def _escape(char: str) -> str:
    """``re.escape`` of one character, asked once per character (a trie of 500 words has thousands)."""
    return re.escape(char)


def grep_threads() -> int:
    """Threads for the one ``git grep``: every core but one, which the scan's own work uses meanwhile."""
    try:
        cores = len(os.sched_getaffinity(0))
    except AttributeError:  # not on Linux
        cores = os.cpu_count() or 1
    return max(1, cores - 1)


class Search:
    """:func:`search_words` in a thread: git grep reads the tree while the scan checks the other claims."""

    def __init__(self, snapshot: Snapshot, words: list[str], exclude: set[str]) -> None:
        self._result: dict[str, set[str]] = {}
        self._error: BaseException | None = None
        self._thread: threading.Thread | None = None
        if words:
            self._thread = threading.Thread(
                target=self._run, args=(snapshot, words, exclude), name="dokimi-scan-grep", daemon=True
            )
            self._thread.start()

    def _run(self, snapshot: Snapshot, words: list[str], exclude: set[str]) -> None:
        try:
            self._result = search_words(snapshot, words, exclude=exclude)
        except BaseException as exc:  # handed to the caller of result()
            self._error = exc

    def result(self) -> dict[str, set[str]]:
        """Which files hold each word (waits for the search; raises what the search raised)."""
        if self._thread is not None:
            self._thread.join()
        if self._error is not None:
            raise self._error
        return self._result


def start_search(snapshot: Snapshot, words: list[str], *, exclude: set[str]) -> Search:
    """Start the one ``git grep`` for ``words`` (none when there are no words); ``.result()`` collects it."""
    return Search(snapshot, words, exclude)


def module_prefix(dotted: str, tree: Tree) -> tuple[str, str, list[str]] | None:
    """The longest prefix of a dotted name that is a module file in the tree: (module path, prefix, rest)."""
    parts = dotted.split(".")
    for cut in range(len(parts), 1, -1):  # at least pkg.mod: one word alone is too weak to be a module
        rel = "/".join(parts[:cut])
        for candidate in (f"{rel}.py", f"{rel}/__init__.py"):
            name = posixpath.basename(candidate)
            paths = [
                p
                for p in tree.snapshot.by_basename.get(name, [])
                if (p == candidate or p.endswith("/" + candidate)) and importable_as(p, candidate, tree)
            ]
            if paths:
                return sorted(paths, key=len)[0], ".".join(parts[:cut]), parts[cut:]
    return None


def resolve_python_module(name: str, bases: list[str] | None, tree: Tree) -> Verdict:
    """``python -m NAME``, found where python finds it.

    ok: a module of the standard library (``sys.stdlib_module_names``: ``unittest``, ``venv``,
    ``http.server``); ``NAME.py`` or a package ``NAME/`` with ``__main__.py`` at the command's directory or
    one of its ancestors (python puts the current directory first on its path), or below a ``src/`` there (a
    src layout, installed in the image); a dotted name anywhere it is importable under that name. fail: a
    package there without ``__main__.py``, which python refuses to run. unresolved: anything else (an
    installed package?), and a one-word module found only elsewhere in the tree."""
    if name.split(".", 1)[0] in sys.stdlib_module_names:
        return ok("a module of the standard library")
    rel = name.replace(".", "/")
    for base in bases or []:
        for root in (base, f"{base}/src" if base else "src"):
            for candidate in (f"{rel}.py", f"{rel}/__main__.py"):
                full = f"{root}/{candidate}" if root else candidate
                if tree.is_file(full):
                    return ok(f"the module {full}")
            package = f"{root}/{rel}/__init__.py" if root else f"{rel}/__init__.py"
            if tree.is_file(package):
                return fail(
                    f"{posixpath.dirname(package)} is a package without __main__.py: python -m cannot run it"
                )
    elsewhere = sorted(
        p
        for candidate in (f"{rel}.py", f"{rel}/__main__.py")
        for p in tree.snapshot.by_basename.get(posixpath.basename(candidate), [])
        if (p == candidate or p.endswith("/" + candidate)) and importable_as(p, candidate, tree)
    )
    if elsewhere and "." in name:
        return ok(f"the module {elsewhere[0]}")
    if elsewhere:
        return unresolved(f"{elsewhere[0]} is not at the command's directory (run from its own?)")
    return unresolved("no module of that name in the tree or the standard library (installed?)")


def importable_as(path: str, candidate: str, tree: Tree) -> bool:
    """Whether ``path`` is importable under the dotted name ``candidate`` spells: the directory above its top
    package is not itself a package (``src/pkg/mod.py`` is ``pkg.mod``; ``a/pkg/mod.py`` with
    ``a/__init__.py`` is not)."""
    root = path[: len(path) - len(candidate)].rstrip("/")
    return not tree.snapshot.is_file(f"{root}/__init__.py" if root else "__init__.py")


def words_needed(text: str) -> list[str]:
    """The words one identifier claim needs searched: itself, and for a dotted name its last part."""
    text = text[:-2] if text.endswith("()") else text
    return [text, text.rsplit(".", 1)[-1]] if "." in text else [text]


def resolve_identifier(
    text: str,
    shape: str,
    hits: dict[str, set[str]],
    module_text: str | None,
    module: tuple[str, str, list[str]] | None,
) -> Verdict:
    name = text[:-2] if text.endswith("()") else text
    files = hits.get(name, set())
    if shape == "dotted" and module is not None:
        path, prefix, rest = module
        if not rest:
            return ok(f"the module {path}")
        if module_text is None:
            return unresolved(f"{path} could not be read")
        member = rest[0]
        if re.search(rf"(?<![A-Za-z0-9_]){re.escape(member)}(?![A-Za-z0-9_])", module_text):
            return ok(f"{member} is in {path}")
        defined = sorted({a or b for a, b in DEFINED.findall(module_text)})
        close = difflib.get_close_matches(member, defined, n=1)
        return fail(
            f"the module {prefix} ({path}) never spells {member}",
            f"did you mean {prefix}.{close[0]}?" if close else None,
        )
    if files:
        first = min(files)
        more = f" and {len(files) - 1} more" if len(files) > 1 else ""
        return ok(f"in {first}{more}")
    if shape == "dotted":
        last = name.rsplit(".", 1)[-1]
        if hits.get(last):
            return ok(f"its last part {last} is in {min(hits[last])}")
    if shape == "all_caps":
        return unresolved("in no tracked file; a tool outside the tree may read it")
    return unresolved("in no tracked file outside the guidance (a name from outside the tree?)")
