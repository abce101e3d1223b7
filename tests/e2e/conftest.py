"""Fixtures the end-to-end tests share."""

from __future__ import annotations

import runpy
from pathlib import Path

import pytest

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"


@pytest.fixture
def example(tmp_path: Path) -> Path:
    """The bundled example repository (examples/build_example.py), built in tmp_path/calc."""
    repo = tmp_path / "calc"
    runpy.run_path(str(EXAMPLES / "build_example.py"))["build_example"](repo)
    return repo
