"""What a sealed run refuses before any work, and the one place that decides a cell's cost and turns."""

from __future__ import annotations

import pytest

from dokimi.errors import PrerequisiteError, UsageError
from dokimi.gateway import network
from dokimi.gateway.model import CellUsage
from dokimi.gateway.prices import PRICES, Usage, parse_price, with_prices
from dokimi.gateway.sealed import Observed, SealAccount, gateway_upstream, observed_usage, unpriced_models
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


def test_a_sealed_cells_cost_is_the_gateways_and_never_the_harnesss() -> None:
    account = CellUsage(requests=3, turns=2, usage=Usage(10, 10), cost_usd=0.25)
    assert observed_usage(SealAccount(account, 0, 0), 9.0, 7) == Observed(0.25, "gateway", 2)
    assert observed_usage(SealAccount(CellUsage(), 0, 0), 9.0, 7) == Observed(0.0, "gateway", 0)
    assert observed_usage(None, 9.0, 7) == Observed(9.0, "harness", 7)
    assert observed_usage(None, None, None) == Observed(None, None, None)


def test_a_sealed_run_needs_the_profiles_api_and_a_price_for_each_model() -> None:
    claude = load_profile("claude-code")
    with pytest.raises(UsageError, match="names no model API") as caught:
        gateway_upstream(claude.model_copy(update={"api": []}), {})
    assert "anthropic" in (caught.value.hint or "")
    priced = with_prices({"mystery-1": parse_price("mystery-1=2,10")[1]})
    assert unpriced_models(["claude-haiku-4-5", "mystery-1", "gpt-x"], priced) == ["gpt-x"]
    assert unpriced_models(["mystery-1"], PRICES) == ["mystery-1"]


def test_doctor_says_whether_real_runs_can_be_sealed(monkeypatch: pytest.MonkeyPatch) -> None:
    from dokimi.checks.doctor import check_sealed_runs

    monkeypatch.setattr(network.os, "geteuid", lambda: 1000)
    check = check_sealed_runs()
    assert (check.status, check.required) == ("warn", False)
    assert "not running as root" in check.detail and "--agent-network" in (check.fix or "")
