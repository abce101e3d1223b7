"""Shell text split into simple commands by a real parser (bashlex; shlex when bashlex cannot parse).

Rules (contract §8): lines are split at ``&&``, ``||``, ``|``, ``;`` and ``&``; redirections are dropped; a
line continued with a trailing backslash is one command reported at its first line; a comment line ends a
continuation; the body of a heredoc is not a command. A word holding an expansion (``$VAR``, ``${VAR}``,
``$(cmd)``, a backtick substitution, ``~``) is marked non-literal and never looked up. Subshells are marked
with :class:`ScopeOpen`/:class:`ScopeClose` so a ``cd`` inside one ends at its ``)``.
"""

from __future__ import annotations

import functools
import re
import shlex
from dataclasses import dataclass, field
from typing import Any

PROMPT = re.compile(r"^\s*[$%]\s+")
HEREDOC = re.compile(r"<<(-?)\s*(['\"]?)([A-Za-z_][A-Za-z0-9_]*)\2")
EXPANSION = re.compile(r"\$|`")
MAX_JOIN_LINES = 30
SHELL_FENCES = frozenset(
    {"bash", "sh", "shell", "zsh", "console", "shell-session", "shellsession", "terminal", "ksh"}
)
SESSION_FENCES = frozenset({"console", "shell-session", "shellsession", "terminal"})


@dataclass(frozen=True)
class Word:
    text: str
    literal: bool
    """False when the word holds an expansion: never looked up."""


@dataclass
class Command:
    line: int
    words: list[Word]
    assignments: list[Word] = field(default_factory=list)
    after: str | None = None
    """The operator before this command in its list: ``&&``, ``||``, ``;``, ``&`` or None."""
    piped: bool = False
    """Part of a pipeline (runs in a subshell: a cd there changes nothing after it)."""
    note: str | None = None
    """Set when bashlex could not parse the line and shlex split it instead."""

    @property
    def argv(self) -> list[str]:
        return [w.text for w in self.words]


@dataclass(frozen=True)
class ScopeOpen:
    line: int


@dataclass(frozen=True)
class ScopeClose:
    line: int


Item = Command | ScopeOpen | ScopeClose


def is_shell_fence(info: str) -> bool:
    return info.split()[0].lower() in SHELL_FENCES if info.split() else False


def logical_lines(lines: list[str], first_line: int, *, session: bool = False) -> list[tuple[int, str]]:
    """Commands of a fence as (line, text): prompts stripped (output lines dropped when prompts are used),
    backslash continuations joined, comment lines ending a continuation, heredoc bodies skipped."""
    prompted = session or any(PROMPT.match(line) for line in lines)
    out: list[tuple[int, str]] = []
    pending: tuple[int, str] | None = None
    heredoc: tuple[str, bool] | None = None
    for offset, raw in enumerate(lines):
        number = first_line + offset
        if heredoc is not None:
            delimiter, strip_tabs = heredoc
            if (raw.lstrip("\t") if strip_tabs else raw).rstrip() == delimiter:
                heredoc = None
            continue
        text = raw
        if pending is None:
            if prompted:
                match = PROMPT.match(text)
                if not match:
                    continue  # output of the previous command
                text = text[match.end() :]
            if not text.strip() or text.lstrip().startswith("#"):
                continue
            pending = (number, text)
        else:
            if text.lstrip().startswith("#"):  # a comment line ends the continuation
                out.append(pending)
                pending = None
                continue
            pending = (pending[0], pending[1] + " " + text)
        body = pending[1]
        if _continues(body):
            pending = (pending[0], body.rstrip()[:-1])
            continue
        for match in HEREDOC.finditer(body):
            heredoc = (match.group(3), match.group(1) == "-")
        out.append(pending)
        pending = None
    if pending is not None:
        out.append((pending[0], pending[1].rstrip().rstrip("\\")))
    return out


def _continues(text: str) -> bool:
    stripped = text.rstrip()
    trailing = len(stripped) - len(stripped.rstrip("\\"))
    return trailing % 2 == 1


@functools.lru_cache(maxsize=8192)
def _parse(text: str) -> tuple[Any, ...]:
    """bashlex's parse, cached by text (guidance repeats its commands); raises when it cannot parse.
    bashlex is imported here, on the first line that is not plain: building its parser costs about 60 ms."""
    import bashlex  # type: ignore[import-untyped]

    return tuple(bashlex.parse(text))


#: A line of plain words and the four list operators, nothing bash could read otherwise: no quotes, no
#: expansions, globs, redirections, assignments (``=``), comments, subshells, braces or background ``&``.
PLAIN_LINE = re.compile(r"[A-Za-z0-9_./:@%+,\- \t]*(?:(?:&&|\|\||\||;)[A-Za-z0-9_./:@%+,\- \t]*)*")
PLAIN_OPERATOR = re.compile(r"&&|\|\||\||;")
RESERVED_WORDS = frozenset(
    """if then else elif fi case esac for select while until do done in function time coproc""".split()
)


def plain_commands(text: str, line: int) -> list[Item] | None:
    """The commands of a plain line (:data:`PLAIN_LINE`: ``make x && python y.py | tee z``) without bashlex,
    exactly as bashlex would give them; None for any other line (then bashlex parses it). No reserved word
    anywhere, no empty command and nothing after a last operator, so every line taken here is one bashlex
    parses the plain way. tests/scan/test_shell.py holds this to bashlex on many generated lines."""
    if not PLAIN_LINE.fullmatch(text):
        return None
    pieces = PLAIN_OPERATOR.split(text)
    operators = PLAIN_OPERATOR.findall(text)
    commands = [piece.split() for piece in pieces]
    if not all(commands) or any(word in RESERVED_WORDS for words in commands for word in words):
        return None
    items: list[Item] = []
    after: str | None = None
    for index, words in enumerate(commands):
        before = operators[index - 1] if index else None
        after_pipe = index < len(operators) and operators[index] == "|"
        piped = before == "|" or after_pipe
        if before is not None and before != "|":
            after = before
        items.append(
            Command(
                line, [Word(w, True) for w in words], [], after="|" if before == "|" else after, piped=piped
            )
        )
    return items


def strip_heredocs(text: str) -> str:
    return HEREDOC.sub("", text)


def split_commands(text: str, line: int) -> list[Item]:
    """Simple commands of one logical shell line (heredoc operators removed first)."""
    plain = plain_commands(text, line)
    return plain if plain is not None else bashlex_commands(text, line)


def bashlex_commands(text: str, line: int) -> list[Item]:
    """Simple commands of one logical shell line by bashlex (shlex when bashlex cannot parse it)."""
    text = strip_heredocs(text)
    try:
        nodes = _parse(text)
    except Exception as exc:  # bashlex raises several error types, all mean "cannot parse"
        return _shlex_split(text, line, f"{type(exc).__name__}: {exc}")
    items: list[Item] = []
    for node in nodes:
        _walk(node, items, line, None, False)
    return items


def split_fence(lines: list[str], first_line: int, *, session: bool = False) -> list[Item]:
    """Every simple command of a shell fence. A line that only parses together with the following ones (an
    ``if``/``for`` block, a multi-line string) is joined with them, up to a limit."""
    logical = logical_lines(lines, first_line, session=session)
    items: list[Item] = []
    i = 0
    while i < len(logical):
        number, text = logical[i]
        parsed = plain_commands(text, number)
        if parsed is not None:
            items.extend(parsed)
            i += 1
            continue
        joined = text
        for j in range(i, min(len(logical), i + MAX_JOIN_LINES)):
            if j > i:
                joined += "\n" + logical[j][1]
            try:
                nodes = _parse(strip_heredocs(joined))
            except Exception:
                continue
            parsed = []
            for node in nodes:
                _walk(node, parsed, number, None, False)
            i = j + 1
            break
        if parsed is None:
            parsed = split_commands(text, number)
            i += 1
        items.extend(parsed)
    return items


def _word(node: Any) -> Word:
    literal = not any(
        p.kind in ("parameter", "commandsubstitution", "processsubstitution", "tilde")
        for p in getattr(node, "parts", [])
    )
    return Word(node.word, literal)


def _walk(node: Any, out: list[Item], line: int, after: str | None, piped: bool) -> None:
    kind = node.kind
    if kind == "list":
        op: str | None = after
        for part in node.parts:
            if part.kind == "operator":
                op = part.op
                continue
            _walk(part, out, line, op, piped)
    elif kind == "pipeline":
        commands = [p for p in node.parts if p.kind != "pipe"]
        for index, part in enumerate(commands):
            _walk(part, out, line, after if index == 0 else "|", True)
    elif kind == "compound":
        opener = node.list[0] if node.list else None
        subshell = opener is not None and opener.kind == "reservedword" and opener.word == "("
        if subshell:
            out.append(ScopeOpen(line))
        for part in node.list:
            if part.kind != "reservedword":
                _walk(part, out, line, after, piped)
        if subshell:
            out.append(ScopeClose(line))
    elif kind in ("if", "for", "while", "until"):
        for part in node.parts:
            if part.kind in ("list", "command", "compound", "pipeline"):
                _walk(part, out, line, after, piped)
    elif kind == "command":
        words: list[Word] = []
        assignments: list[Word] = []
        for part in node.parts:
            if part.kind == "word":
                words.append(_word(part))
            elif part.kind == "assignment" and not words:
                assignments.append(_word(part))
        if words or assignments:
            out.append(Command(line, words, assignments, after=after, piped=piped))
    # function definitions, redirections alone, reserved words: nothing to check


OPERATORS = frozenset({"&&", "||", "|", ";", "&", ";;", "|&"})


def _shlex_split(text: str, line: int, error: str) -> list[Item]:
    note = f"shell parsed with shlex (bashlex could not parse: {error})"
    lexer = shlex.shlex(text, posix=True, punctuation_chars="();<>|&")
    lexer.whitespace_split = True
    lexer.commenters = "#"
    try:
        tokens = list(lexer)
    except ValueError:
        tokens = text.split()
    items: list[Item] = []
    words: list[Word] = []
    after: str | None = None
    piped = False
    redirect = False

    def flush(next_after: str | None) -> None:
        nonlocal words, after, piped
        if words:
            assignments = []
            while words and re.match(r"^[A-Za-z_][A-Za-z0-9_]*=", words[0].text):
                assignments.append(words.pop(0))
            items.append(
                Command(line, words, assignments, after=after, piped=piped or next_after == "|", note=note)
            )
        words = []
        after = next_after
        piped = next_after == "|"

    for token in tokens:
        if token in OPERATORS:
            flush(token)
        elif token in ("(", ")"):
            flush(after)
            items.append(ScopeOpen(line) if token == "(" else ScopeClose(line))
        elif set(token) <= set("<>&"):
            redirect = True
        elif redirect:
            redirect = False
        else:
            words.append(Word(token, not EXPANSION.search(token) and not token.startswith("~")))
    flush(None)
    return items
