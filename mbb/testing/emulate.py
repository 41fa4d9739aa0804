"""Loopback emulation of real providers' quirks, for tests and benchmarks (no network).

`ProviderEmulator(provider, responder)` is a responder for `FakeOpenAIServer`: it checks each
request the way that provider's OpenAI-compatible endpoint does (and answers a violation with
that provider's status and error body), asks the inner responder for the answer, then reshapes
it the way the provider sends it: reasoning text in `reasoning_content` or `reasoning`, tool-call
arguments as a string or an object, cached prompt tokens in the provider's usage field. Usage is
counted from the text (about 4 characters a token) and, with `prefix_cache`, a request repeating
at least `min_cached_chars` of an earlier prompt's prefix reports that prefix as cached, the way
OpenAI's automatic caching, vLLM/SGLang prefix caching and llama.cpp's `cache_prompt` do.

What each provider is emulated to do is written down in `RULES`; `mbb.llm.presets` is the
client side of the same quirks.
"""

from __future__ import annotations

import bisect
import contextlib
import json
import math
import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from mbb.testing.testserver import Reply, schema_responder

__all__ = [
    "PROVIDERS",
    "PrefixLog",
    "ProviderEmulator",
    "common_prefix",
    "count_tokens",
    "prompt_text",
]

CHARS_PER_TOKEN = 4


def count_tokens(text: str) -> int:
    return math.ceil(len(text) / CHARS_PER_TOKEN) if text else 0


def prompt_text(body: dict[str, Any]) -> str:
    """The prompt as a chat template lays it out (what a server's prefix cache sees): the tool
    definitions first (templates render them into the system turn), then each message's role,
    content and tool calls in order. A response_format schema is a grammar, not prompt text."""
    tools = body.get("tools")
    parts = [f"<|tools|>\n{json.dumps(tools, sort_keys=True)}\n"] if tools else []
    for m in body.get("messages") or []:
        content = m.get("content")
        if not isinstance(content, str):
            content = json.dumps(content, sort_keys=True) if content is not None else ""
        calls = m.get("tool_calls")
        extra = json.dumps(calls, sort_keys=True) if calls else ""
        parts.append(f"<|{m.get('role')}|>\n{content}{extra}\n")
    return "".join(parts)


def common_prefix(a: str, b: str) -> int:
    """Length of the longest common prefix (binary search over slice comparisons: fast)."""
    lo, hi = 0, min(len(a), len(b))
    while lo < hi:
        mid = (lo + hi + 1) // 2
        if a[:mid] == b[:mid]:
            lo = mid
        else:
            hi = mid - 1
    return lo


class PrefixLog:
    """Prompts seen so far; `add` returns how many leading characters of a new prompt repeat
    the prefix of an earlier one (0 below `min_chars`). The longest common prefix with a set of
    strings is reached at a lexicographic neighbour, so prompts are kept sorted."""

    def __init__(self, min_chars: int = 4096) -> None:
        self.min_chars = min_chars
        self._sorted: list[str] = []
        self._lock = threading.Lock()
        self.total_chars = 0
        self.reused_chars = 0
        self.requests = 0

    def add(self, text: str) -> int:
        with self._lock:
            at = bisect.bisect_left(self._sorted, text)
            best = max(
                (
                    common_prefix(text, self._sorted[i])
                    for i in (at - 1, at)
                    if 0 <= i < len(self._sorted)
                ),
                default=0,
            )
            self._sorted.insert(at, text)
            reused = best if best >= self.min_chars else 0
            self.requests += 1
            self.total_chars += len(text)
            self.reused_chars += reused
        return reused

    @property
    def share(self) -> float:
        return self.reused_chars / self.total_chars if self.total_chars else 0.0


@dataclass(frozen=True)
class Rules:
    """How one provider's endpoint is emulated."""

    max_tokens_fields: tuple[str, ...] = ("max_tokens", "max_completion_tokens")
    temperature: bool = True
    max_temperature: float = 2.0
    efforts: tuple[str, ...] | None = None  # None: reasoning_effort is an unknown argument
    formats: tuple[str, ...] = ("json_schema", "json_object", "text")
    strict: bool = True  # json_schema "strict" accepted
    unknown_fields_rejected: tuple[str, ...] = ()  # fields answered with a 400
    reasoning_field: str | None = None  # where reasoning text is returned
    tool_args_object: bool = False  # tool-call arguments as a JSON object, not a string
    cached_usage: str = "openai"  # openai | deepseek | llamacpp | none
    error_shape: str = "openai"  # openai | anthropic | gemini | vllm | llamacpp | ollama
    rejects_reasoning_input: bool = False  # 400 when messages carry reasoning_content
    extra_ok: tuple[str, ...] = ()  # accepted non-OpenAI fields


_OPENAI_UNKNOWN = ("cache_prompt", "id_slot", "reasoning")
RULES: dict[str, Rules] = {
    "openai": Rules(efforts=None, unknown_fields_rejected=(*_OPENAI_UNKNOWN, "reasoning_effort")),
    "openai_reasoning": Rules(
        max_tokens_fields=("max_completion_tokens",),
        temperature=False,
        efforts=("minimal", "low", "medium", "high"),
        formats=("json_schema", "text"),
        unknown_fields_rejected=_OPENAI_UNKNOWN,
    ),
    "anthropic": Rules(
        max_temperature=1.0, strict=True, error_shape="anthropic", cached_usage="none"
    ),
    "gemini": Rules(
        efforts=("none", "low", "medium", "high"),
        formats=("json_schema", "json_object", "text"),
        strict=False,
        unknown_fields_rejected=("prompt_cache_key", "cache_prompt", "id_slot", "reasoning"),
        error_shape="gemini",
    ),
    "deepseek": Rules(
        formats=("json_object", "text"),
        reasoning_field="reasoning_content",
        cached_usage="deepseek",
        rejects_reasoning_input=True,
    ),
    "openrouter": Rules(
        efforts=("minimal", "low", "medium", "high"),
        reasoning_field="reasoning",
        extra_ok=("reasoning",),
    ),
    "vllm": Rules(reasoning_field="reasoning_content", strict=True, error_shape="vllm"),
    "ollama": Rules(
        efforts=("low", "medium", "high"),
        reasoning_field="reasoning",
        tool_args_object=True,
        cached_usage="none",
        error_shape="ollama",
    ),
    "llamacpp": Rules(
        reasoning_field="reasoning_content",
        cached_usage="llamacpp",
        error_shape="llamacpp",
        extra_ok=("cache_prompt", "id_slot"),
    ),
}
PROVIDERS = tuple(RULES)


def provider_error(shape: str, message: str, status: int = 400) -> Reply:
    """A bad-request answer in the provider's own body shape."""
    if shape == "anthropic":
        body: Any = {
            "type": "error",
            "error": {"type": "invalid_request_error", "message": message},
        }
    elif shape == "gemini":
        body = [{"error": {"code": status, "message": message, "status": "INVALID_ARGUMENT"}}]
    elif shape == "vllm":
        body = {"object": "error", "message": message, "type": "BadRequestError", "code": status}
    elif shape == "llamacpp":
        body = {"error": {"code": status, "message": message, "type": "invalid_request_error"}}
    elif shape == "ollama":
        body = {"error": message}
    else:
        body = {
            "error": {
                "message": message,
                "type": "invalid_request_error",
                "param": None,
                "code": None,
            }
        }
    return Reply(status=status, body=body)


@dataclass
class ProviderEmulator:
    """A `FakeOpenAIServer` responder behaving like one provider's endpoint."""

    provider: str
    responder: Callable[[dict[str, Any]], Reply] = schema_responder
    prefix_cache: bool = True
    min_cached_chars: int = 4096
    reasoning: str | None = (
        "Thinking about the bids first."  # returned when the provider has a field
    )
    log: PrefixLog = field(init=False)
    rejected: list[str] = field(default_factory=list)

    def __post_init__(self) -> None:
        self.rules = RULES[self.provider]
        self.log = PrefixLog(self.min_cached_chars)

    def check(self, body: dict[str, Any]) -> str | None:
        """Why the provider would refuse this request (None: it accepts it)."""
        r = self.rules
        for f in r.unknown_fields_rejected:
            if f in body and f not in r.extra_ok:
                if self.provider == "gemini":
                    return f'Invalid JSON payload received. Unknown name "{f}": Cannot find field.'
                return f"Unrecognized request argument supplied: {f}"
        for f in ("max_tokens", "max_completion_tokens"):
            if f in body and f not in r.max_tokens_fields:
                return (
                    f"Unsupported parameter: '{f}' is not supported with this model. Use "
                    f"'{r.max_tokens_fields[0]}' instead."
                )
        if "temperature" in body:
            t = body["temperature"]
            if not r.temperature and t != 1:
                return (
                    f"Unsupported value: 'temperature' does not support {t} with this model. "
                    "Only the default (1) value is supported."
                )
        if "reasoning_effort" in body:
            if r.efforts is None:
                return "Unrecognized request argument supplied: reasoning_effort"
            if body["reasoning_effort"] not in r.efforts:
                return f"Invalid value for 'reasoning_effort': {body['reasoning_effort']!r}"
        if isinstance(body.get("reasoning"), dict) and r.efforts is not None:
            effort = body["reasoning"].get("effort")
            if effort is not None and effort not in r.efforts:
                return f"Invalid reasoning effort {effort!r}"
        fmt = body.get("response_format")
        if isinstance(fmt, dict):
            kind = fmt.get("type")
            if kind not in r.formats:
                return f"This response_format type is unavailable now: {kind}"
            if kind == "json_schema" and fmt.get("json_schema", {}).get("strict") and not r.strict:
                return "Unknown name \"strict\" at 'response_format.json_schema'"
        if r.rejects_reasoning_input:
            for m in body.get("messages") or []:
                if "reasoning_content" in m:
                    return "reasoning_content must not be sent back in input messages"
        return None

    def __call__(self, body: dict[str, Any]) -> Reply:
        problem = self.check(body)
        if problem is not None:
            self.rejected.append(problem)
            return provider_error(self.rules.error_shape, problem)
        reply = self.responder(body)
        if reply.status != 200 or not isinstance(reply.body, dict):
            return reply
        data = json.loads(json.dumps(reply.body))  # a private copy to reshape
        msg = data["choices"][0]["message"]
        if self.rules.reasoning_field and self.reasoning:
            msg[self.rules.reasoning_field] = self.reasoning
        if self.rules.tool_args_object:
            for call in msg.get("tool_calls") or []:
                fn = call.get("function", {})
                with contextlib.suppress(TypeError, ValueError):
                    fn["arguments"] = json.loads(fn["arguments"])
        data["usage"] = self.usage(body, msg)
        if self.rules.cached_usage == "llamacpp":
            data["timings"] = {
                "cache_n": data["usage"].pop("_cached"),
                "prompt_n": data["usage"]["prompt_tokens"],
            }
        else:
            data["usage"].pop("_cached", None)
        return Reply(status=200, body=data, headers=reply.headers, delay_s=reply.delay_s)

    def usage(self, body: dict[str, Any], msg: dict[str, Any]) -> dict[str, Any]:
        text = prompt_text(body)
        prompt = count_tokens(text)
        reused = self.log.add(text) if self.prefix_cache else 0
        cached = (count_tokens(text[:reused]) // 128) * 128 if reused else 0
        out_text = (msg.get("content") or "") + json.dumps(msg.get("tool_calls") or "")
        reasoning = count_tokens(self.reasoning or "") if self.rules.reasoning_field else 0
        completion = count_tokens(out_text) + reasoning
        usage: dict[str, Any] = {
            "prompt_tokens": prompt,
            "completion_tokens": completion,
            "total_tokens": prompt + completion,
            "completion_tokens_details": {"reasoning_tokens": reasoning},
        }
        kind = self.rules.cached_usage
        if kind == "openai":
            usage["prompt_tokens_details"] = {"cached_tokens": cached}
        elif kind == "deepseek":
            usage["prompt_cache_hit_tokens"] = cached
            usage["prompt_cache_miss_tokens"] = prompt - cached
        usage["_cached"] = cached if kind == "llamacpp" else 0
        return usage
