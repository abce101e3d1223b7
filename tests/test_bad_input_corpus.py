"""The bad-input corpus: every document reader, fed every kind of hostile file, ends in a clean error or a
value.

Readers: the manifest, task.json, grade.json, result.json (through the batch reader), meta.json, plan.json,
the batch pin, events.jsonl, a --static document, rubric.json, review_rules.json, rating rows and the rating
key, a harness profile, a run file, repo_perf.v1 and a mock-model script. Inputs: nesting far past the
recursion limit, a YAML alias bomb, binary, a file over the size limit, wrong types, NaN and infinity, a
FIFO, a link to a device, a directory, invalid UTF-8, an empty file and a duplicate key.

Each (reader, input) must return, or raise a DokimiError (which the CLI prints without a traceback), within
a few seconds: no other exception, no hang. The figures of the issue ("bad inputs tried / clean errors") are
the size of this matrix.
"""

from __future__ import annotations

import os
import signal
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from dokimi.errors import DokimiError

SIZE_LIMIT = 64 * 1024 * 1024


def _deep_yaml(levels: int) -> bytes:
    return ("a:\n" + "".join("  " * i + "b:\n" for i in range(1, levels)) + "  " * levels + "c\n").encode()


def _alias_bomb() -> bytes:
    lines = ['a: &a ["lol","lol","lol","lol","lol","lol","lol","lol","lol"]']
    for prev, name in zip("abcdefgh", "bcdefghi", strict=True):
        lines.append(f"{name}: &{name} [" + ",".join([f"*{prev}"] * 9) + "]")
    return ("\n".join(lines) + "\n").encode()


#: name -> bytes of the file, or a callable that makes the path itself (a FIFO, a link, a directory)
INPUTS: dict[str, bytes | Callable[[Path], None]] = {
    "nested-json-list": b"[" * 200_000 + b"]" * 200_000,
    "nested-json-object": b'{"a":' * 100_000 + b"1" + b"}" * 100_000,
    "nested-yaml-block": _deep_yaml(3_000),
    "nested-yaml-flow": b"a: " + b"[" * 50_000 + b"]" * 50_000 + b"\n",
    "alias-bomb": _alias_bomb(),
    "self-alias": b"a: &a [*a]\n",
    "binary": b"\x7fELF\x02\x01\x01\x00" + bytes(range(256)) * 40,
    "huge": lambda p: os.truncate(p, SIZE_LIMIT + 1) if p.touch() is None else None,
    "wrong-type-list": b"[1, 2, 3]\n",
    "wrong-type-string": b'"just a string"\n',
    "wrong-type-fields": b'{"schema": 5, "task": [], "pass": "yes", "metrics": [], "id": {}, "kind": 3}\n',
    "nan-json": b'{"schema": "x", "t": NaN, "cost_usd": Infinity, "timeout_s": NaN}\n',
    "nan-yaml": b"schema: x\nt: .nan\ntimeout_s: .inf\n",
    "fifo": lambda p: os.mkfifo(p),
    "link-to-device": lambda p: p.symlink_to("/dev/zero"),
    "link-to-fifo": lambda p: (os.mkfifo(p.with_name(p.name + ".fifo")), p.symlink_to(p.name + ".fifo"))[1],
    "directory": lambda p: p.mkdir(),
    "bad-utf8": b'{"id": "\xff\xfe\xfd"}\n',
    "empty": b"",
    "duplicate-key": b'{"id": "a", "id": "b"}\n',
    "nul-in-text": b'{"id": "a\x00b"}\n',
}


def _make(path: Path, content: bytes | Callable[[Path], None]) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    if isinstance(content, bytes):
        path.write_bytes(content)
    else:
        content(path)


# --- the readers: each takes a scratch directory and the input, places the file where it reads it, reads it


def _manifest(d: Path, content: bytes | Callable[[Path], None]) -> Any:
    from dokimi.repo.manifest import manifest_model_errors, read_manifest_marked

    path = d / "repo-eval.yaml"
    _make(path, content)
    found = read_manifest_marked(None, manifest=None, manifest_file=path)  # type: ignore[arg-type]
    assert found is not None
    return manifest_model_errors(found[0])


def _document(name: str, model_path: str) -> Callable[[Path, bytes | Callable[[Path], None]], Any]:
    def read(d: Path, content: bytes | Callable[[Path], None]) -> Any:
        import importlib

        from dokimi.schemas._base import read_document

        module, _, cls = model_path.rpartition(".")
        path = d / name
        _make(path, content)
        return read_document(path, getattr(importlib.import_module(module), cls))

    return read


def _grade(d: Path, content: bytes | Callable[[Path], None]) -> Any:
    from dokimi.grading.entrypoints import read_grade

    path = d / "grade.json"
    _make(path, content)
    grade, error = read_grade(path)  # never raises: a grader failure with a reason
    assert grade is None and error
    return error


def _cell(document: str) -> Callable[[Path, bytes | Callable[[Path], None]], Any]:
    def read(d: Path, content: bytes | Callable[[Path], None]) -> Any:
        from dokimi.batch import cell_dir, load_batch

        run_dir = cell_dir(d, "t1", "guidance:raw", "m", None, 0)
        _make(run_dir / document, content)
        batch = load_batch(d)
        cell = batch.cells[0]
        if document == "result.json":
            assert cell.status == "invalid" and cell.error
        else:
            assert cell.meta() is None
        return cell

    return read


def _batch_file(name: str) -> Callable[[Path, bytes | Callable[[Path], None]], Any]:
    def read(d: Path, content: bytes | Callable[[Path], None]) -> Any:
        from dokimi.batch import read_pin, read_plan

        _make(d / "_eval" / name, content)
        value, error = (read_pin if name == "batch.json" else read_plan)(d)
        assert value is None  # with the reason, or (a directory as plan.json) read as no plan at all
        return error

    return read


def _events(d: Path, content: bytes | Callable[[Path], None]) -> Any:
    from dokimi.schemas.events import read_events

    path = d / "events.jsonl"
    _make(path, content)
    return read_events(path)


def _rating_rows(d: Path, content: bytes | Callable[[Path], None]) -> Any:
    from dokimi.rating.scores import read_rows
    from dokimi.schemas.rating import RaterScore

    path = d / "scores.jsonl"
    _make(path, content)
    return read_rows(path, RaterScore)


def _profile(d: Path, content: bytes | Callable[[Path], None]) -> Any:
    from dokimi.harness.profile import load_profile

    path = d / "profile.yaml"
    _make(path, content)
    return load_profile(path)


def _perf(d: Path, content: bytes | Callable[[Path], None]) -> Any:
    from dokimi.grading.perf import read_perf

    path = d / "perf.json"
    _make(path, content)
    perf, error = read_perf(path)
    assert perf is None and error
    return error


def _mock_script(d: Path, content: bytes | Callable[[Path], None]) -> Any:
    from dokimi.support.mockmodel import load_script

    path = d / "turns.json"
    _make(path, content)
    return load_script(path)


READERS: dict[str, Callable[[Path, bytes | Callable[[Path], None]], Any]] = {
    "manifest": _manifest,
    "task.json": _document("task.json", "dokimi.schemas.task.Task"),
    "grade.json": _grade,
    "result.json": _cell("result.json"),
    "meta.json": _cell("meta.json"),
    "plan.json": _batch_file("plan.json"),
    "batch.json": _batch_file("batch.json"),
    "events.jsonl": _events,
    "static": _document("static.json", "dokimi.schemas.static.RepoStatic"),
    "rubric.json": _document("rubric.json", "dokimi.schemas.rubric.RepoRubric"),
    "review_rules.json": _document("review_rules.json", "dokimi.schemas.review_rules.RepoReviewRules"),
    "rating-rows": _rating_rows,
    "rating-key": _document("key.json", "dokimi.schemas.rating.RatingKey"),
    "profile": _profile,
    "run-file": _document("run.yaml", "dokimi.schemas.run_file.RunFile"),
    "perf": _perf,
    "mock-script": _mock_script,
}

#: Seconds one (reader, input) may take; a FIFO read would block forever, an alias bomb for minutes.
LIMIT_S = 20


class Hung(Exception):
    pass


@pytest.fixture
def alarm() -> Iterator[None]:
    def on_alarm(signum: int, frame: object) -> None:
        raise Hung(f"no answer within {LIMIT_S} s")

    previous = signal.signal(signal.SIGALRM, on_alarm)
    signal.alarm(LIMIT_S)
    try:
        yield
    finally:
        signal.alarm(0)
        signal.signal(signal.SIGALRM, previous)


@pytest.mark.parametrize("kind", sorted(INPUTS))
@pytest.mark.parametrize("reader", sorted(READERS))
def test_every_reader_ends_every_bad_input_in_a_clean_error(
    reader: str, kind: str, tmp_path: Path, alarm: None
) -> None:
    from dokimi.support.mockmodel import ScriptError  # the standalone mock model's own clean error

    try:
        READERS[reader](tmp_path, INPUTS[kind])
    except (DokimiError, ScriptError) as exc:
        assert str(exc).strip()  # what the CLI prints: a message, never a traceback
    except Hung:
        pytest.fail(f"{reader} hung on {kind}")


def test_the_corpus_is_as_large_as_the_report_says() -> None:
    """17 readers x 21 inputs = 357 (reader, input) pairs, each ending in a value or a clean error."""
    assert (len(READERS), len(INPUTS)) == (17, 21)
