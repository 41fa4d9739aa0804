"""Endpoint presets: what each provider's OpenAI-compatible endpoint accepts and how it answers.

All provider-specific behaviour of the LLM layer lives here, as data (`Preset`) plus a few pure
functions the client and the config call at fixed points — no provider conditionals elsewhere:

- `fill_defaults` (config, before validation): a preset's base URL, key variable, token-cap
  field and output protocol, for every field the params leave out;
- `check_config` (config, after validation): an option the endpoint does not support is refused
  when the params are loaded, before any request (temperature on a reasoning model,
  `reasoning_effort` where it is ignored or a value the model's family refuses, a structured
  mode the endpoint silently drops...);
- `Family` tables (`OPENAI_FAMILIES`, `GEMINI_FAMILIES`, ...): the reasoning-effort values each
  model family accepts and the effort it reasons at when none is sent, each with its source;
  `effort_of` gives a call's effective effort and `REASONING_TOKENS` mbb's stated assumption of
  the tokens one call reasons at each effort (for estimates);
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

import re
import zlib
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Literal

__all__ = [
    "EFFORTS",
    "PRESETS",
    "REASONING_TOKENS",
    "Family",
    "Preset",
    "adapt_body",
    "cache_hints",
    "cached_tokens",
    "check_config",
    "effort_of",
    "error_message",
    "fill_defaults",
    "preset_of",
    "reasoning_text",
    "slot_of",
]

Reasoning = Literal["none", "reasoning_effort", "openrouter"]
CacheHint = Literal["none", "prompt_cache_key", "llama_slot"]

# Every reasoning-effort value any provider documents, lowest to highest.
EFFORTS = ("none", "minimal", "low", "medium", "high", "xhigh")

# mbb's stated assumption of the reasoning tokens one call spends at each effort (a negotiation
# turn: a short structured answer to a long prompt). Used by `mbb estimate` (overridable there
# with --reasoning-tokens, or replaced by what recorded runs spent with --recorded) and by the
# loopback emulator (`mbb.testing.emulate`), which reports about this many per call. Nothing
# here is measured on a real model: a real one thinks as long as it likes (capped by
# max_tokens); calibrate from a few real runs before a costly study.
REASONING_TOKENS: dict[str, int] = {
    "none": 0,
    "minimal": 100,
    "low": 400,
    "medium": 1200,
    "high": 3000,
    "xhigh": 6000,
}


@dataclass(frozen=True)
class Family:
    """Models of one preset that accept the same reasoning-effort values.

    `pattern` is matched (`re.fullmatch`, case-insensitive) against the model name sent to the
    endpoint, without a fine-tune's `ft:` prefix and its `:org::id` suffix. `efforts`: the values
    the endpoint accepts for these models (empty: it takes no reasoning_effort at all);
    `default`: the effort the model reasons at when none is sent (None: it does not reason
    unless asked), which the estimate assumes; `source`: where the rule comes from."""

    name: str
    pattern: str
    efforts: tuple[str, ...]
    default: str | None
    source: str

    def matches(self, model: str) -> bool:
        return re.fullmatch(self.pattern, _bare(model), flags=re.IGNORECASE) is not None

    def listed(self) -> str:
        return "|".join(self.efforts) if self.efforts else "none accepted"


def _bare(model: str) -> str:
    """A model name without a fine-tune's decoration (`ft:o4-mini-2025-04-16:org::id`)."""
    if model.startswith("ft:"):
        return model[3:].split(":", 1)[0]
    return model


_DATE = r"(-\d{4}-\d{2}-\d{2}|-\d{4}|-preview(-[\w-]+)?|-latest|-exp(-[\w-]+)?)?"
_OPENAI_GUIDE = "OpenAI reasoning guide and model pages (platform.openai.com/docs)"
_GPT51 = "OpenAI GPT-5.1 guide: gpt-5.1 defaults to none, accepts none|low|medium|high"
_GPT52 = "OpenAI GPT-5.2 guide (latest-model parameter compatibility): none..xhigh"
_GEMINI = "Gemini API, OpenAI compatibility (ai.google.dev/gemini-api/docs/openai)"
# Each preset's families, the first match wins; a model name no family matches gets the
# preset's `other` family: every value the provider documents for any model is accepted (the
# endpoint itself is then the judge; `mbb estimate` dry-runs the preset's emulator, and a real
# refusal shows in the first run's first call), and it is assumed to reason only when asked.
OPENAI_FAMILIES = (
    Family(
        "o1-mini, o1-preview",
        r"o1-(mini|preview)" + _DATE,
        (),
        "medium",
        "OpenAI API reference: reasoning_effort is for o1 and later (o1-mini and o1-preview "
        "answer 'Unrecognized request argument')",
    ),
    Family(
        "o1/o3/o4 series",
        r"o[134](-mini|-pro)?" + _DATE,
        ("low", "medium", "high"),
        "medium",
        _OPENAI_GUIDE,
    ),
    Family(
        "gpt-5-pro",
        r"gpt-5-pro" + _DATE,
        ("high",),
        "high",
        "OpenAI gpt-5-pro model page: high only (its default)",
    ),
    Family(
        "gpt-5-codex", r"gpt-5-codex" + _DATE, ("low", "medium", "high"), "medium", _OPENAI_GUIDE
    ),
    Family(
        "gpt-5, gpt-5-mini, gpt-5-nano",
        r"gpt-5(-mini|-nano)?" + _DATE,
        ("minimal", "low", "medium", "high"),
        "medium",
        "OpenAI GPT-5 guide: minimal|low|medium|high, default medium",
    ),
    Family(
        "gpt-5.1-codex-max",
        r"gpt-5\.1-codex-max" + _DATE,
        ("low", "medium", "high", "xhigh"),
        "medium",
        "OpenAI reasoning guide: xhigh from gpt-5.1-codex-max on; codex takes no none",
    ),
    Family(
        "gpt-5.1-codex, gpt-5.1-codex-mini",
        r"gpt-5\.1-codex(-mini)?" + _DATE,
        ("low", "medium", "high"),
        "medium",
        _OPENAI_GUIDE,
    ),
    Family(
        "gpt-5.x-chat-latest",
        r"gpt-5\.\d+-chat-latest",
        ("medium",),
        "medium",
        "OpenAI model pages: the chat-latest aliases take medium only",
    ),
    Family(
        "gpt-5.1",
        r"gpt-5\.1(-mini|-nano)?" + _DATE,
        ("none", "low", "medium", "high"),
        None,
        _GPT51,
    ),
    Family(
        "gpt-5.2 and later codex",
        r"gpt-5\.([2-9]|\d\d+)-codex[\w-]*",
        ("low", "medium", "high", "xhigh"),
        "medium",
        _GPT52 + "; codex variants take no none",
    ),
    Family(
        "gpt-5.2 and later pro",
        r"gpt-5\.([2-9]|\d\d+)-pro" + _DATE,
        ("medium", "high", "xhigh"),
        "medium",
        "OpenAI gpt-5.2-pro / gpt-5.4-pro model pages: medium|high|xhigh",
    ),
    Family(
        "gpt-5.2 and later",
        r"gpt-5\.([2-9]|\d\d+)(-mini|-nano)?" + _DATE,
        ("none", "low", "medium", "high", "xhigh"),
        None,
        _GPT52 + "; default none (assumed for later versions too)",
    ),
)
GEMINI_FAMILIES = (
    Family(
        "gemini-3 pro",
        r"gemini-3(\.\d+)?-pro[\w.-]*",
        ("low", "high"),
        "high",
        _GEMINI + "; Gemini 3 Pro thinks always, at low or high (medium is refused)",
    ),
    Family(
        "gemini-3 flash",
        r"gemini-3(\.\d+)?-flash[\w.-]*",
        ("none", "low", "medium", "high"),
        "high",
        "the endpoint's own refusal: 'Invalid reasoning_effort: minimal. Valid values "
        "are: high, low, medium, none' (the docs list minimal too)",
    ),
    Family(
        "gemini-2.5 pro",
        r"gemini-2\.5-pro[\w.-]*",
        ("low", "medium", "high"),
        "medium",
        _GEMINI + "; thinking cannot be turned off on 2.5 Pro (dynamic: mbb assumes medium)",
    ),
    Family(
        "gemini-2.5 flash-lite",
        r"gemini-2\.5-flash-lite[\w.-]*",
        ("none", "low", "medium", "high"),
        None,
        _GEMINI + "; Flash-Lite does not think unless asked",
    ),
    Family(
        "gemini-2.5 flash",
        r"gemini-2\.5-flash[\w.-]*",
        ("none", "low", "medium", "high"),
        "medium",
        _GEMINI + "; low/medium/high map to 1K/8K/24K-token thinking budgets, none "
        "turns thinking off (dynamic by default: mbb assumes medium)",
    ),
    Family(
        "gemini-2.0 and 1.5",
        r"gemini-(2\.0|1\.5)[\w.-]*",
        (),
        None,
        "Gemini 2.0 and 1.5 models do not think",
    ),
)
OPENROUTER_EFFORTS = ("none", "minimal", "low", "medium", "high", "xhigh")
_OPENROUTER = (
    "OpenRouter reasoning tokens guide: effort is normalized across models "
    "(xhigh|high|medium|low|minimal|none)"
)
OPENROUTER_FAMILIES = (
    Family(
        "models that always reason (OpenAI o-series and gpt-5, Gemini 2.5 Pro and 3, DeepSeek R1)",
        r"(openai/(o[134]|gpt-5)[\w.-]*|google/gemini-(2\.5-pro|3)[\w.-]*"
        r"|deepseek/deepseek-r1[\w.:-]*)",
        OPENROUTER_EFFORTS,
        "medium",
        _OPENROUTER + "; these reason even when not asked (mbb assumes medium); other models, "
        "Gemini 2.5 Flash included, think through OpenRouter only when asked",
    ),
)
DEEPSEEK_FAMILIES = (
    Family(
        "deepseek-reasoner",
        r"deepseek-reasoner",
        (),
        "medium",
        "DeepSeek API docs: deepseek-reasoner always thinks and takes no reasoning_effort "
        "(mbb assumes medium's tokens)",
    ),
)
_OLLAMA = (
    "Ollama's OpenAI compatibility: reasoning_effort high|medium|low, and none turns "
    "thinking off (ollama/ollama#12004, #14820)"
)


def _other(name: str, efforts: tuple[str, ...], source: str) -> Family:
    return Family(f"other {name} models", r".*", efforts, None, source)


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
    # reasoning-effort values by model family; `other` for names no family matches
    families: tuple[Family, ...] = ()
    other: Family = Family("any model", r".*", (), None, "the endpoint takes no reasoning_effort")
    cache_hint: CacheHint = "none"
    note: str = ""

    def family(self, model: str) -> Family:
        """The family of `model` (the name sent to the endpoint) at this preset."""
        return next((f for f in self.families if f.matches(model)), self.other)


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
            families=OPENAI_FAMILIES,
            other=Family(
                "other OpenAI models",
                r".*",
                EFFORTS,
                "medium",
                _OPENAI_GUIDE + "; an unknown name: any documented value, and mbb "
                "assumes it reasons at medium when none is sent",
            ),
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
            families=GEMINI_FAMILIES,
            other=_other("Gemini", ("none", "low", "medium", "high"), _GEMINI),
            note="unknown request fields are rejected",
        ),
        Preset(
            "deepseek",
            "https://api.deepseek.com/v1",
            "DEEPSEEK_API_KEY",
            structured=("prompt_only",),  # json_object without a schema only
            default_structured="prompt_only",
            families=DEEPSEEK_FAMILIES,
            other=_other("DeepSeek", (), "DeepSeek API docs: no reasoning_effort"),
            note="deepseek-reasoner: reasoning in reasoning_content; cache hits in "
            "prompt_cache_hit_tokens",
        ),
        Preset(
            "openrouter",
            "https://openrouter.ai/api/v1",
            "OPENROUTER_API_KEY",
            structured=("json_schema", "prompt_only"),
            reasoning="openrouter",
            families=OPENROUTER_FAMILIES,
            other=_other("OpenRouter", OPENROUTER_EFFORTS, _OPENROUTER),
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
            other=_other("Ollama", ("none", "low", "medium", "high"), _OLLAMA),
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


def effort_of(preset: str | None, model: str, sent: str | None) -> str | None:
    """The reasoning effort a call runs at: the one sent, else the model family's default
    (None: the model does not reason; "none" as sent means the same)."""
    if sent is not None:
        return None if sent == "none" else sent
    p = preset_of(preset)
    if p is None:
        return None
    return p.family(model).default


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
        fam = p.family(cfg.model)
        if cfg.reasoning_effort not in fam.efforts:
            if not fam.efforts:
                raise ValueError(
                    f"{who}: {fam.name} take no reasoning_effort (from: {fam.source}); remove it"
                )
            raise ValueError(
                f"{who}: reasoning_effort must be one of {fam.listed()} for {fam.name}, got "
                f"{cfg.reasoning_effort!r} (from: {fam.source})"
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
    """A cached-token count, 0 when it is not one (negative, past the provider's
    MAX_TOKENS_PER_CALL, or not a number)."""
    try:
        v = int(x or 0)
    except (TypeError, ValueError, OverflowError):
        return 0
    return v if 0 <= v <= 10**9 else 0


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
