"""Per-endpoint limits: how fast an endpoint may be called, and when it is given up on.

- `RateLimit`: at most `config.rpm` requests and `config.tpm` tokens per rolling minute per
  endpoint (model and base URL), as providers meter them. A request waits until it fits; its
  tokens are counted as its prompt (about 4 characters a token) before it is sent and as the
  answer's usage once it is back. Inside `Retrying`, so every attempt is metered.
- `EndpointBreaker`: consecutive failures of one endpoint stop the runs that use it. A call
  whose retries are exhausted (connection refused, timeouts, 5xx) or whose request the endpoint
  keeps refusing (a 4xx) counts one failure; `stop_after` of them in a row — or one refusal of
  the key or the model (401/403/404, a missing key variable) — opens the breaker, and every
  call to that endpoint raises `EndpointDown`: the runs stop, recorded and resumable, with one
  line naming the endpoint and its last error. Failures before the breaker opens are recorded
  and answered by the caller's stated default; the call that opens it gets only a stop marker
  in the replay cache, so a resumed run makes it again and a replay stops there. A success
  resets the count. mbb's choice: 3 in a row. The count is per endpoint across every run of
  the client (a batch's seeds share it: a dead endpoint stops them all), so a replay of one
  seed does not count: it stops where the recording's marker says.
  Given a `stop_share` (a study passes its `failures.invalid_share`), the breaker also opens
  when more than that share of the endpoint's last `STOP_WINDOW` calls failed, in a row or not
  (calls not yet made count as successes): an endpoint failing every other call had its count
  reset by each success and played a whole study through, every run completed and invalid
  (F8 of red team rt37). mbb's choice: a window of 40 calls, so at the default 5 % the third
  failure among the last 40 calls stops the endpoint, its runs resumable — a run with that
  share of failed calls would be invalid anyway.
"""

from __future__ import annotations

import asyncio
import json
import time
from collections import deque
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field

from mbb.core.errors import CacheMiss, EndpointDown, LlmConfigError, LlmUnavailable
from mbb.llm.provider import Call, Provider, endpoint_of
from mbb.llm.types import LlmResult

__all__ = ["STOP_AFTER", "EndpointBreaker", "RateLimit", "endpoint_of"]

STOP_AFTER = 3  # consecutive failed calls of one endpoint that stop its runs
STOP_WINDOW = 40  # the recent calls of one endpoint whose failed share can stop it (stop_share)
_WINDOW_S = 60.0


@dataclass
class _Meter:
    """One endpoint's requests and tokens in the last minute."""

    requests: deque[float] = field(default_factory=deque)
    tokens: deque[tuple[float, int]] = field(default_factory=deque)
    token_sum: int = 0

    def expire(self, now: float) -> None:
        while self.requests and self.requests[0] <= now - _WINDOW_S:
            self.requests.popleft()
        while self.tokens and self.tokens[0][0] <= now - _WINDOW_S:
            self.token_sum -= self.tokens.popleft()[1]


def _prompt_tokens(call: Call) -> int:
    """A request's prompt tokens before it is sent, at about 4 characters a token."""
    return len(json.dumps(call.body.get("messages", []), ensure_ascii=False)) // 4 + 1


class RateLimit:
    """Requests and tokens per minute per endpoint (see the module docstring). `clock`,
    `sleep`: injectable for tests."""

    def __init__(
        self,
        inner: Provider,
        *,
        clock: Callable[[], float] = time.monotonic,
        sleep: Callable[[float], Awaitable[None]] = asyncio.sleep,
    ) -> None:
        self.inner = inner
        self.clock = clock
        self.sleep = sleep
        self._meters: dict[str, _Meter] = {}
        self.waited_s = 0.0  # total time calls waited for the limits (reported by studies)

    async def _admit(self, call: Call, meter: _Meter, tokens: int) -> None:
        rpm, tpm = call.config.rpm, call.config.tpm
        while True:
            now = self.clock()
            meter.expire(now)
            waits = []
            if rpm is not None and len(meter.requests) >= rpm:
                waits.append(meter.requests[0] + _WINDOW_S - now)
            if tpm is not None and meter.tokens and meter.token_sum + tokens > tpm:
                waits.append(meter.tokens[0][0] + _WINDOW_S - now)
            if not waits:
                meter.requests.append(now)
                meter.tokens.append((now, tokens))
                meter.token_sum += tokens
                return
            wait = max(0.01, min(waits))
            self.waited_s += wait
            await self.sleep(wait)

    async def complete(self, call: Call) -> LlmResult:
        if call.config.rpm is None and call.config.tpm is None:
            return await self.inner.complete(call)
        meter = self._meters.setdefault(endpoint_of(call), _Meter())
        estimate = _prompt_tokens(call)
        await self._admit(call, meter, estimate)
        result = await self.inner.complete(call)
        if not result.usage.reported:  # no count from the endpoint: the estimate stands
            return result
        used = result.usage.prompt + result.usage.completion
        if used != estimate:  # what the endpoint counted replaces the estimate
            meter.tokens.append((self.clock(), used - estimate))
            meter.token_sum += used - estimate
        return result

    async def aclose(self) -> None:
        await self.inner.aclose()


class EndpointBreaker:
    """Stops an endpoint's runs after `stop_after` consecutive failures (see the module
    docstring). `down` maps each stopped endpoint to the line saying why."""

    def __init__(
        self, inner: Provider, *, stop_after: int = STOP_AFTER, stop_share: float | None = None
    ) -> None:
        """`inner`: the provider whose calls are counted; `stop_after`: failures in a row that
        stop an endpoint; `stop_share`: the share of failures among its last `STOP_WINDOW`
        calls above which it stops too (None: only failures in a row count)."""
        if stop_after < 1:
            raise ValueError(f"stop_after must be at least 1, got {stop_after}")
        self.inner = inner
        self.stop_after = stop_after
        self.stop_share = stop_share
        self._failures: dict[str, int] = {}
        self._recent: dict[str, deque[bool]] = {}  # per endpoint, its last calls: failed?
        self.down: dict[str, str] = {}

    def _open(self, endpoint: str, why: str) -> EndpointDown:
        line = self.down.setdefault(endpoint, why)
        return EndpointDown(f"endpoint {endpoint} is down: {line}", endpoint=endpoint)

    def over(self, inner: Provider, *, replay: bool = False) -> Provider:
        """This breaker (its counts, its stopped endpoints) in front of another provider.
        `replay`: `inner` is a replay cache; the breaker then opens only where the recording
        stopped (its stop marker, or for a cache recorded before markers a miss right after
        `stop_after - 1` replayed failures), never on a count of replayed failures, which a
        replay of one seed of a batch cannot reproduce."""
        return _BreakerOver(self, inner, replay=replay)

    async def complete(self, call: Call) -> LlmResult:
        return await self.complete_through(self.inner, call)

    async def complete_through(
        self, inner: Provider, call: Call, *, replay: bool = False
    ) -> LlmResult:
        """`call` through `inner`, counted by this breaker; `replay`: see `over`."""
        endpoint = endpoint_of(call)
        if endpoint in self.down:
            raise self._open(endpoint, self.down[endpoint])
        try:
            result = await inner.complete(call)
        except LlmConfigError as exc:  # the key or the model is refused: no retry helps
            down = self._open(endpoint, " ".join(str(exc).split())[:300])
            down.failed_call = exc
            raise down from None
        except EndpointDown as exc:  # a replayed stop marker: the endpoint stays down
            self.down.setdefault(endpoint, str(exc).split(" is down: ", 1)[-1])
            raise
        except CacheMiss:
            # a replay of a cache recorded before stop markers: the call that opened the
            # breaker was never recorded, so a miss right after `stop_after - 1` replayed
            # failures is where the recorded run stopped, and the replay stops there too
            n = self._failures.get(endpoint, 0) + 1
            if n >= self.stop_after:
                why = f"{n} call(s) in a row failed (replayed: the recorded run stopped here)"
                raise self._open(endpoint, why) from None
            raise
        except LlmUnavailable as exc:
            n = self._failures[endpoint] = self._failures.get(endpoint, 0) + 1
            failed = self._count(endpoint, failed=True)
            last = " ".join(str(exc).split())[:300]
            why = None
            if n >= self.stop_after:
                why = f"{n} call(s) in a row failed; the last: {last}"
            elif self.stop_share is not None and failed > self.stop_share * STOP_WINDOW:
                why = (
                    f"{failed} of its last {STOP_WINDOW} calls failed, more than "
                    f"{self.stop_share:.0%}; the last: {last}"
                )
            if why is not None and not replay:
                down = self._open(endpoint, why)
                down.failed_call = exc  # a call made, and failed: the study's count has it
                raise down from None
            raise
        self._failures[endpoint] = 0
        self._count(endpoint, failed=False)
        return result

    def _count(self, endpoint: str, *, failed: bool) -> int:
        """Record a call of `endpoint`; the failures among its last STOP_WINDOW calls."""
        recent = self._recent.setdefault(endpoint, deque(maxlen=STOP_WINDOW))
        recent.append(failed)
        return sum(recent)

    async def aclose(self) -> None:
        await self.inner.aclose()


class _BreakerOver:
    """`EndpointBreaker.over`: the breaker's state, another provider beneath."""

    def __init__(self, breaker: EndpointBreaker, inner: Provider, *, replay: bool) -> None:
        self.breaker = breaker
        self.inner = inner
        self.replay = replay

    async def complete(self, call: Call) -> LlmResult:
        return await self.breaker.complete_through(self.inner, call, replay=self.replay)

    async def aclose(self) -> None:
        await self.inner.aclose()
