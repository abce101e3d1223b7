"""The SARIF the action uploads is SARIF 2.1.0: every object has the standard's required properties and only
the properties the standard defines (tests/helpers/sarif.py), with a failing, an unresolved and a suppressed
claim in it, and the fingerprint that follows a claim from push to push. The check itself refuses documents
that break the standard, so it is not idle."""

from __future__ import annotations

import copy
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from dokimi.ci.scan import ScanDiff, scan_pull_request
from tests.helpers.git import commit, git, git_repo
from tests.helpers.sarif import sarif_errors

BASE_GUIDE = "# Guide\n\nRead `docs/a.md` first.\n"
HEAD_GUIDE = BASE_GUIDE + (
    "Open `out/report.html` after a build.\n"
    "The old notes are in `docs/gone.md`.\n"
    "So was `docs/gone-too.md`. <!-- dokimi: ignore -->\n"
)


def _diff(tmp_path: Path) -> ScanDiff:
    repo = git_repo(tmp_path / "repo", {"AGENTS.md": BASE_GUIDE, "docs/a.md": "a\n"})
    base = git(repo, "rev-parse", "HEAD").strip()
    head = commit(repo, "more guidance", files={"AGENTS.md": HEAD_GUIDE})
    return scan_pull_request(repo, repo / ".git", base, head, None)


def test_the_uploaded_sarif_is_sarif_2_1_0_with_each_kind_of_claim(tmp_path: Path) -> None:
    diff = _diff(tmp_path)
    sarif = diff.sarif
    assert sarif_errors(sarif) == []
    (run,) = sarif["runs"]
    assert run["tool"]["driver"]["name"] == "dokimi-scan"
    by_claim = {r["message"]["text"].split(":")[0]: r for r in run["results"]}
    assert by_claim["docs/gone.md"]["level"] == "error"
    assert by_claim["out/report.html"]["level"] == "note"
    assert by_claim["docs/gone-too.md"]["suppressions"][0]["kind"] == "inSource"
    gone = by_claim["docs/gone.md"]["locations"][0]["physicalLocation"]
    assert gone["artifactLocation"]["uri"] == "AGENTS.md" and gone["region"]["startLine"] == 5
    assert {r["ruleId"] for r in run["results"]} <= {rule["id"] for rule in run["tool"]["driver"]["rules"]}
    fingerprints = [r["partialFingerprints"]["dokimiClaim/v1"] for r in run["results"]]
    assert len(set(fingerprints)) == len(fingerprints) == 3
    assert [c.claim for c in diff.new] == ["docs/gone.md"]  # the suppressed one is not a new failure


def _drop(*path: str | int) -> Callable[[dict[str, Any]], None]:
    def change(doc: dict[str, Any]) -> None:
        node: Any = doc
        for key in path[:-1]:
            node = node[key]
        del node[path[-1]]

    return change


def _put(value: Any, *path: str | int) -> Callable[[dict[str, Any]], None]:
    def change(doc: dict[str, Any]) -> None:
        node: Any = doc
        for key in path[:-1]:
            node = node[key]
        node[path[-1]] = value

    return change


RESULT = ("runs", 0, "results", 0)
BROKEN = {
    "no version": _drop("version"),
    "another version": _put("2.1", "version"),
    "no runs": _drop("runs"),
    "a run without its tool": _drop("runs", 0, "tool"),
    "a driver without a name": _drop("runs", 0, "tool", "driver", "name"),
    "a rule without an id": _drop("runs", 0, "tool", "driver", "rules", 0, "id"),
    "a result without a message": _drop(*RESULT, "message"),
    "a message without text or id": _put({"markdown": "x"}, *RESULT, "message"),
    "a level SARIF does not know": _put("fatal", *RESULT, "level"),
    "a line 0": _put(0, *RESULT, "locations", 0, "physicalLocation", "region", "startLine"),
    "a location without an artifact": _drop(*RESULT, "locations", 0, "physicalLocation", "artifactLocation"),
    "a property SARIF does not define": _put("x", *RESULT, "severity"),
    "a suppression of an unknown kind": _put([{"kind": "inline"}], *RESULT, "suppressions"),
}  # fmt: skip


@pytest.mark.parametrize("change", BROKEN.values(), ids=list(BROKEN))
def test_the_check_refuses_what_breaks_sarif_2_1_0(tmp_path: Path, change: Callable[..., None]) -> None:
    broken = copy.deepcopy(_diff(tmp_path).sarif)
    change(broken)
    assert sarif_errors(broken) != []
