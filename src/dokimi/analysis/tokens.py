"""A cell's tokens, as the site and the Inspect export show them, labelled with where they come from.

- ``gateway``: result.json's ``usage``, what dokimi's model gateway counted of a sealed real run (the
  authoritative figures);
- ``simulated``: a dry run's ``simulated.tokens``, what the harness reported of dokimi's scripted model's
  fixed usage: made up, never paid, and shown as such.

A cell with neither (an unsealed run, a harness that reports none) has no tokens: None, never 0.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Literal

if TYPE_CHECKING:
    from dokimi.schemas.result import Result

__all__ = ["CellTokens", "cell_tokens"]

#: How harnesses name each count in their own usage records (Anthropic's, OpenAI's, Gemini's words).
_NAMES: dict[str, tuple[str, ...]] = {
    "input": ("input_tokens", "prompt_tokens", "promptTokenCount", "input"),
    "output": ("output_tokens", "completion_tokens", "candidatesTokenCount", "output"),
    "cache_write": ("cache_creation_input_tokens", "cache_write_tokens", "cache_write"),
    "cache_read": ("cache_read_input_tokens", "cached_input_tokens", "cache_read_tokens", "cache_read"),
}


@dataclass(frozen=True)
class CellTokens:
    """One cell's token counts and their source."""

    input: int
    """Fresh input tokens (cached ones apart)."""
    output: int
    cache_write: int
    cache_read: int
    source: Literal["gateway", "simulated"]

    @property
    def total(self) -> int:
        return self.input + self.output + self.cache_write + self.cache_read

    def label(self) -> str:
        """``in 1,000, out 100, cache write 0, cache read 0`` and, when simulated, that it is."""
        text = (
            f"in {self.input:,}, out {self.output:,}, cache write {self.cache_write:,}, "
            f"cache read {self.cache_read:,}"
        )
        return text + (
            " (simulated: a dry run's scripted usage, never paid)" if self.source == "simulated" else ""
        )


def _first(counts: dict[str, int], names: tuple[str, ...]) -> int | None:
    return next((counts[name] for name in names if name in counts), None)


def cell_tokens(result: Result) -> CellTokens | None:
    """The gateway's counts, else a dry run's simulated ones, else None (see the module docstring)."""
    usage = result.usage
    if usage is not None:
        return CellTokens(
            usage.input_tokens,
            usage.output_tokens,
            usage.cache_write_tokens,
            usage.cache_read_tokens,
            "gateway",
        )
    simulated = result.simulated
    if simulated is None or not simulated.tokens:
        return None
    found = {kind: _first(simulated.tokens, names) for kind, names in _NAMES.items()}
    if found["input"] is None and found["output"] is None:
        return None
    return CellTokens(
        found["input"] or 0,
        found["output"] or 0,
        found["cache_write"] or 0,
        found["cache_read"] or 0,
        "simulated",
    )
