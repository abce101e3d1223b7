"""repo validate: one test (at least) per rule, on real git repositories built in tmp_path."""

from __future__ import annotations

import json
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import pytest

from dokimi.checks.validate import RULES, Finding, ValidationReport, validate_repo
from dokimi.schemas._base import Marked
from dokimi.source import open_source
from tests.helpers.git import bare_clone_for_serving, commit, git, git_repo

EVAL = ".agent-eval"
MANIFEST_PATH = f"{EVAL}/repo-eval.yaml"

# Line numbers below refer to this text: keep it in sync with the tests that assert lines.
MANIFEST = """\
schema: repo_manifest.v1
id: demo
source: {url: https://example.invalid/demo.git}
eval_dir: .agent-eval
guidance:
  globs: ["**/AGENTS.md"]
image:
  dockerfile: .agent-eval/Dockerfile
  caches:
    - {name: bazel-disk, path: /cache/bazel-disk}
  env: {OUT_BASE: "{run_dir}/ob"}
  network: none
entry_points:
  grade: "python3 {eval_dir}/run.py grade --contract {run_dir} --src {source_dir}"
  oracle: "python3 {eval_dir}/run.py oracle --contract {run_dir}"
tasks: .agent-eval/tasks
build_systems: [make]
"""


class Repo:
    """A repository with two commits of code before the eval directory is added."""

    def __init__(self, path: Path) -> None:
        self.path = git_repo(
            path,
            {"AGENTS.md": "root guidance\n", "old/AGENTS.md": "old guidance\n", "src/a.py": "a = 1\n"},
        )
        self.c1 = git(self.path, "rev-parse", "HEAD").strip()
        self.c2 = commit(self.path, "drop old guidance", files={"old/AGENTS.md": None, "src/b.py": "b = 2\n"})

    def add_eval(
        self,
        manifest: str = MANIFEST,
        tasks: dict[str, Any] | None = None,
        files: Mapping[str, str | bytes | None] | None = None,
    ) -> str:
        content: dict[str, str | bytes | None] = {
            MANIFEST_PATH: manifest,
            f"{EVAL}/Dockerfile": "FROM dokimi-base:bookworm\n",
            f"{EVAL}/run.py": "print('grade')\n",
        }
        for task_dir, task in (tasks if tasks is not None else {"t1": self.task("t1")}).items():
            text = task if isinstance(task, (str, bytes)) else json.dumps(task, indent=2)
            content[f"{EVAL}/tasks/{task_dir}/task.json"] = text
        content.update(files or {})
        return commit(self.path, "add eval", files=content)

    def task(self, task_id: str, base: str | None = None, **extra: Any) -> dict[str, Any]:
        data: dict[str, Any] = {
            "id": task_id,
            "family": "fix",
            "base": base or self.c2,
            "prompt": "fix it",
            "grader": "test_pass",
        }
        data.update(extra)
        return data


@pytest.fixture
def repo(tmp_path: Path) -> Repo:
    return Repo(tmp_path / "repo")


def run(repo: Repo, *, source: str | None = None, **kwargs: Any) -> ValidationReport:
    with open_source(source or str(repo.path)) as opened:
        return validate_repo(opened, manifest=kwargs.pop("manifest", MANIFEST_PATH), **kwargs)


def only(report: ValidationReport, code: str, severity: str = "error") -> list[Finding]:
    found = report.errors if severity == "error" else report.warnings
    return [f for f in found if f.code == code]


def one(report: ValidationReport, code: str, severity: str = "error") -> Finding:
    found = only(report, code, severity)
    assert len(found) == 1, [f.text() for f in [*report.errors, *report.warnings]]
    return found[0]


def task_line(task: dict[str, Any], key: str) -> int:
    """Line of ``key`` in json.dumps(task, indent=2): the opening brace is line 1."""
    return list(task).index(key) + 2


# --- the whole thing ---------------------------------------------------------------------------------------


def test_a_complete_manifest_with_full_shas_is_valid(repo: Repo) -> None:
    repo.add_eval(tasks={"t1": repo.task("t1"), "t2": repo.task("t2", base=repo.c1)})
    report = run(repo)
    assert report.valid, [f.text() for f in report.errors]
    assert report.errors == [] and report.warnings == []
    assert (report.tasks, report.bases) == (2, 2)
    assert report.rules == [r.__name__.removeprefix("check_") for r in RULES]


def test_every_rule_is_a_named_check_function() -> None:
    names = [r.__name__ for r in RULES]
    assert all(n.startswith("check_") for n in names) and len(set(names)) == len(names)
    for required in (
        "check_eval_dir_tasks_entry_points_together",
        "check_eval_dir_is_proper_subdirectory",
        "check_tasks_inside_eval_dir",
        "check_image_needs_eval_dir",
        "check_placeholders",
        "check_source_dir_only_in_grade_and_oracle",
        "check_source_dir_needs_source_url",
        "check_image_env_run_dir_values",
        "check_task_id_equals_directory",
        "check_required_keys",
        "check_base_form",
        "check_base_resolves",
        "check_gate_and_score_forms",
        "check_caps_finite_positive",
        "check_patches_exist",
        "check_egress_hosts",
        "check_guidance_globs_at_every_base",
        "check_build_systems_known",
    ):
        assert required in names


def test_a_commit_source_validates_the_tree_of_that_commit(repo: Repo) -> None:
    sha = repo.add_eval()
    commit(repo.path, "break the manifest later", files={MANIFEST_PATH: MANIFEST.replace("make", "bazle")})
    assert run(repo, source=f"{repo.path}@{sha}").valid
    assert not run(repo).valid


# --- manifest rules ----------------------------------------------------------------------------------------


def test_an_unknown_manifest_key_names_its_line(repo: Repo) -> None:
    repo.add_eval(MANIFEST.replace("eval_dir: .agent-eval", "eval_dri: .agent-eval"))
    finding = one(run(repo), "manifest_schema")
    assert (finding.file, finding.line, finding.key) == (MANIFEST_PATH, 4, "eval_dri")
    assert "unknown key" in finding.message


def test_a_misspelled_manifest_key_suggests_the_key_it_resembles(repo: Repo) -> None:
    repo.add_eval(MANIFEST.replace("  dockerfile:", "  dockerfle:"))
    findings = only(run(repo), "manifest_schema")
    typo = next(f for f in findings if f.key == "image.dockerfle")
    assert (typo.line, typo.message, typo.fix) == (8, "unknown key", "did you mean 'dockerfile'?")


def test_an_unknown_manifest_key_far_from_any_lists_the_allowed_keys(repo: Repo) -> None:
    repo.add_eval(MANIFEST.replace("  network: none", "  network: none\n  zzz: 1"))
    finding = one(run(repo), "manifest_schema")
    assert finding.key == "image.zzz"
    assert finding.fix == "the keys allowed here: build, caches, dockerfile, env, limits, network"


@pytest.mark.parametrize(
    ("typo", "meant"),
    [
        ("gates", "gate"), ("setup_pathces", "setup_patches"), ("max_turn", "max_turns"),
        ("oracle_paths", "oracle_patch"),
    ],
)  # fmt: skip
def test_a_task_key_spelled_like_a_framework_key_is_a_warning_and_an_error_only_when_strict(
    repo: Repo, typo: str, meant: str
) -> None:
    """The contract gives every key the framework does not read to the repository's grader: a near miss is
    a warning with its did-you-mean, the task stays valid, and only --strict makes it an error."""
    task = repo.task("t1", **{typo: ["x"]})
    repo.add_eval(tasks={"t1": task})
    report = run(repo)
    assert report.valid, [f.text() for f in report.errors]
    finding = one(report, "near_miss_task_keys", "warning")
    assert (finding.key, finding.line) == (typo, task_line(task, typo))
    assert finding.fix == f"did you mean {meant!r}?" and f"spells like {meant!r}" in finding.message
    strict = run(repo, strict=True)
    assert not strict.valid and one(strict, "near_miss_task_keys").key == typo


def test_a_near_miss_key_does_not_stop_the_task_from_loading(repo: Repo) -> None:
    from dokimi.repo.manifest import load_manifest, load_tasks

    repo.add_eval(tasks={"t1": repo.task("t1", oracle_paths=["calc/x.py"])})
    with open_source(str(repo.path)) as opened:
        loaded = load_manifest(
            opened.eval_snapshot(), manifest=MANIFEST_PATH, manifest_file=None, required=True
        )
        assert loaded.manifest is not None
        (task,) = load_tasks(opened.eval_snapshot(), loaded.manifest)
    assert task.task is not None and task.errors == []
    assert [w.key for w in task.warnings] == ["oracle_paths"]


def test_grader_keys_unlike_any_framework_key_pass_through(repo: Repo) -> None:
    repo.add_eval(tasks={"t1": repo.task("t1", gold="gold.json", hidden_files=["a.py"], mutant="m.patch")})
    assert run(repo).valid


BUILTIN_MANIFEST = MANIFEST.replace(
    '  grade: "python3 {eval_dir}/run.py grade --contract {run_dir} --src {source_dir}"\n'
    '  oracle: "python3 {eval_dir}/run.py oracle --contract {run_dir}"\n',
    "  grade: builtin:pytest\n",
)


def _builtin_task(repo: Repo, **extra: Any) -> dict[str, Any]:
    return repo.task(
        "t1", grader="builtin:pytest", oracle_patch="oracle.patch", fail_to_pass=["tests/test_a.py::test_a"],
        **extra,
    )  # fmt: skip


def test_a_builtin_grade_needs_no_oracle_and_its_task_keys_validate(repo: Repo) -> None:
    repo.add_eval(
        BUILTIN_MANIFEST,
        tasks={"t1": _builtin_task(repo, test_patch="tests.patch", pass_to_pass=[])},
        files={f"{EVAL}/tasks/t1/oracle.patch": "x", f"{EVAL}/tasks/t1/tests.patch": "y"},
    )
    report = run(repo)
    assert report.valid, [f.text() for f in report.errors]


def test_with_a_builtin_grade_every_task_key_must_be_known(repo: Repo) -> None:
    repo.add_eval(
        BUILTIN_MANIFEST,
        tasks={"t1": _builtin_task(repo, hidden_files=["a"])},
        files={f"{EVAL}/tasks/t1/oracle.patch": "x"},
    )
    finding = one(run(repo), "builtin_task_keys")
    assert finding.key == "hidden_files" and "a built-in grader reads no other keys" in finding.message


def test_a_builtin_grade_with_a_missing_patch_or_oracle_patch_is_refused(repo: Repo) -> None:
    task = _builtin_task(repo, test_patch="tests.patch")
    del task["oracle_patch"]
    repo.add_eval(BUILTIN_MANIFEST, tasks={"t1": task})
    report = run(repo)
    assert "builtin:oracle needs the task's oracle_patch" in one(report, "builtin_task_keys").message
    assert one(report, "patches_exist").key == "test_patch"


@pytest.mark.parametrize(
    ("grade", "problem"),
    [
        ("builtin:pytets", "did you mean builtin:pytest?"),
        ("builtin:command", "builtin:command needs the command to run"),
        ("builtin:oracle", "builtin:oracle is a oracle entry point, not grade"),
    ],
)
def test_an_unknown_or_misplaced_builtin_is_refused(repo: Repo, grade: str, problem: str) -> None:
    repo.add_eval(BUILTIN_MANIFEST.replace("builtin:pytest", grade), tasks={"t1": _builtin_task(repo)})
    report = run(repo)
    assert any(problem in f.message for f in only(report, "builtin_graders")), [
        f.text() for f in report.errors
    ]


def test_builtin_command_may_name_its_report(repo: Repo) -> None:
    manifest = BUILTIN_MANIFEST.replace("builtin:pytest", '"builtin:command go test -json {report}"')
    repo.add_eval(manifest, tasks={"t1": _builtin_task(repo)}, files={f"{EVAL}/tasks/t1/oracle.patch": "x"})
    assert not only(run(repo), "placeholders")


def test_eval_dir_without_entry_points_is_refused(repo: Repo) -> None:
    text = MANIFEST.split("entry_points:")[0] + "tasks: .agent-eval/tasks\n"
    repo.add_eval(text)
    finding = one(run(repo), "eval_dir_tasks_entry_points_together")
    assert finding.line == 4 and finding.key == "eval_dir"
    assert "given without entry_points" in finding.message


@pytest.mark.parametrize(
    ("value", "fragment"),
    [(".", "is the repository root"), ("../outside", "leaves the repository"), ("/abs", "is absolute")],
)
def test_eval_dir_must_be_a_proper_subdirectory(repo: Repo, value: str, fragment: str) -> None:
    repo.add_eval(MANIFEST.replace("eval_dir: .agent-eval", f"eval_dir: {value}"))
    finding = one(run(repo), "eval_dir_is_proper_subdirectory")
    assert finding.line == 4 and fragment in finding.message


def test_eval_dir_missing_from_the_eval_tree_is_an_error(repo: Repo) -> None:
    repo.add_eval(MANIFEST.replace("eval_dir: .agent-eval", "eval_dir: nowhere"))
    report = run(repo)
    assert "'nowhere' does not exist" in one(report, "eval_dir_is_proper_subdirectory").message
    assert "not inside eval_dir" in one(report, "tasks_inside_eval_dir").message


def test_tasks_outside_eval_dir_are_refused(repo: Repo) -> None:
    repo.add_eval(MANIFEST.replace("tasks: .agent-eval/tasks", "tasks: tasks"))
    finding = one(run(repo), "tasks_inside_eval_dir")
    assert (finding.line, finding.key) == (16, "tasks")
    assert "'tasks' is not inside eval_dir '.agent-eval'" in finding.message


def test_explore_tasks_must_sit_inside_eval_dir(repo: Repo) -> None:
    repo.add_eval(MANIFEST + "explore_tasks: explore\n", files={"explore/a.yaml": "x: 1\n"})
    finding = one(run(repo), "tasks_inside_eval_dir")
    assert finding.key == "explore_tasks" and finding.line == 18


def test_image_and_explore_tasks_need_eval_dir(repo: Repo) -> None:
    text = "schema: repo_manifest.v1\nid: g\nimage: {dockerfile: Dockerfile}\nexplore_tasks: x\n"
    repo.add_eval(text, tasks={})
    report = run(repo)
    found = only(report, "image_needs_eval_dir")
    assert [(f.key, f.line) for f in found] == [("image", 3), ("explore_tasks", 4)]


def test_a_missing_dockerfile_is_an_error(repo: Repo) -> None:
    repo.add_eval(MANIFEST.replace(".agent-eval/Dockerfile", ".agent-eval/Dockerfile.gone"))
    finding = one(run(repo), "image_dockerfile")
    assert (finding.line, finding.key) == (8, "image.dockerfile")


def test_a_cache_path_must_be_absolute_and_outside_eval(repo: Repo) -> None:
    text = MANIFEST.replace("path: /cache/bazel-disk}", "path: cache}\n    - {name: c2, path: /eval/c}")
    repo.add_eval(text)
    found = only(run(repo), "image_caches")
    assert [(f.key, f.line) for f in found] == [("image.caches[0].path", 10), ("image.caches[1].path", 11)]
    assert "not an absolute path" in found[0].message and "fixed paths" in found[1].message


def test_an_env_name_must_be_a_variable_name(repo: Repo) -> None:
    repo.add_eval(MANIFEST.replace("env: {OUT_BASE:", "env: {1OUT:"))
    assert one(run(repo), "image_env_names").key == "image.env.1OUT"


def test_an_empty_entry_point_is_an_error(repo: Repo) -> None:
    repo.add_eval(
        MANIFEST.replace('oracle: "python3 {eval_dir}/run.py oracle --contract {run_dir}"', 'oracle: ""')
    )
    finding = one(run(repo), "entry_point_commands")
    assert (finding.line, finding.key) == (15, "entry_points.oracle")


def test_an_unknown_placeholder_is_refused_and_shell_variables_are_not_placeholders(repo: Repo) -> None:
    text = MANIFEST.replace("oracle --contract {run_dir}", "oracle --contract {rundir} --home ${HOME} {1..3}")
    repo.add_eval(text + "tests: {list: 'ls {task} {workspace}'}\n")
    found = only(run(repo), "placeholders")
    assert [(f.key, f.line) for f in found] == [("entry_points.oracle", 15), ("tests.list", 18)]
    assert "unknown placeholder {rundir}" in found[0].message
    assert "unknown placeholder {workspace}" in found[1].message


def test_perf_may_use_the_variant_placeholder(repo: Repo) -> None:
    text = MANIFEST.replace(
        "tasks: .agent-eval/tasks",
        '  perf: "bench --variant {variant} --out {out}"\ntasks: .agent-eval/tasks',
    )
    repo.add_eval(text)
    assert only(run(repo), "placeholders") == []


def test_source_dir_is_allowed_only_in_grade_and_oracle(repo: Repo) -> None:
    text = MANIFEST.replace(
        "tasks: .agent-eval/tasks", '  static: "check {source_dir} --out {out}"\ntasks: .agent-eval/tasks'
    )
    text = text.replace(
        'env: {OUT_BASE: "{run_dir}/ob"}', 'env: {OUT_BASE: "{run_dir}/ob", SRC: "{source_dir}"}'
    )
    repo.add_eval(text)
    found = only(run(repo), "source_dir_only_in_grade_and_oracle")
    assert [(f.key, f.line) for f in found] == [("image.env.SRC", 11), ("entry_points.static", 16)]


def test_source_dir_needs_source_url(repo: Repo) -> None:
    repo.add_eval(MANIFEST.replace("source: {url: https://example.invalid/demo.git}\n", ""))
    finding = one(run(repo), "source_dir_needs_source_url")
    assert (finding.line, finding.key) == (13, "entry_points.grade")
    assert "source.url is not set" in finding.message


@pytest.mark.parametrize(
    ("value", "fragment"),
    [
        ("{run_dir}/agent-git", "{run_dir}/agent-git is a framework entry"),
        ("{run_dir}/workspace/x", "{run_dir}/workspace is a framework entry"),
        ("{run_dir}", "names {run_dir} itself"),
        ("{run_dir}/../escape", "'..' is not a plain name"),
        ("/opt/x:{run_dir}/ob:{run_dir}/home", "{run_dir}/home is a framework entry"),
    ],
)
def test_image_env_values_under_run_dir_are_plain_names(repo: Repo, value: str, fragment: str) -> None:
    repo.add_eval(MANIFEST.replace('"{run_dir}/ob"', json.dumps(value)))
    finding = one(run(repo), "image_env_run_dir_values")
    assert (finding.line, finding.key) == (11, "image.env.OUT_BASE")
    assert fragment in finding.message


def test_plain_names_under_run_dir_are_accepted(repo: Repo) -> None:
    repo.add_eval(MANIFEST.replace('"{run_dir}/ob"', '"{run_dir}/ob/sub:{run_dir}/bazel-out"'))
    assert only(run(repo), "image_env_run_dir_values") == []


def test_globs_outside_the_dialect_are_refused(repo: Repo) -> None:
    repo.add_eval(
        MANIFEST.replace('globs: ["**/AGENTS.md"]', 'globs: ["**/AGENTS.md", "/abs.md", "{a,b}.md"]')
    )
    found = only(run(repo), "glob_syntax")
    assert [f.key for f in found] == ["guidance.globs[1]", "guidance.globs[2]"]
    assert "is absolute" in found[0].message and "braces" in found[1].message


def test_an_unknown_build_system_is_refused(repo: Repo) -> None:
    repo.add_eval(MANIFEST.replace("build_systems: [make]", "build_systems: [make, bazle]"))
    finding = one(run(repo), "build_systems_known")
    assert (finding.line, finding.key) == (17, "build_systems[1]")
    assert "unknown build system 'bazle'" in finding.message and "bazel" in (finding.fix or "")


def test_an_empty_tests_block_warns(repo: Repo) -> None:
    repo.add_eval(MANIFEST + "tests: {}\n")
    report = run(repo)
    assert report.valid
    assert one(report, "tests_block", "warning").line == 18


def test_a_full_tests_block_is_accepted(repo: Repo) -> None:
    text = MANIFEST + (
        "tests:\n  globs: ['**/test_*']\n  config_globs: ['**/conftest.py']\n"
        "  list: 'pytest --collect-only -q'\n"
    )
    repo.add_eval(text)
    report = run(repo)
    assert report.valid and report.warnings == []


def test_pilot_tasks_must_be_tasks_of_the_tasks_directory(repo: Repo) -> None:
    repo.add_eval(MANIFEST + "pilot:\n  tasks: [t1, t9]\n")
    finding = one(run(repo), "pilot_tasks_exist")
    assert (finding.line, finding.key) == (19, "pilot.tasks[1]")
    assert "'t9' is not a task" in finding.message and "t1" in (finding.fix or "")


def test_a_pilot_naming_known_tasks_is_valid(repo: Repo) -> None:
    repo.add_eval(MANIFEST + "pilot:\n  tasks: [t1]\n  reps: 2\n")
    report = run(repo)
    assert report.valid and report.warnings == []


@pytest.mark.parametrize(
    ("pilot", "fragment"),
    [("{tasks: []}", "at least 1"), ("{tasks: [t1, t1]}", "appear(s) twice"), ("{tasks: [t1], reps: 0}", "")],
)
def test_a_malformed_pilot_block_is_refused(repo: Repo, pilot: str, fragment: str) -> None:
    repo.add_eval(MANIFEST + f"pilot: {pilot}\n")
    report = run(repo)
    assert not report.valid
    assert any(fragment in f.message for f in report.errors), [f.text() for f in report.errors]


# --- task rules --------------------------------------------------------------------------------------------


def test_a_task_directory_without_task_json_warns(repo: Repo) -> None:
    repo.add_eval(files={f"{EVAL}/tasks/draft/README.md": "later\n"})
    report = run(repo)
    assert report.valid
    finding = one(report, "task_dirs_have_task_json", "warning")
    assert finding.task == "draft" and "has no task.json" in finding.message


def test_duplicate_keys_in_task_json_are_an_error(repo: Repo) -> None:
    text = '{\n  "id": "t1",\n  "family": "fix",\n  "family": "build",\n  "base": "x"\n}\n'
    repo.add_eval(tasks={"t1": text})
    finding = one(run(repo), "task_json_parses")
    assert (finding.file, finding.line, finding.task) == (f"{EVAL}/tasks/t1/task.json", 4, "t1")
    assert "duplicate key 'family'" in finding.message


@pytest.mark.parametrize(
    ("content", "fragment"),
    [
        ("{not json", "not valid JSON"),
        (b"\x00\x01binary\xff", "binary data"),
        ("[1, 2]", "must be a JSON object"),
    ],
)
def test_a_task_json_that_is_not_a_json_object_is_an_error(
    repo: Repo, content: str | bytes, fragment: str
) -> None:
    repo.add_eval(tasks={"t1": content})
    assert fragment in one(run(repo), "task_json_parses").message


def test_the_task_id_must_equal_its_directory(repo: Repo) -> None:
    task = repo.task("t-other")
    repo.add_eval(tasks={"t1": task})
    finding = one(run(repo), "task_id_equals_directory")
    assert (finding.line, finding.key, finding.task) == (task_line(task, "id"), "id", "t1")
    assert "'t-other' differs from its directory name 't1'" in finding.message


def test_required_keys_must_be_present_and_strings(repo: Repo) -> None:
    task = repo.task("t1", grader=7)
    del task["prompt"]
    repo.add_eval(tasks={"t1": task})
    found = only(run(repo), "required_keys")
    assert sorted(f.message for f in found) == [
        "must be a non-empty string, not 7",
        "required key 'prompt' is missing",
    ]
    by_key = {f.key: f for f in found}
    assert by_key["grader"].line == task_line(task, "grader")
    assert by_key[None].line == 1


@pytest.mark.parametrize("ref", ["v1.0", "main", "HEAD", "HEAD~1"])
def test_branches_tags_and_head_are_refused_even_when_they_resolve(repo: Repo, ref: str) -> None:
    git(repo.path, "tag", "v1.0", repo.c1)
    task = repo.task("t1", base=ref)
    repo.add_eval(tasks={"t1": task})
    report = run(repo)
    finding = one(report, "base_form")
    assert (finding.line, finding.key) == (task_line(task, "base"), "base")
    assert f"{ref!r} is not a hex SHA" in finding.message
    assert only(report, "base_resolves") == []


def test_a_short_sha_warns_and_still_resolves(repo: Repo) -> None:
    repo.add_eval(tasks={"t1": repo.task("t1", base=repo.c1[:10])})
    report = run(repo)
    assert report.valid and report.bases == 1
    finding = one(report, "base_form", "warning")
    assert "is a short SHA (10 characters)" in finding.message


def test_an_uppercase_sha_is_refused(repo: Repo) -> None:
    repo.add_eval(tasks={"t1": repo.task("t1", base=repo.c1.upper())})
    assert "not a hex SHA" in one(run(repo), "base_form").message


def test_a_base_that_does_not_resolve_names_the_task_file_and_line(repo: Repo) -> None:
    task = repo.task("t1", base="0123456789abcdef0123456789abcdef01234567")
    repo.add_eval(tasks={"t1": task, "t2": repo.task("t2")})
    finding = one(run(repo), "base_resolves")
    assert finding.text().startswith(f"error: {EVAL}/tasks/t1/task.json:{task_line(task, 'base')}: base: ")
    assert "does not resolve" in finding.message and "fetch full history or fix the sha" in (
        finding.fix or ""
    )


def test_a_task_at_the_parent_of_a_sha_resolves(repo: Repo) -> None:
    repo.add_eval(tasks={"t1": repo.task("t1", base=f"{repo.c2}^")})
    report = run(repo)
    assert report.valid and report.bases == 1


def test_the_parent_of_a_root_commit_does_not_resolve(repo: Repo) -> None:
    repo.add_eval(tasks={"t1": repo.task("t1", base=f"{repo.c1}^")})
    assert "has no parent" in one(run(repo), "base_resolves").message


def test_a_plain_directory_cannot_resolve_bases(repo: Repo, tmp_path: Path) -> None:
    repo.add_eval()
    plain = tmp_path / "plain"
    import shutil

    shutil.copytree(repo.path, plain, ignore=shutil.ignore_patterns(".git"))
    report = run(repo, source=str(plain))
    assert "not a git repository" in one(report, "base_resolves").message


@pytest.mark.parametrize(
    ("extra", "key", "fragment"),
    [
        ({"gate": [{"metric": "recall"}]}, "gate[0]", 'needs a finite number "min"'),
        ({"gate": [{"metric": "r", "min": 1, "max": 2}]}, "gate[0].max", "unknown key"),
        ({"gate": [3]}, "gate[0]", "neither a metric name"),
        ({"gate": "pass"}, "gate", "must be a list"),
        ({"gate": []}, "gate", "nothing decides the result"),
        ({"score": {"metric": "recall", "max": "1.0"}}, "score.max", 'needs a finite number "max"'),
        ({"score": {"max": 1.0}}, "score", 'needs a non-empty "metric"'),
    ],
)
def test_gate_and_score_forms(repo: Repo, extra: dict[str, Any], key: str, fragment: str) -> None:
    repo.add_eval(tasks={"t1": repo.task("t1", **extra)})
    finding = one(run(repo), "gate_and_score_forms")
    assert finding.key == key and fragment in finding.message


def test_a_score_only_task_may_have_an_empty_gate(repo: Repo) -> None:
    repo.add_eval(
        tasks={"t1": repo.task("t1", gate=[], score={"metric": "recall", "max": 1.0}, mode="review")}
    )
    assert run(repo).valid


def test_gate_mergeable_without_a_rubric_warns(repo: Repo) -> None:
    repo.add_eval(tasks={"t1": repo.task("t1", gate=["strict_pass", "mergeable"])})
    report = run(repo)
    assert report.valid
    assert one(report, "mergeable_gate_has_rubric", "warning").key == "gate[1]"


@pytest.mark.slow
@pytest.mark.parametrize(
    ("key", "value", "fragment"),
    [
        ("timeout_s", 0, "finite number > 0"),
        ("timeout_s", -5, "finite number > 0"),
        ("timeout_s", "600", "finite number > 0"),
        ("budget_usd", True, "finite number > 0"),
        ("max_turns", 2.5, "whole number"),
    ],
)
def test_caps_are_finite_positive_numbers(repo: Repo, key: str, value: Any, fragment: str) -> None:
    task = repo.task("t1", **{key: value})
    repo.add_eval(tasks={"t1": task})
    finding = one(run(repo), "caps_finite_positive")
    assert (finding.key, finding.line) == (key, task_line(task, key)) and fragment in finding.message


def test_an_infinite_cap_is_refused(repo: Repo) -> None:
    text = json.dumps(repo.task("t1"), indent=2)[:-2] + ',\n  "budget_usd": Infinity\n}'
    repo.add_eval(tasks={"t1": text})
    assert one(run(repo), "caps_finite_positive").key == "budget_usd"


def test_setup_patch_and_setup_patches_together_are_refused(repo: Repo) -> None:
    files = {f"{EVAL}/tasks/t1/a.patch": "x\n"}
    repo.add_eval(
        tasks={"t1": repo.task("t1", setup_patch="a.patch", setup_patches=["a.patch"])}, files=files
    )
    assert "both given" in one(run(repo), "setup_patch_synonym").message


def test_patches_are_read_relative_to_the_task_directory(repo: Repo) -> None:
    files = {f"{EVAL}/tasks/t1/bug.patch": "x\n", f"{EVAL}/shared/review.patch": "y\n"}
    task = repo.task("t1", setup_patch="bug.patch", review_patch="../../shared/review.patch")
    repo.add_eval(tasks={"t1": task}, files=files)
    assert run(repo).valid


def test_a_missing_patch_is_an_error(repo: Repo) -> None:
    task = repo.task("t1", setup_patches=["bug.patch"], review_patch="../../../src/a.py")
    repo.add_eval(tasks={"t1": task})
    found = only(run(repo), "patches_exist")
    assert [f.key for f in found] == ["setup_patches[0]", "review_patch"]
    assert f"no file {EVAL}/tasks/t1/bug.patch" in found[0].message
    assert "outside eval_dir" in found[1].message


@pytest.mark.slow
@pytest.mark.parametrize(
    ("host", "fragment"),
    [
        ("*", "at least two labels"),
        ("*.org", "last two labels must be literal"),
        ("pypi.*", "last two labels must be literal"),
        ("py*.org", "must be one whole label"),
        ("https://pypi.org", "not a URL"),
        ("pypi.org:99999", "port"),
        ("pypi..org", "not a DNS label"),
    ],
)
def test_egress_hosts_are_dns_names_with_literal_last_two_labels(
    repo: Repo, host: str, fragment: str
) -> None:
    repo.add_eval(tasks={"t1": repo.task("t1", egress=["pypi.org", host])})
    finding = one(run(repo), "egress_hosts")
    assert finding.key == "egress[1]" and fragment in finding.message


def test_good_egress_hosts_pass(repo: Repo) -> None:
    hosts = ["pypi.org", "files.pythonhosted.org:443", "*.pythonhosted.org", "a.*.example.com"]
    repo.add_eval(tasks={"t1": repo.task("t1", egress=hosts)})
    assert run(repo).valid


def test_mode_and_prompt_style_take_their_documented_values(repo: Repo) -> None:
    repo.add_eval(tasks={"t1": repo.task("t1", mode="solo", prompt_style="issue", effort="high")})
    finding = one(run(repo), "mode_values")
    assert finding.key == "mode" and "'solo' is not one of interactive, autonomous, review" in finding.message


def test_unknown_task_keys_belong_to_the_repository(repo: Repo) -> None:
    repo.add_eval(tasks={"t1": repo.task("t1", hidden_files=["x"], targets={"a": 1})})
    assert run(repo).valid


# --- guidance at every base --------------------------------------------------------------------------------


def test_a_guidance_file_deleted_after_a_base_counts_at_that_base(repo: Repo) -> None:
    text = MANIFEST.replace('globs: ["**/AGENTS.md"]', 'globs: ["**/AGENTS.md", "old/AGENTS.md"]')
    repo.add_eval(text, tasks={"t1": repo.task("t1", base=repo.c1), "t2": repo.task("t2", base=repo.c2)})
    report = run(repo)
    assert report.valid and report.warnings == []
    assert report.guidance_files == 2 and report.bases == 2


def test_a_glob_matching_nothing_at_every_base_warns(repo: Repo) -> None:
    text = MANIFEST.replace(
        'globs: ["**/AGENTS.md"]', 'globs: ["**/AGENTS.md", "old/AGENTS.md", "**/CLAUDE.md"]'
    )
    repo.add_eval(
        text, tasks={"t1": repo.task("t1", base=repo.c2)}, files={"old/AGENTS.md": "back in the eval tree"}
    )
    report = run(repo)
    assert report.valid
    found = only(report, "guidance_globs_at_every_base", "warning")
    assert [(f.key, f.line) for f in found] == [("guidance.globs[1]", 6), ("guidance.globs[2]", 6)]
    assert "matches nothing at the task base" in found[0].message


def test_the_default_globs_matching_nothing_do_not_warn(repo: Repo) -> None:
    """A manifest without guidance.globs gets dokimi's defaults, the files of every supported harness (skills
    included): most match nothing in a repository, which is no warning."""
    text = MANIFEST.replace('guidance:\n  globs: ["**/AGENTS.md"]\n', "")
    assert "guidance" not in text
    repo.add_eval(text, tasks={"t1": repo.task("t1", base=repo.c2)})
    report = run(repo)
    assert report.valid
    assert only(report, "guidance_globs_at_every_base", "warning") == []


def test_a_guidance_only_manifest_is_checked_at_the_eval_tree(repo: Repo) -> None:
    text = "schema: repo_manifest.v1\nid: g\nguidance:\n  globs: ['**/AGENTS.md', 'docs/*.md']\n"
    repo.add_eval(text, tasks={})
    report = run(repo)
    assert report.valid and report.guidance_only and (report.tasks, report.bases) == (0, 0)
    assert one(report, "guidance_globs_at_every_base", "warning").key == "guidance.globs[1]"


@pytest.mark.slow
def test_a_missing_also_scan_file_warns(repo: Repo) -> None:
    repo.add_eval(
        MANIFEST.replace('globs: ["**/AGENTS.md"]', 'globs: ["**/AGENTS.md"]\n  also_scan: [CONTRIBUTING.md]')
    )
    finding = one(run(repo), "also_scan_exists", "warning")
    assert (finding.key, finding.line) == ("guidance.also_scan[0]", 7)


def test_findings_render_as_file_line_key_message_fix_code() -> None:
    finding = Finding(
        severity="error",
        code="base_resolves",
        message="'abc123' does not resolve",
        file="eval/repo-eval.yaml",
        line=14,
        key="tasks[2].base",
        fix="fetch full history or fix the sha",
    )
    assert finding.text() == (
        "error: eval/repo-eval.yaml:14: tasks[2].base: 'abc123' does not resolve; "
        "fetch full history or fix the sha [base_resolves]"
    )


# --- batched git: the number of git processes does not grow with tasks or files ---------------------------


class _GitSpy:
    """Records every child process dokimi starts; the real ``subprocess.Popen`` still runs (a spy)."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch) -> None:
        import subprocess

        self.argvs: list[list[str]] = []
        real = subprocess.Popen
        argvs = self.argvs

        class Spy(real):  # type: ignore[misc,valid-type]
            def __init__(self, args: Any, *a: Any, **kw: Any) -> None:
                argvs.append([str(x) for x in args])
                super().__init__(args, *a, **kw)

        monkeypatch.setattr(subprocess, "Popen", Spy)

    def git_commands(self) -> list[str]:
        """The git subcommand of each call (after git's own ``-c``/``--git-dir`` options)."""
        out = []
        for argv in self.argvs:
            assert argv[0] == "git", argv
            rest = argv[1:]
            while rest and rest[0] in ("-c", "--git-dir"):
                rest = rest[2:]
            out.append(rest[0])
        return out


def _bases_and_tasks(path: Path, *, files: int, tasks: int) -> Path:
    """A repository with ``files`` extra files, 3 bases, and ``tasks`` tasks (each with a setup patch)
    spread over those bases, the last commit adding the eval dir."""
    code = {f"src/m{i:03d}.py": f"x = {i}\n" for i in range(files)}
    repo = git_repo(path, {"AGENTS.md": "root\n", "old/AGENTS.md": "old\n", **code})
    bases = [git(repo, "rev-parse", "HEAD").strip()]
    bases.append(commit(repo, "b2", files={"old/AGENTS.md": None, "src/b2.py": "b\n"}))
    bases.append(commit(repo, "b3", files={"src/b3.py": "c\n"}))
    content: dict[str, str | bytes | None] = {
        MANIFEST_PATH: MANIFEST.replace('"**/AGENTS.md"]', '"**/AGENTS.md", "old/AGENTS.md"]'),
        f"{EVAL}/Dockerfile": "FROM dokimi-base:bookworm\n",
        f"{EVAL}/run.py": "print('grade')\n",
    }
    for t in range(tasks):
        task = {
            "id": f"t{t:02d}",
            "family": "fix",
            "base": bases[t % 3] + ("^" if t % 3 == 1 and t % 2 else ""),
            "prompt": "fix it",
            "grader": "test_pass",
            "setup_patch": "bug.patch",
        }
        content[f"{EVAL}/tasks/t{t:02d}/task.json"] = json.dumps(task, indent=2)
        content[f"{EVAL}/tasks/t{t:02d}/bug.patch"] = "diff\n"
    commit(repo, "add eval", files=content)
    return repo


@pytest.mark.slow
@pytest.mark.parametrize("source_kind", ["commit", "worktree", "blobless_url"])
def test_validate_starts_the_same_git_processes_for_10_tasks_as_for_30_tasks_and_10x_the_files(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, source_kind: str
) -> None:
    """One listing, one diff-tree for all bases, one batch resolve, one ``cat-file --batch`` per snapshot:
    never a process per file or per task."""
    calls = {}
    for name, files, tasks in (("small", 5, 10), ("large", 50, 30)):
        repo = _bases_and_tasks(tmp_path / name, files=files, tasks=tasks)
        source = {"commit": f"{repo}@HEAD", "worktree": str(repo)}.get(source_kind, "")
        if source_kind == "blobless_url":  # every blob read must arrive in one fetch, not one per file
            bare = bare_clone_for_serving(repo, tmp_path / f"{name}.git")
            source = f"file://{bare}@{git(repo, 'rev-parse', 'HEAD').strip()}"
        with monkeypatch.context() as patch:
            spy = _GitSpy(patch)
            with open_source(source) as opened:
                report = validate_repo(opened, manifest=MANIFEST_PATH)
        assert report.valid, [f.text() for f in report.errors]
        assert report.bases == 3 and report.warnings == []
        calls[name] = spy.git_commands()
    assert calls["small"] == calls["large"], calls
    assert calls["small"].count("cat-file") <= 2  # one batch resolve of every base, one --batch reader
    assert sum(argv[-1] == "--batch" for argv in spy.argvs) <= 1
    assert calls["small"].count("ls-tree") <= 1  # the eval tree (or, for a working tree, the first base)
    assert calls["small"].count("diff-tree") == 1  # every other base against it


@pytest.mark.slow
@pytest.mark.parametrize("source_kind", ["commit", "worktree"])
def test_the_union_of_paths_over_bases_equals_one_ls_tree_per_base(tmp_path: Path, source_kind: str) -> None:
    """One diff-tree against a reference tree gives the same union as listing every base on its own: a path
    deleted at some bases, added at one, only in the eval tree, or renamed."""
    import itertools

    from dokimi.checks.validate import Context

    path = git_repo(tmp_path / "r", {"keep.md": "k\n", "gone_later.md": "g\n", "dir/AGENTS.md": "a\n"})
    shas = [git(path, "rev-parse", "HEAD").strip()]
    shas.append(commit(path, "b", files={"gone_later.md": None, "new.md": "n\n"}))
    shas.append(commit(path, "c", files={"dir/AGENTS.md": None, "moved/AGENTS.md": "a\n", "new.md": None}))
    shas.append(commit(path, "d", files={"only_at_d/x.md": "x\n"}))
    commit(path, "eval", files={"only_at_d/x.md": None, "eval_only.md": "e\n", MANIFEST_PATH: MANIFEST})
    source = f"{path}@HEAD" if source_kind == "commit" else str(path)
    with open_source(source) as opened:
        snapshot = opened.eval_snapshot()
        ctx = Context(opened, snapshot, MANIFEST_PATH, Marked({}, MANIFEST_PATH), False)
        for n in range(1, len(shas) + 1):
            for bases in itertools.combinations(shas, n):
                expected: set[str] = set()
                for sha in bases:
                    expected.update(git(path, "ls-tree", "-r", "--name-only", sha).split())
                assert ctx.union_of_paths_at(list(bases)) == expected, bases


@pytest.mark.slow
def test_no_fail_to_pass_ids_warn_unless_the_command_grades_by_exit_code(repo: Repo) -> None:
    task = repo.task("t1", grader="builtin:pytest", oracle_patch="oracle.patch")
    repo.add_eval(BUILTIN_MANIFEST, tasks={"t1": task}, files={f"{EVAL}/tasks/t1/oracle.patch": "x"})
    warning = one(run(repo), "builtin_task_keys", severity="warning")
    assert "no fail_to_pass ids" in warning.message
    command = BUILTIN_MANIFEST.replace("builtin:pytest", '"builtin:command make test"')
    repo.add_eval(command, tasks={"t1": task}, files={f"{EVAL}/tasks/t1/oracle.patch": "x"})
    assert not only(run(repo), "builtin_task_keys", severity="warning")


def test_rater_materials_are_criteria_and_commands_that_split(repo: Repo) -> None:
    task = repo.task(
        "t1",
        acceptance_criteria=["f.txt says after", "  "],
        validation_commands=["pytest -q", "echo 'unclosed"],
        hidden_validation_commands=["sh -c 'exit 0'"],
    )
    repo.add_eval(tasks={"t1": task})
    found = run(repo)
    criterion = one(found, "acceptance_criteria")
    assert (criterion.key, criterion.line) == (
        "acceptance_criteria[1]",
        task_line(task, "acceptance_criteria") + 2,
    )
    assert "empty" in criterion.message
    command = one(found, "validation_commands")
    assert command.key == "validation_commands[1]" and "cannot be split into words" in command.message


def test_good_rater_materials_pass(repo: Repo) -> None:
    task = repo.task(
        "t1",
        acceptance_criteria=["f.txt says after"],
        validation_commands=["pytest -q tests"],
        hidden_validation_commands=["sh -c 'pytest -q hidden'"],
    )
    repo.add_eval(tasks={"t1": task})
    assert run(repo).valid
