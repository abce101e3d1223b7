"""pre-commit: ``pre-commit run <hook>`` against the hook ids and aliases of .pre-commit-config.yaml."""

from __future__ import annotations

from functools import partial
from typing import Any

from dokimi.checks.scan.adapters.base import Check, Ctx, Inputs
from dokimi.checks.scan.paths import Tree
from dokimi.checks.scan.shell import Word
from dokimi.checks.scan.verdict import Verdict, fail, ok, unresolved
from dokimi.errors import DocumentError

CONFIG = ".pre-commit-config.yaml"
VALUE_OPTIONS = frozenset(
    {
        "-c",
        "--config",
        "--hook-stage",
        "--from-ref",
        "--to-ref",
        "-s",
        "-o",
        "--source",
        "--origin",
        "--color",
        "--commit-msg-filename",
        "--remote-name",
        "--remote-url",
        "--checkout-type",
        "--rewrite-command",
    }
)


class PreCommitAdapter:
    name = "pre-commit"
    commands = frozenset({"pre-commit", "prek"})

    def detect(self, tree: Tree, root_texts: dict[str, str]) -> str | None:
        return CONFIG if tree.snapshot.is_file(CONFIG) else None

    def inputs(self, tree: Tree) -> list[str]:
        return [CONFIG] if tree.snapshot.is_file(CONFIG) else []

    def checks(self, command: list[Word], ctx: Ctx) -> list[Check]:
        if len(command) < 3 or command[1].text != "run":
            return []
        config = CONFIG
        hook: Word | None = None
        i = 2
        while i < len(command):
            text = command[i].text
            if text == "--files":
                break  # every later word is a file
            if text.startswith("-"):
                if text in ("-c", "--config") and i + 1 < len(command):
                    config = command[i + 1].text
                elif text.startswith("--config="):
                    config = text.split("=", 1)[1]
                i += 2 if text in VALUE_OPTIONS else 1
                continue
            hook = command[i]
            break
        if hook is None or not hook.literal:
            return []
        path = (
            ctx.located(config)
            if config != CONFIG
            else (CONFIG if ctx.tree.snapshot.is_file(CONFIG) else None)
        )
        return [
            ctx.check(
                "precommit_hook",
                hook.text,
                partial(check_hook, hook.text, path, config),
                (path,) if path else (),
            )
        ]


def check_hook(hook: str, path: str | None, config: str, inputs: Inputs) -> Verdict:
    if path is None:
        return fail(f"no {config} in the tree, so pre-commit has no hooks")
    text = inputs.text(path)
    if text is None:
        return unresolved(f"{path} could not be read")
    # repo scan's lean start (tests/checks/scan/test_lean_cli.py)
    from dokimi.schemas._base import parse_yaml

    try:
        data: Any = parse_yaml(text, path).data
    except DocumentError as exc:
        return unresolved(f"{path} is not valid YAML: {exc.message}")
    ids: dict[str, str] = {}
    for repo in (data or {}).get("repos", []) if isinstance(data, dict) else []:
        for entry in (repo or {}).get("hooks", []) if isinstance(repo, dict) else []:
            if isinstance(entry, dict):
                for key in ("id", "alias"):
                    if isinstance(entry.get(key), str):
                        ids.setdefault(entry[key], key)
    if hook in ids:
        return ok(f"a hook {ids[hook]} in {path}")
    # repo scan's lean start (tests/checks/scan/test_lean_cli.py)
    import difflib

    close = difflib.get_close_matches(hook, sorted(ids), n=1)
    return fail(
        f"{path} has no hook with id or alias {hook}",
        f"did you mean pre-commit run {close[0]}?" if close else None,
    )
