"""Guidance files, warnings, the gate, identifiers, --static, SARIF, the CLI and the three kinds of source."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest

from dokimi.cli.main import main
from tests.checks.scan._util import rows, scan_dir, scan_files
from tests.helpers.git import Symlink, bare_clone_for_serving, git_repo, head

IDENT_GUIDE = """\
`load_config` `MAX_WORKERS` `UNKNOWN_SETTING` `TaskRunner` `missing_helper` `pkg.util.load_config`
`pkg.util.gone_name` `pkg.util` `os.path.join` `README` `plain`
"""


def test_identifiers_are_found_in_one_search_and_only_module_members_can_fail(tmp_path: Path) -> None:
    result = scan_files(
        tmp_path,
        {
            "AGENTS.md": IDENT_GUIDE,
            "src/pkg/__init__.py": "",
            "src/pkg/util.py": (
                "MAX_WORKERS = 4\n\ndef load_config():\n    pass\n\ndef load_configs():\n    pass\n"
            ),
            "src/pkg/runner.py": "class TaskRunner:\n    pass\n",
        },
        build_systems=["none"],
    )
    assert rows(result) == [
        (1, "identifier", "MAX_WORKERS", "ok"),
        (1, "identifier", "TaskRunner", "ok"),
        (1, "identifier", "UNKNOWN_SETTING", "unresolved"),
        (1, "identifier", "load_config", "ok"),
        (1, "identifier", "missing_helper", "unresolved"),
        (1, "identifier", "pkg.util.load_config", "ok"),
        (2, "identifier", "os.path.join", "unresolved"),
        (2, "identifier", "pkg.util", "ok"),
        (2, "identifier", "pkg.util.gone_name", "fail"),
    ]


def test_a_symlinked_guidance_file_is_scanned_once_as_the_file_it_names(tmp_path: Path) -> None:
    result = scan_files(
        tmp_path,
        {
            "AGENTS.md": "`src/a.py`\n",
            "CLAUDE.md": Symlink("AGENTS.md"),
            "sub/CLAUDE.md": Symlink("../docs/guide.md"),
            "docs/guide.md": "`a.py` `../src/a.py`\n",
            "src/a.py": "",
            "bad/AGENTS.md": Symlink("../../outside.md"),
            "gone/AGENTS.md": Symlink("nothing.md"),
            "big/AGENTS.md": "x" * (2 * 1024 * 1024 + 1),
            "bin/AGENTS.md": b"\x00\x01binary",
        },
        globs=["**/AGENTS.md", "**/CLAUDE.md", "nothing/*.md"],
        also_scan=["CONTRIBUTING.md"],
    )
    states = {f.path: (f.state, f.scanned_as, f.reason) for f in result.files}
    assert states == {
        "AGENTS.md": ("scanned", "AGENTS.md", None),
        "CLAUDE.md": ("alias", "AGENTS.md", None),
        "sub/CLAUDE.md": ("scanned", "docs/guide.md", None),
        "bad/AGENTS.md": ("unreadable", None, "escapes the tree"),
        "gone/AGENTS.md": ("unreadable", None, "a link that dangles"),
        "big/AGENTS.md": ("unreadable", None, "over 2 MB (2097153 bytes)"),
        "bin/AGENTS.md": ("unreadable", None, "a binary file"),
    }
    assert rows(result) == [
        (1, "path", "src/a.py", "ok"),
        (1, "path", "../src/a.py", "ok"),
        (1, "path", "a.py", "ok_basename"),
    ] or sorted(rows(result)) == sorted(
        [(1, "path", "src/a.py", "ok"), (1, "path", "../src/a.py", "ok"), (1, "path", "a.py", "ok_basename")]
    )
    kinds = sorted((w.kind, w.path, w.gate) for w in result.warnings)
    assert kinds == [
        ("also_scan_missing", "CONTRIBUTING.md", True),
        ("glob_no_match", "nothing/*.md", False),
        ("unreadable", "bad/AGENTS.md", True),
        ("unreadable", "big/AGENTS.md", True),
        ("unreadable", "bin/AGENTS.md", True),
        ("unreadable", "gone/AGENTS.md", True),
    ]


def _cli(args: list[str], capsys: pytest.CaptureFixture[str]) -> tuple[int, str, str]:
    rc = main(["repo", "scan", *args])
    out, err = capsys.readouterr()
    return rc, out, err


def test_the_gate_fails_on_a_fail_claim_but_not_on_a_glob_without_match(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    good = git_repo(tmp_path / "good", {"AGENTS.md": "`src/a.py`\n", "src/a.py": ""})
    rc, out, err = _cli([str(good), "--fail-on-fail"], capsys)
    assert rc == 0, out
    assert "default guidance globs" in err
    assert "matches no file" not in out  # the default globs name every harness's files: no warning each
    bad = git_repo(tmp_path / "bad", {"AGENTS.md": "`src/b.py`\n", "src/a.py": ""})
    rc, out, _ = _cli([str(bad), "--fail-on-fail"], capsys)
    assert rc == 1
    assert "src/b.py" in out and "did you mean src/a.py?" in out
    rc, _, _ = _cli([str(bad)], capsys)
    assert rc == 0
    empty = git_repo(tmp_path / "empty", {"README.md": "x\n"})
    rc, out, _ = _cli([str(empty), "--fail-on-fail"], capsys)
    assert rc == 1 and "no guidance file matched" in out


def test_static_claims_replace_framework_claims_and_by_source_keeps_both(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    repo = git_repo(tmp_path / "r", {"AGENTS.md": "`src/b.py` `src/a.py`\n", "src/a.py": ""})
    static = tmp_path / "static.json"
    static.write_text(
        json.dumps(
            {
                "schema": "repo_static.v1",
                "checker": "ours",
                "claims": [
                    {
                        "file": "AGENTS.md",
                        "line": 1,
                        "claim": "src/b.py",
                        "status": "ok_generated",
                        "kind": "path",
                        "why": "built",
                    },
                    {"file": "AGENTS.md", "line": 9, "status": "unresolved", "note": "free-form"},
                ],
            }
        )
    )
    out_file = tmp_path / "readiness.json"
    rc, _, _ = _cli([str(repo), "--static", str(static), "--out", str(out_file), "--fail-on-fail"], capsys)
    assert rc == 0
    document = json.loads(out_file.read_text())
    assert document["schema"] == "repo_readiness.v1"
    assert document["by_source"] == {
        "framework": {"ok": 1, "unresolved": 0, "fail": 1},
        "repository": {"ok": 1, "unresolved": 1, "fail": 0},
    }
    assert document["counts"] == {"ok": 2, "unresolved": 1, "fail": 0}
    assert document["static"]["replaced"] == 1 and document["static"]["top_level"] == {"checker": "ours"}
    merged = [(c["line"], c["claim"], c["status"], c["source"]) for c in document["claims"]]
    assert merged == [
        (1, "src/a.py", "ok", "framework"),
        (1, "src/b.py", "ok_generated", "repository"),
        (9, "", "unresolved", "repository"),
    ]
    static.write_text(
        json.dumps({"schema": "repo_static.v1", "claims": [{"file": "A.md", "status": "broken"}]})
    )
    rc, out, _ = _cli([str(repo), "--static", str(static)], capsys)
    assert rc == 1 and "was not merged" in out


def test_sarif_has_one_result_per_fail_and_notes_for_unresolved(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    repo = git_repo(
        tmp_path / "r",
        {"docs/AGENTS.md": "ok line\n`../src/b.py` and `build/x.o`\n", "src/a.py": ""},
    )
    rc, out, _ = _cli([str(repo), "--format", "sarif"], capsys)
    assert rc == 0
    sarif = json.loads(out)
    assert sarif["version"] == "2.1.0" and sarif["$schema"].endswith("sarif-2.1.0.json")
    run = sarif["runs"][0]
    assert run["tool"]["driver"]["name"] == "dokimi-scan"
    results = [
        (
            r["level"],
            r["ruleId"],
            r["locations"][0]["physicalLocation"]["artifactLocation"]["uri"],
            r["locations"][0]["physicalLocation"]["region"]["startLine"],
        )
        for r in run["results"]
    ]
    assert results == [
        ("error", "dokimi/path", "docs/AGENTS.md", 2),
        ("note", "dokimi/path", "docs/AGENTS.md", 2),
    ]
    assert {rule["id"] for rule in run["tool"]["driver"]["rules"]} == {"dokimi/path"}


def test_static_and_run_static_together_are_refused(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    repo = git_repo(tmp_path / "r", {"AGENTS.md": "x\n"})
    static = tmp_path / "static.json"
    static.write_text('{"schema": "repo_static.v1", "claims": []}\n')
    rc, _, err = _cli([str(repo), "--static", str(static), "--run-static"], capsys)
    assert rc == 2 and "not both" in err


GUIDE_FOR_SOURCES = """\
[link](docs/guide.md) `src/pkg/core.py` `src/pkg/gone.py` `load_config` `NOT_THERE`
```bash
make all && python scripts/run.py
```
"""


@pytest.mark.slow
def test_a_working_tree_a_commit_and_a_blobless_clone_give_identical_claims(tmp_path: Path) -> None:
    files = {
        "AGENTS.md": GUIDE_FOR_SOURCES,
        "CLAUDE.md": Symlink("AGENTS.md"),
        "docs/guide.md": "g\n",
        "src/pkg/core.py": "def load_config():\n    pass\n",
        "scripts/run.py": "",
        "Makefile": "all:\n\ttrue\n",
        "linkdir": Symlink("src/pkg"),
    }
    repo = git_repo(tmp_path / "repo", files)
    sha = head(repo)
    served = bare_clone_for_serving(repo, tmp_path / "served.git")
    clone = tmp_path / "clone.git"
    subprocess.run(
        ["git", "clone", "-q", "--bare", "--filter=blob:none", f"file://{served}", str(clone)],
        check=True,
        capture_output=True,
    )
    missing = subprocess.run(
        ["git", "--git-dir", str(clone), "rev-list", "--objects", "--missing=print", "--all"],
        check=True,
        capture_output=True,
        text=True,
    ).stdout
    assert "?" in missing  # really blob-less
    globs = ["**/AGENTS.md", "**/CLAUDE.md"]
    tree = scan_dir(str(repo), globs=globs)
    commit = scan_dir(f"{repo}@{sha}", globs=globs)
    blobless = scan_dir(f"{clone}@{sha}", globs=globs)
    assert tree.drafts == commit.drafts == blobless.drafts
    assert [(f.path, f.state) for f in tree.files] == [(f.path, f.state) for f in blobless.files]
    assert ("fail" in {d.verdict.status for d in tree.drafts}) and len(tree.drafts) == 7
