"""A forge export of 200 review comments (review_comments.jsonl) with a known answer, for the rules tests.

The cut is 2026-03-29. Themes (what a reviewer asks for), each on its own pull requests:

- ``incidental``: revert incidental edits to unrelated files: 8 PRs before the cut, from alice, bob and carol;
  more of it on PRs after the cut, on the task-source PR and on a PR that was never merged;
- ``docstring``: public functions in calc/ need a docstring: 5 PRs, alice and dave;
- ``pytest``: tests are plain pytest functions: 4 PRs, bob and carol;
- ``fstring``: alice alone, on 4 PRs (one reviewer: below the threshold);
- ``issue_ref``: 2 PRs from two reviewers (below the threshold);
- ``secrets``: only on PRs merged after the cut (6 PRs, 3 reviewers): must contribute nothing;
- ``cache_env``: the task-source PR 42 (3 comments from three reviewers) and 2 more PRs: with PR 42 it would
  reach 3 PRs; without it, it stays below the threshold;

plus the authors' replies, one-off remarks and review summaries (no path), up to 200 comments.
"""

from __future__ import annotations

import datetime as dt
import json
import re
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

CUT = dt.date(2026, 3, 29)
TASK_SOURCE_PR = 42
UNMERGED_PR = 77
TOTAL = 200
URL = "https://forge.invalid/acme/calc/pull/{pr}#discussion_r{n}"

THEMES: dict[str, tuple[str, str]] = {
    "incidental": ("Revert incidental edits to files the change does not need.", "**"),
    "docstring": ("Every public function in calc/ has a docstring.", "calc/**/*.py"),
    "pytest": ("Tests are plain pytest functions, not unittest classes.", "tests/**"),
    "fstring": ("Prefer f-strings to % formatting.", "**/*.py"),
    "issue_ref": ("Name the issue the change fixes in the PR description.", "**"),
    "secrets": ("Never log credentials.", "**"),
    "cache_env": ("A cache in the evaluator keys on the environment too.", "calc/evaluator.py"),
}
TEXTS: dict[str, str] = {
    "incidental": "This reformat of {path} is unrelated to the fix; please revert it, keep the diff small.",
    "docstring": "{path}: this public function needs a docstring, like the others in calc/.",
    "pytest": "Please write this as a plain pytest function; we do not use unittest.TestCase in tests/.",
    "fstring": "Nit: an f-string reads better than % here.",
    "issue_ref": "Which issue does this fix? Please link it in the description.",
    "secrets": "This logs the API token; never log credentials.",
    "cache_env": "The cached result ignores env: a second call with another env returns a stale value.",
}


@dataclass(frozen=True)
class Fixture:
    comments: list[dict[str, Any]]
    theme: dict[str, str]
    """URL -> theme (or ``noise``)."""

    def urls(self, theme: str) -> list[str]:
        return [c["url"] for c in self.comments if self.theme[c["url"]] == theme]

    def write(self, path: Path) -> Path:
        path.write_text("".join(json.dumps(c) + "\n" for c in self.comments), encoding="utf-8")
        return path


def _merged(day: dt.date) -> str:
    return f"{day.isoformat()}T15:00:00Z"


def _pr_plan() -> Iterator[tuple[int, dt.date | None, str, list[tuple[str, str, str]]]]:
    """(pr, merge day or None, author, [(theme, reviewer, path)]) per pull request."""
    before = [CUT - dt.timedelta(days=150 - 4 * i) for i in range(37)]  # all before the cut
    after = [CUT + dt.timedelta(days=3 * i) for i in range(8)]  # the cut day itself is "after"
    authors = ["erin", "frank", "grace", "heidi"]
    plan: dict[int, list[tuple[str, str, str]]] = {}

    def add(pr: int, theme: str, reviewer: str, path: str) -> None:
        plan.setdefault(pr, []).append((theme, reviewer, path))

    incidental = [(1, "alice"), (2, "bob"), (3, "carol"), (4, "alice"), (5, "bob"), (6, "carol"),
                  (7, "alice"), (8, "bob")]  # fmt: skip
    for pr, who in incidental:
        add(pr, "incidental", who, f"calc/module{pr}.py")
    add(1, "incidental", "bob", "README.md")  # a second reviewer on the same PR
    for pr, who in [(9, "alice"), (10, "dave"), (11, "alice"), (12, "dave"), (13, "alice")]:
        add(pr, "docstring", who, f"calc/ops{pr}.py")
    for pr, who in [(14, "bob"), (15, "carol"), (16, "bob"), (17, "carol")]:
        add(pr, "pytest", who, f"tests/test_{pr}.py")
    for pr in (18, 19, 20, 21):
        add(pr, "fstring", "alice", f"calc/fmt{pr}.py")
    add(22, "issue_ref", "bob", "")
    add(23, "issue_ref", "carol", "")
    for pr, who in [(TASK_SOURCE_PR, "alice"), (TASK_SOURCE_PR, "bob"), (TASK_SOURCE_PR, "carol")]:
        add(pr, "cache_env", who, "calc/evaluator.py")
    add(TASK_SOURCE_PR, "incidental", "dave", "calc/tokens.py")
    for pr, who in [(24, "bob"), (25, "carol")]:
        add(pr, "cache_env", who, "calc/evaluator.py")
    add(UNMERGED_PR, "incidental", "carol", "calc/parser.py")
    add(UNMERGED_PR, "docstring", "alice", "calc/parser.py")
    for i, pr in enumerate(range(101, 107)):
        add(pr, "secrets", ["alice", "bob", "carol"][i % 3], f"calc/log{pr}.py")
        add(pr, "incidental", ["dave", "alice"][i % 2], f"calc/extra{pr}.py")
    merged: dict[int, dt.date | None] = {UNMERGED_PR: None}
    for index, pr in enumerate([*range(1, 26), TASK_SOURCE_PR, *range(26, 37)]):
        merged[pr] = before[index % len(before)]
    for index, pr in enumerate(range(101, 109)):
        merged[pr] = after[index]
    for pr in sorted(merged):
        yield pr, merged[pr], authors[pr % len(authors)], plan.get(pr, [])


def make_fixture() -> Fixture:
    """The 200 comments, in a fixed order, each with a unique (PR, reviewer, path, line)."""
    comments: list[dict[str, Any]] = []
    theme: dict[str, str] = {}
    counter = iter(range(1000, 100000))

    def comment(
        pr: int, merged: dt.date | None, author: str, who: str, path: str, body: str, kind: str
    ) -> None:
        n = next(counter)
        url = URL.format(pr=pr, n=n)
        line = None if not path else 10 + n % 90
        comments.append(
            {
                "pr": pr,
                "merged_at": _merged(merged) if merged else None,
                "reviewer": who,
                "author": author,
                "path": path or None,
                "line": line,
                "body": body,
                "url": url,
                "created_at": _merged(merged - dt.timedelta(days=1)) if merged else "2026-02-01T09:00:00Z",
            }
        )
        theme[url] = kind

    plans = list(_pr_plan())
    for pr, merged, author, items in plans:
        for kind, who, path in items:
            comment(pr, merged, author, who, path, TEXTS[kind].format(path=path or "the PR"), kind)
        if items:
            comment(pr, merged, author, author, items[0][2] or "", "Done, thanks for the review.", "reply")
    fillers = ["Typo: 'recieve'.", "Nice catch.", "Could this loop exit early?", "LGTM once CI passes.",
               "Why a tuple here?", "Consider naming this `tokens`."]  # fmt: skip
    index = 0
    while len(comments) < TOTAL:
        pr, merged, author, _ = plans[index % len(plans)]
        who = ["alice", "bob", "carol", "dave"][index % 4]
        path = "" if index % 5 == 0 else f"calc/misc{index}.py"
        comment(pr, merged, author, who, path, fillers[index % len(fillers)], "noise")
        index += 1
    return Fixture(comments, theme)


# --- the scripted model's answer ----------------------------------------------------------------------------


def ref_of(comment: dict[str, Any]) -> str:
    """A ``{{match:...}}`` placeholder the scripted model server replaces with this comment's reference
    (``C7``): the reference on the comment's header line in the prompt."""
    where = comment["path"] or "(the whole pull request)"
    if comment["path"] and comment["line"]:
        where += f":{comment['line']}"
    header = f"] pull request #{comment['pr']}, reviewer {comment['reviewer']}, {where}\\n"
    return "{{match:C[0-9]+(?=" + re.escape(header) + ")}}"


def grouping_answer(groups: Sequence[tuple[str, Sequence[str], Sequence[dict[str, Any]], str | None]]) -> str:
    """The scripted grouping reply: the marker copied from the request, then the rules object, each group
    (text, paths, comments, same_as) naming its comments by placeholder."""
    rules = []
    placeholders: dict[str, str] = {}
    for text, paths, members, same_as in groups:
        refs = []
        for comment in members:
            token = f"@@REF{len(placeholders)}@@"
            placeholders[token] = ref_of(comment)
            refs.append(token)
        rules.append({"rule": text, "paths": list(paths), "comments": refs, "same_as": same_as})
    body = json.dumps({"rules": rules})
    for token, placeholder in placeholders.items():
        body = body.replace(token, placeholder)
    return "{{match:<<<RULES-[0-9a-f]+>>>}}\n" + body


def in_prompt(comment: dict[str, Any]) -> bool:
    """What the leak guard must let through, decided here independently of dokimi: merged, before the cut,
    not the task-source PR, not the author's own reply, not empty."""
    if comment["merged_at"] is None or comment["pr"] == TASK_SOURCE_PR:
        return False
    merged = dt.datetime.fromisoformat(comment["merged_at"].replace("Z", "+00:00")).date()
    return merged < CUT and comment["reviewer"] != comment["author"] and bool(comment["body"].strip())
