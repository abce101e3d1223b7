"""What makes a task weak or its prompt leaky, read from the task's own patches (no git, no container).

A study compares arms on tasks; a task whose prompt gives the fix away, or whose hidden tests demand one
particular fix, measures something else. ``repo validate`` turns these facts into warnings
(dokimi.checks.validate):

- :func:`parse_patch`: per file of a git diff, its added and removed lines;
- :func:`defined_names`: the names a patch's added lines define (``def``, ``class``, an assignment at the
  start of a line), the identifiers a fix adds;
- :func:`referenced_names`: the names added test lines use (calls, attributes, imports);
- :func:`code_shaped`: an identifier no prose word looks like (``snake_case``, ``camelCase``, ``_private``);
- :func:`prompt_names_word` and :func:`prompt_names_file`: whether a prompt spells a name or a file.
"""

from __future__ import annotations

import posixpath
import re
from dataclasses import dataclass, field

_DIFF_FILE = re.compile(r"^diff --git a/(.+?) b/(.+)$")
_DEFINITION = re.compile(
    r"^\s*(?:async\s+def|def|class|function|func|fn|struct|enum|interface|type)\s+([A-Za-z_]\w*)"
    r"|^([A-Za-z_]\w*)\s*(?::[^=]+)?=[^=]"
)
_CALL_OR_ATTRIBUTE = re.compile(r"(?:\.|\b)([A-Za-z_]\w*)\s*\(|\.([A-Za-z_]\w*)")
_IMPORTED = re.compile(r"^\s*from\s+[\w.]+\s+import\s+\(?([\w\s,]+)\)?|^\s*import\s+([\w.]+)")
_CAMEL = re.compile(r"[a-z][A-Z]")


@dataclass
class FileChange:
    """One file of a patch: the lines it adds and removes (without the leading ``+`` / ``-``)."""

    added: list[str] = field(default_factory=list)
    removed: list[str] = field(default_factory=list)


def parse_patch(text: str) -> dict[str, FileChange]:
    """Path (the new side; the old side for a deletion) -> its added and removed lines."""
    files: dict[str, FileChange] = {}
    current: FileChange | None = None
    in_hunk = False
    for line in text.splitlines():
        header = _DIFF_FILE.match(line)
        if header:
            current = files.setdefault(header.group(2), FileChange())
            in_hunk = False
        elif current is None:
            continue
        elif line.startswith("@@"):
            in_hunk = True
        elif in_hunk and line.startswith("+"):
            current.added.append(line[1:])
        elif in_hunk and line.startswith("-"):
            current.removed.append(line[1:])
    return files


def defined_names(lines: list[str]) -> set[str]:
    """Names the lines define: ``def f``, ``class C``, ``function f``, ``NAME = ...`` at the line's start."""
    names: set[str] = set()
    for line in lines:
        match = _DEFINITION.match(line)
        if match:
            names.add(match.group(1) or match.group(2))
    return names


def referenced_names(lines: list[str]) -> set[str]:
    """Names the lines use: every call ``f(``, attribute ``.name`` and imported name."""
    names: set[str] = set()
    for line in lines:
        code = line.split("#", 1)[0]
        imported = _IMPORTED.match(code)
        if imported:  # the names it brings in, not the modules on the way
            words = imported.group(1) or imported.group(2).rsplit(".", 1)[-1]
            names.update(w for w in re.split(r"[\s,]+", words) if w and w != "as")
            continue
        for call, attribute in _CALL_OR_ATTRIBUTE.findall(code):
            names.add(call or attribute)
    return names


def code_shaped(name: str) -> bool:
    """An identifier no English word looks like: it holds ``_`` (``snake_case``, ``_private``) or a lower
    letter followed by a capital (``camelCase``)."""
    return "_" in name.strip("_") or name.startswith("_") or bool(_CAMEL.search(name))


def prompt_names_word(prompt: str, word: str) -> bool:
    """Whether ``word`` stands in the prompt as a whole identifier (not inside a longer one)."""
    return re.search(rf"(?<![\w]){re.escape(word)}(?![\w])", prompt) is not None


def prompt_names_file(prompt: str, path: str) -> str | None:
    """How the prompt names ``path``: the path itself, or its file name with its extension (``core.py``);
    None when it does not. A dotted module name (``pkg.core``) is a bug report's vocabulary, not counted."""
    if re.search(rf"(?<![\w/.-]){re.escape(path)}(?![\w/-])", prompt):
        return path
    name = posixpath.basename(path)
    if "." in name.strip(".") and re.search(rf"(?<![\w/.-]){re.escape(name)}(?![\w/-])", prompt):
        return name
    return None


def hidden_test_names(test_ids: list[str]) -> set[str]:
    """The function (and class) names of pytest ids: ``tests/test_a.py::TestX::test_y[1]`` ->
    ``TestX``, ``test_y``."""
    names: set[str] = set()
    for test_id in test_ids:
        for part in test_id.split("::")[1:]:
            names.add(part.split("[", 1)[0])
    return {n for n in names if n}
