"""Text dokimi did not write never reaches a terminal raw (issue 20): a commit message with OSC 0 (the
terminal's title) and OSC 52 (a clipboard write), CSI and C1 controls through ``repo task new``, and a batch
whose every free-text field holds them (a grader's reason, metric names, a cell that names another cell,
rich markup) through every command that prints a batch. The unit rules are dokimi.controls."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from dokimi.cli.main import main
from dokimi.controls import escape_controls, json_safe, strip_controls
from tests.helpers.batches import write_cell, write_pin, write_plan
from tests.helpers.git import commit
from tests.helpers.runs import tiny_repo

#: OSC 0 (title, BEL-terminated), OSC 52 (clipboard, ST-terminated), CSI (clear screen, 7- and 8-bit), C1 NEL,
#: a NUL, DEL, a carriage return that would overwrite the line, and rich markup
HOSTILE = (
    "\x1b]0;owned title\x07\x1b]52;c;ZWNobyBvd25lZA==\x1b\\\x1b[2J\x9b31m\x85\x00\x7f\rfake: pass"
    "[link=https://evil.test]click[/link][bold red]"
)
IN_GIT = HOSTILE.replace("\x00", "")
"""What git keeps in a commit message or a path (no NUL)."""
RAW = re.compile(r"[\x00-\x08\x0b-\x1f\x7f-\x9f]")


def _strings(value: object) -> set[str]:
    if isinstance(value, dict):
        return {s for v in value.values() for s in _strings(v)}
    if isinstance(value, list):
        return {s for v in value for s in _strings(v)}
    return {value} if isinstance(value, str) else set()


def _raw_controls(text: str) -> list[str]:
    return sorted({repr(c) for c in RAW.findall(text)})


def test_strip_drops_whole_sequences_and_escape_shows_every_control() -> None:
    assert strip_controls("a\x1b]0;t\x07b\x1b]52;c;Zm9v\x1b\\c\x1b[2Jd\x9b31me\x85f\tg\nh") == "abcdef\tg\nh"
    shown = escape_controls(HOSTILE + "\udcff")
    assert _raw_controls(shown) == [] and "\\x1b]0;owned title\\x07" in shown and shown.endswith("\\xff")
    document = json.dumps({"k": HOSTILE + "\udcff"}, ensure_ascii=False)
    safe = json_safe(document)
    assert _raw_controls(safe) == [] and json.loads(safe) == json.loads(document)


def test_task_new_prints_no_escape_and_keeps_none_in_task_json(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    tiny = tiny_repo(tmp_path / "tiny")
    message = f"Fix f {IN_GIT}\n\nThe sum is wrong\x1b]0;again\x07 after an edit.\x9b2J"
    sha = commit(
        tiny.path,
        message,
        files={"total.txt": "1\n", "tests/test_total.py": "def test_total():\n    assert True\n"},
    )
    rc = main(["repo", "task", "new", "mined", "--from-commit", sha, "-C", str(tiny.path)])
    captured = capsys.readouterr()
    assert rc == 0, captured.err
    assert _raw_controls(captured.out + captured.err) == []
    prompt = json.loads((tiny.path / ".agent-eval" / "tasks" / "mined" / "task.json").read_text())["prompt"]
    assert _raw_controls(prompt) == [] and "owned" not in prompt
    assert prompt.startswith("Fix f fake: pass") and "The sum is wrong after an edit." in prompt
    assert "fake: pass" in captured.out  # the prompt is printed, its escapes gone


@pytest.fixture
def hostile_batch(tmp_path: Path) -> Path:
    """A finished batch whose free text carries HOSTILE: a grader's reason, a metric's name, a guidance file,
    and a cell whose result.json names another cell (its task and arm printed as the reason)."""
    batch = tmp_path / "batch"
    write_pin(batch, source="/src/" + HOSTILE)
    cells = [(t, a, "m1", None, 0) for t in ("t1", "t2") for a in ("guidance:none", "guidance:raw")]
    write_plan(batch, cells)
    for task, arm, *_ in cells:
        write_cell(
            batch,
            task,
            arm,
            meta=True,
            passed=arm == "guidance:raw",
            grader_failure=task == "t2",
            grader_error=f"grade said {HOSTILE}" if task == "t2" else None,
            metrics={f"metric{HOSTILE}": 1.0},
            meta_overrides={"guidance": {"files": [f"AGENTS{HOSTILE}.md"]}},
        )
    impostor = write_cell(batch, "t3", "guidance:raw", meta=True)
    data = json.loads((impostor / "result.json").read_text())
    data.update(task=f"t9{HOSTILE}", arm=f"guidance:{HOSTILE}")
    (impostor / "result.json").write_text(json.dumps(data))
    return batch


@pytest.mark.slow
@pytest.mark.parametrize(
    "argv",
    [
        ["repo", "report", "{batch}"],
        ["repo", "report", "{batch}", "--json"],
        ["repo", "compare", "{batch}", "--baseline", "guidance:none"],
        ["repo", "compare", "{batch}", "--baseline", "guidance:none", "--json"],
        ["repo", "rate", "export", "{batch}", "--out", "{tmp}/rate"],
        ["repo", "export", "{batch}", "--format", "inspect", "--out", "{tmp}/logs"],
    ],
    ids=["report", "report-json", "compare", "compare-json", "rate-export", "export"],
)
def test_no_command_prints_a_batchs_escapes_raw(
    argv: list[str], hostile_batch: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    if "export" in argv and "inspect" in argv:
        pytest.importorskip("inspect_ai")
    args = [a.replace("{batch}", str(hostile_batch)).replace("{tmp}", str(tmp_path)) for a in argv]
    rc = main(args)
    captured = capsys.readouterr()
    text = captured.out + captured.err
    assert rc in (0, 1), text
    assert "Traceback" not in text
    assert _raw_controls(text) == [], text


def test_json_output_keeps_the_text_as_escapes(
    hostile_batch: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["repo", "report", str(hostile_batch), "--json"]) == 0
    text = capsys.readouterr().out
    assert "\\u001b]0;owned title\\u0007" in text and "\\u009b31m\\u0085" in text
    assert "/src/" + HOSTILE in _strings(json.loads(text))  # read back, the same value


def test_validate_prints_a_task_directory_named_with_escapes_escaped(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    tiny = tiny_repo(tmp_path / "tiny")
    commit(tiny.path, "hostile", files={f".agent-eval/tasks/t{IN_GIT}/task.json": '{"id": "x"}\n'})
    rc = main(["repo", "validate", str(tiny.path), "--manifest", ".agent-eval/repo-eval.yaml"])
    captured = capsys.readouterr()
    assert rc in (0, 1)
    assert _raw_controls(captured.out + captured.err) == []
    assert "tasks/t\\x1b]0;owned title\\x07" in captured.out + captured.err


@pytest.mark.slow
def test_a_progress_bar_shows_a_task_named_with_markup_and_escapes_as_text(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """``repo tasks check`` names each task in its progress bar; a task directory the repository named
    ``[link=...]`` or with an OSC sequence is shown as text (rich reads a description as markup by
    default)."""
    import io

    from rich.console import Console

    from dokimi.cli import _common
    from dokimi.cli.tasks import _Progress

    screen = io.StringIO()
    monkeypatch.setattr(
        _common, "stderr_console", lambda: Console(file=screen, force_terminal=True, width=300)
    )
    with _Progress(enabled=True) as progress:
        progress.advance(f"t{IN_GIT}", "oracle")
        progress._bar.refresh()
    shown = screen.getvalue()
    assert "[link=https://evil.test]click[/link]" in shown and "\\x1b]0;owned title\\x07" in shown
    assert (
        "\x1b]0;" not in shown and "\x1b]52;" not in shown and "\x1b]8;" not in shown
    )  # no title, clipboard, link
