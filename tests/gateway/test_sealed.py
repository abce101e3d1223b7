"""What a sealed run refuses before any work, and the one place that decides a cell's cost and turns."""

from __future__ import annotations

import pytest

from dokimi.errors import PrerequisiteError, UsageError
from dokimi.gateway import network
from dokimi.gateway.model import CellUsage
from dokimi.gateway.prices import Usage
from dokimi.gateway.sealed import Observed, SealAccount, gateway_upstream, observed_usage
from dokimi.harness.profile import load_profile


def test_the_upstream_is_the_hosts_endpoint_variable_else_the_vendor_default() -> None:
    claude = load_profile("claude-code")
    assert gateway_upstream(claude, {}) == "https://api.anthropic.com"
    assert gateway_upstream(claude, {"ANTHROPIC_BASE_URL": "http://litellm:4000"}) == "http://litellm:4000"


def test_a_harness_that_would_bypass_its_endpoint_variable_cannot_run_sealed() -> None:
    claude = load_profile("claude-code")
    with pytest.raises(UsageError, match="CLAUDE_CODE_USE_BEDROCK is set") as caught:
        gateway_upstream(claude, {"CLAUDE_CODE_USE_BEDROCK": "1"})
    assert "--agent-network" in (caught.value.hint or "")
    assert gateway_upstream(claude, {"CLAUDE_CODE_USE_BEDROCK": "0"}) == "https://api.anthropic.com"


def test_a_profile_without_credential_variables_cannot_tell_cells_apart() -> None:
    claude = load_profile("claude-code").model_copy(update={"credential_env": []})
    with pytest.raises(UsageError, match="credential_env"):
        gateway_upstream(claude, {})


def test_without_root_a_sealed_run_is_refused_with_the_escape_hatch(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(network.os, "geteuid", lambda: 1000)
    with pytest.raises(PrerequisiteError, match="needs iptables and root") as caught:
        network.open_batch_network("never-made")
    assert "--agent-network" in (caught.value.hint or "")


def test_the_gateway_s_price_wins_over_the_harness_s_and_falls_back_when_unpriced() -> None:
    priced = CellUsage(requests=3, turns=2, usage=Usage(10, 10), cost_usd=0.25)
    unpriced = CellUsage(requests=1, turns=1, unpriced_models={"gpt-x"})
    assert observed_usage(SealAccount(priced, 0, 0), 9.0, 7) == Observed(0.25, "gateway", 2)
    assert observed_usage(SealAccount(unpriced, 0, 0), 9.0, 7) == Observed(9.0, "harness", 1)
    assert observed_usage(None, 9.0, 7) == Observed(9.0, "harness", 7)
    assert observed_usage(None, None, None) == Observed(None, None, None)


def test_doctor_says_whether_real_runs_can_be_sealed(monkeypatch: pytest.MonkeyPatch) -> None:
    from dokimi.checks.doctor import check_sealed_runs

    monkeypatch.setattr(network.os, "geteuid", lambda: 1000)
    check = check_sealed_runs()
    assert (check.status, check.required) == ("warn", False)
    assert "not running as root" in check.detail and "--agent-network" in (check.fix or "")
