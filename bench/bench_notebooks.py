"""Time the whole notebook suite on the offline scripted default (issue 6: <= 120 s).

Usage: python bench/bench_notebooks.py [--workers 2]
Each notebook runs with its own default parameters (base condition) into a temporary folder,
through papermill in in-process worker threads, exactly as `mbb sweep` does.
"""

from __future__ import annotations

import argparse
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from mbb.batch.notebooks import execute_notebook
from mbb.core.paths import PROJECT_ROOT


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--workers", type=int, default=2)
    args = ap.parse_args()
    notebooks = sorted((PROJECT_ROOT / "notebooks").glob("*.ipynb"))
    with tempfile.TemporaryDirectory() as tmp:

        def one(nb: Path) -> tuple[str, float]:
            out = Path(tmp) / nb.stem
            t0 = time.perf_counter()
            execute_notebook(nb, out, {"out_dir": str(out), "out_root": str(out)}, html=True)
            return nb.stem, time.perf_counter() - t0

        t0 = time.perf_counter()
        with ThreadPoolExecutor(max_workers=args.workers) as pool:
            times = list(pool.map(one, notebooks))
        total = time.perf_counter() - t0
    for name, s in times:
        print(f"{name:24s} {s:6.1f} s (incl. HTML export)")
    print(f"{len(times)} notebooks, {args.workers} at a time: {total:.1f} s total")


if __name__ == "__main__":
    main()
