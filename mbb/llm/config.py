"""How to reach one model: endpoint, key env-var NAME, sampling, output protocol and limits.

Configs are written into params files and events, so they hold the *name* of the environment
variable that carries the API key, never the key itself; a value that looks like a key is refused.
"""

from __future__ import annotations

import datetime
import re
import urllib.parse
from typing import Annotated, Any, Literal

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    field_validator,
    model_serializer,
    model_validator,
)

from mbb.llm import presets

__all__ = ["ModelConfig", "Price", "StructuredMode", "ToolProtocol"]

StructuredMode = Literal["json_schema", "json_object_schema", "prompt_only"]
ToolProtocol = Literal["native", "json_action"]

_ENV_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")
_KEY_PREFIXES = ("sk-", "sk_", "sk-proj", "sk-ant", "gsk_", "xai-", "hf_", "pk-", "ghp_", "or-")


class ModelConfig(BaseModel):
    """One model behind one OpenAI-compatible endpoint."""

    model_config = ConfigDict(extra="forbid", frozen=True, hide_input_in_errors=True, strict=True)

    model: str = Field(description="Model name sent to the endpoint.")
    preset: str | None = Field(
        None,
        description="Endpoint preset (mbb.llm.presets): openai, openai_reasoning, anthropic, "
        "gemini, deepseek, openrouter, vllm, ollama, llamacpp. Fills base_url, api_key_env, "
        "max_tokens_field, structured and tool_protocol when they are left out, and refuses "
        "options the endpoint does not support.",
    )
    base_url: str = Field("https://api.openai.com/v1", description="OpenAI-compatible base URL.")
    api_key_env: str | None = Field(
        "OPENAI_API_KEY",
        description="NAME of the environment variable holding the key (None: no key needed).",
    )
    temperature: float | None = Field(None, ge=0, le=2, description="None: endpoint default.")
    max_tokens: int = Field(1024, ge=1, description="Completion token cap per call.")
    max_tokens_field: Literal["max_tokens", "max_completion_tokens"] = Field(
        "max_tokens", description="Request field carrying the cap (reasoning models need the 2nd)."
    )
    reasoning_effort: str | None = Field(None, description="e.g. low/medium/high; None: omit.")
    extra_body: dict[str, Any] = Field(default_factory=dict, description="Merged into requests.")
    structured: StructuredMode = Field(
        "json_schema",
        description=(
            "json_schema: OpenAI structured outputs; json_object_schema: llama.cpp style "
            "response_format={'type':'json_object','schema':...}; prompt_only: schema in the "
            "prompt, the first JSON object of the reply is parsed."
        ),
    )
    tool_protocol: ToolProtocol = Field(
        "json_action",
        description="native: forced function calls; json_action: the reply is a JSON action.",
    )
    timeout_s: float = Field(120.0, gt=0, description="Per-attempt HTTP timeout.")
    max_retries: int = Field(4, ge=0, le=20, description="Retries after the first attempt.")
    concurrency: int = Field(8, ge=1, le=1024, description="In-flight requests per endpoint.")
    rpm: int | None = Field(
        None, ge=1, description="Requests per minute the endpoint allows (None: no limit)."
    )
    tpm: int | None = Field(
        None, ge=1, description="Tokens per minute the endpoint allows (None: no limit)."
    )
    cache_hints: bool = Field(
        True,
        description="Send the preset's prefix-cache hints (prompt_cache_key; llama.cpp "
        "cache_prompt + id_slot). Never part of mbb's replay cache key.",
    )
    slots: int = Field(4, ge=1, le=256, description="llama.cpp server slots (-np): id_slot range.")
    history_chars: int = Field(
        12_000,
        ge=1_000,
        description="A negotiator's conversation (after the system prompt) is restarted from a "
        "snapshot of the state once it is longer than this; lower it for small context windows.",
    )

    @model_validator(mode="before")
    @classmethod
    def _preset_defaults(cls, data: Any) -> Any:
        return presets.fill_defaults(data)

    @model_validator(mode="after")
    def _preset_supports(self) -> ModelConfig:
        presets.check_config(self)
        return self

    @model_validator(mode="before")
    @classmethod
    def _a_name_not_a_key(cls, data: Any) -> Any:
        # Checked on the whole mapping (not the field) so error reports never echo the value.
        v = data.get("api_key_env") if isinstance(data, dict) else None
        if isinstance(v, str) and (
            v.lower().startswith(_KEY_PREFIXES) or len(v) > 64 or not _ENV_NAME.match(v)
        ):
            raise ValueError(
                "api_key_env must be the NAME of an environment variable (e.g. OPENAI_API_KEY), "
                "not a key; the value given looks like a key or is not a valid variable name "
                "(it is not echoed here)"
            )
        return data

    @field_validator("base_url")
    @classmethod
    def _http_url(cls, v: str) -> str:
        if not v.startswith(("http://", "https://")):
            raise ValueError(f"base_url must start with http:// or https://, got {v!r}")
        if "@" in v.split("//", 1)[1].split("/", 1)[0]:
            raise ValueError("base_url must not embed credentials (user:password@host)")
        # a port out of range or no host surfaced, at the first call, as "unhandled errors in
        # a TaskGroup" (a red team's find): refused when read
        try:
            parts = urllib.parse.urlsplit(v)
            parts.port  # noqa: B018 - raises ValueError for a port out of range or not a number
        except ValueError as exc:
            raise ValueError(f"base_url {v!r}: {exc}") from None
        if not parts.hostname:
            raise ValueError(f"base_url {v!r} names no host")
        return v.rstrip("/")


# the highest price mbb reads, USD per million tokens (mbb's choice: the dearest models list
# a few hundred; a price past this is a typo, not a price)
MAX_USD_PER_MTOK = 100_000.0
# a price: finite, 0 to MAX_USD_PER_MTOK (a price of 1e300 was accepted and its costs broke
# mbb's own event log, over i64; `.inf` read as "unpriced": a red team's finds)
UsdPerMTok = Annotated[float, Field(ge=0, le=MAX_USD_PER_MTOK, allow_inf_nan=False)]


class Price(BaseModel):
    """USD per 1M tokens for one model name (cached prompt tokens may be cheaper), with where
    and when the price was read: prices change, and a study's cost is only as good as them."""

    model_config = ConfigDict(extra="forbid", frozen=True, strict=True)

    prompt: UsdPerMTok = Field(description="USD per 1M prompt tokens.")
    completion: UsdPerMTok = Field(description="USD per 1M completion tokens (incl. reasoning).")
    cached_prompt: UsdPerMTok | None = Field(None, description="USD per 1M cached prompt tokens.")
    date: str | None = Field(
        None,
        pattern=r"^\d{4}-\d{2}(-\d{2})?$",
        description="When the price was read: YYYY-MM-DD (or YYYY-MM).",
    )
    source: str | None = Field(
        None, max_length=300, description="Where the price was read (the provider's page)."
    )

    @field_validator("date", mode="before")
    @classmethod
    def _iso_date(cls, v: Any) -> Any:
        # YAML reads an unquoted 2026-12-01 as a date
        return v.isoformat() if isinstance(v, datetime.date) else v

    @model_serializer(mode="wrap")
    def _provenance_only_when_set(self, handler: Any) -> Any:
        # prices written without a date or source are recorded exactly as before those existed
        data = handler(self)
        if isinstance(data, dict):
            for key in ("date", "source"):
                if data.get(key) is None:
                    data.pop(key, None)
        return data

    def cost(self, prompt: int, completion: int, cached: int = 0) -> float:
        cached = min(cached, prompt)
        rate_cached = self.prompt if self.cached_prompt is None else self.cached_prompt
        usd = (prompt - cached) * self.prompt + cached * rate_cached + completion * self.completion
        return usd / 1e6

    def provenance(self) -> str:
        """'read 2026-12-01 from <source>', or what of it is known."""
        parts = ([f"read {self.date}"] if self.date else []) + (
            [f"from {self.source}"] if self.source else []
        )
        return " ".join(parts) or "no date or source"
