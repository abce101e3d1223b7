"""The guidance arms, parsed once from their names: ``<guidance>[+rules][@MODE]``.

An arm is a name (``guidance:none``, ``guidance:at=v2+rules@review``): the batch's plan, a cell's directory
and result.json carry it as text. :class:`Arm` is that text, parsed where it comes in (``repo run --arm``, a
run or study file, ``repo tasks check --arm``, a cell's key read back) into what it asks for; an arm dokimi
cannot build is refused there. Being a ``str``, an Arm goes wherever an arm's name goes.

- the guidance: ``guidance:none`` (every guidance file the manifest's globs match is deleted),
  ``guidance:raw`` (the base's, as it is), ``guidance:bridge`` (the profile's bridge file beside each file it
  bridges), ``guidance:tree``, ``guidance:at=REV``, ``guidance:generated`` (the base's guidance replaced by an
  overlay: the eval tree's, revision REV's, the harness's own generator's);
- ``+rules``: a review task's reviewer agent gets the team review rules that apply in its prompt
  (docs/review-rules.md); without it, none;
- ``@MODE``: the arm runs on that agent mode's tasks only (mode-specific guidance is an arm in its own right).

:func:`dokimi.repo.workspace.apply_arm` builds the guidance; docs/guidance-study.md explains the arms.
"""

from __future__ import annotations

from typing import Literal, get_args

from dokimi.errors import UsageError
from dokimi.schemas.task import Mode

__all__ = [
    "ARMS",
    "ARM_AT_PREFIX",
    "ARM_BRIDGE",
    "ARM_GENERATED",
    "ARM_NONE",
    "ARM_RAW",
    "ARM_TREE",
    "MODES",
    "RULES_ARM_SUFFIX",
    "Arm",
    "ArmKind",
]

ArmKind = Literal["none", "raw", "bridge", "tree", "at", "generated"]
OVERLAY_KINDS: frozenset[str] = frozenset({"tree", "at", "generated"})
"""Kinds that replace the base's guidance with an overlay (:class:`dokimi.repo.workspace.GuidanceOverlay`)."""
ARM_AT_PREFIX = "guidance:at="
"""``guidance:at=REV``: the guidance files of revision REV onto every base (two drafts, two arms)."""
RULES_ARM_SUFFIX = "+rules"
"""``<arm>+rules`` (``guidance:raw+rules``): the arm, and a review task's reviewer agent gets the team review
rules that apply in its prompt (docs/review-rules.md); ``<arm>`` alone gives none."""
MODES: tuple[str, ...] = get_args(Mode)
"""The agent modes an arm can be restricted to (``ARM@MODE``)."""
ARMS: tuple[str, ...] = tuple(f"guidance:{kind}" for kind in get_args(ArmKind) if kind != "at")
"""The guidance with a fixed name; ``guidance:at=REV`` is the one family with a parameter."""


class Arm(str):
    """A guidance arm's name, parsed: ``Arm("guidance:at=v2+rules@review")`` has kind ``at``, revision ``v2``,
    rules and mode ``review``. UsageError for an arm dokimi cannot build."""

    kind: ArmKind
    revision: str | None
    rules: bool
    mode: str | None

    def __new__(cls, name: str) -> Arm:
        arm = super().__new__(cls, name)
        head, sep, mode = name.rpartition("@")
        arm.mode = mode if sep and head and mode in MODES else None
        head = head if arm.mode is not None else name
        arm.rules = head.endswith(RULES_ARM_SUFFIX)
        guidance = head[: -len(RULES_ARM_SUFFIX)] if arm.rules else head
        arm.kind, arm.revision = _guidance_kind(name, guidance)
        if arm.rules and arm.kind == "generated":
            raise UsageError(
                f"arm {name}: {RULES_ARM_SUFFIX} cannot be combined with guidance:generated yet",
                hint=f"compare the rules on another arm, for example guidance:raw{RULES_ARM_SUFFIX}",
            )
        return arm

    def __getnewargs__(self) -> tuple[str]:
        return (str(self),)

    @property
    def overlays(self) -> bool:
        """Whether the arm replaces the base's guidance with files made per batch."""
        return self.kind in OVERLAY_KINDS

    @property
    def guidance(self) -> Arm:
        """The guidance part alone, as written: the arm without its ``+rules`` and its ``@MODE``."""
        head = self._without_mode()
        return Arm(head[: -len(RULES_ARM_SUFFIX)] if self.rules else head)

    @property
    def without_rules(self) -> Arm:
        """The same arm without the rules: ``guidance:raw+rules@review`` -> ``guidance:raw@review``."""
        if not self.rules:
            return self
        return Arm(str(self.guidance) + (f"@{self.mode}" if self.mode is not None else ""))

    def _without_mode(self) -> str:
        name = str(self)
        return name[: -len(self.mode) - 1] if self.mode is not None else name

    def runs_task(self, mode: str | None) -> bool:
        """Whether the arm runs on a task of ``mode``: every arm runs on every task, except one restricted to
        another mode (a task without a mode runs in no restricted arm)."""
        return self.mode is None or self.mode == mode


def _guidance_kind(name: str, guidance: str) -> tuple[ArmKind, str | None]:
    prefix, _, kind = guidance.partition(":")
    if prefix == "guidance" and kind in get_args(ArmKind) and kind != "at":
        return kind, None  # type: ignore[return-value]
    revision = guidance[len(ARM_AT_PREFIX) :].strip() if guidance.startswith(ARM_AT_PREFIX) else ""
    if revision:
        return "at", revision
    raise UsageError(
        f"unknown arm {name!r}",
        hint=f"use one of: {', '.join(ARMS)}, {ARM_AT_PREFIX}REV (REV: a commit, branch or tag), each "
        f"optionally with {RULES_ARM_SUFFIX} (review tasks get the team's review rules) and restricted to "
        f"one mode's tasks with @{'|@'.join(MODES)}",
    )


ARM_NONE = Arm("guidance:none")
ARM_RAW = Arm("guidance:raw")
ARM_BRIDGE = Arm("guidance:bridge")
ARM_TREE = Arm("guidance:tree")
"""The eval tree's guidance files (what the globs match there, today's AGENTS.md) onto every base."""
ARM_GENERATED = Arm("guidance:generated")
"""The files the harness's own generator (Claude Code's /init) wrote at the base, per (task, model)."""
