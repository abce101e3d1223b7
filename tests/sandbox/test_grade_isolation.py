"""The grade container (contract §1.1, §4.2): what it trusts from the agent, and graders that fail."""

from __future__ import annotations

import dataclasses
import json
import os
import secrets
import stat
from pathlib import Path
from typing import Any

import pytest

from dokimi.grading.entrypoints import (
    entry_argv,
    grade_run,
    move_agent_git,
    read_grade,
    run_entry_point,
    source_dir_for,
)
from dokimi.grading.environment import GradeEnvironment
from dokimi.sandbox.container import container_name, run_container
from dokimi.sandbox.docker import container_names
from dokimi.sandbox.specs import ContainerSettings, agent_spec
from dokimi.schemas.manifest import EntryPoints
from dokimi.schemas.task import Task
from tests.sandbox.conftest import Toy, prepared_run

pytestmark = pytest.mark.docker

EVIL_SCRIPT = "#!/bin/sh\ntouch /tmp/toy-{what}-ran\n"


def _environment(toy: Toy, **changes: Any) -> GradeEnvironment:
    assert toy.loaded.manifest is not None
    environment = GradeEnvironment.for_manifest(
        toy.loaded.manifest, image=toy.image.ref, eval_content=toy.content, source_dir=toy.repo.git_dir
    )
    return dataclasses.replace(environment.with_network("none"), **changes)


def _grade(toy: Toy, run_dir: Path, task: Task, *, timeout: float = 120, grace: float | None = None):  # type: ignore[no-untyped-def]
    environment = _environment(toy, grade_timeout_s=timeout, kill_grace_s=grace)
    return grade_run(
        environment, run_dir, task, name=container_name(f"gi{secrets.token_hex(3)}", task.id, "grade")
    )


def _plant_agent_git(workspace: Path) -> None:
    """What an agent could leave in .git: an fsmonitor and an external diff that run code, and a hook."""
    dot_git = workspace / ".git"
    for what in ("filter", "hook"):
        script = dot_git / (f"evil-{what}.sh" if what == "filter" else "hooks/post-index-change")
        script.parent.mkdir(exist_ok=True)
        script.write_text(EVIL_SCRIPT.format(what=what))
        os.chmod(script, 0o755)
    with open(dot_git / "config", "a") as config:
        config.write(
            "[core]\n\tfsmonitor = /eval/run/workspace/.git/evil-filter.sh\n"
            "\thooksPath = /eval/run/workspace/.git/hooks\n"
            "[diff]\n\texternal = /eval/run/workspace/.git/evil-filter.sh\n"
        )
    os.utime(workspace / "app" / "calc.py", (1, 1))  # a stale index: git status rewrites it
    os.chmod(workspace / ".git" / "hooks", 0o755)


def test_the_planted_git_configuration_would_run_in_the_agents_own_container(
    toy: Toy, tmp_path: Path
) -> None:
    """The control: the same .git runs the agent's code when nothing moves it aside."""
    run_dir = tmp_path / "run"
    prepared_run(toy, run_dir, "inspect_grader")
    _plant_agent_git(run_dir / "workspace")
    spec = agent_spec(
        ContainerSettings(toy.image.ref, None, "none"),
        name=container_name(f"gi{secrets.token_hex(3)}", "control", "agent"),
        run_dir=run_dir,
        argv=["sh", "-c", "git status >/dev/null 2>&1; git diff HEAD >/dev/null 2>&1; ls /tmp"],
        task="inspect_grader",
    )
    spec = dataclasses.replace(
        spec,
        env={
            **spec.env,
            "GIT_CONFIG_COUNT": "1",
            "GIT_CONFIG_KEY_0": "safe.directory",
            "GIT_CONFIG_VALUE_0": "*",
        },
    )
    result = run_container(spec, timeout=60)
    assert "toy-filter-ran" in result.stdout.split() and "toy-hook-ran" in result.stdout.split()


def test_a_grader_runs_none_of_the_agents_hooks_filters_or_config(toy: Toy, tmp_path: Path) -> None:
    run_dir = tmp_path / "run"
    task = prepared_run(toy, run_dir, "inspect_grader")
    _plant_agent_git(run_dir / "workspace")
    (run_dir / "grade-home").mkdir()
    (run_dir / "grade-home" / ".gitconfig").write_text("[alias]\n\tstatus = !touch /tmp/toy-hook-ran\n")
    outcome = _grade(toy, run_dir, task)
    assert not outcome.grader_failure, outcome.verdict.grader_error
    assert outcome.grade is not None
    metrics = outcome.grade.metrics
    assert metrics["filter_ran"] is False and metrics["hook_ran"] is False
    assert metrics["hooks_visible"] is False  # the grader cannot read the agent's .git/hooks
    assert metrics["git_status_ok"] is True  # a minimal .git/config keeps git working
    assert metrics["hooks_path_off"] is True
    assert metrics["home_is_grade_home"] is True and metrics["home_entries"] == 0  # fresh, the old one gone
    assert metrics["global_config_neutral"] is True  # dokimi's own .gitconfig, no system config or attributes
    assert metrics["nousersite"] is True
    assert metrics["eval_dir_writable"] is False
    assert metrics["source_visible"] is False  # the toy's grade entry point does not name {source_dir}
    assert metrics["scratch_set"] is True
    if os.geteuid() == 0:
        assert metrics["uid"] != 0
    aside = run_dir / "agent-git"
    assert "evil-filter.sh" in (aside / "config").read_text()
    assert (aside / "hooks" / "post-index-change").is_file()


def test_move_agent_git_moves_a_linked_git_dir_whole_and_never_follows_it(tmp_path: Path) -> None:
    run_dir = tmp_path / "run"
    (run_dir / "workspace").mkdir(parents=True)
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "config").write_text("host file the agent points at\n")
    os.symlink(outside, run_dir / "workspace" / ".git")
    assert move_agent_git(run_dir) == ["dotgit"]
    assert (outside / "config").read_text() == "host file the agent points at\n"
    assert os.path.islink(run_dir / "agent-git" / "dotgit")
    assert not os.path.lexists(run_dir / "workspace" / ".git")


def test_moving_the_agents_git_twice_keeps_the_agents_config(tmp_path: Path) -> None:
    dot_git = tmp_path / "run" / "workspace" / ".git"
    dot_git.mkdir(parents=True)
    (dot_git / "config").write_text("[alias]\n\tx = !evil\n")
    assert move_agent_git(tmp_path / "run") == ["config"]
    assert move_agent_git(tmp_path / "run") == []
    assert "evil" in (tmp_path / "run" / "agent-git" / "config").read_text()
    assert "evil" not in (dot_git / "config").read_text()


def test_a_grader_that_crashes_is_a_grader_failure_with_its_stderr(toy: Toy, tmp_path: Path) -> None:
    task = prepared_run(toy, tmp_path / "run", "crash_grader")
    outcome = _grade(toy, tmp_path / "run", task)
    assert outcome.grader_failure and outcome.verdict.passed is False
    assert "grade exited 1" in (outcome.verdict.grader_error or "")
    assert "the toy grader exploded" in (outcome.verdict.grader_error or "")
    assert "the toy grader exploded" in (tmp_path / "run" / "grade.stderr").read_text()


def test_a_grader_that_hangs_is_stopped_at_its_timeout_and_leaves_no_container(
    toy: Toy, tmp_path: Path
) -> None:
    task = prepared_run(toy, tmp_path / "run", "hang_grader")
    outcome = _grade(toy, tmp_path / "run", task, timeout=2, grace=1)
    assert outcome.grader_failure and outcome.entry.timed_out
    assert "ran past its timeout of 2 s" in (outcome.verdict.grader_error or "")
    assert container_names(name=outcome.entry.container.name) == []


def test_a_grader_that_writes_invalid_grade_json_is_a_grader_failure_with_the_reason(
    toy: Toy, tmp_path: Path
) -> None:
    task = prepared_run(toy, tmp_path / "run", "invalid_grader")
    outcome = _grade(toy, tmp_path / "run", task)
    assert outcome.grader_failure
    assert "invalid grade.json" in (outcome.verdict.grader_error or "")
    assert "pass" in (outcome.verdict.grader_error or "")


def test_read_grade_refuses_a_missing_file_a_link_and_junk(tmp_path: Path) -> None:
    assert read_grade(tmp_path / "grade.json") == (None, "grade wrote no grade.json")
    (tmp_path / "real.json").write_text("{}")
    os.symlink(tmp_path / "real.json", tmp_path / "grade.json")
    assert "symbolic link" in (read_grade(tmp_path / "grade.json")[1] or "")
    os.unlink(tmp_path / "grade.json")
    (tmp_path / "grade.json").write_text('{"schema": "repo_grade.v1", "schema": "x"}')
    assert "duplicate key" in (read_grade(tmp_path / "grade.json")[1] or "")
    (tmp_path / "grade.json").write_text("not json")
    assert "invalid grade.json" in (read_grade(tmp_path / "grade.json")[1] or "")
    good = {"schema": "repo_grade.v1", "task": "t", "grader": "g", "pass": True}
    (tmp_path / "grade.json").write_text(json.dumps(good))
    grade, error = read_grade(tmp_path / "grade.json")
    assert error is None and grade is not None and grade.pass_ is True


def test_entry_points_are_words_with_placeholders_substituted_once() -> None:
    argv = entry_argv(
        "python3 {eval_dir}/run.py grade --contract {run_dir} --task '{task}'", "grade", task="t1"
    )
    assert argv == ["python3", "/eval/content/run.py", "grade", "--contract", "/eval/run", "--task", "t1"]
    assert entry_argv("x --src {source_dir}", "oracle", task="t")[-1] == "/eval/source"
    assert entry_argv("x {out}", "static", task=None) == ["x", "/eval/run/static.json"]
    from dokimi.errors import UsageError

    with pytest.raises(UsageError, match="source_dir"):
        entry_argv("x {source_dir}", "static", task=None)


def test_source_dir_is_the_sources_git_dir_a_given_clone_or_refused_for_a_blobless_one(
    tmp_path: Path,
) -> None:
    import subprocess

    from dokimi.errors import UsageError
    from dokimi.source import open_source

    work = tmp_path / "repo"
    subprocess.run(["git", "init", "-q", str(work)], check=True)
    (work / "f.txt").write_text("x\n")
    git = ["git", "-C", str(work), "-c", "user.name=t", "-c", "user.email=t@t"]
    subprocess.run([*git, "add", "f.txt"], check=True)
    subprocess.run([*git, "commit", "-q", "-m", "c"], check=True)
    repo = open_source(f"{work}@HEAD")
    assert repo.git_dir is not None
    hint = "run from a local clone"
    assert source_dir_for(repo, ("grade {run_dir}", None), given=None, hint=hint) is None
    assert source_dir_for(repo, ("grade", "oracle {source_dir}"), given=None, hint=hint) == repo.git_dir
    given = tmp_path / "full" / ".." / "full"
    assert source_dir_for(repo, ("x {source_dir}",), given=given, hint=hint) == (tmp_path / "full").resolve()
    blobless = dataclasses.replace(repo, promisor=True)
    with pytest.raises(UsageError, match="full clone") as refused:
        source_dir_for(blobless, ("x {source_dir}",), given=None, hint=hint)
    assert refused.value.hint == hint
    assert (
        source_dir_for(blobless, ("x {source_dir}",), given=given, hint=hint) == (tmp_path / "full").resolve()
    )


def test_the_oracle_runs_in_a_grade_container_and_changes_the_workspace(toy: Toy, tmp_path: Path) -> None:
    run_dir = tmp_path / "run"
    task = prepared_run(toy, run_dir, "fix_add")
    entry = run_entry_point(
        _environment(toy, source_dir=None),
        run_dir,
        task,
        "oracle",
        name=container_name(f"gi{secrets.token_hex(3)}", task.id, "oracle"),
    )
    assert entry.ok, entry.stderr_tail()
    assert "a + b" in (run_dir / "workspace" / "app" / "calc.py").read_text()
    assert _grade(toy, run_dir, task).verdict.passed is True
    assert stat.S_ISREG(os.lstat(run_dir / "oracle.stderr").st_mode)


def test_a_grader_can_read_eval_dir_and_source_dir_but_a_write_to_either_fails(
    toy: Toy, tmp_path: Path
) -> None:
    """{eval_dir} and {source_dir} are read-only mounts: a write fails even where the host's modes allow it
    (both copies here are world-writable), and git reads the source's history as another uid."""
    import shutil

    content = tmp_path / "content"
    shutil.copytree(toy.content, content)
    assert toy.repo.git_dir is not None
    source = tmp_path / "source.git"
    shutil.copytree(toy.repo.git_dir, source)
    for root in (content, source):
        for dirpath, _dirs, _files in os.walk(root):
            os.chmod(dirpath, 0o777)
    run_dir = tmp_path / "run"
    task = prepared_run(toy, run_dir, "fix_add")
    script = (
        "for d in /eval/content /eval/source; do touch $d/written 2>/dev/null && echo wrote-$d; done; "
        "git -C {source_dir} log -1 --format=head=%H; cat {eval_dir}/tools/marker.txt"
    )
    environment = _environment(toy, eval_content=content, source_dir=source)
    environment = dataclasses.replace(
        environment,
        containers=ContainerSettings(toy.image.ref, None, "none"),
        entry_points=EntryPoints(grade=f"sh -c '{script}'", oracle="true"),
    )
    entry = run_entry_point(
        environment,
        run_dir,
        task,
        "grade",
        name=container_name(f"gi{secrets.token_hex(3)}", task.id, "grade"),
    )
    assert entry.ok, entry.stderr_tail()
    assert "wrote-" not in entry.container.stdout
    assert f"head={toy.head}" in entry.container.stdout
    assert "toy tooling" in entry.container.stdout
    assert not (content / "written").exists() and not (source / "written").exists()


def test_the_git_dir_is_reduced_to_objects_refs_head_index_and_dokimis_config(tmp_path: Path) -> None:
    """Attack 2 of issue 9 at the host: .git/commondir names a git dir the agent made, whose config has a
    filter.*.clean command; after the reduction git in the workspace runs nothing of the agent's."""
    import subprocess

    from dokimi.grading.entrypoints import reduce_git_dir

    run_dir = tmp_path / "run"
    ws = run_dir / "workspace"
    ws.mkdir(parents=True)
    subprocess.run(["git", "init", "-q"], cwd=ws, check=True)
    (ws / "a.txt").write_text("x\n")
    subprocess.run(["git", "add", "-A"], cwd=ws, check=True)
    subprocess.run(["git", "commit", "-qm", "base"], cwd=ws, check=True)
    marker = tmp_path / "filter-ran"
    evil = tmp_path / "evil-common"
    subprocess.run(["git", "init", "-q", "--bare", str(evil)], check=True)
    (evil / "config").write_text(
        f'[core]\n\trepositoryformatversion = 0\n[filter "x"]\n\tclean = "touch {marker}; cat"\n'
    )
    dot_git = ws / ".git"
    (dot_git / "commondir").write_text(str(evil) + "\n")
    (dot_git / "info").mkdir(exist_ok=True)
    (dot_git / "info" / "attributes").write_text("* filter=x\n")
    (dot_git / "objects" / "info" / "alternates").write_text(str(evil / "objects") + "\n")
    (dot_git / "worktrees").mkdir()
    (dot_git / "modules").mkdir()
    (dot_git / "gitdir").write_text("/somewhere\n")
    (dot_git / "FETCH_HEAD").write_text("x\n")
    moved = reduce_git_dir(run_dir)
    assert set(moved) >= {
        "commondir", "config", "info", "worktrees", "modules", "gitdir", "objects-info-alternates",
    }  # fmt: skip
    assert sorted(os.listdir(dot_git)) == ["HEAD", "config", "index", "objects", "refs"]
    assert (dot_git / "config").read_text().startswith("# Written by dokimi before grading.")
    (ws / "a.txt").write_text("y\n")
    env = {**os.environ, "GIT_CONFIG_NOSYSTEM": "1", "GIT_ATTR_NOSYSTEM": "1"}
    diff = subprocess.run(
        ["git", "diff", "HEAD"], cwd=ws, capture_output=True, text=True, env=env, check=True
    )
    assert "+y" in diff.stdout and not marker.exists()
    assert reduce_git_dir(run_dir) == []  # a regrade's copy: nothing more to move, dokimi's config kept


def test_a_kept_name_that_is_a_link_is_moved_aside_too(tmp_path: Path) -> None:
    from dokimi.grading.entrypoints import reduce_git_dir

    dot_git = tmp_path / "run" / "workspace" / ".git"
    dot_git.mkdir(parents=True)
    outside = tmp_path / "outside-objects"
    outside.mkdir()
    (dot_git / "objects").symlink_to(outside)
    (dot_git / "HEAD").write_text("ref: refs/heads/main\n")
    assert "objects" in reduce_git_dir(tmp_path / "run")
    assert not os.path.lexists(dot_git / "objects") and outside.is_dir()


FORGER = (
    "for f in task.json answer.txt; do echo FORGED > /eval/run/$f && echo wrote $f; done; "
    "rm -f /eval/run/events.jsonl && echo removed events.jsonl; "
    "echo FORGED > /tmp/m && mv -f /tmp/m /eval/run/meta.json && echo replaced meta.json; "
    "echo '{}' > /eval/run/merge.json; "
    'echo \'{"schema": "repo_grade.v1", "task": "inspect_grader", "grader": "g", "pass": true}\' '
    "> /eval/run/grade.json"
)


def test_dokimis_files_are_read_only_to_the_grader_and_a_planted_one_fails_the_run(
    toy: Toy, tmp_path: Path
) -> None:
    """task.json, answer.txt, events.jsonl and meta.json cannot be written, removed or replaced from the grade
    container; a merge.json dokimi did not write makes the run a grader failure and is removed."""
    run_dir = tmp_path / "run"
    task = prepared_run(toy, run_dir, "inspect_grader")
    before = {
        name: (run_dir / name).read_bytes()
        for name in ("task.json", "answer.txt", "events.jsonl", "meta.json")
    }
    environment = _environment(
        toy, grade_timeout_s=120, entry_points=EntryPoints(grade=f"sh -c '{FORGER}'", oracle="true")
    )
    outcome = grade_run(
        environment, run_dir, task, name=container_name(f"gi{secrets.token_hex(3)}", "e", "grade")
    )
    assert outcome.grader_failure
    assert outcome.verdict.grader_error == (
        "grade changed dokimi's files in the run directory: merge.json was planted (removed)"
    )
    assert {name: (run_dir / name).read_bytes() for name in before} == before
    assert not (run_dir / "merge.json").exists()
    printed = (run_dir / "grade.stdout").read_text()
    assert "wrote" not in printed and "removed" not in printed and "replaced" not in printed
    assert "Read-only file system" in outcome.entry.container.stderr
    ran = json.loads((run_dir / "grade_run.json").read_text())
    assert ran["failure"] == outcome.verdict.grader_error  # --from-files reaches the same verdict
