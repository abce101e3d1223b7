"""Build-system adapters: bazel, make, cmake, pytest, pre-commit, each claim with its expected status."""

from __future__ import annotations

from pathlib import Path

from tests.checks.scan._util import rows, scan_files

BAZEL_GUIDE = """\
```bash
bazel build //src:core //src:gone :local --config=asan --config=nope --config=$CFG
bazel test //gen:anything //src/... //missing/... //nobuild:x --//src:flag=1 --myalias=2
bazel run //src:core -- --not-a-flag //ignored:x
bazel build @ext//x:y //src:out.h //src:core.cc
```

```starlark
my_macro(name = "a", srcs = [], bogus = 1)
my_rule(name = "b")
unknown_macro(name = "c")
```
"""

BUILD_SRC = """\
cc_library(name = 'core', srcs = ["core.cc"])
genrule(name = "gen_h", outs = ["out.h"], cmd = "x")
"""

BUILD_GEN = """\
load("//tools:defs.bzl", "my_macro")
my_macro(name = "t_" + suffix)
"""

BAZELRC = """\
build:asan --copt=-fsanitize=address
build --flag_alias=myalias=//src:flag
import %workspace%/tools/ci.bazelrc
try-import %workspace%/user.bazelrc
"""

DEFS = """\
def my_macro(name, srcs = []):
    pass

my_rule = rule(implementation = _impl)
"""


def test_bazel_configs_labels_and_starlark_macros(tmp_path: Path) -> None:
    result = scan_files(
        tmp_path,
        {
            "AGENTS.md": BAZEL_GUIDE,
            "MODULE.bazel": "module(name = 'x')\n",
            ".bazelrc": BAZELRC,
            "tools/ci.bazelrc": "test:ci --test_output=errors\n",
            "tools/defs.bzl": DEFS,
            "tools/BUILD.bazel": "",
            "src/BUILD.bazel": BUILD_SRC,
            "src/core.cc": "",
            "gen/BUILD": BUILD_GEN,
            "nobuild/readme.txt": "",
            "BUILD.bazel": "filegroup(name = 'local')\n",
        },
        build_systems=["bazel"],
    )
    assert rows(result) == [
        (2, "bazel_label", "//src:core", "ok"),
        (2, "bazel_label", "//src:gone", "fail"),
        (2, "bazel_label", ":local", "ok"),
        (2, "bazel_config", "asan", "ok"),
        (2, "bazel_config", "nope", "fail"),
        (3, "bazel_flag", "--myalias", "ok"),
        (3, "bazel_label", "//gen:anything", "unresolved"),
        (3, "bazel_label", "//missing/...", "fail"),
        (3, "bazel_label", "//nobuild:x", "fail"),
        (3, "bazel_label", "//src/...", "ok"),
        (3, "bazel_label", "//src:flag", "fail"),
        (4, "bazel_label", "//src:core", "ok"),
        (5, "bazel_label", "//src:core.cc", "ok"),
        (5, "bazel_label", "//src:out.h", "ok"),
        (9, "starlark_macro", "my_macro", "fail"),
        (10, "starlark_macro", "my_rule", "ok"),
        (11, "starlark_macro", "unknown_macro", "unresolved"),
    ]


MAKE_GUIDE = """\
`make all` `make gone` `make -C sub inner` `make lib/x.o` `make CC=clang FOO=1`
"""


def test_make_targets_against_every_makefile(tmp_path: Path) -> None:
    files = {
        "AGENTS.md": MAKE_GUIDE,
        "Makefile": "all: build\nbuild:\n\tcc x\ninclude rules.mk\n%.o: %.c\n\tcc $<\n",
        "rules.mk": "FOO ?= 0\nclean:\n\trm -f x\n",
        "sub/Makefile": "inner:\n\ttrue\n",
    }
    result = scan_files(tmp_path, files, build_systems=["make"])
    assert rows(result) == [
        (1, "make_var", "CC", "unresolved"),
        (1, "make_var", "FOO", "ok"),
        (1, "make_target", "all", "ok"),
        (1, "make_target", "gone", "fail"),
        (1, "make_target", "inner", "ok"),
        (1, "make_target", "lib/x.o", "unresolved"),
        (1, "path", "sub", "ok"),
    ]


def test_a_catch_all_or_variable_rule_makes_a_missing_target_unresolved(tmp_path: Path) -> None:
    for rule in ("%:\n\t@echo $@\n", "$(NAME):\n\ttrue\n"):
        result = scan_files(
            tmp_path / rule[:2].replace("%", "pct").replace("$", "var"),
            {"AGENTS.md": "`make gone`\n", "Makefile": "all:\n\ttrue\n" + rule},
            build_systems=["make"],
        )
        assert rows(result) == [(1, "make_target", "gone", "unresolved")]


CMAKE_GUIDE = """\
```sh
cmake -S . -B build -DWITH_FOO=ON -DCMAKE_BUILD_TYPE=Release -DBoost_ROOT=/opt -DTBB_DIR=/x
cmake -DWITH_BAR:BOOL=ON -D WITH_FOO=OFF -DOLD_OPTION=1 -DBoost_USE_STATIC_LIBS=ON -DJOBS=$(nproc)
cmake --preset dev && cmake --build --preset=ci-build && ctest --preset nightly
```
"""


def test_cmake_variables_and_presets(tmp_path: Path) -> None:
    result = scan_files(
        tmp_path,
        {
            "AGENTS.md": CMAKE_GUIDE,
            "CMakeLists.txt": 'option(WITH_FOO "foo" OFF)\nfind_package(Boost)\ninclude(cmake/bar.cmake)\n',
            "cmake/bar.cmake": "if(WITH_BAR)\nendif()\n",
            "CMakePresets.json": '{"version": 3, "configurePresets": [{"name": "dev"}],'
            ' "buildPresets": [{"name": "ci-build"}]}\n',
        },
        build_systems=["cmake"],
    )
    assert rows(result) == [
        (2, "path", ".", "ok"),
        (2, "cmake_var", "Boost_ROOT", "ok"),
        (2, "cmake_var", "CMAKE_BUILD_TYPE", "ok"),
        (2, "cmake_var", "TBB_DIR", "ok"),
        (2, "cmake_var", "WITH_FOO", "ok"),
        (3, "cmake_var", "Boost_USE_STATIC_LIBS", "unresolved"),
        (3, "cmake_var", "JOBS", "fail"),
        (3, "cmake_var", "OLD_OPTION", "fail"),
        (3, "cmake_var", "WITH_BAR", "ok"),
        (3, "cmake_var", "WITH_FOO", "ok"),
        (4, "cmake_preset", "ci-build", "ok"),
        (4, "cmake_preset", "dev", "ok"),
        (4, "cmake_preset", "nightly", "fail"),
    ]


PYTEST_GUIDE = """\
```bash
pytest tests/test_a.py::test_one tests/test_a.py::test_two[x-1] tests/test_a.py::TestK::test_m
pytest tests/test_a.py::TestK::test_gone tests/test_a.py::TestSub::test_inherited -k "slow and not x"
python -m pytest tests/ tests/test_gone.py -m unit tests/test_a.py::generated_test
pytest tests/test_a.py::test_nope
```
`tests/test_a.py::TestK::test_m`
"""

TEST_A = """\
import pytest

def test_one():
    pass

@pytest.mark.parametrize("a", [1])
def test_two(a):
    pass

class TestK:
    def test_m(self):
        pass

class TestSub(Base):
    pass

globals()["generated_test"] = lambda: None
"""


def test_pytest_paths_and_node_ids_down_to_class_methods(tmp_path: Path) -> None:
    result = scan_files(
        tmp_path,
        {"AGENTS.md": PYTEST_GUIDE, "tests/test_a.py": TEST_A, "conftest.py": ""},
    )
    assert rows(result) == [
        (2, "pytest_node", "tests/test_a.py::TestK::test_m", "ok"),
        (2, "pytest_node", "tests/test_a.py::test_one", "ok"),
        (2, "pytest_node", "tests/test_a.py::test_two[x-1]", "ok"),
        (3, "pytest_node", "tests/test_a.py::TestK::test_gone", "fail"),
        (3, "pytest_node", "tests/test_a.py::TestSub::test_inherited", "unresolved"),
        (4, "pytest_path", "tests/", "ok"),
        (4, "pytest_node", "tests/test_a.py::generated_test", "unresolved"),
        (4, "pytest_path", "tests/test_gone.py", "fail"),
        (5, "pytest_node", "tests/test_a.py::test_nope", "fail"),
        (7, "pytest_node", "tests/test_a.py::TestK::test_m", "ok"),
    ]


PRECOMMIT_CONFIG = """\
repos:
  - repo: https://github.com/astral-sh/ruff-pre-commit
    rev: v0.5.0
    hooks:
      - id: ruff
        alias: lint
  - repo: local
    hooks:
      - id: dokimi-scan
        name: scan
        entry: dokimi repo scan .
        language: system
"""


def test_pre_commit_hook_ids_and_aliases(tmp_path: Path) -> None:
    result = scan_files(
        tmp_path,
        {
            "AGENTS.md": "`pre-commit run ruff --all-files` `pre-commit run lint` `pre-commit run rufff`"
            " `pre-commit run --all-files` `pre-commit run dokimi-scan --files a.py`\n",
            ".pre-commit-config.yaml": PRECOMMIT_CONFIG,
        },
    )
    assert rows(result) == [
        (1, "precommit_hook", "dokimi-scan", "ok"),
        (1, "precommit_hook", "lint", "ok"),
        (1, "precommit_hook", "ruff", "ok"),
        (1, "precommit_hook", "rufff", "fail"),
    ]
    assert (
        next(d for d in result.drafts if d.claim == "rufff").verdict.fix
        == "did you mean pre-commit run ruff?"
    )


def test_adapters_are_detected_from_root_files_and_the_report_says_why(tmp_path: Path) -> None:
    result = scan_files(
        tmp_path,
        {
            "AGENTS.md": "x\n",
            "Makefile": "all:\n",
            "pkg/conftest.py": "",
            ".pre-commit-config.yaml": "repos: []\n",
        },
    )
    assert result.build_systems.selected_by == "detected"
    assert result.build_systems.adapters == ["make", "pytest", "pre-commit"]
    assert result.build_systems.why["pytest"] == "detected: pkg/conftest.py"
    pyproject = scan_files(
        tmp_path / "p", {"AGENTS.md": "x\n", "pyproject.toml": "[tool.pytest.ini_options]\n"}
    )
    assert pyproject.build_systems.adapters == ["pytest"]
