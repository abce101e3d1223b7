"""builtin:pytest on the layouts real Python repositories use, each mined with ``repo task new`` and checked
sound in the real containers: a src layout with no import path configured, pytest's own ``pythonpath``
setting, a project in a subdirectory with its own ``testpaths`` (its tests run from the tree's root), and a
src-layout package installed in the image in editable mode from a copy that already holds the fix (the tree
under test must win over it, or the untouched workspace would pass)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.helpers.git import commit, git, git_repo
from tests.helpers.runs import dokimi_cli

pytestmark = [pytest.mark.docker, pytest.mark.slow]

BUGGY = "def add(a, b):\n    return a - b\n\n\ndef mul(a, b):\n    return a * b\n"
FIXED = BUGGY.replace("a - b", "a + b")
TESTS = "from {pkg}.ops import mul\n\n\ndef test_mul():\n    assert mul(2, 3) == 6\n"
NEW_TEST = "\n\ndef test_add():\n    from {pkg}.ops import add\n\n    assert add(2, 3) == 5\n"
PROJECT = '[project]\nname = "{pkg}"\nversion = "0.1"\n'
EDITABLE_DOCKERFILE = """\
FROM dokimi-base:bookworm
COPY pyproject.toml /opt/stale/pyproject.toml
COPY src /opt/stale/src
RUN python3 -m venv --system-site-packages /opt/venv \\
    && /opt/venv/bin/python3 -m pip install --no-index --no-build-isolation -q -e /opt/stale
ENV PATH=/opt/venv/bin:$PATH
"""

# layout -> (package directory, test file, extra files)
LAYOUTS: dict[str, tuple[str, str, dict[str, str]]] = {
    "src": ("src/{pkg}", "tests/test_ops.py", {"pyproject.toml": PROJECT}),
    "pythonpath": ("lib/{pkg}", "tests/test_ops.py", {"pytest.ini": "[pytest]\npythonpath = lib\n"}),
    "subproject": (
        "python/src/{pkg}",
        "python/tests/test_ops.py",
        {"python/pyproject.toml": PROJECT + '\n[tool.pytest.ini_options]\ntestpaths = ["tests"]\n'},
    ),
    "editable": ("src/{pkg}", "tests/test_ops.py", {"pyproject.toml": PROJECT}),
}


def _repository(root: Path, layout: str) -> tuple[Path, str]:
    pkg = f"calc_{layout}"
    package, test_file, extra = LAYOUTS[layout]
    package = package.format(pkg=pkg)
    files = {
        f"{package}/__init__.py": "",
        f"{package}/ops.py": BUGGY,
        test_file: TESTS.format(pkg=pkg),
        **{path: text.format(pkg=pkg) for path, text in extra.items()},
    }
    repo = git_repo(root / layout, files)
    fix = commit(
        repo,
        "Fix add: it subtracted",
        files={f"{package}/ops.py": FIXED, test_file: TESTS.format(pkg=pkg) + NEW_TEST.format(pkg=pkg)},
    )
    init = dokimi_cli(["repo", "init", str(repo), "--json"])
    assert init.returncode == 0, init.stderr
    if layout == "editable":
        (repo / ".agent-eval" / "Dockerfile").write_text(EDITABLE_DOCKERFILE)
    git(repo, "add", "-A")
    git(repo, "commit", "-q", "-m", "eval")
    return repo, fix


@pytest.mark.parametrize("layout", sorted(LAYOUTS))
def test_a_fix_in_each_layout_is_mined_and_checked_sound(
    docker_available: bool, tmp_path: Path, layout: str
) -> None:
    repo, fix = _repository(tmp_path, layout)
    mined = dokimi_cli(["repo", "task", "new", "fix_add", "--from-commit", fix, "-C", str(repo), "--json"])
    summary = json.loads(mined.stdout) if mined.stdout.strip() else None
    assert mined.returncode == 0, f"{mined.stdout}\n{mined.stderr}"
    assert summary is not None and summary["ok"] is True
    test_file = LAYOUTS[layout][1]
    assert summary["fail_to_pass"] == [f"{test_file}::test_add"]
    assert summary["pass_to_pass"] == [f"{test_file}::test_mul"]
