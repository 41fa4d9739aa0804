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


def test_reasoning_text_and_tokens_are_read_from_the_providers_fields():
    """A model that reasons (deepseek-reasoner always; o4-mini through OpenRouter by default)
    returns its reasoning in the provider's field and counts its reasoning tokens."""
    medium = presets.REASONING_TOKENS["medium"]
    for provider, model in (("deepseek", "deepseek-reasoner"), ("openrouter", "openai/o4-mini")):
        emulator = ProviderEmulator(provider, reasoning="weighing the bids")
        with FakeOpenAIServer(emulator, api_key=SECRET, models=(model,)) as srv:
            client = make_client()
            req = ChatRequest(messages=[{"role": "user", "content": "hello"}])
            cfg = config_for(provider, srv.url, model=model, max_tokens=8192)
            res = asyncio.run(client.complete(cfg, req))
        assert res.reasoning == "weighing the bids", provider
        assert res.usage.reasoning == medium and res.usage.completion > medium
    emulator = ProviderEmulator("deepseek", reasoning="weighing the bids")
    with FakeOpenAIServer(emulator, api_key=SECRET, models=("deepseek-chat",)) as srv:
        cfg = config_for("deepseek", srv.url, model="deepseek-chat")
        res = asyncio.run(
            make_client().complete(cfg, ChatRequest(messages=[{"role": "user", "content": "x"}]))
        )
    assert res.reasoning is None and res.usage.reasoning == 0  # deepseek-chat does not reason


# one model name per family of every preset (a family without one fails the coverage test)
FAMILY_SAMPLES = {
    "openai_reasoning": [
        "o1-mini", "o4-mini", "o3-2025-04-16", "gpt-5-pro", "gpt-5-codex", "gpt-5-nano",
        "gpt-5.1-codex-max", "gpt-5.1-codex-mini", "gpt-5.1-chat-latest", "gpt-5.1",
        "gpt-5.3-codex", "gpt-5.2-pro", "gpt-5.4-mini", "o9-future",
    ],
    "gemini": [
        "gemini-3-pro-preview", "gemini-3-flash-preview", "gemini-2.5-pro",
        "gemini-2.5-flash-lite", "gemini-2.5-flash", "gemini-2.0-flash", "gemini-exp-1206",
    ],
    "openrouter": ["openai/o4-mini", "meta-llama/llama-3.3-70b-instruct"],
    "deepseek": ["deepseek-reasoner", "deepseek-chat"],
    "ollama": ["gpt-oss:20b"],
    "openai": ["gpt-4o"],
    "anthropic": ["claude-sonnet-4-5"],
    "vllm": ["qwen3-8b"],
    "llamacpp": ["smollm2"],
}  # fmt: skip
CASES = [(p, m) for p, models in FAMILY_SAMPLES.items() for m in models]


def test_every_family_of_every_preset_has_a_sample():
    assert set(FAMILY_SAMPLES) == set(presets.PRESETS)
    for name, p in presets.PRESETS.items():
        reached = {p.family(m).name for m in FAMILY_SAMPLES[name]}
        assert reached == {f.name for f in (*p.families, p.other)}, name


@pytest.mark.parametrize(("provider", "model"), CASES)
def test_each_familys_effort_table_refuses_an_invalid_value_with_the_valid_list(provider, model):
    p = presets.PRESETS[provider]
    fam = p.family(model)
    bad = next(e for e in (*presets.EFFORTS, "extreme") if e not in fam.efforts)
    with pytest.raises(ValueError) as err:
        ModelConfig(model=model, preset=provider, reasoning_effort=bad)
    text = str(err.value)
    text = next(line for line in text.splitlines() if "Value error" in line)  # one line
    if p.reasoning == "none":
        assert "does not support reasoning_effort" in text
    elif fam.efforts:
        assert f"must be one of {'|'.join(fam.efforts)} for {fam.name}, got {bad!r}" in text
        assert fam.source in text
    else:
        assert f"{fam.name} take no reasoning_effort" in text


@pytest.mark.parametrize(("provider", "model"), CASES)
def test_every_valid_effort_goes_through_the_emulated_endpoint(provider, model):
    """Each value a family accepts is sent in the preset's form, accepted by the emulated
    endpoint through the real openai client, and reasons as long as mbb assumes it does."""
    fam = presets.PRESETS[provider].family(model)
    emulator = ProviderEmulator(provider)
    efforts = [None, *fam.efforts] if presets.PRESETS[provider].reasoning != "none" else [None]
    with FakeOpenAIServer(emulator, api_key=SECRET, models=(model,)) as srv:
        for effort in efforts:
            kw = {"model": model, "max_tokens": 8192, "reasoning_effort": effort}
            cfg = config_for(provider, srv.url, **kw)
            req = ChatRequest(messages=[{"role": "user", "content": f"effort {effort}"}])
            res = asyncio.run(make_client().complete(cfg, req))
            expected = presets.effort_of(provider, model, effort)
            assert res.usage.reasoning == presets.REASONING_TOKENS.get(expected or "none", 0)
    assert emulator.rejected == []


@pytest.mark.parametrize(
    ("provider", "model", "effort", "words"),
    [
        ("openai_reasoning", "gpt-5.1", "minimal",
         "'minimal' is not supported with the 'gpt-5.1' model. Supported values are: 'none', "
         "'low', 'medium', and 'high'."),
        ("openai_reasoning", "o3", "none", "Supported values are: 'low', 'medium', and 'high'."),
        ("openai_reasoning", "o1-mini", "low", "Unrecognized request argument supplied"),
        ("gemini", "gemini-3-flash-preview", "minimal",
         "Invalid reasoning_effort: minimal. Valid values are: high, low, medium, none"),
        ("gemini", "gemini-3-pro-preview", "medium", "Valid values are: high, low"),
    ],
)  # fmt: skip
def test_the_endpoint_refuses_an_invalid_effort_in_its_own_words(provider, model, effort, words):
    """Sent past the preset (a config without one), the emulated endpoint answers 400 as the
    provider does, and its message reaches the error."""
    emulator = ProviderEmulator(provider)
    with FakeOpenAIServer(emulator, api_key=SECRET, models=(model,)) as srv:
        extra = {"reasoning_effort": effort}
        field = "max_completion_tokens" if provider == "openai_reasoning" else "max_tokens"
        cfg = ModelConfig(
            model=model, base_url=srv.url, api_key_env=KEY_ENV, extra_body=extra,
            max_retries=0, max_tokens_field=field,
        )  # fmt: skip
        with pytest.raises(LlmUnavailable, match="HTTP 400") as err:
            asyncio.run(
                make_client().complete(
                    cfg, ChatRequest(messages=[{"role": "user", "content": "x"}])
                )
            )
    assert words in str(err.value)


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
