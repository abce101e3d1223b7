"""The agent's own tests: which files of a change are its tests, and the command that runs them (the
manifest's ``tests.run``). Pure; :mod:`dokimi.grading.own_tests` runs them on the agent's tree and the base.
"""

from __future__ import annotations

import re
import shlex
from collections.abc import Sequence

from dokimi.checks.merge.diff import WorkspaceDiff
from dokimi.errors import UsageError
from dokimi.globs import match_any
from dokimi.sandbox.specs import substitute
from dokimi.schemas.manifest import TestsBlock

__all__ = ["MAX_TEST_FILES", "TESTS_PLACEHOLDER", "agent_test_files", "own_tests_argv"]

TESTS_PLACEHOLDER = "{tests}"
#: Every placeholder of the manifest: those without a value in a tests container are refused by name.
_PLACEHOLDER = re.compile(r"\{(eval_dir|source_dir|run_dir|out|task|tests)\}")
MAX_TEST_FILES = 500
"""More test files than this are not run (an argv that long is no test of one change)."""
RUN_HINT = "tests.run takes {tests} (a word of its own) and {task}"


def own_tests_argv(command: str, files: Sequence[str], *, task: str) -> list[str]:
    """``tests.run`` as an argv: shell-like words, the word ``{tests}`` replaced by one word per file and
    ``{task}`` by the task id. A command without ``{tests}`` as a word of its own is a UsageError."""
    where = "tests.run"
    try:
        words = shlex.split(command)
    except ValueError as exc:
        raise UsageError(f"{where}: cannot split {command!r}: {exc}") from None
    if TESTS_PLACEHOLDER not in words:
        raise UsageError(
            f"{where}: {command!r} does not name {TESTS_PLACEHOLDER} as a word of its own",
            hint="write for example: python3 -m pytest -q {tests}",
        )
    argv: list[str] = []
    for word in words:
        if word == TESTS_PLACEHOLDER:
            argv += list(files)
        else:
            values = {"task": task}
            argv.append(substitute(word, values, where=where, placeholders=_PLACEHOLDER, hint=RUN_HINT))
    return argv


def agent_test_files(diff: WorkspaceDiff, tests: TestsBlock) -> list[str]:
    """The files the change added or modified that match ``tests.globs``, sorted."""
    found = {
        change.new_path
        for change in diff.files
        if change.new_path is not None and change.status != "D" and match_any(tests.globs, change.new_path)
    }
    return sorted(found)
