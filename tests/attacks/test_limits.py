"""The caps from image.limits on the real daemon: a workspace grown past workspace_mb is not graded (a grader
failure with the reason), and the container ran with the manifest's --memory and --pids-limit."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from dokimi.batch import cell_dir
from tests.attacks.conftest import attacker, dokimi
from tests.helpers.git import commit
from tests.helpers.runs import MANIFEST, tiny_repo

pytestmark = pytest.mark.docker

LIMITS = "image:\n  limits: {memory: 256m, pids: 128, workspace_mb: 1}\n"


def test_a_workspace_past_its_cap_is_a_grader_failure_and_the_caps_reach_the_container(
    docker_available: bool, tmp_path: Path, batch_name: str
) -> None:
    tiny = tiny_repo(tmp_path / "tiny")
    manifest = MANIFEST.replace("image:\n", LIMITS, 1)
    rev = commit(tiny.path, "limits", files={".agent-eval/repo-eval.yaml": manifest})
    body = (
        "{ cat /sys/fs/cgroup/memory.max || cat /sys/fs/cgroup/memory/memory.limit_in_bytes; } > limits.txt\n"
        "{ cat /sys/fs/cgroup/pids.max || cat /sys/fs/cgroup/pids/pids.max; } >> limits.txt\n"
        "head -c 3000000 /dev/zero > big.bin"
    )
    who = attacker(tmp_path / "agent", body)
    out = tmp_path / "out"
    args = [
        "repo", "run", f"{tiny.path}@{rev}", "--manifest", ".agent-eval/repo-eval.yaml",
        "--arm", "guidance:raw", "--model", "m", "--reps", "1", "--batch", batch_name, "--out", str(out),
        "--harness", str(who.profile), "--bin", str(who.binary), "--agent-network", "none", "--json",
        "--allow-unchecked",
    ]  # fmt: skip
    proc = dokimi(args)
    assert proc.returncode in (0, 1), proc.stderr
    run_dir = cell_dir(out / batch_name, "fix_f", "guidance:raw", "m", None, 0)
    result = json.loads((run_dir / "result.json").read_text())
    assert result["grader_failure"] is True and "workspace grew past" in result["grader_error"]
    assert result["passed"] is False
    limits = (run_dir / "workspace" / "limits.txt").read_text().split()
    assert limits == [str(256 * 1024 * 1024), "128"]
