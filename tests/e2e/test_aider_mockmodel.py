"""The real Aider (0.86.2) through the built-in aider profile against the scripted model server on the host:
the endpoint reaches it through OPENAI_API_BASE (Chat Completions), each tool level does what the profile
says (none and read: edits shown, never written; all: written; web: a URL in the prompt is fetched), a file a
reply names is added to the chat before Aider asks again, nothing of Aider's lands in the workspace (its repo
map's cache included), and the trace converts. In the agent container Aider runs on the image's python3.11: an
image without one is refused before any cell, saying so."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path
from typing import Any

import pytest

from dokimi.harness.profile import load_profile
from dokimi.harness.runtime import host_launcher
from dokimi.harness.traces import convert_file
from tests.e2e.mockmodel_support import run_scripted
from tests.helpers.git import git_repo
from tests.helpers.harness import pinned_version

pytestmark = pytest.mark.harness
MODEL = "gpt-5-mini"
EDIT = (
    "Done: the file now says after.\n\n"
    "f.txt\n```\n<<<<<<< SEARCH\nbefore-7f3a\n=======\nafter\n>>>>>>> REPLACE\n```\n\n"
    "sub/new.txt\n```\n<<<<<<< SEARCH\n=======\nnew\n>>>>>>> REPLACE\n```\n"
)
SCRIPT = [{"text": "I need to read f.txt first."}, {"final": EDIT}]
PROMPT = "Fix the file that says before."


def run_aider(aider: Path, tmp_path: Path, level: str, prompt: str = PROMPT) -> Any:
    repo = git_repo(tmp_path / f"repo-{level}", {"f.txt": "before-7f3a\n"})
    config = tmp_path / f"config-{level}"
    config.mkdir()
    launcher = host_launcher(aider)
    trace = tmp_path / f"trace-{level}.txt"
    run = run_scripted(
        "aider", SCRIPT, bin=launcher[-1], repo=repo, config=config, home=tmp_path / "h", prompt=prompt,
        model=MODEL, level=level, launcher=launcher[:-1], endpoint_env=True, trace=trace, timeout=300,
    )  # fmt: skip
    assert run.inv.env["HOME"] == str(config) and run.inv.env["LITELLM_LOCAL_MODEL_COST_MAP"] == "True"
    done, main = run.done, run.main
    status = subprocess.run(
        ["git", "status", "--short", "--untracked-files=all"], cwd=repo, capture_output=True, text=True
    ).stdout
    return done, main, trace, repo, status, config


def test_tool_levels_the_named_file_the_workspace_and_the_trace(aider_bin: Path, tmp_path: Path) -> None:
    done, main, trace, repo, status, config = run_aider(aider_bin, tmp_path, "all")
    assert done.returncode == 0, done.stderr
    assert len(main) == 2 and all(r.path.endswith("/chat/completions") for r in main)
    assert main[0].body["model"] == MODEL and "tools" not in main[0].body  # Aider offers the model no tools
    # the file's content reaches the model only once the reply named it
    assert "before-7f3a" not in str(main[0].body["messages"]) and "before-7f3a" in str(
        main[1].body["messages"]
    )
    assert (repo / "f.txt").read_text() == "after\n" and (repo / "sub/new.txt").read_text() == "new\n"
    # nothing of Aider's in the workspace (histories, caches, .gitignore): only the edits
    assert sorted(status.splitlines()) == [" M f.txt", "AM sub/new.txt"]  # Aider stages a new file
    assert {"aider.chat.history.md", "aider.llm.history", ".aider"} <= {p.name for p in config.iterdir()}
    assert (config / ".aider" / "tags.cache.v4").is_dir()  # the repo map's cache: the launcher moved it here
    assert "f.txt" in str(main[0].body["messages"])  # the repo map names the repository's files
    text = trace.read_text()
    assert "raw.githubusercontent" not in text and "HTTPSConnectionPool" not in text  # no price-list fetch
    conv = convert_file(trace, "aider-text")
    pairs = [(e["kind"], e["path"]) for e in conv.events]
    assert pairs[0] == ("read", "f.txt")  # Aider reports its edits in no fixed order
    assert sorted(pairs[1:]) == [("edit", "f.txt"), ("edit", "sub/new.txt")]
    assert conv.answer.startswith("Done: the file now says after.") and conv.turns == 2
    assert conv.complete and not conv.is_error

    for level in ("none", "read"):
        done, main, trace, repo, status, _ = run_aider(aider_bin, tmp_path, level)
        assert done.returncode == 0, done.stderr
        assert len(main) == 2  # the named file is still added: Aider reads by naming at every level
        assert (repo / "f.txt").read_text() == "before-7f3a\n" and status == ""  # --dry-run: nothing written

    url = "http://127.0.0.1:9/dokimi-page"  # nothing listens: fetching it fails, offline
    for level, fetched in (("all", False), ("web", True)):
        done, _, trace, *_ = run_aider(aider_bin, tmp_path / level, level, prompt=f"Read {url} then fix it.")
        assert done.returncode == 0, done.stderr
        assert (f"Scraping {url}" in trace.read_text()) is fetched, level


@pytest.mark.docker
def test_an_image_without_python311_cannot_run_aider_and_the_error_says_so(
    docker_available: bool, aider_bin: Path, tmp_path: Path
) -> None:
    from dokimi.errors import PrerequisiteError
    from dokimi.sandbox.harness_version import harness_version_in_image

    tag = f"dokimi/test-no-python311:{os.getpid()}"
    dockerfile = b"FROM dokimi-base:bookworm\nRUN rm /usr/bin/python3.11\n"
    subprocess.run(
        ["docker", "build", "-q", "-t", tag, "-"], input=dockerfile, check=True, capture_output=True
    )
    try:
        profile = load_profile("aider")
        with pytest.raises(PrerequisiteError) as err:
            harness_version_in_image(
                profile, image=tag, harness_bin=aider_bin, batch="aidernopy", scratch=tmp_path
            )
        assert "does not report a version inside image" in err.value.message
        assert err.value.hint is not None and "the image's own python3.11" in err.value.hint
        version = harness_version_in_image(
            profile, image="dokimi-base:bookworm", harness_bin=aider_bin, batch="aiderpy", scratch=tmp_path
        )
        assert version == pinned_version("aider")  # Debian bookworm's python3 is a python3.11
    finally:
        subprocess.run(["docker", "rmi", "-f", tag], capture_output=True, check=False)
