"""`mbb estimate`: tokens and cost of a study before it runs.

Two sources:
- a scripted dry run (default): a few seeds of the condition run through the real arena and the
  real prompt builder against a loopback endpoint (`mbb.testing.emulate`) that answers with valid
  stand-in actions, counts tokens at about 4 characters a token and reports the prefix it has
  cached the way the model's preset does (OpenAI-style automatic caching; none for endpoints
  that report none). The mean per run is scaled to `runs`;
- recorded runs (`from_dirs`): the `llm_call` events of runs already made, priced again.

Costs use the condition's `prices` (cached prompt tokens at the cached rate). A real model's
answers are longer or shorter than the stand-in's, and its tokenizer differs from 4 characters
a token: the estimate is of the prompts mbb sends, which dominate (see the README).
"""

from __future__ import annotations

import tempfile
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

__all__ = ["Estimate", "estimate_from_runs", "estimate_study", "price_calls"]


@dataclass(frozen=True)
class Estimate:
    condition: str
    model: str  # model label (config names), or "scripted"
    runs: int
    sample_runs: int  # runs the estimate is based on
    calls: float
    prompt_tokens: float
    cached_tokens: float
    completion_tokens: float
    cost_usd: float
    source: str  # "dry run" | "recorded"

    @property
    def tokens(self) -> float:
        return self.prompt_tokens + self.completion_tokens

    @property
    def cost_per_run_usd(self) -> float:
        return self.cost_usd / self.runs if self.runs else 0.0

    def line(self) -> str:
        return (
            f"{self.condition:20s} {self.model:16s} {self.runs:5d} runs  "
            f"{self.calls:9.0f} calls  {self.prompt_tokens / 1e6:8.3f} M prompt "
            f"({self.cached_tokens / max(1.0, self.prompt_tokens):5.1%} cached)  "
            f"{self.completion_tokens / 1e6:7.3f} M completion  ${self.cost_usd:10.4f} "
            f"(${self.cost_per_run_usd:.4f}/run, {self.source} of {self.sample_runs})"
        )


def price_calls(calls: Any, prices: Mapping[str, Any]) -> float:
    """USD of a table of llm calls at `prices` (by model name; cached tokens at their rate)."""
    total = 0.0
    for row in calls.iter_rows(named=True):
        price = prices.get(row["model"])
        if price is not None:
            total += price.cost(
                row["prompt_tokens"], row["completion_tokens"], row["cached_tokens"]
            )
    return total


def _scaled(cond: Any, model: str, calls: Any, sample: int, runs: int, source: str) -> Estimate:
    k = runs / max(1, sample)
    return Estimate(
        condition=cond.name,
        model=model,
        runs=runs,
        sample_runs=sample,
        calls=calls.height * k,
        prompt_tokens=float(calls["prompt_tokens"].sum()) * k,
        cached_tokens=float(calls["cached_tokens"].sum()) * k,
        completion_tokens=float(calls["completion_tokens"].sum()) * k,
        cost_usd=price_calls(calls, cond.prices) * k,
        source=source,
    )


def _loopback(cond: Any, url: str) -> Any:
    """The condition with every model config pointed at the loopback endpoint (no key, no
    cache); presets, protocols and sampling stay what they are."""
    from mbb.batch.build import load_params

    data = cond.model_dump(mode="json")
    for m in data["models"].values():
        m.update(base_url=url, api_key_env=None, max_retries=1, timeout_s=60.0)
    data["llm"]["cache"] = "off"
    return load_params(data)


def estimate_study(
    cond: Any, runs: int, *, dry_runs: int = 2, provider: str | None = None
) -> Estimate:
    """Dry-run `dry_runs` seeds (from the condition's seed) against a scripted endpoint."""
    from mbb.agents.backends import uses_llm
    from mbb.batch.build import run_condition
    from mbb.batch.runs import model_label
    from mbb.core.tables import tables_from_log
    from mbb.testing.emulate import PROVIDERS, ProviderEmulator
    from mbb.testing.testserver import FakeOpenAIServer, declaring_responder

    label = model_label(cond) or "scripted"
    if not uses_llm(cond):
        import polars as pl

        empty = pl.DataFrame(
            schema={
                "model": pl.String,
                "prompt_tokens": pl.Int64,
                "cached_tokens": pl.Int64,
                "completion_tokens": pl.Int64,
            }
        )
        return _scaled(cond, label, empty, dry_runs, runs, "dry run")
    presets_used = {m.preset for m in cond.models.values()}
    if provider is None:
        provider = next(iter(presets_used)) if len(presets_used) == 1 else None
    provider = provider if provider in PROVIDERS else "openai"
    emulator = ProviderEmulator(provider, declaring_responder, reasoning=None)
    names = tuple(sorted({m.model for m in cond.models.values()}))
    parts = []
    with FakeOpenAIServer(emulator, models=names) as srv, tempfile.TemporaryDirectory():
        dry = _loopback(cond, srv.url)
        for s in range(cond.seed, cond.seed + dry_runs):
            parts.append(tables_from_log(run_condition(dry, s, None).log)["llm_calls"])
    import polars as pl

    calls = pl.concat(parts, how="diagonal_relaxed")
    return _scaled(cond, label, calls, dry_runs, runs, "dry run")


def estimate_from_runs(cond: Any, runs: int, dirs: Sequence[str | Path]) -> Estimate:
    """Scale the recorded `llm_call` events of finished runs (run folders or condition folders)."""
    from mbb.batch.runs import model_label
    from mbb.core.tables import tables_from_run_dirs

    run_dirs: list[Path] = []
    for d in map(Path, dirs):
        if (d / "events.jsonl").is_file():
            run_dirs.append(d)
        else:
            run_dirs.extend(sorted(p.parent for p in d.glob("*/events.jsonl")))
    if not run_dirs:
        raise FileNotFoundError(
            f"no recorded runs (events.jsonl) under {', '.join(map(str, dirs))}"
        )
    calls = tables_from_run_dirs(run_dirs)["llm_calls"]
    return _scaled(cond, model_label(cond) or "scripted", calls, len(run_dirs), runs, "recorded")
