"""Benchmark of the LLM layer against the local scripted server (no network, no model).

Measures, with the server answering after a fixed latency:
  1. wall time of one 5-worker declaration phase, gathered (as the arena does) vs sequential;
  2. harness overhead per call (p50): full `LlmNegotiator.declare` (prompt, schema, openai client,
     HTTP, parse, validation, event) and the bare openai client call, both at 0 ms server latency;
  3. replay speed-up: the same phase served from the sqlite cache vs live.

Usage: python bench/bench_llm.py [--latency-ms 100] [--repeats 5]
       python bench/bench_llm.py --endpoint http://127.0.0.1:8080/v1 --model smollm2 \
           [--structured json_object_schema] [--key-env NAME]
The second form runs one round (3 candidates: declare, converse, vote) against a real endpoint
and reports how many answers were valid at once, repaired, or defaulted, with tokens and latency.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import statistics
import sys
import tempfile
import time
import zlib
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

import openai  # noqa: E402

from mbb.agents.llm_negotiator import make_llm_negotiator  # noqa: E402
from mbb.events import EventLog  # noqa: E402
from mbb.llm.cache import LlmCache  # noqa: E402
from mbb.llm.client import LlmClient  # noqa: E402
from mbb.llm.config import ModelConfig  # noqa: E402
from mbb.llm.testserver import FakeOpenAIServer  # noqa: E402
from tests.llm.views import good_responder, make_view  # noqa: E402

WORKERS = ["W1", "W2", "W3", "W4", "W5"]


def _config(server: FakeOpenAIServer) -> ModelConfig:
    return ModelConfig(model="test-model", base_url=server.url, api_key_env=None, concurrency=16)


async def _phase(
    server: FakeOpenAIServer,
    client: LlmClient,
    *,
    concurrent: bool,
    cache: LlmCache | None = None,
    tag: str = "",
) -> float:
    """One declaration phase of 5 workers sharing one client (as in a run)."""
    log = EventLog("bench")
    negs = [
        make_llm_negotiator(w, config=_config(server), llm=client, emit=log.emit, cache=cache)
        for w in WORKERS
    ]
    views = {n.worker: make_view(n.worker) for n in negs}
    if tag:  # distinct prompts per repeat so live phases never hit the cache
        for v in views.values():
            v.now_s += zlib.crc32(tag.encode()) % 1000
    t0 = time.perf_counter()
    if concurrent:
        await asyncio.gather(*(n.declare(views[n.worker]) for n in negs))
    else:
        for n in negs:
            await n.declare(views[n.worker])
    return time.perf_counter() - t0


async def _per_call_ours(server: FakeOpenAIServer, n: int) -> list[float]:
    client = LlmClient()
    neg = make_llm_negotiator("W1", config=_config(server), llm=client, emit=None, cache=None)
    view = make_view()
    out = []
    for _ in range(n):
        t0 = time.perf_counter()
        await neg.declare(view)
        out.append(time.perf_counter() - t0)
    await client.aclose()
    return out


async def _per_call_raw(server: FakeOpenAIServer, n: int, body: dict) -> list[float]:
    client = openai.AsyncOpenAI(base_url=server.url, api_key="x", max_retries=0)
    out = []
    for _ in range(n):
        t0 = time.perf_counter()
        await client.chat.completions.create(**body)
        out.append(time.perf_counter() - t0)
    await client.close()
    return out


async def _phases(server: FakeOpenAIServer, repeats: int) -> tuple:
    client = LlmClient()  # shared and warm, like the arena's one client per run
    await _phase(server, client, concurrent=True, tag="warmup")
    conc = [await _phase(server, client, concurrent=True, tag=f"c{i}") for i in range(repeats)]
    seq = [await _phase(server, client, concurrent=False, tag=f"s{i}") for i in range(repeats)]
    overlap = server.max_in_flight
    live, replay = [], []
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "cache.sqlite"
        for i in range(repeats):
            rw = LlmCache(path, "read_write")
            live.append(await _phase(server, client, concurrent=True, cache=rw, tag=f"r{i}"))
            rw.close()
        before = len(server.requests)
        for i in range(repeats):
            rp = LlmCache(path, "replay")
            replay.append(await _phase(server, client, concurrent=True, cache=rp, tag=f"r{i}"))
            rp.close()
        replay_requests = len(server.requests) - before
    await client.aclose()
    return conc, seq, live, replay, overlap, replay_requests


async def _live_round(cfg: ModelConfig) -> None:
    log = EventLog("bench-live")
    client = LlmClient()
    negs = [
        make_llm_negotiator(w, config=cfg, llm=client, emit=log.emit, cache=None)
        for w in ["W1", "W2", "W3"]
    ]
    t0 = time.perf_counter()
    await asyncio.gather(*(n.declare(make_view(n.worker)) for n in negs))
    await asyncio.gather(*(n.converse(make_view(n.worker, declared=True)) for n in negs))
    await asyncio.gather(*(n.vote(make_view(n.worker, declared=True)) for n in negs))
    wall = time.perf_counter() - t0
    await client.aclose()
    calls = [json.loads(x) for x in log.by_kind["llm_call"]]
    invalid = [json.loads(x) for x in log.by_kind["invalid_action"]]
    repaired = {(c["worker"], c["phase"]) for c in calls if c["repair"]}
    print(f"live round against {cfg.base_url} ({cfg.model}, {cfg.structured}): {wall:.1f} s")
    print(f"actions 9, valid first time {9 - len(repaired)}, repaired then valid "
          f"{len(repaired) - len(invalid)}, defaulted {len(invalid)}")  # fmt: skip
    lat = [c["latency_s"] for c in calls]
    print(f"calls {len(calls)}, latency p50 {statistics.median(lat):.2f} s, prompt tokens p50 "
          f"{statistics.median(c['prompt_tokens'] for c in calls):.0f}, completion tokens total "
          f"{sum(c['completion_tokens'] for c in calls)}")  # fmt: skip
    for inv in invalid:
        print(f"  default {inv['worker']} {inv['phase']}: {inv['detail'][:160]}")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--endpoint", help="base_url of a real OpenAI-compatible endpoint")
    ap.add_argument("--model", default="smollm2")
    ap.add_argument("--structured", default="json_object_schema")
    ap.add_argument("--key-env", default=None, help="NAME of the env var holding the key")
    ap.add_argument("--latency-ms", type=float, default=100.0)
    ap.add_argument("--repeats", type=int, default=5)
    ap.add_argument("--calls", type=int, default=200, help="calls for the per-call p50")
    args = ap.parse_args()
    if args.endpoint:
        cfg = ModelConfig(
            model=args.model,
            base_url=args.endpoint,
            api_key_env=args.key_env,
            structured=args.structured,
            temperature=0.7,
            max_tokens=400,
            timeout_s=600,
            concurrency=2,
        )
        asyncio.run(_live_round(cfg))
        return
    lat = args.latency_ms / 1000

    rows: list[tuple[str, str]] = []
    with FakeOpenAIServer(good_responder, api_key=None, delay_s=lat) as server:
        conc, seq, live, replay, overlap, replay_requests = asyncio.run(
            _phases(server, args.repeats)
        )

    with FakeOpenAIServer(good_responder, api_key=None, delay_s=0.0) as server:
        asyncio.run(_per_call_ours(server, 10))
        ours = asyncio.run(_per_call_ours(server, args.calls))
        body = dict(server.completions[-1].body or {})
        raw = asyncio.run(_per_call_raw(server, args.calls, body))

    med = statistics.median
    p50_ours, p50_raw = med(ours) * 1e3, med(raw) * 1e3
    rows += [
        ("server latency per call", f"{args.latency_ms:.0f} ms"),
        ("5-worker phase, gathered (median)", f"{med(conc) * 1e3:.0f} ms"),
        ("5-worker phase, sequential (median)", f"{med(seq) * 1e3:.0f} ms"),
        ("  speed-up gathered vs sequential", f"{med(seq) / med(conc):.1f}x"),
        ("  max requests in flight (server)", str(overlap)),
        ("per call p50, LlmNegotiator.declare @0 ms", f"{p50_ours:.2f} ms"),
        ("per call p50, bare openai client @0 ms", f"{p50_raw:.2f} ms"),
        ("  harness overhead over bare client", f"{p50_ours - p50_raw:.2f} ms"),
        ("5-worker phase, live via cache (median)", f"{med(live) * 1e3:.1f} ms"),
        ("5-worker phase, replay (median)", f"{med(replay) * 1e3:.2f} ms"),
        ("  replay speed-up over live", f"{med(live) / med(replay):.0f}x"),
        ("  requests made during replay", str(replay_requests)),
    ]
    width = max(len(k) for k, _ in rows)
    print(f"{'measure':<{width}}  value")
    print(f"{'-' * width}  -----")
    for k, v in rows:
        print(f"{k:<{width}}  {v}")


if __name__ == "__main__":
    main()
