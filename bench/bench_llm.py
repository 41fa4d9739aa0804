"""Benchmark of the LLM layer against the local scripted server (no network, no model).

Measures, with the server answering after a fixed latency:
  1. wall time of one 5-worker declaration phase, gathered (as the arena does) vs sequential;
  2. harness overhead per call (p50): full `LlmNegotiator.declare` (prompt, schema, openai client,
     HTTP, parse, validation, event) and the bare openai client sending the same body (its raw
     `post`, as the harness does; `chat.completions.create` shown too), at 0 ms server latency;
  3. replay speed-up: the same phase served from the sqlite cache vs live.

The server runs in a child process, as a real endpoint would: in the benchmark's own process its
Python work (HTTP parsing, JSON, the responder) would hold the GIL the client needs and be
charged to the client's latency. `--in-process-server` measures that layout instead.

Usage: python bench/bench_llm.py [--latency-ms 100] [--repeats 5] [--in-process-server]
       python bench/bench_llm.py --endpoint http://127.0.0.1:8080/v1 --model smollm2 \
           [--structured json_object_schema] [--key-env NAME]
The second form runs one round (3 candidates: declare, converse, vote) against a real endpoint
and reports how many answers were valid at once, repaired, or defaulted, with tokens and latency.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import multiprocessing
import statistics
import sys
import tempfile
import time
import zlib
from collections.abc import Iterator
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

import openai  # noqa: E402

from mbb.agents.negotiator import make_llm_negotiator  # noqa: E402
from mbb.core.eventlog import EventLog  # noqa: E402
from mbb.llm.cache import LlmCache  # noqa: E402
from mbb.llm.client import LlmClient  # noqa: E402
from mbb.llm.config import ModelConfig  # noqa: E402
from mbb.testing.testserver import FakeOpenAIServer  # noqa: E402
from tests.llm.views import good_responder, make_view  # noqa: E402

WORKERS = ["W1", "W2", "W3", "W4", "W5"]


class _Server:
    """What the bench needs of a scripted server, wherever it runs: its URL and its counters."""

    def __init__(self, url: str, stats: Any) -> None:
        self.url = url
        self._stats = stats

    def stats(self) -> dict[str, Any]:
        """requests (count), max_in_flight, last_body (of the last completion request)."""
        return self._stats()


def _stats_of(server: _Server) -> dict[str, Any]:
    done = server.completions
    return {
        "requests": len(server.requests),
        "max_in_flight": server.max_in_flight,
        "last_body": done[-1].body if done else None,
    }


def _serve(conn: Any, delay_s: float) -> None:
    """Child process: a FakeOpenAIServer answering stats requests over a pipe until "stop"."""
    with FakeOpenAIServer(good_responder, api_key=None, delay_s=delay_s) as server:
        conn.send(server.url)
        while conn.recv() != "stop":
            conn.send(_stats_of(server))


@contextlib.contextmanager
def _server(delay_s: float, *, in_process: bool) -> Iterator[_Server]:
    if in_process:
        with FakeOpenAIServer(good_responder, api_key=None, delay_s=delay_s) as server:
            yield _Server(server.url, lambda: _stats_of(server))
        return
    ctx = multiprocessing.get_context("spawn")  # no forked copy of this process's threads
    conn, child = ctx.Pipe()
    proc = ctx.Process(target=_serve, args=(child, delay_s), daemon=True)
    proc.start()
    child.close()  # the child's end lives in the child only: its exit is then EOF here
    try:
        if not conn.poll(120):
            raise RuntimeError("the scripted server process did not start within 120 s")
        url = conn.recv()  # EOFError if the child died while starting

        def stats() -> dict[str, Any]:
            conn.send("stats")
            return conn.recv()

        yield _Server(url, stats)
        conn.send("stop")
        proc.join(10)
    finally:
        if proc.is_alive():
            proc.terminate()


def _config(server: _Server) -> ModelConfig:
    return ModelConfig(model="test-model", base_url=server.url, api_key_env=None, concurrency=16)


async def _phase(
    server: _Server,
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


async def _per_call(server: _Server, n: int) -> dict[str, list[float]]:
    """Per-call wall times, interleaved call by call so load drifts hit all three alike:
    `LlmNegotiator.declare`, and the bare openai client sending the same body with its raw
    `post` (as LlmClient does) and with `chat.completions.create`."""
    client = LlmClient()
    neg = make_llm_negotiator("W1", config=_config(server), llm=client, emit=None, cache=None)
    view = make_view()
    await neg.declare(view)
    body = dict(server.stats()["last_body"] or {})
    bare = openai.AsyncOpenAI(base_url=server.url, api_key="x", max_retries=0)

    async def post() -> None:
        await bare.post("/chat/completions", body=body, cast_to=object)

    async def create() -> None:  # the SDK's typed method: transforms params against TypedDicts
        await bare.chat.completions.create(**body)

    steps = {"ours": lambda: neg.declare(view), "post": post, "create": create}
    out: dict[str, list[float]] = {k: [] for k in steps}
    for i in range(n + 10):  # the first 10 warm up
        for k, step in steps.items():
            t0 = time.perf_counter()
            await step()
            if i >= 10:
                out[k].append(time.perf_counter() - t0)
    await bare.close()
    await client.aclose()
    return out


async def _phases(server: _Server, repeats: int) -> dict[str, Any]:
    client = LlmClient()  # shared and warm, like the arena's one client per run
    await _phase(server, client, concurrent=True, tag="warmup")
    conc, cpu = [], []
    for i in range(repeats):
        c0 = time.thread_time()
        conc.append(await _phase(server, client, concurrent=True, tag=f"c{i}"))
        cpu.append(time.thread_time() - c0)
    seq = [await _phase(server, client, concurrent=False, tag=f"s{i}") for i in range(repeats)]
    overlap = server.stats()["max_in_flight"]
    live, replay = [], []
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "cache.sqlite"
        for i in range(repeats):
            rw = LlmCache(path, "read_write")
            live.append(await _phase(server, client, concurrent=True, cache=rw, tag=f"r{i}"))
            rw.close()
        before = server.stats()["requests"]
        for i in range(repeats):
            rp = LlmCache(path, "replay")
            replay.append(await _phase(server, client, concurrent=True, cache=rp, tag=f"r{i}"))
            rp.close()
        replay_requests = server.stats()["requests"] - before
    await client.aclose()
    return {
        "conc": conc,
        "cpu": cpu,
        "seq": seq,
        "live": live,
        "replay": replay,
        "overlap": overlap,
        "replay_requests": replay_requests,
    }


def _ms(xs: list[float], digits: int = 0) -> str:
    """Median and range, in ms."""
    return (
        f"{statistics.median(xs) * 1e3:.{digits}f} ms "
        f"({min(xs) * 1e3:.{digits}f}-{max(xs) * 1e3:.{digits}f})"
    )


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
    ap.add_argument("--repeats", type=int, default=9)
    ap.add_argument("--calls", type=int, default=200, help="calls for the per-call p50")
    ap.add_argument(
        "--in-process-server",
        action="store_true",
        help="run the scripted server in this process (it then competes with the client for "
        "the GIL)",
    )
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

    inproc = args.in_process_server
    with _server(lat, in_process=inproc) as server:
        ph = asyncio.run(_phases(server, args.repeats))
    with _server(0.0, in_process=inproc) as server:
        per = asyncio.run(_per_call(server, args.calls))

    med = statistics.median
    conc, seq, live, replay = ph["conc"], ph["seq"], ph["live"], ph["replay"]
    p50 = {k: med(v) * 1e3 for k, v in per.items()}
    rows = [
        ("server", "in this process" if inproc else "child process"),
        ("server latency per call", f"{args.latency_ms:.0f} ms"),
        ("5-worker phase, gathered (median, range)", _ms(conc)),
        ("  / one call's latency", f"{med(conc) / lat:.2f}x"),
        ("  client CPU per gathered phase (median)", f"{med(ph['cpu']) * 1e3:.1f} ms"),
        ("5-worker phase, sequential (median, range)", _ms(seq)),
        ("  speed-up gathered vs sequential", f"{med(seq) / med(conc):.1f}x"),
        ("  max requests in flight (server)", str(ph["overlap"])),
        ("per call p50, LlmNegotiator.declare @0 ms", f"{p50['ours']:.2f} ms"),
        ("per call p50, bare openai client post @0 ms", f"{p50['post']:.2f} ms"),
        ("per call p50, bare chat.completions.create @0 ms", f"{p50['create']:.2f} ms"),
        ("  harness overhead over bare client post", f"{p50['ours'] - p50['post']:.2f} ms"),
        ("5-worker phase, live via cache (median, range)", _ms(live, 1)),
        ("5-worker phase, replay (median, range)", _ms(replay, 2)),
        ("  replay speed-up over live", f"{med(live) / med(replay):.0f}x"),
        ("  requests made during replay", str(ph["replay_requests"])),
    ]
    width = max(len(k) for k, _ in rows)
    print(f"{'measure':<{width}}  value")
    print(f"{'-' * width}  -----")
    for k, v in rows:
        print(f"{k:<{width}}  {v}")


if __name__ == "__main__":
    main()
