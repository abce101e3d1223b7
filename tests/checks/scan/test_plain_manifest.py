"""The scan's plain manifest reader: what it accepts, the YAML reader and the repo_manifest.v1 model accept
with the same values; everything else it leaves to them."""

from __future__ import annotations

import random
import warnings
from pathlib import Path

import pytest

from dokimi.checks.scan import scan_result
from dokimi.checks.scan.plain_manifest import NotPlain, ScanKeys, parse_plain_yaml, scan_keys_of
from dokimi.errors import ManifestError
from dokimi.repo.manifest import _parse_manifest, manifest_model_errors
from tests.helpers.git import git_repo

ROOT = Path(__file__).resolve().parents[3]


def plain_keys(text: str | bytes) -> ScanKeys | None:
    raw = text.encode() if isinstance(text, str) else text
    try:
        return scan_keys_of("m.yaml", parse_plain_yaml(raw))
    except NotPlain:
        return None


def usual_keys(text: str | bytes) -> ScanKeys | None:
    """What the scan takes from the manifest through ruamel and the model; None when they refuse it."""
    raw = text.encode() if isinstance(text, str) else text
    try:
        with warnings.catch_warnings():  # ruamel warns of an anchor used twice (a generated document may)
            warnings.simplefilter("ignore")
            marked = _parse_manifest(raw, "m.yaml")
    except ManifestError:
        return None
    model, _ = manifest_model_errors(marked)
    if model is None:
        return None
    return ScanKeys(
        "m.yaml",
        list(model.guidance.globs),
        list(model.guidance.also_scan),
        list(model.build_systems) or None,
        model.source.url if model.source is not None else None,
    )


FULL = """\
# yaml-language-server: $schema=../schemas/repo_manifest.v1.schema.json
# The manifest (comments in any script: café, 例)
---
schema: repo_manifest.v1
id: 'it''s mine'
source:
  url: https://example.org/o/r.git   # where it lives
eval_dir: .agent-eval

guidance:
  globs: ["**/AGENTS.md", docs/*.md, '.github/instructions/*.md' ]
  also_scan:
  - README.md
  - "CONTRIBUTING.md"
image:
    dockerfile: .agent-eval/Dockerfile
    network: public
    env:
        PIP_INDEX: https://pypi.internal/simple
        MODE: "fast, quiet"
    limits:
        memory: "16g"
        pids: 8192
        workspace_mb: 1000
entry_points:
  grade: builtin:pytest
  static: python3 tools/static.py --out {out}
tasks: .agent-eval/tasks
build_systems:
    - pytest
    - make
tests:
  globs: [tests/**/*.py]
  list: pytest --collect-only -q
"""

ACCEPTED = [
    FULL,
    "schema: repo_manifest.v1\nid: x\n",
    "schema: repo_manifest.v1\nid: x\nguidance:\n  globs: []\n",
    "schema: repo_manifest.v1\nid: x\nguidance:\n  globs: [ ]\n  also_scan: [a.md]\n",
    "schema: 'repo_manifest.v1'\nid: \"x y\"\nbuild_systems: [bazel, CMake]\n",
    "schema: repo_manifest.v1\nid: x\nentry_points:\n  grade: ./g.sh\n  oracle: ./o.sh\n",
    "schema: repo_manifest.v1\nid: x\nentry_points:\n  grade: '  builtin:command make test'\n",
    "schema: repo_manifest.v1 # the type\nid: x\nsource:\n url: git@host:o/r.git\n",
    "schema: repo_manifest.v1\nid: x\npilot:\n  tasks: [a, b]\n  reps: 3\n",
]


@pytest.mark.parametrize("text", ACCEPTED, ids=range(len(ACCEPTED)))
def test_plain_manifests_are_read_as_the_model_reads_them(text: str) -> None:
    plain = plain_keys(text)
    assert plain is not None
    assert plain == usual_keys(text)


def test_the_full_example_reads_every_key() -> None:
    assert plain_keys(FULL) == ScanKeys(
        "m.yaml",
        ["**/AGENTS.md", "docs/*.md", ".github/instructions/*.md"],
        ["README.md", "CONTRIBUTING.md"],
        ["pytest", "make"],
        "https://example.org/o/r.git",
    )


@pytest.mark.parametrize(
    "path", ["examples/calc/.agent-eval/repo-eval.yaml", ".dokimi-selfscan.yaml"], ids=lambda p: p
)
def test_the_manifests_of_this_repository_are_plain(path: str) -> None:
    raw = (ROOT / path).read_bytes()
    assert plain_keys(raw) is not None
    assert plain_keys(raw) == usual_keys(raw)


BASE = "schema: repo_manifest.v1\nid: x\n"
#: Documents the model refuses (or YAML reads as something else): the plain reader must leave them all.
REFUSED = [
    "",
    "id: x\n",  # no schema
    "schema: repo_manifest.v2\nid: x\n",
    "schema: repo_manifest.v1\n",  # no id
    BASE + "id: y\n",  # a duplicate key
    BASE + "extra: 1\n",
    BASE + "build_systems: pytest\n",
    BASE + "build_systems: [1]\n",
    BASE + "build_systems: [yes]\n",
    BASE + "eval_dir: 12\n",
    BASE + "eval_dir: true\n",
    BASE + "eval_dir: null\n",
    BASE + "eval_dir: ~\n",
    BASE + "eval_dir:\n",
    BASE + "eval_dir: .inf\n",
    BASE + "guidance:\n  globs: [a]\n  extra: [b]\n",
    BASE + "guidance:\n  globs: **/AGENTS.md\n",
    BASE + "image:\n  network: none\n",  # no dockerfile
    BASE + "image:\n  dockerfile: D\n  network: host\n",
    BASE + "image:\n  dockerfile: D\n  limits:\n    pids: 10\n",
    BASE + "image:\n  dockerfile: D\n  limits:\n    workspace_mb: 0\n",
    BASE + "image:\n  dockerfile: D\n  limits:\n    memory: 8x\n",
    BASE + "image:\n  dockerfile: D\n  env:\n    A: 1\n",
    BASE + "image:\n  dockerfile: D\n  env:\n    true: x\n",
    BASE + "entry_points:\n  grade: ./g.sh\n",  # no oracle
    BASE + "tests:\n  list_: x\n  list: y\n",
    BASE + "pilot:\n  reps: 1\n",  # no tasks
    BASE + "pilot:\n  tasks: []\n",
    BASE + "pilot:\n  tasks: [a, a]\n",
    BASE + "pilot:\n  tasks: [a]\n  reps: 0\n",
    BASE + "pilot:\n  tasks: [1]\n",
    "schema: repo_manifest.v1\nid: [x]\n",
    "schema: repo_manifest.v1\nid: x\n  y\n",
    "schema: repo_manifest.v1\r\nid: x\r\n",
    "\ufeffschema: repo_manifest.v1\nid: x\n",
    "schema: repo_manifest.v1\nid: x\n\tguidance: {}\n",
    "- schema\n",
    "[schema]\n",
    "schema: repo_manifest.v1\nid: &a x\neval_dir: *a\nguidance: {globs: [b]}\n",
]


@pytest.mark.parametrize("text", REFUSED, ids=range(len(REFUSED)))
def test_what_the_model_refuses_goes_to_the_usual_loader(text: str) -> None:
    assert plain_keys(text) is None


#: Valid YAML and valid manifests, outside the subset: the usual loader reads them.
NOT_PLAIN = [
    BASE + "guidance: {globs: [a]}\n",
    BASE + "image:\n  dockerfile: D\n  caches:\n    - name: c\n      path: /c\n",
    BASE + 'eval_dir: "a\\tb"\n',
    BASE + "eval_dir: >\n  folded\n",
    BASE + "guidance:\n  globs:\n    [a,\n     b]\n",
    "  " + BASE.replace("\n", "\n  "),
    BASE + "build_systems: [a, b,]\n",
    BASE + "eval_dir: x  y\n",
    BASE + "tests:\n  list_: x\n",
    BASE + "image:\n  dockerfile: D\n  limits:\n    memory: 8g\n",
    BASE + "eval_dir: caf\u00e9\n",
]


@pytest.mark.parametrize("text", NOT_PLAIN, ids=range(len(NOT_PLAIN)))
def test_valid_manifests_outside_the_subset_go_to_the_usual_loader(text: str) -> None:
    assert usual_keys(text) is not None
    assert plain_keys(text) is None


#: Values that YAML reads in some surprising way, or not at all, for the generated documents below.
ODD_VALUES = [
    "yes", "No", "ON", "off", "y", "N", "~", "null", "Null", "true", "False", ".inf", "-.Inf", ".NaN", ".5",
    "1", "64", "4096", "0", "08", "0x10", "1e3", "1_000", "1.5", "2001-01-01", "12:30", "a:b", "a: b", "a :b",
    "a #c", "a#c", "*a", "&a x", "!!str x", "!x", "|", ">-", "-x", "- x", "?x", "? x", "@x", "`x", "%x",
    "'a", "\"a", "\"a\\\"b\"", "'it''s'", "'a' b", "\"a\" b", "[a, b]", "[a, 'b, c']", "[a,]", "[]", "[ ]",
    "[a b]", "[a: b]", "[[a]]", "{a: b}", "{}", "builtin:pytest", " builtin:x", "none", "public", "host",
    "8g", "'8g'", "\"08g\"", "a b", "a  b", "a,b", "(a)", "a/b.c", "~x", "x~", "=", "<<", "repo_manifest.v1",
    "'repo_manifest.v1'", "https://h/o/r", "a\tb", "a\\b", "\"\"", "''", "\u00e9",
]  # fmt: skip
KEYS = {
    "": ["source", "eval_dir", "guidance", "image", "entry_points", "tasks", "build_systems", "tests",
         "explore_tasks"],
    "source": ["url"],
    "guidance": ["globs", "also_scan"],
    "image": ["dockerfile", "network", "env", "limits"],
    "limits": ["memory", "pids", "workspace_mb"],
    "env": ["A", "B_C"],
    "entry_points": ["grade", "oracle", "static", "perf"],
    "tests": ["globs", "config_globs", "list"],
}  # fmt: skip
ODD_KEYS = ["schema_", "true", "y", "Id", "null", "on", "glob", "caches", "list_", "id", "schema", "url"]
GOOD = {
    "schema": "repo_manifest.v1", "id": "x", "url": "https://h/o/r", "eval_dir": ".e", "tasks": ".e/t",
    "explore_tasks": ".e/x", "dockerfile": "D", "network": "none", "memory": "'8g'", "pids": "4096",
    "workspace_mb": "100", "grade": "builtin:pytest", "oracle": "./o.sh", "static": "./s", "perf": "./p",
    "list": "pytest -q", "A": "a", "B_C": "'b c'",
}  # fmt: skip
LISTS = {"globs", "also_scan", "build_systems", "config_globs"}


def generated(rng: random.Random) -> str:
    """A manifest of good keys and values with, now and then, an odd key, value, indent, comment or line."""
    lines: list[str] = []

    def odd(chance: float = 0.03) -> bool:
        return rng.random() < chance

    def mapping(section: str, indent: int) -> None:
        keys = [k for k in KEYS[section] if rng.random() < 0.5] or KEYS[section][:1]
        required = {"": ["schema", "id"], "image": ["dockerfile"], "entry_points": ["grade"]}
        keys = [*(k for k in required.get(section, []) if k not in keys and not odd()), *keys]
        if odd():
            keys.insert(rng.randrange(len(keys) + 1), rng.choice(ODD_KEYS))
        for key in keys:
            pad = " " * (rng.choice([0, 1, 2, 3, 5]) if odd() else indent)
            comment = rng.choice([" # c", "  #c", "#c", " #"]) if odd(0.1) else ""
            if key in KEYS and not odd():
                lines.append(f"{pad}{key}:{comment}")
                mapping(key, indent + rng.choice([1, 2, 2, 4]))
            elif key in LISTS and not odd():
                count = rng.randint(0, 3)
                items = [rng.choice(["a.md", "'b c'", '"**/x"', "docs/*.md"]) for _ in range(count)]
                if odd(0.1):
                    items.insert(rng.randrange(len(items) + 1), rng.choice(ODD_VALUES))
                if rng.random() < 0.5 or not items:
                    lines.append(f"{pad}{key}: [{', '.join(items)}]{comment}")
                else:
                    lines.append(f"{pad}{key}:{comment}")
                    dash = " " * (indent + rng.choice([0, 0, 2]))
                    lines.extend(f"{dash}- {item}" for item in items)
            else:
                value = rng.choice(ODD_VALUES) if odd(0.1) else GOOD.get(key, "v")
                lines.append(f"{pad}{key}: {value}{comment}")
            if odd():
                lines.append(rng.choice(["", "# note", "   # note", "---", "...", "\t", "  more", "- x"]))

    mapping("", 0)
    if odd(0.1):
        lines.insert(0, "---")
    return "\n".join(lines) + rng.choice(["\n", "", "\n\n"])


@pytest.mark.slow
def test_generated_manifests_the_plain_reader_accepts_read_the_same_as_the_model_reads_them() -> None:
    rng = random.Random(1616)
    accepted = refused_by_both = 0
    for _ in range(2500):
        text = generated(rng)
        plain = plain_keys(text)
        if plain is None:
            refused_by_both += usual_keys(text) is None
            continue
        accepted += 1
        assert plain == usual_keys(text), text
    # both kinds were generated, so the comparison above was not idle
    assert accepted > 200
    assert refused_by_both > 200


def test_yaml_that_ruamel_gives_up_on_is_an_error_about_the_manifest() -> None:
    """ruamel raises NotImplementedError on some invalid comment layouts: a finding, not a traceback."""
    text = "schema: repo_manifest.v1\nid: x\nbuild_systems: [a]#c\ntests:  #c\n config_globs:#c\n"
    text += "   - a.md\n\n"
    with pytest.raises(ManifestError, match="not valid YAML"):
        _parse_manifest(text.encode(), "m.yaml")
    assert plain_keys(text) is None


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    return git_repo(
        tmp_path / "repo",
        {
            "AGENTS.md": "Run `make test` and see `src/gone.py`.\n",
            "Makefile": "test:\n\tpytest\n",
            "GUIDE.md": "Read `src/app.py` and [the guide](https://example.org/o/r/blob/main/GUIDE.md).\n",
            "src/app.py": "x = 1\n",
            ".agent-eval/repo-eval.yaml": (
                "schema: repo_manifest.v1\nid: r\nsource:\n  url: https://example.org/o/r\n"
                "guidance:\n  globs: [GUIDE.md]\n  also_scan: [AGENTS.md]\nbuild_systems: [make]\n"
            ),
        },
    )


def test_a_scan_with_a_plain_manifest_finds_what_the_usual_loader_finds(
    repo: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The default manifest, --manifest and --manifest-file: each the same through both readers."""
    (tmp_path / "m.yaml").write_bytes((repo / ".agent-eval/repo-eval.yaml").read_bytes())
    ways: list[dict[str, object]] = [
        {},
        {"manifest": ".agent-eval/repo-eval.yaml"},
        {"manifest_file": tmp_path / "m.yaml"},
    ]
    for way in ways:
        plain = scan_result(str(repo), **way)  # type: ignore[arg-type]
        with monkeypatch.context() as patched:
            patched.setattr("dokimi.checks.scan.plain_manifest.plain_scan_keys", lambda *a, **k: None)
            usual = scan_result(str(repo), **way)  # type: ignore[arg-type]
        assert plain == usual
        assert plain.manifest is not None and not plain.defaulted
        assert [f.path for f in plain.result.files] == ["AGENTS.md", "GUIDE.md"]
        claims = {(d.claim, d.verdict.status) for d in plain.result.drafts}
        assert ("src/gone.py", "fail") in claims
        assert ("https://example.org/o/r/blob/main/GUIDE.md", "ok") in claims
        assert plain.result.build_systems.adapters == ["make"]
