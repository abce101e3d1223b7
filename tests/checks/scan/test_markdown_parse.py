"""The scan's Markdown parse: markdown-it with a faster table-row split that gives the same cells."""

from __future__ import annotations

import importlib.util
from collections.abc import Callable

import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

from dokimi.checks.scan.markdown import extract, split_cells


def markdown_it_split() -> Callable[[str], list[str]]:
    """markdown-it's own ``escapedSplit``, from a fresh copy of its module (the scan replaces it in the one
    it imports)."""
    spec = importlib.util.find_spec("markdown_it.rules_block.table")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    split: Callable[[str], list[str]] = module.escapedSplit
    return split


ORIGINAL = markdown_it_split()


@pytest.mark.slow
@settings(max_examples=1000)
@given(st.text(alphabet="|\\ab` ", max_size=24))
@example("a\\|b|c")
@example("\\\\|x")
@example("|\\||")
def test_split_cells_cuts_a_row_as_markdown_it_does(row: str) -> None:
    assert split_cells(row) == ORIGINAL(row)


def test_a_table_cell_with_an_escaped_pipe_in_a_code_span() -> None:
    text = "| command | what |\n|---|---|\n| `make a\\|b` | `src/x.py` |\n\nAfter: `c.py`\n"
    spans = [(span.line, span.text) for span in extract(text).spans]
    assert spans == [(3, "make a|b"), (3, "src/x.py"), (5, "c.py")]
