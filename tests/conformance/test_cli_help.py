"""Every flag of every built-in profile exists in its pinned CLI's own ``--help`` (and every Codex feature the
profile switches off exists in ``codex features list``).

A flag is any argv element of ``invoke``, the judge's ``judge.invoke``, the tool levels and the effort that
starts with ``-`` (``--name=value`` is checked as ``--name``). The help is the pinned CLI's, installed by
scripts/install-harness.sh; the subcommand (``codex exec``) is the literal elements that follow ``{bin}``.
"""

from __future__ import annotations

import os
import re
import subprocess
from pathlib import Path

import pytest

from dokimi.harness.profile import TOOLS_ELEMENT, builtin_profiles, load_profile
from dokimi.harness.runtime import host_launcher, is_node_script
from dokimi.schemas.profile import HarnessProfile

pytestmark = pytest.mark.harness


HIDDEN_BUT_ENFORCED = {"claude-code": {"--max-turns"}}
"""Flags a pinned CLI accepts without listing them in --help; each has a test below that proves it works."""


def profile_flags(profile: HarnessProfile) -> list[str]:
    elements = [e for e in profile.invoke if e != TOOLS_ELEMENT]
    if profile.judge is not None:
        elements += [e for e in profile.judge.invoke if e != TOOLS_ELEMENT]
    elements += [*profile.tools.none, *profile.tools.read, *profile.tools.all, *(profile.tools.web or [])]
    if profile.effort is not None:
        elements += profile.effort.argv
    flags = {e.split("=", 1)[0] for e in elements if e.startswith("-") and e not in ("--", "-")}
    return sorted(flags)


def subcommand(profile: HarnessProfile) -> list[str]:
    words = []
    for element in profile.invoke[1:]:
        if element.startswith("-") or "{" in element:
            break
        words.append(element)
    return words


def in_help(flag: str, help_text: str) -> bool:
    return re.search(rf"(?<![\w-]){re.escape(flag)}(?![\w-])", help_text) is not None


def help_argv(name: str, request: pytest.FixtureRequest) -> list[str]:
    """The pinned CLI started as dokimi starts it on the host: a Python launcher on python3.11, a Node script
    on the pinned Node (never the host's), a binary as it is."""
    binary = Path(request.getfixturevalue("pinned_harness")(name)).resolve()
    node = request.getfixturevalue("node_bin") if is_node_script(binary) else None
    return host_launcher(binary, node)


def run(argv: list[str]) -> str:
    env = {
        "PATH": os.environ.get("PATH", os.defpath),
        "HOME": os.environ.get("HOME", "/tmp"),
        "NO_COLOR": "1",
    }
    done = subprocess.run(
        argv, capture_output=True, text=True, timeout=120, env=env, stdin=subprocess.DEVNULL
    )
    return done.stdout + done.stderr


@pytest.mark.parametrize("name", builtin_profiles())
def test_every_flag_of_the_profile_is_in_its_pinned_clis_help(
    name: str, request: pytest.FixtureRequest
) -> None:
    profile = load_profile(name)
    assert profile.verification is not None, f"{name}: a built-in profile names its pinned version"
    base = help_argv(name, request)
    version = run([*base, "--version"])
    assert profile.verification.version in version, f"{name}: the installed CLI is not the pinned version"
    help_text = run([*base, *subcommand(profile), "--help"])
    hidden = HIDDEN_BUT_ENFORCED.get(name, set())
    missing = [flag for flag in profile_flags(profile) if not in_help(flag, help_text) and flag not in hidden]
    assert missing == [], f"{name} {profile.verification.version}: flags not in --help: {missing}"


def test_every_codex_feature_the_profile_disables_exists(codex_bin: Path, tmp_path: Path) -> None:
    profile = load_profile("codex")
    argv = [*profile.tools.none, *profile.tools.read, *profile.tools.all]
    disabled = {argv[i + 1] for i, e in enumerate(argv) if e == "--disable"}
    env = {"PATH": os.environ["PATH"], "HOME": str(tmp_path), "CODEX_HOME": str(tmp_path)}
    listed = subprocess.run(
        [str(codex_bin), "features", "list"], capture_output=True, text=True, timeout=60, env=env, check=True
    ).stdout
    known = {line.split()[0] for line in listed.splitlines() if line.strip()}
    assert disabled and disabled <= known, sorted(disabled - known)


def test_a_flag_that_is_not_in_the_help_is_caught() -> None:
    assert in_help("--json", "      --json\n          Print events")
    assert not in_help("--jso", "      --json\n")
    assert not in_help("--sandbox", "--sandbox-mode x")
    assert profile_flags(load_profile("codex"))[:2] == [
        "--color",
        "--dangerously-bypass-approvals-and-sandbox",
    ]


def test_claude_codes_hidden_max_turns_flag_stops_the_run(claude_bin: Path) -> None:
    """2.1.328 does not list --max-turns in --help, but enforces it: the run ends with error_max_turns."""
    from dokimi.support.mockmodel import MockModelServer
    from tests.helpers.harness import MODEL, as_harness_user, harness_dir, nonroot_binary

    script = [
        {"tool_use": {"name": "Bash", "input": {"command": "echo 1"}}},
        {"tool_use": {"name": "Bash", "input": {"command": "echo 2"}}},
        {"final": "x"},
    ]
    with harness_dir() as root, MockModelServer(script) as server:
        home = root / "home"
        home.mkdir()
        if os.geteuid() == 0:
            os.chown(home, 1000, 1000)
        env = {
            "PATH": "/usr/bin:/bin",
            "HOME": str(home),
            "ANTHROPIC_BASE_URL": server.url,
            "ANTHROPIC_API_KEY": "x",
            "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC": "1",
        }
        argv = [str(nonroot_binary(claude_bin)), "-p", "hi", "--output-format", "stream-json", "--verbose"]
        argv += ["--max-turns", "1", "--permission-mode", "bypassPermissions", "--model", MODEL]
        done = subprocess.run(
            as_harness_user(argv), env=env, cwd=root, capture_output=True, text=True, timeout=120, check=False
        )
        played = server.turns_played
    assert played == 1
    assert '"subtype":"error_max_turns"' in done.stdout.replace(" ", "")
