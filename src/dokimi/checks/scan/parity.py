"""pre-commit <-> CI file-set parity: a tool that pre-commit's hooks and a CI workflow both run runs on the
same files, so a commit pre-commit let through does not fail CI on a file the hook never looked at (or the
other way round).

- :func:`hook_tools` / :func:`hook_files`: what each hook of ``.pre-commit-config.yaml`` runs, and the files
  pre-commit passes it: the tracked files its ``files``/``exclude`` regexes and ``types``/``types_or``/
  ``exclude_types`` select (and the top-level ``files``/``exclude``).
- :func:`ci_steps` / :func:`ci_files`: the commands of ``.github/workflows/*.yml`` steps (``run:`` scripts,
  and the ``pre-commit/action``, ``astral-sh/ruff-action`` and ``psf/black`` actions), and the files a tool's
  path arguments reach (``.`` when it takes none), restricted to the hook's types (what the tool would lint).
- :func:`parity_claims`: one claim per CI command that runs a hook's tool, at its line in the workflow: ok
  when both sides name the same files; fail when they differ, naming how many files and a few of them; and
  unresolved when a side's files cannot be known (a hook with ``pass_filenames: false``, a type this scan
  does not know, a path argument holding an expansion, a tool that picks its files from its configuration
  when given none, like mypy). CI running ``pre-commit run`` itself is ok by construction.

A tool's own configuration (ruff's ``exclude``, black's ``extend-exclude``) is not read: a difference it
explains is reported, and is silenced with the manifest's ``scan.ignore`` (kind ``ci_parity``).
"""

from __future__ import annotations

import posixpath
import re
from collections.abc import Iterator
from typing import Any, NamedTuple

from dokimi.checks.scan.paths import Tree
from dokimi.checks.scan.shell import Command, split_fence
from dokimi.checks.scan.verdict import Draft, Verdict, fail, ok, unresolved
from dokimi.errors import DocumentError
from dokimi.globs import filter_paths, is_glob

CONFIG = ".pre-commit-config.yaml"
#: Hook ids whose tool is another command (or a command and its subcommand).
HOOK_TOOLS = {
    "ruff": ("ruff", "check"),
    "ruff-check": ("ruff", "check"),
    "ruff-format": ("ruff", "format"),
    "black-jupyter": ("black", ""),
    "flake8": ("flake8", ""),
    "isort": ("isort", ""),
    "mypy": ("mypy", ""),
}
#: Tools with subcommands that name what they do (``ruff check``, ``ruff format``).
SUBCOMMANDS = {"ruff": ("check", "format"), "ty": ("check",)}
#: What a tool checks when CI gives it no path: the working directory, or (None) what its configuration says.
DEFAULT_PATHS: dict[str, str | None] = {
    "ruff": ".",
    "black": ".",
    "flake8": ".",
    "isort": ".",
    "codespell": ".",
    "yamllint": ".",
    "pylint": None,
    "mypy": None,
    "pyright": None,
    "ty": None,
}
#: Options that take a value as the next word (never a path the tool checks).
VALUE_OPTIONS = frozenset(
    """--config -c --select --ignore --extend-select --extend-ignore --output-format --format --target-version
    --line-length -l --exclude --extend-exclude --force-exclude --skip -S --settings-path --settings-file
    --profile --max-line-length -m --python-version --cache-dir --junit-xml --rcfile --disable --enable
    --per-file-ignores --config-file --ignore-words --ignore-words-list -L --builtin --skip-glob -p
    --jobs -j --stdin-filename --extend-per-file-ignores --include --exclude-from -d --config-data""".split()
)
WRAPPERS = frozenset({"uv", "poetry", "pipenv", "hatch", "pdm", "rye", "pipx", "tox"})
#: identify's tags by file extension and by file name, for the types pre-commit hooks name most.
EXTENSION_TAGS: dict[str, tuple[str, ...]] = {
    "py": ("python",),
    "pyi": ("python", "pyi"),
    "pyw": ("python",),
    "pyx": ("cython",),
    "ipynb": ("jupyter", "json"),
    "yaml": ("yaml",),
    "yml": ("yaml",),
    "json": ("json",),
    "toml": ("toml",),
    "md": ("markdown",),
    "markdown": ("markdown",),
    "rst": ("rst",),
    "txt": ("plain-text",),
    "sh": ("shell", "sh"),
    "bash": ("shell", "bash"),
    "zsh": ("shell", "zsh"),
    "c": ("c",),
    "h": ("c", "c++", "header"),
    "cc": ("c++",),
    "cpp": ("c++",),
    "cxx": ("c++",),
    "hpp": ("c++", "header"),
    "hh": ("c++", "header"),
    "js": ("javascript",),
    "mjs": ("javascript",),
    "cjs": ("javascript",),
    "jsx": ("jsx",),
    "ts": ("ts",),
    "tsx": ("tsx",),
    "go": ("go",),
    "rs": ("rust",),
    "java": ("java",),
    "rb": ("ruby",),
    "html": ("html",),
    "css": ("css",),
    "scss": ("scss",),
    "sql": ("sql",),
    "xml": ("xml",),
    "cfg": ("ini",),
    "ini": ("ini",),
    "png": ("binary", "image", "png"),
    "jpg": ("binary", "image", "jpeg"),
    "jpeg": ("binary", "image", "jpeg"),
    "gif": ("binary", "image", "gif"),
    "zip": ("binary", "zip"),
    "gz": ("binary", "gzip"),
    "whl": ("binary", "wheel", "zip"),
}
NAME_TAGS: dict[str, tuple[str, ...]] = {
    "Dockerfile": ("dockerfile",),
    "Makefile": ("makefile",),
    "makefile": ("makefile",),
    "GNUmakefile": ("makefile",),
    ".pre-commit-config.yaml": ("yaml",),
}
KNOWN_TAGS = frozenset(
    {"file", "text", "binary", "executable", "non-executable", "symlink", "directory"}
    | {tag for tags in (*EXTENSION_TAGS.values(), *NAME_TAGS.values()) for tag in tags}
)
SAMPLES = 3
#: The types of well-known remote hooks, as their repositories' .pre-commit-hooks.yaml set them (not readable
#: offline): (types, types_or).
REMOTE_HOOK_TYPES: dict[str, tuple[tuple[str, ...], tuple[str, ...]]] = {
    "ruff": (("file",), ("python", "pyi", "jupyter")),
    "ruff-check": (("file",), ("python", "pyi", "jupyter")),
    "ruff-format": (("file",), ("python", "pyi", "jupyter")),
    "black": (("file",), ("python", "pyi")),
    "black-jupyter": (("file",), ("python", "pyi", "jupyter")),
    "mypy": (("file",), ("python", "pyi")),
    "flake8": (("python",), ()),
    "isort": (("file",), ("cython", "pyi", "python")),
    "pylint": (("python",), ()),
    "codespell": (("text",), ()),
    "yamllint": (("file", "yaml"), ()),
    "shellcheck": (("shell",), ()),
}


class Hook(NamedTuple):
    id: str
    tool: tuple[str, str]
    line: int
    entry: dict[str, Any]
    local: bool
    """A hook of ``repo: local`` (or ``meta``): its types are all in the config."""


class PreCommitRun(NamedTuple):
    """CI runs pre-commit itself (`pre-commit run`, the pre-commit action): every hook, as configured."""

    line: int
    skipped: str = ""
    """The hooks ``SKIP=`` leaves out, as written."""


class CiCommand(NamedTuple):
    workflow: str
    line: int
    tool: tuple[str, str]
    paths: list[str] | None
    """The path arguments as written (``["."]`` by default); None when they cannot be known."""
    why: str = ""
    cwd: str = ""


def tool_of(argv: list[str]) -> tuple[tuple[str, str], list[str]] | None:
    """(tool, subcommand) and the arguments after them, for a command line (wrappers ``uv run``, ``python -m``
    removed); None when it is no tool of interest."""
    words = list(argv)
    while words and (words[0] in WRAPPERS and len(words) > 1 and words[1] in ("run", "exec", "x")):
        words = words[2:]
        while words and words[0].startswith("-"):
            words = words[1:]
    if len(words) >= 3 and re.match(r"^python(\d(\.\d+)?)?$", words[0]) and words[1] == "-m":
        words = words[2:]
    if not words:
        return None
    name = posixpath.basename(words[0])
    rest = words[1:]
    sub = ""
    if name in SUBCOMMANDS:
        if rest and rest[0] in SUBCOMMANDS[name]:
            sub, rest = rest[0], rest[1:]
        elif name == "ruff":
            sub = "check"  # `ruff src` is `ruff check src` (older ruff)
    return (name, sub), rest


def hook_tools(config: Any, lines: Any) -> Iterator[Hook]:
    """Each hook of the config and the tool it runs: ``entry`` for a local hook, else its id."""
    repos = config.get("repos", []) if isinstance(config, dict) else []
    for r, repo in enumerate(repos if isinstance(repos, list) else []):
        hooks = repo.get("hooks", []) if isinstance(repo, dict) else []
        local = isinstance(repo, dict) and repo.get("repo") in ("local", "meta")
        for h, entry in enumerate(hooks if isinstance(hooks, list) else []):
            if not isinstance(entry, dict) or not isinstance(entry.get("id"), str):
                continue
            hook_id = entry["id"]
            tool: tuple[str, str] | None = None
            if isinstance(entry.get("entry"), str) and entry["entry"].split():
                found = tool_of(entry["entry"].split())
                tool = found[0] if found else None
            if tool is None:
                tool = HOOK_TOOLS.get(hook_id, (hook_id, ""))
            yield Hook(hook_id, tool, lines.line(("repos", r, "hooks", h)) or 1, entry, local)


def file_tags(path: str, mode: str) -> frozenset[str]:
    """identify's tags of a tracked file, from its name and mode (the types this scan knows)."""
    name = posixpath.basename(path)
    tags = {"file"}
    if mode == "120000":
        return frozenset({"symlink"})
    tags.add("executable" if mode == "100755" else "non-executable")
    found = NAME_TAGS.get(name)
    if found is None and "." in name:
        found = EXTENSION_TAGS.get(name.rsplit(".", 1)[1].lower())
    tags.update(found or ())
    if "binary" not in tags:
        tags.add("text")
    return frozenset(tags)


def _regex(value: Any, default: str) -> re.Pattern[str]:
    return re.compile(value if isinstance(value, str) else default)


def hook_files(hook: Hook, config: dict[str, Any], tree: Tree) -> tuple[set[str] | None, str]:
    """The tracked files pre-commit passes the hook (with ``--all-files``), or None and why not."""
    entry = hook.entry
    if entry.get("pass_filenames") is False or entry.get("always_run") is True:
        return None, f"the hook {hook.id} runs without file names, on the files its tool picks"
    found = hook_types(hook)
    if found is None:
        return None, (
            f"the hook {hook.id} comes from another repository, whose .pre-commit-hooks.yaml sets its file "
            "types: give them in the config (types, types_or) to compare"
        )
    types, types_or, exclude_types = found
    unknown = sorted((types | types_or | exclude_types) - KNOWN_TAGS)
    if unknown:
        return (
            None,
            f"the hook {hook.id} selects files by type {', '.join(unknown)}, which this scan does not know",
        )
    try:
        include = [_regex(config.get("files"), ""), _regex(entry.get("files"), "")]
        exclude = [_regex(config.get("exclude"), "^$"), _regex(entry.get("exclude"), "^$")]
    except re.error as exc:
        return None, f"a files/exclude pattern of the hook {hook.id} is not a Python regex ({exc})"
    chosen = set()
    for path, item in tree.snapshot.entries.items():
        if item.is_submodule:
            continue
        if not all(r.search(path) for r in include) or any(r.search(path) for r in exclude):
            continue
        if selected(file_tags(path, item.mode), found):
            chosen.add(path)
    return chosen, ""


Types = tuple[set[str], set[str], set[str]]


def hook_types(hook: Hook) -> Types | None:
    """(types, types_or, exclude_types) of a hook: the config's, over the defaults of a well-known remote
    hook; None for a remote hook of unknown defaults whose config sets none."""
    entry = hook.entry
    default = REMOTE_HOOK_TYPES.get(hook.id)
    if not hook.local and default is None and "types" not in entry and "types_or" not in entry:
        return None
    types, types_or = default if default is not None and not hook.local else (("file",), ())
    return (
        set(_strings(entry.get("types"), list(types))),
        set(_strings(entry.get("types_or"), list(types_or))),
        set(_strings(entry.get("exclude_types"), [])),
    )


def selected(tags: frozenset[str], types: Types) -> bool:
    """pre-commit's rule: every tag of ``types``, one of ``types_or`` (when given), none of
    ``exclude_types``."""
    every, some, none = types
    return every <= tags and (not some or bool(some & tags)) and not none & tags


def _strings(value: Any, default: list[str]) -> list[str]:
    return [v for v in value if isinstance(v, str)] if isinstance(value, list) else default


def ci_steps(workflow: str, data: Any, lines: Any) -> Iterator[tuple[int, list[Command] | str, str]]:
    """Each step of a workflow: its line, and its commands (a ``run:`` script) or its action (``uses:``),
    and its working directory."""
    jobs = data.get("jobs", {}) if isinstance(data, dict) else {}
    for job_name, job in jobs.items() if isinstance(jobs, dict) else []:
        steps = job.get("steps", []) if isinstance(job, dict) else []
        defaults = job.get("defaults", {}) if isinstance(job, dict) else {}
        run_defaults = defaults.get("run", {}) if isinstance(defaults, dict) else {}
        job_cwd = run_defaults.get("working-directory", "") if isinstance(run_defaults, dict) else ""
        for s, step in enumerate(steps if isinstance(steps, list) else []):
            if not isinstance(step, dict):
                continue
            cwd = step.get("working-directory", job_cwd)
            cwd = cwd if isinstance(cwd, str) else ""
            if isinstance(step.get("run"), str):
                line = lines.line(("jobs", job_name, "steps", s, "run")) or 1
                script = step["run"]
                first = line + 1 if "\n" in script.rstrip("\n") or script.startswith(("|", ">")) else line
                yield first, split_commands_lines(script, first), cwd
            elif isinstance(step.get("uses"), str):
                line = lines.line(("jobs", job_name, "steps", s, "uses")) or 1
                yield line, step["uses"] + "\0" + _with_args(step.get("with")), cwd


def split_commands_lines(script: str, first: int) -> list[Command]:
    """The simple commands of a step's script, each at its line in the workflow."""
    return [item for item in split_fence(script.split("\n"), first) if isinstance(item, Command)]


def _with_args(value: Any) -> str:
    if not isinstance(value, dict):
        return ""
    return "\0".join(f"{k}={v}" for k, v in value.items() if isinstance(v, str | int | float))


def ci_commands(workflow: str, data: Any, lines: Any) -> Iterator[CiCommand | PreCommitRun]:
    """The tool commands of a workflow, and where CI runs pre-commit itself."""
    for line, what, cwd in ci_steps(workflow, data, lines):
        if isinstance(what, str):
            action, *pairs = what.split("\0")
            args = dict(p.split("=", 1) for p in pairs if "=" in p)
            name = action.split("@", 1)[0].lower()
            if name == "pre-commit/action":
                yield PreCommitRun(line)
            elif name == "astral-sh/ruff-action":
                words = (args.get("args") or "check").split()
                found = tool_of(["ruff", *words])
                src = args.get("src", ".").split()
                if found:
                    yield CiCommand(workflow, line, found[0], src, cwd=cwd)
            elif name == "psf/black":
                yield CiCommand(workflow, line, ("black", ""), args.get("src", ".").split(), cwd=cwd)
            continue
        for command in what:
            words = command.argv
            literal = all(w.literal for w in command.words)
            while words and "=" in words[0] and not words[0].startswith("-"):
                words = words[1:]  # VAR=value before the command
            found = tool_of(words)
            if found is None:
                continue
            tool, rest = found
            if tool[0] in ("pre-commit", "prek") and rest[:1] == ["run"]:
                assigned = [w.text for w in command.assignments]
                skipped = next((w[5:] for w in assigned if w.startswith("SKIP=")), "")
                yield PreCommitRun(command.line, skipped)
                continue
            paths = _path_args(rest, tool[0]) if literal else None
            yield CiCommand(
                workflow,
                command.line,
                tool,
                paths,
                why="" if literal else "a word of the command holds an expansion",
                cwd=cwd,
            )


def _path_args(rest: list[str], tool: str) -> list[str] | None:
    """The path arguments of a tool's command line (option values skipped); its default when it has none."""
    paths: list[str] = []
    skip = False
    for word in rest:
        if skip:
            skip = False
            continue
        if word == "--":
            continue
        if word.startswith("-"):
            skip = word in VALUE_OPTIONS
            continue
        paths.append(word)
    if paths:
        return paths
    default = DEFAULT_PATHS.get(tool, ".")
    return [default] if default is not None else None


def ci_files(command: CiCommand, tree: Tree) -> set[str] | None:
    """The tracked files under the command's path arguments (from its working directory)."""
    if command.paths is None:
        return None
    chosen: set[str] = set()
    for arg in command.paths:
        rel = posixpath.normpath(posixpath.join(command.cwd, arg)) if command.cwd or arg != "." else "."
        if rel.startswith(".."):
            return None
        if is_glob(rel):  # the shell expands it (``*`` within one directory)
            matched = filter_paths(rel, list(tree.snapshot.entries))
            if not matched:
                return None
            chosen.update(matched)
        elif rel == ".":
            chosen.update(p for p, e in tree.snapshot.entries.items() if not e.is_submodule)
        elif tree.is_dir(rel):
            chosen.update(p for p in tree.under(rel) if p in tree.snapshot.entries)
        elif rel in tree.snapshot.entries:
            chosen.add(rel)
        else:
            return None  # a path the tree lacks
    return chosen


def parity_claims(config_text: str, workflows: dict[str, str], tree: Tree) -> list[Draft]:
    """One claim per CI command that runs a tool a pre-commit hook runs (see the module's docstring)."""
    # repo scan's lean start (tests/checks/scan/test_lean_cli.py)
    from dokimi.schemas._base import parse_yaml

    try:
        marked = parse_yaml(config_text, CONFIG)
    except DocumentError:
        return []
    config = marked.data if isinstance(marked.data, dict) else {}
    hooks: dict[tuple[str, str], list[Hook]] = {}
    for hook in hook_tools(config, marked):
        hooks.setdefault(hook.tool, []).append(hook)
    drafts: list[Draft] = []
    for workflow in sorted(workflows):
        try:
            parsed = parse_yaml(workflows[workflow], workflow)
        except DocumentError:
            continue
        for found in ci_commands(workflow, parsed.data, parsed):
            if isinstance(found, PreCommitRun):
                but = f", but for those SKIP={found.skipped} leaves out" if found.skipped else ""
                verdict = ok(f"CI runs pre-commit's hooks themselves{but}")
                drafts.append(Draft(workflow, found.line, "ci_parity", "pre-commit", verdict))
                continue
            for hook in hooks.get(found.tool, []):
                claim = " ".join(part for part in found.tool if part)
                drafts.append(
                    Draft(workflow, found.line, "ci_parity", claim, compare(hook, found, config, tree))
                )
    return drafts


def compare(hook: Hook, command: CiCommand, config: dict[str, Any], tree: Tree) -> Verdict:
    """ok when pre-commit's hook and the CI command run on the same files, fail when not, unresolved when a
    side's files cannot be known."""
    hooked, why = hook_files(hook, config, tree)
    if hooked is None:
        return unresolved(why)
    ci = ci_files(command, tree)
    if ci is None:
        reason = command.why or (
            "CI gives it no path, so its configuration picks the files"
            if command.paths is None
            else "a path argument names nothing in the tree"
        )
        return unresolved(f"{reason}; the hook {hook.id} is at {CONFIG}:{hook.line}")
    # what the tool lints of CI's paths: the files of the hook's types
    types = hook_types(hook)
    assert types is not None  # (hook_files gave files)
    linted = {p for p in ci if selected(file_tags(p, tree.snapshot.entries[p].mode), types)}
    only_ci, only_hook = sorted(linted - hooked), sorted(hooked - linted)
    where = f"the hook {hook.id} at {CONFIG}:{hook.line}"
    if not only_ci and not only_hook:
        return ok(f"the same {len(hooked)} file{'s' if len(hooked) != 1 else ''} as {where}")
    parts = []
    if only_ci:
        parts.append(
            f"CI checks {_some(only_ci)} that {where} skips (a commit passes the hook, then fails CI)"
        )
    if only_hook:
        parts.append(f"{where} checks {_some(only_hook)} that CI never checks")
    return fail("; ".join(parts) + "; the tool's own configuration (its excludes) is not read")


def _some(paths: list[str]) -> str:
    shown = ", ".join(paths[:SAMPLES]) + (", ..." if len(paths) > SAMPLES else "")
    return f"{len(paths)} file{'s' if len(paths) != 1 else ''} ({shown})"
