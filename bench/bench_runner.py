"""Benchmark the runner (not a test): `mbb run base --runs N` with one process vs two, end to end
as a user runs it (a fresh command each time: interpreter, imports, worker start-up, events,
meta and tables written), to find where two processes start to pay.

Usage: python bench/bench_runner.py [--runs 8 16 24 32 64 200] [--repeat 3]
Target (issue 18): 200 base runs with the default settings <= 0.75 x the wall time of
`--processes 1` on a 2-core machine; the crossover sets `mbb.batch.runner.PARALLEL_FROM`.
Measure on an idle machine: with the other core busy, two processes cannot win.
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time


def wall(runs: int, processes: int | None) -> float:
    with tempfile.TemporaryDirectory() as tmp:
        cmd = [sys.executable, "-m", "mbb", "run", "base", "--runs", str(runs), "--quiet"]
        cmd += ["--out", tmp]
        if processes is not None:
            cmd += ["--processes", str(processes)]
        t0 = time.perf_counter()
        subprocess.run(cmd, check=True, stdout=subprocess.DEVNULL)
        return time.perf_counter() - t0


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--runs", type=int, nargs="+", default=[8, 16, 24, 32, 64, 200])
    ap.add_argument("--repeat", type=int, default=3)
    args = ap.parse_args()
    print(f"cpus={os.cpu_count()} load={os.getloadavg()[0]:.2f}")
    print(f"{'runs':>5} {'1 proc s':>9} {'2 procs s':>10} {'default s':>10} {'2/1':>6}")
    for n in args.runs:
        one, two, default = [], [], []
        for _ in range(args.repeat):  # interleaved, so load drifts hit both alike
            one.append(wall(n, 1))
            two.append(wall(n, 2))
            default.append(wall(n, None))
        m1, m2, md = (statistics.median(x) for x in (one, two, default))
        print(f"{n:5d} {m1:9.2f} {m2:10.2f} {md:10.2f} {m2 / m1:6.2f}")


if __name__ == "__main__":
    main()
