"""review_comments.jsonl and rule_matches.jsonl: the inputs of ``repo rules mine`` and ``repo rules
evaluate``, one JSON object per line.

A line of review_comments.jsonl is one review comment as a forge's export holds it: the pull request, when it
was merged, who wrote the comment, the file and line it was made on, its text and its URL. ``repo rules
fetch`` writes such a file from the GitHub REST API; any other forge's export converted to these keys works
the same. ``repo rules evaluate`` reads the same lines labelled with the rules each comment is an instance of
(``rules``), and rule_matches.jsonl: rules a reviewer agent or the judge matched on new PRs, each with a
maintainer's agreement.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import Annotated, Any, TypeVar

from pydantic import BaseModel, Field, StrictBool, ValidationError

from dokimi.errors import DocumentError
from dokimi.schemas._base import Document, decode_text, format_loc, load_json, read_raw

RULE_ID_PATTERN = r"^[A-Za-z][A-Za-z0-9_.-]*$"
"""A rule id: a letter, then letters, digits, ``_``, ``.`` or ``-`` (``R13``)."""

#: Largest input file read (a repository's whole review history fits well under it).
MAX_JSONL_BYTES = 512 * 1024 * 1024

Login = Annotated[str, Field(min_length=1, max_length=200)]


class ReviewCommentLine(Document):
    """One review comment of a pull request (a line of review_comments.jsonl)."""

    pr: int = Field(ge=1)
    """Number of the pull request."""
    merged_at: dt.datetime | None
    """When the pull request was merged (ISO 8601; a time without a zone is UTC); null for one closed
    without merging, which is never mined."""
    reviewer: Login
    """Who wrote the comment (the forge's login)."""
    author: Login | None = None
    """Who opened the pull request. A comment by the author is a reply, not a review: it is never mined."""
    path: str | None
    """The file the comment was made on, relative to the repository root; null for a comment on the whole
    pull request (a review's summary)."""
    line: int | None = Field(default=None, ge=1)
    """The line of ``path`` it was made on (the file as the pull request changed it); null when unknown."""
    body: str
    """The comment's text (Markdown, as written)."""
    url: str = Field(min_length=1)
    """Where the comment can be read; unique per comment. Rules cite it as evidence."""
    created_at: dt.datetime | None = None
    """When the comment was made. ``repo rules evaluate`` counts comments made on or after the rules'
    ``cut_date`` (by this time, or ``merged_at`` when it is null)."""
    rules: list[Annotated[str, Field(pattern=RULE_ID_PATTERN)]] = Field(default_factory=list)
    """For ``repo rules evaluate`` only: the ids of the rules this comment is an instance of, as a maintainer
    (or a labelling model) judged; empty when no rule covers it. Mining ignores it."""


class RuleMatchLine(Document):
    """A rule matched on a new pull request by a reviewer agent or the judge, with a maintainer's agreement (a
    line of rule_matches.jsonl)."""

    rule: str = Field(pattern=RULE_ID_PATTERN)
    """The id of the rule that was matched."""
    pr: int | None = Field(default=None, ge=1)
    """The pull request it was matched on."""
    url: str | None = None
    """Where the match can be read (the reviewer's finding, the judge's verdict)."""
    agreed: StrictBool | None
    """Whether a maintainer agrees the rule applies there; null when no maintainer has looked yet (not
    counted)."""


L = TypeVar("L", bound=BaseModel)


def _once(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for key, value in pairs:
        if key in out:
            raise ValueError(f"the key {key!r} is given twice")
        out[key] = value
    return out


def parse_lines(lines: Iterable[str], model: type[L], *, path: str) -> Iterator[tuple[int, L]]:
    """Every non-blank line as ``(line number, model)``; the first bad one is a DocumentError naming its line
    and key."""
    for number, line in enumerate(lines, 1):
        if not line.strip():
            continue
        try:
            data = load_json(line, object_pairs_hook=_once)
        except ValueError as exc:  # not JSON, nested too deep, or a key twice
            raise DocumentError(f"not a JSON object: {exc}", path=path, line=number) from None
        try:
            yield number, model.model_validate(data)
        except ValidationError as exc:
            err = exc.errors(include_url=False)[0]
            message = "unknown key" if err["type"] == "extra_forbidden" else err["msg"]
            if err["type"] == "missing":
                message = "required key is missing"
            raise DocumentError(message, path=path, line=number, key=format_loc(err["loc"]) or None) from None


def read_lines(path: Path, model: type[L]) -> list[tuple[int, L]]:
    """A JSON Lines file read whole (a regular file, at most 512 MB) and validated line by line: each line's
    number with its model."""
    text = decode_text(read_raw(path, limit=MAX_JSONL_BYTES), str(path))
    return list(parse_lines(text.splitlines(), model, path=str(path)))


def read_review_comments(path: Path) -> list[ReviewCommentLine]:
    """review_comments.jsonl, validated; a URL given twice is a DocumentError (a comment counted twice would
    count its pull request and reviewer twice)."""
    seen: dict[str, int] = {}
    comments = []
    for number, comment in read_lines(path, ReviewCommentLine):
        if comment.url in seen:
            raise DocumentError(
                f"the comment {comment.url} is on line {seen[comment.url]} already",
                path=str(path),
                line=number,
                key="url",
                hint="list each comment once: was the export appended to twice?",
            )
        seen[comment.url] = number
        comments.append(comment)
    return comments


def read_rule_matches(path: Path) -> list[RuleMatchLine]:
    """rule_matches.jsonl, validated."""
    return [match for _, match in read_lines(path, RuleMatchLine)]
