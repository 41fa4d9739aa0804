"""The LLM classifier: taxonomy labels with verbatim quoted evidence, through an injected
`complete_json(messages, schema, *, role) -> dict` coroutine (the LLM layer provides it; the
tests use `FakeLLM`).

- Batched: up to `batch_size` distinct utterances per call, `concurrency` calls at once.
- Cached: by a hash of (prompt version, source, text), so identical utterances — common with
  scripted personas and repeated across runs — are classified once; pass a dict (or a JSON file
  path) to keep the cache between sessions.
- Audited: every call is recorded in `usage` as an `llm_call`-shaped row with role
  "classifier" (tokens from the reply's `_usage` when the layer reports them, else a
  characters/4 estimate flagged approximate), so its spend appears separately in the token audit.
- Checked: categories outside the taxonomy and quotes not found in the utterance are never
  silently accepted: unknown categories are dropped and listed in `problems`; unverifiable
  quotes are kept with `quote_in_text = false`; utterances missing from a reply are not cached
  and are listed in `problems`.
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import re
from collections.abc import Awaitable, Callable, MutableMapping
from pathlib import Path
from typing import Any

import numpy as np
import polars as pl

from mbb.analysis.evidence import CUES
from mbb.taxonomy import CATEGORIES, CATEGORY_NAMES

__all__ = [
    "PROMPT_VERSION",
    "CompleteJSON",
    "FakeLLM",
    "LLMClassifier",
    "llm_layer_complete_json",
    "response_schema",
    "system_prompt",
]

PROMPT_VERSION = "scarce-taxonomy-v1"
CompleteJSON = Callable[..., Awaitable[dict[str, Any]]]
_KEYS = ["run_id", "seq", "subrun", "round", "worker", "source"]


def system_prompt() -> str:
    lines = [
        "You annotate utterances from a negotiation among coding agents that bid credits for "
        "execution windows on one shared machine. Each utterance is a public declaration note, "
        "a conversation message (public or private), or the reasoning behind a secret ballot "
        "that ranks the candidates.",
        "Label each utterance with every taxonomy category it clearly enacts. For each label "
        "quote the shortest verbatim span of the utterance that shows it. Use no label without "
        "a verbatim quote; an utterance may have no labels. Do not infer from speaker names.",
        "",
        "Categories (name: definition):",
    ]
    lines += [f"- {c.name}: {c.definition}" for c in CATEGORIES]
    lines += [
        "",
        'Reply with JSON only: {"items": [{"id": ..., "labels": [{"category": ..., '
        '"quote": ...}]}]}, one entry per input id.',
    ]
    return "\n".join(lines)


def response_schema() -> dict[str, Any]:
    label = {
        "type": "object",
        "properties": {
            "category": {"type": "string", "enum": list(CATEGORY_NAMES)},
            "quote": {"type": "string"},
        },
        "required": ["category", "quote"],
        "additionalProperties": False,
    }
    item = {
        "type": "object",
        "properties": {"id": {"type": "string"}, "labels": {"type": "array", "items": label}},
        "required": ["id", "labels"],
        "additionalProperties": False,
    }
    return {
        "type": "object",
        "properties": {"items": {"type": "array", "items": item}},
        "required": ["items"],
        "additionalProperties": False,
    }


def _key(source: str, text: str) -> str:
    return hashlib.sha256(f"{PROMPT_VERSION}\x00{source}\x00{text}".encode()).hexdigest()[:32]


class LLMClassifier:
    """Classify an utterance table (see `mbb.analysis.utterances`) with an LLM."""

    def __init__(
        self,
        complete_json: CompleteJSON,
        *,
        model: str = "unknown",
        batch_size: int = 20,
        concurrency: int = 4,
        cache: MutableMapping[str, list[dict[str, str]]] | str | Path | None = None,
    ) -> None:
        if batch_size < 1 or concurrency < 1:
            raise ValueError(
                f"batch_size and concurrency must be >= 1, got {batch_size}, {concurrency}"
            )
        self.complete_json = complete_json
        self.model = model
        self.batch_size = batch_size
        self.concurrency = concurrency
        self.cache_path = Path(cache) if isinstance(cache, str | Path) else None
        if self.cache_path is not None:
            self.cache: MutableMapping[str, list[dict[str, str]]] = (
                json.loads(self.cache_path.read_text()) if self.cache_path.exists() else {}
            )
        else:
            self.cache = cache if cache is not None else {}
        self.usage: list[dict[str, Any]] = []
        self.problems: list[dict[str, Any]] = []
        self.cache_hits = 0

    def _messages(self, items: list[dict[str, str]]) -> list[dict[str, str]]:
        return [
            {"role": "system", "content": system_prompt()},
            {"role": "user", "content": json.dumps({"items": items}, ensure_ascii=False)},
        ]

    async def _call(self, batch: list[tuple[str, str, str]], sem: asyncio.Semaphore) -> None:
        items = [{"id": str(i), "source": s, "text": t} for i, (_, s, t) in enumerate(batch)]
        messages = self._messages(items)
        async with sem:
            reply = await self.complete_json(messages, response_schema(), role="classifier")
        usage = reply.get("_usage") if isinstance(reply, dict) else None
        chars = sum(len(m["content"]) for m in messages)
        self.usage.append(
            {
                "role": "classifier",
                "phase": "classification",
                "model": self.model,
                "prompt_tokens": int(usage["prompt_tokens"]) if usage else chars // 4,
                "completion_tokens": int(usage["completion_tokens"])
                if usage
                else len(json.dumps(reply)) // 4,
                "reasoning_tokens": int(usage.get("reasoning_tokens", 0)) if usage else 0,
                "cached_tokens": int(usage.get("cached_tokens", 0)) if usage else 0,
                "cost_usd": usage.get("cost_usd") if usage else None,
                "cache_hit": False,
                "approximate": usage is None,
            }
        )
        got = {str(it.get("id")): it for it in (reply.get("items") or [])}
        for i, (key, _, text) in enumerate(batch):
            it = got.get(str(i))
            if it is None:
                self.problems.append({"key": key, "problem": "missing from reply"})
                continue
            labels = []
            for lab in it.get("labels") or []:
                cat = lab.get("category")
                if cat not in CATEGORY_NAMES:
                    self.problems.append({"key": key, "problem": f"unknown category {cat!r}"})
                    continue
                q = str(lab.get("quote") or "")
                labels.append(
                    {"category": cat, "quote": q, "in_text": bool(q) and q.lower() in text.lower()}
                )
            self.cache[key] = labels

    async def classify(self, utter: pl.DataFrame) -> pl.DataFrame:
        """Long table (utterance keys, category, basis 'llm', evidence = quote, quote_in_text)."""
        u = utter.select(*_KEYS, "text").with_columns(
            pl.struct("source", "text")
            .map_elements(lambda s: _key(s["source"], s["text"]), return_dtype=pl.String)
            .alias("key")
        )
        todo = (
            u.unique("key", keep="first", maintain_order=True)
            .filter(~pl.col("key").is_in(list(self.cache)))
            .sort("key")  # deterministic batches: identical requests hit the request cache
        )
        self.cache_hits += u.height - todo.height
        rows = list(zip(todo["key"], todo["source"], todo["text"], strict=True))
        batches = [rows[i : i + self.batch_size] for i in range(0, len(rows), self.batch_size)]
        sem = asyncio.Semaphore(self.concurrency)
        await asyncio.gather(*(self._call(b, sem) for b in batches))
        if self.cache_path is not None:
            self.cache_path.write_text(json.dumps(dict(self.cache)))
        keys, cats, quotes, ok = [], [], [], []
        for k in u["key"].unique():
            for lab in self.cache.get(k, []):
                keys.append(k)
                cats.append(lab["category"])
                quotes.append(lab["quote"])
                ok.append(lab["in_text"])
        lab = pl.DataFrame(
            {"key": keys, "category": cats, "evidence": quotes, "quote_in_text": ok},
            schema={
                "key": pl.String,
                "category": pl.String,
                "evidence": pl.String,
                "quote_in_text": pl.Boolean,
            },
        )
        return (
            u.join(lab, on="key")
            .with_columns(pl.lit("llm").alias("basis"))
            .select(*_KEYS, "category", "basis", "evidence", "quote_in_text")
            .sort("run_id", "seq", "category")
        )

    def classify_sync(self, utter: pl.DataFrame) -> pl.DataFrame:
        """`classify` from synchronous code (not from inside a running event loop)."""
        return asyncio.run(self.classify(utter))

    def usage_table(self) -> pl.DataFrame:
        """The classifier's calls as `llm_calls` rows (role 'classifier', no run or worker) —
        concatenate them to `tables["llm_calls"]` so the token audit reports them apart."""
        from mbb.analysis.tokens import LLM_CALL_SCHEMA

        schema = {**LLM_CALL_SCHEMA, "approximate": pl.Boolean}
        return pl.DataFrame(self.usage, schema=schema)


class FakeLLM:
    """A deterministic stand-in for the LLM layer: labels each item with the lexical cues
    (so it sees text only, no structure), then forgets each label with probability `miss` and
    adds a random wrong one with probability `noise` — seeded, so kappa tests are exact."""

    def __init__(self, *, miss: float = 0.0, noise: float = 0.0, seed: int = 0) -> None:
        self.miss, self.noise = miss, noise
        self.rng = np.random.default_rng(seed)
        self.calls: list[dict[str, Any]] = []
        self._cues = [(c, re.compile(rx, re.I), set(src)) for c, _, rx, src in CUES]

    async def __call__(
        self, messages: list[dict[str, str]], schema: dict[str, Any], *, role: str
    ) -> dict[str, Any]:
        items = json.loads(messages[-1]["content"])["items"]
        self.calls.append({"role": role, "n_items": len(items)})
        out = []
        for it in items:
            labels = []
            for cat, rx, src in self._cues:
                m = rx.search(it["text"])
                if m and it["source"] in src and self.rng.random() >= self.miss:
                    labels.append({"category": cat, "quote": m.group(0)})
            if self.rng.random() < self.noise:
                cat = CATEGORY_NAMES[int(self.rng.integers(len(CATEGORY_NAMES)))]
                labels.append({"category": cat, "quote": it["text"][:20]})
            out.append({"id": it["id"], "labels": labels})
        prompt = sum(len(m["content"]) for m in messages) // 4
        return {
            "items": out,
            "_usage": {"prompt_tokens": prompt, "completion_tokens": 12 * len(items)},
        }


def llm_layer_complete_json(
    client: Any, config: Any, *, cache: Any = None, emit: Any = None
) -> CompleteJSON:
    """`complete_json` through the real LLM layer (`mbb.llm.client.LlmClient`): structured
    output in the endpoint's declared mode, retries, the request cache, and an `llm_call` event
    (role "classifier") per request when `emit` is given. Usage comes back as `_usage`."""
    from mbb.llm.client import CallMeta, ChatRequest
    from mbb.llm.structured import InvalidOutput, extract_json

    async def complete_json(
        messages: list[dict[str, str]], schema: dict[str, Any], *, role: str
    ) -> dict[str, Any]:
        if config.structured == "json_schema":
            fmt = {"type": "json_schema", "json_schema": {"name": "labels", "schema": schema}}
        elif config.structured == "json_object_schema":
            fmt = {"type": "json_object", "schema": schema}
        else:
            fmt = None
        result = await client.call(
            config,
            ChatRequest(messages=messages, response_format=fmt),
            meta=CallMeta(worker=None, role=role, phase="classification"),
            emit=emit,
            cache=cache,
        )
        try:
            reply = extract_json(result.text or "")
        except InvalidOutput:
            reply = {}  # reported per utterance as "missing from reply"
        if not isinstance(reply, dict):
            reply = {}
        u = result.usage
        reply["_usage"] = {
            "prompt_tokens": u.prompt,
            "completion_tokens": u.completion,
            "reasoning_tokens": u.reasoning,
            "cached_tokens": u.cached,
            "cost_usd": None,
        }
        return reply

    return complete_json
