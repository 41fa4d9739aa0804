"""Shared fixtures: a scripted local OpenAI-compatible server, a key in a fake env, an event log."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import pytest

from mbb.core.eventlog import EventLog
from mbb.llm.client import LlmClient
from mbb.llm.config import ModelConfig, Price
from mbb.testing.testserver import FakeOpenAIServer

SECRET = "sk-test-DO-NOT-LEAK-0123456789abcdef"
KEY_ENV = "MBB_TEST_LLM_KEY"


class Sleeps:
    """Injected sleep: records the delays instead of waiting."""

    def __init__(self) -> None:
        self.delays: list[float] = []

    async def __call__(self, seconds: float) -> None:
        self.delays.append(seconds)


class FakeClock:
    """A clock that moves only when a scripted reply says it took time."""

    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now

    def answering(self, seconds: float, respond):
        """A server responder that advances this clock by `seconds` before answering."""

        def responder(body):
            self.now += seconds
            return respond(body)

        return responder


@pytest.fixture
def server() -> Iterator[FakeOpenAIServer]:
    with FakeOpenAIServer(api_key=SECRET) as srv:
        yield srv


@pytest.fixture
def sleeps() -> Sleeps:
    return Sleeps()


@pytest.fixture
def log() -> EventLog:
    return EventLog("test-run")


def make_config(server: FakeOpenAIServer, **kw: Any) -> ModelConfig:
    base: dict[str, Any] = {
        "model": "test-model",
        "base_url": server.url,
        "api_key_env": KEY_ENV,
        "timeout_s": 2.0,
        "max_retries": 3,
    }
    base.update(kw)
    return ModelConfig(**base)


def make_client(sleeps: Sleeps | None = None, **kw: Any) -> LlmClient:
    return LlmClient(
        environ={KEY_ENV: SECRET},
        sleep=sleeps if sleeps is not None else Sleeps(),
        prices={"test-model": Price(prompt=1.0, completion=2.0)},
        **kw,
    )


def replay_comparable(lines: list[str]) -> list[str]:
    """Event lines without what a replay may change: the wall clock, provenance, the cache
    mode in the params, and how each answer was obtained (latency, attempts, cache hit)."""
    out = []
    for x in lines:
        d = json.loads(x)
        d.pop("wall")
        if d["kind"] == "run_started":
            d.pop("provenance")
            d["params"].pop("llm")
        if d["kind"] == "llm_call":
            for k in ("latency_s", "attempts", "cache_hit"):
                d.pop(k)
        out.append(json.dumps(d, sort_keys=True))
    return out
