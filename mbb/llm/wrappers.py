"""Cross-cutting concerns of an LLM call, each a `Provider` wrapping another one.

`LlmClient` stacks them, outermost first, as

    Audited → Cached → Budgeted → Retrying → ConcurrencyLimit → OpenAICompatibleProvider

and each position is a choice that shows in the record:

- `Audited` outside `Cached`: a replayed answer is an `llm_call` event too (`cache_hit`), so a
  replayed run's log has the same calls as the run it replays. Inside, only calls that reached
  the network are events.
- `Budgeted` inside `Cached`: answers from the replay cache are free and never blocked by a
  spend cap. Outside, a cap would stop even a replay of answers already paid for.
- `Cached` outside `Retrying`: a hit needs no attempt, and only the final outcome of a call (its
  answer, or the failure after the last retry) is recorded.
- `ConcurrencyLimit` inside `Retrying`: a call waiting out a backoff gives its slot to another
  call. Outside, it would hold the slot while it sleeps.
"""

from __future__ import annotations

import asyncio
import json
import random
import time
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass, field

from mbb.core.errors import (
    BudgetExhausted,
    CacheMiss,
    EndpointDown,
    LlmConfigError,
    LlmError,
    LlmTransient,
    LlmUnavailable,
    RunStopped,
)
from mbb.core.events import LlmCall
from mbb.llm.budget import SpendLedger
from mbb.llm.cache import LlmCache
from mbb.llm.config import ModelConfig, Price
from mbb.llm.provider import Call, Clock, Provider, endpoint_of
from mbb.llm.redact import Redactor
from mbb.llm.types import CallMeta, Emit, LlmResult, Usage

__all__ = [
    "Audited",
    "Budgeted",
    "Cached",
    "ConcurrencyLimit",
    "OnRetry",
    "Pricing",
    "Retrying",
    "Sleep",
]

Sleep = Callable[[float], Awaitable[None]]
# (config, why the attempt failed, seconds to the next, the attempt that failed, attempts allowed)
OnRetry = Callable[[ModelConfig, str, float, int, int], None]


@dataclass(frozen=True)
class Pricing:
    """USD per call from per-model prices (looked up by the model name sent to the endpoint).

    A model without a price is unpriced: its cost is None (unknown), never 0, so an `llm_call`
    event records `cost_usd: null` and every table summing costs shows the sum as unknown. A
    model that really is free is priced at 0 in the params (e.g. a local server)."""

    prices: Mapping[str, Price] = field(default_factory=dict)

    def priced(self, model: str) -> bool:
        return model in self.prices

    def cost(self, model: str, usage: Usage) -> float | None:
        """`model`: the endpoint's model name; `usage`: the answer's token counts. None: the
        model has no price, or the endpoint reported no token counts (unknown, never $0)."""
        price = self.prices.get(model)
        if price is None or not usage.reported:
            return None
        return price.cost(usage.prompt, usage.completion, usage.cached)


MAX_RETRY_AFTER_S = 60.0
"""The longest `Retry-After` a call waits for (rate limits ask for seconds to a minute)."""


class Retrying:
    """Retries `LlmTransient` failures with exponential backoff and full jitter, honouring a
    server's `Retry-After`, up to the config's `max_retries`; then `LlmUnavailable`. A
    `Retry-After` longer than `max_retry_after_s` is not waited for: the call fails at once,
    saying so (a red team's 429 with `Retry-After: 100000` held `mbb study` silent for ten
    minutes per attempt; mbb's choice: a wait that long is an outage, not a rate limit).

    The result's `attempts`, `latency_s` (all attempts and waits, on `clock`) and `retried`
    (each retried failure) say what the call cost; `sleeps` keeps every backoff slept."""

    def __init__(
        self,
        inner: Provider,
        *,
        sleep: Sleep = asyncio.sleep,
        rng: random.Random | None = None,
        clock: Clock = time.perf_counter,
        backoff_base_s: float = 1.0,
        backoff_cap_s: float = 60.0,
        max_retry_after_s: float = MAX_RETRY_AFTER_S,
        on_retry: OnRetry | None = None,
    ) -> None:
        """`inner`: the provider retried; `sleep`: waits a backoff (injected in tests); `rng`:
        the jitter's source; `clock`: measures the call; `backoff_base_s`, `backoff_cap_s`:
        the envelope `min(cap, base * 2**attempt)`; `max_retry_after_s`: the longest
        `Retry-After` waited for (a longer one fails the call); `on_retry`: told of each
        failed attempt about to be retried (config, why, the wait in s, the attempt that
        failed, the attempts allowed), so a study can say why it waits."""
        self.inner = inner
        self.sleep = sleep
        self.rng = rng or random.Random(0)
        self.clock = clock
        self.backoff_base_s = backoff_base_s
        self.backoff_cap_s = backoff_cap_s
        self.max_retry_after_s = max_retry_after_s
        self.on_retry = on_retry
        self.sleeps: list[float] = []

    def backoff(self, attempt: int, exc: LlmTransient) -> float:
        """Seconds to wait before attempt `attempt + 2` after the failure `exc`."""
        if exc.retry_after_s is not None:
            return exc.retry_after_s
        return self.rng.uniform(0, min(self.backoff_cap_s, self.backoff_base_s * 2**attempt))

    async def complete(self, call: Call) -> LlmResult:
        config = call.config
        retried: list[str] = []
        t0 = self.clock()
        while True:
            try:
                result = await self.inner.complete(call)
            except LlmTransient as exc:
                retried.append(str(exc))
                wait = exc.retry_after_s
                if wait is not None and wait > self.max_retry_after_s:
                    raise LlmUnavailable(
                        f"{exc}: the endpoint asks to wait {wait:,.0f} s before a retry "
                        f"(Retry-After), longer than mbb waits ({self.max_retry_after_s:g} s); "
                        f"model {config.model!r} at {config.base_url}",
                        attempts=len(retried),
                        latency_s=round(self.clock() - t0, 6),
                    ) from None
                if len(retried) > config.max_retries:
                    raise LlmUnavailable(
                        f"{exc} after {len(retried)} attempt(s) for model {config.model!r} at "
                        f"{config.base_url}",
                        attempts=len(retried),
                        latency_s=round(self.clock() - t0, 6),
                    ) from None
                delay = self.backoff(len(retried) - 1, exc)
                self.sleeps.append(delay)
                if self.on_retry is not None:
                    self.on_retry(config, str(exc), delay, len(retried), config.max_retries + 1)
                await self.sleep(delay)
                continue
            except LlmError as exc:  # not retryable: say what the whole call cost
                if exc.attempts or retried:  # (a missing key variable sent nothing)
                    exc.attempts += len(retried)
                    exc.latency_s = round(self.clock() - t0, 6)
                raise
            return result.model_copy(
                update={
                    "attempts": len(retried) + 1,
                    "latency_s": round(self.clock() - t0, 6),
                    "retried": tuple(retried),
                }
            )

    async def aclose(self) -> None:
        await self.inner.aclose()


class ConcurrencyLimit:
    """At most `config.concurrency` calls in flight per endpoint (`endpoint_of`: a model at a
    base URL; the size is taken from the first config that reaches it), so eight models of one
    provider each keep their own limit. Semaphores belong to one event loop: they are kept per
    loop."""

    def __init__(self, inner: Provider) -> None:
        """`inner`: the provider whose calls are limited."""
        self.inner = inner
        self._loop: asyncio.AbstractEventLoop | None = None
        self._limits: dict[str, asyncio.Semaphore] = {}

    def _limit(self, call: Call) -> asyncio.Semaphore:
        loop = asyncio.get_running_loop()
        if loop is not self._loop:
            self._loop, self._limits = loop, {}
        key = endpoint_of(call)
        sem = self._limits.get(key)
        if sem is None:
            sem = self._limits[key] = asyncio.Semaphore(call.config.concurrency)
        return sem

    async def complete(self, call: Call) -> LlmResult:
        async with self._limit(call):
            return await self.inner.complete(call)

    async def aclose(self) -> None:
        await self.inner.aclose()


class Budgeted:
    """Spend caps (`mbb.llm.budget`): checked before the call (`BudgetExhausted`: nothing is
    sent, nothing recorded); a successful call's tokens and cost are added after it."""

    def __init__(self, inner: Provider, ledger: SpendLedger, pricing: Pricing) -> None:
        """`inner`: the provider whose calls cost; `ledger`: the caps and what was spent;
        `pricing`: the USD of an answer."""
        self.inner = inner
        self.ledger = ledger
        self.pricing = pricing

    async def complete(self, call: Call) -> LlmResult:
        self.ledger.check()
        model = call.config.model
        if self.ledger.caps_cost() and not self.pricing.priced(model):
            # refused when the params load (`mbb.batch.build.check_condition`); this is the
            # backstop for a cap set elsewhere (a sweep's shared ledger): never count it as $0
            raise LlmConfigError(
                f"a spend cap (max_cost_usd) cannot be kept: model {model!r} has no price; add "
                "it to `prices:` or drop the cap"
            )
        result = await self.inner.complete(call)
        u = result.usage
        if not u.reported and (self.ledger.caps_cost() or self.ledger.caps_tokens()):
            # the answer is kept (the replay cache has it); the cap cannot be counted past it
            raise LlmConfigError(
                f"a spend cap cannot be kept: the endpoint of model {model!r} reports no token "
                f"usage{' that can be true' if u.implausible else ''} in its answers; drop "
                "the cap (caps.max_cost_usd, caps.max_tokens_total) or use an endpoint that "
                "reports usage"
            )
        self.ledger.add(u.prompt + u.completion, self.pricing.cost(model, u) or 0.0)
        return result

    async def aclose(self) -> None:
        await self.inner.aclose()


class Cached:
    """The replay cache (`mbb.llm.cache`): a hit is answered without calling `inner`, a miss is
    fetched and stored (read_write) or an error naming the request (replay: `CacheMiss`).

    A stored entry is the answer plus its latency (`latency_s`), so a replay charges the time
    the original run charged; an entry recorded without one replays with 0. A final
    `LlmUnavailable` is stored too and reproduced in both modes, so the caller applies the same
    default: the same run with the same cache gives the same events (a resumed run checks
    them). A stop (`mbb.core.errors.RunStopped`: the endpoint breaker opened, the spend cap
    was reached) is stored as a marker that only a replay reads: the replay stops at that call
    as the recorded run did, even when what stopped it was a sibling run of its batch (the
    seeds of a batch share one breaker and one budget, which a replay of one seed cannot
    count again); a resumed run (read_write) ignores the marker and makes the call again.
    Keys are `request_key` of the body."""

    def __init__(
        self,
        inner: Provider,
        cache: LlmCache,
        redactor: Redactor | None = None,
        *,
        keep_failures: bool = True,
    ) -> None:
        """`inner`: the provider asked on a miss; `cache`: the store and its mode; `redactor`:
        the run's secrets, cut out of what is stored and of what is served (an entry written
        before they were redacted is served without them); `keep_failures`: store and replay
        a final failure (a run's, so that its resume replays the same events); False outside
        a replay asks again (a request cache of calls that are not a run, e.g. the LLM
        classifier's: a 500 stored once was otherwise replayed for ever)."""
        self.inner = inner
        self.cache = cache
        self.redactor = redactor or Redactor()
        self.keep_failures = keep_failures or cache.mode == "replay"

    async def complete(self, call: Call) -> LlmResult:
        cache = self.cache
        if not cache.enabled:
            return await self.inner.complete(call)
        stored = cache.get(call.key)
        if stored is not None:
            stored = self.redactor.data(stored)
        if stored is not None and "stopped" in stored:
            if cache.mode == "replay":
                raise _replayed_stop(call, stored)
            stored = None  # a resumed run asks again what stopped the recorded one
        if stored is not None and "error" in stored and not self.keep_failures:
            stored = None  # asked again
        if stored is not None and _not_text(stored):
            # an answer holding a lone surrogate, stored before such answers were refused
            # (`provider.check_text`): asked again, never served (its replay failed the run
            # again against a healthy endpoint: F4 of red team rt37)
            stored = None
        if stored is not None and "error" in stored:
            raise LlmUnavailable(
                stored["error"], latency_s=float(stored.get("latency_s", 0.0)), cache_hit=True
            )
        if stored is not None:
            update = {"latency_s": 0.0, **stored, "attempts": 0, "cache_hit": True}
            return LlmResult.model_validate({**update, "key": call.key})
        if cache.mode == "replay":
            m, cfg = call.meta, call.config
            who = (
                f"worker {m.worker}, {m.role}/{m.phase}, subrun {m.subrun}, round {m.round}"
                if m is not None
                else "an unaudited call"
            )
            raise CacheMiss(
                f"replay cache miss: no recorded response for model {cfg.model!r}, {who} "
                f"(request key {call.key[:16]}); record it first in read_write mode"
            )
        try:
            result = await self.inner.complete(call)
        except RunStopped as exc:
            if cache.mode == "read_write":
                stop = {"stopped": self.redactor.text(str(exc)), "stop": _stop_kind(exc)}
                cache.put(call.key, self.redactor.data(call.body), stop)
            raise
        except LlmUnavailable as exc:
            if cache.mode == "read_write" and self.keep_failures:
                error = {"error": self.redactor.text(str(exc)), "latency_s": exc.latency_s}
                cache.put(call.key, self.redactor.data(call.body), error)
            raise
        if cache.mode == "read_write":
            answer = result.model_dump(exclude={"attempts", "key", "retried"})
            cache.put(call.key, self.redactor.data(call.body), self.redactor.data(answer))
        return result

    async def aclose(self) -> None:
        await self.inner.aclose()


def _not_text(stored: Mapping[str, object]) -> bool:
    """Whether a stored entry holds a string that is not UTF-8 text (a lone surrogate)."""
    try:
        json.dumps(stored, ensure_ascii=False).encode("utf-8")
    except UnicodeEncodeError:
        return True
    return False


def _stop_kind(exc: RunStopped) -> str:
    """How a stop is named in its cache marker."""
    if isinstance(exc, EndpointDown):
        return "endpoint_down"
    if isinstance(exc, BudgetExhausted):
        return "budget"
    return "stopped"


def _replayed_stop(call: Call, stored: Mapping[str, object]) -> RunStopped:
    """The stop a replay raises at a call whose recording stopped there (`Cached`)."""
    why = str(stored["stopped"])
    kind = stored.get("stop")
    if kind == "endpoint_down":
        return EndpointDown(why, endpoint=endpoint_of(call))
    if kind == "budget":
        return BudgetExhausted(why)
    return RunStopped(why)


class Audited:
    """One `LlmCall` event per call through it, also for a failure (its `error`, with what
    the failure cost) and for an answer from the cache (`cache_hit`)."""

    def __init__(
        self,
        inner: Provider,
        emit: Emit,
        pricing: Pricing,
        observer: Callable[[CallMeta, LlmResult, str | None], None] | None = None,
        redactor: Redactor | None = None,
    ) -> None:
        """`inner`: the provider audited; `emit`: `EventLog.emit`; `pricing`: the USD shown;
        `observer`: told of every recorded call (e.g. a progress bar); `redactor`: the run's
        secrets, cut out of a recorded error."""
        self.inner = inner
        self.emit = emit
        self.pricing = pricing
        self.observer = observer
        self.redactor = redactor or Redactor()

    async def complete(self, call: Call) -> LlmResult:
        try:
            result = await self.inner.complete(call)
        except LlmError as exc:
            # what a failed call used is unknown (null tokens, no cost), never 0: an endpoint
            # may bill an answer mbb refused, or a request it went on with after a timeout
            failed = LlmResult(
                key=call.key,
                attempts=exc.attempts,
                latency_s=exc.latency_s,
                cache_hit=exc.cache_hit,
                usage=Usage(reported=False),
            )
            self._record(call, failed, self.redactor.text(str(exc)))
            raise
        except EndpointDown as exc:
            # the failure that opened the breaker (`failed_call`): a call made and failed, which
            # the observer counts; no event, since the run stops there and a resume makes the
            # call again
            made = exc.failed_call
            if isinstance(made, LlmError) and self.observer is not None and call.meta is not None:
                failed = LlmResult(key=call.key, attempts=made.attempts, latency_s=made.latency_s)
                self.observer(call.meta, failed, self.redactor.text(str(made)))
            raise
        self._record(call, result, None)
        return result

    def _record(self, call: Call, result: LlmResult, error: str | None) -> None:
        meta = call.meta
        if meta is None:
            raise ValueError("an audited call needs a CallMeta (who asked, and why)")
        model = call.config.model
        self.emit(
            LlmCall,
            worker=meta.worker,
            subrun=meta.subrun,
            round=meta.round,
            role=meta.role,
            phase=meta.phase,
            model=model,
            # an endpoint that reported no usage: its counts are unknown (null), never 0
            prompt_tokens=result.usage.prompt if result.usage.reported else None,
            completion_tokens=result.usage.completion if result.usage.reported else None,
            reasoning_tokens=result.usage.reasoning if result.usage.reported else None,
            cached_tokens=result.usage.cached if result.usage.reported else None,
            latency_s=round(result.latency_s, 6),
            attempts=result.attempts,
            cache_hit=result.cache_hit,
            cost_usd=self.pricing.cost(model, result.usage),
            repair=meta.repair,
            request_key=result.key,
            error=error,
            served_model=result.served_model if result.served_model != model else None,
            usage_implausible=result.usage.implausible,
        )
        if self.observer is not None:
            self.observer(meta, result, error)

    async def aclose(self) -> None:
        await self.inner.aclose()
