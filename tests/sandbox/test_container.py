"""One container run (contract §2, §9): the fixed options, the network, the environment, the timeout."""

from __future__ import annotations

import os
import secrets
import subprocess
from pathlib import Path, PurePosixPath

import pytest

from dokimi.errors import ContainerError
from dokimi.sandbox.container import (
    ContainerSpec,
    Mount,
    container_name,
    container_user,
    docker_run_argv,
    run_container,
)
from dokimi.sandbox.docker import container_names
from tests.sandbox.conftest import Toy

pytestmark = pytest.mark.docker


def _name(role: str) -> str:
    return container_name(f"test{secrets.token_hex(3)}", "cell", role)


def _leftovers(name: str) -> str:
    return subprocess.run(
        ["docker", "ps", "-a", "--filter", f"name={name}", "--format", "{{.Names}}"],
        capture_output=True,
        text=True,
        check=True,
    ).stdout.strip()


def test_the_name_is_dokimi_batch_cell_role_with_unsafe_characters_replaced() -> None:
    assert container_name("pilot", "fix/a:b", "agent") == "dokimi-pilot-fix_a_b-agent"
    long = container_name("b", "x" * 400, "grade")
    assert len(long) <= 200 and long.endswith("-grade")
    assert long != container_name("b", "x" * 401, "grade")


def test_every_container_gets_init_no_entrypoint_no_capabilities_and_a_pids_limit() -> None:
    argv = docker_run_argv(ContainerSpec(name="n", image="img", argv=["cmd"], batch="b1"), env_file=None)
    joined = " ".join(argv)
    for expected in (
        "--init",
        "--entrypoint  ",
        "--security-opt no-new-privileges",
        "--cap-drop ALL",
        "--pids-limit 4096",
        "--network none",
        "--label dokimi.batch=b1",
        f"--user {container_user()}",
    ):
        assert expected in joined + " ", expected
    assert argv[-2:] == ["img", "cmd"]


def test_a_container_runs_non_root_with_no_capabilities_and_init_as_pid_1(toy: Toy) -> None:
    script = "id -u; grep -E '^(CapEff|NoNewPrivs):' /proc/self/status; tr '\\0' ' ' < /proc/1/cmdline"
    result = run_container(
        ContainerSpec(name=_name("caps"), image=toy.image.ref, argv=["sh", "-c", script]), timeout=60
    )
    assert result.ok, result.stderr
    lines = result.stdout.splitlines()
    assert lines[0] == container_user().split(":")[0]
    if os.geteuid() == 0:
        assert lines[0] != "0"
    assert "CapEff:\t0000000000000000" in result.stdout
    assert "NoNewPrivs:\t1" in result.stdout
    assert "init" in lines[-1]  # docker-init (tini) is PID 1, not the command


def test_the_images_entrypoint_never_runs(toy: Toy) -> None:
    # the toy image's ENTRYPOINT is /bin/false: with it, every command would fail
    result = run_container(
        ContainerSpec(name=_name("ep"), image=toy.image.ref, argv=["echo", "ran"]), timeout=60
    )
    assert result.ok and result.stdout.strip() == "ran"


def test_network_none_leaves_only_the_loopback_interface(toy: Toy) -> None:
    script = "ls /sys/class/net; python3 -c 'import socket; socket.create_connection((\"1.1.1.1\", 53), 2)'"
    result = run_container(
        ContainerSpec(name=_name("net"), image=toy.image.ref, argv=["sh", "-c", script]), timeout=60
    )
    assert result.stdout.split() == ["lo"]
    assert result.returncode != 0
    assert "unreachable" in result.stderr.lower()


def test_environment_values_travel_in_a_file_never_in_the_argv(toy: Toy) -> None:
    secret = "s3cret-" + secrets.token_hex(4)
    spec = ContainerSpec(
        name=_name("env"), image=toy.image.ref, argv=["sh", "-c", "echo $TOKEN"], env={"TOKEN": secret}
    )
    result = run_container(spec, timeout=60)
    assert result.stdout.strip() == secret
    assert not any(secret in arg for arg in result.argv)


def test_a_read_only_mount_refuses_writes_and_a_read_write_one_takes_them(toy: Toy, tmp_path: Path) -> None:
    (tmp_path / "ro").mkdir()
    (tmp_path / "rw").mkdir(mode=0o777)
    os.chmod(tmp_path / "rw", 0o777)
    spec = ContainerSpec(
        name=_name("mnt"),
        image=toy.image.ref,
        argv=["sh", "-c", "touch /ro/x 2>&1; touch /rw/y && echo wrote"],
        mounts=[
            Mount(tmp_path / "ro", PurePosixPath("/ro"), read_only=True),
            Mount(tmp_path / "rw", PurePosixPath("/rw")),
        ],
    )
    result = run_container(spec, timeout=60)
    assert "Read-only file system" in result.stdout
    assert "wrote" in result.stdout
    assert not (tmp_path / "ro" / "x").exists() and (tmp_path / "rw" / "y").exists()


def test_a_container_stopped_at_its_timeout_leaves_no_container_behind(toy: Toy) -> None:
    name = _name("timeout")
    result = run_container(
        ContainerSpec(name=name, image=toy.image.ref, argv=["sleep", "300"]), timeout=1.5, kill_grace_s=5
    )
    assert result.timed_out and result.returncode is None
    assert _leftovers(name) == ""


def test_a_container_that_ignores_sigterm_is_killed_by_name_and_removed(toy: Toy) -> None:
    name = _name("stubborn")
    script = "trap '' TERM; while :; do sleep 1; done"
    result = run_container(
        ContainerSpec(name=name, image=toy.image.ref, argv=["sh", "-c", script]), timeout=1.5, kill_grace_s=1
    )
    assert result.timed_out
    assert _leftovers(name) == ""
    assert name not in container_names(name=name)


def test_docker_failing_to_start_the_container_is_a_container_error(toy: Toy, tmp_path: Path) -> None:
    spec = ContainerSpec(
        name=_name("bad"),
        image=toy.image.ref,
        argv=["true"],
        mounts=[Mount(tmp_path / "does-not-exist", PurePosixPath("/x"))],
    )
    with pytest.raises(ContainerError, match="could not run container"):
        run_container(spec, timeout=60)


def test_a_command_failing_is_data_not_an_error(toy: Toy) -> None:
    result = run_container(
        ContainerSpec(name=_name("rc"), image=toy.image.ref, argv=["sh", "-c", "echo oops >&2; exit 7"]),
        timeout=60,
    )
    assert result.returncode == 7 and result.stderr.strip() == "oops" and not result.ok


#: A library caller that installed dokimi's signal handlers runs two containers in a worker thread, as tasks
#: check and repo run do; the first ignores SIGTERM. The main thread waits, then ends with the signal.
SIGNAL_SCRIPT = r"""
import sys
from concurrent.futures import ThreadPoolExecutor
from dokimi import process
from dokimi.errors import ContainerError
from dokimi.sandbox.container import ContainerSpec, run_container

image, first, second = sys.argv[1:4]
process.install_signal_handlers()

def work():
    stubborn = "trap '' TERM; echo started; while :; do sleep 1; done"
    run_container(ContainerSpec(name=first, image=image, argv=["sh", "-c", stubborn]), timeout=120)
    try:
        run_container(ContainerSpec(name=second, image=image, argv=["sleep", "300"]), timeout=120)
        print("second ran", flush=True)
    except ContainerError as exc:
        print("second refused:", exc.message, flush=True)

pool = ThreadPoolExecutor(max_workers=1)
try:
    pool.submit(work).result()
except process.Terminated as exc:
    pool.shutdown(wait=True)
    process.exit_with_signal(exc.signum)
"""


def _wait_for_container(name: str, seconds: float = 60) -> None:
    import time

    deadline = time.monotonic() + seconds
    status = ["docker", "ps", "--filter", f"name={name}", "--format", "{{.Status}}"]
    while "Up" not in subprocess.run(status, capture_output=True, text=True, check=True).stdout:
        assert time.monotonic() < deadline, f"{name} never started"
        time.sleep(0.2)


def test_sigterm_to_dokimi_removes_a_workers_container_and_starts_no_new_one(toy: Toy) -> None:
    import signal
    import sys

    first, second = _name("first"), _name("second")
    proc = subprocess.Popen(
        [sys.executable, "-c", SIGNAL_SCRIPT, toy.image.ref, first, second],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        _wait_for_container(first)
        proc.send_signal(signal.SIGTERM)
        out, err = proc.communicate(timeout=100)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == -signal.SIGTERM, err
    assert "second refused" in out and "second ran" not in out, out + err
    assert _leftovers(first) == "" and _leftovers(second) == ""


def test_two_removals_of_one_container_at_once_both_succeed(toy: Toy) -> None:
    """A worker removing its container while a Ctrl-C cleanup removes the batch's: docker answers the second
    `rm -f` with "removal ... is already in progress", which is not an error."""
    from concurrent.futures import ThreadPoolExecutor

    from dokimi.sandbox.docker import remove_container

    for _ in range(3):
        name = _name("race")
        subprocess.run(
            ["docker", "run", "-d", "--rm", "--name", name, toy.image.ref, "sleep", "300"],
            capture_output=True,
            check=True,
        )
        with ThreadPoolExecutor(max_workers=2) as pool:
            futures = [pool.submit(remove_container, name) for _ in range(2)]
            for future in futures:
                future.result()
        assert _leftovers(name) == ""
