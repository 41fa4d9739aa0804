"""The errors that cross layers, in one module every layer may import (it imports nothing of mbb).

Two families. `BackendFatal`: an agent backend failed in a way a default must not paper over,
so the run stops (a misconfigured endpoint, a replay with no recorded answer, a spend cap).
`LlmError`: what an LLM call cost before it failed (attempts, seconds, whether the replay cache
answered), so the audit records failures like successes; `LlmUnavailable` is the one a caller
repairs with its stated default.
"""

from __future__ import annotations

import re

__all__ = [
    "BackendFatal",
    "BudgetExhausted",
    "CacheMiss",
    "EndpointDown",
    "LlmCacheError",
    "LlmConfigError",
    "LlmError",
    "LlmTransient",
    "LlmUnavailable",
    "RunStopped",
    "for_terminal",
    "no_surrogates",
    "one_line",
]


_ALL_CONTROL = {c: f"\\x{c:02x}" for c in [*range(0x20), *range(0x7F, 0xA0)]}
_CONTROL = {c: e for c, e in _ALL_CONTROL.items() if c not in (9, 10)}


def for_terminal(text: str, *, one_line: bool = False) -> str:
    """`text` with its control characters written as `\\xNN`, for a message printed to a
    terminal: a file or run name from a colleague's folder holding an escape sequence (ESC)
    would otherwise restyle, move or clear the user's terminal.

    text: the message; one_line: tabs and newlines written out too (a name from a folder put
    into a one-line message, say an exception's, that no CLI flattens first)."""
    return text.translate(_ALL_CONTROL if one_line else _CONTROL)


_SURROGATES = re.compile("[\ud800-\udfff]")


def no_surrogates(text: str) -> str:
    """`text` with every lone UTF-16 surrogate (a `\\ud800` an endpoint's JSON can hold) replaced
    by U+FFFD: such a string cannot be encoded as UTF-8, and a report, a viewer page or an
    event written from it raised UnicodeEncodeError (F3 of red team rt37)."""
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return _SURROGATES.sub("\ufffd", text)
    return text


def one_line(text: str, limit: int = 300) -> str:
    """An endpoint's or an error's text as part of one terminal line: whitespace runs folded,
    cut to `limit` characters, lone surrogates replaced and every control character (C0, DEL,
    C1, ESC among them) written as `\\xNN` — the same on every path that prints such a text
    (the retry line, the stop line, the pre-run check, a failed run), so an endpoint cannot
    move the cursor, erase lines or restyle the terminal (F6 of red team rt37)."""
    return for_terminal(no_surrogates(" ".join(text.split())[:limit]), one_line=True)


class BackendFatal(Exception):
    """An agent-backend error that must stop the run instead of being repaired by a default:
    a misconfigured endpoint, or a replay that has no recorded answer (defaulting there would
    silently change the run)."""


class LlmError(RuntimeError):
    """Base of LLM-layer failures: `attempts` and `latency_s` say what the failure cost,
    `cache_hit` that the replay cache answered with a recorded failure."""

    def __init__(
        self,
        message: str,
        *,
        attempts: int = 0,
        latency_s: float = 0.0,
        cache_hit: bool = False,
    ) -> None:
        """`message`: one line naming the model and endpoint (never a key); `attempts`: requests
        sent; `latency_s`: wall seconds spent; `cache_hit`: answered from the replay cache."""
        super().__init__(message)
        self.attempts = attempts
        self.latency_s = latency_s
        self.cache_hit = cache_hit


class LlmConfigError(LlmError, BackendFatal):
    """Not retryable and not the agent's fault: bad key, unknown model, missing env variable."""


class LlmUnavailable(LlmError):
    """Retries exhausted, or a non-retryable request error: the caller applies its default."""


class LlmTransient(LlmUnavailable):
    """One attempt failed in a way worth retrying (429, 5xx, timeout, dropped connection,
    malformed body). The retry wrapper consumes it; without one it is simply unavailable."""

    def __init__(
        self, message: str, *, retry_after_s: float | None = None, latency_s: float = 0.0
    ) -> None:
        """`retry_after_s`: the server's `Retry-After` in seconds, if it sent one;
        `latency_s`: the failed attempt's wall seconds."""
        super().__init__(message, attempts=1, latency_s=latency_s)
        self.retry_after_s = retry_after_s


class CacheMiss(LlmError, LookupError, BackendFatal):
    """Replay mode found no recorded response for a request."""


class LlmCacheError(RuntimeError):
    """The cache file cannot be used (not an SQLite database, unreadable)."""


class RunStopped(BackendFatal, RuntimeError):
    """The run stops here and can be resumed later: nothing of the call that raised it is
    recorded (no answer, no failure; in the replay cache only a stop marker, which a replay
    reads and a resumed run ignores), so a resumed run makes that call again.
    The run ends with a `run_ended` event of status `stopped`."""


class BudgetExhausted(RunStopped):
    """The spend cap is reached: no further request is sent."""


class EndpointDown(RunStopped):
    """One endpoint failed repeatedly (connection, 401/403/404, a persistent 4xx) or refused
    the key: every run that uses it stops, resumable once the endpoint is back. `endpoint`
    names it (model and base URL, never a key); `failed_call` is the failure that opened the
    breaker, when a call made over the network did (None when the endpoint was already down)."""

    def __init__(
        self, message: str, *, endpoint: str, failed_call: Exception | None = None
    ) -> None:
        super().__init__(message)
        self.endpoint = endpoint
        self.failed_call = failed_call
