"""_eval/batch.json (repo_batch.v1): the pin of a batch, so that it stays on the eval tree it started with.

Written once by ``repo run`` when a batch starts; later runs of the batch refuse another eval tree, and
``repo compare`` warns when two arms ran from different pins.
"""

from __future__ import annotations

from enum import StrEnum
from typing import Annotated, Literal

from pydantic import Field

from dokimi.schemas._base import Document
from dokimi.schemas.meta import GuidanceFileRecord


class ImagePin(StrEnum):
    """How the batch's image is identified."""

    TREE = "tree"
    """Built from the eval tree and tagged ``dokimi/<id>:<sha>``: it follows the tree."""
    IMAGE = "image"
    """Named by ``--image`` (a tag)."""
    DIGEST = "digest"
    """Built from a working tree, identified by the digest of its build context."""


NonNegative = Annotated[float, Field(ge=0, allow_inf_nan=False)]


class ModelPrice(Document):
    """USD per million tokens of one model, as given with ``--price``."""

    input: NonNegative
    """Fresh input tokens."""
    output: NonNegative
    """Output tokens."""
    cache_write: NonNegative
    """Input tokens written to the prompt cache."""
    cache_read: NonNegative
    """Input tokens read from the prompt cache."""


class BatchPin(Document):
    """batch.json under <out>/<batch>/_eval/."""

    schema_: Literal["repo_batch.v1"] = Field("repo_batch.v1", alias="schema")
    """Document type and version."""
    manifest_id: str = Field(min_length=1)
    """The manifest's ``id``."""
    source: str = Field(min_length=1)
    """The source as given (<dir>, <dir>@<rev> or <url>@<rev>)."""
    tree: Annotated[str, Field(pattern=r"^[0-9a-f]{40}$")] | None
    """Commit of the eval tree; null for a working tree, which is pinned by its digests instead."""
    eval_dir_digest: str = Field(min_length=1)
    """Digest of the exported eval_dir content."""
    image: str = Field(min_length=1)
    """Image tag or id the cells run in."""
    image_pin: ImagePin
    """How ``image`` is pinned: tree, image or digest."""
    image_context_digest: str | None = None
    """Digest of the image build context; null when ``--image`` named an image."""
    created_by: str = Field(min_length=1)
    """The dokimi version that started the batch."""
    dry_run: bool = False
    """Every cell of the batch is a dry run (``repo run --dry-run``: the scripted model, zero cost), or none
    is: a batch never mixes them, so a real run into a dry batch (or the other way) is refused."""
    guidance: dict[str, list[GuidanceFileRecord]] = Field(default_factory=dict)
    """Per arm that puts guidance from outside the task's base onto every base (``guidance:tree``,
    ``guidance:at=REV``): its files, with path, mode and blob SHA as meta.json records them. A later run of
    the batch whose arm would put other files is refused, naming them: a batch never mixes two versions of
    an arm's guidance. Arms keeping or deleting the base's own files are pinned by the task's base."""
    unchecked: dict[str, str] = Field(default_factory=dict)
    """Tasks a real run of the batch ran with ``--allow-unchecked`` though no tasks check (or rubric check)
    admitted them, and why each was not admitted: its numbers rest on a task nobody proved sound."""
    prices: dict[str, ModelPrice] = Field(default_factory=dict)
    """Prices the user gave with ``--price`` (model -> USD per million tokens) for models the price table
    lacks: a later run of the batch uses them, and refuses another price for the same model."""
