"""User-facing text explains instead of citing the specification: a reader has the docs, the error and the
schema description, not the spec. No section sign and no spec file name in the docs, README, the exported
JSON Schemas or the package (docstrings become schema descriptions and --help text)."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
CITATION = re.compile(r"§|(?<![/\w])(?:contract|mergeability|agent-modes|scoring-rubric)\.md\b|\bspec/")


def _texts() -> list[Path]:
    files = [
        ROOT / "README.md",
        *sorted((ROOT / "docs").rglob("*.md")),
        *sorted((ROOT / "schemas").glob("*.json")),
    ]
    for suffix in ("*.py", "*.yaml", "*.sh"):
        files += sorted((ROOT / "src").rglob(suffix))
    return files


@pytest.mark.slow
def test_no_user_facing_text_cites_a_spec_section() -> None:
    found = []
    for path in _texts():
        for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
            if CITATION.search(line):
                found.append(f"{path.relative_to(ROOT)}:{number}: {line.strip()}")
    assert found == []
