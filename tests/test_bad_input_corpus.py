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
import stat
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
    "huge-int": b'{"schema": "x", "rep": ' + b"9" * 5000 + b', "timeout_s": ' + b"9" * 400 + b"}\n",
    "huge-float": b'{"schema": "x", "rep": 1e400, "cost_usd": -1e400, "t": 1e-400}\n',
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


@pytest.mark.slow
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
    """17 readers x 23 inputs = 391 (reader, input) pairs, each ending in a value or a clean error."""
    assert (len(READERS), len(INPUTS)) == (17, 23)


# --- the commands: every document a command reads from a batch, fed every bad input, through the command a
# user types (in-process, so a traceback is seen as it is printed). A command ends in 0, 1 (a check found
# problems) or 2 (a clean error), within LIMIT_S, and prints no traceback.

#: document -> where it lives in the hostile cell (t1, guidance:raw) or the batch
DOCUMENT_PATHS = {
    "result.json": "cell",
    "meta.json": "cell",
    "events.jsonl": "cell",
    "task.json": "cell",
    "grade.json": "cell",
    "merge.json": "cell",
    "batch.json": "_eval",
    "plan.json": "_eval",
}

#: command -> (argv, with {batch} and {tmp}; the documents it reads)
BATCH_COMMANDS: dict[str, tuple[list[str], tuple[str, ...]]] = {
    "report": (
        ["repo", "report", "{batch}", "--json"],
        ("result.json", "meta.json", "batch.json", "plan.json"),
    ),
    "report-html": (
        ["repo", "report", "{batch}", "--html", "{tmp}/site"],
        ("result.json", "meta.json", "events.jsonl", "task.json", "grade.json", "merge.json"),
    ),
    "export": (
        ["repo", "export", "{batch}", "--format", "inspect", "--out", "{tmp}/logs"],
        ("result.json", "events.jsonl", "task.json", "grade.json", "batch.json"),
    ),
    "compare": (
        ["repo", "compare", "{batch}", "--baseline", "guidance:none", "--json"],
        ("result.json", "batch.json", "plan.json"),
    ),
    "rate-export": (
        ["repo", "rate", "export", "{batch}", "--out", "{tmp}/rate"],
        ("result.json", "task.json", "grade.json"),
    ),
}

GOOD_EVENT = b'{"t": 1.0, "kind": "command", "text": "ls", "rc": 0, "output": "f.txt"}\n'


def _batch(root: Path) -> Path:
    """Two tasks x two arms, every cell finished with its evidence; the hostile one is t1 guidance:raw."""
    from tests.helpers.batches import write_cell, write_pin, write_plan

    batch = root / "batch"
    write_pin(batch)
    cells = [(t, a, "m1", None, 0) for t in ("t1", "t2") for a in ("guidance:none", "guidance:raw")]
    write_plan(batch, cells)
    for task, arm, *_ in cells:
        run_dir = write_cell(batch, task, arm, meta=True, passed=arm == "guidance:raw")
        (run_dir / "task.json").write_text(f'{{"id": "{task}", "prompt": "fix it"}}\n')
        (run_dir / "events.jsonl").write_bytes(GOOD_EVENT)
        (run_dir / "grade.json").write_text('{"schema": "repo_grade.v1", "pass": true}\n')
        (run_dir / "answer.txt").write_text("done\n")
    return batch


def _hostile_cell(batch: Path) -> Path:
    from dokimi.batch import cell_dir

    return cell_dir(batch, "t1", "guidance:raw", "m1", None, 0)


def _command(capsys: pytest.CaptureFixture[str], argv: list[str]) -> tuple[int, str]:
    from dokimi.cli.main import main

    rc = main(argv)
    captured = capsys.readouterr()
    return rc, captured.out + captured.err


def _clean(rc: int, text: str) -> None:
    assert rc in (0, 1, 2), text[-3000:]
    assert "Traceback" not in text and "this is a bug in dokimi" not in text, text[-3000:]


BATCH_CASES = [(c, d) for c, (_argv, docs) in sorted(BATCH_COMMANDS.items()) for d in docs]


@pytest.mark.slow
@pytest.mark.parametrize("kind", sorted(INPUTS))
@pytest.mark.parametrize(("command", "document"), BATCH_CASES)
def test_every_batch_command_ends_every_bad_document_cleanly(
    command: str,
    document: str,
    kind: str,
    tmp_path: Path,
    alarm: None,
    capsys: pytest.CaptureFixture[str],
) -> None:
    batch = _batch(tmp_path)
    where = _hostile_cell(batch) if DOCUMENT_PATHS[document] == "cell" else batch / "_eval"
    target = where / document
    if target.exists():
        target.unlink()
    _make(target, INPUTS[kind])
    argv = [
        a.replace("{batch}", str(batch)).replace("{tmp}", str(tmp_path)) for a in BATCH_COMMANDS[command][0]
    ]
    try:
        _clean(*_command(capsys, argv))
    except Hung:
        pytest.fail(f"{command} hung on {document} as {kind}")


#: cell directory names an agent cannot choose but a batch copied from elsewhere can hold: not UTF-8, a
#: terminal escape, a new line, the longest a file system allows
NAMES: dict[str, bytes] = {
    "non-utf8": b"t\xff\xfe",
    "escape": b"t\x1b]0;owned\x07",
    "newline": b"t\nx",
    "longest": b"t" * 255,
}


@pytest.mark.slow
@pytest.mark.parametrize("name", sorted(NAMES))
@pytest.mark.parametrize("command", sorted(BATCH_COMMANDS))
def test_every_batch_command_reads_a_batch_with_a_strange_cell_directory_name(
    command: str, name: str, tmp_path: Path, alarm: None, capsys: pytest.CaptureFixture[str]
) -> None:
    batch = _batch(tmp_path)
    strange = os.fsdecode(os.fsencode(batch) + b"/" + NAMES[name])
    os.rename(batch / "t2", strange)
    argv = [
        a.replace("{batch}", str(batch)).replace("{tmp}", str(tmp_path)) for a in BATCH_COMMANDS[command][0]
    ]
    rc, text = _command(capsys, argv)
    _clean(rc, text)
    assert "\x1b" not in text and "\x07" not in text


@pytest.mark.slow
def test_a_100000_deep_events_line_leaves_the_batch_report_and_export_whole(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Issue 20: the same line made ``repo report --html`` and ``repo export`` exit 3 for the whole batch."""
    pytest.importorskip("inspect_ai")
    batch = _batch(tmp_path)
    events = _hostile_cell(batch) / "events.jsonl"
    events.write_bytes(GOOD_EVENT + INPUTS["nested-json-object"] + b"\n" + GOOD_EVENT)
    rc, text = _command(capsys, ["repo", "report", str(batch), "--html", str(tmp_path / "site")])
    assert rc == 0, text
    pages = sorted((tmp_path / "site" / "cells").iterdir())
    assert len(pages) == 4
    hostile = next(p for p in pages if p.name.startswith("t1--guidance_raw")).read_text()
    assert "not an event: nested more than 64 levels deep" in hostile
    # the page shows the first 256 KiB of events.jsonl: the event before the line, the line itself (cut)
    assert hostile.count('class="event command"') == 1 and "first 262144 of 600146 characters" in hostile
    rc, text = _command(
        capsys, ["repo", "export", str(batch), "--format", "inspect", "--out", str(tmp_path / "logs")]
    )
    assert rc == 0, text
    from inspect_ai.log import read_eval_log

    samples = [
        s for log in sorted((tmp_path / "logs").iterdir()) for s in read_eval_log(str(log)).samples or []
    ]
    assert len(samples) == 4
    hostile_sample = next(s for s in samples if s.metadata["cell"].startswith("t1/guidance_raw"))
    assert hostile_sample.metadata["unreadable_event_lines"] == 1
    assert sum(1 for m in hostile_sample.messages if m.role == "tool") == 2


# --- documents a command reads from a repository or a file the user names


def _repo_with(root: Path, path: str, content: bytes | Callable[[Path], None]) -> Path:
    from tests.helpers.runs import tiny_repo

    tiny = tiny_repo(root / "tiny")
    target = tiny.path / path
    if target.exists() or target.is_symlink():
        target.unlink()
    _make(target, content)
    return tiny.path


@pytest.mark.slow
@pytest.mark.parametrize("kind", sorted(INPUTS))
def test_validate_ends_every_bad_task_json_cleanly(
    kind: str, tmp_path: Path, alarm: None, capsys: pytest.CaptureFixture[str]
) -> None:
    """Issue 20: a deeply nested task.json made ``repo validate`` print a traceback."""
    repo = _repo_with(tmp_path, ".agent-eval/tasks/fix_f/task.json", INPUTS[kind])
    rc, text = _command(capsys, ["repo", "validate", str(repo), "--manifest", ".agent-eval/repo-eval.yaml"])
    _clean(rc, text)
    assert rc == 1, text  # the task is invalid: a problem found, not a usage error


#: command -> argv reading a file the user names, as {file}
FILE_COMMANDS: dict[str, list[str]] = {
    "run-file": ["repo", "run", "{tmp}/nowhere", "-c", "{file}"],
    "study-file": ["repo", "study", "report", "{file}"],
    "static": ["repo", "scan", "{tmp}/tiny", "--static", "{file}"],
    "manifest-file": ["repo", "validate", "{tmp}/tiny", "--manifest-file", "{file}"],
}


@pytest.mark.slow
@pytest.mark.parametrize("kind", sorted(INPUTS))
@pytest.mark.parametrize("command", sorted(FILE_COMMANDS))
def test_every_command_ends_every_bad_file_it_is_given_cleanly(
    command: str, kind: str, tmp_path: Path, alarm: None, capsys: pytest.CaptureFixture[str]
) -> None:
    from tests.helpers.git import git_repo

    git_repo(tmp_path / "tiny", {"AGENTS.md": "# tiny\n"})
    document = tmp_path / ("given.json" if command == "static" else "given.yaml")
    _make(document, INPUTS[kind])
    argv = [
        a.replace("{tmp}", str(tmp_path)).replace("{file}", str(document)) for a in FILE_COMMANDS[command]
    ]
    try:
        _clean(*_command(capsys, argv))
    except Hung:
        pytest.fail(f"{command} hung on {kind}")


# --- option values: empty, huge, a device as the output


def _every_text_option() -> list[tuple[str, str]]:
    """(command path, option) for every text or path option of every command."""
    import click

    from dokimi.cli.app import cli

    found: list[tuple[str, str]] = []

    def walk(command: click.Command, path: list[str]) -> None:
        if isinstance(command, click.Group):
            ctx = click.Context(command)
            for name in command.list_commands(ctx):
                sub = command.get_command(ctx, name)
                assert sub is not None
                walk(sub, [*path, name])
            return
        for param in command.params:
            if isinstance(param, click.Option) and not param.is_flag and param.opts[0].startswith("--"):
                if isinstance(param.type, (click.types.StringParamType, click.Path)):
                    found.append((" ".join(path), max(param.opts, key=len)))

    walk(cli, [])
    return found


@pytest.mark.slow
@pytest.mark.parametrize("value", ["", " ", ","])
@pytest.mark.parametrize(("command", "option"), _every_text_option())
def test_every_text_option_refuses_an_empty_value(
    command: str, option: str, value: str, capsys: pytest.CaptureFixture[str]
) -> None:
    """Issue 20: ``--task ''`` ran every task and ``--effort ''`` meant the default, while ``--arm ''`` was
    refused; now no option reads an empty value as "not given"."""
    rc, text = _command(capsys, [*command.split(), option, value])
    _clean(rc, text)
    assert rc == 2 and "is empty" in text, text


def test_the_empty_value_sweep_covers_the_options_of_the_issue() -> None:
    options = set(_every_text_option())
    assert {("repo run", "--task"), ("repo run", "--effort"), ("repo run", "--out")} <= options
    assert len(options) > 60


@pytest.fixture
def tiny_source(tmp_path: Path) -> list[str]:
    from tests.helpers.runs import fake_harness, tiny_repo

    tiny = tiny_repo(tmp_path / "tiny")
    profile, binary = fake_harness(tmp_path / "harness")
    return [
        "repo", "run", tiny.source(), "--manifest", ".agent-eval/repo-eval.yaml", "--batch", "b",
        "--harness", str(profile), "--bin", str(binary), "--agent-network", "none", "--arm", "guidance:raw",
        "--allow-unchecked",
    ]  # fmt: skip


MODELS_101 = ",".join(f"m{i}" for i in range(101))


@pytest.mark.slow
@pytest.mark.parametrize(
    ("extra", "said"),
    [
        (["--model", "m", "--reps", "99999999999", "--out", "{tmp}/o"], "not in the range 1<=x<=1000"),
        (["--model", "m", "--reps", "0", "--out", "{tmp}/o"], "not in the range 1<=x<=1000"),
        (["--model", MODELS_101, "--reps", "1000", "--out", "{tmp}/o"], "more than 100000"),
        (["--model", "m", "--reps", "1", "--out", "/dev/null"], "cannot make this directory"),
        (["--model", "m", "--reps", "1", "--out", "{tmp}/a-file/o"], "a parent of it is a file"),
        (["--model", "m", "-c", "{tmp}/reps-float.yaml", "--out", "{tmp}/o"], "reps"),
        (["--model", "m", "-c", "{tmp}/reps-huge.yaml", "--out", "{tmp}/o"], "less than or equal to 1000"),
        (["--model", "m", "-c", "{tmp}/tasks-blank.yaml", "--reps", "1", "--out", "{tmp}/o"], "is empty"),
    ],
    ids=["reps-huge", "reps-zero", "cells-over-the-bound", "out-dev-null", "out-under-a-file",
         "run-file-reps-1e9", "run-file-reps-1e9-int", "run-file-blank-task"],
)  # fmt: skip
def test_run_refuses_what_would_hang_or_crash_before_any_work(
    tiny_source: list[str],
    extra: list[str],
    said: str,
    tmp_path: Path,
    alarm: None,
    capsys: pytest.CaptureFixture[str],
) -> None:
    """Issue 20: ``--reps 99999999999`` and ``reps: 1e9`` hung planning; ``--out /dev/null`` was a
    traceback."""
    (tmp_path / "a-file").write_text("x")
    (tmp_path / "reps-float.yaml").write_text("schema: repo_run_file.v1\nreps: 1e9\n")
    (tmp_path / "reps-huge.yaml").write_text("schema: repo_run_file.v1\nreps: 1000000000\n")
    (tmp_path / "tasks-blank.yaml").write_text('schema: repo_run_file.v1\ntasks: [" "]\n')
    argv = [*tiny_source, *(a.replace("{tmp}", str(tmp_path)) for a in extra)]
    rc, text = _command(capsys, argv)
    _clean(rc, text)
    assert rc == 2 and said in text, text


@pytest.fixture
def device(tmp_path: Path) -> Path:
    """A character device like /dev/null (major 1, minor 3) in a scratch directory: what the test may see
    replaced without harm to the machine."""
    if os.geteuid() != 0:
        pytest.skip("making a device node needs root (CI runs as root)")
    path = tmp_path / "null"
    os.mknod(path, 0o666 | stat.S_IFCHR, os.makedev(1, 3))
    return path


@pytest.mark.slow
@pytest.mark.parametrize(
    "argv",
    [
        ["repo", "scan", "{tmp}/tiny", "--out", "{device}"],
        ["repo", "scan", "{tmp}/tiny", "--format", "json", "--out", "{device}"],
        ["repo", "report", "{batch}", "--html", "{device}"],
        ["repo", "compare", "{batch}", "--baseline", "guidance:none", "--html", "{device}"],
        ["repo", "export", "{batch}", "--format", "inspect", "--out", "{device}"],
        ["repo", "rate", "export", "{batch}", "--out", "{device}"],
    ],
    ids=["scan", "scan-json", "report-html", "compare-html", "export", "rate-export"],
)
def test_an_output_path_that_is_a_device_is_never_replaced(
    argv: list[str], device: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """``--out /dev/null`` as root: dokimi's atomic write put a regular file where /dev/null was."""
    from tests.helpers.git import git_repo

    git_repo(tmp_path / "tiny", {"AGENTS.md": "# tiny\n"})
    batch = _batch(tmp_path)
    argv = [
        a.replace("{tmp}", str(tmp_path)).replace("{device}", str(device)).replace("{batch}", str(batch))
        for a in argv
    ]
    _clean(*_command(capsys, argv))
    assert stat.S_ISCHR(os.lstat(device).st_mode)


def test_the_command_corpus_is_as_large_as_the_report_says() -> None:
    """Batch commands x the documents each reads x 23 inputs, and x 4 strange names; task.json through
    validate; 4 files a user names; every text option x 3 empty values; 8 run refusals; 6 device outputs."""
    batch = len(BATCH_CASES) * len(INPUTS) + len(BATCH_COMMANDS) * len(NAMES)
    files = len(INPUTS) * (1 + len(FILE_COMMANDS))
    options = 3 * len(_every_text_option())
    assert (len(BATCH_CASES), batch, files) == (21, 21 * 23 + 20, 115)
    assert options > 180
