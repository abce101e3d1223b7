"""The command keeps the Markdown items of guidance texts between runs: the same items as a parse, used only
for the same text and the same parser, and never needed."""

from __future__ import annotations

import marshal
from pathlib import Path

import pytest

from dokimi.checks.scan import scan_result
from dokimi.checks.scan.items_cache import FORMAT, ItemsCache, cache_file
from dokimi.checks.scan.markdown import extract
from tests.helpers.git import git_repo, write_files

TEXT = """\
---
title: front matter
---
# Guide

See [the notes](docs/notes.md), ![a picture](img/a.png) and [a reference][ref].
Run `make test` or `python -m pytest tests/`.

| command | what |
|---|---|
| `make a\\|b` | `src/x.py` |

```sh
cd src && ./run.sh --flag
```

    indented code: `not a span`

[ref]: https://example.org/o/r/blob/main/README.md
"""


def test_cached_items_are_the_items_of_a_parse(tmp_path: Path) -> None:
    path = tmp_path / "scan" / "repo.items"
    first = ItemsCache(path)
    parsed = first.items(TEXT)
    assert parsed == extract(TEXT) and first.parsed == 1
    first.save()
    again = ItemsCache(path)
    assert again.items(TEXT) == parsed
    assert again.parsed == 0
    assert parsed.links and parsed.spans and parsed.fences  # the text has items of every kind


def test_the_file_is_rewritten_only_when_the_texts_change(tmp_path: Path) -> None:
    path = tmp_path / "repo.items"
    cache = ItemsCache(path)
    cache.items(TEXT)
    cache.items("`a.py`\n")
    cache.save()
    written = path.stat().st_mtime_ns, path.read_bytes()
    same = ItemsCache(path)
    same.items(TEXT)
    same.items("`a.py`\n")
    same.save()
    assert (path.stat().st_mtime_ns, path.read_bytes()) == written
    fewer = ItemsCache(path)
    fewer.items(TEXT)
    fewer.save()  # a text the run no longer has is dropped
    assert len(marshal.loads(path.read_bytes())[2]) == 1


def test_items_of_another_parser_or_a_damaged_file_are_not_used(tmp_path: Path) -> None:
    path = tmp_path / "repo.items"
    cache = ItemsCache(path)
    cache.items(TEXT)
    cache.save()
    _, stamp, found = marshal.loads(path.read_bytes())
    wrong = {key: ((), (), ()) for key in found}  # what a different parser might have said
    path.write_bytes(marshal.dumps((FORMAT, (*stamp[:-1], None), wrong)))
    other = ItemsCache(path)
    assert other.items(TEXT) == extract(TEXT) and other.parsed == 1
    for damaged in (b"", b"\x00garbage", marshal.dumps((FORMAT, stamp, {key: "x" for key in found}))):
        path.write_bytes(damaged)
        reread = ItemsCache(path)
        assert reread.items(TEXT) == extract(TEXT) and reread.parsed == 1


def test_a_cache_that_cannot_be_written_is_not_written(tmp_path: Path) -> None:
    (tmp_path / "a-file").write_text("")
    cache = ItemsCache(tmp_path / "a-file" / "scan" / "repo.items")
    assert cache.items(TEXT) == extract(TEXT)
    cache.save()  # no error
    assert (tmp_path / "a-file").read_text() == ""


@pytest.fixture
def repo(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("DOKIMI_HOME", str(tmp_path / "home"))
    return git_repo(
        tmp_path / "repo",
        {"AGENTS.md": "Read `src/app.py` and `src/gone.py`.\n", "src/app.py": "x = 1\n"},
    )


def rows(repo: Path) -> list[tuple[int, str, str]]:
    result = scan_result(str(repo), cache_items=True).result
    return [(d.line, d.claim, d.verdict.status) for d in result.drafts]


def test_a_scan_with_the_cache_sees_an_edited_file(repo: Path) -> None:
    assert rows(repo) == [(1, "src/app.py", "ok"), (1, "src/gone.py", "fail")]
    assert cache_file(str(repo)).is_file()
    assert rows(repo) == [(1, "src/app.py", "ok"), (1, "src/gone.py", "fail")]
    write_files(repo, {"AGENTS.md": "\nRead `src/app.py`.\n"})
    assert rows(repo) == [(2, "src/app.py", "ok")]
    assert scan_result(str(repo)).result == scan_result(str(repo), cache_items=True).result


def test_without_a_place_for_the_cache_the_scan_parses(repo: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    def nowhere() -> Path:
        raise RuntimeError("Could not determine home directory.")

    monkeypatch.setattr("dokimi.checks.scan.items_cache.cache_directory", nowhere)
    assert rows(repo) == [(1, "src/app.py", "ok"), (1, "src/gone.py", "fail")]
