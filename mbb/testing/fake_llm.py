"""A stand-in for the LLM classifier's model: answers from a known labelling, with planted misses
and noise, so the classifier's plumbing (batching, cache, quotes, kappa) is tested and a notebook
runs offline without pretending to be an LLM."""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from mbb.core.taxonomy import ALL_LABELS

__all__ = ["FakeLLM"]


class FakeLLM:
    """A deterministic stand-in for the LLM layer, for tests and offline notebooks.

    It is NOT a classifier and is not derived from the evidence cues: it answers from an
    `oracle` (utterance text -> labels, e.g. the scripted ground truth or a gold file), then
    forgets each label with probability `miss` and adds a random wrong one with probability
    `noise` (seeded, so kappa tests are exact). Texts the oracle does not know get no labels.
    Agreement between the evidence classifier and `FakeLLM` therefore measures the evidence
    classifier against a noisy copy of the oracle; it says nothing about how an LLM would
    label the text, so it must not be reported as LLM agreement."""

    def __init__(
        self,
        oracle: Mapping[str, Sequence[str]] | None = None,
        *,
        miss: float = 0.0,
        noise: float = 0.0,
        seed: int = 0,
    ) -> None:
        self.oracle = dict(oracle or {})
        self.miss, self.noise = miss, noise
        self.rng = np.random.default_rng(seed)
        self.calls: list[dict[str, Any]] = []

    async def __call__(
        self, messages: list[dict[str, str]], schema: dict[str, Any], *, role: str
    ) -> dict[str, Any]:
        items = json.loads(messages[-1]["content"])["items"]
        self.calls.append({"role": role, "n_items": len(items)})
        out = []
        for it in items:
            labels = []
            for cat in sorted(set(self.oracle.get(it["text"], ()))):
                if self.rng.random() >= self.miss:
                    labels.append({"category": cat, "quote": it["text"][:40]})
            if self.rng.random() < self.noise:
                cat = ALL_LABELS[int(self.rng.integers(len(ALL_LABELS)))]
                labels.append({"category": cat, "quote": it["text"][:20]})
            out.append({"id": it["id"], "labels": labels})
        prompt = sum(len(m["content"]) for m in messages) // 4
        return {
            "items": out,
            "_usage": {"prompt_tokens": prompt, "completion_tokens": 12 * len(items)},
        }
