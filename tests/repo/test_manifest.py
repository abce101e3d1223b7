"""Manifest loading, the Task model and guidance_files_at, on real repositories."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from dokimi.constants import DEFAULT_GUIDANCE_GLOBS
from dokimi.errors import ManifestError
from dokimi.repo.manifest import guidance_files_at, load_manifest, load_tasks
from dokimi.schemas.manifest import RepoManifest
from dokimi.schemas.task import Task, base_form, egress_host_problem
from dokimi.source import open_source
from tests.helpers.git import Symlink, git_repo

SHA = "0123456789abcdef0123456789abcdef01234567"
GOOD_TASK = {"id": "t1", "family": "fix", "base": SHA, "prompt": "p", "grader": "g"}


def test_without_a_manifest_the_default_globs_are_used_when_not_required(tmp_path: Path) -> None:
    path = git_repo(tmp_path / "r", {"AGENTS.md": "x\n"})
    with open_source(str(path)) as repo:
        loaded = load_manifest(repo.eval_snapshot(), manifest=None, manifest_file=None, required=False)
    assert loaded.defaulted and loaded.manifest is None
    assert loaded.guidance_globs == list(DEFAULT_GUIDANCE_GLOBS)


def test_a_required_manifest_that_is_missing_raises(tmp_path: Path) -> None:
    path = git_repo(tmp_path / "r", {"AGENTS.md": "x\n"})
    with open_source(str(path)) as repo, pytest.raises(ManifestError, match="no manifest"):
        load_manifest(repo.eval_snapshot(), manifest=None, manifest_file=None, required=True)


def test_a_manifest_that_does_not_fit_the_schema_raises_with_its_line(tmp_path: Path) -> None:
    path = git_repo(
        tmp_path / "r", {"m.yaml": "schema: repo_manifest.v1\nid: x\nimage: {dockerfile: D, net: 1}\n"}
    )
    with open_source(str(path)) as repo, pytest.raises(ManifestError) as info:
        load_manifest(repo.eval_snapshot(), manifest="m.yaml", manifest_file=None, required=True)
    assert (info.value.path, info.value.line, info.value.key) == ("m.yaml", 3, "image.net")


def test_a_manifest_is_loaded_with_its_guidance_and_tasks(tmp_path: Path) -> None:
    files = {
        "e/repo-eval.yaml": "schema: repo_manifest.v1\nid: x\neval_dir: e\ntasks: e/tasks\n"
        "entry_points: {grade: g, oracle: o}\nguidance: {globs: ['**/AGENTS.md'], also_scan: [C.md]}\n"
        "tests: {list: 'pytest --co -q'}\n",
        "e/tasks/t1/task.json": json.dumps(GOOD_TASK),
        "e/tasks/t2/task.json": '{"id": "t2", "id": "t3"}',
        "e/tasks/empty/README": "no task here",
    }
    path = git_repo(tmp_path / "r", files)
    with open_source(f"{path}@HEAD") as repo:
        snapshot = repo.eval_snapshot()
        loaded = load_manifest(snapshot, manifest="e/repo-eval.yaml", manifest_file=None, required=True)
        assert loaded.manifest is not None and loaded.manifest.has_tasks
        assert loaded.manifest.tests is not None and loaded.manifest.tests.list_ == "pytest --co -q"
        assert (loaded.guidance_globs, loaded.also_scan) == (["**/AGENTS.md"], ["C.md"])
        tasks = load_tasks(snapshot, loaded.manifest)
    assert [t.id for t in tasks] == ["t1", "t2"]
    assert tasks[0].task is not None and tasks[0].task.gate == ["pass"] and tasks[0].errors == []
    assert tasks[1].task is None and "duplicate key 'id'" in tasks[1].errors[0].message


def test_the_manifest_schema_refuses_unknown_keys_and_dumps_by_alias() -> None:
    data = {"schema": "repo_manifest.v1", "id": "x", "tests": {"list": "ls"}}
    manifest = RepoManifest.model_validate(data)
    dumped = manifest.model_dump(by_alias=True, exclude_defaults=True)
    assert dumped["schema"] == "repo_manifest.v1" and dumped["tests"] == {"list": "ls"}
    with pytest.raises(ValueError, match="Extra inputs"):
        RepoManifest.model_validate({**data, "egress": []})


def test_every_manifest_and_task_field_has_a_description() -> None:
    for model in (RepoManifest, Task):
        schema = model.model_json_schema()
        for name, prop in schema["properties"].items():
            assert prop.get("description"), f"{model.__name__}.{name}"
        for definition in schema.get("$defs", {}).values():
            for name, prop in definition.get("properties", {}).items():
                assert prop.get("description"), f"{definition['title']}.{name}"


def test_setup_patch_is_a_synonym_and_unknown_task_keys_are_kept() -> None:
    task = Task.model_validate({**GOOD_TASK, "setup_patch": "bug.patch", "hidden_files": ["t.py"]})
    assert task.setup_patches == ["bug.patch"]
    assert task.model_extra == {"hidden_files": ["t.py"]}
    assert task.model_dump()["hidden_files"] == ["t.py"]
    with pytest.raises(ValueError, match="not both"):
        Task.model_validate({**GOOD_TASK, "setup_patch": "a", "setup_patches": ["b"]})


def test_the_task_model_refuses_refs_and_bad_caps_but_accepts_a_parent() -> None:
    assert Task.model_validate({**GOOD_TASK, "base": SHA + "^"}).at_parent
    for bad in ({"base": "main"}, {"timeout_s": 0}, {"max_turns": 1.5}, {"egress": ["*.org"]}, {"mode": "x"}):
        with pytest.raises(ValueError):
            Task.model_validate({**GOOD_TASK, **bad})
    task = Task.model_validate({**GOOD_TASK, "gate": ["strict_pass", {"metric": "recall", "min": 0.5}]})
    assert task.gate[1].min == 0.5  # type: ignore[union-attr]


@pytest.mark.parametrize(
    ("base", "form"),
    [
        (SHA, "full"),
        (SHA + "^", "full"),
        ("abc1234", "short"),
        ("abc1234^", "short"),
        ("HEAD", "invalid"),
        ("v1.0", "invalid"),
        (SHA + "^^", "invalid"),
        (SHA.upper(), "invalid"),
        (SHA + "0", "invalid"),
    ],
)
def test_base_forms(base: str, form: str) -> None:
    assert base_form(base) == form


@pytest.mark.parametrize(
    ("host", "ok"),
    [
        ("pypi.org", True),
        ("*.pythonhosted.org", True),
        ("a.*.b.com", True),
        ("pypi.org:443", True),
        ("*", False),
        ("*.org", False),
        ("org", False),
        ("p*.org", False),
        ("pypi.org:0", False),
        ("10.0.0.1", False),
        ("-a.org", False),
    ],
)
def test_egress_host_syntax(host: str, ok: bool) -> None:
    assert (egress_host_problem(host) is None) == ok


def test_guidance_files_at_follows_the_glob_dialect(tmp_path: Path) -> None:
    files = {
        "AGENTS.md": "root\n",
        "a/b/AGENTS.md": "deep\n",
        "CLAUDE.md": Symlink("AGENTS.md"),
        ".github/instructions/x.md": "i\n",
        ".github/instructions/sub/y.md": "not matched by *\n",
        "docs/AGENTS.md.bak": "no\n",
    }
    path = git_repo(tmp_path / "r", files)
    with open_source(f"{path}@HEAD") as repo:
        found = guidance_files_at(repo.eval_snapshot(), list(DEFAULT_GUIDANCE_GLOBS))
    assert found == [".github/instructions/x.md", "AGENTS.md", "CLAUDE.md", "a/b/AGENTS.md"]
