"""What a sealed run refuses before any work, and the one place that decides a cell's cost and turns."""

from __future__ import annotations

from pathlib import Path

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


def test_a_batch_keeps_one_price_per_model_and_a_sealed_run_refuses_an_unpriced_model() -> None:
    from dokimi.runner.run import batch_prices, check_priced
    from dokimi.schemas.batch import BatchPin

    price = parse_price("mystery-1=2,10")[1]
    pin = BatchPin.model_validate(
        {
            "manifest_id": "m", "source": "s", "tree": None, "eval_dir_digest": "d", "image": "i",
            "image_pin": "digest", "created_by": "t",
            "prices": {"mystery-1": {"input": 2, "output": 10, "cache_write": 2.5, "cache_read": 2}},
        }
    )  # fmt: skip
    assert batch_prices(pin, {}, "b") == {"mystery-1": price}  # a rerun needs no --price again
    assert batch_prices(pin, {"mystery-1": price}, "b") == {"mystery-1": price}
    with pytest.raises(UsageError, match="priced it at 2,10") as caught:
        batch_prices(pin, {"mystery-1": parse_price("mystery-1=3,10")[1]}, "b")
    assert "one price per model" in (caught.value.hint or "")
    check_priced(["claude-haiku-4-5", "mystery-1"], {"mystery-1": price})
    with pytest.raises(UsageError, match="gpt-x is not in dokimi's price table") as caught:
        check_priced(["gpt-x"], {})
    assert "--price gpt-x=IN,OUT" in (caught.value.hint or "")


@pytest.mark.slow
@pytest.mark.parametrize("bad", ["mystery-1", "mystery-1=2", "mystery-1=a,b", "mystery-1=-1,2", "=1,2"])
def test_a_malformed_price_is_a_usage_error(tmp_path: Path, bad: str) -> None:
    from tests.helpers.runs import dokimi_cli

    args = ["repo", "run", str(tmp_path), "--arm", "guidance:raw", "--model", "m", "--reps", "1"]
    proc = dokimi_cli([*args, "--batch", "b", "--price", bad])
    assert proc.returncode == 2 and "--price" in proc.stderr and "Traceback" not in proc.stderr
