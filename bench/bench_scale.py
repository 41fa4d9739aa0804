"""How cost grows with the population (issue 8): time and peak memory per run for 5, 20, 50
and 100 workers (4 subruns each), each size in a fresh process so peak memory is its own.

Usage: python bench/bench_scale.py [--repeats 3] [--plot docs/figures/scale.png]
Target: growth no worse than quadratic in workers; the 100-worker run <= 30 s.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
from pathlib import Path

SIZES = (5, 20, 50, 100)

CHILD = r"""
import json, resource, statistics, sys, tempfile, time
from pathlib import Path
from mbb.batch.build import run_condition
from mbb.core.paths import params_file
from mbb.batch.build import load_params
n, repeats = int(sys.argv[1]), int(sys.argv[2])
cond = load_params(params_file("base"), {"workers": {"count": n}, "name": f"n{n}"})
run_condition(cond, 999)  # warm-up: imports, caches
times = []
with tempfile.TemporaryDirectory() as tmp:
    for seed in range(repeats):
        t0 = time.perf_counter()
        r = run_condition(cond, seed, Path(tmp))
        times.append(time.perf_counter() - t0)
peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
print(json.dumps({"workers": n, "median_s": statistics.median(times), "peak_mb": peak,
                  "events": len(r.log.lines)}))
"""


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--plot", default=None, help="write a PNG of the scaling curve here")
    args = ap.parse_args()
    rows = []
    for n in SIZES:
        out = subprocess.run(
            [sys.executable, "-c", CHILD, str(n), str(args.repeats)],
            capture_output=True,
            text=True,
            check=True,
        ).stdout
        rows.append(json.loads(out.strip().splitlines()[-1]))
    base = rows[0]
    print(
        f"{'workers':>7} {'median s':>9} {'x time':>7} {'(n/5)^2':>8} {'peak MB':>8} {'events':>7}"
    )
    for r in rows:
        ratio = r["median_s"] / base["median_s"]
        quad = (r["workers"] / base["workers"]) ** 2
        print(
            f"{r['workers']:>7} {r['median_s']:>9.3f} {ratio:>7.1f} {quad:>8.0f} "
            f"{r['peak_mb']:>8.0f} {r['events']:>7}"
        )
    if args.plot:
        import altair as alt
        import polars as pl

        from mbb.viz.render import save_chart

        df = pl.DataFrame(rows)
        chart = (
            alt.Chart(df)
            .mark_line(point=True)
            .encode(
                x=alt.X("workers:Q", title="Workers (4 subruns)"),
                y=alt.Y("median_s:Q", title="Median seconds per run"),
                tooltip=[
                    "workers:Q",
                    alt.Tooltip("median_s:Q", format=".3f"),
                    alt.Tooltip("peak_mb:Q", format=".0f", title="peak MB"),
                    "events:Q",
                ],
            )
            .properties(width=360, height=200, title="Run time vs population size")
        )
        paths = save_chart(chart, Path(args.plot).with_suffix(""))
        print(f"plot: {paths['png']}")


if __name__ == "__main__":
    main()
