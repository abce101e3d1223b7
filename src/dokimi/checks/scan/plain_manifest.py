"""The manifest keys the scan reads, without pydantic or the YAML library, when that is sure to be right.

A scan with a manifest needs four things from it: the guidance globs, ``also_scan``, ``build_systems`` and
``source.url``. Loading it the usual way (:func:`dokimi.repo.manifest.load_manifest`: ruamel's YAML reader,
then the repo_manifest.v1 model) costs more than the scan of a typical repository's guidance, most of it in
imports. :func:`plain_scan_keys` reads the manifest itself, but only a document written in a plain subset
of YAML (block mappings, scalars on one line, lists of scalars) whose every key and value fits the model
exactly. It answers None for anything else: then the usual loader reads the manifest and reports what is
wrong with it, with its messages. So a manifest the plain reader accepts is one the model accepts, with the
same values, and every manifest the model rejects is rejected by the model.
"""

from __future__ import annotations

import re
from typing import TYPE_CHECKING, NamedTuple

from dokimi.constants import DEFAULT_EVAL_DIR, DEFAULT_GUIDANCE_GLOBS, DEFAULT_MANIFEST_NAME, MAX_REPS

if TYPE_CHECKING:
    from collections.abc import Callable
    from pathlib import Path

    from dokimi.checks.scan.suppress import IgnoreEntry
    from dokimi.source.snapshot import Snapshot

SCHEMA = "repo_manifest.v1"
DEFAULT_MANIFEST_PATH = f"{DEFAULT_EVAL_DIR}/{DEFAULT_MANIFEST_NAME}"
#: Longer manifests go to the usual loader (its node and depth limits are then the ones that apply).
MAX_PLAIN_BYTES = 64 * 1024


class ScanKeys(NamedTuple):
    """What the scan takes from a manifest."""

    path: str | None
    """Where the manifest came from (None: no manifest)."""
    globs: list[str]
    also_scan: list[str]
    build_systems: list[str] | None
    source_url: str | None
    ignore: list[IgnoreEntry] = []
    """The manifest's ``scan.ignore`` (a plain manifest has none: its entries are mappings in a list, which
    the usual loader reads)."""


class NotPlain(Exception):
    """The document is outside the plain subset: the usual loader decides."""


def plain_scan_keys(
    snapshot: Snapshot, *, manifest: str | None, manifest_file: Path | None
) -> ScanKeys | None:
    """The scan's keys of the manifest that ``load_manifest`` would find, or None when the usual loader must
    read it (none at the default place, a file that cannot be read, YAML outside the plain subset, a value
    the model would refuse or convert)."""
    try:
        found = _read(snapshot, manifest, manifest_file)
        if found is None:
            return None
        name, raw = found
        return scan_keys_of(name, parse_plain_yaml(raw))
    except NotPlain:
        return None


def _read(snapshot: Snapshot, manifest: str | None, manifest_file: Path | None) -> tuple[str, bytes] | None:
    """The manifest's name and bytes as the usual loader finds them, or None for anything unusual (the usual
    loader then says what)."""
    if manifest and manifest_file:
        return None
    try:
        if manifest_file is not None:
            # repo scan's lean start (tests/checks/scan/test_lean_cli.py)
            from dokimi import safefs

            return str(manifest_file), safefs.read_plain(manifest_file, limit=MAX_PLAIN_BYTES)
        path = manifest or DEFAULT_MANIFEST_PATH
        if path.startswith("/") or any(part in ("", ".", "..") for part in path.split("/")):
            return None  # a path the loader normalizes or refuses
        if not snapshot.is_file(path):
            return None
        return path, snapshot.read(path)
    except Exception:  # whatever it is, the usual loader reports it
        return None


# --- the plain YAML subset ----------------------------------------------------------------------------------

#: A key: a plain word.
KEY = r"[A-Za-z_][A-Za-z0-9_]*"
#: A plain scalar that YAML reads as a string in any context: it starts with a letter, ``_``, ``/`` or
#: ``.`` (not with a digit, a sign or an indicator such as ``*``, ``&``, ``!``, ``-``, ``?``, ``:``, ``#``,
#: a quote or a bracket), and holds no character that could end it or start a comment.
FLOW_PLAIN = r"(?:[A-Za-z_/]|\.(?![0-9]))[A-Za-z0-9_./@+~*?-]*"
#: In a block mapping a plain scalar may also hold single spaces and a ``:`` not followed by a space.
BLOCK_PLAIN = r"(?:[A-Za-z_/]|\.(?![0-9]))(?:[A-Za-z0-9_./@+~*?(){},-]|:(?=[^\s:])| (?=[^\s#]))*"
DOUBLE = r'"[^"\\]*"'
SINGLE = r"'(?:[^']|'')*'"
END = r"[ ]*(?:[ ]#.*)?$"
#: Plain words YAML reads as something other than a string (YAML 1.2 and 1.1 booleans and nulls, infinity
#: and not-a-number).
NOT_STRINGS = re.compile(r"(?i:true|false|yes|no|on|off|y|n|null|~|[-+]?\.(?:inf|nan))")

KEY_LINE = re.compile(rf"(?P<indent>[ ]*)(?P<key>{KEY}):(?:$|{END}|[ ]+(?P<value>.*?)$)")
ITEM_LINE = re.compile(r"(?P<indent>[ ]*)-(?:[ ]+(?P<value>.*?))?$")
SCALAR = re.compile(
    rf"(?P<double>{DOUBLE})|(?P<single>{SINGLE})|(?P<int>[1-9][0-9]{{0,8}})(?={END})|(?P<plain>{BLOCK_PLAIN})"
)
FLOW_ITEM = re.compile(
    rf"[ ]*(?:(?P<double>{DOUBLE})|(?P<single>{SINGLE})|(?P<plain>{FLOW_PLAIN}))[ ]*(?P<sep>,|\])"
)


def parse_plain_yaml(raw: bytes) -> dict[str, object]:
    """A YAML document of the plain subset as Python data, or :class:`NotPlain`.

    The subset: UTF-8 without a byte-order mark, printable ASCII outside comment lines (no tab, no carriage
    return), an optional ``---`` first line, block mappings of plain keys, each value on the key's line (a
    scalar, or a one-line ``[...]`` list of scalars) or below it (a mapping indented deeper, or ``- scalar``
    items at the key's indent or deeper).
    Scalars: a double-quoted string without escapes, a single-quoted string, a positive integer of up to 9
    digits, or a plain string that YAML cannot read as anything else (a boolean, a null, a number).
    """
    if len(raw) > MAX_PLAIN_BYTES:
        raise NotPlain
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError:
        raise NotPlain from None
    lines: list[str] = []
    for line in text.split("\n"):
        stripped = line.lstrip(" ")
        if not stripped or (stripped[0] == "#" and comment_line(line)):
            continue
        if not (line.isascii() and line.isprintable()):
            raise NotPlain
        lines.append(line)
    if lines and lines[0] == "---":
        lines = lines[1:]
    root: dict[str, object] = {}
    # open mappings: (indent of their keys, the mapping); a key without a value waits for its block
    stack: list[tuple[int, dict[str, object]]] = [(0, root)]
    pending: tuple[int, dict[str, object], str] | None = None  # (indent of the key, its mapping, the key)
    items: list[object] | None = None
    items_indent = -1
    for line in lines:
        indent = len(line) - len(line.lstrip(" "))
        if items is not None:
            if indent == items_indent and line[indent] == "-":
                items.append(_item(line))
                continue
            items = None
        if pending is not None:
            key_indent, mapping, key = pending
            pending = None
            if line[indent] == "-" and indent >= key_indent:
                items, items_indent = [_item(line)], indent
                mapping[key] = items
                continue
            if indent <= key_indent:
                raise NotPlain  # `key:` with nothing under it is a null
            child: dict[str, object] = {}
            mapping[key] = child
            stack.append((indent, child))
        while stack and indent < stack[-1][0]:
            stack.pop()
        if not stack or indent != stack[-1][0]:
            raise NotPlain
        match = KEY_LINE.fullmatch(line)
        if match is None:
            raise NotPlain
        mapping = stack[-1][1]
        key = _plain(match["key"])
        if key in mapping:
            raise NotPlain  # a duplicate key: the usual loader names it
        if match["value"] is None:
            pending = (indent, mapping, key)
            mapping[key] = None
        else:
            mapping[key] = _value(match["value"])
    if pending is not None:
        raise NotPlain
    return root


def comment_line(line: str) -> bool:
    """Whether a line that starts with ``#`` is a comment as YAML reads it: printable text in any script (not
    a character YAML refuses, nor one it reads as a line break or a byte-order mark: ``isprintable`` is false
    for controls, separators of lines and paragraphs, format characters and unassigned code points)."""
    return line.isprintable()


def _item(line: str) -> object:
    match = ITEM_LINE.fullmatch(line)
    if match is None or match["value"] is None:
        raise NotPlain
    value = _value(match["value"])
    if isinstance(value, list):
        raise NotPlain
    return value


def _value(text: str) -> object:
    """One value on a key's (or an item's) line: a scalar, or a one-line flow list of scalars."""
    if text.startswith("["):
        return _flow_list(text)
    match = SCALAR.match(text)
    if match is None or not re.fullmatch(END, text[match.end() :]):
        raise NotPlain
    if match["double"] is not None:
        return match["double"][1:-1]
    if match["single"] is not None:
        return match["single"][1:-1].replace("''", "'")
    if match["int"] is not None:
        return int(match["int"])
    return _plain(match["plain"])


def _flow_list(text: str) -> list[object]:
    out: list[object] = []
    at = 1
    if re.match(r"[ ]*\]", text[at:]):
        rest = text[text.index("]") + 1 :]
    else:
        while True:
            match = FLOW_ITEM.match(text, at)
            if match is None:
                raise NotPlain
            if match["double"] is not None:
                out.append(match["double"][1:-1])
            elif match["single"] is not None:
                out.append(match["single"][1:-1].replace("''", "'"))
            else:
                out.append(_plain(match["plain"]))
            at = match.end()
            if match["sep"] == "]":
                break
            if re.match(r"[ ]*\]", text[at:]):
                raise NotPlain  # a trailing comma
        rest = text[at:]
    if not re.fullmatch(END, rest):
        raise NotPlain
    return out


def _plain(word: str) -> str:
    if NOT_STRINGS.fullmatch(word):
        raise NotPlain
    return word


# --- the model's rules, for what the subset can hold --------------------------------------------------------

#: Each mapping's keys -> the rule its value must meet: a rule of :data:`VALUES` or another mapping's name.
#: A key the model does not know, a value of another type (the model refuses some and converts others) and
#: what the subset cannot hold (``image.caches``, a list of mappings) go to the usual loader.
MAPPINGS: dict[str, dict[str, str]] = {
    "manifest": {
        "schema": "schema",
        "id": "str",
        "source": "source",
        "eval_dir": "str",
        "guidance": "guidance",
        "image": "image",
        "entry_points": "entry_points",
        "tasks": "str",
        "explore_tasks": "str",
        "build_systems": "strings",
        "tests": "tests",
        "pilot": "pilot",
    },
    "source": {"url": "str"},
    "guidance": {"globs": "strings", "also_scan": "strings"},
    "image": {"dockerfile": "str", "env": "env", "network": "network", "limits": "limits"},
    "limits": {"memory": "memory", "pids": "pids", "workspace_mb": "workspace_mb"},
    "entry_points": {"grade": "str", "oracle": "str", "static": "str", "perf": "str"},
    "tests": {"globs": "strings", "config_globs": "strings", "list": "str", "run": "str"},
    "pilot": {"tasks": "pilot_tasks", "reps": "reps"},
}
REQUIRED = {
    "manifest": ("schema", "id"),
    "image": ("dockerfile",),
    "entry_points": ("grade",),
    "pilot": ("tasks",),
}


def _is_int(value: object, low: int, high: int) -> bool:
    return type(value) is int and low <= value <= high


VALUES: dict[str, Callable[[object], bool]] = {
    "str": lambda value: isinstance(value, str),
    "schema": lambda value: value == SCHEMA,
    "strings": lambda value: isinstance(value, list) and all(isinstance(item, str) for item in value),
    "env": lambda value: isinstance(value, dict) and all(isinstance(v, str) for v in value.values()),
    "network": lambda value: value in ("none", "public"),
    "memory": lambda value: isinstance(value, str) and re.fullmatch(r"[1-9][0-9]*[kmg]?", value) is not None,
    "pids": lambda value: _is_int(value, 64, 1_000_000),
    "workspace_mb": lambda value: _is_int(value, 1, 10**9),
    "pilot_tasks": lambda value: (
        isinstance(value, list)
        and 1 <= len(value) <= 100
        and all(isinstance(item, str) for item in value)
        and len(set(value)) == len(value)
    ),
    "reps": lambda value: _is_int(value, 1, MAX_REPS),
}


def fits(mapping: str, data: object) -> bool:
    """Whether ``data`` is the model's mapping ``mapping``: every key known, every value meeting its rule,
    every required key there."""
    if not isinstance(data, dict):
        return False
    rules = MAPPINGS[mapping]
    if any(key not in data for key in REQUIRED.get(mapping, ())):
        return False
    if mapping == "entry_points" and "oracle" not in data and not builtin_grade(data["grade"]):
        return False
    for key, value in data.items():
        rule = rules.get(key)
        if rule is None:
            return False
        if not (fits(rule, value) if rule in MAPPINGS else VALUES[rule](value)):
            return False
    return True


def builtin_grade(grade: object) -> bool:
    """A built-in grader (``builtin:...``), whose oracle defaults to ``builtin:oracle``."""
    return isinstance(grade, str) and grade.strip().startswith("builtin:")


def scan_keys_of(path: str, data: dict[str, object]) -> ScanKeys:
    """The scan's keys of a plain manifest that fits the model, or :class:`NotPlain`."""
    if not fits("manifest", data):
        raise NotPlain
    guidance = data.get("guidance", {})
    source = data.get("source")
    assert isinstance(guidance, dict)
    systems = data.get("build_systems")
    return ScanKeys(
        path=path,
        globs=list(guidance.get("globs", DEFAULT_GUIDANCE_GLOBS)),
        also_scan=list(guidance.get("also_scan", [])),
        build_systems=list(systems) if isinstance(systems, list) and systems else None,
        source_url=source.get("url") if isinstance(source, dict) else None,
    )
