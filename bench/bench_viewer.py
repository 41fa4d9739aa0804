"""Benchmark `mbb view` on a large folder (not a test): build time, and the opening time of the
page in headless Chromium from file:// with the network blocked.

Usage:
    mbb run params/base.yaml --runs 1500 --out DIR     # untimed: generate the runs first
    python bench/bench_viewer.py DIR [--repeat 5]      # timed
Target (issue 16): a 1,500-run folder opens in <= 3 s.

"Opens" is measured from `page.goto(index.html)` until the page is usable: the run list is drawn
(every run), and the first run's data file is loaded and its first round rendered (the page sets
`body[data-ready]`). A fresh browser context per repeat, so nothing is cached. Also printed: the
time to switch to the last run of the list (its data file loaded on demand), and the build time
and sizes of the viewer.
"""

from __future__ import annotations

import argparse
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path

from mbb.batch.viewer import build_viewer


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("out", type=Path, help="folder of runs (e.g. the output of `mbb run`)")
    ap.add_argument("--repeat", type=int, default=5)
    args = ap.parse_args()
    chromium = shutil.which("chromium") or shutil.which("chromium-browser")
    if chromium is None:
        sys.exit("chromium not found: apt-get install -y chromium")
    from playwright.sync_api import sync_playwright

    viewer = Path(tempfile.mkdtemp(prefix="mbb-bench-viewer-"))
    t0 = time.perf_counter()
    res = build_viewer(args.out, viewer)
    build_s = time.perf_counter() - t0
    files = list((viewer / "data" / "runs").glob("*.js"))
    index_kb = (viewer / "data" / "index.js").stat().st_size / 1024
    mean_kb = sum(p.stat().st_size for p in files) / max(1, len(files)) / 1024
    print(
        f"build: {res.runs} runs in {build_s:.1f} s; index.js {index_kb:.0f} KiB, "
        f"page {res.index.stat().st_size / 1024:.0f} KiB, mean run file {mean_kb:.0f} KiB"
    )
    opens, switches = [], []
    with sync_playwright() as p:
        browser = p.chromium.launch(
            executable_path=chromium,
            args=[
                "--no-sandbox",
                "--disable-gpu",
                "--host-resolver-rules=MAP * ~NOTFOUND",
                "--proxy-server=http://127.0.0.1:9",
            ],
        )
        for _ in range(args.repeat):
            ctx = browser.new_context(viewport={"width": 1400, "height": 1000})
            page = ctx.new_page()
            t = time.perf_counter()
            page.goto(res.index.as_uri())
            page.wait_for_selector("body[data-ready='1']", timeout=60_000)
            page.wait_for_selector("#round-title")
            opens.append(time.perf_counter() - t)
            n = page.locator("#run-list button").count()
            assert n == res.runs, (n, res.runs)
            last = page.locator("#run-list button").last
            want = last.get_attribute("data-n")
            t = time.perf_counter()
            last.click()
            page.wait_for_function(
                "n => window.MBB._state.run && window.MBB._state.run.data.n === n "
                "&& document.querySelector('#round-title')",
                arg=int(want),
            )
            switches.append(time.perf_counter() - t)
            ctx.close()
        browser.close()
    shutil.rmtree(viewer, ignore_errors=True)
    print(
        f"open ({args.repeat} fresh contexts): median {statistics.median(opens):.2f} s, "
        f"min {min(opens):.2f} s, max {max(opens):.2f} s  (target <= 3 s)"
    )
    print(
        f"switch to the last run: median {statistics.median(switches) * 1000:.0f} ms, "
        f"max {max(switches) * 1000:.0f} ms"
    )


if __name__ == "__main__":
    main()
