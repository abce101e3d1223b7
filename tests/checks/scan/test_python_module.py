"""``python -m NAME``: the standard library, one-word modules, packages with and without __main__.py."""

from __future__ import annotations

from pathlib import Path

from tests.checks.scan._util import rows, scan_dir, scan_files

GUIDE = """\
```sh
python -m calc "2 + 3"
python -m unittest discover
python -m venv .venv
python -m http.server 8000
python -m tool
python -m nomain
python -m pkg.sub
python -m gone.mod
python -m notthere
python3 -m srcpkg --help
python -m pip install -e .
```
"""


def test_python_m_resolves_where_python_finds_the_module(tmp_path: Path) -> None:
    result = scan_files(
        tmp_path,
        {
            "AGENTS.md": GUIDE,
            "calc/__init__.py": "",
            "calc/__main__.py": "print(1)\n",
            "tool.py": "",
            "nomain/__init__.py": "",
            "pkg/sub.py": "",
            "src/srcpkg/__init__.py": "",
            "src/srcpkg/__main__.py": "",
            "scripts/notthere.py": "",
        },
    )
    assert rows(result) == [
        (2, "python_module", "calc", "ok"),
        (3, "python_module", "unittest", "ok"),
        (4, "python_module", "venv", "ok"),
        (5, "python_module", "http.server", "ok"),
        (6, "python_module", "tool", "ok"),
        (7, "python_module", "nomain", "fail"),
        (8, "python_module", "pkg.sub", "ok"),
        (9, "python_module", "gone.mod", "unresolved"),
        (10, "python_module", "notthere", "unresolved"),
        (11, "python_module", "srcpkg", "ok"),
    ]
    why = {d.claim: d.verdict.why for d in result.drafts}
    assert why["unittest"] == "a module of the standard library"
    assert why["nomain"] == "nomain is a package without __main__.py: python -m cannot run it"
    assert why["notthere"].startswith("scripts/notthere.py is not at the command's directory")


def test_the_example_has_no_unresolved_python_m(example: Path) -> None:
    """The bundled example's guidance runs `python -m calc` (calc/__main__.py) and `python -m pytest`."""
    result = scan_dir(str(example), globs=["**/AGENTS.md", "**/CLAUDE.md"])
    modules = [d for d in result.drafts if d.kind == "python_module"]
    assert modules and all(d.verdict.status == "ok" for d in modules), modules
