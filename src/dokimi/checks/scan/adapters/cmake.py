"""cmake: ``-D`` variables against the CMake sources, ``--preset`` against CMake(User)Presets.json.

A ``-D`` variable passes when it is a CMake built-in (``CMAKE_*``, ``BUILD_SHARED_LIBS``, ...) or a package
hint (``<Pkg>_DIR``, ``<Pkg>_ROOT``), or when some CMakeLists.txt or *.cmake file mentions it. One that starts
with a package the project finds (``find_package(Boost)`` and ``Boost_USE_STATIC_LIBS``) is unresolved: that
package's own find module may read it. Any other is fail: no CMake source reads it, and CMake itself warns
"Manually-specified variables were not used by the project". Without CMake sources in the tree, unresolved.
"""

from __future__ import annotations

import difflib
import posixpath
import re
from functools import partial

from dokimi.checks.scan.adapters.base import Check, Ctx, Inputs, option_value
from dokimi.checks.scan.paths import Tree
from dokimi.checks.scan.shell import Word
from dokimi.checks.scan.verdict import Verdict, fail, ok, unresolved

PRESET_FILES = frozenset({"CMakePresets.json", "CMakeUserPresets.json"})
PRESET_KINDS = ("configurePresets", "buildPresets", "testPresets", "packagePresets", "workflowPresets")
BUILTINS = frozenset(
    {
        "BUILD_SHARED_LIBS",
        "BUILD_TESTING",
        "CTEST_OUTPUT_ON_FAILURE",
        "CTEST_PARALLEL_LEVEL",
        "VCPKG_TARGET_TRIPLET",
        "VCPKG_MANIFEST_MODE",
        "VCPKG_INSTALLED_DIR",
        "VCPKG_ROOT",
    }
)
PKG_HINT = re.compile(r"^[A-Za-z][A-Za-z0-9_]*_(DIR|ROOT)$")
FIND_PACKAGE = re.compile(r"find_package\s*\(\s*([A-Za-z0-9_]+)", re.I)
CMAKE_WORD = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")


def is_cmake_source(path: str) -> bool:
    name = posixpath.basename(path)
    return name == "CMakeLists.txt" or name.endswith(".cmake")


def is_builtin_variable(name: str) -> bool:
    """CMake's own variables and the package hints every find_package reads."""
    return name.startswith(("CMAKE_", "CPACK_", "CTEST_")) or name in BUILTINS or bool(PKG_HINT.match(name))


class CMakeAdapter:
    name = "cmake"
    commands = frozenset({"cmake", "ctest", "cpack"})

    def detect(self, tree: Tree, root_texts: dict[str, str]) -> str | None:
        for name in ("CMakeLists.txt", "CMakePresets.json"):
            if tree.snapshot.is_file(name):
                return name
        return None

    def inputs(self, tree: Tree) -> list[str]:
        return [
            p
            for p in tree.files_ending(("CMakeLists.txt", ".cmake", ".json"))
            if is_cmake_source(p)
            or posixpath.basename(p) in PRESET_FILES
            or (p.endswith(".json") and "preset" in p.lower())
        ]

    def checks(self, command: list[Word], ctx: Ctx) -> list[Check]:
        out: list[Check] = []
        i = 1
        while i < len(command):
            word = command[i]
            text = word.text
            if text == "-D" or (text.startswith("-D") and len(text) > 2):
                value, i = option_value(command, i, ("-D",))
                if value is None:
                    continue
                key = re.split(r"[:=]", value.text, maxsplit=1)[0]
                if key and "$" not in key and "`" not in key:  # literal key of -DVAR=$(cmd) still checked
                    out.append(ctx.check("cmake_var", key, partial(self.check_var, key)))
                continue
            if text == "--preset" or text.startswith("--preset="):
                value, i = option_value(command, i, ("--preset",))
                if value is not None and value.literal:
                    out.append(
                        ctx.check(
                            "cmake_preset",
                            value.text,
                            partial(self.check_preset, value.text),
                        )
                    )
                continue
            if text in ("-S", "-C") or (
                text.startswith(("-S", "-C")) and len(text) > 2 and not text.startswith("--")
            ):
                value, i = option_value(command, i, (text[:2],))
                if value is not None and value.literal:
                    out.append(ctx.check("path", value.text, ctx.path_verdict(value.text)))
                continue
            i += 1
        return out

    def _sources(self, inputs: Inputs) -> dict[str, str]:
        return {p: t for p, t in inputs.texts.items() if is_cmake_source(p)}

    def check_var(self, key: str, inputs: Inputs) -> Verdict:
        if is_builtin_variable(key):
            return ok("a CMake built-in or package hint (<Pkg>_DIR, <Pkg>_ROOT)")
        sources = self._sources(inputs)
        if not sources:
            return unresolved("no CMakeLists.txt or *.cmake in the tree")
        words: set[str] = inputs.cache.setdefault("cmake_words", set())  # type: ignore[assignment]
        if not words:
            for text in sources.values():
                words.update(CMAKE_WORD.findall(text))
            for path, text in inputs.texts.items():
                if posixpath.basename(path) in PRESET_FILES:
                    words.update(CMAKE_WORD.findall(text))
        if key in words:
            return ok("read by the CMake sources")
        packages = {m.group(1).lower() for text in sources.values() for m in FIND_PACKAGE.finditer(text)}
        prefix = key.split("_", 1)[0].lower()
        if prefix in packages:
            return unresolved(f"not in the CMake sources; find_package({prefix}) may read it")
        candidates = sorted(w for w in words if w.isupper() and "_" in w)
        close = difflib.get_close_matches(key, candidates, n=1)
        return fail(
            "no CMake source reads it (CMake would warn that it was not used)",
            f"did you mean -D{close[0]}?" if close else None,
        )

    def check_preset(self, name: str, inputs: Inputs) -> Verdict:
        files = {
            p: t
            for p, t in inputs.texts.items()
            if posixpath.basename(p) in PRESET_FILES or "preset" in p.lower() and p.endswith(".json")
        }
        if not any(posixpath.basename(p) in PRESET_FILES for p in files):
            return fail("no CMakePresets.json or CMakeUserPresets.json in the tree")
        # schemas load pydantic: only a scan that checks a CMake preset needs them
        from dokimi.schemas._base import load_json

        names: set[str] = set()
        broken: list[str] = []
        for path, text in sorted(files.items()):
            try:
                data = load_json(text)
            except ValueError as exc:
                broken.append(f"{path}: not JSON ({exc})")
                continue
            if not isinstance(data, dict):
                continue
            for kind in PRESET_KINDS:
                for preset in data.get(kind) or []:
                    if isinstance(preset, dict) and isinstance(preset.get("name"), str):
                        names.add(preset["name"])
        if name in names:
            return ok("a preset of the presets files")
        if broken:
            return unresolved(f"not found, and {broken[0]}")
        close = difflib.get_close_matches(name, sorted(names), n=1)
        return fail(
            "no preset of that name in CMakePresets.json",
            f"did you mean --preset {close[0]}?" if close else None,
        )
