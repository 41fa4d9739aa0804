"""Benchmark of `mbb study`: many endpoints at once, each within its own limits.

A study of M models x 2 conditions x S seeds (default 8 x 2 x 4 = 64 runs, LLM negotiators,
short runs) against loopback endpoints that answer after a fixed latency (default 0.4 s), each
model with its own limits (concurrency, requests per minute). The endpoints are served by one
stub server in a child process (a real endpoint is another process: in this one its Python
work would take the GIL the runs need).

What it reports: the study's wall time W against the **slowest endpoint's own critical path**
B: the wall time of that endpoint's runs (every condition and seed) made on their own, with
nothing else calling anything, at its own limits and latency. The target is W / B <= 1.3: many
endpoints at once cost at most 30 % more than the slowest of them alone (the arena, the event
loop and the shared client add little). Also printed: that endpoint's lower bound, its calls x
latency / concurrency (and a minute per `rpm` requests beyond the first minute), which no
schedule can beat; runs whose phases gather 3 calls at a time cannot pack 4 slots perfectly, so
B sits above it.

Usage: python bench/bench_study.py [--models 8] [--seeds 4] [--latency 0.4]
           [--concurrency 4] [--rpm 400] [--repeats 1]
"""

from __future__ import annotations

import argparse
import json
import multiprocessing
import os
import statistics
import sys
import tempfile
import textwrap
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from mbb.analysis.runs import load_runs  # noqa: E402
from mbb.batch.study import load_study, run_study  # noqa: E402

OVERRIDES = "{subruns: 1, workers: {count: 3}, negotiation: {max_turns: 1}}"
KEY_ENV = "MBB_BENCH_KEY"  # a stand-in key: the endpoints are loopback stubs


def _serve(models: list[str], delay_s: float, ready: Any, stop: Any) -> None:
    """The child process: one stub server answering every model as the openai preset."""
    from mbb.llm.config import ModelConfig
    from mbb.testing.stub import StubRouter
    from mbb.testing.testserver import FakeOpenAIServer

    configs = {m: ModelConfig(model=m, preset="openai", api_key_env=None) for m in models}
    with FakeOpenAIServer(StubRouter(configs), models=tuple(models), delay_s=delay_s) as srv:
        ready.put(srv.url)
        stop.wait()


def _study_file(folder: Path, url: str, models: list[str], seeds: int, args: Any) -> Path:
    slots = "".join(
        f"  {m}: {{model: {m}, preset: openai, base_url: '{url}', api_key_env: {KEY_ENV}, "
        f"concurrency: {args.concurrency}, rpm: {args.rpm}, max_retries: 0, price: unpriced}}\n"
        for m in models
    )
    path = folder / "bench.yaml"
    path.write_text(
        textwrap.dedent(
            f"""\
            name: bench
            out: {folder / "out"}
            conditions: [base, memory_off]
            roles: [negotiators]
            seeds: 0..{seeds - 1}
            overrides: {OVERRIDES}
            notebooks: []
            models:
            """
        )
        + slots
    )
    return path


def one(args: Any) -> dict[str, Any]:
    models = [f"m{i + 1}" for i in range(args.models)]
    ctx = multiprocessing.get_context("spawn")
    ready, stop = ctx.Queue(), ctx.Event()
    server = ctx.Process(target=_serve, args=(models, args.latency, ready, stop), daemon=True)
    server.start()
    try:
        url = ready.get(timeout=60)
        with tempfile.TemporaryDirectory() as tmp:
            folder = Path(tmp)
            study = load_study(_study_file(folder, url, models, args.seeds, args))
            t0 = time.perf_counter()
            out = run_study(study, progress=False, report=False, say=lambda _: None)
            wall = time.perf_counter() - t0
            assert out.completed == study.runs and not out.failed, out.errors
            calls = load_runs([study.out], include_invalid=True)["llm_calls"]
            per_model = dict(calls.group_by("model").len().iter_rows())
            # the slowest endpoint on its own: its runs (every condition and seed) as a study of
            # their own, with nothing else calling anything
            slowest = max(per_model, key=lambda m: per_model[m])
            (folder / "alone").mkdir()
            alone = _study_file(folder / "alone", url, [slowest], args.seeds, args)
            t1 = time.perf_counter()
            run_study(load_study(alone), progress=False, report=False, say=lambda _: None)
            own = time.perf_counter() - t1
    finally:
        stop.set()
        server.join(timeout=10)
    n = per_model[slowest]
    return {
        "runs": study.runs,
        "calls": int(sum(per_model.values())),
        "wall_s": wall,
        "slowest_endpoint": slowest,
        "its_calls": n,
        "its_own_wall_s": own,
        # what no schedule can beat: its calls at its concurrency, its requests per minute
        "its_lower_bound_s": max(n * args.latency / args.concurrency, (n // args.rpm) * 60.0),
        "ratio": wall / own,
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--models", type=int, default=8)
    ap.add_argument("--seeds", type=int, default=4)
    ap.add_argument("--latency", type=float, default=0.4, help="seconds per completion")
    ap.add_argument("--concurrency", type=int, default=4, help="in-flight calls per endpoint")
    ap.add_argument("--rpm", type=int, default=400, help="requests per minute per endpoint")
    ap.add_argument("--repeats", type=int, default=1)
    args = ap.parse_args()
    os.environ[KEY_ENV] = "stub"
    results = [one(args) for _ in range(args.repeats)]
    for r in results:
        print(json.dumps({k: round(v, 3) if isinstance(v, float) else v for k, v in r.items()}))
    ratios = [r["ratio"] for r in results]
    print(
        f"{results[0]['runs']} runs, {results[0]['calls']} calls, {args.models} endpoints at "
        f"{args.latency} s, concurrency {args.concurrency}, {args.rpm} rpm: wall / the slowest "
        f"endpoint alone = {min(ratios):.2f}-{max(ratios):.2f} "
        f"(median {statistics.median(ratios):.2f}; target <= 1.3)"
    )


if __name__ == "__main__":
    main()
