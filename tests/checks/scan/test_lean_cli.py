"""`dokimi repo scan` as pre-commit runs it stays lean: no click, pydantic, rich or YAML imported, and the
lean reading of its arguments gives what the click command gives, or hands the arguments to click."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from dokimi.cli.main import main, run_click
from dokimi.cli.scan_lean import lean_scan_arguments
from tests.helpers.git import git_repo, write_files

ROOT = Path(__file__).resolve().parents[3]

GUIDE = """\
# Agents

Run `make test`; see [the notes](docs/notes.md) and `src/app.py`, `src/gone.py` and `load_config`.

```sh
make test && python -m pytest tests/
```
"""

#: Modules a text scan never needs: the CLI framework, the document models, rich, YAML, the scratch dirs,
#: the glob engine for patterns of literal parts, * and ** (and shutil, hashlib, importlib.resources, which
#: cost milliseconds for one call each).
HEAVY = (
    "click",
    "pydantic",
    "rich",
    "ruamel",
    "yaml",
    "tempfile",
    "dokimi.cli.app",
    "dokimi.schemas",
    "wcmatch",
    "shutil",
    "hashlib",
    "importlib.resources",
)


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    return git_repo(
        tmp_path / "repo",
        {
            "AGENTS.md": GUIDE,
            "Makefile": "test:\n\tpytest\n",
            "docs/notes.md": "notes\n",
            "src/app.py": "def load_config():\n    pass\n",
            "tests/test_app.py": "def test_x():\n    pass\n",
        },
    )


SCRIPT = """\
import json, sys
before = set(sys.modules)
from dokimi.cli.main import main
code = main(sys.argv[1:]) if len(sys.argv) > 1 else 0
sys.stdout.flush()
print("\\nMODULES " + json.dumps(sorted(set(sys.modules) - before)))
sys.exit(code)
"""


def imported_by_a_scan(repo: Path, *args: str) -> tuple[int, set[str]]:
    """Exit code and the modules a `dokimi repo scan` imports in a new interpreter, the console script's way
    (dokimi.cli.main:main); not those the interpreter had imported at start-up (a site's .pth hooks)."""
    proc = subprocess.run(
        [sys.executable, "-c", SCRIPT, "repo", "scan", str(repo), *args],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
        env={"PATH": "/usr/bin:/bin", "PYTHONPATH": str(ROOT / "src"), "HOME": str(repo.parent)},
    )
    assert proc.returncode in (0, 1), proc.stderr
    return proc.returncode, set(json.loads(proc.stdout.rsplit("\nMODULES ", 1)[1]))


def heavy_among(modules: set[str]) -> list[str]:
    return sorted(m for m in modules if any(m == h or m.startswith(h + ".") for h in HEAVY))


@pytest.mark.slow
def test_a_text_scan_imports_no_cli_framework_models_or_rich(repo: Path) -> None:
    code, modules = imported_by_a_scan(repo, "--fail-on-fail")
    assert code == 1  # src/gone.py does not exist: the gate fails, so the scan really ran
    assert "dokimi.checks.scan.engine" in modules
    assert heavy_among(modules) == []


@pytest.mark.slow
def test_sarif_and_all_stay_lean_too(repo: Path) -> None:
    _, modules = imported_by_a_scan(repo, "--format", "sarif", "--all")
    assert heavy_among(modules) == []


PLAIN_MANIFEST = (
    "schema: repo_manifest.v1\nid: m\nguidance:\n"
    "  globs: [AGENTS.md, 'docs/**/*.md']\nbuild_systems: [make]\n"
)


@pytest.mark.slow
def test_a_scan_with_a_plain_manifest_stays_lean(repo: Path, tmp_path: Path) -> None:
    """A manifest in plain YAML is read without ruamel or the models, given or at the default place."""
    (tmp_path / "m.yaml").write_text(PLAIN_MANIFEST)
    code, modules = imported_by_a_scan(repo, "--manifest-file", str(tmp_path / "m.yaml"), "--fail-on-fail")
    assert code == 1
    assert heavy_among(modules) == []
    write_files(repo, {".agent-eval/repo-eval.yaml": PLAIN_MANIFEST})
    code, modules = imported_by_a_scan(repo, "--fail-on-fail")
    assert code == 1
    assert heavy_among(modules) == []
    # one the plain reader leaves (a flow mapping) goes through the YAML reader and the model
    write_files(repo, {".agent-eval/repo-eval.yaml": PLAIN_MANIFEST + "source: {url: x}\n"})
    code, modules = imported_by_a_scan(repo, "--fail-on-fail")
    assert code == 1
    assert "ruamel.yaml" in modules and "dokimi.schemas.manifest" in modules


@pytest.mark.slow
def test_a_scan_of_unchanged_guidance_imports_no_markdown_parser(repo: Path) -> None:
    """The Markdown items of the first scan are kept (dokimi.checks.scan.items_cache): the next scan of the
    same texts needs no parse, nor markdown-it, and finds the same."""
    first = imported_by_a_scan(repo, "--fail-on-fail")
    assert "markdown_it" in first[1]
    code, modules = imported_by_a_scan(repo, "--fail-on-fail")
    assert code == 1 and "dokimi.checks.scan.engine" in modules
    assert "markdown_it" not in modules


@pytest.mark.slow
def test_the_bash_grammar_is_loaded_without_its_package_extras(repo: Path) -> None:
    """A command the plain-word split cannot take runs tree-sitter's bash grammar: its compiled module only,
    not the package's importlib.resources (and tempfile) for queries the scan never reads."""
    write_files(repo, {"AGENTS.md": GUIDE + '\n```sh\necho "$(date)" > out.txt && make test\n```\n'})
    code, modules = imported_by_a_scan(repo, "--fail-on-fail")
    assert code == 1
    assert "tree_sitter" in modules
    assert heavy_among(modules) == [] and "importlib.resources" not in modules


@pytest.mark.slow
def test_help_goes_to_click(repo: Path) -> None:
    _, modules = imported_by_a_scan(repo, "--help")
    assert "click" in modules


USUAL = [
    ["--fail-on-fail"],
    ["--all"],
    ["--json"],
    ["--format", "sarif"],
    ["--format=json", "--fail-on-fail"],
    ["--fail-on-fail", "--all", "--fail-on-fail"],
]


@pytest.mark.parametrize("options", USUAL, ids=" ".join)
def test_the_lean_path_prints_and_exits_as_the_click_command_does(
    repo: Path, options: list[str], capsys: pytest.CaptureFixture[str]
) -> None:
    args = ["repo", "scan", str(repo), *options]
    assert lean_scan_arguments(args) is not None
    lean = main(args), capsys.readouterr()
    clicked = run_click(args), capsys.readouterr()
    assert lean == clicked


def test_the_lean_path_reads_options_before_the_source_and_writes_out(
    repo: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    (tmp_path / "m.yaml").write_text("schema: repo_manifest.v1\nid: m\nguidance:\n  globs: [AGENTS.md]\n")
    args = ["repo", "scan", "--manifest-file", str(tmp_path / "m.yaml"), "--out", str(tmp_path / "r.json")]
    args.append(str(repo))
    assert lean_scan_arguments(args) is not None
    lean = main(args), capsys.readouterr(), (tmp_path / "r.json").read_text()
    clicked = run_click(args), capsys.readouterr(), (tmp_path / "r.json").read_text()
    assert lean == clicked
    assert json.loads(lean[2])["manifest"] is not None


UNUSUAL = [
    [],  # no SOURCE
    ["--help"],
    ["-h"],
    ["--static", "x.json"],
    ["--run-static"],
    ["--json", "--format", "sarif"],
    ["--format", "xml"],
    ["--manifest", "a.yaml", "--manifest-file", "b.yaml"],
    ["--manifest", "a.yaml", "--manifest", "b.yaml"],
    ["--manifest"],
    ["--manifest="],
    ["--out", "-"],
    ["--json=yes"],
    ["--"],
    ["--no-such-option"],
    ["second-source"],
]


@pytest.mark.parametrize("options", UNUSUAL, ids=lambda o: " ".join(o) or "nothing")
def test_unusual_arguments_go_to_click(repo: Path, options: list[str]) -> None:
    assert lean_scan_arguments(["repo", "scan", str(repo), *options][: 2 if not options else None]) is None


def test_a_directory_where_a_file_is_wanted_goes_to_click(
    repo: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    for option in ("--out", "--manifest-file"):
        args = ["repo", "scan", str(repo), option, str(tmp_path)]
        assert lean_scan_arguments(args) is None
        assert main(args) == 2
        assert "is a directory" in capsys.readouterr().err


def test_other_commands_are_not_read_here() -> None:
    assert lean_scan_arguments(["repo", "validate", "."]) is None
    assert lean_scan_arguments(["scan", "."]) is None
