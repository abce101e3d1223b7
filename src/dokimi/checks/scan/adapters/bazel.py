"""bazel: ``--config`` values against .bazelrc and its imports (and flag aliases), labels against the names
(``name``, ``outs``) the package's BUILD.bazel, else BUILD, spells out in either quote style, and Starlark
macros and keyword arguments in ``starlark`` fences against tracked .bzl files.

A label missing from a package that calls a macro (a function that is not a native rule) or computes a name
(``name = "t_" + s``, a comprehension) is unresolved, not fail. External labels (``@repo//...``) are not
checked.
"""

from __future__ import annotations

import ast
import difflib
import posixpath
import re
from functools import partial

from dokimi.checks.scan.adapters.base import Check, Ctx, Inputs
from dokimi.checks.scan.paths import Tree, bases_of, did_you_mean
from dokimi.checks.scan.shell import Word
from dokimi.checks.scan.verdict import Verdict, fail, ok, unresolved

WORKSPACE_FILES = ("MODULE.bazel", "WORKSPACE.bazel", "WORKSPACE", "REPO.bazel")
ROOT_MARKERS = (*WORKSPACE_FILES, ".bazelrc", ".bazelversion")
BUILD_FILES = ("BUILD.bazel", "BUILD")
RC_LINE = re.compile(r"^\s*([a-z-]+):([^\s]+)", re.M)
IMPORT = re.compile(r"^\s*(try-import|import)\s+(\S+)", re.M)
FLAG_ALIAS = re.compile(r"--flag_alias[= ]([A-Za-z0-9_-]+)=")
NAME = re.compile(r"\b(name|outs?)\s*=\s*")
STRING = re.compile(r"""(["'])((?:(?!\1).)*)\1""")
CALL = re.compile(r"^([A-Za-z_][A-Za-z0-9_]*)\s*\(", re.M)
NATIVE = frozenset(
    """load package exports_files licenses glob select package_group filegroup genrule test_suite alias
    config_setting cc_library cc_binary cc_test cc_import cc_proto_library cc_toolchain cc_shared_library
    objc_library py_library py_binary py_test py_runtime py_runtime_pair java_library java_binary
    java_test java_import java_plugin java_proto_library sh_library sh_binary sh_test proto_library
    platform constraint_setting constraint_value toolchain toolchain_type environment workspace
    existing_rules label_flag label_setting bool_flag bool_setting string_flag string_setting int_flag
    int_setting string_list_flag genquery starlark_doc_extract bzl_library pkg_tar pkg_zip pkg_files
    package_info module bazel_dep use_extension use_repo register_toolchains local_repository
    http_archive git_repository""".split()
)
SUBCOMMANDS_WITH_TARGETS = frozenset({"build", "test", "run", "coverage", "fetch", "mobile-install"})
QUERIES = frozenset({"query", "cquery", "aquery"})
VALUE_STARTUP = frozenset(
    {"--output_base", "--output_user_root", "--bazelrc", "--host_jvm_args", "--install_base"}
)


class BazelAdapter:
    name = "bazel"
    commands = frozenset({"bazel", "bazelisk"})

    def detect(self, tree: Tree, root_texts: dict[str, str]) -> str | None:
        for name in ROOT_MARKERS:
            if tree.snapshot.is_file(name):
                return name
        return None

    def inputs(self, tree: Tree) -> list[str]:
        # a C-level filter of the listing first, then the exact test on the few paths left
        candidates = [
            p for p in tree.snapshot.entries if "bazelrc" in p or p.endswith((".bzl", *WORKSPACE_FILES))
        ]
        return [
            p
            for p in candidates
            if "bazelrc" in posixpath.basename(p)
            or p.endswith(".bzl")
            or posixpath.basename(p) in WORKSPACE_FILES
        ]

    # --- commands ------------------------------------------------------------------------------------------

    def checks(self, command: list[Word], ctx: Ctx) -> list[Check]:
        out: list[Check] = []
        i = 1
        sub = None
        while i < len(command) and sub is None:
            text = command[i].text
            if not text.startswith("-"):
                sub = text
            elif text in VALUE_STARTUP:
                i += 1
            i += 1
        if sub is None:
            return out
        workspace = workspace_root(ctx)
        after_dashes = False
        while i < len(command):
            word = command[i]
            text = word.text
            i += 1
            if text == "--":
                if sub == "run":
                    break
                after_dashes = True
                continue
            if not after_dashes and text.startswith("--"):
                if text == "--config" or text.startswith("--config="):
                    value = (
                        text.split("=", 1)[1]
                        if "=" in text
                        else (command[i].text if i < len(command) else "")
                    )
                    literal = word.literal if "=" in text else (i < len(command) and command[i].literal)
                    if "=" not in text:
                        i += 1
                    if value and literal:
                        out.append(
                            ctx.check(
                                "bazel_config",
                                value,
                                partial(check_config, value, workspace),
                            )
                        )
                    continue
                flag = text[2:].split("=", 1)[0]
                if flag.startswith("//") and word.literal:
                    out.append(self._label(flag, ctx, workspace))
                elif flag.startswith("no//") and word.literal:
                    out.append(self._label(flag[2:], ctx, workspace))
                elif word.literal and re.fullmatch(r"[A-Za-z0-9_-]+", flag):
                    out.append(
                        ctx.check(
                            "bazel_flag",
                            "--" + flag,
                            partial(check_flag_alias, flag, workspace),
                        )
                    )
                continue
            if text.startswith("-") and not text.startswith("-/") and not after_dashes:
                continue
            if sub in QUERIES or sub not in SUBCOMMANDS_WITH_TARGETS or not word.literal:
                continue
            label = text[1:] if text.startswith("-") else text
            if label.startswith("@") and not label.startswith(("@//", "@@//")):
                continue  # an external repository
            out.append(self._label(label, ctx, workspace))
            if sub == "run":
                break
        return out

    def _label(self, label: str, ctx: Ctx, workspace: str | None) -> Check:
        package, name, relative = parse_label(label)
        if relative:
            if ctx.bases is None or workspace is None:
                return ctx.check(
                    "bazel_label",
                    label,
                    unresolved(f"a relative label, directory unknown {ctx.unknown_why or ''}".strip()),
                )
            cwd = ctx.bases[0]
            rel_pkg = posixpath.relpath(cwd, workspace) if workspace else cwd
            rel_pkg = "" if rel_pkg == "." else rel_pkg
            package = posixpath.join(rel_pkg, package) if package else rel_pkg
        if workspace is None:
            return ctx.check(
                "bazel_label", label, unresolved("no MODULE.bazel, WORKSPACE or .bazelrc in the tree")
            )
        pkg_dir = posixpath.join(workspace, package) if workspace else package
        build = next(
            (
                f"{pkg_dir}/{b}" if pkg_dir else b
                for b in BUILD_FILES
                if ctx.tree.snapshot.is_file(f"{pkg_dir}/{b}" if pkg_dir else b)
            ),
            None,
        )
        if name in ("...",):
            return ctx.check("bazel_label", label, _package_dir_verdict(pkg_dir, ctx.tree))
        if build is None:
            if ctx.tree.is_dir(pkg_dir):
                return ctx.check(
                    "bazel_label",
                    label,
                    fail(
                        f"{pkg_dir or 'the workspace root'} has no BUILD.bazel or BUILD file, "
                        "so it is not a package"
                    ),
                )
            return ctx.check("bazel_label", label, _package_dir_verdict(pkg_dir, ctx.tree))
        if name in ("all", "*", "all-targets"):
            return ctx.check("bazel_label", label, ok(f"package {build}"))
        return ctx.check(
            "bazel_label",
            label,
            partial(check_target, build, pkg_dir, name),
            (build,),
        )

    # --- Starlark fences -----------------------------------------------------------------------------------

    def starlark_checks(self, lines: list[str], first_line: int, file: str, tree: Tree) -> list[Check]:
        try:
            module = ast.parse("\n".join(lines))
        except SyntaxError:
            return []
        out: list[Check] = []
        for node in ast.walk(module):
            if not isinstance(node, ast.Call) or not isinstance(node.func, ast.Name):
                continue
            name = node.func.id
            if name in NATIVE or name in ("len", "str", "list", "dict", "print", "range", "Label"):
                continue
            line = first_line + node.lineno - 1
            keywords = [k.arg for k in node.keywords if k.arg]
            out.append(
                Check(
                    file,
                    line,
                    "starlark_macro",
                    name,
                    partial(check_macro, name, tuple(keywords)),
                )
            )
        return out


def parse_label(label: str) -> tuple[str, str, bool]:
    """(package, name, relative): ``//a/b:c`` -> (a/b, c); ``//a/b`` -> (a/b, b); ``:c`` -> ('', c,
    relative)."""
    text = label
    if text.startswith("@@//") or text.startswith("@//"):
        text = text[text.index("//") :]
    relative = not text.startswith("//")
    text = text.lstrip("/")
    package, sep, name = text.partition(":")
    if not sep:
        if package.endswith("/...") or package == "...":
            return package[:-4].rstrip("/"), "...", relative
        name = posixpath.basename(package)
    return package, name, relative


def workspace_root(ctx: Ctx) -> str | None:
    snapshot = ctx.tree.snapshot
    for base in bases_or_file(ctx):
        for marker in WORKSPACE_FILES:
            if snapshot.is_file(f"{base}/{marker}" if base else marker):
                return base
    if snapshot.is_file(".bazelrc") or snapshot.by_basename.get("BUILD.bazel"):
        return ""
    return None


def bases_or_file(ctx: Ctx) -> list[str]:
    if ctx.bases:
        out = []
        base = ctx.bases[0]
        while True:
            out.append(base)
            if not base:
                return out
            base = posixpath.dirname(base)
    return bases_of(ctx.file)


def _package_dir_verdict(pkg_dir: str, tree: Tree) -> Verdict:
    if tree.is_dir(pkg_dir):
        return ok(f"package directory {pkg_dir or '(root)'}")
    parent = posixpath.dirname(pkg_dir)
    if tree.is_dir(parent):
        return fail(f"no package directory {pkg_dir}", did_you_mean(tree.suggest_path(pkg_dir)))
    return unresolved(f"no directory {pkg_dir} in the tree")


def build_names(text: str) -> tuple[set[str], list[str]]:
    """Names spelled out by ``name =``/``out =``/``outs =`` in either quote style, and why more may exist."""
    names: set[str] = set()
    dynamic: list[str] = []
    for match in NAME.finditer(text):
        rest = text[match.end() :]
        if match.group(1) == "outs":
            end = rest.find("]")
            names.update(m.group(2) for m in STRING.finditer(rest[: end if end >= 0 else 0]))
            continue
        literal = STRING.match(rest)
        tail = rest[literal.end() :].lstrip() if literal else ""
        if literal and (not tail or tail[0] in ",)\n"):
            names.add(literal.group(2))
        elif match.group(1) == "name":
            line = text.count("\n", 0, match.start()) + 1
            dynamic.append(f"line {line} computes a name")
    if re.search(r"\[[^\]]*\bfor\b[^\]]*\bin\b", text):
        dynamic.append("a comprehension")
    for call in CALL.finditer(text):
        if call.group(1) not in NATIVE:
            dynamic.append(f"it calls the macro {call.group(1)}")
            break
    return names, dynamic


def check_target(build: str, pkg_dir: str, name: str, inputs: Inputs) -> Verdict:
    text = inputs.text(build)
    if text is None:
        return unresolved(f"{build} could not be read")
    names, dynamic = build_names(text)
    if name in names:
        return ok(f"named in {build}")
    if inputs.tree.is_file(posixpath.join(pkg_dir, name)):
        return ok(f"a source file of package {pkg_dir or '(root)'}")
    if dynamic:
        return unresolved(f"not spelled out in {build}, but {dynamic[0]}")
    close = difflib.get_close_matches(name, sorted(names), n=1)
    return fail(f"{build} names no target {name}", f"did you mean :{close[0]}?" if close else None)


def _rc_files(workspace: str | None, inputs: Inputs) -> tuple[set[str], set[str], list[str]]:
    """(config names, flag aliases, problems) of the workspace .bazelrc and what it imports."""
    root = f"{workspace}/.bazelrc" if workspace else ".bazelrc"
    configs: set[str] = set()
    aliases: set[str] = set()
    problems: list[str] = []
    todo = [root]
    seen: set[str] = set()
    while todo:
        path = todo.pop()
        if path in seen:
            continue
        seen.add(path)
        text = inputs.text(path)
        if text is None:
            if path != root:
                problems.append(f"{path} (imported) was not read")
            continue
        configs.update(m.group(2) for m in RC_LINE.finditer(text))
        aliases.update(FLAG_ALIAS.findall(text))
        for kind, target in IMPORT.findall(text):
            target = target.replace("%workspace%/", (workspace + "/") if workspace else "")
            if target.startswith("/") or "%" in target:
                continue
            if kind == "import" or inputs.tree.is_file(target):
                todo.append(posixpath.normpath(target))
    if root not in seen or inputs.text(root) is None:
        problems.insert(0, "no .bazelrc")
    return configs, aliases, problems


def check_config(value: str, workspace: str | None, inputs: Inputs) -> Verdict:
    configs, _, problems = _rc_files(workspace, inputs)
    if value in configs:
        return ok("a config of .bazelrc or its imports")
    if problems and problems[0] != "no .bazelrc":
        return unresolved(f"not found, and {problems[0]}")
    close = difflib.get_close_matches(value, sorted(configs), n=1)
    where = "there is no .bazelrc" if problems else ".bazelrc and its imports define no such config"
    return fail(where, f"did you mean --config={close[0]}?" if close else None)


def check_flag_alias(flag: str, workspace: str | None, inputs: Inputs) -> Verdict | None:
    """A flag alias defined in .bazelrc is ok; any other option is not a claim (None): Bazel has too many."""
    _, aliases, _ = _rc_files(workspace, inputs)
    if flag in aliases:
        return ok("a --flag_alias of .bazelrc")
    return None


def check_macro(name: str, keywords: tuple[str, ...], inputs: Inputs) -> Verdict:
    cached = inputs.cache.setdefault("bzl_defs", {})
    assert isinstance(cached, dict)
    defs: dict[str, tuple[str, list[str], bool]] = cached
    if not defs:
        for path, text in sorted(inputs.texts.items()):
            if not path.endswith(".bzl"):
                continue
            try:
                module = ast.parse(text)
            except SyntaxError:
                continue
            for node in module.body:
                if isinstance(node, ast.FunctionDef):
                    params = [a.arg for a in node.args.args + node.args.kwonlyargs]
                    defs.setdefault(node.name, (path, params, node.args.kwarg is not None))
                elif isinstance(node, ast.Assign) and isinstance(node.value, ast.Call):
                    for target in node.targets:
                        if isinstance(target, ast.Name):
                            defs.setdefault(target.id, (path, [], True))
        defs.setdefault("", ("", [], True))
    if name not in defs:
        return unresolved("not defined in any tracked .bzl file (a rule set outside the tree?)")
    path, params, any_kw = defs[name]
    unknown = [k for k in keywords if k not in params and k != "name"]
    if unknown and not any_kw:
        close = difflib.get_close_matches(unknown[0], params, n=1)
        return fail(
            f"{name} in {path} takes no argument {unknown[0]}", f"did you mean {close[0]}?" if close else None
        )
    return ok(f"defined in {path}")
