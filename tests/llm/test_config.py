from __future__ import annotations

import pytest
from pydantic import ValidationError

from mbb.batch.build import load_params
from mbb.llm.config import ModelConfig, Price
from mbb.params import ParamsError


def test_key_like_values_are_refused_and_not_echoed() -> None:
    for bad in ("sk-proj-abcdef123456", "sk-abc", "not a name", "x" * 80):
        with pytest.raises(ValidationError) as err:
            ModelConfig(model="m", api_key_env=bad)
        assert bad not in str(err.value)


def test_env_name_ok_and_none_allowed() -> None:
    assert ModelConfig(model="m", api_key_env="OPENROUTER_API_KEY").api_key_env
    assert ModelConfig(model="m", api_key_env=None).api_key_env is None


def test_extra_fields_forbidden() -> None:
    with pytest.raises(ValidationError):
        ModelConfig(model="m", api_key="sk-xyz")  # type: ignore[call-arg]


def test_price_cost() -> None:
    p = Price(prompt=2.0, completion=10.0, cached_prompt=0.5)
    assert p.cost(1_000_000, 0) == pytest.approx(2.0)
    assert p.cost(1_000_000, 100_000, cached=1_000_000) == pytest.approx(0.5 + 1.0)


def test_condition_requires_llm_workers_to_name_a_model() -> None:
    with pytest.raises(ParamsError, match="not an entry of `models`"):
        load_params({"workers": {"negotiator": "llm", "model": "gpt"}})
    cond = load_params(
        {
            "workers": {"negotiator": "llm", "model": "gpt"},
            "models": {"gpt": {"model": "gpt-x", "api_key_env": "OPENAI_API_KEY"}},
            "prices": {"gpt-x": {"prompt": 1.0, "completion": 4.0}},
        }
    )
    assert cond.models["gpt"].model == "gpt-x"


def test_params_file_loads() -> None:
    cond = load_params("params/llm_negotiators.yaml")
    specs = cond.worker_specs()
    assert all(s.negotiator == "llm" for s in specs)
    assert all(s.model in cond.models for s in specs)
    assert all(m.api_key_env is None or m.api_key_env.isupper() for m in cond.models.values())


@pytest.mark.parametrize("bad", [1e300, float("inf"), float("nan"), -1.0])
def test_a_price_is_finite_and_plausible(bad: float) -> None:
    """1e300 was read, and its costs (1.8e297 USD) broke mbb's own event log; `.inf` read as
    'unpriced' (a red team's finds)."""
    with pytest.raises(ValidationError):
        Price(prompt=bad, completion=1.0)
    with pytest.raises(ValidationError):
        Price(prompt=1.0, completion=1.0, cached_prompt=bad)
    assert Price(prompt=0.0, completion=100_000.0).completion == 100_000.0


@pytest.mark.parametrize(
    ("url", "needle"),
    [
        ("http://127.0.0.1:99999/v1", "Port out of range"),
        ("http://127.0.0.1:x/v1", "Port could not be cast"),
        ("http://:80/v1", "names no host"),
    ],
)
def test_a_base_url_with_no_host_or_a_bad_port_is_refused_when_read(url: str, needle: str) -> None:
    """Port 99999 surfaced at the first call as 'unhandled errors in a TaskGroup' (a red
    team's find)."""
    with pytest.raises(ValidationError, match=needle):
        ModelConfig(model="m", base_url=url)
