"""Link fragments against GitHub's heading anchors and line anchors; HTML links and images in Markdown."""

from __future__ import annotations

from pathlib import Path

import pytest

from dokimi.checks.scan.markdown import Slugger, extract, github_slug, heading_text
from tests.checks.scan._util import scan_files

GUIDE = """\
# Guide

## Set up
## Set up

See [setup](#set-up), [again](#set-up-1), [gone](#setpu), [case](#Set-Up), [prefixed](#user-content-set-up).
Read [the design](docs/design.md#data-model) and [wrong](docs/design.md#data-modle).
[anchor](docs/design.md#custom) [code](src/app.py#L3) [bad](src/app.py#L99) [range](src/app.py#L1-L2)
[html id](docs/design.md#box) [not md](src/app.py#main) [source](docs/design.md?plain=1#L2) [dir](docs/#x)
[guidance](CLAUDE.md#rules) [guidance gone](CLAUDE.md#gone)

<div align="center">
  <img src="docs/logo.png" alt="logo">
  <img src="docs/missing.png">
  <a href="docs/design.md#data-model">design</a>
</div>

Inline <a href="docs/gone.md">gone</a> and <a href="#set-up">top</a> and <img src='docs/logo.png'>.
<!-- <a href="commented-out.md">old</a> -->
"""

DESIGN = '# Design\\n\\n## Data model\\n\\n<a name="custom"></a>\\n<div id="box"></div>\\n'


def test_fragments_and_html_links_with_their_statuses(tmp_path: Path) -> None:
    result = scan_files(
        tmp_path,
        {
            "AGENTS.md": GUIDE,
            "CLAUDE.md": "# Rules\n",
            "docs/design.md": DESIGN.replace("\\n", "\n"),
            "docs/logo.png": b"\x89PNG",
            "src/app.py": "a\nb\nc\n",
        },
        globs=["AGENTS.md", "CLAUDE.md"],
    )
    found = sorted(
        (d.line, d.kind, d.claim, d.verdict.status) for d in result.drafts if d.file == "AGENTS.md"
    )
    assert found == [
        (6, "link", "#Set-Up", "unresolved"),
        (6, "link", "#set-up", "ok"),
        (6, "link", "#set-up-1", "ok"),
        (6, "link", "#setpu", "fail"),
        (6, "link", "#user-content-set-up", "ok"),
        (7, "link", "docs/design.md#data-model", "ok"),
        (7, "link", "docs/design.md#data-modle", "fail"),
        (8, "link", "docs/design.md#custom", "ok"),
        (8, "link", "src/app.py#L1-L2", "ok"),
        (8, "link", "src/app.py#L3", "ok"),
        (8, "link", "src/app.py#L99", "fail"),
        (9, "link", "docs/#x", "ok"),
        (9, "link", "docs/design.md#box", "ok"),
        (9, "link", "docs/design.md?plain=1#L2", "ok"),
        (9, "link", "src/app.py#main", "ok"),
        (10, "link", "CLAUDE.md#gone", "fail"),
        (10, "link", "CLAUDE.md#rules", "ok"),
        (13, "image", "docs/logo.png", "ok"),
        (14, "image", "docs/missing.png", "fail"),
        (15, "link", "docs/design.md#data-model", "ok"),
        (18, "image", "docs/logo.png", "ok"),
        (18, "link", "#set-up", "ok"),
        (18, "link", "docs/gone.md", "fail"),
    ]
    fixes = {d.claim: d.verdict.fix for d in result.drafts if d.verdict.status == "fail"}
    assert fixes["#setpu"] == "did you mean #set-up?"
    assert fixes["docs/design.md#data-modle"] == "did you mean #data-model?"
    why = {d.claim: d.verdict.why for d in result.drafts}
    assert why["src/app.py#L99"] == "src/app.py has 3 lines, so #L99 names none of them"
    assert why["src/app.py#main"].endswith("#main not checked (not a Markdown file, not a line)")


@pytest.mark.parametrize(
    ("heading", "slug"),
    [
        ("Set up", "set-up"),
        ("`repo scan` --run", "repo-scan---run"),
        ("C++ & C#!", "c--c"),
        ("Émoji 🎉 here", "émoji--here"),
        ("**Bold** _em_ snake_case", "bold-em-snake_case"),
        ("[A link](x.md) and ![img](y.png)", "a-link-and-"),
        ("What's new in 1.2?", "whats-new-in-12"),
        ("<kbd>Ctrl</kbd> keys", "ctrl-keys"),
        ("日本語の見出し", "日本語の見出し"),
    ],
)
def test_github_slugs(heading: str, slug: str) -> None:
    """The anchors github-slugger (GitHub's rule) makes of these headings."""
    assert github_slug(heading_text(heading)) == slug


def test_repeated_headings_are_numbered_as_github_numbers_them() -> None:
    slugs = Slugger()
    assert [slugs.slug(t) for t in ("A", "A", "A-1", "A")] == ["a", "a-1", "a-1-1", "a-2"]
    assert extract("# A\n# A\nSetext\n===\n").anchors == ["a", "a-1", "setext"]
