"""pre-commit <-> CI file-set parity: each tool both run, claim by claim with its expected status."""

from __future__ import annotations

from pathlib import Path

from tests.checks.scan._util import rows, scan_files

PRE_COMMIT = """\
exclude: ^third_party/
repos:
  - repo: https://github.com/astral-sh/ruff-pre-commit
    rev: v0.6.0
    hooks:
      - id: ruff
        exclude: ^tests/
      - id: ruff-format
  - repo: https://github.com/psf/black
    rev: 24.1.0
    hooks:
      - id: black
        files: ^src/
  - repo: https://github.com/pre-commit/mirrors-mypy
    rev: v1.10.0
    hooks:
      - id: mypy
        files: ^src/
  - repo: https://github.com/example/unknown-hooks
    rev: v1
    hooks:
      - id: lint-things
  - repo: local
    hooks:
      - id: shellcheck
        name: shellcheck
        entry: shellcheck
        language: system
        types: [shell]
      - id: pylint
        name: pylint
        entry: uv run pylint
        language: system
        types: [python]
        pass_filenames: false
"""

CI = """\
name: ci
on: [push]
jobs:
  lint:
    runs-on: ubuntu-latest
    steps:
      - uses: actions/checkout@v4
      - run: ruff check .
      - run: |
          ruff format --check src tests
          black --check src
          uv run mypy src
          shellcheck scripts/*.sh
      - run: uv run pylint src
      - run: lint-things .
      - uses: astral-sh/ruff-action@v3
        with:
          src: src
  hooks:
    runs-on: ubuntu-latest
    steps:
      - uses: pre-commit/action@v3.0.1
      - run: SKIP=mypy pre-commit run --all-files
      - run: mypy
        working-directory: src
"""

TREE = {
    ".pre-commit-config.yaml": PRE_COMMIT,
    ".github/workflows/ci.yml": CI,
    "AGENTS.md": "Run `pre-commit run --all-files` before you push.\n",
    "src/app/__init__.py": "",
    "src/app/core.py": "",
    "tests/test_core.py": "",
    "scripts/build.sh": "",
    "tools/gen.py": "",
    "third_party/vendored.py": "",
    "README.md": "",
}


def test_each_tool_both_run_is_compared_file_set_to_file_set(tmp_path: Path) -> None:
    result = scan_files(tmp_path, TREE, build_systems=["pre-commit"])
    assert rows(result, ".github/workflows/ci.yml") == [
        (8, "ci_parity", "ruff check", "fail"),
        (10, "ci_parity", "ruff format", "fail"),
        (11, "ci_parity", "black", "ok"),
        (12, "ci_parity", "mypy", "ok"),
        (13, "ci_parity", "shellcheck", "ok"),
        (14, "ci_parity", "pylint", "unresolved"),
        (15, "ci_parity", "lint-things", "unresolved"),
        (16, "ci_parity", "ruff check", "fail"),
        (22, "ci_parity", "pre-commit", "ok"),
        (23, "ci_parity", "pre-commit", "ok"),
        (24, "ci_parity", "mypy", "unresolved"),
    ]
    why = {(d.line, d.claim): d.verdict.why for d in result.drafts}
    assert why[(8, "ruff check")] == (
        "CI checks 2 files (tests/test_core.py, third_party/vendored.py) that the hook ruff at "
        ".pre-commit-config.yaml:6 skips (a commit passes the hook, then fails CI); the tool's own "
        "configuration (its excludes) is not read"
    )
    assert why[(10, "ruff format")].startswith(
        "the hook ruff-format at .pre-commit-config.yaml:8 checks 1 file (tools/gen.py) that CI never checks"
    )
    assert why[(11, "black")] == "the same 2 files as the hook black at .pre-commit-config.yaml:12"
    assert why[(13, "shellcheck")].startswith("the same 1 file as the hook shellcheck")
    assert why[(14, "pylint")] == "the hook pylint runs without file names, on the files its tool picks"
    assert why[(15, "lint-things")].startswith("the hook lint-things comes from another repository")
    assert (
        why[(23, "pre-commit")] == "CI runs pre-commit's hooks themselves, but for those SKIP=mypy leaves out"
    )
    assert why[(24, "mypy")].startswith("CI gives it no path, so its configuration picks the files")


def test_no_claims_without_the_pre_commit_adapter_or_a_workflow(tmp_path: Path) -> None:
    result = scan_files(tmp_path, TREE, build_systems=["make"])
    assert [d for d in result.drafts if d.kind == "ci_parity"] == []
    without = {k: v for k, v in TREE.items() if not k.startswith(".github/")}
    result = scan_files(tmp_path / "b", without, build_systems=["pre-commit"])
    assert [d for d in result.drafts if d.kind == "ci_parity"] == []
