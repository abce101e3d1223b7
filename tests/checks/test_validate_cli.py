"""`dokimi repo validate` through dokimi.cli.main.main: exit codes 0/1/2, text and --json output."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from dokimi.checks.validate import ValidationReport
from dokimi.cli.main import main
from tests.checks.test_validate import MANIFEST, MANIFEST_PATH, Repo
from tests.helpers.git import commit, git_repo


@pytest.fixture
def repo(tmp_path: Path) -> Repo:
    return Repo(tmp_path / "repo")


@pytest.mark.slow
def test_a_valid_manifest_exits_0_with_a_summary(repo: Repo, capsys: pytest.CaptureFixture[str]) -> None:
    repo.add_eval(tasks={"t1": repo.task("t1", base=repo.c1[:12])})
    rc = main(["repo", "validate", str(repo.path), "--manifest", MANIFEST_PATH])
    out = capsys.readouterr().out.splitlines()
    assert rc == 0
    assert out[0].startswith("warning: .agent-eval/tasks/t1/task.json:4: base: ") and out[0].endswith(
        "[base_form]"
    )
    assert out[-1].startswith(f"valid: {MANIFEST_PATH}: 0 error(s), 1 warning(s); 1 tasks over 1 bases")


@pytest.mark.slow
def test_an_invalid_manifest_exits_1_with_one_line_per_finding(
    repo: Repo, capsys: pytest.CaptureFixture[str]
) -> None:
    repo.add_eval(
        MANIFEST.replace("build_systems: [make]", "build_systems: [bazle]"),
        tasks={"t1": repo.task("t1", base="main")},
    )
    rc = main(["repo", "validate", str(repo.path), "--manifest", MANIFEST_PATH])
    out = capsys.readouterr().out.splitlines()
    assert rc == 1
    assert out[0].startswith(f"error: {MANIFEST_PATH}:17: build_systems[0]: unknown build system 'bazle'")
    assert out[1].startswith("error: .agent-eval/tasks/t1/task.json:4: base: 'main' is not a hex SHA")
    assert out[-1].startswith("invalid: ") and "2 error(s)" in out[-1]


@pytest.mark.slow
def test_json_prints_a_repo_validation_document(repo: Repo, capsys: pytest.CaptureFixture[str]) -> None:
    sha = repo.add_eval(tasks={"t1": repo.task("t1", timeout_s=-1)})
    rc = main(["repo", "validate", f"{repo.path}@HEAD", "--manifest", MANIFEST_PATH, "--json"])
    data = json.loads(capsys.readouterr().out)
    assert rc == 1
    report = ValidationReport.model_validate(data)
    assert data["schema"] == "repo_validation.v1" and data["valid"] is False
    assert (report.tasks, report.bases, report.eval_rev) == (1, 1, sha)
    assert [(e["code"], e["task"], e["key"]) for e in data["errors"]] == [
        ("caps_finite_positive", "t1", "timeout_s")
    ]


@pytest.mark.slow
def test_manifest_file_reads_a_manifest_from_outside_the_tree(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = git_repo(tmp_path / "r", {"AGENTS.md": "x\n"})
    local = tmp_path / "local.yaml"
    local.write_text("schema: repo_manifest.v1\nid: r\nguidance: {globs: ['**/AGENTS.md', nothing.md]}\n")
    rc = main(["repo", "validate", str(path), "--manifest-file", str(local)])
    out = capsys.readouterr().out.splitlines()
    assert rc == 0
    assert out[0].startswith(f"warning: {local}:3: guidance.globs[1]: 'nothing.md' matches nothing")
    assert "guidance-only manifest" in out[-1]


@pytest.mark.slow
def test_the_default_manifest_location_is_used_without_options(
    repo: Repo, capsys: pytest.CaptureFixture[str]
) -> None:
    repo.add_eval()
    assert main(["repo", "validate", str(repo.path)]) == 0
    assert capsys.readouterr().out.startswith(f"valid: {MANIFEST_PATH}")


@pytest.mark.slow
@pytest.mark.parametrize(
    ("content", "fragment"),
    [
        ("- just\n- a list\n", f"{MANIFEST_PATH}:1: the manifest must be a mapping"),
        ("", "but it is empty"),
        (b"\x7fELF\x00\x01\x02\xff\xfe", "binary data, not a text document"),
        (b"id: \xff\xfe\n", "not UTF-8 text"),
        ("schema: repo_manifest.v1\nid: [unclosed\n", "not valid YAML"),
        ("schema: repo_manifest.v1\nid: a\nid: b\n", f"{MANIFEST_PATH}:3: duplicate key"),
        ("schema: repo_manifest.v1\nguidance:\n\tglobs: []\n", "YAML indents with spaces"),
    ],
)
def test_an_unreadable_manifest_is_an_invalid_document_exit_1_without_a_traceback(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], content: str | bytes, fragment: str
) -> None:
    """The manifest is there and is not a YAML mapping: the check found a problem (exit 1), named like any
    other finding; exit 2 is for a manifest that is missing or a source that cannot be read."""
    path = git_repo(tmp_path / "r", {MANIFEST_PATH: content})
    rc = main(["repo", "validate", str(path), "--manifest", MANIFEST_PATH])
    captured = capsys.readouterr()
    text = captured.out + captured.err
    assert rc == 1
    assert fragment in text and "[manifest_schema]" in text and "Traceback" not in text
    assert f"invalid: {MANIFEST_PATH}" in captured.out


def test_no_manifest_exits_2_and_says_how_to_give_one(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = git_repo(tmp_path / "r", {"README.md": "x\n"})
    assert main(["repo", "validate", str(path)]) == 2
    err = capsys.readouterr().err
    assert "no manifest" in err and "--manifest-file" in err


def test_a_manifest_path_that_does_not_exist_exits_2(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = git_repo(tmp_path / "r", {"README.md": "x\n"})
    assert main(["repo", "validate", str(path), "--manifest", "eval/repo-eval.yaml"]) == 2
    assert "eval/repo-eval.yaml: no such file in" in capsys.readouterr().err


def test_an_unreadable_source_exits_2(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["repo", "validate", str(tmp_path / "missing"), "--manifest", MANIFEST_PATH]) == 2
    assert "no such directory" in capsys.readouterr().err


def test_an_unknown_revision_exits_2(repo: Repo, capsys: pytest.CaptureFixture[str]) -> None:
    repo.add_eval()
    assert main(["repo", "validate", f"{repo.path}@no-such-branch"]) == 2
    assert "does not resolve" in capsys.readouterr().err


def test_manifest_and_manifest_file_together_exit_2(repo: Repo, capsys: pytest.CaptureFixture[str]) -> None:
    repo.add_eval()
    rc = main(["repo", "validate", str(repo.path), "--manifest", MANIFEST_PATH, "--manifest-file", "x.yaml"])
    assert rc == 2
    assert "not both" in capsys.readouterr().err


def test_a_manifest_that_does_not_fit_the_schema_exits_1(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = git_repo(
        tmp_path / "r", {MANIFEST_PATH: "schema: repo_manifest.v2\nid: x\nguidance: {globs: 3}\n"}
    )
    rc = main(["repo", "validate", str(path)])
    out = capsys.readouterr().out
    assert rc == 1
    assert (
        f"error: {MANIFEST_PATH}:1: schema: " in out and f"error: {MANIFEST_PATH}:3: guidance.globs: " in out
    )


def test_a_working_tree_edit_is_validated_before_commit(
    repo: Repo, capsys: pytest.CaptureFixture[str]
) -> None:
    repo.add_eval()
    (repo.path / MANIFEST_PATH).write_text(MANIFEST.replace("id: demo\n", ""))
    assert main(["repo", "validate", str(repo.path)]) == 1
    assert f"error: {MANIFEST_PATH}:1: id: required key is missing;" in capsys.readouterr().out
    commit(repo.path, "restore", files={MANIFEST_PATH: MANIFEST})
    assert main(["repo", "validate", str(repo.path)]) == 0


def test_docs_validate_md_names_every_rule_and_every_field_of_the_json_document() -> None:
    """docs/validate.md is the documentation of --json and of the rules: it must not drift from the code."""
    import re

    from dokimi.checks.validate import RULES, Finding

    docs = (Path(__file__).resolve().parents[2] / "docs" / "validate.md").read_text()
    documented_codes = re.findall(r"^\| `([a-z_]+)` \| (?:error|warning)", docs, flags=re.M)
    assert documented_codes == [r.__name__.removeprefix("check_") for r in RULES]
    field_rows = docs.split("| field | meaning |", 1)[1].split("\n\n", 1)[0]
    documented_fields = set(re.findall(r"`([a-z_]+)`", field_rows))
    assert {f.alias or name for name, f in ValidationReport.model_fields.items()} <= documented_fields
    assert set(Finding.model_fields) <= documented_fields
