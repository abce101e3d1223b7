"""repo init and repo task new without docker: the files init writes, how a fix is read and split, the draft
prompt, and the FAIL_TO_PASS / PASS_TO_PASS classification. The whole flow with docker is in
tests/e2e/test_your_repo_e2e.py."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from dokimi.cli.main import main
from dokimi.errors import UsageError
from dokimi.repo.mining import (
    DEFAULT_TEST_GLOBS,
    classify,
    draft_prompt,
    pull_request_number,
    read_fix,
    write_task,
)
from dokimi.schemas._base import read_document
from dokimi.schemas.manifest import RepoManifest
from tests.helpers.git import commit, git, git_repo


def test_init_writes_a_commented_manifest_that_validates_and_refuses_to_overwrite(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    repo = git_repo(
        tmp_path / "proj", {"pkg/__init__.py": "", "tests/test_a.py": "def test_a():\n    pass\n"}
    )
    assert main(["repo", "init", str(repo)]) == 0
    out = capsys.readouterr().out
    manifest = repo / ".agent-eval" / "repo-eval.yaml"
    text = manifest.read_text()
    assert text.startswith("# yaml-language-server: $schema=repo_manifest.v1.schema.json\n")
    assert (repo / ".agent-eval" / "repo_manifest.v1.schema.json").is_file()
    model = read_document(manifest, RepoManifest)
    assert model.entry_points is not None
    assert (model.id, model.entry_points.grade, model.entry_points.oracle) == (
        "proj", "builtin:pytest", "builtin:oracle"
    )  # fmt: skip
    dockerfile = (repo / ".agent-eval" / "Dockerfile").read_text()
    assert "python3" in dockerfile and "git" in dockerfile and "FROM " in dockerfile
    assert "repo task new" in out and "repo validate" in out and "repo tasks check" in out
    before = text
    assert main(["repo", "init", str(repo)]) == 2
    assert "already exists" in capsys.readouterr().err
    assert manifest.read_text() == before


def test_init_picks_builtin_command_for_a_project_without_pytest(tmp_path: Path) -> None:
    repo = git_repo(tmp_path / "gopro", {"main.go": "package main\n"})
    assert main(["repo", "init", str(repo), "--json"]) == 0
    model = read_document(repo / ".agent-eval" / "repo-eval.yaml", RepoManifest)
    assert model.entry_points is not None and model.entry_points.grade == "builtin:command make test"


def _fix_repo(tmp_path: Path) -> tuple[Path, str]:
    repo = git_repo(
        tmp_path / "r", {"pkg/mod.py": "X = 1\n", "tests/test_mod.py": "def test_x():\n    pass\n"}
    )
    fix = commit(
        repo,
        "Fix X (#3)\n\nX was 1 in pkg/mod.py; it must be 2.\n\nSigned-off-by: A <a@b.c>",
        files={"pkg/mod.py": "X = 2\n", "tests/test_mod.py": "def test_x():\n    assert True\n"},
    )
    return repo, fix


def test_a_fix_is_split_into_hidden_tests_and_the_reference_solution(tmp_path: Path) -> None:
    repo, sha = _fix_repo(tmp_path)
    fix = read_fix(repo / ".git", sha, merge=False, test_globs=DEFAULT_TEST_GLOBS)
    assert (fix.base_rev, fix.test_paths, fix.code_paths) == (
        f"{sha}^",
        ["tests/test_mod.py"],
        ["pkg/mod.py"],
    )


def test_a_commit_without_tests_or_a_merge_given_as_a_commit_is_refused(tmp_path: Path) -> None:
    repo, sha = _fix_repo(tmp_path)
    only_code = commit(repo, "code only", files={"pkg/mod.py": "X = 3\n"})
    with pytest.raises(UsageError, match="changes no test file"):
        read_fix(repo / ".git", only_code, merge=False, test_globs=DEFAULT_TEST_GLOBS)
    with pytest.raises(UsageError, match="is not a merge commit"):
        read_fix(repo / ".git", sha, merge=True, test_globs=DEFAULT_TEST_GLOBS)


@pytest.mark.slow
def test_a_merged_pull_request_is_the_merge_against_its_first_parent(tmp_path: Path) -> None:
    repo, _ = _fix_repo(tmp_path)
    git(repo, "checkout", "-q", "-b", "feature")
    commit(repo, "step 1", files={"pkg/mod.py": "X = 4\n"})
    commit(repo, "step 2", files={"tests/test_mod.py": "def test_x():\n    assert 4\n"})
    git(repo, "checkout", "-q", "main")
    commit(repo, "unrelated", files={"README.md": "r\n"})
    git(repo, "merge", "-q", "--no-ff", "-m", "Merge pull request #31 from ada/feature", "feature")
    merge = git(repo, "rev-parse", "HEAD").strip()
    with pytest.raises(UsageError, match="merge commit"):
        read_fix(repo / ".git", merge, merge=False, test_globs=DEFAULT_TEST_GLOBS)
    fix = read_fix(repo / ".git", merge, merge=True, test_globs=DEFAULT_TEST_GLOBS)
    assert (fix.test_paths, fix.code_paths) == (["tests/test_mod.py"], ["pkg/mod.py"])
    task = write_task(tmp_path / "t", "t", fix, prompt="p", grader="builtin:pytest", tests=b"", oracle=b"")
    assert task["source_pr"] == 31  # the review-rule miner leaves its comments out


@pytest.mark.parametrize(
    ("message", "number"),
    [
        ("Merge pull request #12 from a/b\n\nFix x", 12),
        ("Fix the parser (#345)\n\n* step one", 345),
        ("Merge branch 'fix' into 'main'\n\nFix x\n\nSee merge request group/calc!7", 7),
        ("Fix the parser\n\nSee #12 for why.", None),
        ("", None),
    ],
)
def test_a_fix_names_its_pull_request_in_its_message(message: str, number: int | None) -> None:
    assert pull_request_number(message) == number


def test_the_draft_prompt_leaves_out_what_gives_the_fix_away() -> None:
    message = (
        "Fix area: it added the sides (#7)\n\nFixes #12. A 2x3 rectangle had area 5.\n"
        "The change is in geometry.py\n    return w * h\n```\ncode\n```\nUse `w * h`.\n\n"
        "Signed-off-by: Dev <dev@example.com>\nCo-authored-by: B <b@c.d>\n"
    )
    prompt = draft_prompt(message, ["shapes/geometry.py"])
    assert prompt == "Fix area: it added the sides\n\nA 2x3 rectangle had area 5."


def test_tests_are_classified_from_the_null_and_the_oracle_outcomes() -> None:
    null = {"t::a": "failed", "t::b": "passed", "t::c": "failed", "t::d": "passed"}
    oracle = {"t::a": "passed", "t::b": "passed", "t::c": "failed", "t::d": "skipped", "t::new": "passed"}
    assert classify(null, oracle) == (["t::a", "t::new"], ["t::b"], ["t::c", "t::d"])


@pytest.mark.slow
def test_task_new_refuses_an_existing_task_directory(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    repo, sha = _fix_repo(tmp_path)
    assert main(["repo", "init", str(repo)]) == 0
    (repo / ".agent-eval" / "tasks" / "fix_x").mkdir(parents=True)
    assert main(["repo", "task", "new", "fix_x", "--from-commit", sha, "-C", str(repo)]) == 2
    assert "already exists" in capsys.readouterr().err
    assert json.dumps(sorted(p.name for p in (repo / ".agent-eval" / "tasks" / "fix_x").iterdir())) == "[]"
