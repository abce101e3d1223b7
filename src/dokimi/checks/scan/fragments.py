"""The ``#fragment`` of a link, checked against what its target shows on GitHub.

- A Markdown file's fragments are the anchors of its headings (GitHub's slugs, ``-1``, ``-2`` for repeats:
  :func:`dokimi.checks.scan.markdown.github_slug`) and the ``id``/``name`` of its HTML elements
  (:func:`resolve_fragment`); ``#user-content-x`` is the same anchor as ``#x``.
- Any other file's are line anchors, ``#L12`` or ``#L12-L20``, which must be lines of the file
  (:func:`resolve_line_anchor`); so are a Markdown file's when the link asks for its source (``?plain=1``).
- A fragment-only link (``#setup``) names an anchor of the file it is in.
- A fragment of a directory, or any other fragment of a file that is not Markdown, is not checked.
"""

from __future__ import annotations

import difflib
import re

from dokimi.checks.scan.verdict import Verdict, fail, ok, unresolved

MARKDOWN_SUFFIXES = (".md", ".markdown", ".mdown", ".mkdn", ".mkd", ".mdwn")
LINE_ANCHOR = r"^L(\d+)(?:C\d+)?(?:-L(\d+)(?:C\d+)?)?$"
GITHUB_PREFIX = "user-content-"


def split_fragment(target: str) -> tuple[str, str, str]:
    """``path?query#fragment`` -> (path, query, fragment); each may be empty."""
    rest, _, fragment = target.partition("#")
    path, _, query = rest.partition("?")
    return path, query, fragment


def is_markdown(path: str) -> bool:
    return path.lower().endswith(MARKDOWN_SUFFIXES)


def resolve_fragment(fragment: str, anchors: list[str], where: str) -> Verdict:
    """A fragment against the anchors of a Markdown page: ok when one is equal; unresolved when one is equal
    but for case (browsers match fragments by case, GitHub's page script may not); fail otherwise, with the
    closest anchor."""
    wanted = fragment[len(GITHUB_PREFIX) :] if fragment.startswith(GITHUB_PREFIX) else fragment
    if wanted in anchors:
        return ok(f"#{wanted} is a heading or anchor of {where}")
    lowered = wanted.lower()
    same_but_case = next((a for a in anchors if a.lower() == lowered), None)
    if same_but_case is not None:
        return unresolved(f"{where} has #{same_but_case}, which differs from #{wanted} in case only")
    close = difflib.get_close_matches(wanted, sorted(set(anchors)), n=1, cutoff=0.6)
    return fail(
        f"{where} has no heading or anchor #{wanted}",
        f"did you mean #{close[0]}?" if close else None,
    )


def resolve_line_anchor(fragment: str, text: str, where: str) -> Verdict | None:
    """``#L12`` / ``#L12-L20`` against the lines of a file; None when the fragment is no line anchor."""
    match = re.match(LINE_ANCHOR, fragment)
    if not match:
        return None
    first, last = int(match.group(1)), int(match.group(2) or match.group(1))
    lines = text.count("\n") + (0 if text.endswith("\n") or not text else 1)
    if 1 <= first <= last <= lines:
        return ok(
            f"lines {first}-{last} of {where} ({lines} lines)"
            if last != first
            else f"line {first} of {where}"
        )
    return fail(f"{where} has {lines} lines, so #{fragment} names none of them")
