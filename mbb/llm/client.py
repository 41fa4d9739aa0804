"""One audited, retrying layer over `openai.AsyncOpenAI`.

Why our own retries: the client's built-in retries are invisible, so they could not be counted in
the token audit or made deterministic in tests. Here the openai client runs with `max_retries=0`;
we retry 429, 5xx, timeouts, dropped connections and malformed bodies with exponential backoff
and full jitter (honouring `Retry-After` seconds), through an injectable `sleep`. Auth failures
(401/403), unknown models (404) and a missing key variable fail fast with a message naming the
model, base URL and variable — never the key. Requests to one endpoint share a semaphore.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import random
import time
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass, replace
from typing import Any

import openai
from pydantic import BaseModel, ConfigDict

from mbb.agents.base import BackendFatal
from mbb.events import LlmCall
from mbb.llm import presets
from mbb.llm.budget import SpendLedger
from mbb.llm.cache import CacheMiss, LlmCache, request_key
from mbb.llm.config import ModelConfig, Price

__all__ = [
    "CallMeta",
    "ChatRequest",
    "Emit",
    "LlmClient",
    "LlmConfigError",
    "LlmError",
    "LlmResult",
    "LlmUnavailable",
    "Usage",
    "request_body",
]

Emit = Callable[..., Any]  # EventLog.emit-compatible: emit(cls, worker=..., **fields)
Sleep = Callable[[float], Awaitable[None]]
NO_KEY_PLACEHOLDER = "no-key"  # sent when a config needs no key (local servers)


class LlmError(RuntimeError):
    """Base of LLM-layer failures; `attempts`/`latency_s` say what the failure cost."""

    def __init__(self, message: str, *, attempts: int = 0, latency_s: float = 0.0) -> None:
        super().__init__(message)
        self.attempts = attempts
        self.latency_s = latency_s


class LlmConfigError(LlmError, BackendFatal):
    """Not retryable and not the agent's fault: bad key, unknown model, missing env variable."""


class LlmUnavailable(LlmError):
    """Retries exhausted, or a non-retryable request error: the caller applies its default."""


class Usage(BaseModel):
    model_config = ConfigDict(frozen=True)

    prompt: int = 0
    completion: int = 0
    reasoning: int = 0
    cached: int = 0


class LlmResult(BaseModel):
    """What one call returned, whether from the network or the cache."""

    model_config = ConfigDict(frozen=True)

    text: str | None = None
    tool_name: str | None = None
    tool_arguments: str | None = None
    tool_call_id: str | None = None  # the first tool call's id (echoed by a tool loop)
    refusal: str | None = None
    reasoning: str | None = None  # reasoning text beside the answer (reasoning_content/reasoning)
    finish_reason: str | None = None
    usage: Usage = Usage()
    latency_s: float = 0.0
    attempts: int = 0
    cache_hit: bool = False
    key: str = ""


@dataclass(frozen=True)
class ChatRequest:
    """The variable part of a request; the rest comes from the `ModelConfig`."""

    messages: list[dict[str, Any]]
    response_format: dict[str, Any] | None = None
    tools: list[dict[str, Any]] | None = None
    tool_choice: Any = None


@dataclass(frozen=True)
class CallMeta:
    """Who is calling and why: copied into the `LlmCall` event."""

    worker: str | None
    role: str  # negotiator | solver | report | summary | classifier
    phase: str
    subrun: int | None = None
    round: int | None = None
    repair: bool = False

    def as_repair(self) -> CallMeta:
        return replace(self, repair=True)


def request_body(config: ModelConfig, req: ChatRequest) -> dict[str, Any]:
    """The JSON body sent to the endpoint (and hashed for the cache); holds no secret."""
    body: dict[str, Any] = {"model": config.model, "messages": req.messages}
    body[config.max_tokens_field] = config.max_tokens
    if config.temperature is not None:
        body["temperature"] = config.temperature
    if config.reasoning_effort is not None:
        body["reasoning_effort"] = config.reasoning_effort
    if req.response_format is not None:
        body["response_format"] = req.response_format
    if req.tools is not None:
        body["tools"] = req.tools
    if req.tool_choice is not None:
        body["tool_choice"] = req.tool_choice
    for k, v in config.extra_body.items():
        body.setdefault(k, v)
    return presets.adapt_body(config, body)


def _usage(raw: Any, data: Any = None) -> Usage:
    """Token counts from a response's `usage` object (any part may be missing or null); cached
    prompt tokens in any provider's shape (`presets.cached_tokens`)."""
    if not isinstance(raw, dict):
        return Usage(cached=presets.cached_tokens(None, data))
    ctd = raw.get("completion_tokens_details") or {}
    return Usage(
        prompt=int(raw.get("prompt_tokens") or 0),
        completion=int(raw.get("completion_tokens") or 0),
        reasoning=int(ctd.get("reasoning_tokens") or 0) if isinstance(ctd, dict) else 0,
        cached=presets.cached_tokens(raw, data),
    )


class MalformedResponse(ValueError):
    """The endpoint answered 200 with a body that is not a chat-completion JSON object."""


def _text(value: Any) -> str | None:
    """A reply field as text: some servers send tool arguments as an object, not a string."""
    if value is None or isinstance(value, str):
        return value
    return json.dumps(value, sort_keys=True)


def _parse_response(data: Any) -> dict[str, Any]:
    """The reply's parts, read from the JSON body (`choices[0]`, its message, `usage`)."""
    if isinstance(data, str | bytes):  # served without a JSON content type
        data = json.loads(data)  # JSONDecodeError: malformed, retried like any other
    if not isinstance(data, dict):
        raise MalformedResponse(f"expected a JSON object, got {type(data).__name__}")
    choices = data.get("choices") or []
    choice = choices[0] if isinstance(choices, list) and choices else {}
    choice = choice if isinstance(choice, dict) else {}
    msg = choice.get("message")
    msg = msg if isinstance(msg, dict) else {}
    tool_name = tool_args = tool_id = None
    calls = msg.get("tool_calls")
    if calls and isinstance(calls, list) and isinstance(calls[0], dict):
        fn = calls[0].get("function")
        tool_id = _text(calls[0].get("id"))
        if isinstance(fn, dict):
            tool_name, tool_args = _text(fn.get("name")), _text(fn.get("arguments"))
    return {
        "text": _text(msg.get("content")),
        "tool_name": tool_name,
        "tool_arguments": tool_args,
        "tool_call_id": tool_id,
        "refusal": _text(msg.get("refusal")),
        "reasoning": presets.reasoning_text(msg),
        "finish_reason": _text(choice.get("finish_reason")),
        "usage": _usage(data.get("usage"), data),
    }


def _retry_after_s(exc: Exception) -> float | None:
    response = getattr(exc, "response", None)
    headers = getattr(response, "headers", None)
    if headers is None:
        return None
    value = headers.get("retry-after")
    if value is None:
        return None
    try:
        seconds = float(value)
    except ValueError:
        return None  # an HTTP date: fall back to our own backoff
    return seconds if seconds >= 0 else None


_TRANSIENT = (
    openai.RateLimitError,
    openai.InternalServerError,
    openai.APITimeoutError,
    openai.APIConnectionError,
    json.JSONDecodeError,  # a truncated/malformed body (proxies, overloaded servers)
    MalformedResponse,
)


def _describe(exc: Exception) -> str:
    status = getattr(exc, "status_code", None)
    name = type(exc).__name__
    return f"{name} (HTTP {status})" if status else name


class LlmClient:
    """Shared by every LLM agent of a run: one `AsyncOpenAI` per (base_url, key variable).

    The in-flight limit is per base_url; its size is the `concurrency` of the first config
    that reaches that endpoint. Prices are looked up by the model name sent to the endpoint.
    """

    def __init__(
        self,
        *,
        prices: Mapping[str, Price] | None = None,
        sleep: Sleep = asyncio.sleep,
        rng: random.Random | None = None,
        environ: Mapping[str, str] | None = None,
        backoff_base_s: float = 1.0,
        backoff_cap_s: float = 60.0,
        max_retry_after_s: float = 600.0,
        budget: SpendLedger | None = None,
    ) -> None:
        self.prices = dict(prices or {})
        self.budget = budget  # spend caps, checked before every network call (mbb.llm.budget)
        self.sleep = sleep
        self.rng = rng or random.Random(0)
        self.environ = os.environ if environ is None else environ
        self.backoff_base_s = backoff_base_s
        self.backoff_cap_s = backoff_cap_s
        self.max_retry_after_s = max_retry_after_s
        self.sleeps: list[float] = []  # every backoff slept, for tests and the audit
        # httpx pools and semaphores belong to one event loop: both are kept per loop, and
        # replaced when a new loop (a new asyncio.run) comes along.
        self._loop: asyncio.AbstractEventLoop | None = None
        self._clients: dict[tuple[str, str | None], openai.AsyncOpenAI] = {}
        self._limits: dict[str, asyncio.Semaphore] = {}

    def _same_loop(self) -> None:
        loop = asyncio.get_running_loop()
        if loop is not self._loop:
            self._loop = loop
            self._clients = {}  # the old ones' connections died with their loop
            self._limits = {}

    # --- endpoint plumbing -------------------------------------------------------------------
    def _client(self, config: ModelConfig) -> openai.AsyncOpenAI:
        self._same_loop()
        slot = (config.base_url, config.api_key_env)
        client = self._clients.get(slot)
        if client is None:
            if config.api_key_env is None:
                key = NO_KEY_PLACEHOLDER
            else:
                key = self.environ.get(config.api_key_env, "")
                if not key:
                    raise LlmConfigError(
                        f"environment variable {config.api_key_env} is not set (needed for model "
                        f"{config.model!r} at {config.base_url}); export it, or use the cache in "
                        "replay mode"
                    )
            client = openai.AsyncOpenAI(
                base_url=config.base_url, api_key=key, max_retries=0, timeout=config.timeout_s
            )
            self._clients[slot] = client
        return client

    def _limit(self, config: ModelConfig) -> asyncio.Semaphore:
        self._same_loop()
        slot = config.base_url
        sem = self._limits.get(slot)
        if sem is None:
            sem = self._limits[slot] = asyncio.Semaphore(config.concurrency)
        return sem

    def _backoff(self, attempt: int, exc: Exception) -> float:
        retry_after = _retry_after_s(exc)
        if retry_after is not None:
            return min(retry_after, self.max_retry_after_s)
        return self.rng.uniform(0, min(self.backoff_cap_s, self.backoff_base_s * 2**attempt))

    # --- network -----------------------------------------------------------------------------
    async def complete(
        self, config: ModelConfig, req: ChatRequest, meta: CallMeta | None = None
    ) -> LlmResult:
        """One logical call with retries; raises LlmConfigError or LlmUnavailable.

        The preset's prefix-cache hints (`presets.cache_hints`) are added here, after the body
        was hashed for the replay cache: they steer the server, not the answer."""
        body = request_body(config, req)
        hints = presets.cache_hints(
            config, meta.worker if meta else None, meta.role if meta else "call"
        )
        if hints:
            body = {**body, **hints}
        client = self._client(config)
        attempts = 0
        t0 = time.perf_counter()
        while True:
            attempts += 1
            try:
                async with self._limit(config):
                    # The body is already plain JSON: posting it directly skips the SDK's typed
                    # `chat.completions.create` transform (~0.6 ms of CPU per call) and its
                    # model construction; the client, headers, auth and errors are the same.
                    data = await client.post("/chat/completions", body=body, cast_to=object)
                parts = _parse_response(data)
            except (openai.AuthenticationError, openai.PermissionDeniedError) as exc:
                raise LlmConfigError(
                    f"{_describe(exc)}: the endpoint {config.base_url} rejected the key from "
                    f"environment variable {config.api_key_env} for model {config.model!r}",
                    attempts=attempts,
                    latency_s=time.perf_counter() - t0,
                ) from None
            except openai.NotFoundError as exc:
                raise LlmConfigError(
                    f"{_describe(exc)}: model {config.model!r} not found at {config.base_url} "
                    f"(key from {config.api_key_env}); check `model` and `base_url`",
                    attempts=attempts,
                    latency_s=time.perf_counter() - t0,
                ) from None
            except _TRANSIENT as exc:
                if attempts > config.max_retries:
                    raise LlmUnavailable(
                        f"{_describe(exc)} after {attempts} attempt(s) for model "
                        f"{config.model!r} at {config.base_url}",
                        attempts=attempts,
                        latency_s=time.perf_counter() - t0,
                    ) from None
                delay = self._backoff(attempts - 1, exc)
                self.sleeps.append(delay)
                await self.sleep(delay)
                continue
            except openai.APIStatusError as exc:  # 400, 409, 422...: the request itself is wrong
                raise LlmUnavailable(
                    f"{_describe(exc)} for model {config.model!r} at {config.base_url}: "
                    f"{_safe_message(exc)}",
                    attempts=attempts,
                    latency_s=time.perf_counter() - t0,
                ) from None
            break
        return LlmResult(**parts, latency_s=time.perf_counter() - t0, attempts=attempts)

    # --- audited entry point -----------------------------------------------------------------
    async def call(
        self,
        config: ModelConfig,
        req: ChatRequest,
        *,
        meta: CallMeta,
        emit: Emit | None = None,
        cache: LlmCache | None = None,
    ) -> LlmResult:
        """Cache lookup, else a network call; always one `LlmCall` event (also on failure)."""
        body = request_body(config, req)
        key = request_key(body)
        if cache is not None and cache.enabled:
            stored = cache.get(key)
            if stored is not None and "error" in stored:
                # A recorded failure: replay reproduces it (so the same default is applied);
                # read_write tries the network again.
                if cache.mode == "replay":
                    result = LlmResult(key=key, cache_hit=True)
                    self._emit(emit, config, meta, result, stored["error"])
                    raise LlmUnavailable(stored["error"])
                stored = None
            if stored is not None:
                # Deterministic on replay: no wall latency, no attempts, the recorded tokens.
                result = LlmResult.model_validate(
                    {**stored, "latency_s": 0.0, "attempts": 0, "cache_hit": True, "key": key}
                )
                self._emit(emit, config, meta, result, None)
                return result
            if cache.mode == "replay":
                err = CacheMiss(
                    f"replay cache miss: no recorded response for model {config.model!r}, "
                    f"worker {meta.worker}, {meta.role}/{meta.phase}, subrun {meta.subrun}, "
                    f"round {meta.round} (request key {key[:16]}); record it first in "
                    "read_write mode"
                )
                self._emit(emit, config, meta, LlmResult(key=key), str(err))
                raise err
        if self.budget is not None:
            self.budget.check()  # BudgetExhausted: nothing is sent, nothing recorded
        try:
            result = await self.complete(config, req, meta)
        except LlmError as exc:
            failed = LlmResult(key=key, attempts=exc.attempts, latency_s=exc.latency_s)
            self._emit(emit, config, meta, failed, str(exc))
            if isinstance(exc, LlmUnavailable) and cache is not None and cache.mode == "read_write":
                cache.put(key, body, {"error": str(exc)})
            raise
        result = result.model_copy(update={"key": key})
        if self.budget is not None:
            u = result.usage
            self.budget.add(u.prompt + u.completion, self.cost(config.model, u))
        if cache is not None and cache.mode == "read_write":
            cache.put(key, body, result.model_dump(exclude={"latency_s", "attempts", "key"}))
        self._emit(emit, config, meta, result, None)
        return result

    def cost(self, model: str, usage: Usage) -> float:
        price = self.prices.get(model)
        if price is None:
            return 0.0
        return price.cost(usage.prompt, usage.completion, usage.cached)

    def _emit(
        self,
        emit: Emit | None,
        config: ModelConfig,
        meta: CallMeta,
        result: LlmResult,
        error: str | None,
    ) -> None:
        if emit is None:
            return
        emit(
            LlmCall,
            worker=meta.worker,
            subrun=meta.subrun,
            round=meta.round,
            role=meta.role,
            phase=meta.phase,
            model=config.model,
            prompt_tokens=result.usage.prompt,
            completion_tokens=result.usage.completion,
            reasoning_tokens=result.usage.reasoning,
            cached_tokens=result.usage.cached,
            latency_s=round(result.latency_s, 6),
            attempts=result.attempts,
            cache_hit=result.cache_hit,
            cost_usd=self.cost(config.model, result.usage),
            repair=meta.repair,
            request_key=result.key,
            error=error,
        )

    async def aclose(self) -> None:
        for client in self._clients.values():
            with contextlib.suppress(RuntimeError):  # its loop is gone
                await client.close()
        self._clients.clear()


def _safe_message(exc: Exception) -> str:
    msg = presets.error_message(getattr(exc, "body", None))
    if isinstance(msg, str) and msg:
        return msg[:300]
    return str(exc)[:300]
