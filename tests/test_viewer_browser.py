"""The viewer in headless Chromium from file:// with every network request blocked: pick another
run and round, filter by a worker, search a phrase, follow the timeline, and no console errors."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from mbb.batch.build import load_params
from mbb.batch.runner import run_many
from mbb.batch.viewer import build_viewer
from mbb.core.paths import PROJECT_ROOT

CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")
HOSTILE = '<img src=x onerror="window.__pwned=1"> & </script>'


def _edit(log: Path, fn) -> None:
    lines = [json.loads(x) for x in log.read_text().splitlines()]
    fn(lines)
    log.write_text("".join(json.dumps(e) + "\n" for e in lines))


@pytest.fixture(scope="module")
def viewer(tmp_path_factory):
    out = tmp_path_factory.mktemp("viewer_browser")
    for name in ("base", "memory_off"):
        run_many(load_params(name, {"subruns": 2}), runs=2, out_dir=out / name, processes=1)
    target = out / "memory_off" / "memory_off-seed0000"
    events = [json.loads(x) for x in (target / "events.jsonl").read_text().splitlines()]
    # the phrase to search: a message by W2 in a later round of subrun 2
    msg = next(
        e
        for e in events
        if e["kind"] == "message" and e["worker"] == "W2" and e["subrun"] == 2 and e["round"] > 1
    )

    def hostile(lines):  # a W2 message of subrun 1 that tries to inject markup
        m = next(e for e in lines if e["kind"] == "message" and e["worker"] == "W2")
        m["text"] = HOSTILE

    _edit(target / "events.jsonl", hostile)
    old = out / "base" / "base-old"  # a run of an older event version: listed with the reason
    shutil.copytree(out / "base" / "base-seed0001", old)
    (old / "events.jsonl").write_text(
        (old / "events.jsonl").read_text().replace('"v":1,', '"v":0,')
    )
    res = build_viewer(out)
    assert res.runs == 5 and len(res.bad) == 1
    index = json.loads((out / "viewer" / "data" / "index.js").read_text()[10:-3])
    n = next(r["n"] for r in index["runs"] if r["path"] == "memory_off/memory_off-seed0000")
    return res.index, n, msg


def test_viewer_in_chromium_offline(viewer):
    if CHROMIUM is None:
        pytest.fail("Chromium is needed for this test: apt-get install -y chromium")
    from playwright.sync_api import sync_playwright

    index, n, msg = viewer
    phrase = msg["text"][:40]
    requests: list[str] = []
    errors: list[str] = []
    with sync_playwright() as p:
        browser = p.chromium.launch(
            executable_path=CHROMIUM,
            args=[
                "--no-sandbox",
                "--disable-gpu",
                "--disable-background-networking",
                "--no-first-run",
                "--disable-component-update",
                "--disable-sync",
                "--host-resolver-rules=MAP * ~NOTFOUND",
                "--proxy-server=http://127.0.0.1:9",
            ],
        )
        context = browser.new_context(viewport={"width": 1400, "height": 1000})
        # belt and braces: any request that is not a local file is aborted (and recorded)
        context.route(
            "**/*",
            lambda route: (
                route.continue_()
                if route.request.url.startswith(("file:", "data:"))
                else route.abort()
            ),
        )
        page = context.new_page()
        page.on("request", lambda r: requests.append(r.url))
        page.on(
            "console", lambda m: errors.append(m.text) if m.type in ("error", "warning") else None
        )
        page.on("pageerror", lambda e: errors.append(str(e)))
        page.goto(index.as_uri())
        page.wait_for_selector("body[data-ready='1']", timeout=15_000)
        assert page.title() == "mbb viewer"
        assert page.locator("#run-list button").count() == 5
        # the unreadable run is named, with its reason
        bad = page.locator("#bad-runs").inner_text()
        assert "base/base-old" in bad and "event version 0" in bad
        assert page.locator("h2").first.inner_text() == "base-seed0000"

        # another run, then subrun 2 and another round
        page.click(f'#run-list button[data-n="{n}"]')
        page.wait_for_function(
            "() => document.querySelector('#run-head h2')?.textContent === 'memory_off-seed0000'"
        )
        page.click('.round-nav button[data-subrun="2"]')
        page.click(f'.round-nav button[data-round="{msg["round"]}"]')
        title = page.locator("#round-title").inner_text()
        assert title.startswith(f"Subrun 2 · round {msg['round']}")
        assert f"run={n}&s=2&r={msg['round']}" in page.url

        # filter by a worker: every message shown is from or to W2
        page.select_option("#f-worker", "W2")
        whos = page.locator("#content .msg .who").all_inner_texts()
        assert whos and all("W2" in w for w in whos), whos
        decl = page.locator("#content tr[data-seq] td:first-child").all_inner_texts()
        assert decl and set(decl) == {"W2"}

        # search a phrase: the matching message is listed, and opening it shows it marked
        page.fill("#search", phrase)
        page.wait_for_selector("#search-results .result")
        results = page.locator("#search-results .result")
        assert any(phrase in t for t in results.all_inner_texts())
        page.locator(f'#search-results .result[data-seq="{msg["seq"]}"]').click()
        assert (
            page.locator("#round-title").inner_text().startswith(f"Subrun 2 · round {msg['round']}")
        )
        hit = page.locator(f'#content .msg[data-seq="{msg["seq"]}"]')
        assert hit.count() == 1 and phrase in hit.inner_text()
        assert hit.locator("mark").first.inner_text().lower() == phrase.lower()

        # a taxonomy label shows its evidence
        page.fill("#search", "")
        page.select_option("#f-worker", "")
        labels = page.eval_on_selector_all("#f-label option", "os => os.map(o => o.value)")
        page.select_option("#f-label", labels[1])
        page.click('.round-nav button[data-subrun="1"]')
        rounds = page.locator(".round-nav button[data-round]").count()
        found = False
        for r in range(1, rounds + 1):
            page.click(f'.round-nav button[data-round="{r}"]')
            if page.locator("#content .evidence b").count():
                found = True
                break
        assert found, "no evidence shown under the label filter"
        page.select_option("#f-label", "")

        # the hostile message is shown as text, not markup
        page.fill("#search", "onerror")
        page.wait_for_selector("#search-results .result")
        assert HOSTILE in page.locator("#search-results").inner_text()
        assert page.evaluate("() => window.__pwned") is None
        page.fill("#search", "")

        # the timeline: clicking a window opens its round
        page.click('#tabs button[data-tab="timeline"]')
        rect = page.locator("svg.timeline rect.win").nth(3)
        rnd = rect.get_attribute("data-round")
        rect.click()
        assert page.locator("#round-title").inner_text().startswith(f"Subrun 1 · round {rnd}")

        # memory and reports across subruns
        page.click('#tabs button[data-tab="memory"]')
        assert "Memory is off in this condition" in page.locator("#content").inner_text()
        page.locator("#run-list button", has_text="base-seed0000").click()
        page.wait_for_selector("#content td.text")
        texts = " ".join(page.locator("#content td.text").all_inner_texts())
        assert "Subrun 1, task" in texts and "Subrun 2, task" in texts  # after-action reports

        shots = PROJECT_ROOT / "outputs" / "screenshots"
        shots.mkdir(parents=True, exist_ok=True)
        page.screenshot(path=str(shots / "viewer.png"))
        browser.close()
    local = ("file:", "data:", "about:", "blob:")
    assert [u for u in requests if not u.startswith(local)] == []
    assert errors == []
