"""Harness profiles: loading, each rule of contract §6 as its own test, substitution, env, binaries."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from dokimi.errors import DocumentError, PrerequisiteError, UsageError
from dokimi.harness.profile import (
    AgentRequest,
    Placement,
    build_invocation,
    build_judge_invocation,
    load_profile,
    resolve_bin,
    substitute,
)
from tests.helpers.git import git_repo

ROOT = Path(__file__).resolve().parents[2]

GOOD = """\
schema: harness_profile.v1
name: fake
bin: fake-harness
version_cmd: ["{bin}", "--version"]
invoke: ["{bin}", "-p", "{prompt}", "--model", "{model}", "--turns", "{max_turns}", "--usd", "{budget}",
         "{tools}"]
tools:
  none: ["--tools", ""]
  read: ["--tools", "Read"]
  all: []
config_dir_env: FAKE_CONFIG
env_allow: [PATH, HOME, FAKE_KEY]
env_set: {FAKE_MODE: "eval"}
trace: text
guidance: {names: [AGENTS.md], resolution: ancestors-of-cwd}
effort: {argv: ["--effort={effort}"], env: {FAKE_EFFORT: "{effort}"}, values: [low, high]}
"""


def write(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "fake.yaml"
    path.write_text(text)
    return path


def line_of(text: str, needle: str) -> int:
    return next(i for i, line in enumerate(text.splitlines(), 1) if needle in line)


def invoke(profile_text: str, tmp_path: Path, **kw: object) -> list[str]:
    profile = load_profile(write(tmp_path, profile_text))
    request: dict[str, object] = dict(prompt="p", model="m", max_turns=3, budget=2.0, tools="none")
    request.update(kw)
    placement = Placement(bin="/b/fake", config_dir="/c", support_dir="/s")
    return build_invocation(profile, AgentRequest(**request), placement, environ={}).argv  # type: ignore[arg-type]


def test_a_profile_file_loads_by_path(tmp_path: Path) -> None:
    profile = load_profile(write(tmp_path, GOOD))
    assert profile.name == "fake" and profile.effort is not None


def test_an_unknown_harness_name_lists_the_built_in_ones() -> None:
    with pytest.raises(UsageError) as err:
        load_profile("no-such-harness")
    assert "claude-code" in str(err.value) and "codex" in str(err.value) and "gemini-cli" in str(err.value)


def test_a_missing_profile_file_names_the_path(tmp_path: Path) -> None:
    with pytest.raises(DocumentError, match="no such profile file"):
        load_profile(tmp_path / "nope.yaml")


def test_tools_twice_is_refused_at_the_line_of_the_second(tmp_path: Path) -> None:
    text = GOOD.replace('"{tools}"]', '"{tools}",\n         "{tools}"]')
    with pytest.raises(DocumentError) as err:
        load_profile(write(tmp_path, text))
    assert "exactly once" in err.value.message
    assert err.value.line == line_of(text, '"{tools}"]')
    assert err.value.key == "invoke[10]"


def test_tools_missing_is_refused(tmp_path: Path) -> None:
    with pytest.raises(DocumentError, match="it has none"):
        load_profile(write(tmp_path, GOOD.replace(',\n         "{tools}"]', "]")))


def test_tools_inside_another_element_is_refused(tmp_path: Path) -> None:
    with pytest.raises(DocumentError, match="whole element"):
        load_profile(write(tmp_path, GOOD.replace('"{tools}"]', '"x{tools}"]')))


def test_an_unknown_placeholder_in_invoke_is_refused_with_its_line(tmp_path: Path) -> None:
    text = GOOD.replace('"--model", "{model}"', '"--model", "{modle}"')
    with pytest.raises(DocumentError) as err:
        load_profile(write(tmp_path, text))
    assert "{modle}" in err.value.message
    assert err.value.line == line_of(text, "{modle}")
    assert str(err.value).startswith(f"{tmp_path / 'fake.yaml'}:{err.value.line}: invoke[4]")


def test_version_cmd_takes_only_bin(tmp_path: Path) -> None:
    with pytest.raises(DocumentError, match=r"unknown placeholder \{model\} in version_cmd"):
        load_profile(write(tmp_path, GOOD.replace('["{bin}", "--version"]', '["{bin}", "{model}"]')))


def test_config_files_take_only_config_dir_and_support_dir(tmp_path: Path) -> None:
    text = GOOD + 'config_files: {"a.json": "{support_dir}/x {prompt}"}\n'
    with pytest.raises(DocumentError, match=r"\{prompt\} in config_files"):
        load_profile(write(tmp_path, text))


def test_a_config_file_may_not_leave_the_config_dir(tmp_path: Path) -> None:
    with pytest.raises(DocumentError, match="relative path"):
        load_profile(write(tmp_path, GOOD + 'config_files: {"../x": "y"}\n'))


def test_invoke_without_the_prompt_is_refused(tmp_path: Path) -> None:
    with pytest.raises(DocumentError, match="never passes"):
        load_profile(write(tmp_path, GOOD.replace('"-p", "{prompt}", ', "")))


def test_invoke_must_start_with_bin(tmp_path: Path) -> None:
    with pytest.raises(DocumentError, match="must start with"):
        load_profile(write(tmp_path, GOOD.replace('invoke: ["{bin}", ', 'invoke: ["fake", ')))


def test_an_unknown_trace_converter_is_refused(tmp_path: Path) -> None:
    with pytest.raises(DocumentError, match="unknown trace converter"):
        load_profile(write(tmp_path, GOOD.replace("trace: text", "trace: nope")))


def test_config_dir_env_cannot_also_be_passed_through(tmp_path: Path) -> None:
    with pytest.raises(DocumentError, match="fresh one"):
        load_profile(write(tmp_path, GOOD.replace("FAKE_KEY]", "FAKE_KEY, FAKE_CONFIG]")))


def test_a_bypass_variable_must_be_a_variable_name(tmp_path: Path) -> None:
    text = GOOD + 'endpoint_bypass_env: ["USE-VERTEX"]\n'
    with pytest.raises(DocumentError, match="not an environment variable name") as caught:
        load_profile(write(tmp_path, text))
    assert caught.value.line == line_of(text, "endpoint_bypass_env")


def test_an_unknown_key_is_refused_with_its_line(tmp_path: Path) -> None:
    text = GOOD + "invokee: []\n"
    with pytest.raises(DocumentError) as err:
        load_profile(write(tmp_path, text))
    assert err.value.key == "invokee" and err.value.line == line_of(text, "invokee")


def test_a_substituted_value_is_never_substituted_again() -> None:
    assert substitute("{prompt}|{model}", {"prompt": "{model}", "model": "M"}) == "{model}|M"


def test_literal_braces_that_are_not_placeholders_stay(tmp_path: Path) -> None:
    text = GOOD.replace('"--usd", "{budget}"', '"--usd", "{budget}", "--json", "{\\"a\\": 1}"')
    argv = invoke(text, tmp_path)
    assert '{"a": 1}' in argv


def test_a_prompt_with_spaces_quotes_and_braces_is_one_argument(tmp_path: Path) -> None:
    prompt = "say \"hi\" && {model} $(id) 'x'"
    argv = invoke(GOOD, tmp_path, prompt=prompt)
    assert argv[:3] == ["/b/fake", "-p", prompt]


def test_numbers_are_passed_plainly(tmp_path: Path) -> None:
    argv = invoke(GOOD, tmp_path, max_turns=12, budget=3.0)
    assert argv[argv.index("--turns") + 1] == "12" and argv[argv.index("--usd") + 1] == "3"
    argv = invoke(GOOD, tmp_path, budget=0.25)
    assert argv[argv.index("--usd") + 1] == "0.25"


def test_the_tool_level_expands_in_place_and_an_empty_argument_survives(tmp_path: Path) -> None:
    assert invoke(GOOD, tmp_path, tools="none")[-2:] == ["--tools", ""]
    assert invoke(GOOD, tmp_path, tools="read")[-2:] == ["--tools", "Read"]
    assert invoke(GOOD, tmp_path, tools="all")[-1] == "2"


def test_prompt_suffix_is_appended(tmp_path: Path) -> None:
    argv = invoke(GOOD + "prompt_suffix: ' Do not ask questions.'\n", tmp_path, prompt="Fix it.")
    assert argv[2] == "Fix it. Do not ask questions."


def test_effort_goes_to_argv_after_the_tools_and_to_env(tmp_path: Path) -> None:
    profile = load_profile(write(tmp_path, GOOD))
    inv = build_invocation(
        profile,
        AgentRequest(prompt="p", model="m", max_turns=1, budget=1, tools="read", effort="high"),
        Placement(bin="b", config_dir="/c", support_dir="/s"),
        environ={},
    )
    assert inv.argv[-3:] == ["--tools", "Read", "--effort=high"]
    assert inv.env["FAKE_EFFORT"] == "high"


def test_without_effort_nothing_of_the_effort_block_is_passed(tmp_path: Path) -> None:
    profile = load_profile(write(tmp_path, GOOD))
    inv = build_invocation(
        profile,
        AgentRequest(prompt="p", model="m", max_turns=1, budget=1, tools="read"),
        Placement(bin="b", config_dir="/c", support_dir="/s"),
        environ={},
    )
    assert not any("effort" in a for a in inv.argv) and "FAKE_EFFORT" not in inv.env


def test_an_effort_the_harness_does_not_accept_is_refused(tmp_path: Path) -> None:
    with pytest.raises(UsageError, match="low, high"):
        invoke(GOOD, tmp_path, effort="max")


def test_effort_for_a_profile_without_an_effort_block_is_refused(tmp_path: Path) -> None:
    text = GOOD.split("effort:")[0]
    with pytest.raises(UsageError, match="no effort setting"):
        invoke(text, tmp_path, effort="high")


def test_env_is_allow_list_then_env_set_then_config_dir(tmp_path: Path) -> None:
    profile = load_profile(write(tmp_path, GOOD))
    inv = build_invocation(
        profile,
        AgentRequest(prompt="p", model="m", max_turns=1, budget=1, tools="all"),
        Placement(bin="b", config_dir="/fresh", support_dir="/s"),
        environ={"PATH": "/p", "FAKE_KEY": "k", "FAKE_MODE": "user", "FAKE_CONFIG": "/user", "OTHER": "x"},
    )
    assert inv.env == {"PATH": "/p", "FAKE_KEY": "k", "FAKE_MODE": "eval", "FAKE_CONFIG": "/fresh"}


def test_config_files_are_written_with_the_agents_paths(tmp_path: Path) -> None:
    text = (
        GOOD
        + 'config_files: {"sub/s.json": '
        + '"{\\"hook\\": \\"{support_dir}/h.py\\", \\"d\\": \\"{config_dir}\\"}"}\n'
    )
    profile = load_profile(write(tmp_path, text))
    inv = build_invocation(
        profile,
        AgentRequest(prompt="p", model="m", max_turns=1, budget=1, tools="all"),
        Placement(bin="b", config_dir="/eval/run/config", support_dir="/eval/support"),
        environ={},
    )
    inv.write_config_files(tmp_path / "cfg")
    assert (
        tmp_path / "cfg/sub/s.json"
    ).read_text() == '{"hook": "/eval/support/h.py", "d": "/eval/run/config"}'


def test_a_missing_binary_is_a_prerequisite_error_with_the_fix(tmp_path: Path) -> None:
    profile = load_profile("claude-code")
    with pytest.raises(PrerequisiteError) as err:
        resolve_bin(profile, tmp_path / "no-claude")
    assert "install-harness.sh" in str(err.value)


def test_a_binary_not_on_path_is_a_prerequisite_error(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("PATH", str(tmp_path))
    monkeypatch.setenv("DOKIMI_TOOLS", str(tmp_path))  # no pinned install there either
    monkeypatch.delenv("DOKIMI_CODEX_BIN", raising=False)
    with pytest.raises(PrerequisiteError, match="not on PATH"):
        resolve_bin(load_profile("codex"))


@pytest.mark.slow
def test_repo_reach_with_a_missing_binary_exits_2_without_a_traceback(tmp_path: Path) -> None:
    repo = git_repo(tmp_path / "repo", {"AGENTS.md": "# a\n"})
    proc = subprocess.run(
        [sys.executable, str(ROOT / "cli.py"), "repo", "reach", str(repo), "--model", "m",
         "--bin", str(tmp_path / "missing-claude"), "--out", str(tmp_path / "out")],
        capture_output=True, text=True, timeout=120, env={**os.environ, "PYTHONPATH": str(ROOT / "src")},
    )  # fmt: skip
    assert proc.returncode == 2, proc.stderr
    assert "error:" in proc.stderr and "missing-claude" in proc.stderr
    assert "Traceback" not in proc.stderr


@pytest.mark.slow
def test_repo_reach_with_a_bad_profile_exits_2_naming_file_and_line(tmp_path: Path) -> None:
    repo = git_repo(tmp_path / "repo", {"AGENTS.md": "# a\n"})
    bad = write(tmp_path, GOOD.replace('"{tools}"]', '"{tools}", "{tools}"]'))
    proc = subprocess.run(
        [sys.executable, str(ROOT / "cli.py"), "repo", "reach", str(repo), "--model", "m",
         "--harness", str(bad)],
        capture_output=True, text=True, timeout=120, env={**os.environ, "PYTHONPATH": str(ROOT / "src")},
    )  # fmt: skip
    assert proc.returncode == 2
    assert f"{bad}:{line_of(GOOD, '{tools}')}: invoke[" in proc.stderr


def test_a_dry_run_edits_through_the_shell_tool_or_a_text_format_never_both_nor_neither(
    tmp_path: Path,
) -> None:
    both = GOOD + "script_tools: {command: {name: Bash, arg: command}, text_edits: search-replace}\n"
    neither = GOOD + "script_tools: {read: {name: Read, arg: file_path}}\n"
    for text in (both, neither):
        with pytest.raises(DocumentError, match="exactly one of command") as err:
            load_profile(write(tmp_path, text))
        assert err.value.line == line_of(text, "script_tools:")
    assert load_profile(write(tmp_path, GOOD + "script_tools: {text_edits: search-replace}\n"))


JUDGE = 'judge: {invoke: ["{bin}", "-p", "--model", "{model}", "--turns", "{max_turns}", "{tools}"]}\n'


def test_the_judge_block_runs_tool_level_none_with_the_effort_and_no_prompt_in_argv(tmp_path: Path) -> None:
    profile = load_profile(write(tmp_path, GOOD + JUDGE))
    placement = Placement(bin="/b/fake", config_dir="/c", support_dir="/s", home="/h")
    found = build_judge_invocation(profile, "m-1", placement, effort="high", environ={"FAKE_KEY": "k"})
    assert found.argv == ["/b/fake", "-p", "--model", "m-1", "--turns", "1", "--tools", "", "--effort=high"]
    assert found.env == {"FAKE_KEY": "k", "HOME": "/h", "FAKE_MODE": "eval", "FAKE_EFFORT": "high",
                         "FAKE_CONFIG": "/c"}  # fmt: skip


@pytest.mark.parametrize(
    ("judge", "message"),
    [
        (
            'judge: {invoke: ["{bin}", "{prompt}", "{tools}"]}\n',
            r"unknown placeholder \{prompt\} in judge.invoke",
        ),
        ('judge: {invoke: ["{bin}", "--model", "{model}"]}\n', r"judge.invoke must hold the element"),
        ('judge: {invoke: ["fake", "{tools}"]}\n', r"judge.invoke must start with \{bin\}"),
    ],
)
def test_a_judge_block_is_refused_with_its_line(tmp_path: Path, judge: str, message: str) -> None:
    """judge.invoke: no {prompt} (the prompt goes on stdin), "{tools}" once, {bin} first."""
    text = GOOD + judge
    with pytest.raises(DocumentError, match=message) as caught:
        load_profile(write(tmp_path, text))
    assert caught.value.line == line_of(text, "judge:")


def test_a_profile_without_a_judge_block_cannot_judge(tmp_path: Path) -> None:
    profile = load_profile(write(tmp_path, GOOD))
    placement = Placement(bin="/b/fake", config_dir="/c", support_dir="/s")
    with pytest.raises(UsageError, match="'fake' has no judge block") as caught:
        build_judge_invocation(profile, "m-1", placement)
    assert caught.value.hint is not None and "claude-code, codex, gemini-cli" in caught.value.hint
