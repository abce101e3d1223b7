"""The conformance suite every built-in harness profile passes (STYLE.md: one suite over every plugin)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from dokimi.errors import UsageError
from dokimi.harness.profile import (
    PLACEHOLDER_RE,
    TOOLS_ELEMENT,
    AgentRequest,
    Placement,
    build_invocation,
    builtin_profiles,
    load_profile,
    profile_problems,
    version_argv,
)
from dokimi.schemas.profile import HarnessProfile

BUILTINS = builtin_profiles()
NASTY_PROMPT = "fix \"the bug\"; rm -rf / && echo $HOME `id` {model} {tools} {prompt} 'q' \\n\n  two lines"
CALLER_ENV = {
    "PATH": "/host/bin",
    "HOME": "/host/home",
    "ANTHROPIC_API_KEY": "k",
    "OPENAI_API_KEY": "k",
    "GEMINI_API_KEY": "k",
    "AWS_SECRET_ACCESS_KEY": "s",
    "GITHUB_TOKEN": "must-not-pass",
    "SSH_AUTH_SOCK": "/must/not/pass",
}


def test_the_three_vendor_profiles_are_built_in() -> None:
    assert {"claude-code", "codex", "gemini-cli"} <= set(BUILTINS)


@pytest.fixture(params=BUILTINS)
def profile(request: pytest.FixtureRequest) -> HarnessProfile:
    return load_profile(request.param)


def _invoke(profile: HarnessProfile, tools: str = "all", effort: str | None = None) -> list[str]:
    inv = build_invocation(
        profile,
        AgentRequest(NASTY_PROMPT, "m-1", 7, 1.5, tools=tools, effort=effort),  # type: ignore[arg-type]
        Placement("/opt/h/bin", "/eval/run/config", "/eval/support"),
        environ=CALLER_ENV,
    )
    return inv.argv


def test_a_built_in_profile_breaks_no_rule(profile: HarnessProfile) -> None:
    assert profile_problems(profile) == []


def test_tools_appears_exactly_once_as_a_whole_element(profile: HarnessProfile) -> None:
    assert profile.invoke.count(TOOLS_ELEMENT) == 1


@pytest.mark.slow
@pytest.mark.parametrize("tools", ["none", "read", "all"])
def test_each_argv_element_stays_one_argument_and_the_prompt_is_never_resubstituted(
    profile: HarnessProfile, tools: str
) -> None:
    argv = _invoke(profile, tools)
    (template,) = [e for e in profile.invoke if "{prompt}" in e]  # "{prompt}", or "--prompt={prompt}"
    expected_prompt = template.replace("{prompt}", NASTY_PROMPT + (profile.prompt_suffix or ""))
    assert argv.count(expected_prompt) == 1, "the prompt must be one argument, literal braces kept"
    tool_args = [e.replace("{config_dir}", "/eval/run/config") for e in getattr(profile.tools, tools)]
    others = [e for e in profile.invoke if e != TOOLS_ELEMENT]
    assert len(argv) == len(others) + len(tool_args)
    i = profile.invoke.index(TOOLS_ELEMENT)
    assert argv[i : i + len(tool_args)] == tool_args
    assert argv[0] == "/opt/h/bin"
    leftover = [e for e in argv if e != expected_prompt and PLACEHOLDER_RE.search(e)]
    assert leftover == []


def test_the_child_env_holds_only_env_allow_env_set_and_config_dir_env(profile: HarnessProfile) -> None:
    inv = build_invocation(
        profile,
        AgentRequest(prompt="p", model="m", max_turns=1, budget=1, tools="none"),
        Placement(bin="b", config_dir="/cfg", support_dir="/sup"),
        environ=CALLER_ENV,
    )
    allowed = set(profile.env_allow) | set(profile.env_set) | {profile.config_dir_env}
    assert set(inv.env) <= allowed
    assert "GITHUB_TOKEN" not in inv.env and "SSH_AUTH_SOCK" not in inv.env
    if profile.config_dir_env:
        assert inv.env[profile.config_dir_env] == "/cfg"
    for key, value in profile.env_set.items():
        assert inv.env[key] == value


def test_in_a_container_the_hosts_path_and_home_are_dropped(profile: HarnessProfile) -> None:
    inv = build_invocation(
        profile,
        AgentRequest(prompt="p", model="m", max_turns=1, budget=1, tools="all"),
        Placement(bin="b", config_dir="/eval/run/config", support_dir="/eval/support", in_container=True),
        environ=CALLER_ENV,
    )
    assert "PATH" not in inv.env
    # HOME is never the host's: absent (the container's per-run home), or the per-run config dir of a harness
    # whose config dir is its HOME (Aider)
    assert inv.env.get("HOME") == ("/eval/run/config" if profile.config_dir_env == "HOME" else None)


def test_config_files_render_every_placeholder_with_the_agents_paths(profile: HarnessProfile) -> None:
    inv = build_invocation(
        profile,
        AgentRequest(prompt="p", model="m", max_turns=1, budget=1, tools="all"),
        Placement(bin="b", config_dir="/eval/run/config", support_dir="/eval/support"),
        environ={},
    )
    assert set(inv.config_files) == set(profile.config_files)
    for name, text in inv.config_files.items():
        assert "{config_dir}" not in text and "{support_dir}" not in text
        if name.endswith(".json"):
            json.loads(text)


def test_version_cmd_substitutes_only_bin(profile: HarnessProfile) -> None:
    argv = version_argv(profile, "/x/y z")
    assert argv[0] == "/x/y z"
    assert not any(PLACEHOLDER_RE.search(e) for e in argv)


@pytest.mark.slow
def test_every_declared_effort_value_goes_in_after_the_tools(profile: HarnessProfile) -> None:
    if profile.effort is None:
        pytest.raises(UsageError, _invoke, profile, effort="high")
        return
    for value in profile.effort.values or ["x"]:
        argv = _invoke(profile, "read", effort=value)
        i = profile.invoke.index(TOOLS_ELEMENT)
        start = i + len(profile.tools.read)
        assert argv[start : start + len(profile.effort.argv)] == [
            e.replace("{effort}", value) for e in profile.effort.argv
        ]


def test_the_claude_code_hook_names_a_script_that_exists() -> None:
    from dokimi.support import NO_BACKGROUND_HOOK, support_dir

    profile = load_profile("claude-code")
    settings = json.loads(
        build_invocation(
            profile,
            AgentRequest(prompt="p", model="m", max_turns=1, budget=1, tools="all"),
            Placement(bin="b", config_dir="/c", support_dir=str(support_dir())),
            environ={},
        ).config_files["settings.json"]
    )
    command = settings["hooks"]["PreToolUse"][0]["hooks"][0]["command"]
    assert str(Path(support_dir()) / NO_BACKGROUND_HOOK) in command
    assert (Path(support_dir()) / NO_BACKGROUND_HOOK).is_file()


def test_a_file_a_tool_level_names_is_one_of_the_config_files(profile: HarnessProfile) -> None:
    for level in ("none", "read", "all"):
        for element in getattr(profile.tools, level):
            if element.startswith("{config_dir}/"):
                assert element[len("{config_dir}/") :] in profile.config_files, element


def test_a_vendor_profile_can_run_sealed(profile: HarnessProfile) -> None:
    """A sealed real run needs the endpoint variable (pointed at the model gateway) and the credential
    variables (given per-cell dummies) of every profile that reaches a model; each credential variable is one
    the harness may read (env_allow), so a dry run and an unsealed run pass it through too."""
    from dokimi.gateway.sealed import gateway_upstream

    if not (profile.endpoint_env or profile.egress):
        return
    assert profile.endpoint_env and profile.credential_env
    assert set(profile.credential_env) <= set(profile.env_allow)
    if profile.endpoint_default is not None:
        assert gateway_upstream(profile, {}) == profile.endpoint_default
    else:  # a BYOK-only route (copilot): sealed when the caller names the endpoint
        with pytest.raises(UsageError, match="nowhere to forward"):
            gateway_upstream(profile, {})
        assert (
            gateway_upstream(profile, {profile.endpoint_env: "http://byok:4000/v1"}) == "http://byok:4000/v1"
        )


def test_a_sealed_cell_gets_no_credential_endpoint_or_host_proxy_of_the_caller(
    profile: HarnessProfile,
) -> None:
    from dokimi.runner.cell import sealed_environ

    caller = {**CALLER_ENV, "HTTPS_PROXY": "http://corp:3128", "COPILOT_PROVIDER_TYPE": "openai", "LANG": "C"}
    if profile.endpoint_env:
        caller[profile.endpoint_env] = "http://host-only:9"
    passed = sealed_environ(profile, caller)
    assert not set(profile.credential_env) & set(passed)
    assert passed.keys() <= {"PATH", "HOME", "COPILOT_PROVIDER_TYPE", "LANG"}


def test_web_tools_go_on_only_at_level_all_for_a_task_whose_egress_names_hosts(
    profile: HarnessProfile,
) -> None:
    def expanded(tools: str, web: bool) -> list[str]:
        return build_invocation(
            profile,
            AgentRequest(prompt="p", model="m", max_turns=1, budget=1, tools=tools),  # type: ignore[arg-type]
            Placement(bin="b", config_dir="/c", support_dir="/s"),
            environ={},
            web=web,
        ).argv

    assert expanded("read", True) == expanded("read", False)
    assert expanded("none", True) == expanded("none", False)
    if profile.tools.web is None:
        assert expanded("all", True) == expanded("all", False)
    else:
        assert expanded("all", True) != expanded("all", False)
