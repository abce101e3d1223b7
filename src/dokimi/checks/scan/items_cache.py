"""The Markdown items of guidance files, kept between runs of ``dokimi repo scan``.

pre-commit runs the scan on every commit, and most commits change no guidance: parsing the same files again
(and importing the Markdown parser to do it) was the largest part of a scan of a repository with many
guidance files. The items of a text (its links, code spans, fences and anchors, :class:`MarkdownItems`)
depend on that text alone, so the command keeps them, by a hash of the text, in one file per repository:
``<cache>/scan/<hash of the repository's path>.items``, where ``<cache>`` is DOKIMI_HOME, else
``$XDG_CACHE_HOME/dokimi``, else ``~/.cache/dokimi``. Everything else (the tree, the claims, their verdicts)
is worked out anew on every run.

- A text is found by its BLAKE2b hash (128 bits); one not found is parsed, as without the cache.
- The file names the parser its items came from (the size and modification time of dokimi's Markdown module
  and of markdown-it's package, and the Python version): when either changes, nothing in it is used.
- It holds the items of the last run's texts only, so it never grows past the repository's guidance, and it
  is written (to a new file renamed over the old one) only when that set changed.
- Nothing depends on it: a file that cannot be read is ignored and one that cannot be written is not
  written; the scan's claims are the same either way. Delete the directory to clear it.
"""

from __future__ import annotations

import marshal
import os
import sys
from pathlib import Path

from dokimi.checks.scan import markdown
from dokimi.checks.scan.markdown import CodeSpan, Fence, Link, MarkdownItems, extract
from dokimi.home import cache_directory

#: Bumped when the layout of the file changes.
FORMAT = 2
SUFFIX = ".items"
ItemsData = tuple[
    tuple[tuple[int, str, bool], ...],
    tuple[tuple[int, str], ...],
    tuple[tuple[int, str, tuple[str, ...]], ...],
    tuple[str, ...],
]


def _hash(data: bytes, size: int) -> bytes:
    try:
        from _blake2 import blake2b  # the C module behind hashlib.blake2b, without hashlib's OpenSSL start-up
    except ImportError:  # a Python built without it
        from hashlib import blake2b
    return blake2b(data, digest_size=size).digest()


def cache_file(repository: str) -> Path:
    """The cache file of one repository (its working tree or git directory, as an absolute path)."""
    name = _hash(os.fsencode(repository), 10).hex()
    return cache_directory() / "scan" / f"{name}{SUFFIX}"


def parser_stamp() -> tuple[object, ...]:
    """What the items were made by: this layout, dokimi's Markdown module, markdown-it's package, Python."""
    # repo scan's lean start (tests/checks/scan/test_lean_cli.py)
    import importlib.util

    stamp: list[object] = [FORMAT, sys.hexversion]
    spec = importlib.util.find_spec("markdown_it")
    for origin in (markdown.__file__, spec.origin if spec is not None else None):
        if origin is None:
            stamp.append(None)
            continue
        try:
            st = os.stat(origin)
        except OSError:
            stamp.append(None)
            continue
        stamp.append((origin, st.st_size, st.st_mtime_ns))
    return tuple(stamp)


def to_data(items: MarkdownItems) -> ItemsData:
    return (
        tuple((link.line, link.target, link.image) for link in items.links),
        tuple((span.line, span.text) for span in items.spans),
        tuple((fence.line, fence.info, tuple(fence.lines)) for fence in items.fences),
        tuple(items.anchors),
    )


def from_data(data: ItemsData) -> MarkdownItems:
    links, spans, fences, anchors = data
    return MarkdownItems(
        links=[Link(line, target, image) for line, target, image in links],
        spans=[CodeSpan(line, text) for line, text in spans],
        fences=[Fence(line, info, list(lines)) for line, info, lines in fences],
        anchors=list(anchors),
    )


class ItemsCache:
    """The items of one repository's guidance texts: :meth:`items` parses only a text it has not seen,
    :meth:`save` keeps this run's texts for the next."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.stamp = parser_stamp()
        self.found = self._load()
        self.kept: dict[bytes, ItemsData] = {}
        self.parsed = 0
        """How many texts this run had to parse."""

    def _load(self) -> dict[bytes, ItemsData]:
        try:
            data = self.path.read_bytes()
        except OSError:
            return {}
        try:
            layout, stamp, found = marshal.loads(data)
        except (EOFError, ValueError, TypeError):
            return {}
        if layout != FORMAT or stamp != self.stamp or not isinstance(found, dict):
            return {}
        return found

    def items(self, text: str) -> MarkdownItems:
        """The items of ``text``: from the cache, else parsed."""
        key = _hash(text.encode("utf-8", "surrogatepass"), 16)
        data = self.found.get(key)
        if data is not None:
            try:
                items = from_data(data)
            except (TypeError, ValueError):  # not what this module writes: parse it
                pass
            else:
                self.kept[key] = data
                return items
        items = extract(text)
        self.kept[key] = to_data(items)
        self.parsed += 1
        return items

    def save(self) -> None:
        """Keep this run's texts (nothing is written when they are the ones the file holds)."""
        if not self.parsed and len(self.kept) == len(self.found):
            return
        tmp = self.path.with_name(f".{self.path.name}.{os.getpid()}.tmp")
        try:
            self.path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
            tmp.write_bytes(marshal.dumps((FORMAT, self.stamp, self.kept)))  # type: ignore[arg-type]
            os.replace(tmp, self.path)
        except OSError:
            try:
                tmp.unlink()
            except OSError:
                pass
