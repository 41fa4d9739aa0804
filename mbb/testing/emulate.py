"""Loopback emulation of real providers' quirks, for tests and benchmarks (no network).

`ProviderEmulator(provider, responder)` is a responder for `FakeOpenAIServer`: it checks each
request the way that provider's OpenAI-compatible endpoint does (and answers a violation with
that provider's status and error body), asks the inner responder for the answer, then reshapes
it the way the provider sends it: reasoning text in `reasoning_content` or `reasoning`, tool-call
arguments as a string or an object, cached prompt tokens in the provider's usage field. Usage is
counted from the text (about 4 characters a token) and, with `prefix_cache`, a request repeating
at least `min_cached_chars` of an earlier prompt's prefix reports that prefix as cached, the way
OpenAI's automatic caching, vLLM/SGLang prefix caching and llama.cpp's `cache_prompt` do.
Reasoning-effort values are checked per model family (`mbb.llm.presets.Family`, refused in the
provider's words), and a model that reasons reports reasoning tokens in its usage.

What each provider is emulated to do is written down in `RULES` (`GENERIC` for a config
without a preset); `mbb.llm.presets` is the client side of the same quirks.
"""

from __future__ import annotations

import bisect
import contextlib
import json
import math
import threading
import time
import zlib
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from mbb.llm import presets
from mbb.testing.testserver import Reply, schema_responder

__all__ = [
    "GENERIC",
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
    # how the endpoint takes reasoning effort (None: reasoning_effort is an unknown argument);
    # the values each model accepts are its family's (`mbb.llm.presets.Preset.family`)
    effort_field: str | None = None  # "reasoning_effort" | "reasoning" (OpenRouter's object)
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
    "openai": Rules(unknown_fields_rejected=(*_OPENAI_UNKNOWN, "reasoning_effort")),
    "openai_reasoning": Rules(
        max_tokens_fields=("max_completion_tokens",),
        temperature=False,
        effort_field="reasoning_effort",
        formats=("json_schema", "text"),
        unknown_fields_rejected=_OPENAI_UNKNOWN,
    ),
    "anthropic": Rules(
        max_temperature=1.0, strict=True, error_shape="anthropic", cached_usage="none"
    ),
    "gemini": Rules(
        effort_field="reasoning_effort",
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
        effort_field="reasoning",
        reasoning_field="reasoning",
        extra_ok=("reasoning",),
    ),
    "vllm": Rules(reasoning_field="reasoning_content", strict=True, error_shape="vllm"),
    "ollama": Rules(
        effort_field="reasoning_effort",
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
# A config without a preset: a permissive OpenAI-compatible endpoint (any documented effort,
# any response format) with OpenAI-style automatic prefix caching.
GENERIC = Rules(effort_field="reasoning_effort")


def _listed(values: tuple[str, ...], conj: str = "and") -> str:
    quoted = [f"'{v}'" for v in values]
    return ", ".join(quoted[:-1]) + f", {conj} {quoted[-1]}" if len(quoted) > 1 else quoted[0]


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
    """A `FakeOpenAIServer` responder behaving like one provider's endpoint (`provider` None: a
    permissive OpenAI-compatible endpoint, for a config without a preset).

    Reasoning: a call whose model reasons (the effort sent, else its family's default,
    `mbb.llm.presets.effort_of`) reports `reasoning_tokens` per effort (default: mbb's stated
    assumption, `presets.REASONING_TOKENS`) as completion tokens and in
    `completion_tokens_details.reasoning_tokens`, times a factor drawn per request in
    [1 - spread, 1 + spread] (deterministic: from the request), capped by the request's token
    cap; its text `reasoning` is returned in the provider's reasoning field (if it has one).
    `latency_s`: each answer waits this long, and the time some request was waiting is kept
    (`busy_s`): divided by `latency_s`, the number of calls a client made one after another."""

    provider: str | None
    responder: Callable[[dict[str, Any]], Reply] = schema_responder
    prefix_cache: bool = True
    min_cached_chars: int = 4096
    reasoning: str | None = (
        "Thinking about the bids first."  # returned when the provider has a field
    )
    reasoning_tokens: Mapping[str, int] = field(
        default_factory=lambda: dict(presets.REASONING_TOKENS)
    )
    spread: float = 0.0
    latency_s: float = 0.0
    log: PrefixLog = field(init=False)
    rejected: list[str] = field(default_factory=list)

    def __post_init__(self) -> None:
        self.rules = GENERIC if self.provider is None else RULES[self.provider]
        self.log = PrefixLog(self.min_cached_chars)
        self._lock = threading.Lock()
        self._waits: list[tuple[float, float]] = []

    def _effort_problem(self, model: str, effort: Any) -> str | None:
        """The provider's refusal of `effort` for `model` (None: accepted)."""
        if self.provider is None:
            return None if effort in presets.EFFORTS else f"Invalid reasoning_effort: {effort}"
        fam = presets.PRESETS[self.provider].family(model)
        if effort in fam.efforts:
            return None
        if self.provider == "gemini":
            return (
                f"Invalid reasoning_effort: {effort}. Valid values are: "
                f"{', '.join(sorted(fam.efforts))}"
            )
        if not fam.efforts:
            return "Unrecognized request argument supplied: reasoning_effort"
        return (
            f"Unsupported value: '{effort}' is not supported with the '{model}' model. "
            f"Supported values are: {_listed(fam.efforts)}."
        )

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
        model = str(body.get("model"))
        if "reasoning_effort" in body:
            if r.effort_field != "reasoning_effort":
                return "Unrecognized request argument supplied: reasoning_effort"
            problem = self._effort_problem(model, body["reasoning_effort"])
            if problem is not None:
                return problem
        if isinstance(body.get("reasoning"), dict) and r.effort_field == "reasoning":
            effort = body["reasoning"].get("effort")
            if effort is not None and self._effort_problem(model, effort) is not None:
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

    def effort(self, body: dict[str, Any]) -> str | None:
        """The effort this request reasons at (None: it does not reason)."""
        sent = body.get("reasoning_effort")
        if isinstance(body.get("reasoning"), dict):
            sent = body["reasoning"].get("effort", sent)
        return presets.effort_of(self.provider, str(body.get("model")), sent)

    def __call__(self, body: dict[str, Any]) -> Reply:
        if self.latency_s:
            t0 = time.monotonic()
            time.sleep(self.latency_s)
            with self._lock:
                self._waits.append((t0, time.monotonic()))
        problem = self.check(body)
        if problem is not None:
            self.rejected.append(problem)
            return provider_error(self.rules.error_shape, problem)
        reply = self.responder(body)
        if reply.status != 200 or not isinstance(reply.body, dict):
            return reply
        data = json.loads(json.dumps(reply.body))  # a private copy to reshape
        msg = data["choices"][0]["message"]
        data["usage"] = self.usage(body, msg)
        reasoned = data["usage"]["completion_tokens_details"]["reasoning_tokens"] > 0
        if self.rules.reasoning_field and self.reasoning and reasoned:
            msg[self.rules.reasoning_field] = self.reasoning
        if self.rules.tool_args_object:
            for call in msg.get("tool_calls") or []:
                fn = call.get("function", {})
                with contextlib.suppress(TypeError, ValueError):
                    fn["arguments"] = json.loads(fn["arguments"])
        if self.rules.cached_usage == "llamacpp":
            data["timings"] = {
                "cache_n": data["usage"].pop("_cached"),
                "prompt_n": data["usage"]["prompt_tokens"],
            }
        else:
            data["usage"].pop("_cached", None)
        return Reply(status=200, body=data, headers=reply.headers, delay_s=reply.delay_s)

    def reasoning_of(self, body: dict[str, Any], answer_tokens: int) -> int:
        """Reasoning tokens of one answer: the effort's tokens, spread, within the token cap."""
        effort = self.effort(body)
        if effort is None:
            return 0
        model = str(body.get("model"))
        tokens = self.reasoning_tokens.get(model, self.reasoning_tokens.get(effort, 0))
        if self.spread and tokens:
            key = json.dumps(body.get("messages", []), sort_keys=True).encode()
            u = zlib.crc32(key) / 0xFFFFFFFF  # uniform in [0, 1], fixed by the request
            tokens = round(tokens * (1 - self.spread + 2 * self.spread * u))
        cap = body.get("max_completion_tokens") or body.get("max_tokens")
        if isinstance(cap, int):
            tokens = min(tokens, max(0, cap - answer_tokens))
        return tokens

    def usage(self, body: dict[str, Any], msg: dict[str, Any]) -> dict[str, Any]:
        text = prompt_text(body)
        prompt = count_tokens(text)
        reused = self.log.add(text) if self.prefix_cache else 0
        cached = (count_tokens(text[:reused]) // 128) * 128 if reused else 0
        out_text = (msg.get("content") or "") + json.dumps(msg.get("tool_calls") or "")
        answer = count_tokens(out_text)
        reasoning = self.reasoning_of(body, answer)
        completion = answer + reasoning
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

    def waits(self) -> list[tuple[float, float]]:
        """Every wait of `latency_s` so far: (start, end) on `time.monotonic`."""
        with self._lock:
            return list(self._waits)

    def busy_s(self) -> float:
        """Seconds during which at least one request was waiting out `latency_s`."""
        waits = sorted(self.waits())
        total, end = 0.0, float("-inf")
        for a, b in waits:
            if b > end:
                total += b - max(a, end)
                end = b
        return total
