"""Benchmark the arena (not a test): median ms per base run and 1,500 base runs on both cores.

Usage: python bench/bench_arena.py [--runs 1500] [--single 200]
Targets (issue 2): <= 25 ms per base run (5 workers x 4 subruns, event log written);
1,500 base runs <= 60 s using both cores (events, meta and parquet tables written).
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
import time
from pathlib import Path

from mbb.batch.build import load_params, run_condition
from mbb.batch.runner import run_many
from mbb.core.paths import params_file


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--runs", type=int, default=1500)
    ap.add_argument("--single", type=int, default=200)
    ap.add_argument("--processes", type=int, default=2)
    args = ap.parse_args()
    cond = load_params(params_file("base"))
    with tempfile.TemporaryDirectory() as tmp:
        out = Path(tmp)
        run_condition(cond, 0, out)  # warm-up (imports, provenance cache)
        times, events = [], []
        for seed in range(args.single):
            t0 = time.perf_counter()
            r = run_condition(cond, seed, out)
            times.append((time.perf_counter() - t0) * 1000)
            events.append(len(r.log.lines))
        med = statistics.median(times)
        p90 = statistics.quantiles(times, n=10)[-1]
        print(
            f"single base run: median {med:.1f} ms, p90 {p90:.1f} ms over {args.single} runs "
            f"({statistics.mean(events):.0f} events/run)"
        )
        t0 = time.perf_counter()
        batch = run_many(
            cond, seed=0, runs=args.runs, out_dir=out / "batch", processes=args.processes
        )
        total = time.perf_counter() - t0
        assert not batch.failed, batch.failed
        print(
            f"{args.runs} base runs on {args.processes} process(es): {total:.1f} s "
            f"({total / args.runs * 1000:.1f} ms/run incl. process start, meta and parquet "
            "tables)"
        )


if __name__ == "__main__":
    main()
