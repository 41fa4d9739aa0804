"""Benchmark `mbb view` on a large folder (not a test): build time, and in headless Chromium from
file:// with the network blocked: opening the page, sorting and filtering the runs table,
opening the diff of two runs, searching every run's text.

Usage:
    mbb run base --runs 1500 --out DIR                  # untimed: generate the runs first
    python bench/bench_viewer.py DIR [--repeat 5]       # timed
    python bench/bench_viewer.py --demo DEMO --screenshots docs/   # the README's screenshots
Targets (issues 16 and 27), 1,500 runs: the page opens in <= 3 s; the runs table is sorted and
filtered in < 0.5 s; a run diff opens in < 1 s.

"Opens" is from `page.goto(index.html)` until the runs table is drawn with every run (the page
sets `body[data-ready]`). A sort or a filter is timed in the page, from the click (or the
filter's input event) until the next frame after the table was redrawn (layout and paint
included). The diff is timed from the click on "Diff" until both runs' data files are loaded and
the diff is drawn (`#diff-view[data-ready]`). A fresh browser context per repeat, so nothing is
cached between repeats.

`--demo DIR` writes a small study folder against the scripted OpenAI-compatible endpoint
(`mbb.testing`): `llm_negotiators` under two stub models (`m-b` answers 12 % of its requests
with prose, so its calls need repairs and its runs are marked invalid) and the scripted `base`
condition, two seeds each, two subruns, with the LLM cache in the folder so the agent view has
the prompts. `--screenshots DOCS` saves the runs table, a diff and an agent view of it.
"""

from __future__ import annotations

import argparse
import random
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from mbb.batch.viewer import build_viewer

ARGS = [
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--no-first-run",
    "--host-resolver-rules=MAP * ~NOTFOUND",
    "--proxy-server=http://127.0.0.1:9",
]
# in the page: act, then wait for the frame after the redraw (2 frames: filters draw in a frame)
TIMED = """async ([sel, value]) => {
  const node = document.querySelector(sel);
  const t0 = performance.now();
  if (value === null) node.click();
  else {
    node.value = value;
    node.dispatchEvent(new Event(node.tagName === 'SELECT' ? 'change' : 'input'));
  }
  const frame = () => new Promise(r => requestAnimationFrame(r));
  await frame();
  await frame();
  await new Promise(r => setTimeout(r, 0));
  return performance.now() - t0;
}"""


def _chromium() -> str:
    chromium = shutil.which("chromium") or shutil.which("chromium-browser")
    if chromium is None:
        sys.exit("chromium not found: apt-get install -y chromium")
    return chromium


def _offline(context: Any) -> None:
    context.route(
        "**/*",
        lambda route: (
            route.continue_() if route.request.url.startswith(("file:", "data:")) else route.abort()
        ),
    )


def _ms(xs: list[float]) -> str:
    return f"median {statistics.median(xs):.0f} ms ({min(xs):.0f}-{max(xs):.0f})"


def bench(folder: Path, repeat: int, viewer: Path | None) -> None:
    from playwright.sync_api import sync_playwright

    keep = viewer is not None
    viewer = viewer or Path(tempfile.mkdtemp(prefix="mbb-bench-viewer-"))
    if keep and (viewer / "index.html").is_file():
        runs = (viewer / "data" / "index.js").read_text().count('"path":')
        print(f"build: reusing {viewer} ({runs} runs)")
    else:
        t0 = time.perf_counter()
        res = build_viewer(folder, viewer)
        runs = res.runs
        build_s = time.perf_counter() - t0
        files = list((viewer / "data" / "runs").glob("*.js"))
        texts = list((viewer / "data" / "text").glob("*.js"))
        index_kb = (viewer / "data" / "index.js").stat().st_size / 1024
        mean_kb = sum(p.stat().st_size for p in files) / max(1, len(files)) / 1024
        text_mb = sum(p.stat().st_size for p in texts) / 1024 / 1024
        print(
            f"build: {runs} runs in {build_s:.1f} s; index.js {index_kb:.0f} KiB, page "
            f"{res.index.stat().st_size / 1024:.0f} KiB, mean run file {mean_kb:.0f} KiB, "
            f"search text {text_mb:.1f} MiB in {len(texts)} files"
        )
    index = viewer / "index.html"
    t: dict[str, list[float]] = {
        k: [] for k in ("open", "sort", "filter", "sort+filter", "diff", "switch", "search")
    }
    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=_chromium(), args=ARGS)
        for _ in range(repeat):
            ctx = browser.new_context(viewport={"width": 1500, "height": 1000})
            _offline(ctx)
            page = ctx.new_page()
            t0 = time.perf_counter()
            page.goto(index.as_uri())
            page.wait_for_selector("body[data-ready='1']", timeout=60_000)
            t["open"].append((time.perf_counter() - t0) * 1000)
            assert page.get_attribute("#runs-table", "data-rows") == str(runs)
            for col in ("score", "score", "credits", "id", "deadline_miss"):
                t["sort"].append(page.evaluate(TIMED, [f'th[data-col="{col}"] button', None]))
            for col, value in (("score", ">0.9"), ("score", ""), ("seed", "1..500")):
                t["filter"].append(page.evaluate(TIMED, [f'#runs-table [data-col="{col}"]', value]))
            t["filter"].append(page.evaluate(TIMED, ["#table-find", "seed01"]))
            t["filter"].append(page.evaluate(TIMED, ["#table-find", ""]))
            # filtered, then sorted: the table a researcher looks at
            t["sort+filter"].append(
                page.evaluate(TIMED, ['#runs-table [data-col="completion"]', ">=50"])
                + page.evaluate(TIMED, ['th[data-col="score"] button', None])
            )
            page.evaluate(TIMED, ['#runs-table [data-col="completion"]', ""])
            shown = int(page.get_attribute("#runs-table", "data-rows") or 0)
            assert shown == runs, (shown, runs)
            # the diff of two runs far apart in the table (ticked where they are drawn)
            a = page.locator("#runs-table tbody tr[data-n]").nth(3)
            a.locator("input").check()
            a = a.get_attribute("data-n")
            page.eval_on_selector("#table-wrap", "w => { w.scrollTop = w.scrollHeight; }")
            page.wait_for_timeout(100)
            b = page.locator("#runs-table tbody tr[data-n]").nth(-4)
            b.locator("input").check()
            b = b.get_attribute("data-n")
            t0 = time.perf_counter()
            page.click("#compare")
            page.wait_for_selector(f'#diff-view[data-ready="{a},{b}"]', timeout=30_000)
            t["diff"].append((time.perf_counter() - t0) * 1000)
            # a run from the table (its data file on demand)
            page.click("#to-runs")
            link = page.locator("#runs-table tbody tr[data-n]").nth(10).locator("a")
            name = link.inner_text()
            t0 = time.perf_counter()
            link.click()
            page.wait_for_function(
                "id => document.querySelector('#run-head h2')?.textContent === id "
                "&& document.querySelector('#round-title')",
                arg=name,
            )
            t["switch"].append((time.perf_counter() - t0) * 1000)
            # the search over every run's text (first search: every text file is read)
            page.click("#to-runs")
            t0 = time.perf_counter()
            page.fill("#search", "tightest first")
            page.wait_for_selector("#search-all[data-runs]", timeout=60_000)
            t["search"].append((time.perf_counter() - t0) * 1000 - 150)  # less the typing pause
            ctx.close()
        browser.close()
    if not keep:
        shutil.rmtree(viewer, ignore_errors=True)
    print(f"{runs} runs, {repeat} fresh contexts; in-page times include layout and paint")
    print(f"open (runs table drawn)        {_ms(t['open'])}  (target <= 3 s)")
    print(f"sort the runs table            {_ms(t['sort'])}  (target < 500 ms)")
    print(f"filter the runs table          {_ms(t['filter'])}  (target < 500 ms)")
    print(f"filter, then sort              {_ms(t['sort+filter'])}  (target < 500 ms)")
    print(f"open a diff of two runs        {_ms(t['diff'])}  (target < 1 s)")
    print(f"open a run from the table      {_ms(t['switch'])}")
    print(f"search every run (first time)  {_ms(t['search'])}")


# --- the README's screenshots ------------------------------------------------------------------
def make_demo(out: Path) -> Path:
    """A study folder written against the scripted endpoint (see the module's docstring)."""
    from mbb.batch.build import load_params
    from mbb.batch.runner import run_many
    from mbb.testing.emulate import ProviderEmulator
    from mbb.testing.testserver import FakeOpenAIServer, Reply, declaring_responder

    rng = random.Random(0)

    def responder(body: dict[str, Any]) -> Reply:
        if body.get("model") == "m-b" and rng.random() < 0.12:
            return Reply.completion("I would bid about 80 for a short slot, I think.")
        return declaring_responder(body)

    out.mkdir(parents=True, exist_ok=True)
    emulator = ProviderEmulator("openai", responder, reasoning=None)
    with FakeOpenAIServer(emulator, models=("m-a", "m-b")) as srv:
        for name, model in (("a", "m-a"), ("b", "m-b")):
            over = {
                "subruns": 2,
                "models": {
                    name: {
                        "model": model,
                        "preset": "openai",
                        "base_url": srv.url,
                        "api_key_env": None,
                        "tool_protocol": "json_action",
                        "structured": "json_schema",
                        "max_retries": 1,
                    }
                },
                "workers": {"model": name},
                "llm": {"cache": "read_write", "cache_file": str(out / "llm_cache.sqlite")},
                "prices": {
                    "m-a": {"prompt": 0.4, "completion": 1.6},
                    "m-b": {"prompt": 0.15, "completion": 0.6},
                },
            }
            cond = load_params("llm_negotiators", over)
            run_many(cond, runs=2, out_dir=out / f"llm_negotiators-{name}", processes=1).check()
    for cond_name in ("base", "memory_off"):
        cond = load_params(cond_name, {"subruns": 2})
        run_many(cond, runs=2, out_dir=out / cond_name, processes=1).check()
    return out


def screenshots(folder: Path, docs: Path) -> None:
    from playwright.sync_api import sync_playwright

    res = build_viewer(folder)
    docs.mkdir(parents=True, exist_ok=True)
    a = "llm_negotiators-a/llm_negotiators-a-seed0000"
    b = "llm_negotiators-b/llm_negotiators-b-seed0000"
    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=_chromium(), args=ARGS)
        ctx = browser.new_context(viewport={"width": 1500, "height": 760})
        _offline(ctx)
        page = ctx.new_page()
        page.goto(res.index.as_uri() + "#sort=score:desc")
        page.wait_for_selector("body[data-ready='1']")
        page.screenshot(path=str(docs / "viewer-runs.png"))
        page.goto(res.index.as_uri() + f"#diff={a}&with={b}&s=1&r=3")
        page.reload()
        page.wait_for_selector("#diff-view[data-ready]")
        page.set_viewport_size({"width": 1500, "height": 1150})
        page.screenshot(path=str(docs / "viewer-diff.png"))
        page.goto(res.index.as_uri() + f"#run={b}&tab=agent&w=W2")
        page.reload()
        page.wait_for_selector("#story")
        page.locator("#story details.call > summary").nth(1).click()
        page.locator("#story .story-subrun").first.scroll_into_view_if_needed()
        page.evaluate("window.scrollBy(0, -60)")
        page.screenshot(path=str(docs / "viewer-agent.png"))
        browser.close()
    print(f"screenshots of {folder} ({res.runs} runs) in {docs}")


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("out", type=Path, nargs="?", help="folder of runs (e.g. `mbb run`'s output)")
    ap.add_argument("--repeat", type=int, default=5)
    ap.add_argument("--viewer", type=Path, default=None, help="build into (or reuse) this folder")
    ap.add_argument("--demo", type=Path, default=None, help="write the demo study folder here")
    ap.add_argument("--screenshots", type=Path, default=None, help="save screenshots here")
    args = ap.parse_args()
    if args.demo is not None:
        folder = args.demo if (args.demo / "base").is_dir() else make_demo(args.demo)
        if args.screenshots is not None:
            screenshots(folder, args.screenshots)
        return
    if args.out is None:
        ap.error("a folder of runs, or --demo")
    bench(args.out, args.repeat, args.viewer)


if __name__ == "__main__":
    main()
