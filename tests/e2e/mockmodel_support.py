"""What every per-harness scripted run does the same way: build the invocation from the harness's built-in
profile exactly as a cell does, point it at the scripted model server, write its config files and run the
real CLI on the host. What each harness offers and does stays asserted in its own test file."""

from __future__ import annotations

import os
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from dokimi import process
from dokimi.harness.profile import AgentRequest, Invocation, Placement, build_invocation, load_profile
from dokimi.schemas.profile import ToolsLevel
from dokimi.support import support_dir
from dokimi.support.mockmodel import CapturedRequest, MockModelServer
from tests.helpers.git import git_repo

EDIT_THEN_EXIT_3 = "sed -i s/before/after/ f.txt; echo out; exit 3"


def edit_then_exit_3(shell_tool: str) -> list[dict[str, Any]]:
    """A script whose one command, through ``shell_tool``, edits f.txt, prints and exits 3, then answers."""
    return [
        {"tool_use": {"name": shell_tool, "input": {"command": EDIT_THEN_EXIT_3}}},
        {"final": "I changed f.txt."},
    ]


@dataclass(frozen=True)
class ScriptedRun:
    """One run: how the CLI ended, what the scripted server received and played, and the invocation."""

    done: process.Completed
    requests: list[CapturedRequest]
    """Every request the server received, in order."""
    inv: Invocation
    turns_played: int

    @property
    def main(self) -> list[CapturedRequest]:
        """The agent loop's requests (side requests such as a session title left out)."""
        return [r for r in self.requests if r.main_loop]


def workspace(tmp_path: Path, level: str, files: dict[str, str]) -> tuple[Path, Path, Path]:
    """The repository (``tmp_path/repo``, made on first use and shared by the levels) and a fresh config
    directory and home for one tool level."""
    repo = tmp_path / "repo"
    if not repo.exists():
        git_repo(repo, files)
    config, home = tmp_path / f"config-{level}", tmp_path / f"home-{level}"
    config.mkdir()
    home.mkdir()
    return repo, config, home


def run_scripted(
    harness: str,
    script: list[dict[str, Any]],
    *,
    bin: str,
    repo: Path,
    config: Path,
    home: Path | str,
    prompt: str,
    model: str,
    level: str = "all",
    max_turns: int = 5,
    effort: str | None = None,
    launcher: Sequence[str] = (),
    path: str | None = None,
    endpoint_env: bool = False,
    trace: Path | None = None,
    capture_path: Path | None = None,
    timeout: float = 180,
) -> ScriptedRun:
    """Run the harness on ``repo`` against a server playing ``script``, at tool ``level`` (none, read, all,
    or web: level all for a task whose egress names hosts).

    ``bin`` is the executable as the profile places it, ``launcher`` what runs it (a Node, a Python); ``path``
    the PATH the child gets (the caller's by default). The server's URL reaches the harness as the profile's
    ``{endpoint}`` or, with ``endpoint_env``, in its ``endpoint_env`` variable; the dry-run API key in its
    environment."""
    profile = load_profile(harness)
    tools: ToolsLevel = "all" if level == "web" else level  # type: ignore[assignment]
    with MockModelServer(script, capture_path=capture_path) as server:
        extra_env = dict(profile.dry_run_env)
        if endpoint_env:
            assert profile.endpoint_env is not None
            extra_env[profile.endpoint_env] = server.url
        inv = build_invocation(
            profile,
            AgentRequest(
                prompt=prompt, model=model, max_turns=max_turns, budget=1, tools=tools, effort=effort
            ),
            Placement(bin=bin, config_dir=config, support_dir=support_dir(), home=str(home)),
            environ={"PATH": path or os.environ["PATH"]},
            extra_env=extra_env,
            endpoint=None if endpoint_env else server.url,
            web=level == "web",
        )
        inv.write_config_files(config)
        done = process.run(
            [*launcher, *inv.argv], timeout=timeout, env=inv.env, cwd=repo, output=process.Output(file=trace)
        )
        return ScriptedRun(done, server.requests, inv, server.turns_played)
