"""A task's rubric in the working tree: the maintainer's approval (``repo rubric approve``,
docs/mergeability.md).

A drafted rubric is ``draft`` until a maintainer reviews it blocker by blocker and approves it. The approval
is recorded in the rubric itself (who, when, and the digest of the content approved) and in the repository's
history when it is committed. A rubric edited after its approval is provisional again
(:func:`dokimi.schemas.rubric.provisional`) until approved anew.

The file is rewritten with its keys in their order and its values as written, only ``status`` and
``approval`` changed.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path

from dokimi.errors import UsageError
from dokimi.schemas._base import parse_json, read_raw, validate_marked
from dokimi.schemas.rubric import Approval, RepoRubric, RubricStatus, content_digest, edited_since_approval

__all__ = ["Approved", "approve_rubric"]


@dataclass(frozen=True)
class Approved:
    path: Path
    rubric: RepoRubric
    already: bool
    """It was approved as it reads, before this call: nothing was written."""


def approve_rubric(path: Path, *, by: str, note: str = "", now: datetime | None = None) -> Approved:
    """Mark the rubric at ``path`` approved by ``by`` (module docstring). A rubric already approved as it
    reads is left as it is (``already``)."""
    if not by.strip():
        raise UsageError("--by is empty", hint="name the maintainer who reviewed the rubric")
    if not path.is_file():
        raise UsageError(f"{path} does not exist", hint="draft one with `dokimi repo rubric draft TASK`")
    text = read_raw(path).decode("utf-8")
    marked = parse_json(text, str(path))
    rubric = validate_marked(marked, RepoRubric)
    if (
        rubric.status == RubricStatus.APPROVED
        and rubric.approval is not None
        and not edited_since_approval(rubric)
    ):
        return Approved(path, rubric, already=True)
    when = (now or datetime.now(UTC)).isoformat(timespec="seconds")
    approval = Approval(by=by.strip(), at=when, digest=content_digest(rubric), note=note)
    raw = json.loads(text)
    raw["status"] = RubricStatus.APPROVED.value
    raw["approval"] = approval.model_dump(mode="json")
    path.write_text(json.dumps(raw, indent=2, ensure_ascii=False) + "\n", encoding="utf-8")
    return Approved(path, RepoRubric.model_validate(raw), already=False)
