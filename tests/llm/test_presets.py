"""Endpoint presets against loopback servers emulating each provider's quirks (mbb.testing.emulate):
the request each preset sends is accepted, reasoning text and cached tokens are read from the
provider's own fields, tool-call arguments in either format parse, each provider's error body
reaches the message, and unsupported options are refused before any request."""

from __future__ import annotations

import asyncio
import json

import pytest
from pydantic import BaseModel, ConfigDict

from mbb.batch.build import load_params
from mbb.core.eventlog import EventLog
from mbb.llm import presets
from mbb.llm.cache import request_key
from mbb.llm.client import CallMeta, ChatRequest, LlmUnavailable, request_body
from mbb.llm.config import ModelConfig
from mbb.llm.structured import ActionSpec, ask_action
from mbb.params import ParamsError
from mbb.testing.emulate import PROVIDERS, ProviderEmulator, provider_error
from mbb.testing.testserver import FakeOpenAIServer

from .conftest import KEY_ENV, SECRET, make_client


class Out(BaseModel):
    model_config = ConfigDict(extra="forbid")
    bid: int
    note: str


LONG = "Rules of the arena. " * 400  # 8,000 characters: long enough for a prefix cache


def config_for(provider: str, url: str, **kw) -> ModelConfig:
    base = {"model": "test-model", "preset": provider, "base_url": url, "api_key_env": KEY_ENV}
    if provider == "openai_reasoning":
        base["reasoning_effort"] = "low"
    base.update(kw)
    return ModelConfig(**base)


def spec() -> ActionSpec:
    return ActionSpec(
        name="out", out_model=Out, convert=lambda o: o, default=None, default_rule="-"
    )


def ask(config: ModelConfig, log: EventLog, turn: str):
    msgs = [{"role": "system", "content": LONG}, {"role": "user", "content": turn}]
    meta = CallMeta("W2", "negotiator", "declaration", subrun=1, round=1)
    return asyncio.run(ask_action(make_client(), config, msgs, spec(), meta=meta, emit=log.emit))


@pytest.mark.parametrize("provider", PROVIDERS)
def test_each_preset_is_accepted_and_its_answers_are_read(provider):
    emulator = ProviderEmulator(provider)
    with FakeOpenAIServer(emulator, api_key=SECRET) as srv:
        config = config_for(provider, srv.url)
        log = EventLog("t")
        first = ask(config, log, "Declare now.")
        second = ask(config, log, "Declare again.")
    assert emulator.rejected == []
    assert not first.defaulted and not second.defaulted
    calls = [json.loads(x) for x in log.by_kind["llm_call"]]
    assert [c["error"] for c in calls] == [None, None]
    # the second request repeats the first one's long prefix: cached tokens are reported in the
    # provider's own field and recorded, except where the endpoint reports none
    cached = calls[1]["cached_tokens"]
    if emulator.rules.cached_usage == "none":
        assert cached == 0
    else:
        assert cached >= 1024 and calls[0]["cached_tokens"] == 0
    assert calls[1]["prompt_tokens"] > cached
    bodies = [r.body for r in srv.completions]
    hints = presets.PRESETS[provider].cache_hint
    if hints == "prompt_cache_key":
        assert bodies[0]["prompt_cache_key"] == "mbb-W2-negotiator"
    elif hints == "llama_slot":
        assert bodies[0]["cache_prompt"] is True and bodies[0]["id_slot"] == 1
    else:
        assert not {"prompt_cache_key", "cache_prompt", "id_slot"} & set(bodies[0])


def test_hints_never_change_the_replay_cache_key():
    cfg = ModelConfig(model="m", preset="llamacpp")
    plain = ModelConfig(model="m", preset="llamacpp", cache_hints=False)
    req = ChatRequest(messages=[{"role": "user", "content": "hi"}])
    assert request_key(request_body(cfg, req)) == request_key(request_body(plain, req))
    assert "cache_prompt" not in request_body(cfg, req)


def test_reasoning_text_is_read_from_either_field():
    for provider, field in (("deepseek", "reasoning_content"), ("openrouter", "reasoning")):
        emulator = ProviderEmulator(provider, reasoning="weighing the bids")
        with FakeOpenAIServer(emulator, api_key=SECRET) as srv:
            client = make_client()
            req = ChatRequest(messages=[{"role": "user", "content": "hello"}])
            res = asyncio.run(client.complete(config_for(provider, srv.url), req))
        assert res.reasoning == "weighing the bids", field


def test_openrouter_sends_reasoning_as_an_object_and_openai_reasoning_the_flat_field():
    emulator = ProviderEmulator("openrouter")
    with FakeOpenAIServer(emulator, api_key=SECRET) as srv:
        cfg = config_for("openrouter", srv.url, reasoning_effort="high")
        asyncio.run(
            make_client().complete(cfg, ChatRequest(messages=[{"role": "user", "content": "x"}]))
        )
        body = srv.completions[0].body
    assert body["reasoning"] == {"effort": "high"} and "reasoning_effort" not in body
    req = ChatRequest(messages=[{"role": "user", "content": "x"}])
    o = request_body(
        ModelConfig(model="o3", preset="openai_reasoning", reasoning_effort="high"), req
    )
    assert o["reasoning_effort"] == "high" and "max_completion_tokens" in o
    assert "max_tokens" not in o and "temperature" not in o


def test_loose_json_schema_where_strict_is_not_understood():
    req = ChatRequest(
        messages=[{"role": "user", "content": "x"}],
        response_format={
            "type": "json_schema",
            "json_schema": {"name": "a", "schema": {}, "strict": True},
        },
    )
    gem = request_body(ModelConfig(model="g", preset="gemini"), req)
    assert "strict" not in gem["response_format"]["json_schema"]
    oai = request_body(ModelConfig(model="g", preset="openai"), req)
    assert oai["response_format"]["json_schema"]["strict"] is True


def test_ollama_tool_arguments_as_an_object_parse_like_a_string():
    emulator = ProviderEmulator("ollama")
    with FakeOpenAIServer(emulator, api_key=SECRET) as srv:
        cfg = config_for("ollama", srv.url, tool_protocol="native")
        log = EventLog("t")
        outcome = ask(cfg, log, "Use the tool.")
        raw = srv.completions  # the server really sent an object
    assert not outcome.defaulted and outcome.calls == 1
    assert raw and raw[0].body["tools"]


@pytest.mark.parametrize(
    ("provider", "body"),
    [
        ("openai_reasoning", {"max_tokens": 5, "temperature": 0.7}),
        ("openai", {"cache_prompt": True}),
        ("gemini", {"prompt_cache_key": "k"}),
        ("deepseek", {"response_format": {"type": "json_schema", "json_schema": {"schema": {}}}}),
        ("anthropic", {"n": 2}),
    ],
)
def test_each_providers_error_body_reaches_the_message(provider, body):
    """Without the preset (a plain config sending what the endpoint refuses), the request fails
    with the provider's 400, and its message — in that provider's body shape — is reported."""
    emulator = ProviderEmulator(provider)
    if provider == "anthropic":  # emulate Anthropic's n != 1 refusal through the error shape
        emulator.check = lambda b: "n: must be exactly 1" if b.get("n", 1) != 1 else None  # type: ignore[method-assign]
    with FakeOpenAIServer(emulator, api_key=SECRET) as srv:
        cfg = ModelConfig(
            model="test-model",
            base_url=srv.url,
            api_key_env=KEY_ENV,
            extra_body=body,
            max_retries=0,
        )
        req = ChatRequest(messages=[{"role": "user", "content": "x"}])
        with pytest.raises(LlmUnavailable) as err:
            asyncio.run(make_client().complete(cfg, req))
    text = str(err.value)
    assert "HTTP 400" in text
    expected = emulator.rejected[0] if emulator.rejected else "must be exactly 1"
    assert expected[:40] in text


def test_provider_error_shapes_are_all_understood():
    for shape in ("openai", "anthropic", "gemini", "vllm", "llamacpp", "ollama"):
        body = provider_error(shape, "bad thing").body
        inner = body.get("error", body) if isinstance(body, dict) else body
        if shape in ("anthropic",):
            inner = body  # the client keeps the whole body when it has no top-level "error"?
        assert (
            presets.error_message(inner) == "bad thing"
            or presets.error_message(body) == "bad thing"
        )


@pytest.mark.parametrize(
    ("kw", "words"),
    [
        (
            {"preset": "openai_reasoning", "model": "o3", "temperature": 0.7},
            "does not accept temperature",
        ),
        (
            {"preset": "openai_reasoning", "model": "o3", "max_tokens_field": "max_tokens"},
            "max_completion_tokens",
        ),
        (
            {"preset": "anthropic", "model": "c", "reasoning_effort": "high"},
            "does not support reasoning_effort",
        ),
        ({"preset": "anthropic", "model": "c", "temperature": 1.5}, "at most 1.0"),
        (
            {
                "preset": "anthropic",
                "model": "c",
                "structured": "json_schema",
                "tool_protocol": "json_action",
            },
            "does not support structured",
        ),
        (
            {"preset": "deepseek", "model": "d", "structured": "json_schema"},
            "does not support structured",
        ),
        ({"preset": "gemini", "model": "g", "reasoning_effort": "extreme"}, "must be one of"),
        ({"preset": "bogus", "model": "g"}, "known presets: anthropic, deepseek"),
    ],
)
def test_unsupported_options_are_refused_when_the_params_load(kw, words):
    with pytest.raises(ValueError, match=words):
        ModelConfig(**kw)


def test_refused_in_a_params_file_before_any_request(root, tmp_path):
    with FakeOpenAIServer(ProviderEmulator("openai_reasoning"), api_key=SECRET) as srv:
        over = {
            "models": {
                "o": {
                    "model": "test-model",
                    "preset": "openai_reasoning",
                    "base_url": srv.url,
                    "temperature": 0.5,
                }
            },
            "workers": {"model": "o"},
        }
        with pytest.raises(ParamsError, match="does not accept temperature"):
            load_params(root / "params" / "llm_negotiators.yaml", over)
        assert srv.requests == []


def test_preset_defaults_fill_what_the_params_leave_out():
    c = ModelConfig(model="deepseek-reasoner", preset="deepseek")
    assert c.base_url == "https://api.deepseek.com/v1" and c.api_key_env == "DEEPSEEK_API_KEY"
    assert c.structured == "prompt_only"
    c = ModelConfig(model="x", preset="llamacpp")
    assert c.api_key_env is None and c.structured == "json_object_schema"
    assert presets.slot_of("W3", 4) == 2 and presets.slot_of("W6", 4) == 1
