"""Which vendor made a model, from its id: what ``repo compare`` needs before it compares the models of two
vendors whose work an LLM judge scored (a judge prefers its own vendor's work: docs/mergeability.md).

A model id names its vendor by its family (``claude-…``, ``gpt-…``, ``gemini-…``), also behind a provider's
prefix (``us.anthropic.claude-…`` on Bedrock, ``openai/gpt-…`` through a router). An id of no family listed
here is its own vendor, named by its first word: two such models of one first word count as one vendor.
"""

from __future__ import annotations

import re

__all__ = ["VENDOR_FAMILIES", "second_judge_of_another_family", "vendor_of"]

VENDOR_FAMILIES: dict[str, tuple[str, ...]] = {
    "anthropic": ("claude",),
    "openai": ("gpt", "chatgpt", "codex", "o1", "o3", "o4", "davinci"),
    "google": ("gemini", "gemma"),
    "alibaba": ("qwen", "qwq"),
    "mistral": ("mistral", "mixtral", "codestral", "devstral", "magistral", "ministral"),
    "deepseek": ("deepseek",),
    "xai": ("grok",),
    "meta": ("llama",),
    "moonshot": ("kimi",),
    "zhipu": ("glm",),
}
"""Vendor -> the first words of its model families' ids."""

_FIRST_WORD = re.compile(r"[a-z0-9]+")


def _names_family(word: str, family: str) -> bool:
    """``word`` is the family's name, alone or with a version run into it (``qwen3``, ``llama3``)."""
    rest = word[len(family) :] if word.startswith(family) else None
    return rest is not None and (rest == "" or (family.isalpha() and rest.isdigit()))


def vendor_of(model: str) -> str:
    """The vendor of ``model`` (module docstring): the vendor whose family names the id's last path segment
    or a dotted part of it (``us.anthropic.claude-sonnet-4-5`` is Anthropic's), else the id's first word."""
    name = model.strip().lower().rsplit("/", 1)[-1]
    for part in name.split("."):
        word = _FIRST_WORD.match(part)
        if word is None:
            continue
        for vendor, families in VENDOR_FAMILIES.items():
            if any(_names_family(word.group(0), family) for family in families):
                return vendor
    first = _FIRST_WORD.match(name)
    return first.group(0) if first else name


def second_judge_of_another_family(first: str, second: str) -> str | None:
    """A second judge is of another model family than the primary (docs/mergeability.md): two judges of one
    family share its preferences, so their agreement would overstate how well the rubric decides, and a
    vendor comparison would still have no judge outside the family. The problem, or None."""
    vendor = vendor_of(first)
    if vendor_of(second) != vendor:
        return None
    return (
        f"the second judge {second} and the primary judge {first} are both {vendor} models: a second judge "
        "measures agreement only from another model family (e.g. a gpt model through codex, a gemini model "
        "through gemini-cli)"
    )
