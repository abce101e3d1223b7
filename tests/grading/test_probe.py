"""The grader isolation probe's parts with no container: which modules it goes into (appended, test files left
alone), that the code it appends is valid Python that reports to the channel, that its reports are read as
untrusted input (another nonce, junk, a link, a value it cannot report are ignored), and where dokimi looks
for the files it made."""

from __future__ import annotations

import ast
import json
import os
from pathlib import Path

from dokimi.grading.probe import PLANTED_PREFIX, inject_probe, planted_files, probe_code, read_probe_reports


def test_the_probe_is_appended_to_every_module_but_test_files_and_git(tmp_path: Path) -> None:
    files = {
        "pkg/__init__.py": 'from __future__ import annotations\n"""doc"""\n',
        "pkg/core.py": "X = 1\n",
        "tests/test_core.py": "def test_x(): pass\n",
        "conftest.py": "",
        "setup.py": "",
        ".git/hooks/x.py": "",
        "README.md": "",
    }
    for rel, text in files.items():
        (tmp_path / rel).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / rel).write_text(text)
    assert inject_probe(tmp_path, "n0nce") == 3
    init = (tmp_path / "pkg" / "__init__.py").read_text()
    assert init.startswith("from __future__ import annotations\n") and "_dokimi_grader_probe" in init
    ast.parse(init)  # the __future__ import stays first: still valid
    for untouched in ("tests/test_core.py", "conftest.py", ".git/hooks/x.py", "README.md"):
        assert (tmp_path / untouched).read_text() == files[untouched]


def test_the_appended_code_reports_what_it_could_read_once_per_process(tmp_path: Path) -> None:
    channel, content = tmp_path / "channel", tmp_path / "content"
    channel.mkdir()
    (content / "tasks" / "t1").mkdir(parents=True)
    (content / "tasks" / "t1" / "oracle.patch").write_text("the fix")
    # run here with its container paths pointed at scratch directories: it reads what exists, and reports
    code = probe_code("abc123").replace("'/eval/probe'", repr(str(channel)))
    code = code.replace("'/eval/content'", repr(str(content)))
    for _ in range(2):  # imported twice in one process: it reports once
        exec(compile(code, "probe", "exec"), {})
    (report,) = [json.loads(p.read_text()) for p in channel.iterdir()]
    assert report["nonce"] == "abc123" and report["phase"] == "import"
    oracle = str(content / "tasks" / "t1" / "oracle.patch")
    assert report["readable"][str(content)] == {
        "listable": True,
        "read": 1,
        "denied": 0,
        "examples": [oracle],
    }
    assert read_probe_reports(channel, "abc123").reports == 1


def test_reports_are_read_as_untrusted_input(tmp_path: Path) -> None:
    readable = {"/eval/content": {"read": 3, "listable": False, "examples": ["/x"]}, "/etc": {"read": 9}}
    good = {
        "nonce": "n",
        "readable": readable,
        "writable": ["task.json", "/etc/passwd"],
        "planted": ["/eval/run", "/tmp"],
    }
    (tmp_path / "a.json").write_text(json.dumps(good))
    (tmp_path / "b.json").write_text(json.dumps({**good, "nonce": "other"}))
    (tmp_path / "c.json").write_text("[" * 100000)
    os.symlink("a.json", tmp_path / "d.json")
    found = read_probe_reports(tmp_path, "n")
    assert found.reports == 1
    assert found.readable == {"/eval/content": 3} and found.examples == ["/x"]
    assert found.writable == ["task.json"]
    assert read_probe_reports(tmp_path / "missing", "n").ran is False


def test_a_file_the_probe_made_counts_only_in_the_run_directory_and_the_real_workspace(
    tmp_path: Path,
) -> None:
    (tmp_path / "workspace").mkdir()
    (tmp_path / f"{PLANTED_PREFIX}n").write_text("")
    (tmp_path / "workspace" / f"{PLANTED_PREFIX}other").write_text("")  # another probe's
    assert planted_files(tmp_path, "n") == ["/eval/run"]
    assert not (tmp_path / f"{PLANTED_PREFIX}n").exists()
