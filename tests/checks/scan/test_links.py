"""Markdown links: relative, reference definitions, <angle> targets, blob/tree links to source.url."""

from __future__ import annotations

from pathlib import Path

from tests.checks.scan._util import add_submodule_entry, find, rows, scan_dir
from tests.helpers.git import Symlink, git_repo

URL = "https://github.com/acme/widget"

GUIDE = f"""\
# Links
[ok](docs/guide.md) [frag](docs/guide.md#setup) [anchor](#local) [gone](docs/gone.md)
[ref][r1] and [angle](<docs/with space.md>) and ![img](img/logo.png)
[abs](/src/pkg/core.py) [up](../outside.md) [web](https://example.com/x) [mail](mailto:a@b.c)
[dirlink](linkdir/core.py) [sub](libs/sub/README.md) [slash](src/pkg/core.py/) [dir](src/pkg/)
[b1]({URL}/blob/main/src/pkg/core.py) [b2]({URL}/blob/main/src/pkg/nope.py)
[b3]({URL}/blob/feature/x/src/pkg/core.py) [b4]({URL}/tree/feature/x/src/nope)
[b5]({URL}/tree/v1.2.3/src/nope) [b6]({URL}/blob/refs/heads/feat/y/docs/guide.md)
[b7]({URL}/tree/main) [b8]({URL}/blob/0123abc/src/pkg/core.py?plain=1#L3) [other](https://github.com/acme/other/blob/main/x.md)
[b9]({URL}/blob/refs/tags/v2/docs/nope.md) [b10]({URL.upper().replace("HTTPS://GITHUB.COM", "https://github.com")}/blob/main/docs/guide.md)

[r1]: docs/guide.md "a reference definition"
"""


def test_every_link_rule_gives_its_status(tmp_path: Path) -> None:
    repo = git_repo(
        tmp_path / "repo",
        {
            "AGENTS.md": GUIDE,
            "docs/guide.md": "# Setup\n",
            "docs/with space.md": "",
            "img/logo.png": b"\x89PNG\0",
            "src/pkg/core.py": "",
            "linkdir": Symlink("src/pkg"),
        },
    )
    add_submodule_entry(repo, "libs/sub")
    result = scan_dir(str(repo), source_url=URL + ".git", build_systems=["none"])
    assert rows(result) == [
        (2, "link", "#local", "fail"),  # no such heading or anchor (test_fragments.py)
        (2, "link", "docs/gone.md", "fail"),
        (2, "link", "docs/guide.md", "ok"),
        (2, "link", "docs/guide.md#setup", "ok"),
        (3, "link", "docs/with space.md", "ok"),
        (3, "image", "img/logo.png", "ok"),
        (4, "link", "../outside.md", "unresolved"),
        (4, "link", "/src/pkg/core.py", "ok"),
        (5, "link", "libs/sub/README.md", "unresolved"),
        (5, "link", "linkdir/core.py", "ok"),
        (5, "link", "src/pkg/", "ok"),
        (5, "link", "src/pkg/core.py/", "fail"),
        (6, "link", f"{URL}/blob/main/src/pkg/core.py", "ok"),
        (6, "link", f"{URL}/blob/main/src/pkg/nope.py", "fail"),
        (7, "link", f"{URL}/blob/feature/x/src/pkg/core.py", "ok"),
        (7, "link", f"{URL}/tree/feature/x/src/nope", "unresolved"),
        (8, "link", f"{URL}/blob/refs/heads/feat/y/docs/guide.md", "ok"),
        (8, "link", f"{URL}/tree/v1.2.3/src/nope", "fail"),
        (9, "link", f"{URL}/blob/0123abc/src/pkg/core.py?plain=1#L3", "ok"),
        (10, "link", "https://github.com/ACME/WIDGET/blob/main/docs/guide.md", "ok"),
        (10, "link", f"{URL}/blob/refs/tags/v2/docs/nope.md", "fail"),
        (12, "link", "docs/guide.md", "ok"),
    ]
    assert "submodule libs/sub" in find(result, "libs/sub/README.md").verdict.why  # type: ignore[attr-defined]
    assert find(result, "docs/gone.md").verdict.fix == "did you mean docs/guide.md?"  # type: ignore[attr-defined]


def test_a_ref_is_split_at_each_slash_shortest_first() -> None:
    from dokimi.checks.scan.paths import DEFAULT_BRANCHES, split_blob_tree_link

    assert split_blob_tree_link("feature/x/src/a.py".split("/"), DEFAULT_BRANCHES) == [
        ("feature", "x/src/a.py"),
        ("feature/x", "src/a.py"),
        ("feature/x/src", "a.py"),
    ]
    assert split_blob_tree_link("main/src/a.py".split("/"), DEFAULT_BRANCHES) == [("main", "src/a.py")]
    assert split_blob_tree_link("v1.2/src".split("/"), DEFAULT_BRANCHES) == [("v1.2", "src")]
    assert split_blob_tree_link("refs/heads/a/b".split("/"), DEFAULT_BRANCHES) == [("refs/heads/a", "b")]
    assert split_blob_tree_link(["main"], DEFAULT_BRANCHES) == []


def test_github_action_refs_are_not_paths() -> None:
    from dokimi.checks.scan.paths import is_github_action_ref

    assert is_github_action_ref("actions/checkout@v6")
    assert is_github_action_ref("github/codeql-action/upload-sarif@v3")
    assert not is_github_action_ref("src/pkg/core.py")
