"""The isolation probe and the agent's container (contract §1.1, §4.3, §9): each rule, with a container that
breaks it."""

from __future__ import annotations

import dataclasses
import secrets
from pathlib import Path, PurePosixPath

import pytest

from dokimi.sandbox.container import ContainerSpec, Mount, container_name, run_container
from dokimi.sandbox.probe import isolation_probe, parse_probe_output
from dokimi.sandbox.specs import ContainerSettings, agent_spec
from tests.sandbox.conftest import SANDBOX_TASKS, Toy, prepared_run

pytestmark = pytest.mark.docker

TASK_IDS = sorted(SANDBOX_TASKS)


def _agent(toy: Toy, run_dir: Path, *, network: str = "none") -> ContainerSpec:
    prepared_run(toy, run_dir, "fix_add")
    return agent_spec(
        ContainerSettings(toy.image.ref, toy.loaded.manifest.image if toy.loaded.manifest else None, network),
        name=container_name(f"probe{secrets.token_hex(3)}", "fix_add", "agent"),
        run_dir=run_dir,
        argv=["true"],
        task="fix_add",
    )


def test_the_agents_container_passes_the_probe(toy: Toy, tmp_path: Path) -> None:
    result = isolation_probe(_agent(toy, tmp_path / "run"), task_ids=TASK_IDS, expect_no_network=True)
    assert result.ok, result.problems
    assert result.interfaces == ("lo",)
    assert result.uid is not None and result.uid != 0


def test_an_agent_container_cannot_read_the_eval_dir_the_source_or_the_network(
    toy: Toy, tmp_path: Path
) -> None:
    spec = _agent(toy, tmp_path / "run")
    script = (
        "cat /eval/content/grade.py || echo no-eval-dir; ls /eval/source || echo no-source; "
        "ls /eval/run; "
        "python3 -c 'import socket; socket.create_connection((\"1.1.1.1\", 443), 2)' || echo no-network"
    )
    result = run_container(dataclasses.replace(spec, argv=["sh", "-c", script]), timeout=60)
    assert "no-eval-dir" in result.stdout and "no-source" in result.stdout and "no-network" in result.stdout
    # the run directory holds only what the agent may use; grade.json, meta.json, task.json are not there
    listed = set(result.stdout.split())
    assert {"workspace", "home", "config"} <= listed
    assert not listed & {"meta.json", "task.json", "grade.json", "grade-home", "agent-git"}


def test_a_container_that_sees_the_eval_dir_fails_the_probe(toy: Toy, tmp_path: Path) -> None:
    spec = _agent(toy, tmp_path / "run")
    leaky = dataclasses.replace(
        spec, mounts=[*spec.mounts, Mount(toy.content, PurePosixPath("/eval/content"), read_only=True)]
    )
    result = isolation_probe(leaky, task_ids=TASK_IDS, expect_no_network=True)
    assert not result.ok
    assert result.visible == ("/eval/content",)
    # the eval dir holds the tasks, so their names are reachable too
    assert "/eval/content/tasks/fix_add" in result.task_entries


def test_an_entry_named_like_a_task_fails_the_probe(toy: Toy, tmp_path: Path) -> None:
    spec = _agent(toy, tmp_path / "run")
    (tmp_path / "run" / "workspace" / "review_recall").write_text("a leaked gold answer\n")
    result = isolation_probe(spec, task_ids=TASK_IDS, expect_no_network=True)
    assert result.task_entries == ("/eval/run/workspace/review_recall",)
    assert any("named like a task" in problem for problem in result.problems)


def test_a_guidance_file_above_the_workspace_fails_the_probe(toy: Toy, tmp_path: Path) -> None:
    spec = _agent(toy, tmp_path / "run")
    stray = tmp_path / "AGENTS.md"
    stray.write_text("# guidance the agent would load from an ancestor\n")
    above = dataclasses.replace(spec, mounts=[*spec.mounts, Mount(stray, PurePosixPath("/eval/AGENTS.md"))])
    result = isolation_probe(above, task_ids=TASK_IDS, expect_no_network=True)
    assert result.guidance_above == ("/eval/AGENTS.md",)
    assert not result.ok


def test_a_network_fails_the_probe_of_a_run_without_one(toy: Toy, tmp_path: Path) -> None:
    spec = _agent(toy, tmp_path / "run", network="bridge")
    result = isolation_probe(spec, task_ids=TASK_IDS, expect_no_network=True)
    assert any("should have no network" in problem for problem in result.problems)
    assert isolation_probe(spec, task_ids=TASK_IDS, expect_no_network=False).ok


def test_a_probe_that_does_not_finish_is_a_problem() -> None:
    result = parse_probe_output("uid 1000\n", expect_no_network=True, returncode=137, stderr="Killed")
    assert not result.ok and "did not finish" in (result.error or "")
    assert any(
        "runs as root" in p
        for p in parse_probe_output("uid 0\nprobe-done\n", expect_no_network=False, returncode=0).problems
    )


def test_the_agents_home_is_its_per_run_directory_and_caches_are_writable(toy: Toy, tmp_path: Path) -> None:
    from dokimi.sandbox.container import give_to_container_user
    from dokimi.sandbox.specs import CacheMount

    run_dir = tmp_path / "run"
    prepared_run(toy, run_dir, "fix_add")
    cache = tmp_path / "cache"
    cache.mkdir()
    give_to_container_user(cache)
    script = 'echo "home=$HOME cwd=$(pwd) scratch=$TOY_SCRATCH"; touch "$HOME/h" /cache/c/f "$TOY_SCRATCH/s"'
    settings = ContainerSettings(
        toy.image.ref,
        toy.loaded.manifest.image if toy.loaded.manifest else None,
        "none",
        (CacheMount("c", cache, PurePosixPath("/cache/c")),),
    )
    spec = agent_spec(
        settings,
        name=container_name(f"probe{secrets.token_hex(3)}", "fix_add", "agent"),
        run_dir=run_dir,
        argv=["sh", "-c", script],
        task="fix_add",
    )
    result = run_container(spec, timeout=60)
    assert result.ok, result.stderr
    assert "home=/eval/run/home cwd=/eval/run/workspace scratch=/eval/run/scratch" in result.stdout
    assert (run_dir / "home" / "h").is_file()  # HOME is the run's own directory, not the container layer
    assert (cache / "f").is_file() and (run_dir / "scratch" / "s").is_file()
