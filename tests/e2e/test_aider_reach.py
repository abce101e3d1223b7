"""What guidance the real Aider 0.86.2 puts in front of its model, from captured requests with planted tokens.
Pins docs/reach.md for Aider: it loads no guidance file by itself (repo reach --dry-run, every scenario), and
only a file a .aider.conf.yml names with ``read:`` reaches the model, which is how the profile's bridge makes
AGENTS.md reach it."""

from __future__ import annotations

from pathlib import Path

import pytest

from dokimi.harness.profile import load_profile
from dokimi.harness.runtime import host_launcher
from tests.e2e.mockmodel_support import run_scripted
from tests.e2e.reach_support import run_reach, trace_events
from tests.helpers.git import git_repo

pytestmark = pytest.mark.harness

FIXTURE = {
    "AGENTS.md": "# root\n",
    "CLAUDE.md": "claude\n",
    "CONVENTIONS.md": "conventions\n",
    "sub/AGENTS.md": "sub\n",
    "other/CONVENTIONS.md": "other conventions\n",
}


def test_aider_loads_no_guidance_file_by_itself(aider_bin: Path, tmp_path: Path) -> None:
    out = tmp_path / "out"
    doc = run_reach(tmp_path, FIXTURE, harness="aider", model="gpt-5-mini", bin=aider_bin, timeout=240)
    assert {s.name for s in doc.scenarios} == {
        "cwd=.", "cwd=other", "cwd=sub", "read=.", "read=other", "read=sub"
    }  # fmt: skip
    assert {r.file for r in doc.records} == set(FIXTURE)
    for record in doc.records:
        assert record.payload is not None and not (record.payload.head or record.payload.tail), record
        assert record.class_.value == "not_loaded"
    # read=other: the prompt named the probe file, so Aider put it in the chat (its way of reading) and the
    # probe's own token reached the model; other/CONVENTIONS.md beside it did not
    events = trace_events(out, "read_other")
    assert '"kind": "read"' in events and "other/REACH_PROBE.txt" in events


def tokens_sent(aider: Path, tmp_path: Path, files: dict[str, str]) -> set[str]:
    """Plant a token in each file, run Aider through the profile (tools none) and return the files whose
    token was in the request."""
    planted = {name: f"RC-{i:08d}-PLANTED" for i, name in enumerate(FIXTURE)}
    repo = git_repo(tmp_path / "repo", {**{n: f"{t}\n{FIXTURE[n]}" for n, t in planted.items()}, **files})
    config = tmp_path / "config"
    config.mkdir()
    launcher = host_launcher(aider)
    run = run_scripted(
        "aider", [{"echo_tokens": True}], bin=launcher[-1], repo=repo, config=config, home=tmp_path / "h",
        prompt="List every token you were given.", model="gpt-5-mini", level="none", max_turns=1,
        launcher=launcher[:-1], endpoint_env=True, timeout=300,
    )  # fmt: skip
    assert run.done.returncode == 0, run.done.stderr
    bodies = b"".join(r.raw for r in run.main)
    return {name for name, token in planted.items() if token.encode() in bodies}


def test_only_a_file_a_aider_conf_yml_names_with_read_reaches_the_model(
    aider_bin: Path, tmp_path: Path
) -> None:
    assert tokens_sent(aider_bin, tmp_path / "plain", {}) == set()
    named = {".aider.conf.yml": "read: CONVENTIONS.md\n"}
    assert tokens_sent(aider_bin, tmp_path / "named", named) == {"CONVENTIONS.md"}


def test_the_bridge_a_aider_conf_yml_beside_agents_md_puts_agents_md_in_the_request(
    aider_bin: Path, tmp_path: Path
) -> None:
    bridge = load_profile("aider").bridge
    assert bridge is not None and (bridge.for_, bridge.write) == ("AGENTS.md", ".aider.conf.yml")
    files = {f"{d}{bridge.write}": bridge.content for d in ("", "sub/")}  # as guidance:bridge writes
    assert tokens_sent(aider_bin, tmp_path, files) == {"AGENTS.md"}  # started at the root: the root's one
