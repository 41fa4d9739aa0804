"""A stub endpoint on loopback: the whole LLM path without keys or a network.

`stub_endpoint(configs)` serves every model of a study from one `FakeOpenAIServer` on
127.0.0.1: each request is checked and answered the way the model's preset's provider would
(`mbb.testing.emulate`: its request quirks, its usage fields, its reasoning field), with a valid
stand-in action read from the turn (`declaring_responder`). The answers are not a model's
behaviour: they exercise prompts, structured outputs, caching, limits, failures, tables,
notebooks, the report and the viewer (`mbb study FILE --stub`, and the tests).
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator, Mapping
from typing import Any

from mbb.llm.config import ModelConfig
from mbb.testing.emulate import PROVIDERS, ProviderEmulator
from mbb.testing.testserver import FakeOpenAIServer, Reply, declaring_responder

__all__ = ["StubRouter", "stub_endpoint"]


class StubRouter:
    """A responder that answers each request as the emulator of its model's preset."""

    def __init__(self, configs: Mapping[str, ModelConfig]) -> None:
        self._by_model: dict[str, ProviderEmulator] = {}
        for cfg in configs.values():
            provider = cfg.preset if cfg.preset in PROVIDERS else "openai"
            self._by_model.setdefault(cfg.model, ProviderEmulator(provider, declaring_responder))

    def __call__(self, body: dict[str, Any]) -> Reply:
        emulator = self._by_model.get(str(body.get("model")))
        if emulator is None:
            return Reply.error(404, f"The model {body.get('model')!r} does not exist")
        return emulator(body)


@contextlib.contextmanager
def stub_endpoint(configs: Mapping[str, ModelConfig], *, delay_s: float = 0.0) -> Iterator[str]:
    """Serve `configs`' models on a free loopback port for the block; yields the base URL.
    `delay_s`: latency added to every completion."""
    models = tuple(sorted({c.model for c in configs.values()}))
    with FakeOpenAIServer(StubRouter(configs), models=models, delay_s=delay_s) as server:
        yield server.url
