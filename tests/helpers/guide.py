"""A documentation page that runs as written: its ``$`` commands (in ``console`` blocks) with the output shown
under each, and the files (```` ```lang file=PATH ````) the reader writes; run in order by the docs tests
(tests/e2e/test_your_repo_guide.py, tests/checks/scan/test_scan_guide.py)."""

from __future__ import annotations

import os
import re
import shlex
import subprocess
import sys
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

SHOWN_HOME = "/home/ada/.cache/dokimi"
"""Where a page shows DOKIMI_HOME (its default for the user ada)."""


@dataclass
class Step:
    """One thing the reader does: a command (with the output the guide shows) or a file they write."""

    line: int
    """0-based index of the command's (or the file block's opening fence's) line in the guide."""
    command: str | None = None
    shown: list[str] = field(default_factory=list)
    file: str | None = None
    content: str = ""


def guide_steps(lines: list[str]) -> list[Step]:
    steps: list[Step] = []
    i = 0
    while i < len(lines):
        fence = re.match(r"^```(\w+)(?:\s+file=(\S+))?\s*$", lines[i])
        if not fence:
            i += 1
            continue
        kind, path = fence.group(1), fence.group(2)
        end = next(j for j in range(i + 1, len(lines)) if lines[j].startswith("```"))
        body = lines[i + 1 : end]
        if path:
            steps.append(Step(i, file=path, content="\n".join(body) + "\n"))
        elif kind == "console":
            for offset, text in enumerate(body):
                if text.startswith("$ "):
                    steps.append(Step(i + 1 + offset, command=text[2:]))
                elif steps and steps[-1].command is not None:
                    steps[-1].shown.append(text)
        i = end + 1
    return steps


def run_step(command: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    if command.startswith("dokimi "):
        argv = [sys.executable, "-m", "dokimi", *shlex.split(command[len("dokimi ") :])]
    else:
        argv = ["bash", "-c", command]
    return subprocess.run(argv, cwd=cwd, capture_output=True, text=True, timeout=900, check=False)


def rewrite(guide: Path, lines: list[str], steps: list[Step], outputs: dict[int, list[str]]) -> None:
    """Put each command's real output under it in the guide."""
    new: list[str] = []
    skip_until = -1
    by_line = {s.line: s for s in steps if s.command is not None}
    for index, text in enumerate(lines):
        if index < skip_until:
            continue
        new.append(text)
        if index in by_line:
            step = by_line[index]
            new.extend(outputs[index])
            skip_until = index + 1 + len(step.shown)
    guide.write_text("\n".join(new) + "\n")


CTX_DIGEST = (r"ctx-[0-9a-f]{24}", "ctx-<digest>")
"""An image tag that follows the example's content: the same page shows it for any content."""


def normalised(lines: list[str], substitutions: Sequence[tuple[str, str]]) -> list[str]:
    """``lines`` with each (pattern, replacement) of what differs between runs applied in turn, trailing
    spaces and the blank lines at the end left out: a page's ``normalise``."""
    out = []
    for line in lines:
        for pattern, replacement in substitutions:
            line = re.sub(pattern, replacement, line)
        out.append(line.rstrip())
    while out and not out[-1]:
        out.pop()
    return out


def unwrapped_batch_header(lines: list[str]) -> list[str]:
    """The batch header (``batch PATH (DRY RUN: ...)``) as one line: dokimi wraps a table's title at the
    terminal's width, continuation lines indented by two spaces, and the title's length there is the real
    path's (a temporary directory whose name varies between machines and runs), not the shorter one the page
    shows. A table's own header lines are indented further."""
    out: list[str] = []
    for line in lines:
        head = out[-1] if out else ""
        if (head == "batch" or head.startswith("batch ")) and re.match(r"  \S", line):
            out[-1] = f"{head} {line.strip()}"
        else:
            out.append(line)
    return out


def run_guide(
    page: Path, repo: Path, *, shown_root: str, normalise: Callable[[list[str]], list[str]]
) -> list[Step]:
    """Do each step of ``page`` in ``repo`` (write its files, run its commands; each must exit 0) and compare
    each command's stdout, ``repo``'s path shown as ``shown_root`` and DOKIMI_HOME as :data:`SHOWN_HOME`,
    with what the page shows, both through :func:`unwrapped_batch_header` and ``normalise``. With
    ``DOKIMI_REGENERATE_GUIDE=1``, write the real outputs into the page instead."""
    lines = page.read_text(encoding="utf-8").splitlines()
    steps = guide_steps(lines)
    regenerate = os.environ.get("DOKIMI_REGENERATE_GUIDE") == "1"
    outputs: dict[int, list[str]] = {}
    for step in steps:
        if step.file is not None:
            target = repo / step.file
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_text(step.content, encoding="utf-8")
            continue
        assert step.command is not None
        done = run_step(step.command, repo)
        assert done.returncode == 0, f"$ {step.command}\n{done.stdout}\n{done.stderr}"
        shown = done.stdout.replace(str(repo), shown_root)
        if os.environ.get("DOKIMI_HOME"):  # batches go under it; the page shows the default's place
            shown = shown.replace(os.environ["DOKIMI_HOME"], SHOWN_HOME)
        actual = [line.rstrip() for line in shown.splitlines()]
        outputs[step.line] = actual
        if not regenerate:
            expected = normalise(unwrapped_batch_header(step.shown))
            assert normalise(unwrapped_batch_header(actual)) == expected, f"$ {step.command}\n" + "\n".join(
                actual
            )
    if regenerate:
        rewrite(page, lines, steps, outputs)
    return steps
