"""Benchmark the runner (not a test): `mbb run base --runs N` end to end as a user runs it (a
fresh command each time: interpreter, imports, worker start-up, events, meta and tables
written), the default pool size against `--processes 1` and `--processes 2`, on an idle host
and on a loaded one (N busy-loop processes started for the measurement).

Usage:
    python bench/bench_runner.py [--runs 64 200] [--repeat 3] [--busy 0 4]
    python bench/bench_runner.py busy 4 --seconds 300   # only the load: N busy loops, then exit

Target (issue 27): the default never more than 5 % slower than `--processes 1`, idle or
loaded; `mbb.batch.cpus.pool_size` decides from the CPUs free now. The second form loads the
host for a whole-process timer run beside it (time the two commands alternately: A B A B).
"""

from __future__ import annotations

import argparse
import multiprocessing as mp
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager


def _spin(until: float) -> None:
    x = 0
    while time.time() < until:
        x += 1


@contextmanager
def busy(n: int, seconds: float = 3600.0) -> Iterator[None]:
    """`n` processes that each keep a CPU busy (the loaded host) while the block runs."""
    until = time.time() + seconds
    procs = [mp.Process(target=_spin, args=(until,), daemon=True) for _ in range(n)]
    for p in procs:
        p.start()
    try:
        if n:
            time.sleep(2.0)  # the kernel's runnable count settles
        yield
    finally:
        for p in procs:
            p.terminate()
        for p in procs:
            p.join()


def wall(runs: int, processes: int | None) -> float:
    with tempfile.TemporaryDirectory() as tmp:
        cmd = [sys.executable, "-m", "mbb", "run", "base", "--runs", str(runs), "--quiet"]
        cmd += ["--out", tmp]
        if processes is not None:
            cmd += ["--processes", str(processes)]
        t0 = time.perf_counter()
        subprocess.run(cmd, check=True, stdout=subprocess.DEVNULL)
        return time.perf_counter() - t0


def chosen(runs: int) -> int:
    """The pool size the default would pick now (`mbb.batch.cpus`)."""
    from mbb.batch.cpus import cpu_budget, pool_size

    return pool_size(runs, cpu_budget())


def measure(args: argparse.Namespace) -> None:
    from mbb.batch.cpus import cpu_budget

    for n_busy in args.busy:
        with busy(n_busy):
            b = cpu_budget()
            print(
                f"busy loops={n_busy} cpus={b.cpus} quota={b.quota} load now={b.load:.1f} "
                f"free={b.free:.1f}"
            )
            print(
                f"{'runs':>5} {'pool':>4} {'1 proc s':>9} {'2 procs s':>10} {'default s':>10} "
                f"{'default/1':>9} {'2/1':>6}"
            )
            for n in args.runs:
                one, two, default, pools = [], [], [], []
                for _ in range(args.repeat):  # interleaved, so load drifts hit all alike
                    one.append(wall(n, 1))
                    two.append(wall(n, 2))
                    pools.append(chosen(n))
                    default.append(wall(n, None))
                m1, m2, md = (statistics.median(x) for x in (one, two, default))
                print(
                    f"{n:5d} {'/'.join(map(str, sorted(set(pools)))):>4} {m1:9.2f} {m2:10.2f} "
                    f"{md:10.2f} {md / m1:9.2f} {m2 / m1:6.2f}"
                )


def main() -> None:
    if len(sys.argv) > 1 and sys.argv[1] == "busy":
        ap = argparse.ArgumentParser(prog="bench_runner.py busy")
        ap.add_argument("n", type=int, help="busy-loop processes")
        ap.add_argument("--seconds", type=float, default=300.0, help="how long (bounded)")
        a = ap.parse_args(sys.argv[2:])
        with busy(a.n, a.seconds):
            time.sleep(max(0.0, a.seconds - 2.0))
        return
    ap = argparse.ArgumentParser()
    ap.add_argument("--runs", type=int, nargs="+", default=[64, 200])
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--busy", type=int, nargs="+", default=[0, 4], help="busy loops per case")
    measure(ap.parse_args())


if __name__ == "__main__":
    main()
