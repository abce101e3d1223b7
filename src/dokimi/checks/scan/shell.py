"""Shell text split into simple commands by a real parser (tree-sitter's bash grammar; shlex when it cannot
parse).

Rules: lines are split at ``&&``, ``||``, ``|``, ``;`` and ``&``; redirections are dropped; a
line continued with a trailing backslash is one command reported at its first line; a comment line ends a
continuation; the body of a heredoc is not a command. A word holding an expansion (``$VAR``, ``${VAR}``,
``$(cmd)``, a backtick substitution, ``~``) is marked non-literal and never looked up. Subshells are marked
with :class:`ScopeOpen`/:class:`ScopeClose` so a ``cd`` inside one ends at its ``)``.
"""

from __future__ import annotations

import functools
import os
import re
import shlex
from dataclasses import dataclass, field
from typing import Any, NamedTuple

PROMPT = re.compile(r"^\s*[$%]\s+")
HEREDOC = re.compile(r"<<(-?)\s*(['\"]?)([A-Za-z_][A-Za-z0-9_]*)\2")
EXPANSION = re.compile(r"\$|`")
MAX_JOIN_LINES = 30
SHELL_FENCES = frozenset(
    {"bash", "sh", "shell", "zsh", "console", "shell-session", "shellsession", "terminal", "ksh"}
)
SESSION_FENCES = frozenset({"console", "shell-session", "shellsession", "terminal"})


class Word(NamedTuple):
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
    """Set when the bash grammar could not parse the line and shlex split it instead."""

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


class ShellSyntaxError(ValueError):
    """tree-sitter found a syntax error in the text (its tree has an ERROR or MISSING node)."""


@functools.lru_cache(maxsize=1)
def _parser() -> Any:
    """One tree-sitter parser for bash, built on first use (about 1 ms)."""
    # tree-sitter only for the lines the plain reader cannot take
    import tree_sitter

    return tree_sitter.Parser(tree_sitter.Language(_bash_language()))


def _bash_language() -> object:
    """tree-sitter-bash's grammar, from its compiled module alone when it can be found: the package's
    ``__init__`` imports importlib.resources (and through it tempfile) for highlighting queries the scan
    never reads, a few milliseconds of a pre-commit run. Otherwise the package, as usual."""
    try:
        # repo scan's lean start (tests/checks/scan/test_lean_cli.py)
        from importlib.machinery import EXTENSION_SUFFIXES, ExtensionFileLoader, PathFinder
        from importlib.util import module_from_spec, spec_from_file_location

        package = PathFinder.find_spec("tree_sitter_bash")
        for directory in (package.submodule_search_locations or []) if package is not None else []:
            for suffix in EXTENSION_SUFFIXES:
                path = os.path.join(directory, "_binding" + suffix)
                if os.path.isfile(path):
                    name = "tree_sitter_bash._binding"
                    spec = spec_from_file_location(name, path, loader=ExtensionFileLoader(name, path))
                    if spec is not None and spec.loader is not None:
                        module = module_from_spec(spec)
                        spec.loader.exec_module(module)
                        return module.language()
    except (ImportError, OSError, AttributeError):
        pass
    # tree-sitter only for the lines the plain reader cannot take
    import tree_sitter_bash

    return tree_sitter_bash.language()


@functools.lru_cache(maxsize=8192)
def _parse(text: str) -> tuple[Any, ...]:
    """The statements of ``text`` (tree-sitter nodes), cached by text (guidance repeats its commands); raises
    :class:`ShellSyntaxError` when the text is not valid bash."""
    root = _parser().parse(text.encode()).root_node
    if root.has_error:
        raise ShellSyntaxError(_first_error(root))
    return (root,)


def _first_error(node: Any) -> str:
    """Where tree-sitter could not parse: ``syntax error near 'X' (column N)``."""
    stack = [node]
    while stack:
        current = stack.pop()
        if current.is_missing:
            return f"missing {current.type!r} at column {current.start_point[1] + 1}"
        if current.type == "ERROR":
            near = current.text.decode(errors="replace")[:20]
            return f"syntax error near {near!r} (column {current.start_point[1] + 1})"
        stack.extend(reversed(current.children))
    return "syntax error"


#: A line of plain words and the four list operators, nothing bash could read otherwise: no quotes, no
#: expansions, globs, redirections, assignments (``=``), comments, subshells, braces or background ``&``.
PLAIN_LINE = re.compile(r"[A-Za-z0-9_./:@%+,\- \t]*(?:(?:&&|\|\||\||;)[A-Za-z0-9_./:@%+,\- \t]*)*")
PLAIN_OPERATOR = re.compile(r"&&|\|\||\||;")
RESERVED_WORDS = frozenset(
    """if then else elif fi case esac for select while until do done in function time coproc""".split()
)


def plain_commands(text: str, line: int) -> list[Item] | None:
    """The commands of a plain line (:data:`PLAIN_LINE`: ``make x && python y.py | tee z``) without the
    parser, exactly as the parser would give them; None for any other line (then the parser reads it). No
    reserved word anywhere, no empty command and nothing after a last operator, so every line taken here is
    one the parser reads the plain way. tests/checks/scan/test_shell.py holds this to the parser on many
    generated lines."""
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
    return plain if plain is not None else parsed_commands(text, line)


def parsed_commands(text: str, line: int) -> list[Item]:
    """Simple commands of one logical shell line by the bash grammar (shlex when it cannot parse it)."""
    text = strip_heredocs(text)
    try:
        nodes = _parse(text)
    except ShellSyntaxError as exc:
        return _shlex_split(text, line, str(exc))
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
            except ShellSyntaxError:
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


#: Nodes whose value is only known when the shell runs: the word holding one is never looked up.
EXPANSION_NODES = frozenset(
    {
        "simple_expansion",
        "expansion",
        "command_substitution",
        "process_substitution",
        "arithmetic_expansion",
        "brace_expression",
    }
)
#: Statements that hold other statements, walked through with the operator before them.
BLOCK_NODES = frozenset(
    {
        "if_statement",
        "elif_clause",
        "else_clause",
        "while_statement",
        "for_statement",
        "c_style_for_statement",
        "do_group",
        "compound_statement",
        "negated_command",
        "case_statement",
        "case_item",
    }
)
#: Children of a block that are not statements (the loop variable and its words, a case pattern, keywords).
BLOCK_SKIP_FIELDS = frozenset({"variable", "value", "initializer", "condition_words", "update"})
#: ``export A=1``, ``local x``, ``unset y``: a command word followed by its arguments.
DECLARATION_NODES = frozenset({"declaration_command", "unset_command"})
#: Operators that chain statements in a list.
LIST_OPERATORS = frozenset({"&&", "||", ";", "&", ";;"})
ESCAPE = re.compile(r"\\(.)", re.S)
STRING_ESCAPE = re.compile(r'\\([$`"\\\n])')


def _node_text(node: Any) -> str:
    return str(node.text.decode(errors="replace"))


def _has_expansion(node: Any) -> bool:
    stack = [node]
    while stack:
        current = stack.pop()
        if current.type in EXPANSION_NODES:
            return True
        stack.extend(current.children)
    return False


def _unquoted(node: Any) -> str:
    """A word as the shell sees it after quote removal: ``"a b"`` is ``a b``, ``a\\ b`` is ``a b``; an
    expansion keeps its source text."""
    kind = node.type
    if kind == "concatenation":
        return "".join(_unquoted(child) for child in node.children)
    if kind == "word":
        return ESCAPE.sub(r"\1", _node_text(node))
    if kind == "raw_string":
        return _node_text(node)[1:-1]
    if kind in ("string", "translated_string"):
        text = _node_text(node)
        inner = text[text.index('"') + 1 : -1] if text.endswith('"') else text
        return STRING_ESCAPE.sub(r"\1", inner)
    if kind == "ansi_c_string":
        return _node_text(node)[2:-1]
    return _node_text(node)


def _word(node: Any) -> Word:
    literal = not _has_expansion(node) and not _node_text(node).startswith("~")
    return Word(_unquoted(node), literal)


def _walk(node: Any, out: list[Item], line: int, after: str | None, piped: bool) -> None:
    kind = node.type
    if kind in ("program", "list"):
        op: str | None = after
        for part in node.children:
            if part.type in LIST_OPERATORS:
                op = part.type
            elif part.is_named and part.type != "comment":
                _walk(part, out, line, op, piped)
                if kind == "program":
                    op = None  # a newline between statements: the next one follows no operator
    elif kind == "pipeline":
        commands = [p for p in node.children if p.is_named and p.type != "comment"]
        for index, part in enumerate(commands):
            if part.type == "list" and index > 0:
                _pipeline_tail(part, out, line, piped)
            else:
                _walk(part, out, line, after if index == 0 else "|", True)
    elif kind == "redirected_statement":
        body = node.child_by_field_name("body")
        if body is not None:
            _walk(body, out, line, after, piped)
            _redirect_arguments(node, out, body)
    elif kind == "subshell":
        out.append(ScopeOpen(line))
        for part in node.named_children:
            _walk(part, out, line, after, piped)
        out.append(ScopeClose(line))
    elif kind in BLOCK_NODES:
        for index, part in enumerate(node.children):
            if part.is_named and node.field_name_for_child(index) not in BLOCK_SKIP_FIELDS:
                _walk(part, out, line, after, piped)
    elif kind == "command":
        _command(node, out, line, after, piped)
    elif kind in DECLARATION_NODES:
        words = [Word(_node_text(node.children[0]), True)]
        words += [_word(part) for part in node.named_children]
        out.append(Command(line, words, [], after=after, piped=piped))
    elif kind == "variable_assignment":
        out.append(Command(line, [], [_word(node)], after=after, piped=piped))
    elif kind == "variable_assignments":
        out.append(Command(line, [], [_word(p) for p in node.named_children], after=after, piped=piped))
    # function definitions, test commands, redirections alone: nothing to check


def _pipeline_tail(node: Any, out: list[Item], line: int, piped: bool) -> None:
    """The last command of a pipeline followed by ``&&``/``||``/``;``: the grammar nests the list inside the
    pipeline (``a | b || c`` as ``a | (b || c)``), bash binds the pipe tighter. The list's first command is
    the pipeline's last one; the commands after the operator are not in the pipeline."""
    op: str | None = "|"
    first = True
    for part in node.children:
        if part.type in LIST_OPERATORS:
            op = part.type
        elif part.is_named and part.type != "comment":
            if first and part.type == "list":
                _pipeline_tail(part, out, line, piped)
            else:
                _walk(part, out, line, op, True if first else piped)
            first = False


def _redirect_arguments(node: Any, out: list[Item], body: Any) -> None:
    """Words after a redirection's target are arguments of the command (``a > f b`` runs ``a b``); the grammar
    reads them as more targets."""
    if body.type != "command" or not out or not isinstance(out[-1], Command):
        return
    for index, part in enumerate(node.children):
        if node.field_name_for_child(index) == "redirect" and part.type == "file_redirect":
            targets = part.children_by_field_name("destination")
            out[-1].words.extend(_word(target) for target in targets[1:])


def _command(node: Any, out: list[Item], line: int, after: str | None, piped: bool) -> None:
    words: list[Word] = []
    assignments: list[Word] = []
    for index, part in enumerate(node.children):
        field = node.field_name_for_child(index)
        if part.type == "variable_assignment" and not words:
            assignments.append(_word(part))
        elif part.type == "command_name":
            words.extend(_word(child) for child in part.named_children)
        elif field == "argument":
            words.append(_word(part))
        elif field == "redirect" and part.type == "file_redirect":
            words.extend(_word(target) for target in part.children_by_field_name("destination")[1:])
    if words or assignments:
        out.append(Command(line, words, assignments, after=after, piped=piped))


OPERATORS = frozenset({"&&", "||", "|", ";", "&", ";;", "|&"})


def _shlex_split(text: str, line: int, error: str) -> list[Item]:
    note = f"shell parsed with shlex (the bash grammar could not parse it: {error})"
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
