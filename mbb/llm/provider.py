"""The provider protocol and its one implementation, an OpenAI-compatible chat endpoint.

A provider does one attempt of one request: it sends the body, parses the answer, and turns
every failure into a typed error from `mbb.core.errors` (`LlmConfigError` fails fast, `LlmTransient`
is worth retrying, any other `LlmUnavailable` is the request's own fault). Retries, the
concurrency limit, the replay cache, spend caps and the audit are wrappers around it
(`mbb.llm.wrappers`), each a `Provider` itself, so they compose in any order.

The openai client runs with `max_retries=0`: its own retries are invisible, so they could not be
counted in the token audit or made deterministic in tests. Endpoint quirks (field names, cache
hints, where reasoning text and cached tokens are) come from `mbb.llm.presets`.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import time
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import Any, Protocol

import openai

from mbb.core.errors import (
    LlmConfigError,
    LlmError,
    LlmTransient,
    LlmUnavailable,
    no_surrogates,
)
from mbb.llm import presets
from mbb.llm.cache import request_key
from mbb.llm.config import ModelConfig
from mbb.llm.redact import Redactor, key_values
from mbb.llm.transport import AnswerRefused, http_client
from mbb.llm.types import CallMeta, ChatRequest, LlmResult, Usage

__all__ = [
    "NO_KEY_PLACEHOLDER",
    "Call",
    "Clock",
    "MalformedResponse",
    "OpenAICompatibleProvider",
    "Provider",
    "check_size",
    "endpoint_of",
    "request_body",
]

Clock = Callable[[], float]  # seconds, monotonic (time.perf_counter, or a test's fake clock)
NO_KEY_PLACEHOLDER = "no-key"  # sent when a config needs no key (local servers)


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


@dataclass(frozen=True)
class Call:
    """One logical request as it travels through the wrappers: the model's config, the body
    (built once) and its replay-cache key, and who asked (None for an unaudited call)."""

    config: ModelConfig
    body: dict[str, Any]
    key: str
    meta: CallMeta | None = None

    @classmethod
    def of(cls, config: ModelConfig, req: ChatRequest, meta: CallMeta | None = None) -> Call:
        """Build the body for `config` and key it (`mbb.llm.cache.request_key`).

        `config`: the model and endpoint; `req`: messages, format and tools; `meta`: the
        caller, for the audit and the cache-miss message."""
        body = request_body(config, req)
        return cls(config, body, request_key(body), meta)


def endpoint_of(call: Call) -> str:
    """How an endpoint is named in limits and messages: `model at base_url` (one model of a
    provider is one endpoint: providers meter and limit each model on its own)."""
    return f"{call.config.model} at {call.config.base_url}"


class Provider(Protocol):
    """Answers one call. Wrappers and the endpoint implementation alike."""

    async def complete(self, call: Call) -> LlmResult:
        """The answer, or a typed `mbb.core.errors.LlmError`."""
        ...

    async def aclose(self) -> None:
        """Close what the provider holds open (connections); idempotent."""
        ...


class MalformedResponse(ValueError):
    """The endpoint answered 200 with a body that is not a chat-completion JSON object."""


# the largest token count one call can report (mbb's choice: no model reads or writes a billion
# tokens in a call); a larger one is not a count (10**30 had broken the usage tables, i64)
MAX_TOKENS_PER_CALL = 10**9


def _count(value: Any) -> int | None:
    """A token count as a server sent it (an int, a whole float, digits in a string); None when
    it is missing, negative, past MAX_TOKENS_PER_CALL or not a count."""
    if isinstance(value, bool):
        return None
    if isinstance(value, float) and value.is_integer():
        value = int(value)
    if isinstance(value, str) and value.strip().isascii() and value.strip().isdigit():
        value = int(value.strip())
    ok = isinstance(value, int) and 0 <= value <= MAX_TOKENS_PER_CALL
    return value if ok else None


def _usage(raw: Any, data: Any = None) -> Usage:
    """Token counts from a response's `usage` object (any part may be missing or null); cached
    prompt tokens in any provider's shape (`presets.cached_tokens`), at most the prompt's count
    (an endpoint's 1e9 cached of a 50-token prompt read as a 36,665,186 % cached share in the
    report; the cost was already so bounded). Without a prompt and a completion count the usage
    is not reported (`Usage.reported` false): unknown, never 0."""
    if not isinstance(raw, dict):
        return Usage(cached=presets.cached_tokens(None, data), reported=False)
    ctd = raw.get("completion_tokens_details") or {}
    prompt, completion = _count(raw.get("prompt_tokens")), _count(raw.get("completion_tokens"))
    reported = prompt is not None and completion is not None
    cached = presets.cached_tokens(raw, data)
    if prompt is not None:  # no more of the prompt cached than the prompt (mbb's choice, as cost)
        cached = min(cached, prompt)
    return Usage(
        prompt=prompt or 0,
        completion=completion or 0,
        reasoning=(_count(ctd.get("reasoning_tokens")) or 0) if isinstance(ctd, dict) else 0,
        cached=cached,
        reported=reported,
    )


def _key_source(config: ModelConfig) -> str:
    """Where the request's key came from, for an error line: never the key itself."""
    if config.api_key_env is None:
        return "a request sent without a key (api_key_env: null)"
    return f"the key from environment variable {config.api_key_env}"


# The longest answer an endpoint may send (mbb's choice): an answer field (content, tool
# arguments, refusal) of at most CHARS_PER_TOKEN characters per token of `max_tokens` (a token
# is rarely longer than 16), at least MIN_ANSWER_CHARS; reasoning text at most
# MAX_REASONING_CHARS (thinking budgets reach ~32K tokens, ~130K characters, and some
# providers do not count them in `max_tokens`). A longer one is malformed, retried and, if the
# endpoint keeps sending it, stops it: a walk against an endpoint answering 2 MB per call
# filled 535 MB of replay cache in a two-run study.
CHARS_PER_TOKEN = 64
MIN_ANSWER_CHARS = 65_536
MAX_REASONING_CHARS = 1_048_576
# Fields with a short form (a finish reason, a tool's name, a tool call's id): no server sends
# them long, and 1 MB each had filled ~300 MB of replay cache in a two-run study, the runs
# valid (a red team's find); at most this many characters (mbb's choice).
MAX_SHORT_FIELD_CHARS = 256


# Token counts that cannot be true (mbb's choice; F7 of red team rt37: 0 tokens priced a real
# answer at $0, 10**9 tokens a 512-token answer at $54,000). A completion may exceed max_tokens
# by at most REASONING_ALLOWANCE tokens (some providers count thinking, budgets up to ~32K
# tokens, outside max_tokens: twice that); a prompt may count at most one token per UTF-8 byte
# of the request's JSON body (messages, tools, format; a token holds at least one byte) plus
# PROMPT_SLACK tokens (a chat template, a provider's own system prompt).
REASONING_ALLOWANCE = 65_536
PROMPT_SLACK = 4_096


def plausible_usage(
    usage: Usage, parts: Mapping[str, Any], body: Mapping[str, Any], max_tokens: int
) -> Usage:
    """`usage`, or, when its counts cannot be true, the usage not reported (unknown, never $0
    or an absurd cost) and marked `implausible`: 0 completion tokens for an answer with text,
    tool arguments or a refusal; more completion tokens than `max_tokens +
    REASONING_ALLOWANCE`; 0 prompt tokens for a request with messages; more prompt tokens than
    the request body's UTF-8 bytes plus PROMPT_SLACK.

    usage: the answer's counts; parts: `parse_response`'s output; body: the JSON sent;
    max_tokens: the call's completion token cap."""
    if not usage.reported:
        return usage
    answered = any(parts.get(k) for k in ("text", "tool_arguments", "refusal", "tool_name"))
    request_bytes = len(json.dumps(body, ensure_ascii=False).encode("utf-8", "surrogatepass"))
    wrong = (
        (usage.completion == 0 and answered)
        or usage.completion > max_tokens + REASONING_ALLOWANCE
        or (usage.prompt == 0 and bool(body.get("messages")))
        or usage.prompt > request_bytes + PROMPT_SLACK
    )
    return Usage(reported=False, implausible=True) if wrong else usage


def check_size(parts: Mapping[str, Any], max_tokens: int) -> None:
    """Raise MalformedResponse when an answer field is longer than `max_tokens` allows, or a
    field with a short form longer than `MAX_SHORT_FIELD_CHARS`.

    parts: `parse_response`'s output; max_tokens: the call's completion token cap."""
    cap = max(MIN_ANSWER_CHARS, CHARS_PER_TOKEN * max_tokens)
    for name in ("text", "tool_arguments", "refusal", "reasoning"):
        value = parts.get(name)
        limit = MAX_REASONING_CHARS if name == "reasoning" else cap
        if isinstance(value, str) and len(value) > limit:
            raise MalformedResponse(
                f"{name} of {len(value):,} characters, more than max_tokens {max_tokens} allows "
                f"({limit:,})"
            )
    for name in ("finish_reason", "tool_name", "tool_call_id"):
        value = parts.get(name)
        if isinstance(value, str) and len(value) > MAX_SHORT_FIELD_CHARS:
            raise MalformedResponse(
                f"{name} of {len(value):,} characters (at most {MAX_SHORT_FIELD_CHARS} are read)"
            )


def check_text(parts: Mapping[str, Any]) -> None:
    """Raise MalformedResponse when a text of the answer holds a lone UTF-16 surrogate (a
    `\\ud800` escape in its JSON): no UTF-8 text holds one, so it is not text a model wrote.
    mbb's choice: such an answer is malformed (retried, then a failed call that counts toward
    the endpoint's stop), the same as an answer whose bytes are not UTF-8, never kept: kept, it
    crashed the report's writers and, in `model`, the run's events, and its cached copy failed
    the same run again against a healthy endpoint (F3, F4 of red team rt37).

    parts: `parse_response`'s output."""
    for name in _REPLY_TEXT:
        value = parts.get(name)
        if isinstance(value, str) and no_surrogates(value) is not value:
            raise MalformedResponse(f"{name} holds a lone UTF-16 surrogate (not UTF-8 text)")


def _text(value: Any) -> str | None:
    """A reply field as text: some servers send tool arguments as an object, not a string."""
    if value is None or isinstance(value, str):
        return value
    return json.dumps(value, sort_keys=True)


def _content(value: Any) -> str | None:
    """A message's `content`: a string, or a list of parts (some gateways send
    `[{"type": "text", "text": ...}]`) whose texts are joined. mbb's choice: a part of any
    other type (an image, audio) is not an answer mbb reads, so the answer is malformed; before,
    the list's JSON was taken as the text and every answer repaired (F9 of red team rt37)."""
    if not isinstance(value, list):
        return _text(value)
    texts = []
    for part in value:
        kind = part.get("type") if isinstance(part, dict) else None
        if kind not in ("text", "output_text") or not isinstance(part.get("text"), str):
            raise MalformedResponse(f"a content part of type {str(kind)[:40]!r}, not text")
        texts.append(part["text"])
    return "".join(texts)


def json_of(raw: bytes) -> Any:
    """The answer's body as JSON, whatever its Content-Type: its bytes must be UTF-8 (a BOM
    allowed). mbb's choice: bytes that are not are a malformed answer; the HTTP client had
    read a `text/plain` body's with replacement characters, as a success, and a JSON one's
    as an error (F9 of red team rt37)."""
    try:
        text = raw.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        raise MalformedResponse(f"an answer that is not UTF-8 (at byte {exc.start})") from None
    return json.loads(text)  # JSONDecodeError: malformed, retried like any other


def parse_response(data: Any) -> dict[str, Any]:
    """The reply's parts, read from the JSON body (`choices[0]`, its message, `usage`)."""
    if isinstance(data, str | bytes):  # served without a JSON content type
        data = json.loads(data)  # JSONDecodeError: malformed, retried like any other
    if not isinstance(data, dict):
        raise MalformedResponse(f"expected a JSON object, got {type(data).__name__}")
    choices = data.get("choices")
    if not isinstance(choices, list) or not choices or not isinstance(choices[0], dict):
        # no answer at all, not an empty one: a gateway's error served as 200 ("quota
        # exceeded"), or a body without choices; failed and retried, never read as "" (which
        # would only cost a repair per call, and a dead endpoint would look alive)
        said = (
            presets.error_message(data)
            if "error" in data or data.get("object") == "error"
            else None
        )
        raise MalformedResponse(
            f"an error instead of an answer: {' '.join(str(said).split())[:200]}"
            if said
            else "no choices in the answer"
        )
    choice = choices[0]
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
        "text": _content(msg.get("content")),
        "tool_name": tool_name,
        "tool_arguments": tool_args,
        "tool_call_id": tool_id,
        "refusal": _text(msg.get("refusal")),
        "reasoning": presets.reasoning_text(msg),
        "finish_reason": _text(choice.get("finish_reason")),
        "served_model": _served_model(data.get("model")),
        "usage": _usage(data.get("usage"), data),
    }


def _served_model(value: Any) -> str | None:
    """The answer's `model` field as a name (a hostile endpoint's 1 MB name is cut to 200
    characters; anything but a non-empty string is no name).

    value: the answer's `model` field."""
    if not isinstance(value, str):
        return None
    name = " ".join(value.split())[:200]
    return name or None


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
        return None  # an HTTP date: the retry wrapper falls back to its own backoff
    return seconds if seconds >= 0 else None


_TRANSIENT = (
    openai.RateLimitError,
    openai.InternalServerError,
    openai.APITimeoutError,
    openai.APIConnectionError,
    json.JSONDecodeError,  # a truncated/malformed body (proxies, overloaded servers)
    MalformedResponse,
    AnswerRefused,  # too long, or in an encoding not asked for (`transport`)
)


def describe(exc: Exception) -> str:
    """The exception's class and HTTP status, e.g. `RateLimitError (HTTP 429)`."""
    status = getattr(exc, "status_code", None)
    name = type(exc).__name__
    return f"{name} (HTTP {status})" if status else name


def _safe_message(exc: Exception) -> str:
    msg = presets.error_message(getattr(exc, "body", None))
    if isinstance(msg, str) and msg:
        return msg[:300]
    return str(exc)[:300]


# every text of an answer (`parse_response`): what an echoing endpoint could put a key into
_REPLY_TEXT = (
    "text",
    "tool_name",
    "tool_arguments",
    "tool_call_id",
    "refusal",
    "reasoning",
    "finish_reason",
    "served_model",
)


class OpenAICompatibleProvider:
    """One `openai.AsyncOpenAI` per (base_url, key variable), made on first use.

    httpx pools belong to one event loop: the clients are kept per loop and replaced (the old
    ones closed when their loop still runs) when a new loop comes along. `aclose` closes them
    all; `clients` lists the live ones (a run's end can be checked to leave none open).

    Secrets: everything the endpoint sends back (every text of the answer, an error's body) is
    redacted (`mbb.llm.redact`) before it leaves this class, of the key it sent and of the
    values of `secret_envs` (every key variable of the run's params), so an endpoint that
    echoes the key gets nothing of it into events, the cache, tables or reports."""

    def __init__(
        self,
        *,
        environ: Mapping[str, str] | None = None,
        clock: Clock = time.perf_counter,
        secret_envs: Iterable[str] = (),
    ) -> None:
        """`environ`: where key variables are read (default: the process environment);
        `clock`: measures each attempt's latency; `secret_envs`: names of variables whose
        values are redacted from answers (the key of each config called is, always)."""
        self.environ: Mapping[str, str] = os.environ if environ is None else environ
        self.clock = clock
        self.secret_envs = tuple(secret_envs)
        self.redactor = Redactor(key_values(self.secret_envs, self.environ))
        self._loop: asyncio.AbstractEventLoop | None = None
        self._clients: dict[tuple[str, str | None], openai.AsyncOpenAI] = {}

    @property
    def clients(self) -> list[openai.AsyncOpenAI]:
        return list(self._clients.values())

    def _client(self, config: ModelConfig) -> openai.AsyncOpenAI:
        loop = asyncio.get_running_loop()
        if loop is not self._loop:
            self._loop = loop
            self._clients = {}  # the old ones' connections died with their loop
        slot = (config.base_url, config.api_key_env)
        client = self._clients.get(slot)
        if client is None:
            # read now, from the environment the calls use (tests set it after construction)
            self.redactor.add(key_values((*self.secret_envs, config.api_key_env), self.environ))
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
                base_url=config.base_url,
                api_key=key,
                max_retries=0,
                timeout=config.timeout_s,
                # answers capped, no redirects
                http_client=http_client(config.timeout_s, config.base_url),
            )
            self._clients[slot] = client
        return client

    def clean(self, text: str) -> str:
        """An error's text as it may leave this class: every key redacted, lone surrogates
        replaced (`no_surrogates`)."""
        return no_surrogates(self.redactor.text(text) or "")

    async def complete(self, call: Call) -> LlmResult:
        """One attempt (`_attempt`); every error it raises leaves with its text redacted: a
        gateway's "quota exceeded for key sk-..." sent with HTTP 200 went unredacted into the
        retry line, the stop line, study.json and `run_ended` (F1 of red team rt37)."""
        try:
            return await self._attempt(call)
        except LlmError as exc:
            exc.args = (self.clean(str(exc)), *exc.args[1:])
            raise

    async def _attempt(self, call: Call) -> LlmResult:
        """One attempt. The preset's prefix-cache hints (`presets.cache_hints`) are added to
        the body here, after it was keyed for the replay cache: they steer the server, not the
        answer."""
        config, meta = call.config, call.meta
        hints = presets.cache_hints(
            config, meta.worker if meta else None, meta.role if meta else "call"
        )
        body = {**call.body, **hints} if hints else call.body
        client = self._client(config)
        t0 = self.clock()
        try:
            # The body is already plain JSON: posting it directly skips the SDK's typed
            # `chat.completions.create` transform (~0.6 ms of CPU per call) and its model
            # construction; the client, headers, auth and errors are the same. The client's
            # timeout bounds each read, not the call: an endpoint that trickles its answer a
            # byte at a time would hold a call (and a study) for ever, so the whole call has
            # timeout_s too
            async with asyncio.timeout(config.timeout_s):
                raw = await client.post("/chat/completions", body=body, cast_to=bytes)
            try:
                parts = parse_response(json_of(raw))
                check_size(parts, config.max_tokens)
                check_text(parts)
                usage = plausible_usage(parts["usage"], parts, call.body, config.max_tokens)
                parts = {**parts, "usage": usage}
            except (TypeError, ValueError, AttributeError, KeyError) as exc:
                if isinstance(exc, json.JSONDecodeError | MalformedResponse):
                    raise
                # e.g. a usage field that is not a number: its text (which may echo anything)
                # is not kept, only that the body was malformed
                raise MalformedResponse(type(exc).__name__) from None
        except (openai.AuthenticationError, openai.PermissionDeniedError) as exc:
            raise LlmConfigError(
                f"{describe(exc)}: the endpoint {config.base_url} rejected "
                f"{_key_source(config)} for model {config.model!r}",
                attempts=1,
                latency_s=self.clock() - t0,
            ) from None
        except openai.NotFoundError as exc:
            raise LlmConfigError(
                f"{describe(exc)}: model {config.model!r} not found at {config.base_url} "
                f"({_key_source(config)}); check `model` and `base_url`",
                attempts=1,
                latency_s=self.clock() - t0,
            ) from None
        except RecursionError:  # the body's JSON nests deeper than any parser of it recurses
            raise LlmTransient(
                "MalformedResponse: JSON nested too deeply", latency_s=self.clock() - t0
            ) from None
        except TimeoutError:
            raise LlmTransient(
                f"no whole answer within timeout_s {config.timeout_s:g} s",
                latency_s=self.clock() - t0,
            ) from None
        except _TRANSIENT as exc:
            # the transport's refusal while the body arrived, as the openai client raises it
            # (as is, or as the cause of a connection error in some of its versions)
            refused = next((e for e in (exc, exc.__cause__) if isinstance(e, AnswerRefused)), None)
            if refused is not None:
                what = f"MalformedResponse: {refused}"
            elif isinstance(exc, MalformedResponse):
                what = f"{describe(exc)}: {exc}"
            else:
                what = describe(exc)
            raise LlmTransient(
                what, retry_after_s=_retry_after_s(exc), latency_s=self.clock() - t0
            ) from None
        except openai.APIStatusError as exc:  # 400, 409, 422...: the request itself is wrong
            if 300 <= exc.status_code < 400:  # never followed (`transport`): said, not obeyed
                where = (self.redactor.text(exc.response.headers.get("location", "?")) or "?")[:200]
                raise LlmUnavailable(
                    f"{describe(exc)}: the endpoint {config.base_url} redirects to {where}; "
                    "mbb does not follow redirects: set base_url to the endpoint that answers",
                    attempts=1,
                    latency_s=self.clock() - t0,
                ) from None
            raise LlmUnavailable(
                f"{describe(exc)} for model {config.model!r} at {config.base_url}: "
                f"{self.redactor.text(_safe_message(exc))}",
                attempts=1,
                latency_s=self.clock() - t0,
            ) from None
        except Exception as exc:
            # anything else the request or its answer raised (the answer's bytes not UTF-8 in
            # `response.json()`, a request that does not serialize): a malformed answer, failed
            # and retried, that counts toward the endpoint's stop. Unmapped, it escaped as the
            # agent's `(backend)` default: 39 calls billed, none recorded, nothing retried, the
            # endpoint never stopped and the run final (F5 of red team rt37). Only its type is
            # kept: its text may quote anything the endpoint sent
            raise LlmTransient(
                f"MalformedResponse: {type(exc).__name__}", latency_s=self.clock() - t0
            ) from None
        red = self.redactor
        if red:
            parts = {**parts, **{k: red.text(parts[k]) for k in _REPLY_TEXT}}
        return LlmResult(**parts, latency_s=self.clock() - t0, attempts=1, key=call.key)

    async def aclose(self) -> None:
        for client in self._clients.values():
            with contextlib.suppress(RuntimeError):  # its loop is gone
                await client.close()
        self._clients.clear()
