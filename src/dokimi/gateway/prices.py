"""The one price table: USD per million tokens, per model, with the date it was checked.

The model gateway prices every model response it relays with :func:`cost_of`; that figure, not the one a
harness prints, is the cell's cost. A sealed run refuses a model the table does not know unless the user gives
its price (``--price MODEL=IN,OUT``, :func:`parse_price`), which then joins the table for that batch
(:func:`with_prices`) and is recorded in its batch.json; the gateway refuses a request for a model it cannot
price. Before forwarding a request the gateway reserves its worst case (:func:`worst_cost`).

A model id is matched by the longest table key it contains, after lower-casing and turning ``.`` and ``_``
into ``-``: ``us.anthropic.claude-haiku-4-5-20251001-v1:0`` and ``claude-haiku-4-5`` are both
``claude-haiku-4-5``. Keys that name a family (``claude-opus-4``) sit below the more precise keys of its
members (``claude-opus-4-5``), which win by being longer.

Updating: change the rows, then :data:`CHECKED` and :data:`SOURCE`. Past cells keep the cost they were given.
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping
from dataclasses import dataclass

__all__ = [
    "CHECKED",
    "PRICES",
    "SOURCE",
    "Price",
    "Usage",
    "cost_of",
    "parse_price",
    "price_of",
    "price_for",
    "with_prices",
    "worst_cost",
]

CHECKED = "2026-12-01"
"""The day every row below was compared with the vendor's published price list."""
SOURCE = "Anthropic's pricing page (platform documentation, 'Model pricing' table)"
"""Where the rows come from."""


@dataclass(frozen=True)
class Price:
    """USD per million tokens."""

    input: float
    output: float
    cache_write: float
    """A 5-minute cache write (the default a harness uses)."""
    cache_read: float


@dataclass(frozen=True)
class Usage:
    """Tokens of one model response (or a sum of them), in the gateway's normal form.

    ``input`` never includes cached tokens: an API that counts them inside its input total (OpenAI) has them
    taken out when the response is read (:mod:`dokimi.gateway.usage`)."""

    input: int = 0
    output: int = 0
    cache_write: int = 0
    cache_read: int = 0

    def __add__(self, other: Usage) -> Usage:
        return Usage(
            self.input + other.input,
            self.output + other.output,
            self.cache_write + other.cache_write,
            self.cache_read + other.cache_read,
        )

    @property
    def total(self) -> int:
        return self.input + self.output + self.cache_write + self.cache_read


def _p(input: float, output: float, cache_write: float, cache_read: float) -> Price:
    return Price(input, output, cache_write, cache_read)


PRICES: Mapping[str, Price] = {
    # Anthropic, checked on CHECKED against SOURCE. Cache writes are the 5-minute ones.
    "claude-fable-5-1": _p(10.0, 50.0, 12.5, 0.25),
    "claude-mythos-5-1": _p(10.0, 50.0, 12.5, 0.25),
    "claude-fable-5": _p(10.0, 50.0, 12.5, 1.0),
    "claude-mythos-5": _p(10.0, 50.0, 12.5, 1.0),
    "claude-opus-5-5": _p(4.0, 20.0, 5.0, 0.20),
    "claude-opus-5": _p(5.0, 25.0, 6.25, 0.50),
    "claude-opus-4-8": _p(5.0, 25.0, 6.25, 0.50),
    "claude-opus-4-7": _p(5.0, 25.0, 6.25, 0.50),
    "claude-opus-4-6": _p(5.0, 25.0, 6.25, 0.50),
    "claude-opus-4-5": _p(5.0, 25.0, 6.25, 0.50),
    "claude-opus-4-1": _p(15.0, 75.0, 18.75, 1.50),
    "claude-opus-4": _p(15.0, 75.0, 18.75, 1.50),
    "claude-sonnet-5-5": _p(2.0, 10.0, 2.5, 0.10),
    "claude-sonnet-5": _p(2.0, 10.0, 2.5, 0.20),
    "claude-sonnet-4-5": _p(3.0, 15.0, 3.75, 0.30),
    "claude-sonnet-4": _p(3.0, 15.0, 3.75, 0.30),
    "claude-haiku-5-5": _p(0.10, 0.50, 0.125, 0.01),  # prompts up to 100k tokens; longer ones cost more
    "claude-haiku-4-5": _p(1.0, 5.0, 1.25, 0.10),
}
"""Model key -> price. Only rows checked on :data:`CHECKED`; no guesses (an unknown model is unpriced)."""

_SEPARATORS = re.compile(r"[._]")


def _normal(model: str) -> str:
    return _SEPARATORS.sub("-", model.strip().lower())


def with_prices(extra: Mapping[str, Price]) -> Mapping[str, Price]:
    """The table with the user's rows (``--price``) added; a user's row wins over the table's row of the same
    name."""
    return {**PRICES, **{_normal(model): price for model, price in extra.items()}}


def price_for(model: str | None, table: Mapping[str, Price] = PRICES) -> tuple[str, Price] | None:
    """The table row for ``model``: the longest key contained in its normal form, or None."""
    if not model:
        return None
    name = _normal(model)
    best: str | None = None
    for key in table:
        if _contains_key(name, key) and (best is None or len(key) > len(best)):
            best = key
    return None if best is None else (best, table[best])


def _contains_key(name: str, key: str) -> bool:
    """``key`` occurs in ``name`` and no digit follows it (``claude-opus-4`` is not in ``-opus-45``)."""
    start = name.find(key)
    while start != -1:
        end = start + len(key)
        if end == len(name) or not name[end].isdigit():
            return True
        start = name.find(key, start + 1)
    return False


def cost_of(model: str | None, usage: Usage, table: Mapping[str, Price] = PRICES) -> float | None:
    """USD for ``usage`` of ``model``; None when the table does not know the model."""
    row = price_for(model, table)
    return None if row is None else price_of(row[1], usage)


def price_of(price: Price, usage: Usage) -> float:
    """USD for ``usage`` at ``price``."""
    return (
        usage.input * price.input
        + usage.output * price.output
        + usage.cache_write * price.cache_write
        + usage.cache_read * price.cache_read
    ) / 1_000_000


def worst_cost(price: Price, input_tokens: int, output_tokens: int) -> float:
    """The most a request can cost: ``input_tokens`` at the dearest input rate (fresh or cache write) and
    ``output_tokens`` at the output rate."""
    return (input_tokens * max(price.input, price.cache_write) + output_tokens * price.output) / 1_000_000


CACHE_WRITE_FACTOR = 1.25
"""A user's price without cache rates (``--price M=IN,OUT``): cache writes cost IN x this, and cache reads
cost IN, the most any vendor charges for them (give four numbers for exact rates)."""


def parse_price(text: str) -> tuple[str, Price]:
    """``MODEL=IN,OUT`` or ``MODEL=IN,OUT,CACHE_WRITE,CACHE_READ`` (USD per million tokens) -> (model,
    price); ValueError saying what is wrong."""
    model, sep, rates = text.partition("=")
    model = model.strip()
    if not sep or not model:
        raise ValueError(f"{text!r}: expected MODEL=IN,OUT (USD per million tokens)")
    parts = [p.strip() for p in rates.split(",")]
    if len(parts) not in (2, 4):
        raise ValueError(f"{text!r}: expected two rates (IN,OUT) or four (IN,OUT,CACHE_WRITE,CACHE_READ)")
    try:
        numbers = [float(p) for p in parts]
    except ValueError:
        raise ValueError(f"{text!r}: the rates must be numbers (USD per million tokens)") from None
    if not all(math.isfinite(n) and n >= 0 for n in numbers):
        raise ValueError(f"{text!r}: the rates must be finite and not negative")
    if len(numbers) == 2:
        numbers += [numbers[0] * CACHE_WRITE_FACTOR, numbers[0]]
    return model, Price(*numbers)
