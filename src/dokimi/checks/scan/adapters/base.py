"""What an adapter sees and returns: one command in its context, and checks that run once the files they need
are read (all checks' files are read together, in one batch)."""

from __future__ import annotations

import posixpath
from collections.abc import Callable
from dataclasses import dataclass, field
from functools import partial
from typing import Protocol

from dokimi.checks.scan.paths import Tree, resolve_path_claim
from dokimi.checks.scan.shell import Command, Word
from dokimi.checks.scan.verdict import Verdict, unresolved


@dataclass
class Inputs:
    """Texts of the files adapters asked for (symlinks followed). A path that could not be read is absent."""

    tree: Tree
    texts: dict[str, str] = field(default_factory=dict)
    cache: dict[str, object] = field(default_factory=dict)

    def text(self, path: str) -> str | None:
        return self.texts.get(path)


@dataclass
class Check:
    """One claim whose verdict needs file contents: ``run`` is called after ``needs`` are read."""

    file: str
    line: int
    kind: str
    claim: str
    run: Callable[[Inputs], Verdict | None]
    """The verdict; None when the claim turns out not to be one (dropped)."""
    needs: tuple[str, ...] = ()
    note: str | None = None


@dataclass
class Ctx:
    """Where a command sits: its guidance file and line, and the directories relative paths resolve at."""

    file: str
    line: int
    tree: Tree
    bases: list[str] | None
    """The file's directory and its ancestors, or the literal cd directory; None when unknown."""
    unknown_why: str | None = None
    note: str | None = None

    def check(
        self,
        kind: str,
        claim: str,
        verdict: Verdict | Callable[[Inputs], Verdict | None],
        needs: tuple[str, ...] = (),
    ) -> Check:
        run = verdict if callable(verdict) else partial(_constant, verdict)
        return Check(self.file, self.line, kind, claim, run, needs, self.note)

    def path_verdict(self, text: str) -> Verdict:
        if text.startswith("/"):
            return unresolved("an absolute path outside the repository")
        if self.bases is None:
            return unresolved(f"a relative path {self.unknown_why or 'after an unknown cd'}")
        return resolve_path_claim(text, self.bases, self.tree)

    def located(self, text: str) -> str | None:
        """The in-tree path a relative path resolves to (first base that has it), or None."""
        if self.bases is None or text.startswith("/"):
            return None
        for base in self.bases:
            full = posixpath.normpath(posixpath.join(base, text)) if (base or text) else ""
            full = "" if full == "." else full
            if full.startswith(".."):
                continue
            real = self.tree.resolve(full)
            if real is not None:
                return real
        return None


class Adapter(Protocol):
    """A build-system adapter: which commands it reads, how it is detected, and its checks."""

    name: str
    commands: frozenset[str]

    def detect(self, tree: Tree, root_texts: dict[str, str]) -> str | None:
        """Why this adapter applies to the tree (a root file), or None."""
        ...

    def inputs(self, tree: Tree) -> list[str]:
        """Files every check of this adapter may read (read once, only when some check exists)."""
        ...

    def checks(self, command: list[Word], ctx: Ctx) -> list[Check]:
        """Checks for one simple command whose argv[0] is one of ``commands`` (after wrappers are removed)."""
        ...


def _constant(verdict: Verdict, _inputs: Inputs) -> Verdict:
    return verdict


def literal(word: Word) -> bool:
    return word.literal


def option_value(words: list[Word], i: int, names: tuple[str, ...]) -> tuple[Word | None, int]:
    """The value of option ``words[i]`` (``--x=v`` or ``--x v``) when it is one of ``names``; and the next
    index."""
    text = words[i].text
    for name in names:
        if text == name:
            return (words[i + 1] if i + 1 < len(words) else None), i + 2
        if name.startswith("--") and text.startswith(name + "="):
            return Word(text[len(name) + 1 :], words[i].literal), i + 1
        if not name.startswith("--") and text.startswith(name) and len(text) > len(name):
            return Word(text[len(name) :], words[i].literal), i + 1
    return None, i + 1


Command_ = Command
