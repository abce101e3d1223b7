"""Paths and globs in code spans: the resolution rules of contract §8, every status."""

from __future__ import annotations

import posixpath
import random
from pathlib import Path

import pytest

from dokimi.checks.scan.paths import REGEX_FROM, first_match, glob_matcher, scan_glob_regex
from tests.checks.scan._util import add_submodule_entry, find, rows, scan_dir, scan_files
from tests.helpers.git import Symlink, git_repo

GUIDE = """\
# Paths
`src/pkg/core.py` is found from the root.
`pkg/core.py` is found from sub/AGENTS.md? no: this file is at the root.
`src/pkg/gone.py` has an existing parent, so it fails.
`build/out/lib.so` has no parent: unresolved.
`pkg/util.py` ends a longer path: ok_suffix.
`core.py` is a bare name: ok_basename.
`missing.py` is a bare name of nothing: unresolved (it may be made at run time).
`src/pkg/core.py/` is a file with a trailing slash.
`src/pkg/` is a directory.
`out/<run>/grade.json` has a placeholder.
`tasks/{task}/task.json` has a placeholder that matches.
`src/*/core.py` has a wildcard directory that matches.
`src/*/none.zzz` has a wildcard directory that matches nothing.
`src/pkg/*.py` matches.
`src/*.zzz` matches nothing in an existing directory.
`gen/*.o` has no literal parent.
`**/util.py` matches at any depth.
`src/*.py` may span directories.
`actions/checkout@v6` is an Action, not a path.
`linkdir/core.py` goes through a directory symlink.
`libs/sub/file.c` is inside a submodule.
`src/pkg/core.py:12` names a line.
`*.mk` is a bare glob: no directory part, so never fail.
"""


def test_every_path_and_glob_rule_gives_its_status(tmp_path: Path) -> None:
    repo = git_repo(
        tmp_path / "repo",
        {
            "AGENTS.md": GUIDE,
            "src/pkg/core.py": "x = 1\n",
            "lib/pkg/util.py": "y = 2\n",
            "tasks/t1/task.json": "{}\n",
            "linkdir": Symlink("src/pkg"),
        },
    )
    add_submodule_entry(repo, "libs/sub")
    result = scan_dir(str(repo), build_systems=["none"])
    assert rows(result) == [
        (2, "path", "src/pkg/core.py", "ok"),
        (3, "path", "pkg/core.py", "ok_suffix"),
        (4, "path", "src/pkg/gone.py", "fail"),
        (5, "path", "build/out/lib.so", "unresolved"),
        (6, "path", "pkg/util.py", "ok_suffix"),
        (7, "path", "core.py", "ok_basename"),
        (8, "path", "missing.py", "unresolved"),
        (9, "path", "src/pkg/core.py/", "fail"),
        (10, "path", "src/pkg/", "ok"),
        (11, "path", "out/<run>/grade.json", "unresolved"),
        (12, "path", "tasks/{task}/task.json", "ok"),
        (13, "glob", "src/*/core.py", "ok"),
        (14, "glob", "src/*/none.zzz", "unresolved"),
        (15, "glob", "src/pkg/*.py", "ok"),
        (16, "glob", "src/*.zzz", "fail"),
        (17, "glob", "gen/*.o", "unresolved"),
        (18, "glob", "**/util.py", "ok"),
        (19, "glob", "src/*.py", "ok"),
        (21, "path", "linkdir/core.py", "ok"),
        (22, "path", "libs/sub/file.c", "unresolved"),
        (23, "path", "src/pkg/core.py:12", "ok"),
        (24, "glob", "*.mk", "unresolved"),
    ]
    assert "submodule libs/sub" in find(result, "libs/sub/file.c").verdict.why  # type: ignore[attr-defined]


def test_a_fail_names_the_close_match_in_the_tree(tmp_path: Path) -> None:
    result = scan_files(
        tmp_path,
        {
            "AGENTS.md": "`src/pkg/gone.py` and `src/pkg/cor.py` and `docs/AGENTS.md`\n",
            "src/pkg/core.py": "",
            "src/other/gone.py": "",
            ".ci/AGENTS.md": "",
            "docs/x.md": "",
        },
        globs=["AGENTS.md"],
    )
    assert find(result, "src/pkg/gone.py").verdict.fix == "did you mean src/other/gone.py?"  # type: ignore[attr-defined]
    assert find(result, "src/pkg/cor.py").verdict.fix == "did you mean src/pkg/core.py?"  # type: ignore[attr-defined]
    assert find(result, "docs/AGENTS.md").verdict.fix == "did you mean .ci/AGENTS.md?"  # type: ignore[attr-defined]


def test_a_path_in_a_nested_guidance_file_is_tried_at_its_directory_then_ancestors(tmp_path: Path) -> None:
    result = scan_files(
        tmp_path,
        {
            "sub/AGENTS.md": "`mod.py` and `sub/mod.py` and `top.py` and `lib/gone.py`\n",
            "sub/mod.py": "",
            "top.py": "",
            "lib/x.py": "",
        },
    )
    assert rows(result) == [
        (1, "path", "lib/gone.py", "fail"),
        (1, "path", "mod.py", "ok"),
        (1, "path", "sub/mod.py", "ok"),
        (1, "path", "top.py", "ok"),
    ]


@pytest.mark.slow
def test_the_glob_shortcut_matches_exactly_what_the_glob_regex_matches() -> None:
    rng = random.Random(3)
    pieces = ["a", "b", "ab", "/", ".", "py", "src", "*", "**", "**/", "?", "[ab]", "<x>", "{y}", "-", "\n"]
    paths = [
        "".join(
            rng.choice(["a", "b", "/", ".", "py", "src", "\n", "ab/"]) for _ in range(rng.randrange(0, 8))
        )
    ]
    paths += [
        "".join(rng.choice(["a", "b", "/", ".", "py", "src", "ab/"]) for _ in range(rng.randrange(0, 8)))
        for _ in range(300)
    ]
    paths += ["src/a.py", "src/a/b.py", "a.py/", "src/", "ab\nab"]
    shortcut = 0
    for _ in range(400):
        pattern = "".join(rng.choice(pieces) for _ in range(rng.randrange(1, 6)))
        regex = scan_glob_regex(pattern)
        match = glob_matcher(pattern)
        shortcut += not any(ch in pattern for ch in "?[") and "**/" not in pattern
        for path in paths:
            assert match(path) == bool(regex.match(path)), (pattern, path)
    assert shortcut > 100  # the comparison covers the shortcut, not only the regex it falls back to


def test_the_first_match_is_the_same_over_few_paths_and_over_many() -> None:
    """Over many candidates the regex runs by C-level steps, over few the shortcut: the same first match."""
    rng = random.Random(5)
    names = ["a", "b", "src", "x.py", "y.txt", "ab"]
    paths = sorted({"/".join(rng.choice(names) for _ in range(rng.randrange(1, 4))) for _ in range(400)})
    assert len(paths) > 2 * REGEX_FROM
    for pattern in ["src/*.py", "*/x.py", "a/*", "**/y.txt", "b/?b", "<x>/src/*", "*", "zz/*.py", "a*b*"]:
        few = [next((p for p in paths if bool(scan_glob_regex(pattern).match(p))), None)]
        for cut in range(0, len(paths), REGEX_FROM // 2):  # slices of fewer than REGEX_FROM
            chunk = paths[cut : cut + REGEX_FROM // 2]
            found = first_match(pattern, chunk)
            if found is not None:
                few.append(found)
                break
        assert first_match(pattern, paths) == few[0] == (few[1] if len(few) > 1 else None), pattern


def test_normalize_skips_normpath_only_where_normpath_changes_nothing() -> None:
    from dokimi.source.snapshot import normalize

    def slow(path: str) -> str:
        while path.startswith("./"):
            path = path[2:]
        norm = posixpath.normpath(path) if path else ""
        return "" if norm == "." else norm.lstrip("/")

    rng = random.Random(5)
    parts = ["a", "b.c", ".", "..", "", ".d", "e.", "/", "//", "./", "x/"]
    for _ in range(3000):
        path = "/".join(rng.choice(parts) for _ in range(rng.randrange(0, 6)))
        assert normalize(path) == slow(path), path


def test_a_glob_ending_a_longer_path_names_the_first_match_below_any_directory_of_its_first_name(
    tmp_path: Path,
) -> None:
    guide = "`gen/**/*.txt` ends longer paths.\n`nowhere/**/*.txt` names no directory.\n"
    repo = git_repo(
        tmp_path / "repo",
        {
            "AGENTS.md": guide,
            "x/gen/a/out.txt": "x\n",
            "b/gen/c/gen/z.txt": "z\n",
            "y/gen": "a file named gen\n",
            "y/nowhere.txt": "n\n",
        },
    )
    result = scan_dir(str(repo), build_systems=["none"])
    assert rows(result) == [
        (1, "glob", "gen/**/*.txt", "ok_suffix"),
        (2, "glob", "nowhere/**/*.txt", "unresolved"),
    ]
    assert find(result, "gen/**/*.txt").verdict.why == "ends a longer path: b/gen/c/gen/z.txt"  # type: ignore[attr-defined]
