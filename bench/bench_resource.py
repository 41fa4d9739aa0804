"""Benchmark the execution resource: sandbox overhead per trivial command, evaluation per task.

Usage: PYTHONPATH=. python bench/bench_resource.py [--n 50] [--tasks rev wc ...]
Target: median overhead of `true` in the sandbox <= 30 ms.
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import subprocess
import tempfile
import time
from pathlib import Path

from mbb.agents.oracle import DEFAULT_ORACLE_DIR
from mbb.resource.sandbox import run_sandboxed
from mbb.tasks.evaluator import evaluate_submission
from mbb.tasks.suite import build_suite


def overhead(n: int) -> tuple[float, float, float]:
    """Median wall ms of `true`: bare subprocess, sandboxed, and the difference."""
    bare, boxed = [], []
    with tempfile.TemporaryDirectory() as d:
        ws = Path(d)
        run_sandboxed(["true"], workspace=ws)  # warm caches
        for _ in range(n):
            t0 = time.perf_counter()
            subprocess.run(["true"], check=True)
            bare.append(time.perf_counter() - t0)
            boxed.append(run_sandboxed(["true"], workspace=ws).wall_s)
    b, s = statistics.median(bare) * 1e3, statistics.median(boxed) * 1e3
    return b, s, s - b


def overhead_resource(n: int, task) -> float:
    """Median wall ms of `true` through ExecutionResource.run: the window's control group,
    the workspace tmpfs, the seccomp filter, the event record (what a solver's command costs)."""
    from mbb.core.agent_api import WindowGrant
    from mbb.resource.resource import ExecutionResource

    times = []
    with tempfile.TemporaryDirectory() as d:
        res = ExecutionResource(Path(d) / "res")
        res.assign("W1", task)
        res.open_window(WindowGrant("W1", 0, 1, 0.0, 10**9, 1e9))
        res.run("W1", "true")
        for _ in range(n):
            t0 = time.perf_counter()
            res.run("W1", "true")
            times.append(time.perf_counter() - t0)
        res.close()
    return statistics.median(times) * 1e3


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--n", type=int, default=50)
    ap.add_argument("--tasks", nargs="*", default=None)
    ap.add_argument("--cache", default=None)
    args = ap.parse_args()

    t0 = time.monotonic()
    suite = build_suite(args.cache, tasks=args.tasks)
    print(
        f"suite: {len(suite.tasks)} tasks, rebuilt {len(suite.rebuilt)}, "
        f"{time.monotonic() - t0:.2f}s"
    )

    load = os.getloadavg()[0]
    b, s, o = overhead(args.n)
    verdict = "ok" if s <= 30 else "OVER TARGET"
    print(
        f"\n`true`, median of {args.n}: bare {b:.1f} ms, sandboxed {s:.1f} ms, "
        f"overhead {o:.1f} ms (target: sandboxed <= 30 ms: {verdict}; "
        f"load average {load:.1f} on {os.cpu_count()} cores)"
    )

    r = overhead_resource(args.n, suite[suite.task_ids[0]])
    print(
        f"`true` through the resource (window cgroup, tmpfs workspace, filter, record), "
        f"median of {args.n}: {r:.1f} ms ({'ok' if r <= 30 else 'OVER TARGET'})"
    )

    print(f"\n{'task':<8} {'tests':>5} {'score':>5} {'eval_s':>7} {'ms/test':>8}")
    total = 0.0
    for tid in suite.task_ids:
        task = suite[tid]
        with tempfile.TemporaryDirectory() as d:
            ws = Path(d) / "ws"
            shutil.copytree(DEFAULT_ORACLE_DIR / tid, ws)
            ev = evaluate_submission(task, ws)
        total += ev.wall_s
        print(
            f"{tid:<8} {task.n_tests:>5} {ev.result.score:>5.2f} {ev.wall_s:>7.2f} "
            f"{1e3 * ev.wall_s / task.n_tests:>8.1f}"
        )
    print(
        f"{'all':<8} {'':>5} {'':>5} {total:>7.2f}  (median per task "
        f"{total / max(1, len(suite.task_ids)):.2f}s)"
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
