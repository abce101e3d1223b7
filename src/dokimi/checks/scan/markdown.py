"""Markdown items of one guidance file, with 1-based line numbers: links, code spans and fenced code.

Tokens come from markdown-it-py (CommonMark plus tables). Block tokens carry line maps; the line of an inline
item (a link, a code span) is its block's first line plus the newlines before it in the block's inline source,
which the wrapped inline rules below record as they parse. A reference definition is reported at its own line,
and a link that uses it is not reported again. HTML, inline or as a block, gives links too (``<a href>``,
``<img src>``) and anchors (``id=``, ``<a name>``); each heading gives the anchor GitHub makes of it
(:func:`github_slug`, numbered ``-1``, ``-2`` when repeated).
"""

from __future__ import annotations

import html
import logging
import re
import sys
import unicodedata
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, NamedTuple
from urllib.parse import unquote

if TYPE_CHECKING:  # markdown-it is imported on the first parse (a scan whose items are cached needs none)
    from markdown_it import MarkdownIt
    from markdown_it.rules_core import StateCore
    from markdown_it.rules_inline import StateInline

ITEM_TYPES = frozenset({"link_open", "image", "code_inline", "html_inline"})
# The patterns of HTML, code spans and anchors are compiled on first use (re keeps them), not when a scan
# whose Markdown items are cached imports this module.
#: An HTML start tag, its name and its attributes.
HTML_TAG = r"<([A-Za-z][A-Za-z0-9-]*)((?:\s+[^\s/>=]+(?:\s*=\s*(?:\"[^\"]*\"|'[^']*'|[^\s>\"']+))?)*)\s*/?>"
HTML_ATTR = r"([^\s/>=]+)(?:\s*=\s*(?:\"([^\"]*)\"|'([^']*)'|([^\s>\"']+)))?"
HTML_COMMENT = r"<!--.*?(?:-->|\Z)"  # (with re.S)
#: A code span in one line of Markdown source (the run of backticks that opens it closes it).
CODE_SPAN = r"(`+)(?:(?!\1).)+?\1"
#: What github_slug drops of an ASCII heading: all but lowercase letters, digits, space, - and _.
ASCII_DROPPED = r"[^a-z0-9 _-]"
FRONT_MATTER = re.compile(r"\A---[ \t]*\n(.*?\n)---[ \t]*\n", re.S)


class Link(NamedTuple):
    line: int
    target: str
    """The destination as written (percent-decoded), fragment included."""
    image: bool = False


class CodeSpan(NamedTuple):
    line: int
    text: str


class Fence(NamedTuple):
    line: int
    """Line of the first content line (the one after the opening fence)."""
    info: str
    lines: list[str]


@dataclass
class MarkdownItems:
    links: list[Link] = field(default_factory=list)
    spans: list[CodeSpan] = field(default_factory=list)
    fences: list[Fence] = field(default_factory=list)
    anchors: list[str] = field(default_factory=list)
    """The fragments a link may name: each heading's GitHub anchor, in order, and the ``id``/``name`` of
    HTML elements."""

    def fenced_lines(self) -> set[int]:
        """The lines of fenced code, opening and closing fences included (a fence left open at the end of
        the file counts to its last line)."""
        return {n for f in self.fences for n in range(f.line - 1, f.line + len(f.lines) + 1)}


def _wrap(rule: Callable[[StateInline, bool], bool]) -> Callable[[StateInline, bool], bool]:
    """Record, on the first token a rule adds, how many newlines of the inline source precede it."""

    def wrapped(state: StateInline, silent: bool) -> bool:
        start = state.pos
        count = len(state.tokens)
        ok = rule(state, silent)
        if ok and not silent:
            for token in state.tokens[count:]:
                if token.type in ITEM_TYPES:  # skip the pending text the rule flushed first
                    token.meta["newlines"] = state.src.count("\n", 0, start)
                    token.meta["raw"] = state.src[start : state.pos]
                    break
        return ok

    return wrapped


#: Rules whose tokens the walk in :func:`extract` never reads, and that cannot move where a link, an image,
#: an autolink or a code span starts: emphasis and entities only turn characters that are no item's start
#: into other tokens (without them the same characters stay text), and the newline rule only makes breaks.
#: html_inline and escape stay on: they do decide what is a code span or a link.
UNREAD_INLINE = ("emphasis", "entity", "newline")
UNREAD_INLINE2 = ("balance_pairs", "emphasis", "fragments_join")
UNREAD_CORE = ("text_join",)
ITEM_START = re.compile(r"[`\[<]")
#: Where markdown-it's text rule stops to let the other inline rules try (markdown-it-py 4 reads this from
#: ``md.inline.terminator_re``): only where a rule still on can start (escape ``\``, backticks, link ``[``,
#: image ``!``, autolink and html_inline ``<``) or a link label ends (``]``). Its default also stops at the
#: characters of the rules switched off above (``*``, ``_``, ``&``, newline, ...), where every rule is then
#: tried and none matches, and the character goes to the same pending text the text rule would have put it
#: in: the tokens are the same, reached in fewer steps (a path like ``a_b/c-d.py`` has several such stops).
TEXT_STOPS = re.compile(r"[\\`\[\]!<]")


#: The modules of markdown-it's block rules that log, at debug level, every line they try: about 30,000
#: calls for dokimi's own docs, 15% of the parse, for messages the scan never shows.
TRACING_RULES = (
    "blockquote",
    "code",
    "fence",
    "heading",
    "hr",
    "html_block",
    "lheading",
    "list",
    "paragraph",
    "reference",
)
#: A cell separator of a table row: a ``|`` not right after a backslash.
CELL_SEPARATOR = re.compile(r"(?<!\\)\|")


def _ignore(*args: object, **kwargs: object) -> None:
    return None


def split_cells(row: str) -> list[str]:
    """markdown-it's ``escapedSplit`` (a table row cut at each ``|`` not right after a backslash, and each
    ``\\|`` turned into ``|``), at C speed: it stepped through the row one character at a time in Python."""
    return [cell.replace("\\|", "|") for cell in CELL_SEPARATOR.split(row)]


def _quiet_and_quick() -> None:
    """The parse without markdown-it's debug tracing of block rules, and with :func:`split_cells` for its
    table rows: the same tokens, fewer Python steps."""
    for name in TRACING_RULES:
        logger = logging.getLogger(f"markdown_it.rules_block.{name}")
        setattr(logger, "debug", _ignore)  # noqa: B010 - an instance attribute over the method
    # (the package markdown_it.rules_block names each rule function like its module: ask sys.modules)
    table = sys.modules.get("markdown_it.rules_block.table")
    if table is not None and hasattr(table, "escapedSplit"):
        setattr(table, "escapedSplit", split_cells)  # noqa: B010


def _parser() -> MarkdownIt:
    # markdown-it costs a scan ~20 ms; unchanged guidance is never parsed
    from markdown_it import MarkdownIt

    _quiet_and_quick()
    md = MarkdownIt("commonmark").enable("table")
    md.inline.ruler.disable(list(UNREAD_INLINE))
    md.inline.ruler2.disable(list(UNREAD_INLINE2))
    md.core.ruler.disable(list(UNREAD_CORE))
    md.core.ruler.at("inline", _inline_with_items)
    md.inline.terminator_re = TEXT_STOPS
    for name in ("link", "image", "autolink", "backticks", "html_inline"):
        rule: Any = md.inline.ruler.__rules__[md.inline.ruler.__find__(name)].fn
        md.inline.ruler.at(name, _wrap(rule))
    return md


def _inline_with_items(state: StateCore) -> None:
    """markdown-it's core inline rule, skipping a block whose text has no backtick, ``[`` or ``<``: without
    one it holds no code span, link, image or autolink."""
    for token in state.tokens:
        if token.type == "inline":
            if token.children is None:
                token.children = []
            if ITEM_START.search(token.content):
                state.md.inline.parse(token.content, state.md, state.env, token.children)


_MD: MarkdownIt | None = None
_HEADINGS: MarkdownIt | None = None


def blank_front_matter(text: str) -> str:
    """YAML front matter (``---`` ... ``---`` at the top) blanked, keeping line numbers."""
    match = FRONT_MATTER.match(text)
    if not match:
        return text
    return "\n" * match.group(0).count("\n") + text[match.end() :]


def extract(text: str) -> MarkdownItems:
    """Links, code spans and fences of a Markdown text."""
    global _MD
    if _MD is None:
        _MD = _parser()
    env: dict[str, Any] = {}
    tokens = _MD.parse(blank_front_matter(text), env)
    items = MarkdownItems()
    for ref in env.get("references", {}).values():
        line = ref["map"][0] + 1 if ref.get("map") else 1
        items.links.append(Link(line, _decode(ref["href"])))
    block_line = 1
    slugs = Slugger()
    in_heading = False
    for token in tokens:
        if token.map is not None:
            block_line = token.map[0] + 1
        if token.type == "heading_open":
            in_heading = True
        elif in_heading and token.type == "inline":
            items.anchors.append(slugs.slug(heading_text(token.content)))
            in_heading = False
        if token.type == "html_block":
            html_items(token.content, block_line, items)
        elif token.type == "fence" and token.map is not None:
            lines = token.content.split("\n")
            if lines and lines[-1] == "":
                lines.pop()
            items.fences.append(Fence(token.map[0] + 2, token.info.strip(), lines))
        elif token.type == "code_block":
            continue  # indented code: no language, so not read as commands
        elif token.type == "inline" and token.children:
            for child in token.children:
                line = block_line + int(child.meta.get("newlines", 0))
                if child.type in ("link_open", "image"):
                    raw = str(child.meta.get("raw", ""))
                    is_autolink = child.markup == "autolink"
                    if not is_autolink and not raw.endswith(")"):
                        continue  # a reference link: reported at its definition
                    href = str(child.attrs.get("href" if child.type == "link_open" else "src", ""))
                    items.links.append(Link(line, _decode(href), image=child.type == "image"))
                elif child.type == "code_inline":
                    items.spans.append(CodeSpan(line, child.content))
                elif child.type == "html_inline":
                    html_items(child.content, line, items)
    items.links.sort(key=lambda link: link.line)
    return items


def html_items(html: str, line: int, items: MarkdownItems) -> None:
    """The links (``<a href>``, ``<img src>``) and anchors (any element's ``id``, an ``<a name>``) of HTML in
    Markdown, starting at ``line`` (what an HTML comment holds is not read)."""
    if "<!--" in html:
        html = re.sub(HTML_COMMENT, lambda m: "\n" * m.group(0).count("\n"), html, flags=re.S)
    for tag in re.finditer(HTML_TAG, html):
        name = tag.group(1).lower()
        attrs = {
            m.group(1).lower(): next((g for g in m.group(2, 3, 4) if g is not None), "")
            for m in re.finditer(HTML_ATTR, tag.group(2))
        }
        at = line + html.count("\n", 0, tag.start())
        if name == "a" and attrs.get("href"):
            items.links.append(Link(at, _decode(_unescape(attrs["href"]))))
        elif name == "img" and attrs.get("src"):
            items.links.append(Link(at, _decode(_unescape(attrs["src"])), image=True))
        for key in ("id", "name") if name == "a" else ("id",):
            if attrs.get(key):
                items.anchors.append(_unescape(attrs[key]))


def _unescape(value: str) -> str:
    if "&" not in value:
        return value
    return html.unescape(value)


def heading_text(source: str) -> str:
    """What GitHub shows of a heading's inline source: its text and code, without the marks of emphasis,
    links, images and HTML tags (the text an anchor is made of)."""
    global _HEADINGS
    if not any(ch in source for ch in "*_`[<&\\!"):
        return source  # nothing but text
    if _HEADINGS is None:
        # markdown-it costs a scan ~20 ms; unchanged guidance is never parsed
        from markdown_it import MarkdownIt

        _HEADINGS = MarkdownIt("commonmark")
    out: list[str] = []
    for token in _HEADINGS.parseInline(source)[0].children or []:
        if token.type in ("text", "code_inline"):
            out.append(token.content)
        elif token.type == "softbreak":
            out.append("\n")
        elif token.type == "image":
            continue  # an image shows no text
    return "".join(out)


def github_slug(text: str) -> str:
    """The anchor GitHub gives a heading of this text (github-slugger): lowercased; every character that is
    not a letter, a digit, a mark, ``-``, ``_`` or a space dropped; each space a ``-``."""
    lowered = text.lower()
    if lowered.isascii():
        return re.sub(ASCII_DROPPED, "", lowered).replace(" ", "-")
    kept = [ch for ch in lowered if ch in " -_" or unicodedata.category(ch)[0] in "LNM"]
    return "".join(kept).replace(" ", "-")


class Slugger:
    """Anchors of one page: a repeated slug gets ``-1``, ``-2``, ... (github-slugger's rule)."""

    def __init__(self) -> None:
        self.occurrences: dict[str, int] = {}

    def slug(self, text: str) -> str:
        result = original = github_slug(text)
        while result in self.occurrences:
            self.occurrences[original] += 1
            result = f"{original}-{self.occurrences[original]}"
        self.occurrences[result] = 0
        return result


def _decode(href: str) -> str:
    return unquote(href)
