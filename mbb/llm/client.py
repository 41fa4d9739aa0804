"""`LlmClient`: the LLM layer as every agent of a run uses it, a provider plus wrappers.

The stack (`mbb.llm.wrappers` says why in this order):

    Audited → Cached → Budgeted → EndpointBreaker → Retrying → RateLimit → ConcurrencyLimit
    → OpenAICompatibleProvider

The lower part (breaker, retries, limits, endpoint) lives as long as the client: one connection
pool, one in-flight limit, one rate meter and one failure count per endpoint, shared by every
agent and, with `run_seeds` or a study, every run on the loop (`mbb.llm.limits`). The upper
part is put on per call, since each run has its own event log and may have its own cache.
Retries: 429, 5xx, timeouts, dropped connections and malformed bodies, with exponential backoff
and full jitter (honouring `Retry-After` seconds) through an injectable `sleep`. Auth failures
(401/403), unknown models (404) and a missing key variable stop the endpoint's runs at once
(resumable), with a message naming the model, base URL and variable — never the key. `aclose`
closes the connections; the run builder calls it when a run ends.

The error types live in `mbb.core.errors` and are re-exported here for the callers of old.
"""

from __future__ import annotations

import asyncio
import random
import time
from collections.abc import Callable, Iterable, Mapping
from typing import Any

from mbb.core.errors import LlmConfigError, LlmError, LlmUnavailable
from mbb.llm.budget import SpendLedger
from mbb.llm.cache import LlmCache
from mbb.llm.config import ModelConfig, Price
from mbb.llm.limits import STOP_AFTER, EndpointBreaker, RateLimit
from mbb.llm.provider import (
    NO_KEY_PLACEHOLDER,
    Call,
    Clock,
    MalformedResponse,
    OpenAICompatibleProvider,
    Provider,
    request_body,
)
from mbb.llm.redact import key_values
from mbb.llm.types import CallMeta, ChatRequest, Emit, LlmResult, Usage
from mbb.llm.wrappers import (
    MAX_RETRY_AFTER_S,
    Audited,
    Budgeted,
    Cached,
    ConcurrencyLimit,
    OnRetry,
    Pricing,
    Retrying,
    Sleep,
)

__all__ = [
    "NO_KEY_PLACEHOLDER",
    "CallMeta",
    "ChatRequest",
    "Emit",
    "LlmClient",
    "LlmConfigError",
    "LlmError",
    "LlmResult",
    "LlmUnavailable",
    "MalformedResponse",
    "Usage",
    "request_body",
]


class LlmClient:
    """Shared by every LLM agent of a run: `call` for audited, cached calls; `complete` for a
    bare network call (retries and the limit only)."""

    def __init__(
        self,
        *,
        prices: Mapping[str, Price] | None = None,
        sleep: Sleep = asyncio.sleep,
        rng: random.Random | None = None,
        environ: Mapping[str, str] | None = None,
        backoff_base_s: float = 1.0,
        backoff_cap_s: float = 60.0,
        max_retry_after_s: float = MAX_RETRY_AFTER_S,
        budget: SpendLedger | None = None,
        clock: Clock = time.perf_counter,
        provider: Provider | None = None,
        stop_after: int = STOP_AFTER,
        stop_share: float | None = None,
        on_call: Callable[[CallMeta, LlmResult, str | None], None] | None = None,
        secret_envs: Iterable[str] = (),
        on_retry: OnRetry | None = None,
    ) -> None:
        """`prices`: USD per model name (audit and spend caps); `sleep`, `rng`,
        `backoff_base_s`, `backoff_cap_s`, `max_retry_after_s`: the retry policy
        (`mbb.llm.wrappers.Retrying`); `environ`: where key variables are read; `budget`: spend
        caps checked before each network call; `clock`: measures latencies (a test's fake clock
        makes them exact); `provider`: the endpoint implementation (default: OpenAI-compatible);
        `stop_after`: consecutive failed calls of one endpoint that stop its runs
        (`mbb.llm.limits.EndpointBreaker`); `stop_share`: the share of failed calls among
        an endpoint's recent ones that stops it too (None: off); `on_call`: told of every
        audited call (who asked,
        the result, the error or None), e.g. to show progress per call; `secret_envs`: the key
        variables of the run's params, whose values (with the key of every config called) are
        redacted from answers, errors and cache entries; `on_retry`: told of every failed
        attempt about to be retried (`mbb.llm.wrappers.OnRetry`)."""
        self.pricing = Pricing(dict(prices or {}))
        self.budget = budget
        self._openai = OpenAICompatibleProvider(
            environ=environ, clock=clock, secret_envs=secret_envs
        )
        self.redactor = self._openai.redactor  # grows with every key the provider reads
        self.provider: Provider = self._openai if provider is None else provider
        self.rate = RateLimit(ConcurrencyLimit(self.provider), sleep=sleep)
        self.retrying = Retrying(
            self.rate,
            sleep=sleep,
            rng=rng,
            clock=clock,
            backoff_base_s=backoff_base_s,
            backoff_cap_s=backoff_cap_s,
            max_retry_after_s=max_retry_after_s,
            on_retry=on_retry,
        )
        # the network part: spend caps checked before each call goes out; the breaker sits
        # above it, and above a run's replay cache (`stack`), so cached failures count too
        self.network: Provider = (
            self.retrying if budget is None else Budgeted(self.retrying, budget, self.pricing)
        )
        self.breaker = EndpointBreaker(self.network, stop_after=stop_after, stop_share=stop_share)
        self.on_call = on_call

    @property
    def prices(self) -> dict[str, Price]:
        return dict(self.pricing.prices)

    @property
    def environ(self) -> Mapping[str, str]:
        """Where the OpenAI-compatible provider reads key variables (settable, for tests)."""
        return self._openai.environ

    @environ.setter
    def environ(self, value: Mapping[str, str]) -> None:
        self._openai.environ = value
        self.redactor.add(key_values(self._openai.secret_envs, value))

    @property
    def sleeps(self) -> list[float]:
        """Every backoff slept, for tests and the audit."""
        return self.retrying.sleeps

    def stack(
        self, emit: Emit | None = None, cache: LlmCache | None = None, *, keep_failures: bool = True
    ) -> Provider:
        """The provider a call goes through: the network part under the client's endpoint
        breaker, the cache and the audit when given. A replay (cache mode `replay`) puts the
        breaker above the cache, so the replay stops where the recorded run stopped (the
        cache's stop marker); otherwise the breaker counts the network's failures only and the
        cache sits above it (a resumed run retries what stopped it instead of stopping there).
        `emit`: `EventLog.emit` for the `llm_call` events; `cache`: the replay cache;
        `keep_failures`: the cache stores and replays final failures (`Cached`)."""
        p: Provider = self.network
        if cache is not None and cache.mode == "replay":
            p = self.breaker.over(Cached(p, cache, self.redactor), replay=True)
        else:
            p = self.breaker.over(p)
            if cache is not None:
                p = Cached(p, cache, self.redactor, keep_failures=keep_failures)
        if emit is not None:
            p = Audited(p, emit, self.pricing, self.on_call, self.redactor)
        return p

    async def complete(
        self, config: ModelConfig, req: ChatRequest, meta: CallMeta | None = None
    ) -> LlmResult:
        """One logical network call with retries (the breaker counts it); raises LlmConfigError,
        LlmUnavailable or EndpointDown. `config`: model and endpoint; `req`: the request;
        `meta`: who asks (for cache hints)."""
        return await self.breaker.complete(Call.of(config, req, meta))

    async def call(
        self,
        config: ModelConfig,
        req: ChatRequest,
        *,
        meta: CallMeta,
        emit: Emit | None = None,
        cache: LlmCache | None = None,
        keep_failures: bool = True,
    ) -> LlmResult:
        """Cache lookup, else a network call; one `LlmCall` event through `emit` (also on
        failure). `config`: model and endpoint; `req`: the request; `meta`: who asks and why;
        `emit`: the run's event log; `cache`: the replay cache (None: no cache);
        `keep_failures`: a final failure is stored and replayed (a run's calls; False asks
        again next time)."""
        stack = self.stack(emit, cache, keep_failures=keep_failures)
        return await stack.complete(Call.of(config, req, meta))

    def cost(self, model: str, usage: Usage) -> float | None:
        """USD of an answer of `model` with token counts `usage` (None: no price, unknown)."""
        return self.pricing.cost(model, usage)

    async def aclose(self) -> None:
        """Close the endpoint connections (idempotent; a later call opens new ones)."""
        await self.provider.aclose()

    def open_connections(self) -> list[Any]:
        """The OpenAI-compatible provider's `openai.AsyncOpenAI` clients not yet closed (a run
        that ended leaves none)."""
        return [c for c in self._openai.clients if not c.is_closed()]
