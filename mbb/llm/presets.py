"""Endpoint presets: what each provider's OpenAI-compatible endpoint accepts and how it answers.

All provider-specific behaviour of the LLM layer lives here, as data (`Preset`) plus a few pure
functions the client and the config call at fixed points — no provider conditionals elsewhere:

- `fill_defaults` (config, before validation): a preset's base URL, key variable, token-cap
  field and output protocol, for every field the params leave out;
- `check_config` (config, after validation): an option the endpoint does not support is refused
  when the params are loaded, before any request (temperature on a reasoning model,
  `reasoning_effort` where it is ignored, a structured mode the endpoint silently drops...);
- `adapt_body` (request body, hashed for the replay cache): OpenRouter's `reasoning` object,
  loose `json_schema` where `strict` is not understood;
- `cache_hints` (added to the request after hashing, so mbb's own replay cache keys stay what
  they were and a run replays against any endpoint): `prompt_cache_key` (OpenAI, OpenRouter),
  `cache_prompt` + `id_slot` (llama.cpp: one slot per worker);
- `reasoning_text`, `cached_tokens`, `error_message` (responses): reasoning in
  `reasoning_content` (DeepSeek, vLLM, llama.cpp) or `reasoning` (OpenRouter, Ollama); cached
  prompt tokens in `prompt_tokens_details.cached_tokens`, DeepSeek's `prompt_cache_hit_tokens`
  or llama.cpp's `timings.cache_n`; every provider's error body shape.

The quirks are emulated, one by one, by `mbb.testing.emulate` for the tests.
"""

from __future__ import annotations

import zlib
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Literal

__all__ = [
    "PRESETS",
    "Preset",
    "adapt_body",
    "cache_hints",
    "cached_tokens",
    "check_config",
    "error_message",
    "fill_defaults",
    "preset_of",
    "reasoning_text",
    "slot_of",
]

Reasoning = Literal["none", "reasoning_effort", "openrouter"]
CacheHint = Literal["none", "prompt_cache_key", "llama_slot"]


@dataclass(frozen=True)
class Preset:
    """One provider's endpoint: defaults and what it supports."""

    name: str
    base_url: str
    api_key_env: str | None
    max_tokens_field: Literal["max_tokens", "max_completion_tokens"] = "max_tokens"
    max_tokens_fields: tuple[str, ...] = ("max_tokens", "max_completion_tokens")
    structured: tuple[str, ...] = ("json_schema", "json_object_schema", "prompt_only")
    default_structured: str = "json_schema"
    default_tool_protocol: str = "json_action"
    native_tools: bool = True
    strict_schema: bool = True  # json_schema's "strict": true is understood
    temperature: bool = True
    max_temperature: float = 2.0
    reasoning: Reasoning = "none"
    efforts: tuple[str, ...] = ()
    cache_hint: CacheHint = "none"
    note: str = ""


PRESETS: dict[str, Preset] = {
    p.name: p
    for p in (
        Preset(
            "openai",
            "https://api.openai.com/v1",
            "OPENAI_API_KEY",
            max_tokens_field="max_completion_tokens",
            structured=("json_schema", "prompt_only"),
            default_tool_protocol="native",
            cache_hint="prompt_cache_key",
            note="chat models (gpt-4o, gpt-4.1...); automatic prefix caching from 1,024 tokens",
        ),
        Preset(
            "openai_reasoning",
            "https://api.openai.com/v1",
            "OPENAI_API_KEY",
            max_tokens_field="max_completion_tokens",
            max_tokens_fields=("max_completion_tokens",),
            structured=("json_schema", "prompt_only"),
            default_tool_protocol="native",
            temperature=False,
            reasoning="reasoning_effort",
            efforts=("minimal", "low", "medium", "high"),
            cache_hint="prompt_cache_key",
            note="o-series and gpt-5: max_completion_tokens only, no temperature",
        ),
        Preset(
            "anthropic",
            "https://api.anthropic.com/v1",
            "ANTHROPIC_API_KEY",
            structured=("prompt_only",),  # response_format is ignored by the compatibility layer
            default_structured="prompt_only",
            default_tool_protocol="native",
            strict_schema=False,  # tools' "strict" is ignored
            max_temperature=1.0,
            note="OpenAI SDK compatibility layer; reasoning_effort ignored (use extra_body "
            "thinking), response_format ignored",
        ),
        Preset(
            "gemini",
            "https://generativelanguage.googleapis.com/v1beta/openai",
            "GEMINI_API_KEY",
            structured=("json_schema", "prompt_only"),
            strict_schema=False,
            reasoning="reasoning_effort",
            efforts=("none", "low", "medium", "high"),
            note="unknown request fields are rejected",
        ),
        Preset(
            "deepseek",
            "https://api.deepseek.com/v1",
            "DEEPSEEK_API_KEY",
            structured=("prompt_only",),  # json_object without a schema only
            default_structured="prompt_only",
            note="deepseek-reasoner: reasoning in reasoning_content; cache hits in "
            "prompt_cache_hit_tokens",
        ),
        Preset(
            "openrouter",
            "https://openrouter.ai/api/v1",
            "OPENROUTER_API_KEY",
            structured=("json_schema", "prompt_only"),
            reasoning="openrouter",
            efforts=("minimal", "low", "medium", "high"),
            cache_hint="prompt_cache_key",
            note="reasoning as {'reasoning': {'effort': ...}}, returned in message.reasoning",
        ),
        Preset(
            "vllm",
            "http://127.0.0.1:8000/v1",
            None,
            structured=("json_schema", "prompt_only"),
            strict_schema=False,
            note="automatic prefix caching; reasoning parser output in reasoning_content",
        ),
        Preset(
            "ollama",
            "http://127.0.0.1:11434/v1",
            None,
            structured=("json_schema", "prompt_only"),
            strict_schema=False,
            reasoning="reasoning_effort",
            efforts=("low", "medium", "high"),
            note="tool-call arguments may arrive as a JSON object",
        ),
        Preset(
            "llamacpp",
            "http://127.0.0.1:8080/v1",
            None,
            structured=("json_object_schema", "json_schema", "prompt_only"),
            default_structured="json_object_schema",
            strict_schema=False,
            cache_hint="llama_slot",
            note="cache_prompt + id_slot: one server slot per worker keeps its prefix",
        ),
    )
}


def preset_of(name: str | None) -> Preset | None:
    if name is None:
        return None
    try:
        return PRESETS[name]
    except KeyError:
        raise ValueError(
            f"unknown preset {name!r}; known presets: {', '.join(sorted(PRESETS))}"
        ) from None


def fill_defaults(data: Any) -> Any:
    """A params mapping with the preset's defaults for every field it leaves out."""
    if not isinstance(data, Mapping) or data.get("preset") is None:
        return data
    p = preset_of(data["preset"])
    assert p is not None
    out = dict(data)
    out.setdefault("base_url", p.base_url)
    out.setdefault("api_key_env", p.api_key_env)
    out.setdefault("max_tokens_field", p.max_tokens_field)
    out.setdefault("structured", p.default_structured)
    out.setdefault("tool_protocol", p.default_tool_protocol)
    return out


def check_config(cfg: Any) -> None:
    """Raise ValueError naming the preset and the option it does not support."""
    p = preset_of(cfg.preset)
    if p is None:
        return
    who = f"preset {p.name!r} (model {cfg.model!r})"
    if cfg.temperature is not None:
        if not p.temperature:
            raise ValueError(
                f"{who} does not accept temperature; remove it (got {cfg.temperature})"
            )
        if cfg.temperature > p.max_temperature:
            raise ValueError(
                f"{who}: temperature must be at most {p.max_temperature}, got {cfg.temperature}"
            )
    if cfg.reasoning_effort is not None:
        if p.reasoning == "none":
            raise ValueError(
                f"{who} does not support reasoning_effort (the endpoint would ignore it); "
                "remove it or pass the provider's own field in extra_body"
            )
        if cfg.reasoning_effort not in p.efforts:
            raise ValueError(
                f"{who}: reasoning_effort must be one of {list(p.efforts)}, got "
                f"{cfg.reasoning_effort!r}"
            )
    if cfg.max_tokens_field not in p.max_tokens_fields:
        raise ValueError(
            f"{who} needs max_tokens_field {p.max_tokens_fields[0]!r}, got {cfg.max_tokens_field!r}"
        )
    if cfg.tool_protocol == "native" and not p.native_tools:
        raise ValueError(f"{who} has no native tool calls; use tool_protocol: json_action")
    if cfg.tool_protocol == "json_action" and cfg.structured not in p.structured:
        raise ValueError(
            f"{who} does not support structured: {cfg.structured} (supported: "
            f"{', '.join(p.structured)})"
        )


def adapt_body(cfg: Any, body: dict[str, Any]) -> dict[str, Any]:
    """The request body as this preset's endpoint wants it (part of the cache key)."""
    p = preset_of(cfg.preset)
    if p is None:
        return body
    if p.reasoning == "openrouter" and "reasoning_effort" in body:
        body["reasoning"] = {"effort": body.pop("reasoning_effort")}
    fmt = body.get("response_format")
    if not p.strict_schema and isinstance(fmt, dict) and fmt.get("type") == "json_schema":
        js = {k: v for k, v in fmt["json_schema"].items() if k != "strict"}
        body["response_format"] = {**fmt, "json_schema": js}
    if not p.strict_schema and body.get("tools"):
        body["tools"] = [
            {**t, "function": {k: v for k, v in t["function"].items() if k != "strict"}}
            for t in body["tools"]
        ]
    return body


def slot_of(worker: str | None, slots: int) -> int:
    """A stable llama.cpp slot for a worker: W<k> gets slot k-1 (mod slots), others a hash."""
    if worker is None:
        return 0
    if worker[:1] == "W" and worker[1:].isdigit():
        return (int(worker[1:]) - 1) % slots
    return zlib.crc32(worker.encode()) % slots


def cache_hints(cfg: Any, worker: str | None, role: str) -> dict[str, Any]:
    """Fields that help the server reuse a worker's prefix; sent, but never hashed."""
    p = preset_of(cfg.preset)
    if p is None or not cfg.cache_hints:
        return {}
    if p.cache_hint == "prompt_cache_key":
        return {"prompt_cache_key": f"mbb-{worker or 'shared'}-{role}"}
    if p.cache_hint == "llama_slot":
        return {"cache_prompt": True, "id_slot": slot_of(worker, cfg.slots)}
    return {}


def reasoning_text(message: Mapping[str, Any]) -> str | None:
    """Reasoning returned beside the answer: `reasoning_content` or `reasoning`."""
    for key in ("reasoning_content", "reasoning"):
        value = message.get(key)
        if isinstance(value, str) and value:
            return value
    return None


def _int(x: Any) -> int:
    try:
        return int(x or 0)
    except (TypeError, ValueError):
        return 0


def cached_tokens(usage: Any, data: Any = None) -> int:
    """Cached prompt tokens in any provider's shape (0 when not reported)."""
    if isinstance(usage, Mapping):
        ptd = usage.get("prompt_tokens_details")
        if isinstance(ptd, Mapping) and ptd.get("cached_tokens") is not None:
            return _int(ptd.get("cached_tokens"))
        if usage.get("prompt_cache_hit_tokens") is not None:  # DeepSeek
            return _int(usage.get("prompt_cache_hit_tokens"))
    if isinstance(data, Mapping):  # llama.cpp's server timings
        timings = data.get("timings")
        if isinstance(timings, Mapping) and timings.get("cache_n") is not None:
            return _int(timings.get("cache_n"))
    return 0


def error_message(body: Any) -> str | None:
    """The human message of an error body, whichever provider shaped it:
    OpenAI / llama.cpp / Ollama `{"error": {"message"}}` (the client passes the inner object),
    Anthropic `{"type": "error", "error": {...}}`, Gemini `[{"error": {...}}]`, vLLM
    `{"object": "error", "message"}`, Ollama native `{"error": "text"}`."""
    if isinstance(body, list) and body:
        return error_message(body[0])
    if isinstance(body, str):
        return body
    if not isinstance(body, Mapping):
        return None
    msg = body.get("message")
    if isinstance(msg, str):
        return msg
    inner = body.get("error")
    if inner is not None:
        return error_message(inner)
    return None
