"""Suppressions: inline ``<!-- dokimi: ignore -->`` comments and the manifest's scan.ignore, each reported."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from dokimi.checks.scan.suppress import IgnoreEntry
from dokimi.cli.main import main
from tests.checks.scan._util import scan_files
from tests.helpers.git import git_repo

GUIDE = """\
# Guide

Link `docs/gone-one` from the index. <!-- dokimi: ignore -->
<!-- dokimi: ignore path -->
Then `docs/gone-two` and `gone_identifier_x` on the next line.
<!-- dokimi: ignore -->
```sh
make nosuchtarget
python tools/gone.py
```
`docs/gone-three` is not silenced.
<!-- dokimi: ignore-start docs/gone-f* -->
`docs/gone-four` and `docs/gone-five`
`docs/other-six`
<!-- dokimi: ignore-end -->
`docs/exists.md` is fine. <!-- dokimi: ignore -->

```md
`docs/in-fence.md` <!-- dokimi: ignore -->
```
Write `<!-- dokimi: ignore -->` at the end of the line.
"""

TREE = {"AGENTS.md": GUIDE, "docs/exists.md": "", "Makefile": "all:\n\ttrue\n", "tools/x.py": ""}


def _suppressed(result: object) -> dict[tuple[int, str], str | None]:
    return {(d.line, d.claim): d.suppressed for d in result.drafts}  # type: ignore[attr-defined]


def test_inline_comments_silence_their_line_the_next_line_a_fence_and_a_range(tmp_path: Path) -> None:
    result = scan_files(tmp_path, TREE)
    found = _suppressed(result)
    assert found[(3, "docs/gone-one")] == "inline comment at AGENTS.md:3"
    assert found[(5, "docs/gone-two")] == "inline comment at AGENTS.md:4"
    assert found[(5, "gone_identifier_x")] is None  # `ignore path` names the kind: not the identifier
    assert found[(8, "nosuchtarget")] == "inline comment at AGENTS.md:6"
    assert found[(9, "tools/gone.py")] == "inline comment at AGENTS.md:6"
    assert found[(11, "docs/gone-three")] is None
    assert found[(13, "docs/gone-four")] == "inline comment at AGENTS.md:12"
    assert found[(13, "docs/gone-five")] == "inline comment at AGENTS.md:12"
    assert found[(14, "docs/other-six")] is None  # the range's word docs/gone-f* does not match it
    assert found[(16, "docs/exists.md")] is None  # ok: nothing to silence
    unused = [w.message for w in result.warnings if w.kind == "suppression_unused"]
    assert unused == [
        "the inline comment at AGENTS.md:16 silences no fail or unresolved claim; remove it, or it will hide "
        "the next problem it matches"
    ]  # and the comment inside the fence is code, not a suppression


def test_manifest_entries_silence_by_claim_file_kind_and_line(tmp_path: Path) -> None:
    ignore = [
        IgnoreEntry(claim="docs/gone-*", kind="path", file="AGENTS.md", why="branch names"),
        IgnoreEntry(claim="nosuchtarget", line=8),
        IgnoreEntry(claim="never-matches"),
    ]
    result = scan_files(
        tmp_path, {**TREE, "AGENTS.md": GUIDE.replace("<!-- dokimi:", "<!-- x:")}, ignore=ignore
    )
    found = _suppressed(result)
    label = "scan.ignore[0] in the manifest: branch names"
    assert found[(3, "docs/gone-one")] == label and found[(11, "docs/gone-three")] == label
    assert found[(14, "docs/other-six")] is None and found[(5, "gone_identifier_x")] is None
    assert found[(8, "nosuchtarget")] == "scan.ignore[1] in the manifest"
    assert [w.message.split(" silences")[0] for w in result.warnings] == [
        "the scan.ignore[2] in the manifest"
    ]


MANIFEST = """\
schema: repo_manifest.v1
id: sup
guidance:
  globs: ["AGENTS.md"]
scan:
  ignore:
    - claim: "out/*"
      why: written by the build
"""


def test_the_command_reports_each_suppression_in_text_json_and_sarif(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    repo = git_repo(
        tmp_path / "repo",
        {
            "AGENTS.md": "Open `out/report.html`.\nSee `docs/gone.md`. <!-- dokimi: ignore -->\n",
            "docs/a.md": "",
            ".agent-eval/repo-eval.yaml": MANIFEST,
        },
    )
    rc = main(["repo", "scan", str(repo), "--fail-on-fail"])
    out = capsys.readouterr().out
    assert rc == 0, out
    assert out.splitlines() == [
        "AGENTS.md:1: unresolved path out/report.html: not in the tree, and no parent directory of it exists "
        "at the root (a build output?) "
        "[suppressed by the scan.ignore[0] in the manifest: written by the build]",
        "AGENTS.md:2: fail path docs/gone.md: no such file or directory: docs/gone.md (docs/ exists) "
        "[suppressed by the inline comment at AGENTS.md:2]",
        "adapters: none (detected)",
        "scan: 1 guidance file, 2 claims: 0 ok, 0 unresolved, 0 fail, 2 suppressed",
    ]
    rc = main(["repo", "scan", str(repo), "--json"])
    document = json.loads(capsys.readouterr().out)
    assert document["suppressed"] == 2 and document["counts"] == {"ok": 0, "unresolved": 0, "fail": 0}
    assert [c["suppressed"] for c in document["claims"]] == [
        "scan.ignore[0] in the manifest: written by the build",
        "inline comment at AGENTS.md:2",
    ]
    assert document["gate"]["passed"] is True
    main(["repo", "scan", str(repo), "--format", "sarif"])
    results = json.loads(capsys.readouterr().out)["runs"][0]["results"]
    assert [r["suppressions"][0]["kind"] for r in results] == ["external", "inSource"]
