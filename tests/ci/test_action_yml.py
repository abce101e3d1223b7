"""action.yml has the shape GitHub runs and dokimi's script expects: a composite action whose every input is
described, used and passed to the script through the environment (never spliced into a shell line), whose
every action is pinned by a full commit SHA, and whose outputs are the ones the script writes."""

from __future__ import annotations

import re

import click

from dokimi.ci.action import ActionOutcome, ActionSettings, write_outputs
from dokimi.cli.ci import pull_request
from tests.helpers.github_stand_in import ACTION, action, action_step

PINNED = re.compile(r"^[A-Za-z0-9_.-]+/[A-Za-z0-9_./-]+@[0-9a-f]{40}$")
EXPRESSION = re.compile(r"\$\{\{\s*([^}]*?)\s*\}\}")


def test_the_action_is_a_composite_with_described_inputs_and_outputs() -> None:
    doc = action()
    assert {"name", "description", "inputs", "outputs", "runs"} <= set(doc)
    assert doc["runs"]["using"] == "composite"
    for name, spec in doc["inputs"].items():
        assert spec.get("description"), name
        assert "default" in spec and spec.get("required") is False, name
    for name, spec in doc["outputs"].items():
        assert spec.get("description") and spec["value"] == f"${{{{ steps.dokimi.outputs.{name} }}}}", name


def test_every_action_it_uses_is_pinned_by_a_full_commit_sha() -> None:
    uses = [step["uses"] for step in action()["runs"]["steps"] if "uses" in step]
    assert uses, "the action sets up Python with actions/setup-python"
    assert [u for u in uses if not PINNED.match(u)] == []
    text = ACTION.read_text()
    for use in uses:  # the version the SHA stands for is said beside it
        assert re.search(re.escape(use) + r" # v\d+\.\d+\.\d+$", text, re.M), use


def test_inputs_reach_the_script_through_the_environment_only() -> None:
    doc = action()
    used: set[str] = set()
    for step in doc["runs"]["steps"]:
        if "run" in step:
            assert step.get("shell") == "bash"
            assert "${{" not in step["run"], f"an expression spliced into a shell line: {step['run']}"
        for value in [*step.get("env", {}).values(), *step.get("with", {}).values()]:
            used |= {
                m.removeprefix("inputs.") for m in EXPRESSION.findall(str(value)) if m.startswith("inputs.")
            }
    assert used == set(doc["inputs"]), "every input is used, and only declared ones"


def test_the_step_sets_the_variables_the_script_reads() -> None:
    step = action_step()
    envvars = {p.envvar for p in pull_request.params if isinstance(p, click.Option) and p.envvar}
    token_env = step["run"].split("--token-env ", 1)[1].split()[0]
    assert set(step["env"]) - {token_env} <= envvars
    assert {n for n in envvars if n.startswith("DOKIMI_CI_")} <= set(step["env"])
    assert step["run"].startswith("python -m dokimi ci pull-request")


def test_the_outputs_are_the_ones_the_script_writes(tmp_path) -> None:  # type: ignore[no-untyped-def]
    out = tmp_path / "out"
    settings = ActionSettings(repo_dir=tmp_path, repository="a/b", event_name="pull_request", output_file=out)
    write_outputs(settings, ActionOutcome("scan", 7, "b" * 40, "a" * 40, new_failures=2))
    written = dict(line.split("=", 1) for line in out.read_text().splitlines())
    assert set(action()["outputs"]) <= set(written)
    assert written["new-failures"] == "2" and written["mode"] == "scan"
