"""The rubric judge through each harness that can judge: the real Claude Code (2.1.328), Codex (0.169.0) and
Gemini CLI (0.61.0) CLIs against the scripted model server, each speaking its own API.

The same rendered input and the same scripted answers give the same verdicts under every harness; each
harness is isolated the way its profile's judge block says (no tools reach the wire, the prompt on stdin).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from dokimi.checks.merge.judge import JudgeOptions, JudgeVerdict, render_judge_input, run_judge
from dokimi.errors import UsageError
from dokimi.harness.profile import load_profile
from dokimi.schemas.rubric import RepoRubric
from dokimi.support.mockmodel import CapturedRequest, MockModelServer
from tests.checks.merge.test_judge_harness import ALT, LAZY, RUBRIC, answer

pytestmark = pytest.mark.harness

#: harness -> (fixture of its pinned CLI, a full model id of its vendor, its endpoint and key variables)
JUDGES: dict[str, tuple[str, str, tuple[str, str]]] = {
    "claude-code": ("claude_bin", "claude-haiku-4-5", ("ANTHROPIC_BASE_URL", "ANTHROPIC_API_KEY")),
    "codex": ("codex_bin", "gpt-5-mini", ("OPENAI_BASE_URL", "OPENAI_API_KEY")),
    "gemini-cli": ("gemini_bin", "gemini-2.5-flash", ("GOOGLE_GEMINI_BASE_URL", "GEMINI_API_KEY")),
}
#: The wire path of each harness's model API (docs/mock-model.md).
API_PATHS = {"claude-code": "/v1/messages", "codex": "/responses", "gemini-cli": ":streamGenerateContent"}


def options(harness: str, request: pytest.FixtureRequest, server: MockModelServer, **kw: Any) -> JudgeOptions:
    fixture, _, (endpoint, key) = JUDGES[harness]
    binary = Path(request.getfixturevalue(fixture))
    if harness == "gemini-cli":
        request.getfixturevalue("node_bin")  # the pinned Node must be installed: the judge runs on it
    return JudgeOptions(
        bin=binary.resolve() if harness == "gemini-cli" else binary,
        profile=harness,
        environ={"PATH": "/usr/local/bin:/usr/bin:/bin"},
        extra_env={endpoint: server.url, key: "dokimi-test"},
        timeout=180,
        **kw,
    )


def main_loop(server: MockModelServer) -> list[CapturedRequest]:
    return [r for r in server.requests if r.main_loop]


def offered_tools(harness: str, body: dict[str, Any]) -> set[str]:
    """The tool names a request offers the model, in its API's shape."""
    tools = body.get("tools") or []
    if harness == "gemini-cli":
        return {d["name"] for t in tools for d in t.get("functionDeclarations", [])}
    return {t.get("name") or t.get("type") for t in tools}


def judged(verdict: JudgeVerdict) -> list[tuple[str, str, str]]:
    return [(i.id, i.verdict, i.reason) for i in verdict.items]


@pytest.fixture
def rubric() -> RepoRubric:
    return RepoRubric.model_validate(RUBRIC)


def test_every_judge_harness_gives_claude_codes_verdicts_on_the_same_scripted_answers(
    rubric: RepoRubric, request: pytest.FixtureRequest
) -> None:
    """Checked by issue 26: a codex-run judge whose verdicts match Claude Code's (and a Gemini CLI one)."""
    judge_input = render_judge_input("Fix add.", rubric, LAZY.split("targets: B1\n", 1)[1])
    verdicts: dict[str, JudgeVerdict] = {}
    for harness, (_, model, _) in JUDGES.items():
        with MockModelServer([{"final": answer("fail", n1="fail")}]) as server:
            verdicts[harness] = run_judge(judge_input, model=model, options=options(harness, request, server))
            requests = main_loop(server)
        verdict = verdicts[harness]
        assert verdict.ok, f"{harness}: {verdict.failure}"
        assert verdict.harness == harness and verdict.calls == 1
        assert len(requests) == 1 and API_PATHS[harness] in requests[0].path, harness
        sent = requests[0].raw.decode("utf-8")
        assert f"<<<CHANGE-{judge_input.nonce} END>>>" in sent, harness  # the whole prompt came on stdin
        assert f"<<<VERDICT-{judge_input.nonce}>>>" in sent, harness
        assert "+        return 5" in sent, harness
        tools = offered_tools(harness, requests[0].body)
        assert tools <= {"request_user_input", "view_image"}, f"{harness} offered tools: {tools}"
    reference = judged(verdicts["claude-code"])
    assert [(i, v) for i, v, _ in reference] == [("B1", "fail"), ("B2", "pass"), ("N1", "fail")]
    assert judged(verdicts["codex"]) == reference
    assert judged(verdicts["gemini-cli"]) == reference
    assert verdicts["codex"].blockers_failed() == verdicts["claude-code"].blockers_failed() == ["B1"]


@pytest.mark.parametrize("harness", ["codex", "gemini-cli"])
def test_a_reason_arguing_the_other_way_is_judged_again_under_any_harness(
    harness: str, rubric: RepoRubric, request: pytest.FixtureRequest, tmp_path: Path
) -> None:
    judge_input = render_judge_input("Fix add.", rubric, ALT)
    script = [
        {"final": answer("pass", b1_reason="Does not meet the criterion: only one input is handled.")},
        {"final": answer("fail")},
    ]
    model = JUDGES[harness][1]
    with MockModelServer(script) as server:
        verdict = run_judge(
            judge_input, model=model, options=options(harness, request, server, cache_dir=tmp_path)
        )
        assert len(main_loop(server)) == 2
    item = verdict.item("B1")
    assert item is not None and item.rejudged and item.verdict == "fail" and verdict.calls == 2
    with MockModelServer([{"final": answer("pass")}]) as server:
        cached = run_judge(
            judge_input, model=model, options=options(harness, request, server, cache_dir=tmp_path)
        )
        assert main_loop(server) == []
    assert cached.cached and cached.harness == harness and cached.blockers_failed() == ["B1"]


def test_the_cache_key_names_the_harness_so_two_harnesses_never_share_a_verdict(
    rubric: RepoRubric, request: pytest.FixtureRequest, tmp_path: Path
) -> None:
    judge_input = render_judge_input("Fix add.", rubric, ALT)
    keys = set()
    for harness in ("claude-code", "codex"):
        with MockModelServer([{"final": answer("pass")}]) as server:
            found = run_judge(
                judge_input, model="m-1", options=options(harness, request, server, cache_dir=tmp_path)
            )
            assert len(main_loop(server)) == 1, harness  # the other harness's cached verdict is not read
        assert found.ok and not found.cached
        keys.add(found.cache_key)
    assert len(keys) == 2


def test_a_harness_without_a_judge_block_is_refused_naming_those_that_can() -> None:
    assert load_profile("aider").judge is None
    rubric = RepoRubric.model_validate(RUBRIC)
    with pytest.raises(UsageError, match="has no judge block") as caught:
        run_judge(
            render_judge_input("Fix add.", rubric, ALT),
            model="gpt-5-mini",
            options=JudgeOptions(profile="aider"),
        )
    assert "claude-code, codex, gemini-cli" in (caught.value.hint or "")
