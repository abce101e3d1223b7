"""pytest: path arguments and ``::`` node ids, down to the test function or a class's method.

A node whose name the test file never spells is fail; one spelled but not defined by ``def``/``class``
(generated, imported), or a method missing from a class with a base class (inherited), is unresolved.
``[param]`` ids are stripped.
"""

from __future__ import annotations

import difflib
import re
from functools import partial

from dokimi.checks.scan.adapters.base import Check, Ctx, Inputs
from dokimi.checks.scan.paths import Tree
from dokimi.checks.scan.shell import Word
from dokimi.checks.scan.verdict import Verdict, fail, ok, unresolved

VALUE_OPTIONS = frozenset(
    {
        "-k",
        "-m",
        "-p",
        "-c",
        "-n",
        "-o",
        "-W",
        "-r",
        "--tb",
        "--maxfail",
        "--durations",
        "--rootdir",
        "--basetemp",
        "--junitxml",
        "--junit-xml",
        "--cov",
        "--cov-report",
        "--cov-config",
        "--confcutdir",
        "--override-ini",
        "--log-level",
        "--log-file",
        "--log-cli-level",
        "--timeout",
        "--dist",
        "--numprocesses",
        "--import-mode",
        "--capture",
        "--color",
        "--ignore",
        "--ignore-glob",
        "--deselect",
        "--count",
        "--reruns",
        "-x",
        "--pyargs",
    }
)
FLAG_ONLY = frozenset({"-x", "--pyargs"})
DEF = re.compile(r"^([ \t]*)(?:async\s+)?(def|class)\s+([A-Za-z_][A-Za-z0-9_]*)\s*(\(([^)]*)\))?", re.M)
ROOT_FILES = ("pytest.ini", "conftest.py")


class PytestAdapter:
    name = "pytest"
    commands = frozenset({"pytest", "py.test"})

    def detect(self, tree: Tree, root_texts: dict[str, str]) -> str | None:
        for name in ROOT_FILES:
            if tree.snapshot.is_file(name):
                return name
        conftests = tree.snapshot.by_basename.get("conftest.py", [])
        if conftests:
            return sorted(conftests)[0]
        for name, needle in (
            ("pyproject.toml", "[tool.pytest"),
            ("setup.cfg", "[tool:pytest]"),
            ("tox.ini", "[pytest]"),
        ):
            if needle in root_texts.get(name, ""):
                return f"{name} {needle}"
        return None

    def inputs(self, tree: Tree) -> list[str]:
        return []

    def checks(self, command: list[Word], ctx: Ctx) -> list[Check]:
        out: list[Check] = []
        i = 1
        while i < len(command):
            word = command[i]
            text = word.text
            i += 1
            if text.startswith("-"):
                if text in VALUE_OPTIONS and text not in FLAG_ONLY:
                    i += 1
                continue
            if not word.literal:
                continue
            path, _, node = text.partition("::")
            verdict = ctx.path_verdict(path)
            if not node:
                out.append(ctx.check("pytest_path", text, verdict))
                continue
            real = ctx.located(path) if verdict.status.startswith("ok") else None
            if real is None or not real.endswith(".py"):
                status = (
                    verdict
                    if not verdict.status.startswith("ok")
                    else unresolved("the node's file is not a .py file found from here")
                )
                out.append(ctx.check("pytest_node", text, status))
                continue
            out.append(ctx.check("pytest_node", text, partial(check_node, real, node), (real,)))
        return out


def _blocks(text: str) -> list[tuple[int, str, str, str, int]]:
    """(indent, kind, name, bases, offset) of every def/class."""
    return [
        (len(m.group(1).expandtabs()), m.group(2), m.group(3), m.group(5) or "", m.start())
        for m in DEF.finditer(text)
    ]


def check_node(path: str, node: str, inputs: Inputs) -> Verdict:
    text = inputs.text(path)
    if text is None:
        return unresolved(f"{path} could not be read")
    parts = [re.sub(r"\[.*\]$", "", p) for p in node.split("::") if p]
    blocks = _blocks(text)
    scope_start, scope_end, indent = 0, len(text), -1
    owner_bases = ""
    for depth, name in enumerate(parts):
        found = None
        for index, (ind, kind, bname, bases, offset) in enumerate(blocks):
            if bname != name or not (scope_start <= offset < scope_end):
                continue
            if depth == 0 and ind != 0:
                continue
            if depth > 0 and ind <= indent:
                continue
            found = (index, ind, kind, bases, offset)
            break
        if found is None:
            word = re.compile(rf"(?<![A-Za-z0-9_]){re.escape(name)}(?![A-Za-z0-9_])")
            names = sorted({b[2] for b in blocks if b[2].startswith(("test", "Test"))})
            close = difflib.get_close_matches(name, names, n=1)
            fix = f"did you mean {close[0]}?" if close else None
            if depth > 0 and owner_bases.strip() not in ("", "object", "unittest.TestCase", "TestCase"):
                return unresolved(
                    f"{name} is not defined in {parts[depth - 1]}, which may inherit it ({owner_bases})"
                )
            if word.search(text[scope_start:scope_end]):
                return unresolved(
                    f"{name} is in {path} but not defined by def/class there (generated or imported?)"
                )
            where = f"class {parts[depth - 1]}" if depth else path
            return fail(f"{where} defines no {name}", fix)
        index, ind, kind, bases, offset = found
        indent = ind
        owner_bases = bases
        scope_start = offset
        scope_end = len(text)
        for later in blocks[index + 1 :]:
            if later[0] <= ind:
                scope_end = later[4]
                break
    return ok(f"defined in {path}")
