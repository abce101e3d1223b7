"""The build image (contract §1.1, §9): context, tags, reuse, failures and the build time limit."""

from __future__ import annotations

import secrets
import subprocess
import time
from pathlib import Path

import pytest

from dokimi.errors import ContainerError, UsageError
from dokimi.repo.manifest import load_manifest
from dokimi.sandbox.container import ContainerSpec, container_name, run_container
from dokimi.sandbox.image import build_image, image_tag, use_image
from dokimi.source import open_source
from tests.helpers.evalrepo import BASE_IMAGE, MANIFEST, make_eval_repo
from tests.helpers.git import commit, git

pytestmark = pytest.mark.docker

CONTEXT_DOCKERFILE = f"FROM {BASE_IMAGE}\nCOPY . /ctx/\n"


def _repo(tmp_path: Path, dockerfile: str, *, manifest_id: str | None = None) -> Path:
    manifest = MANIFEST.replace("id: toy", f"id: {manifest_id or 'imgtest-' + secrets.token_hex(4)}")
    path, _, _ = make_eval_repo(tmp_path / "repo", dockerfile=dockerfile, manifest=manifest)
    return path


def _build(source: str, **kwargs: object):  # type: ignore[no-untyped-def]
    with open_source(source) as repo:
        loaded = load_manifest(repo.eval_snapshot(), manifest=None, manifest_file=None, required=True)
        assert loaded.manifest is not None
        return build_image(repo, loaded.manifest, **kwargs)  # type: ignore[arg-type]


def _rmi(ref: str) -> None:
    subprocess.run(["docker", "rmi", "-f", ref], capture_output=True, check=False)


def _files_in(ref: str) -> list[str]:
    result = run_container(
        ContainerSpec(
            name=container_name("imgtest", secrets.token_hex(3), "probe"),
            image=ref,
            argv=["sh", "-c", "cd /ctx && find . -mindepth 1 | sort"],
        ),
        timeout=60,
    )
    assert result.ok, result.stderr
    return [line[2:] for line in result.stdout.splitlines()]


def test_tags_name_the_commit_or_the_context_digest() -> None:
    assert image_tag("oneDAL", rev="a" * 40, context_digest=None) == f"dokimi/onedal:{'a' * 40}"
    assert image_tag("my_repo.x", rev=None, context_digest="f" * 64) == f"dokimi/my-repo-x:ctx-{'f' * 24}"


def test_the_context_is_the_eval_tree_at_its_revision_without_tasks_git_or_untracked_files(
    tmp_path: Path,
) -> None:
    path = _repo(tmp_path, CONTEXT_DOCKERFILE)
    head = git(path, "rev-parse", "HEAD").strip()
    (path / "untracked.txt").write_text("not in the eval revision\n")
    built = _build(f"{path}@{head}")
    try:
        assert built.ref.endswith(f":{head}") and built.pin == "tree" and built.built
        files = _files_in(built.ref)
        assert "app/calc.py" in files and ".agent-eval/grade.py" in files
        assert not [f for f in files if f.startswith(".agent-eval/tasks")]
        assert ".git" not in files and "untracked.txt" not in files
        again = _build(f"{path}@{head}")
        assert again.ref == built.ref and not again.built
    finally:
        _rmi(built.ref)


def test_a_working_tree_image_follows_its_context_digest(tmp_path: Path) -> None:
    path = _repo(tmp_path, CONTEXT_DOCKERFILE)
    first = _build(str(path))
    try:
        assert first.pin == "digest" and ":ctx-" in first.ref and first.context_digest
        (path / "app" / "calc.py").write_text("def add(a, b):\n    return 0\n")  # a local edit
        second = _build(str(path))
        try:
            assert second.ref != first.ref
            # a task-only change does not change the image
            (path / ".agent-eval" / "tasks" / "fix_add" / "task.json").write_text("{}\n")
            assert _build(str(path)).ref == second.ref
        finally:
            _rmi(second.ref)
    finally:
        _rmi(first.ref)


def _build_containers(token: str) -> list[str]:
    """Containers (any state) whose command holds ``token``: what a build step left behind."""
    listed = subprocess.run(
        ["docker", "ps", "-a", "--no-trunc", "--format", "{{.Names}} {{.Command}}"],
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    return [line for line in listed.splitlines() if token in line]


def test_a_failing_build_is_a_container_error_with_the_end_of_its_log(tmp_path: Path) -> None:
    token = f"building-the-toy-{secrets.token_hex(4)}"
    path = _repo(tmp_path, f"FROM {BASE_IMAGE}\nRUN echo {token} && exit 3\n")
    with pytest.raises(ContainerError, match="failed") as caught:
        _build(str(path), work_dir=tmp_path)
    assert token in str(caught.value) or token in (tmp_path / "build.log").read_text()
    assert _build_containers(token) == []  # the failed step's container is removed too


def test_an_image_build_past_its_time_limit_is_a_container_error(tmp_path: Path) -> None:
    token = secrets.token_hex(4)
    path = _repo(tmp_path, f"FROM {BASE_IMAGE}\nRUN sleep 30 && echo {token}\n")
    with pytest.raises(ContainerError, match="ran past 2 s"):
        _build(str(path), timeout_s=2)
    # the daemon cancels the running step once the stopped client is gone (it takes it a moment), well before
    # the step would have ended on its own
    deadline = time.monotonic() + 15
    while _build_containers(token) and time.monotonic() < deadline:
        time.sleep(0.5)
    assert _build_containers(token) == []


def test_a_dockerfile_outside_the_committed_tree_is_a_usage_error(tmp_path: Path) -> None:
    path = _repo(tmp_path, CONTEXT_DOCKERFILE)
    git(path, "rm", "-q", ".agent-eval/Dockerfile")
    commit(path, "drop the Dockerfile")
    with pytest.raises(UsageError, match="not a file of the eval tree"):
        _build(f"{path}@HEAD")


def test_an_image_of_the_callers_must_exist() -> None:
    with pytest.raises(UsageError, match="no such image"):
        use_image("dokimi-test/no-such-image:" + secrets.token_hex(4))
    assert use_image(BASE_IMAGE).pin == "image"


@pytest.mark.parametrize(
    ("dockerfile", "sources"),
    [
        (
            "FROM x\nCOPY requirements.txt /tmp/\nRUN pip install -r /tmp/requirements.txt\n",
            ["requirements.txt"],
        ),
        ("FROM x\nCOPY --chown=1:1 ./a/ b/c.py /dst/\nADD https://example.invalid/f /f\n", ["a", "b/c.py"]),
        ('FROM x\nCOPY ["tools/x y.sh", "/opt/"]\n', ["tools/x y.sh"]),
        ("FROM x AS b\nRUN true\nFROM x\nCOPY --from=b /out /out\n# COPY . /src\n", []),
        ("FROM x\nCOPY \\\n    setup.cfg \\\n    /src/\n", ["setup.cfg"]),
        ("FROM x\nCOPY . /src\n", None),
        ("FROM x\nARG DIR=src\nCOPY $DIR /src\n", None),
    ],
)
def test_the_paths_a_dockerfile_names(dockerfile: str, sources: list[str] | None) -> None:
    from dokimi.sandbox.image import dockerfile_sources

    assert dockerfile_sources(dockerfile) == sources


NAMED_DOCKERFILE = (
    f"FROM {BASE_IMAGE}\nCOPY app/calc.py /ctx/app/calc.py\nCOPY .agent-eval/ /ctx/.agent-eval/\n"
)


def test_the_context_holds_the_eval_dir_and_what_the_dockerfile_names_so_a_guidance_edit_changes_nothing(
    tmp_path: Path,
) -> None:
    path = _repo(tmp_path, NAMED_DOCKERFILE)
    (path / "AGENTS.md").write_text("# guidance\n")
    first = _build(str(path))
    try:
        files = _files_in(first.ref)
        assert "app/calc.py" in files and ".agent-eval/grade.py" in files
        assert not [f for f in files if f.startswith(".agent-eval/tasks")]
        (path / "AGENTS.md").write_text("# guidance, edited\n")  # guidance is not in the context
        again = _build(str(path))
        assert (again.ref, again.built) == (first.ref, False)
        (path / "app" / "calc.py").write_text("def add(a, b):\n    return a + b\n")  # a file it copies
        changed = _build(str(path))
        try:
            assert changed.ref != first.ref and changed.built
        finally:
            _rmi(changed.ref)
    finally:
        _rmi(first.ref)


def test_a_failed_build_keeps_its_log_and_reports_its_steps(tmp_path: Path) -> None:
    token = f"step-log-{secrets.token_hex(4)}"
    path = _repo(tmp_path, f"FROM {BASE_IMAGE}\nRUN echo {token}\nRUN echo failing-{token} && exit 7\n")
    steps: list[str] = []
    with pytest.raises(ContainerError) as caught:
        _build(str(path), progress=steps.append)  # no work_dir: the log must survive anyway
    log = Path(str(caught.value.path))
    assert log.is_file() and f"failing-{token}" in log.read_text()
    assert str(log) in str(caught.value)
    assert any(s.startswith("building image") for s in steps)
    assert [s for s in steps if s.startswith("Step ")][-1].endswith(f"RUN echo failing-{token} && exit 7")
