"""Any harness without a structured trace: its whole stdout is the answer."""

from __future__ import annotations

from collections.abc import Iterable

from dokimi.harness.traces import Conversion


def convert(lines: Iterable[str]) -> Conversion:
    """For harnesses without a structured trace: the whole stdout is the answer, and there are no events.

    An empty answer is an error (the run produced nothing usable); there is no cost, turn count or usage.
    """
    answer = "".join(lines).strip()
    return Conversion(answer=answer, is_error=not answer, complete=True)
