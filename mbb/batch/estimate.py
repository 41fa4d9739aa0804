"""`mbb estimate` (and `mbb study --estimate`): what a study will use before it runs.

`estimate(conditions, models=..., runs=...)` gives one `EstimateRow` per (condition, model):
calls, prompt tokens, cached prompt tokens, completion tokens (reasoning included), reasoning
tokens, wall time at the model's limits, and cost, for every preset. Two sources:

- **a dry run** (default): `dry_runs` seeds of the condition run through the real arena and the
  real prompt builder, each model config reached through a loopback endpoint emulating its own
  preset (`mbb.testing.emulate`: one emulated endpoint per preset, so a file mixing presets
  works) that answers with valid stand-in actions, counts about 4 characters a token, caches
  prefixes as that provider reports them and refuses what that provider refuses. The mean per
  run is scaled to `runs`. **A dry-run call that fails is an `EstimateError` naming the model,
  its preset and the endpoint's error, never a zero**;
- **recorded runs** (`recorded=`): the `llm_call` events of runs already made (run folders or
  folders of runs), scaled and priced again; wall time from their recorded latencies.

**Reasoning tokens** cannot be known from a dry run: the emulated endpoint reports, for each
call of a model that reasons (the effort sent, else its family's default,
`mbb.llm.presets.effort_of`), mbb's stated assumption for that effort
(`mbb.llm.presets.REASONING_TOKENS`: none 0, minimal 100, low 400, medium 1,200, high 3,000,
xhigh 6,000 per call, capped by max_tokens). Override it per effort or per model name with
`reasoning_tokens=` (`--reasoning-tokens`), or calibrate from real runs: `reasoning_from(dirs)`
(`--reasoning-from DIR`) gives each model's mean reasoning tokens per call as recorded.

**Wall time**, a stated model: the study's runs start together; each model's endpoint serves at
most `concurrency` calls at a time and `rpm` calls / `tpm` tokens a minute (`Limits`); a call
takes `Latency.first_token_s + completion tokens / Latency.tokens_per_s` (mbb's assumption,
0.8 s + tokens / 60 per second; recorded runs: their mean latency); and one run cannot end
sooner than its calls made one after another (its critical path: the dry run's endpoints wait a
few milliseconds per call and count the calls that waited one after another; recorded runs:
the union of their calls' intervals). A row's wall time is the largest of these bounds, named
in `wall_bound`; `totals` adds up the rows that share a model's endpoint.

**Cost** at the condition's `prices` (cached prompt tokens at their rate). A model without a
price is unpriced: its cost is None and shown as "unpriced", never $0.

A real model answers at other lengths and tokenizes differently from 4 characters a token: the
estimate is of the prompts mbb sends, which dominate the tokens (see the README).
"""

from __future__ import annotations

import contextlib
import json
import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from mbb.llm import presets
from mbb.llm.config import ModelConfig, Price
from mbb.params import Condition

__all__ = [
    "EstimateError",
    "EstimateRow",
    "Latency",
    "Limits",
    "emulated_calls",
    "estimate",
    "format_rows",
    "reasoning_from",
    "request_signature",
    "totals",
]

STEP_S = 0.003  # the dry run's emulated latency: enough to see which calls overlap
SCRIPTED = "scripted"


class EstimateError(ValueError):
    """A dry run that cannot stand for the study (a call failed, a run failed, no call made)."""


@dataclass(frozen=True)
class Limits:
    """How fast one model's endpoint serves the study: calls in flight at once, and optional
    requests and tokens (prompt + completion) per minute."""

    concurrency: int
    rpm: float | None = None
    tpm: float | None = None


@dataclass(frozen=True)
class Latency:
    """mbb's stated latency of one call: `first_token_s` plus the completion tokens (reasoning
    included) at `tokens_per_s`. Override it for a model you have measured."""

    first_token_s: float = 0.8
    tokens_per_s: float = 60.0

    def of(self, completion_tokens: float) -> float:
        return self.first_token_s + completion_tokens / self.tokens_per_s


@dataclass(frozen=True)
class EstimateRow:
    """What `runs` runs of one condition use of one model (its config name `model`)."""

    condition: str
    model: str  # model config name, or "scripted"
    endpoint_model: str | None  # the name sent to the endpoint
    preset: str | None
    effort: str | None  # the reasoning effort its calls run at (None: it does not reason)
    runs: int
    sample_runs: int  # runs the estimate is based on
    source: str  # "dry run" | "recorded"
    calls: float
    prompt_tokens: float
    cached_tokens: float
    completion_tokens: float  # reasoning included, as providers count and bill them
    reasoning_tokens: float
    cost_usd: float | None  # None: the model has no price (unpriced), never 0
    price: Price | None
    reasoning_basis: str  # where the reasoning tokens come from
    latency_s: float  # one call's latency (assumed, or the recorded mean)
    critical_path_s: float  # one run's calls made one after another
    concurrency: int
    rpm: float | None
    tpm: float | None
    wall_s: float  # these runs alone, at the model's limits
    wall_bound: str  # which bound sets wall_s
    per_run: dict[str, float] = field(default_factory=dict)  # calls and tokens of one run

    @property
    def tokens(self) -> float:
        return self.prompt_tokens + self.completion_tokens

    @property
    def priced(self) -> bool:
        return self.price is not None or self.model == SCRIPTED

    def as_dict(self) -> dict[str, Any]:
        d = asdict(self)
        d["price"] = None if self.price is None else self.price.model_dump(mode="json")
        return d


# --- the condition's models ---------------------------------------------------------------------
def _llm_configs(cond: Condition) -> dict[str, ModelConfig]:
    """Config name -> config, for the models the condition's LLM workers use."""
    from mbb.agents.backends import NEGOTIATORS, SOLVERS

    return {
        s.model: cond.models[s.model]
        for s in cond.worker_specs()
        if s.model in cond.models
        and (NEGOTIATORS[s.negotiator].needs_model or SOLVERS[s.solver].needs_model)
    }


def _with_model(cond: Condition, name: str | None) -> Condition:
    if name is None:
        return cond
    from mbb.batch.build import load_params
    from mbb.batch.runs import with_model
    from mbb.params import deep_merge

    return load_params(deep_merge(cond.model_dump(mode="json"), with_model(cond, name)))


def _loopback(cond: Condition, urls: Mapping[str | None, str]) -> Condition:
    """The condition with each model config pointed at the loopback endpoint of its preset (no
    key, no cache, no spend cap: a dry run is free and must not stop early); presets,
    protocols, efforts and sampling stay what they are."""
    from mbb.batch.build import load_params

    data = cond.model_dump(mode="json")
    fallback = next(iter(urls.values()))
    for m in data["models"].values():
        url = urls.get(m.get("preset"), fallback)
        m.update(base_url=url, api_key_env=None, max_retries=1, timeout_s=60.0)
    data["llm"]["cache"] = "off"
    for cap in ("max_cost_usd", "max_tokens_total"):
        data["llm"].pop(cap, None)
    return load_params(data)


# --- which conditions send the same requests -----------------------------------------------------
# what only says where and how fast a model is reached, what it costs, or how it is named
_NOT_IN_REQUESTS = frozenset(
    {"model", "base_url", "api_key_env", "concurrency", "rpm", "tpm", "timeout_s", "max_retries"}
)


def request_signature(cond: Condition) -> str:
    """What decides the requests a condition's runs send and the answers' token counts: its
    parameters without its name, prices, spend caps and cache, each LLM worker's model config
    without endpoint, name and limits but with the reasoning effort its calls run at. Two
    conditions with the same signature (a study's cells of one condition on models of one
    preset) have the same dry run, so `estimate` dry-runs one of them and prices the calls
    for each (mbb's choice: a study of 8 models x 9 conditions needs a dry run per condition
    and preset, not per cell)."""
    from mbb.agents.backends import NEGOTIATORS, SOLVERS
    from mbb.core.nested import comparable_params

    data = comparable_params(cond.model_dump(mode="json"))
    for key in ("name", "description", "models", "prices", "llm", "workers"):
        data.pop(key, None)
    data["llm"] = {
        k: v
        for k, v in cond.llm.model_dump(mode="json").items()
        if k not in ("cache", "cache_file", "max_cost_usd", "max_tokens_total")
    }
    workers = cond.workers.model_dump(mode="json")
    workers.pop("model", None)
    for seat in (workers.get("overrides") or {}).values():
        if isinstance(seat, dict):
            seat.pop("model", None)
    specs = []
    for spec in cond.worker_specs():
        shaped = None
        cfg = cond.models.get(spec.model) if spec.model is not None else None
        if cfg is not None and (
            NEGOTIATORS[spec.negotiator].needs_model or SOLVERS[spec.solver].needs_model
        ):
            shaped = {
                k: v for k, v in cfg.model_dump(mode="json").items() if k not in _NOT_IN_REQUESTS
            }
            shaped["effort"] = presets.effort_of(cfg.preset, cfg.model, cfg.reasoning_effort)
        specs.append({"id": spec.id, "model": shaped})
    data["workers"] = {**workers, "specs": specs}
    return json.dumps(data, sort_keys=True, default=str)


# --- the dry run ----------------------------------------------------------------------------------
def _union_s(intervals: Sequence[tuple[float, float]]) -> float:
    total, end = 0.0, -math.inf
    for a, b in sorted(intervals):
        if b > end:
            total += b - max(a, end)
            end = b
    return total


def emulated_calls(
    cond: Condition,
    seeds: Sequence[int],
    *,
    reasoning_tokens: Mapping[str, int] | None = None,
    spread: float = 0.0,
) -> tuple[Any, float]:
    """The llm_calls table of `seeds` of `cond` run against loopback endpoints emulating each
    model's preset, and the calls one run makes one after another (its critical path, in
    calls). The dry run of `estimate`; with another seeds and a `spread` of the reasoning
    tokens per call (`ProviderEmulator.spread`) it stands for the runs themselves in tests and
    `bench/bench_estimate.py`. Raises EstimateError on a failed call or run."""
    import polars as pl

    from mbb.batch.build import run_condition_async
    from mbb.core.aio import run_coroutine
    from mbb.core.tables import tables_from_log
    from mbb.llm.cache import LlmCache
    from mbb.llm.client import LlmClient
    from mbb.testing.emulate import ProviderEmulator
    from mbb.testing.testserver import FakeOpenAIServer, declaring_responder

    used = _llm_configs(cond)
    names: dict[str | None, set[str]] = {}
    for cfg in cond.models.values():
        names.setdefault(cfg.preset, set()).add(cfg.model)
    table = {**presets.REASONING_TOKENS, **(reasoning_tokens or {})}
    emulators = {
        p: ProviderEmulator(
            p, declaring_responder, reasoning_tokens=table, spread=spread, latency_s=STEP_S
        )
        for p in names
    }
    parts: list[Any] = []
    with contextlib.ExitStack() as stack:
        servers = {
            p: stack.enter_context(FakeOpenAIServer(e, models=tuple(sorted(names[p]))))
            for p, e in emulators.items()
        }
        dry = _loopback(cond, {p: s.url for p, s in servers.items()})
        results: list[Any] = []

        async def go() -> None:
            client, cache = LlmClient(prices=dry.prices), LlmCache(None, "off")
            try:
                for s in seeds:
                    results.append(await run_condition_async(dry, s, None, llm=(client, cache)))
            finally:
                await client.aclose()
                cache.close()

        try:
            run_coroutine(go)
        except Exception as exc:
            raise EstimateError(
                f"dry run of {cond.name} (seed {seeds[len(results)]}) failed: "
                f"{type(exc).__name__}: {exc}"
            ) from None
        for r in results:
            calls = tables_from_log(r.log)["llm_calls"]
            failed = calls.filter(pl.col("error").is_not_null())
            if failed.height:
                first = failed.row(0, named=True)
                who = _config_of(cond, first["worker"], first["model"], used) or first["model"]
                preset = used[who].preset if who in used else None
                raise EstimateError(
                    f"dry run of {cond.name} (seed {r.seed}): {failed.height} of {calls.height} "
                    f"call(s) failed; model {who!r} ({first['model']}, preset {preset}) at its "
                    f"emulated endpoint: {first['error']}"
                )
            parts.append(calls)
    calls = pl.concat(parts, how="diagonal_relaxed")
    if calls.is_empty():
        raise EstimateError(
            f"dry run of {cond.name}: its LLM workers made no call (models: "
            f"{', '.join(sorted(used))}); nothing to scale"
        )
    waits = [w for e in emulators.values() for w in e.waits()]
    mean_wait = sum(b - a for a, b in waits) / len(waits)
    steps = _union_s(waits) / mean_wait / len(seeds)
    return calls, steps


def _config_of(
    cond: Condition, worker: str | None, model: str, used: Mapping[str, ModelConfig]
) -> str | None:
    """The config name a call was made with: its worker's, else the first with its model."""
    by_worker = {s.id: s.model for s in cond.worker_specs() if s.model in used}
    if worker in by_worker:
        return by_worker[worker]
    return next((k for k, c in used.items() if c.model == model), None)


# --- recorded runs -------------------------------------------------------------------------
def _recorded_logs(dirs: Sequence[str | Path]) -> list[tuple[Path, list[str]]]:
    """The finished, valid runs under `dirs` (`mbb.analysis.runs.run_status`, as every analysis
    takes them; run folders that are links are not followed), each as its log's path and its
    checked lines (read once). The others are left out, said on stderr: a run cut short scaled
    to a study under-counts its calls, silently."""
    import sys
    from collections import defaultdict

    from mbb.analysis.runs import checked_log, find_run_dirs
    from mbb.core.errors import for_terminal

    found = find_run_dirs(dirs)
    out: list[tuple[Path, list[str]]] = []
    left_out: dict[str, list[str]] = defaultdict(list)
    for d in found:
        ok, why, lines = checked_log(d)
        if ok:
            out.append((d / "events.jsonl", lines))
        else:
            left_out[why or "not finished"].append(d.name)
    for why, names in left_out.items():
        print(
            for_terminal(
                f"warning: left out {len(names)} recorded run(s): {why} (e.g. {names[0]})"
            ),
            file=sys.stderr,
        )
    if not out:
        raise FileNotFoundError(
            f"no finished recorded runs (events.jsonl) under {', '.join(map(str, dirs))}"
        )
    return out


def _recorded_path_s(logs: Sequence[tuple[Path, list[str]]]) -> float | None:
    """Mean over runs of the time some network call was in flight (the union of each call's
    [wall - latency, wall]); None when no call reached the network (all from the cache)."""
    per_run = []
    for _path, lines in logs:
        spans = []
        for line in lines:
            if '"llm_call"' not in line:
                continue
            e = json.loads(line)
            if e.get("kind") == "llm_call" and not e.get("cache_hit") and e.get("latency_s"):
                spans.append((e["wall"] - e["latency_s"], e["wall"]))
        if spans:
            per_run.append(_union_s(spans))
    return sum(per_run) / len(per_run) if per_run else None


def reasoning_from(dirs: Sequence[str | Path]) -> dict[str, int]:
    """Mean reasoning tokens per call of each model (the name sent to the endpoint) in recorded
    runs, over its calls that reasoned: pass it as `reasoning_tokens=` to calibrate a dry run."""
    import polars as pl

    from mbb.core.tables import tables_from_checked

    calls = tables_from_checked(_recorded_logs(dirs))["llm_calls"]
    if calls.is_empty():
        return {}
    means = (
        calls.filter(pl.col("reasoning_tokens") > 0)
        .group_by("model")
        .agg(pl.col("reasoning_tokens").mean().alias("r"))
    )
    return {r["model"]: round(r["r"]) for r in means.iter_rows(named=True)}


# --- rows ---------------------------------------------------------------------------------------
def _row(
    cond: Condition,
    name: str,
    calls: Any,
    *,
    runs: int,
    sample: int,
    source: str,
    steps: float | None,
    path_s: float | None,
    limits: Limits,
    latency: Latency,
    reasoning_tokens: Mapping[str, int] | None,
) -> EstimateRow:
    import polars as pl

    cfg = cond.models.get(name)
    model = cfg.model if cfg is not None else name
    preset = cfg.preset if cfg is not None else None
    k = runs / max(1, sample)
    n = float(calls.height)
    tot = {c: float(calls[c].sum()) for c in ("prompt_tokens", "cached_tokens")}
    tot |= {c: float(calls[c].sum()) for c in ("completion_tokens", "reasoning_tokens")}
    price = cond.prices.get(model)
    cost = None
    if price is not None:
        cost = k * sum(
            price.cost(r["prompt_tokens"], r["completion_tokens"], r["cached_tokens"])
            for r in calls.iter_rows(named=True)
        )
    effort = presets.effort_of(preset, model, cfg.reasoning_effort) if cfg else None
    if source == "recorded":
        basis = "recorded"
    elif effort is None:
        basis = "does not reason"
    else:
        table = {**presets.REASONING_TOKENS, **(reasoning_tokens or {})}
        per = table.get(model, table.get(effort, 0))
        mine = reasoning_tokens is not None and (
            model in reasoning_tokens or effort in reasoning_tokens
        )
        basis = f"{effort}: {per:,}/call ({'given' if mine else 'mbb assumption'})"
    fresh = calls.filter(~pl.col("cache_hit").fill_null(False)) if source == "recorded" else None
    if fresh is not None and fresh.height and float(fresh["latency_s"].sum()) > 0:
        lat = float(fresh["latency_s"].mean())
    else:
        lat = latency.of(tot["completion_tokens"] / n if n else 0.0)
    critical = path_s if path_s is not None else (steps or 0.0) * lat
    bounds = {
        "one run's sequential calls": critical,
        f"concurrency {limits.concurrency}": n * k * lat / limits.concurrency,
    }
    if limits.rpm:
        bounds[f"{limits.rpm:g} requests/min"] = n * k / limits.rpm * 60
    if limits.tpm:
        bounds[f"{limits.tpm:g} tokens/min"] = (
            (tot["prompt_tokens"] + tot["completion_tokens"]) * k / limits.tpm * 60
        )
    bound = max(bounds, key=lambda b: bounds[b])
    return EstimateRow(
        condition=cond.name,
        model=name,
        endpoint_model=model,
        preset=preset,
        effort=effort,
        runs=runs,
        sample_runs=sample,
        source=source,
        calls=n * k,
        prompt_tokens=tot["prompt_tokens"] * k,
        cached_tokens=tot["cached_tokens"] * k,
        completion_tokens=tot["completion_tokens"] * k,
        reasoning_tokens=tot["reasoning_tokens"] * k,
        cost_usd=cost,
        price=price,
        reasoning_basis=basis,
        latency_s=lat,
        critical_path_s=critical,
        concurrency=limits.concurrency,
        rpm=limits.rpm,
        tpm=limits.tpm,
        wall_s=bounds[bound],
        wall_bound=bound,
        per_run={"calls": n / max(1, sample), **{c: v / max(1, sample) for c, v in tot.items()}},
    )


def _scripted(cond: Condition, runs: int, sample: int, source: str) -> EstimateRow:
    """A condition without LLM workers: it really makes no call (zero is the truth here)."""
    return EstimateRow(
        condition=cond.name, model=SCRIPTED, endpoint_model=None, preset=None, effort=None,
        runs=runs, sample_runs=sample, source=source, calls=0.0, prompt_tokens=0.0,
        cached_tokens=0.0, completion_tokens=0.0, reasoning_tokens=0.0, cost_usd=0.0,
        price=None, reasoning_basis="no LLM worker", latency_s=0.0, critical_path_s=0.0,
        concurrency=1, rpm=None, tpm=None, wall_s=0.0, wall_bound="no LLM call",
    )  # fmt: skip


def estimate(
    conditions: Condition | Sequence[Condition],
    *,
    models: Sequence[str] | None = None,
    runs: int | Mapping[str, int] = 1,
    dry_runs: int = 2,
    recorded: Sequence[str | Path] | None = None,
    reasoning_tokens: Mapping[str, int] | None = None,
    limits: Mapping[str, Limits] | None = None,
    latency: Latency | Mapping[str, Latency] | None = None,
    progress: Callable[[int, int, str], Any] | None = None,
) -> list[EstimateRow]:
    """One row per (condition, model) for a study before it runs (see the module docstring).

    `conditions`: loaded conditions (`mbb.batch.build.load_params`); `models`: model config
    names, each run as the condition's LLM workers' model (`with_model`; None: the condition's
    own models, one row for each model its workers use); `runs`: runs per condition (or by
    condition name); `dry_runs`: seeds dry-run per condition and model; `recorded`: run folders
    to scale instead of a dry run; `reasoning_tokens`: per call, by effort or model name,
    overriding mbb's assumption; `limits`: by model config name (default: its `concurrency`,
    no rate limit); `latency`: one call's latency model, for all or by config name;
    `progress`: called with (done, total, condition name) before each (condition, model).
    Conditions that send the same requests (`request_signature`) share one dry run.

    Raises `EstimateError` when a dry run cannot stand for the study (a failed call: the
    model, its preset and the endpoint's error), ValueError for an unknown model name."""
    from mbb.agents.backends import uses_llm

    conds = [conditions] if isinstance(conditions, Condition) else list(conditions)
    model_named = bool(reasoning_tokens) and any(
        k not in presets.REASONING_TOKENS for k in (reasoning_tokens or {})
    )
    # every (condition, model) first: an unknown model is refused before any dry run
    plan = [
        (_with_model(c, choice), runs if isinstance(runs, int) else runs[c.name])
        for c in conds
        for choice in ([*models] if models else [None])
    ]
    rows: list[EstimateRow] = []
    dry: dict[str, tuple[Any, float]] = {}  # by request signature: one dry run stands for all
    for i, (cond, n) in enumerate(plan):
        if progress is not None:
            progress(i, len(plan), cond.name)
        if recorded is not None:
            rows += _estimate_recorded(cond, n, recorded, limits, latency)
        elif not uses_llm(cond):
            rows.append(_scripted(cond, n, dry_runs, "dry run"))
        else:
            key = request_signature(cond)
            if model_named:  # a reasoning-token override by model name: its own dry run
                key += json.dumps(sorted(m.model for m in _llm_configs(cond).values()))
            if key not in dry:
                seeds = range(cond.seed, cond.seed + dry_runs)
                dry[key] = emulated_calls(cond, seeds, reasoning_tokens=reasoning_tokens)
            calls, steps = dry[key]
            rows += _rows_by_config(
                cond, calls, n, dry_runs, "dry run", steps, None, limits, latency, reasoning_tokens
            )
    if progress is not None:
        progress(len(plan), len(plan), "")
    return rows


def _rows_by_config(
    cond: Condition,
    calls: Any,
    runs: int,
    sample: int,
    source: str,
    steps: float | None,
    path_s: float | None,
    limits: Mapping[str, Limits] | None,
    latency: Latency | Mapping[str, Latency] | None,
    reasoning_tokens: Mapping[str, int] | None,
) -> list[EstimateRow]:
    import polars as pl

    used = _llm_configs(cond)
    # a dry run's calls belong to their worker's config; recorded runs may have seated other
    # models: theirs are matched by the model name sent
    by_worker = source == "dry run"
    keyed = calls.with_columns(
        pl.struct("worker", "model")
        .map_elements(
            lambda r: (
                _config_of(cond, r["worker"] if by_worker else None, r["model"], used) or r["model"]
            ),
            return_dtype=pl.String,
        )
        .alias("_config")
    )
    rows = []
    for name in sorted(set(keyed["_config"].to_list())):
        cfg = cond.models.get(name)
        lim = (limits or {}).get(name) or (
            Limits(cfg.concurrency, cfg.rpm, cfg.tpm) if cfg is not None else Limits(8)
        )
        lat = latency.get(name) if isinstance(latency, Mapping) else latency
        rows.append(
            _row(
                cond,
                name,
                keyed.filter(pl.col("_config") == name),
                runs=runs,
                sample=sample,
                source=source,
                steps=steps,
                path_s=path_s,
                limits=lim,
                latency=lat or Latency(),
                reasoning_tokens=reasoning_tokens,
            )
        )
    return rows


def _estimate_recorded(
    cond: Condition,
    runs: int,
    dirs: Sequence[str | Path],
    limits: Mapping[str, Limits] | None,
    latency: Latency | Mapping[str, Latency] | None,
) -> list[EstimateRow]:
    from mbb.core.tables import tables_from_checked

    logs = _recorded_logs(dirs)
    calls = tables_from_checked(logs)["llm_calls"]
    if calls.is_empty():
        return [_scripted(cond, runs, len(logs), "recorded")]
    path_s = _recorded_path_s(logs)
    return _rows_by_config(
        cond, calls, runs, len(logs), "recorded", None, path_s, limits, latency, None
    )


# --- totals and the printed table -------------------------------------------------------------
def totals(rows: Sequence[EstimateRow]) -> list[EstimateRow]:
    """One row per model over all conditions (condition "all"): the study's use of that
    model's endpoint, its runs at once: wall time is the largest of the longest critical path
    and the endpoint's concurrency and rate bounds over all its calls."""
    out = []
    for name in sorted({r.model for r in rows}):
        mine = [r for r in rows if r.model == name]
        first = mine[0]
        calls = sum(r.calls for r in mine)
        busy = sum(r.calls * r.latency_s for r in mine)
        toks = sum(r.tokens for r in mine)
        bounds = {"one run's sequential calls": max(r.critical_path_s for r in mine)}
        if first.concurrency and calls:
            bounds[f"concurrency {first.concurrency}"] = busy / first.concurrency
        if first.rpm:
            bounds[f"{first.rpm:g} requests/min"] = calls / first.rpm * 60
        if first.tpm:
            bounds[f"{first.tpm:g} tokens/min"] = toks / first.tpm * 60
        bound = max(bounds, key=lambda b: bounds[b])
        costs = [r.cost_usd for r in mine]
        out.append(
            EstimateRow(
                condition="all",
                model=name,
                endpoint_model=first.endpoint_model,
                preset=first.preset,
                effort=first.effort if all(r.effort == first.effort for r in mine) else "mixed",
                runs=sum(r.runs for r in mine),
                sample_runs=sum(r.sample_runs for r in mine),
                source=first.source,
                calls=calls,
                prompt_tokens=sum(r.prompt_tokens for r in mine),
                cached_tokens=sum(r.cached_tokens for r in mine),
                completion_tokens=sum(r.completion_tokens for r in mine),
                reasoning_tokens=sum(r.reasoning_tokens for r in mine),
                cost_usd=None if any(c is None for c in costs) else sum(c or 0.0 for c in costs),
                price=first.price,
                reasoning_basis=first.reasoning_basis,
                latency_s=busy / calls if calls else 0.0,
                critical_path_s=bounds["one run's sequential calls"],
                concurrency=first.concurrency,
                rpm=first.rpm,
                tpm=first.tpm,
                wall_s=bounds[bound],
                wall_bound=bound,
            )
        )
    return out


def _duration(s: float) -> str:
    if s < 60:
        return f"{s:.0f} s"
    if s < 3600:
        return f"{s / 60:.0f} min"
    return f"{s / 3600:.1f} h"


def _usd(row: EstimateRow) -> str:
    return "unpriced" if row.cost_usd is None else f"${row.cost_usd:,.4f}"


def format_rows(rows: Sequence[EstimateRow]) -> list[str]:
    """The table `mbb estimate` prints: a line per row, per-model totals when there are
    several conditions, the study's wall time, the prices used and what is assumed."""
    both = list(rows)
    if len({r.condition for r in rows}) > 1:
        both += totals(rows)
    hows = [f"{r.preset or '-'}/{r.effort or '-'}" for r in both]
    wc = max([9, *(len(r.condition) for r in both)])
    wm = max([5, *(len(r.model) for r in both)])
    wh = max([13, *map(len, hows)])
    out = [
        f"{'condition':{wc}s} {'model':{wm}s} {'preset/effort':{wh}s} {'runs':>5s} "
        f"{'calls':>9s} {'prompt M':>9s} {'cached':>6s} {'compl. M':>9s} {'reason. M':>9s} "
        f"{'wall':>8s} {'cost':>12s}"
    ]
    for r, how in zip(both, hows, strict=True):
        out.append(
            f"{r.condition:{wc}s} {r.model:{wm}s} {how:{wh}s} {r.runs:5d} {r.calls:9,.0f} "
            f"{r.prompt_tokens / 1e6:9.3f} {r.cached_tokens / max(1.0, r.prompt_tokens):6.1%} "
            f"{r.completion_tokens / 1e6:9.3f} {r.reasoning_tokens / 1e6:9.3f} "
            f"{_duration(r.wall_s):>8s} {_usd(r):>12s}"
        )
    llm = [r for r in rows if r.model != SCRIPTED]
    if llm:
        study = max(totals(llm), key=lambda r: r.wall_s)
        out.append(
            f"wall time of the study: {_duration(study.wall_s)} (model {study.model}: "
            f"{study.wall_bound}; runs at once, {study.latency_s:.1f} s a call)"
        )
        samples = sorted({(r.source, r.sample_runs) for r in llm})
        out.append(
            "scaled from: "
            + ", ".join(f"{src} of {n} run(s)" for src, n in samples)
            + " per condition and model; completion tokens include reasoning"
        )
    priced: set[str] = set()
    reasons: set[tuple[str, str]] = set()
    for r in llm:
        if r.endpoint_model is None:
            continue
        if r.endpoint_model not in priced:
            priced.add(r.endpoint_model)
            if r.price is None:
                out.append(f"price {r.endpoint_model}: none given: unpriced, cost unknown")
            else:
                p = r.price
                cached = "" if p.cached_prompt is None else f", cached ${p.cached_prompt:g}"
                out.append(
                    f"price {r.endpoint_model}: ${p.prompt:g} prompt, ${p.completion:g} "
                    f"completion{cached} per 1M tokens ({p.provenance()})"
                )
        if r.source == "dry run" and (r.endpoint_model, r.reasoning_basis) not in reasons:
            reasons.add((r.endpoint_model, r.reasoning_basis))
            out.append(f"reasoning {r.endpoint_model}: {r.reasoning_basis}")
    return out
