"""Harness profiles: loading, the rules, argv substitution and the child's environment.

Built-in profiles are package data (``dokimi/harness/profiles/<name>.yaml``); ``--harness`` takes a name or a
path. Every rule of a profile is one ``check_*`` function returning :class:`ProfileProblem` values, so a
profile file is refused with the file:line of the key that breaks it.

Substitution, in one place (:func:`substitute`): a ``{name}`` in a template element is replaced by its
value in one pass over the template, so a value is never substituted again (a prompt holding ``{model}`` stays
literal), and each template element yields exactly one argument. The element ``"{tools}"`` is the one
exception: it is replaced by the list of the chosen tool level (and the effort arguments follow it).
"""

from __future__ import annotations

import os
import re
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from importlib import resources
from pathlib import Path, PurePosixPath

from dokimi.errors import DocumentError, UsageError
from dokimi.harness.locate import locate_harness
from dokimi.harness.traces import builtin_traces, trace_problem
from dokimi.schemas._base import Loc, Marked, decode_text, format_loc, parse_yaml, read_raw, validate_marked
from dokimi.schemas.profile import HarnessProfile, JudgeMode, ToolsLevel

__all__ = [
    "CONFIG_PLACEHOLDERS",
    "EFFORT_PLACEHOLDERS",
    "INVOKE_PLACEHOLDERS",
    "JUDGE_MAX_TURNS",
    "JUDGE_PLACEHOLDERS",
    "PLACEHOLDER_RE",
    "PROFILE_RULES",
    "TOOLS_ELEMENT",
    "VERSION_PLACEHOLDERS",
    "Invocation",
    "ProfileProblem",
    "build_env",
    "build_invocation",
    "build_judge_invocation",
    "builtin_profiles",
    "check_bin_is_argv0",
    "check_config_file_names",
    "check_effort_values",
    "check_env_names",
    "check_guidance_names",
    "check_known_placeholders",
    "check_prompt_in_invoke",
    "check_script_edits_one_way",
    "check_tools_lists_are_literal",
    "check_tools_placeholder_exactly_once",
    "check_trace_converter_known",
    "endpoint_for",
    "judge_mode",
    "load_profile",
    "parse_profile",
    "placeholders_in",
    "render_config_files",
    "resolve_bin",
    "substitute",
    "tool_level_argv",
    "version_argv",
]

PLACEHOLDER_RE = re.compile(r"\{([A-Za-z_][A-Za-z0-9_]*)\}")
"""A placeholder: ``{name}``. Other braces (JSON in an argument) are literal text."""

TOOLS_ELEMENT = "{tools}"
INVOKE_PLACEHOLDERS = frozenset({"bin", "prompt", "model", "max_turns", "budget", "endpoint", "config_dir"})
JUDGE_PLACEHOLDERS = frozenset({"bin", "model", "max_turns", "config_dir"})
"""judge.invoke: no {prompt} (the judge's prompt goes on stdin) and no {budget}."""
VERSION_PLACEHOLDERS = frozenset({"bin"})
EFFORT_PLACEHOLDERS = frozenset({"effort"})
CONFIG_PLACEHOLDERS = frozenset({"config_dir", "support_dir", "endpoint", "model"})
TOOLS_PLACEHOLDERS = frozenset({"config_dir"})
"""A tool list may name a file of the config dir (Gemini CLI's --policy files); nothing else."""
ENV_NAME_RE = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")
CONTAINER_DROPPED_ENV = ("PATH", "HOME")
"""Names never passed from the host into a container: the image's PATH and the per-run HOME apply."""

PROFILES_PACKAGE = "dokimi.harness.profiles"


# --- rules --------------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class ProfileProblem:
    """One broken rule: the key (as a location tuple) and what is wrong."""

    loc: Loc
    message: str
    hint: str | None = None


def placeholders_in(text: str) -> list[str]:
    return PLACEHOLDER_RE.findall(text)


def _tools_once(argv: list[str], key: tuple[str, ...]) -> list[ProfileProblem]:
    """``argv`` (at ``key``) holds the element ``"{tools}"`` exactly once, as a whole element."""
    name = ".".join(key)
    whole = [i for i, element in enumerate(argv) if element == TOOLS_ELEMENT]
    inside = [i for i, element in enumerate(argv) if element != TOOLS_ELEMENT and TOOLS_ELEMENT in element]
    problems = [
        ProfileProblem(
            (*key, i),
            f"{TOOLS_ELEMENT} must be a whole element of {name}, not part of {argv[i]!r}",
            hint='write it as its own list item: "{tools}"',
        )
        for i in inside
    ]
    if len(whole) == 0 and not inside:
        problems.append(
            ProfileProblem(
                key,
                f'{name} must hold the element "{TOOLS_ELEMENT}" exactly once; it has none',
                hint='add "{tools}" where the tool options go',
            )
        )
    elif len(whole) > 1:
        problems.extend(
            ProfileProblem(
                (*key, i),
                f'{name} must hold the element "{TOOLS_ELEMENT}" exactly once; it has {len(whole)}',
                hint="keep one; the tool level expands there",
            )
            for i in whole[1:]
        )
    return problems


def check_tools_placeholder_exactly_once(profile: HarnessProfile) -> list[ProfileProblem]:
    """``invoke`` (and ``judge.invoke``) hold the element ``"{tools}"`` exactly once, as a whole element."""
    problems = _tools_once(profile.invoke, ("invoke",))
    if profile.judge is not None:
        problems += _tools_once(profile.judge.invoke, ("judge", "invoke"))
    return problems


def _unknown(values: Iterable[tuple[Loc, str]], allowed: frozenset[str], where: str) -> list[ProfileProblem]:
    problems = []
    known = ", ".join("{" + n + "}" for n in sorted(allowed)) or "none"
    for loc, text in values:
        for name in placeholders_in(text):
            if name not in allowed:
                problems.append(
                    ProfileProblem(
                        loc, f"unknown placeholder {{{name}}} in {where}", hint=f"{where} takes {known}"
                    )
                )
    return problems


def check_known_placeholders(profile: HarnessProfile) -> list[ProfileProblem]:
    """Only the placeholders each field takes: invoke {bin} {prompt} {model} {max_turns} {budget} {endpoint}
    {config_dir} (+ the ``"{tools}"`` element), judge.invoke {bin} {model} {max_turns} {config_dir} (the
    prompt goes on stdin), version_cmd only {bin}, effort only {effort}, config_files {config_dir}
    {support_dir} {endpoint} {model}."""
    invoke = [(("invoke", i), e) for i, e in enumerate(profile.invoke) if e != TOOLS_ELEMENT]
    problems = _unknown(invoke, INVOKE_PLACEHOLDERS | {"tools"}, "invoke")
    if profile.judge is not None:
        judge = [
            (("judge", "invoke", i), e) for i, e in enumerate(profile.judge.invoke) if e != TOOLS_ELEMENT
        ]
        problems += _unknown(judge, JUDGE_PLACEHOLDERS | {"tools"}, "judge.invoke")
    problems = [p for p in problems if "{tools}" not in p.message]  # reported by the tools rule
    problems += _unknown(
        [(("version_cmd", i), e) for i, e in enumerate(profile.version_cmd)],
        VERSION_PLACEHOLDERS,
        "version_cmd",
    )
    if profile.effort is not None:
        problems += _unknown(
            [(("effort", "argv", i), e) for i, e in enumerate(profile.effort.argv)]
            + [(("effort", "env", k), v) for k, v in profile.effort.env.items()],
            EFFORT_PLACEHOLDERS,
            "effort",
        )
    problems += _unknown(
        [(("config_files", name), text) for name, text in profile.config_files.items()],
        CONFIG_PLACEHOLDERS,
        "config_files",
    )
    return problems


def check_prompt_in_invoke(profile: HarnessProfile) -> list[ProfileProblem]:
    """invoke passes the prompt: some element holds {prompt}."""
    if any("prompt" in placeholders_in(e) for e in profile.invoke):
        return []
    return [ProfileProblem(("invoke",), "invoke never passes {prompt}", hint='add "{prompt}" where it goes')]


def check_bin_is_argv0(profile: HarnessProfile) -> list[ProfileProblem]:
    """invoke, version_cmd and judge.invoke start with ``{bin}``, so that ``--bin`` pins the executable for
    all of them."""
    argvs: list[tuple[tuple[str, ...], list[str]]] = [
        (("invoke",), profile.invoke),
        (("version_cmd",), profile.version_cmd),
    ]
    if profile.judge is not None:
        argvs.append((("judge", "invoke"), profile.judge.invoke))
    return [
        ProfileProblem(
            (*key, 0), f"{'.'.join(key)} must start with {{bin}}", hint="--bin overrides {bin}; start with it"
        )
        for key, argv in argvs
        if argv[0] != "{bin}"
    ]


def check_tools_lists_are_literal(profile: HarnessProfile) -> list[ProfileProblem]:
    """The tool lists are inserted as they are, except ``{config_dir}`` (a config file a flag names)."""
    problems = []
    for level in ("none", "read", "all", "web"):
        for i, element in enumerate(getattr(profile.tools, level) or []):
            if set(placeholders_in(element)) - TOOLS_PLACEHOLDERS:
                problems.append(
                    ProfileProblem(
                        ("tools", level, i), f"tools.{level} is literal; {element!r} has a placeholder"
                    )
                )
    return problems


def check_env_names(profile: HarnessProfile) -> list[ProfileProblem]:
    """Every variable name is a valid name; config_dir_env and endpoint_env are not also passed through."""
    problems = []
    named: list[tuple[Loc, str]] = [(("env_allow", i), n) for i, n in enumerate(profile.env_allow)]
    named += [(("env_set", k), k) for k in profile.env_set]
    named += [(("dry_run_env", k), k) for k in profile.dry_run_env]
    named += [(("endpoint_bypass_env", i), n) for i, n in enumerate(profile.endpoint_bypass_env)]
    for key in ("config_dir_env", "endpoint_env"):
        value = getattr(profile, key)
        if value is not None:
            named.append(((key,), value))
    if profile.effort is not None:
        named += [(("effort", "env", k), k) for k in profile.effort.env]
    for loc, name in named:
        if not ENV_NAME_RE.match(name):
            problems.append(ProfileProblem(loc, f"{name!r} is not an environment variable name"))
    if profile.config_dir_env and profile.config_dir_env in profile.env_allow:
        problems.append(
            ProfileProblem(
                ("env_allow", profile.env_allow.index(profile.config_dir_env)),
                f"{profile.config_dir_env} is config_dir_env: every run gets a fresh one, never the caller's",
                hint="remove it from env_allow",
            )
        )
    return problems


def check_config_file_names(profile: HarnessProfile) -> list[ProfileProblem]:
    """config_files names are relative paths inside the config directory (no ``..``, no absolute path)."""
    problems = []
    if profile.config_files and not profile.config_dir_env:
        problems.append(
            ProfileProblem(("config_files",), "config_files need config_dir_env (the directory they go into)")
        )
    for name in profile.config_files:
        parts = PurePosixPath(name).parts
        if not name or name.startswith("/") or "\\" in name or any(p in ("..", ".") for p in parts):
            problems.append(
                ProfileProblem(
                    ("config_files", name), f"{name!r} must be a relative path inside the config dir"
                )
            )
    return problems


def check_trace_converter_known(profile: HarnessProfile) -> list[ProfileProblem]:
    """``trace`` names a converter: a built-in one, or a module of your own that can be imported."""
    problem = trace_problem(profile.trace)
    if problem is None:
        return []
    hint = f"use one of: {', '.join(builtin_traces())}, or the dotted name of a module with a convert()"
    return [ProfileProblem(("trace",), problem, hint=hint)]


def check_guidance_names(profile: HarnessProfile) -> list[ProfileProblem]:
    """guidance.names are file names, not paths."""
    return [
        ProfileProblem(("guidance", "names", i), f"{name!r} must be a file name without '/'")
        for i, name in enumerate(profile.guidance.names)
        if not name or "/" in name or "\\" in name or name in (".", "..")
    ]


def check_effort_values(profile: HarnessProfile) -> list[ProfileProblem]:
    """An effort block passes the value somewhere ({effort} in argv or env) and lists at least one value."""
    effort = profile.effort
    if effort is None:
        return []
    problems = []
    used = any("effort" in placeholders_in(e) for e in [*effort.argv, *effort.env.values()])
    if not used:
        problems.append(ProfileProblem(("effort",), "effort never passes {effort} (in argv or env)"))
    if effort.values is not None and not effort.values:
        problems.append(ProfileProblem(("effort", "values"), "effort.values is empty; omit it to accept any"))
    return problems


def check_script_edits_one_way(profile: HarnessProfile) -> list[ProfileProblem]:
    """A dry run's scripted model edits one way: through the shell tool (``script_tools.command``) or in a
    text edit format (``script_tools.text_edits``), never both and never neither."""
    tools = profile.script_tools
    if (tools.command is None) == (tools.text_edits is None):
        return [
            ProfileProblem(
                ("script_tools",),
                "script_tools needs exactly one of command (the shell tool) and text_edits (an edit format)",
                hint="a harness whose model calls tools names its shell tool; Aider names text_edits",
            )
        ]
    return []


PROFILE_RULES: tuple[Callable[[HarnessProfile], list[ProfileProblem]], ...] = (
    check_tools_placeholder_exactly_once,
    check_known_placeholders,
    check_prompt_in_invoke,
    check_bin_is_argv0,
    check_tools_lists_are_literal,
    check_env_names,
    check_config_file_names,
    check_trace_converter_known,
    check_guidance_names,
    check_effort_values,
    check_script_edits_one_way,
)


def profile_problems(profile: HarnessProfile) -> list[ProfileProblem]:
    return [problem for rule in PROFILE_RULES for problem in rule(profile)]


# --- loading ------------------------------------------------------------------------------------------------


def builtin_profiles() -> list[str]:
    """Names of the built-in profiles, sorted."""
    root = resources.files(PROFILES_PACKAGE)
    return sorted(p.name[: -len(".yaml")] for p in root.iterdir() if p.name.endswith(".yaml"))


def parse_profile(text: str, path: str) -> HarnessProfile:
    """Validate a profile document; the first broken rule is raised as file:line: key."""
    marked: Marked = parse_yaml(text, path)
    profile = validate_marked(marked, HarnessProfile)
    problems = profile_problems(profile)
    if problems:
        first = problems[0]
        message = first.message
        if len(problems) > 1:
            message += f" (and {len(problems) - 1} more: " + "; ".join(p.message for p in problems[1:4]) + ")"
        raise DocumentError(
            message,
            path=path,
            line=marked.line(first.loc),
            key=format_loc(first.loc) or None,
            hint=first.hint,
        )
    return profile


def load_profile(name_or_path: str | Path) -> HarnessProfile:
    """A built-in profile by name, or a profile file by path (with a ``/``, or ending in .yaml/.yml)."""
    text_name = str(name_or_path)
    is_path = isinstance(name_or_path, Path) or "/" in text_name or text_name.endswith((".yaml", ".yml"))
    if not is_path:
        known = builtin_profiles()
        if text_name not in known:
            raise UsageError(
                f"unknown harness {text_name!r}",
                hint=f"use one of the built-in profiles ({', '.join(known)}) or the path of a profile file",
            )
        resource = resources.files(PROFILES_PACKAGE) / f"{text_name}.yaml"
        label = f"<built-in>/{text_name}.yaml"
        return parse_profile(decode_text(resource.read_bytes(), label), label)
    path = Path(name_or_path)
    if not path.exists() and not path.is_symlink():
        raise DocumentError("no such profile file", path=str(path))
    raw = read_raw(path)
    return parse_profile(decode_text(raw, str(path)), str(path))


# --- substitution -------------------------------------------------------------------------------------------


def substitute(template: str, values: Mapping[str, str]) -> str:
    """Replace each ``{name}`` of ``template`` by ``values[name]`` in one pass (values are never re-read).

    A placeholder missing from ``values`` is a bug of the caller (the rules refuse unknown ones at load time).
    """

    def one(match: re.Match[str]) -> str:
        return values[match.group(1)]

    return PLACEHOLDER_RE.sub(one, template)


@dataclass(frozen=True)
class Invocation:
    """One ready-to-run harness call."""

    argv: list[str]
    env: dict[str, str]
    config_files: dict[str, str] = field(default_factory=dict)
    """Rendered config files: name relative to the config directory -> content."""
    prompt: str = ""
    """The prompt as passed (with prompt_suffix)."""

    def write_config_files(self, host_config_dir: Path) -> list[Path]:
        """Write the config files into the config directory as the host sees it."""
        written = []
        for name, content in sorted(self.config_files.items()):
            target = host_config_dir / name
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_text(content, encoding="utf-8")
            written.append(target)
        return written


def tool_level_argv(profile: HarnessProfile, tools: ToolsLevel, *, web: bool = False) -> list[str]:
    """What ``"{tools}"`` expands to: the level's list; for ``all`` with ``web`` (a task whose egress names
    hosts) the profile's ``tools.web`` when it has one, so web tools are on only where the task allows the
    network."""
    if tools == "all" and web and profile.tools.web is not None:
        return list(profile.tools.web)
    return list(getattr(profile.tools, tools))


def _number(value: float | int) -> str:
    if isinstance(value, float) and value.is_integer():
        return str(int(value))
    return str(value)


def render_config_files(
    profile: HarnessProfile, *, config_dir: str, support_dir: str, endpoint: str = "", model: str = ""
) -> dict[str, str]:
    values = {"config_dir": config_dir, "support_dir": support_dir, "endpoint": endpoint, "model": model}
    return {name: substitute(text, values) for name, text in profile.config_files.items()}


def endpoint_for(
    profile: HarnessProfile, environ: Mapping[str, str] | None = None, override: str | None = None
) -> str:
    """The model endpoint ``{endpoint}`` stands for (a harness that takes it from a config file or argv, not
    an environment variable): ``override`` (the scripted server, a capturing proxy, a gateway), else the
    caller's ``endpoint_env``, else the profile's ``endpoint_default``, else empty."""
    if override:
        return override
    source = os.environ if environ is None else environ
    if profile.endpoint_env and source.get(profile.endpoint_env):
        return source[profile.endpoint_env]
    return profile.endpoint_default or ""


def build_env(
    profile: HarnessProfile,
    *,
    config_dir: str,
    environ: Mapping[str, str] | None = None,
    in_container: bool = False,
    home: str | None = None,
    effort: str | None = None,
    extra: Mapping[str, str] | None = None,
) -> dict[str, str]:
    """The child's environment: env_allow names from ``environ``, then env_set, then the effort's env, then
    ``extra`` (a dry run's endpoint), then config_dir_env. Nothing else of the caller's environment passes.

    In a container PATH and HOME from the host are dropped. ``home`` sets HOME (the per-run home).
    """
    source = os.environ if environ is None else environ
    env: dict[str, str] = {}
    for name in profile.env_allow:
        if in_container and name in CONTAINER_DROPPED_ENV:
            continue
        if name in source:
            env[name] = source[name]
    if home is not None:
        env["HOME"] = home
    env.update(profile.env_set)
    if effort is not None and profile.effort is not None:
        env.update({k: substitute(v, {"effort": effort}) for k, v in profile.effort.env.items()})
    if extra:
        env.update(extra)
    if profile.config_dir_env:
        env[profile.config_dir_env] = config_dir
    return env


def _check_effort(profile: HarnessProfile, effort: str | None) -> None:
    if effort is None:
        return
    if profile.effort is None:
        raise UsageError(
            f"harness {profile.name!r} has no effort setting, so --effort {effort} cannot be passed",
            hint="drop --effort, or add an effort block to the profile",
        )
    if profile.effort.values is not None and effort not in profile.effort.values:
        raise UsageError(
            f"effort {effort!r} is not one {profile.name} accepts",
            hint=f"use one of: {', '.join(profile.effort.values)}",
        )


@dataclass(frozen=True)
class AgentRequest:
    """What one run of a harness is asked to do."""

    prompt: str
    model: str
    max_turns: int
    budget: float
    tools: ToolsLevel = "all"
    effort: str | None = None


@dataclass(frozen=True)
class Placement:
    """Where a harness runs: its executable and directories as the agent sees them (container paths in a
    container, host paths on the host)."""

    bin: str
    config_dir: str | PurePosixPath | Path
    support_dir: str | PurePosixPath | Path
    in_container: bool = False
    home: str | None = None


def build_invocation(
    profile: HarnessProfile,
    request: AgentRequest,
    placement: Placement,
    *,
    environ: Mapping[str, str] | None = None,
    extra_env: Mapping[str, str] | None = None,
    endpoint: str | None = None,
    web: bool = False,
) -> Invocation:
    """argv, env and config files of one run.

    ``prompt_suffix`` is appended to the request's prompt. ``endpoint`` is what ``{endpoint}`` becomes
    (:func:`endpoint_for`); ``web`` switches web tools on at level ``all`` (:func:`tool_level_argv`).
    """
    prompt, model, max_turns, budget = request.prompt, request.model, request.max_turns, request.budget
    tools, effort = request.tools, request.effort
    bin, config_dir, support_dir = placement.bin, placement.config_dir, placement.support_dir
    in_container, home = placement.in_container, placement.home
    _check_effort(profile, effort)
    full_prompt = prompt + (profile.prompt_suffix or "")
    config = str(config_dir)
    url = endpoint_for(profile, environ, endpoint)
    values = {
        "endpoint": url,
        "config_dir": config,
        "bin": bin,
        "prompt": full_prompt,
        "model": model,
        "max_turns": str(max_turns),
        "budget": _number(budget),
    }
    tool_args = [substitute(e, {"config_dir": config}) for e in tool_level_argv(profile, tools, web=web)]
    effort_args = (
        [substitute(e, {"effort": effort}) for e in profile.effort.argv]
        if effort is not None and profile.effort is not None
        else []
    )
    argv: list[str] = []
    for element in profile.invoke:
        if element == TOOLS_ELEMENT:
            argv.extend(tool_args)
            argv.extend(effort_args)
        else:
            argv.append(substitute(element, values))
    env = build_env(
        profile,
        config_dir=config,
        environ=environ,
        in_container=in_container,
        home=home,
        effort=effort,
        extra=extra_env,
    )
    files = render_config_files(
        profile, config_dir=config, support_dir=str(support_dir), endpoint=url, model=model
    )
    return Invocation(argv=argv, env=env, config_files=files, prompt=full_prompt)


JUDGE_MAX_TURNS = 1
"""A judge answers once: what ``{max_turns}`` of ``judge.invoke`` becomes."""


def judge_mode(profile: HarnessProfile) -> JudgeMode:
    """The profile's judge block; a profile without one cannot be the rubric judge (a UsageError naming the
    built-in profiles that can)."""
    if profile.judge is None:
        judges = [name for name in builtin_profiles() if load_profile(name).judge is not None]
        raise UsageError(
            f"harness {profile.name!r} has no judge block, so it cannot be the rubric judge",
            hint=f"judge with one of: {', '.join(judges)} (or add a judge block to the profile)",
        )
    return profile.judge


def build_judge_invocation(
    profile: HarnessProfile,
    model: str,
    placement: Placement,
    *,
    effort: str | None = None,
    environ: Mapping[str, str] | None = None,
    extra_env: Mapping[str, str] | None = None,
) -> Invocation:
    """argv, env and config files of one rubric-judge call (``judge.invoke``: tool level ``none``, the
    prompt on stdin)."""
    mode = judge_mode(profile)
    _check_effort(profile, effort)
    config = str(placement.config_dir)
    url = endpoint_for(profile, {**(os.environ if environ is None else environ), **(extra_env or {})})
    values = {"bin": placement.bin, "model": model, "max_turns": str(JUDGE_MAX_TURNS), "config_dir": config}
    tool_args = [substitute(e, {"config_dir": config}) for e in tool_level_argv(profile, "none")]
    if effort is not None and profile.effort is not None:
        tool_args += [substitute(e, {"effort": effort}) for e in profile.effort.argv]
    argv: list[str] = []
    for element in mode.invoke:
        if element == TOOLS_ELEMENT:
            argv.extend(tool_args)
        else:
            argv.append(substitute(element, values))
    env = build_env(
        profile, config_dir=config, environ=environ, home=placement.home, effort=effort, extra=extra_env
    )
    files = render_config_files(
        profile, config_dir=config, support_dir=str(placement.support_dir), endpoint=url, model=model
    )
    return Invocation(argv=argv, env=env, config_files=files)


def version_argv(profile: HarnessProfile, bin: str) -> list[str]:
    return [substitute(element, {"bin": bin}) for element in profile.version_cmd]


def resolve_bin(profile: HarnessProfile, override: str | Path | None = None) -> Path:
    """The executable to run: the one lookup doctor shares (:func:`dokimi.harness.locate.locate_harness`):
    ``--bin``, then the harness's environment variable, then the pinned install, then ``bin`` on PATH."""
    return locate_harness(profile, override).path
