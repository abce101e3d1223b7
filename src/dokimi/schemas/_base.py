"""One reader and one writer for every document dokimi reads or writes.

``read_document`` keeps line marks (YAML and JSON), rejects duplicate keys, and turns a pydantic
ValidationError
into a :class:`~dokimi.errors.DocumentError` that names ``file:line: key``. ``write_document`` sorts keys and
writes atomically. Documents from outside (a grader's grade.json, a --static file) go through the same
reader; the
caller decides whether a failure is an error or a finding.
"""

from __future__ import annotations

import difflib
import json
import os
import re
import stat
import tempfile
import typing
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from functools import partial
from itertools import accumulate
from pathlib import Path
from typing import Any, TypeVar

from pydantic import BaseModel, ConfigDict, ValidationError

from dokimi import safefs
from dokimi.controls import json_safe
from dokimi.errors import DocumentError, DokimiError

Loc = tuple[str | int, ...]


class OutputError(DokimiError):
    """A file dokimi was asked to write cannot be written (the place is not a writable directory)."""


#: Deepest nesting a document may have; real documents stay under 10 levels. Deeper input (a hostile
#: result.json of 100,000 brackets) would exhaust Python's recursion limit.
MAX_DEPTH = 64
#: Most values a YAML document may expand to: an alias bomb (a billion laughs) stops here, in about a second,
#: instead of eating memory. YAML documents are written by people (manifests, profiles, rubrics).
MAX_YAML_NODES = 250_000
#: Most values a JSON document may hold (a reach or readiness report of 50,000 claims has under a million).
MAX_JSON_NODES = 5_000_000
#: Largest document file read.
MAX_DOCUMENT_BYTES = 64 * 1024 * 1024
#: Most digits an integer in JSON dokimi did not write may have: every 64-bit integer, signed or not. A longer
#: one (a token count of 400 digits) cannot even be turned into a float, so it would crash the arithmetic
#: done with it; Python itself refuses only past 4,300 digits.
MAX_INT_DIGITS = 20


class Document(BaseModel):
    """Base of every dokimi document: unknown keys are refused, field docstrings go into the JSON Schema."""

    model_config = ConfigDict(extra="forbid", use_attribute_docstrings=True, populate_by_name=True)


class OpenDocument(BaseModel):
    """Base of a document whose other keys belong to someone else (task.json, repo_static.v1): kept,
    unread."""

    model_config = ConfigDict(extra="allow", use_attribute_docstrings=True, populate_by_name=True)


M = TypeVar("M", bound=BaseModel)


@dataclass
class Marked:
    """Parsed data plus the line (1-based) of every mapping key and sequence item, by location tuple."""

    data: Any
    path: str
    lines: dict[Loc, int] = field(default_factory=dict)

    def line(self, loc: Sequence[str | int]) -> int | None:
        """The line of ``loc`` or of its nearest ancestor that has one."""
        loc = tuple(loc)
        while loc:
            if loc in self.lines:
                return self.lines[loc]
            loc = loc[:-1]
        return self.lines.get((), None)


class _Budget:
    """Counts the values a document expands to (aliases counted each time they are used)."""

    def __init__(self, path: str, limit: int) -> None:
        self.path = path
        self.limit = limit
        self.nodes = 0

    def take(self, loc: Loc) -> None:
        self.nodes += 1
        if self.nodes > self.limit:
            raise DocumentError(
                f"expands to more than {self.limit} values (aliases repeated, or a document far too large)",
                path=self.path,
                hint="a YAML alias used many times inside other aliases multiplies; write the values out",
            )
        if len(loc) > MAX_DEPTH:
            raise DocumentError(
                f"nested more than {MAX_DEPTH} levels deep", path=self.path, key=format_loc(loc)
            )


def _finite(value: float, loc: Loc, budget: _Budget) -> float:
    if value != value or value in (float("inf"), float("-inf")):
        raise DocumentError(
            f"{value} is not a finite number", path=budget.path, key=format_loc(loc) or None,
            hint="write a finite number (NaN and infinity are not accepted)",
        )  # fmt: skip
    return value


def _yaml_marks(node: Any, loc: Loc, lines: dict[Loc, int], budget: _Budget) -> Any:
    """Convert a ruamel round-trip tree to plain Python, recording the line of every key and item."""
    # ruamel.yaml costs a start ~30 ms; only YAML input needs it
    from ruamel.yaml.comments import CommentedMap, CommentedSeq

    budget.take(loc)
    if isinstance(node, CommentedMap):
        out: dict[Any, Any] = {}
        for key in node:
            child = (*loc, key if isinstance(key, (str, int)) else str(key))
            try:
                lines[child] = node.lc.key(key)[0] + 1
            except (KeyError, TypeError, AttributeError):
                pass
            out[key] = _yaml_marks(node[key], child, lines, budget)
        return out
    if isinstance(node, CommentedSeq):
        items = []
        for i, item in enumerate(node):
            child = (*loc, i)
            try:
                lines[child] = node.lc.item(i)[0] + 1
            except (KeyError, TypeError, AttributeError):
                pass
            items.append(_yaml_marks(item, child, lines, budget))
        return items
    if isinstance(node, str):
        return str(node)
    if isinstance(node, bool):
        return bool(node)
    if isinstance(node, int):
        return int(node)
    if isinstance(node, float):
        return float(node)
    return node


def _check_plain(data: Any, path: str, *, finite: bool = False) -> None:
    """Depth and size (and with ``finite``, finite numbers) of parsed data, walked without recursion."""
    budget = _Budget(path, MAX_JSON_NODES)
    stack: list[tuple[Any, Loc]] = [(data, ())]
    while stack:
        value, loc = stack.pop()
        budget.take(loc)
        if isinstance(value, dict):
            stack.extend((v, (*loc, k)) for k, v in value.items())
        elif isinstance(value, list):
            stack.extend((v, (*loc, i)) for i, v in enumerate(value))
        elif finite and isinstance(value, float):
            _finite(value, loc, budget)


def _nesting_depth(text: str) -> int:
    """The deepest bracket nesting of JSON or flow YAML text, counted before parsing (strings skipped), so
    that input nested deeper than the parser's recursion limit is refused instead of crashing it."""
    depth = deepest = 0
    for token in re.finditer(r'"(?:[^"\\]|\\.)*"|[\[\]{}]', text):
        char = token.group()
        if char in "[{":
            depth += 1
            deepest = max(deepest, depth)
        elif char in "]}":
            depth -= 1
    return deepest


def not_blank(value: str) -> str:
    """A text value with something in it besides blanks and commas (a list item ``" "`` or ``","`` would
    otherwise read as no value at all: ``tasks: [" "]`` as every task)."""
    if not value.strip(" \t\r\n,"):
        raise ValueError(f"{value!r} is empty: give a value, or leave it out")
    return value


class JsonOverLimit(ValueError):
    """JSON text the bounded reader (:func:`load_json`) refuses before it is parsed: nested too deep, holding
    too many values, or an integer with too many digits. A ValueError, like any other text that is not JSON;
    the message says which limit."""


_JSON_STRING = re.compile(r'"[^"\\]*(?:\\.[^"\\]*)*"')
_NOT_JSON_STRUCTURE = re.compile(r"[^\[\]{},:]+")
_JSON_STEP = {"[": 1, "{": 1, "]": -1, "}": -1}


def _refuse_unbounded_json(text: str, max_depth: int, max_values: int) -> None:
    """JsonOverLimit when ``text`` nests deeper than ``max_depth`` or holds more than ``max_values`` values
    (counted by what opens or separates them: ``[ { , :`` outside strings). Linear and in C but for one pass
    over the brackets, so a 32 MB text is measured in a fraction of a second; text with few brackets and
    separators is not even scanned."""
    opened = text.count("[") + text.count("{")
    if opened <= max_depth and opened + text.count(",") + text.count(":") <= max_values:
        return
    structure = _NOT_JSON_STRUCTURE.sub("", _JSON_STRING.sub("", text))
    values = len(structure) - structure.count("]") - structure.count("}")
    if values > max_values:
        raise JsonOverLimit(f"holds more than {max_values} values")
    brackets = structure.replace(",", "").replace(":", "")
    if max(accumulate(map(_JSON_STEP.__getitem__, brackets)), default=0) > max_depth:
        raise JsonOverLimit(f"nested more than {max_depth} levels deep")


def _bounded_int(max_digits: int, text: str) -> int:
    digits = len(text) - text.startswith("-")
    if digits > max_digits:
        raise JsonOverLimit(f"holds an integer of {digits} digits (more than {max_digits})")
    return int(text)


def load_json(
    text: str | bytes,
    *,
    max_depth: int = MAX_DEPTH,
    max_values: int = MAX_JSON_NODES,
    max_int_digits: int = MAX_INT_DIGITS,
    **options: Any,
) -> Any:
    """``json.loads`` for text dokimi did not write (a trace line, events.jsonl, a grader's or a model's
    JSON, a request to the model gateway): text nested deeper than ``max_depth``, holding more than
    ``max_values`` values, or an integer of more than ``max_int_digits`` digits is a :class:`JsonOverLimit`
    (a ValueError, like any other text that is not JSON, or bytes that are not UTF-8), never a RecursionError
    from the parser or, later, from whatever walks or serialises the value, never an integer too large for
    arithmetic. ``max_values`` bounds the memory the value takes (each value is a Python object of 30 to 100
    bytes, whatever the few bytes of text it was). ``options`` go to json.loads."""
    if isinstance(text, bytes):
        text = text.decode("utf-8")
    _refuse_unbounded_json(text, max_depth, max_values)
    if re.search(f"[0-9]{{{max_int_digits + 1}}}", text):
        options.setdefault("parse_int", partial(_bounded_int, max_int_digits))
    try:
        return json.loads(text, **options)
    except RecursionError:
        raise JsonOverLimit(f"nested more than {max_depth} levels deep") from None


def _refuse_deep(text: str, path: str) -> None:
    if _nesting_depth(text) > MAX_DEPTH:
        raise DocumentError(f"nested more than {MAX_DEPTH} levels deep", path=path)


YAML_TAB_HINT = "YAML indents with spaces, never tabs: replace the tab on that line"


def parse_yaml(text: str, path: str) -> Marked:
    """YAML (safe constructs only) with line marks; duplicate keys and syntax errors name file:line."""
    # ruamel.yaml costs a start ~30 ms; only YAML input needs it
    from ruamel.yaml import YAML
    from ruamel.yaml.constructor import DuplicateKeyError
    from ruamel.yaml.error import MarkedYAMLError, YAMLError

    _refuse_deep(text, path)
    yaml = YAML(typ="rt", pure=True)
    yaml.allow_duplicate_keys = False
    try:
        node = yaml.load(text)
    except DuplicateKeyError as exc:
        mark = exc.problem_mark
        raise DocumentError(
            f"duplicate key: {exc.problem.strip() if exc.problem else 'a key appears twice'}",
            path=path,
            line=mark.line + 1 if mark else None,
            hint="remove one of the two entries; YAML would silently keep only the last",
        ) from None
    except MarkedYAMLError as exc:
        mark = exc.problem_mark or exc.context_mark
        problem = exc.problem or exc.context or ""
        raise DocumentError(
            f"not valid YAML: {problem}",
            path=path,
            line=mark.line + 1 if mark else None,
            hint=YAML_TAB_HINT if "\\t" in problem or "\t" in problem else None,
        ) from None
    except YAMLError as exc:
        raise DocumentError(f"not valid YAML: {exc}", path=path) from None
    except NotImplementedError as exc:  # ruamel's comment handling gives up on some invalid documents
        raise DocumentError(f"not valid YAML: {exc}", path=path) from None
    except RecursionError:
        raise DocumentError(f"nested more than {MAX_DEPTH} levels deep", path=path) from None
    except ValueError as exc:  # a number with more digits than Python converts (4300)
        raise DocumentError(f"not valid YAML: {exc}", path=path) from None
    lines: dict[Loc, int] = {(): 1}
    try:
        return Marked(_yaml_marks(node, (), lines, _Budget(path, MAX_YAML_NODES)), path, lines)
    except RecursionError:  # an alias that contains itself
        raise DocumentError("a YAML alias refers to itself", path=path) from None


def _no_duplicates(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for key, value in pairs:
        if key in out:
            raise _DuplicateJSONKey(key)
        out[key] = value
    return out


class _DuplicateJSONKey(ValueError):
    def __init__(self, key: str) -> None:
        super().__init__(key)
        self.key = key


def parse_json(text: str, path: str) -> Marked:
    """JSON with duplicate keys refused; line marks come from re-reading it as YAML (JSON is YAML 1.2)."""
    _refuse_deep(text, path)
    try:
        data = json.loads(text, object_pairs_hook=_no_duplicates)
    except _DuplicateJSONKey as exc:
        line = _first_line_of_key(text, exc.key, second=True)
        raise DocumentError(
            f"duplicate key {exc.key!r}", path=path, line=line, hint="remove one of the two entries"
        ) from None
    except json.JSONDecodeError as exc:
        raise DocumentError(f"not valid JSON: {exc.msg}", path=path, line=exc.lineno) from None
    except RecursionError:
        raise DocumentError(f"nested more than {MAX_DEPTH} levels deep", path=path) from None
    except ValueError as exc:  # a number with more digits than Python converts (4300)
        raise DocumentError(f"not valid JSON: {exc}", path=path) from None
    _check_plain(data, path)
    return LazyMarked(data, path, text=text)


def json_lines(text: str, path: str) -> dict[Loc, int]:
    """The line of every key and item of a valid JSON text, by re-reading it as YAML (JSON is YAML 1.2)."""
    try:
        return parse_yaml(text, path).lines
    except DocumentError:
        return {(): 1}


@dataclass
class LazyMarked(Marked):
    """A parsed JSON document whose line marks are computed on the first :meth:`line` call.

    Marking a document costs a second, YAML parse (ten times the JSON one); a valid document never needs its
    marks, so most never pay: a batch of 1,000 cells is read several times faster.
    """

    text: str = ""
    _marked: bool = False

    def line(self, loc: Sequence[str | int]) -> int | None:
        if not self._marked:
            self._marked = True
            self.lines = json_lines(self.text, self.path)
        return super().line(loc)


def _first_line_of_key(text: str, key: str, *, second: bool = False) -> int | None:
    needle = json.dumps(key)
    seen = 0
    for number, line in enumerate(text.splitlines(), 1):
        if needle in line:
            seen += 1
            if not second or seen == 2:
                return number
    return None


def decode_text(data: bytes, path: str) -> str:
    if b"\x00" in data[:8192]:
        raise DocumentError("binary data, not a text document", path=path)
    try:
        return data.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        raise DocumentError(f"not UTF-8 text (byte {exc.start})", path=path) from None


def parse_text(text: str, path: str) -> Marked:
    """JSON for ``*.json`` and ``*.jsonl`` lines, YAML otherwise."""
    if path.endswith(".json"):
        return parse_json(text, path)
    return parse_yaml(text, path)


def format_loc(loc: Iterable[str | int]) -> str:
    """``('tasks', 2, 'base')`` -> ``tasks[2].base``."""
    out = ""
    for part in loc:
        if isinstance(part, int):
            out += f"[{part}]"
        else:
            out += f".{part}" if out else str(part)
    return out


def _parse_key(key: str) -> list[str | int]:
    """The inverse of :func:`format_loc`, for looking up a line."""
    return [int(p[1:-1]) if p.startswith("[") else p for p in re.findall(r"\[\d+\]|[^.\[]+", key)]


def _models_in(annotation: Any) -> list[type[BaseModel]]:
    """The document models an annotation can hold (through Optional, list, dict and unions)."""
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return [annotation]
    found: list[type[BaseModel]] = []
    for arg in typing.get_args(annotation):
        found += _models_in(arg)
    return found


def keys_at(model: type[BaseModel], loc: Sequence[str | int]) -> list[str]:
    """The keys ``model`` accepts in the mapping at ``loc`` (as written in the file: aliases, not attribute
    names); empty when ``loc`` does not lead to a document model."""
    models = [model]
    for part in loc:
        if isinstance(part, int):
            continue
        nested: list[type[BaseModel]] = []
        for current in models:
            for name, info in current.model_fields.items():
                if part in (name, info.alias):
                    nested += _models_in(info.annotation)
        if not nested:
            return []
        models = nested
    keys: dict[str, None] = {}
    for current in models:
        for name, info in current.model_fields.items():
            keys[info.alias or name] = None
    return list(keys)


def did_you_mean(key: str, known: Sequence[str], *, cutoff: float = 0.6) -> str | None:
    """The known key ``key`` is most likely a misspelling of, or None (case is ignored)."""
    lowered = {k.lower(): k for k in known}
    match = difflib.get_close_matches(key.lower(), list(lowered), n=1, cutoff=cutoff)
    return lowered[match[0]] if match else None


def unknown_key_hint(key: str, known: Sequence[str]) -> str:
    """``did you mean 'gate'?`` when one known key is close, else the list of the keys allowed there."""
    close = did_you_mean(key, known)
    if close is not None:
        return f"did you mean {close!r}?"
    if known:
        return "the keys allowed here: " + ", ".join(sorted(known))
    return "remove it"


def validation_errors(
    exc: ValidationError, marked: Marked, model: type[BaseModel] | None = None
) -> list[DocumentError]:
    """One DocumentError per pydantic error, with file:line and the dotted key. With ``model``, an unknown
    key gets a "did you mean" hint naming the closest key the document allows at that place."""
    errors = []
    for err in exc.errors(include_url=False):
        loc = tuple(p for p in err["loc"] if isinstance(p, (str, int)))
        # pydantic adds the tag of tagged unions / function validators to loc; keep only real keys for lines
        message = err["msg"]
        hint = None
        if err["type"] == "extra_forbidden":
            message = "unknown key"
            if model is not None and loc and isinstance(loc[-1], str):
                hint = unknown_key_hint(loc[-1], keys_at(model, loc[:-1]))
        elif err["type"] == "missing":
            message = "required key is missing"
        errors.append(
            DocumentError(
                message, path=marked.path, line=marked.line(loc), key=format_loc(loc) or None, hint=hint
            )
        )
    return errors


def validate_marked(marked: Marked, model: type[M]) -> M:
    """Validate parsed data against ``model``; the first problem is raised with its file:line: key. NaN and
    infinity are refused everywhere (a ``timeout_s: NaN`` would switch a timeout off)."""
    try:
        _check_plain(marked.data, marked.path, finite=True)
    except DocumentError as exc:
        exc.line = marked.line(tuple(_parse_key(exc.key))) if exc.key else None
        raise
    try:
        return model.model_validate(marked.data)
    except ValidationError as exc:
        # a misspelled key usually explains the "missing" error beside it, so unknown keys come first
        errors = sorted(validation_errors(exc, marked, model), key=lambda e: e.message != "unknown key")
        first = errors[0]
        if len(errors) > 1:
            more = "; ".join(
                f"{e.key or '(top)'}: {e.message}" + (f", {e.hint}" if e.hint else "") for e in errors[1:4]
            )
            first.message += f" (and {len(errors) - 1} more: {more})"
        raise first from None


def read_raw(path: str | Path, *, trusted: Path | None = None, limit: int = MAX_DOCUMENT_BYTES) -> bytes:
    """The bytes of a document file, as :func:`read_document` reads them: with ``trusted`` no link below it
    is followed; without it a link the user made is followed. Only a regular file of at most ``limit``
    bytes is read: a FIFO, a device, a directory or a larger file is a DocumentError, never a hang."""
    name = str(path)
    try:
        if trusted is not None:
            return safefs.read_bytes(Path(path), trusted=trusted, limit=limit)
        return safefs.read_plain(Path(path), limit=limit)
    except FileNotFoundError:
        raise DocumentError("no such file", path=name) from None
    except safefs.UnsafePathError as exc:
        raise DocumentError(exc.message, path=name, hint=exc.hint) from None
    except OSError as exc:
        raise DocumentError(f"cannot read: {exc.strerror}", path=name) from None


def read_document(
    path: str | Path, model: type[M], *, text: str | None = None, trusted: Path | None = None
) -> M:
    """Read and validate one document. ``text`` overrides reading ``path`` (a blob from a snapshot).

    With ``trusted`` (a directory dokimi made that ``path`` is below: a batch, a run dir) no link is followed
    from there on, for a document an agent or a grader could have replaced; see :func:`read_raw`."""
    name = str(path)
    if text is None:
        text = decode_text(read_raw(path, trusted=trusted), name)
    return validate_marked(parse_text(text, name), model)


def dump_document(document: BaseModel | dict[str, Any]) -> str:
    """Deterministic JSON: sorted keys, two-space indent, trailing newline."""
    data = document.model_dump(mode="json", by_alias=True) if isinstance(document, BaseModel) else document
    return json_safe(json.dumps(data, indent=2, sort_keys=True, ensure_ascii=False)) + "\n"


OUTPUT_HINT = "give a path in a directory you can write (its parents must be directories)"


def make_output_dir(path: Path) -> None:
    """Make the directory ``path`` and its parents: one that cannot be made (``--out /dev/null``, a file in
    the way, no permission, a full disk) is an OutputError naming it, never a traceback."""
    try:
        path.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        why = exc.strerror or str(exc)
        if isinstance(exc, FileExistsError):
            why = "it exists and is not a directory"
        elif isinstance(exc, NotADirectoryError):
            why = "a parent of it is a file, not a directory"
        raise OutputError(f"cannot make this directory: {why}", path=path, hint=OUTPUT_HINT) from None


def write_output(path: Path, text: str) -> None:
    """Write a file the user named (``--out FILE``, ``--html FILE``). A device or a pipe there
    (``/dev/null``, ``/dev/stdout``, a shell's process substitution) is written through: never replaced,
    which as root would put a regular file where ``/dev/null`` was. Anything else is written atomically
    (:func:`write_text_atomic`); a directory there is an OutputError."""
    try:
        st = os.stat(path)
    except OSError:
        st = None
    if st is not None and stat.S_ISDIR(st.st_mode):
        raise OutputError("cannot write here: it is a directory", path=path, hint="name a file") from None
    if st is None or stat.S_ISREG(st.st_mode):
        write_text_atomic(path, text)
        return
    try:
        with open(path, "w", encoding="utf-8", errors="backslashreplace") as handle:
            handle.write(text)
    except OSError as exc:
        raise OutputError(f"cannot write: {exc.strerror or exc}", path=path) from None


def write_text_atomic(path: Path, text: str) -> None:
    """Write ``path`` through a temporary file and a rename. A directory that cannot be made or written (a
    file in the way, no permission, a full disk) is a DokimiError naming the path, never a traceback."""
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    except OSError as exc:
        why = exc.strerror or str(exc)
        if isinstance(exc, (FileExistsError, NotADirectoryError)):
            why = "a parent of it is a file, not a directory"
        raise OutputError(f"cannot write here: {why}", path=path, hint=OUTPUT_HINT) from None
    try:
        # a name read from a directory that is not UTF-8 (a cell directory an agent named) is a lone
        # surrogate in ``text``: written as its escape, which JSON reads back as the same string
        with os.fdopen(fd, "w", encoding="utf-8", errors="backslashreplace") as handle:
            handle.write(text)
        os.replace(tmp, path)
    except OSError as exc:
        try:
            os.unlink(tmp)
        except FileNotFoundError:
            pass
        raise OutputError(f"cannot write: {exc.strerror or exc}", path=path) from None
    except BaseException:
        try:
            os.unlink(tmp)
        except FileNotFoundError:
            pass
        raise


def write_document(path: str | Path, document: BaseModel) -> None:
    """Validate (the model already is) and write atomically with sorted keys."""
    write_text_atomic(Path(path), dump_document(document))
