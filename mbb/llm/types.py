"""The records every part of the LLM layer passes around: a request, who asked, what came back.

They hold no behaviour and import nothing of the provider, so the provider, the wrappers and the
agents can all depend on them.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, replace
from typing import Any

from pydantic import BaseModel, ConfigDict

__all__ = ["CallMeta", "ChatRequest", "Emit", "LlmResult", "Usage"]

Emit = Callable[..., Any]  # EventLog.emit-compatible: emit(cls, worker=..., **fields)


class Usage(BaseModel):
    """Token counts of one answer (cached: prompt tokens the server served from its cache).

    `reported` is false when the endpoint's answer carried no token counts (no `usage`, or
    no prompt or completion count in it): the counts are then unknown, not zero, so the call's
    cost is unknown and a spend cap cannot be kept on it."""

    model_config = ConfigDict(frozen=True)

    prompt: int = 0
    completion: int = 0
    reasoning: int = 0
    cached: int = 0
    reported: bool = True
    # the endpoint sent counts that cannot be true (`provider.plausible_usage`): not reported,
    # their cost unknown, and said so
    implausible: bool = False


class LlmResult(BaseModel):
    """What one call returned, whether from the network or the cache.

    `latency_s` is the wall time of the logical call (every attempt, backoff and wait for a
    slot included), rounded to the microsecond; a cache hit carries the latency recorded with
    the answer (0 for answers recorded before latencies were), so a replay charges the same
    time as the run it replays (`time.model: charged`)."""

    model_config = ConfigDict(frozen=True)

    text: str | None = None
    tool_name: str | None = None
    tool_arguments: str | None = None
    tool_call_id: str | None = None  # the first tool call's id (echoed by a tool loop)
    refusal: str | None = None
    reasoning: str | None = None  # reasoning text beside the answer (reasoning_content/reasoning)
    finish_reason: str | None = None
    # the model the endpoint said answered (its `model` field; None: it named none): a router
    # or a gateway can serve another model than the one asked for
    served_model: str | None = None
    usage: Usage = Usage()
    latency_s: float = 0.0
    attempts: int = 0
    cache_hit: bool = False
    key: str = ""
    retried: tuple[str, ...] = ()  # the failures retried before this answer (not cached)


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
        """The same caller, marked as asking again after an invalid answer."""
        return replace(self, repair=True)
