"""The viewer in headless Chromium from file:// with every network request blocked: the runs
table (sort, filter, columns, search over every run), a run (rounds, filters, search, timeline,
memory), the diff of two runs, the agent view, hostile data files, and live mode. No console
error, no request that leaves the machine."""

from __future__ import annotations

import contextlib
import json
import re
import shutil
import threading
from pathlib import Path

import pytest

from mbb.batch.build import load_params
from mbb.batch.runner import run_many
from mbb.batch.viewer import LLM_MEASURES, build_viewer, watch_viewer
from mbb.core.paths import PROJECT_ROOT

CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")
HOSTILE = '<img src=x onerror="window.__pwned=1"> & </script>'
PHRASE = "zebra crossing at the quay"  # written into one message of one run only
ARGS = [
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--no-first-run",
    "--disable-component-update",
    "--disable-sync",
    "--host-resolver-rules=MAP * ~NOTFOUND",
    "--proxy-server=http://127.0.0.1:9",
]
LOCAL = ("file:", "data:", "about:", "blob:")


def _edit(log: Path, fn) -> None:
    lines = [json.loads(x) for x in log.read_text().splitlines()]
    fn(lines)
    log.write_text("".join(json.dumps(e) + "\n" for e in lines))


def _index(viewer: Path) -> dict:
    return json.loads((viewer / "data" / "index.js").read_text()[len("MBB.index(") : -3])


@pytest.fixture(scope="module")
def folder(tmp_path_factory):
    out = tmp_path_factory.mktemp("viewer_browser")
    for name in ("base", "memory_off"):
        run_many(load_params(name, {"subruns": 2}), runs=2, out_dir=out / name, processes=1)
    target = out / "memory_off" / "memory_off-seed0000"
    events = [json.loads(x) for x in (target / "events.jsonl").read_text().splitlines()]
    # the phrase to search in that run: a message by W2 in a later round of subrun 2
    msg = next(
        e
        for e in events
        if e["kind"] == "message" and e["worker"] == "W2" and e["subrun"] == 2 and e["round"] > 1
    )

    def hostile(lines):  # a W2 message of subrun 1 that tries to inject markup
        m = next(e for e in lines if e["kind"] == "message" and e["worker"] == "W2")
        m["text"] = HOSTILE

    _edit(target / "events.jsonl", hostile)
    unique = {}

    def plant(lines):  # a phrase only base-seed0001 holds, in a later round of subrun 2
        m = next(
            e
            for e in lines
            if e["kind"] == "message"
            and e["subrun"] == 2
            and e["round"] > 1
            and e["worker"] == "W4"
        )
        m["text"] = f"Meet me at the {PHRASE} for a swap"
        unique.update(m)

    _edit(out / "base" / "base-seed0001" / "events.jsonl", plant)
    old = out / "base" / "base-old"  # a run of an older event version: listed with the reason
    shutil.copytree(out / "base" / "base-seed0001", old)
    (old / "events.jsonl").write_text(
        (old / "events.jsonl").read_text().replace('"v": 1,', '"v": 0,')
    )
    meta = out / "memory_off" / "memory_off-seed0001" / "meta.json"
    m = json.loads(meta.read_text())
    meta.write_text(json.dumps({**m, "valid": False, "invalid_reason": "the judge refused it"}))
    (out / "viewer-columns.csv").write_text(
        "run_id,judge\nbase-seed0000,0.5\nbase-seed0001,0.9\nmemory_off-seed0000,0.1\n"
    )
    return out, msg, unique


@pytest.fixture(scope="module")
def viewer(folder):
    out, msg, unique = folder
    res = build_viewer(out)
    assert res.runs == 5 and len(res.bad) == 1
    index = _index(out / "viewer")
    n = {r["path"]: r["n"] for r in index["runs"]}
    return res.index, n, msg, unique


@pytest.fixture(scope="module")
def browser():
    if CHROMIUM is None:
        pytest.fail("Chromium is needed for this test: apt-get install -y chromium")
    from playwright.sync_api import sync_playwright

    with sync_playwright() as p:
        b = p.chromium.launch(executable_path=CHROMIUM, args=ARGS)
        yield b
        b.close()


@contextlib.contextmanager
def offline_page(browser, width=1400):
    """A fresh page whose every non-local request is aborted and recorded; on leaving, no
    request left the machine and the console has no error or warning."""
    context = browser.new_context(viewport={"width": width, "height": 1000})
    requests: list[str] = []
    errors: list[str] = []
    context.route(
        "**/*",
        lambda route: (
            route.continue_() if route.request.url.startswith(("file:", "data:")) else route.abort()
        ),
    )
    page = context.new_page()
    page.on("request", lambda r: requests.append(r.url))
    page.on("console", lambda m: errors.append(m.text) if m.type in ("error", "warning") else None)
    page.on("pageerror", lambda e: errors.append(str(e)))
    try:
        yield page
    finally:
        context.close()
    assert [u for u in requests if not u.startswith(LOCAL)] == []
    assert errors == []


def _open(page, index: Path, hash_: str = "") -> None:
    page.goto(index.as_uri() + hash_)
    page.wait_for_selector("body[data-ready='1']", timeout=15_000)


def _cells(page, col: str) -> list[str]:
    i = page.eval_on_selector_all(
        "#runs-table thead tr:first-child th",
        "(ths, col) => ths.findIndex(th => th.dataset.col === col)",
        col,
    )
    return page.eval_on_selector_all(
        "#runs-table tbody tr[data-n]", "(trs, i) => trs.map(tr => tr.children[i].textContent)", i
    )


def test_viewer_in_chromium_offline(browser, viewer):
    index, _, msg, _ = viewer
    phrase = msg["text"][:40]
    with offline_page(browser) as page:
        _open(page, index)
        assert page.title() == "mbb viewer"
        # the landing view is the runs table, with the unreadable run named and its reason
        assert page.locator("#runs-table tbody tr[data-n]").count() == 5
        bad = page.locator("#bad-runs").inner_text()
        assert "base/base-old" in bad and "event version 0" in bad

        # open a run from the table, then subrun 2 and another round
        page.click('#runs-table a:text-is("memory_off-seed0000")')
        page.wait_for_function(
            "() => document.querySelector('#run-head h2')?.textContent === 'memory_off-seed0000'"
        )
        assert page.locator("#run-list button").count() == 5
        page.click('.round-nav button[data-subrun="2"]')
        page.click(f'.round-nav button[data-round="{msg["round"]}"]')
        title = page.locator("#round-title").inner_text()
        assert title.startswith(f"Subrun 2 · round {msg['round']}")
        assert f"run=memory_off/memory_off-seed0000&s=2&r={msg['round']}" in page.url

        # filter by a worker: every message shown is from or to W2
        page.select_option("#f-worker", "W2")
        whos = page.locator("#content .msg .who").all_inner_texts()
        assert whos and all("W2" in w for w in whos), whos
        decl = page.locator("#content tr[data-seq] td:first-child").all_inner_texts()
        assert decl and set(decl) == {"W2"}

        # search a phrase in this run: the matching message is listed, opening it marks it
        assert page.input_value("#search-scope") == "run"
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


def test_runs_table_sorts_filters_and_shows_every_measure(browser, viewer):
    index, _, _, _ = viewer
    with offline_page(browser, width=1600) as page:
        _open(page, index)
        heads = page.locator("#runs-table thead tr:first-child th").all_inner_texts()
        for label in (
            "run",
            "condition",
            "model",
            "seed",
            "status",
            "valid",
            "score",
            "completion",
            "deadline misses",
            "credits spent",
            "invalid actions",
            "LLM calls",
            "failed calls",
            "LLM cost ($)",
            "tokens",
            "judge",
        ):
            assert any(h.replace("\n", " ").startswith(label) for h in heads), (label, heads)
        assert set(_cells(page, "model")) == {"scripted", ""}  # never a persona name
        # sort by score, both ways (the unreadable run, with no score, stays last)
        page.click('#runs-table th[data-col="score"] button')
        scores = _cells(page, "score")
        # a share in percent, as completion beside it and the report ("Mean score 81.2%")
        assert all(s.endswith("%") for s in scores if s), scores
        vals = [float(s.rstrip("%")) for s in scores if s]
        assert vals == sorted(vals) and scores[-1] == ""
        page.click('#runs-table th[data-col="score"] button')
        vals = [float(s.rstrip("%")) for s in _cells(page, "score") if s]
        assert vals == sorted(vals, reverse=True)
        assert page.get_attribute("#runs-table", "data-sort") == "score:desc"
        assert "sort=score:desc" in page.url
        # the user's column (viewer-columns.csv), sortable
        page.click('#runs-table th[data-col="col:judge"] button')
        assert _cells(page, "col:judge")[:3] == ["0.1", "0.5", "0.9"]
        # the run marked invalid in its meta.json, with the reason
        row = page.locator("#runs-table tbody tr.invalid")
        assert row.count() == 1 and "memory_off-seed0001" in row.inner_text()
        cell = row.locator("td.bad")
        assert (
            cell.inner_text() == "invalid" and cell.get_attribute("title") == "the judge refused it"
        )
        # filters: a condition, a numeric range, text; then all cleared
        page.select_option('#runs-table select[data-col="condition"]', "memory_off")
        page.wait_for_function("() => document.querySelector('#runs-table').dataset.rows === '2'")
        page.fill('#runs-table input[data-col="seed"]', ">0")
        page.wait_for_function("() => document.querySelector('#runs-table').dataset.rows === '1'")
        assert _cells(page, "id") == ["memory_off-seed0001"]
        assert "f.condition=memory_off" in page.url and "f.seed=%3E0" in page.url
        page.click("#table-bar button:text-is('clear filters')")
        page.wait_for_function("() => document.querySelector('#runs-table').dataset.rows === '5'")
        page.click("#table-find")  # typed key by key: the box keeps its focus as rows redraw
        page.keyboard.type("seed0001")
        page.wait_for_function("() => document.querySelector('#runs-table').dataset.rows === '2'")
        assert page.evaluate("() => document.activeElement.id") == "table-find"
        page.fill("#table-find", "old")
        page.wait_for_function("() => document.querySelector('#runs-table').dataset.rows === '1'")
        assert _cells(page, "status") == ["unreadable"]
        # a link with the table's state opens it the same way
        url = page.url
    with offline_page(browser) as page:
        page.goto(url)
        page.wait_for_selector("body[data-ready='1']")
        assert page.get_attribute("#runs-table", "data-rows") == "1"
        assert page.input_value("#table-find") == "old"
        # the report's link to one condition's runs
        _open(page, index, "#cond=memory_off")
        page.reload()
        page.wait_for_selector("body[data-ready='1']")
        assert page.get_attribute("#runs-table", "data-rows") == "2"
        assert page.input_value('#runs-table select[data-col="condition"]') == "memory_off"


def test_search_over_every_run_opens_the_hit_at_its_round(browser, viewer):
    index, _, _, unique = viewer
    with offline_page(browser) as page:
        _open(page, index)
        assert page.input_value("#search-scope") == "all"
        page.fill("#search", PHRASE)
        page.wait_for_selector("#search-all[data-runs]")
        assert page.get_attribute("#search-all", "data-runs") == "1"
        hits = page.locator("#search-all .result")
        assert hits.count() == 1 and PHRASE in hits.inner_text()
        assert "base-seed0001" in page.locator("#search-all .hit-head").inner_text()
        # only the matching runs in the table
        page.click("#only-matching")
        page.wait_for_function("() => document.querySelector('#runs-table').dataset.rows === '1'")
        # the link says so: opened elsewhere, it shows the same one run
        assert "only=1" in page.url
        with offline_page(browser) as again:
            again.goto(page.url)
            again.wait_for_function(
                "() => document.querySelector('#runs-table')?.dataset.rows === '1'"
            )
        hits.first.click()
        page.wait_for_selector("#round-title")
        title = page.locator("#round-title").inner_text()
        assert title.startswith(f"Subrun {unique['subrun']} · round {unique['round']}")
        assert page.locator("#run-head h2").inner_text() == "base-seed0001"
        hit = page.locator(f'#content .msg[data-seq="{unique["seq"]}"] mark')
        assert hit.first.inner_text() == PHRASE
        assert page.input_value("#search-scope") == "run"
        # a phrase every run holds: one result group per readable run
        page.select_option("#search-scope", "all")
        page.fill("#search", "deadline")
        page.wait_for_function("() => document.querySelector('#search-all')?.dataset.runs === '4'")


def test_search_finds_every_word_in_any_order(browser, viewer):
    """Several words match a text that holds each of them, in any order and any case (the
    search matched only the exact substring: "QUAY zebra" found nothing); a "quoted phrase" is
    one word; words spread over different texts do not match; the count says how many hits."""
    index, _, _, _ = viewer
    with offline_page(browser) as page:
        _open(page, index)
        page.fill("#search", "QUAY zebra")
        page.wait_for_selector("#search-all[data-runs]")
        assert page.get_attribute("#search-all", "data-runs") == "1"
        head = page.locator("#search-all > strong").inner_text()
        assert head.startswith("1 match(es) for “QUAY zebra” (every word, any order) in 1 of")
        hit = page.locator("#search-all .result")
        assert hit.count() == 1 and PHRASE in hit.inner_text()
        assert hit.locator("mark").all_inner_texts() == ["zebra", "quay"]
        page.fill("#search", '"at the quay" meet')
        page.wait_for_function(
            "() => document.querySelector('#search-all[data-runs]')"
            "?.textContent.includes('at the quay')"
        )
        assert page.get_attribute("#search-all", "data-runs") == "1"
        page.fill("#search", '"quay the at" meet')
        page.wait_for_selector("#search-all[data-runs='0']")
        page.fill("#search", "zebra deadline")  # each is in some text, never both in one
        page.wait_for_selector("#search-all[data-runs='0']")
        # in one run: the count of its hits, each hit marked
        page.fill("#search", "")
        _open(page, index, "#run=base/base-seed0001")
        page.fill("#search", "swap Meet")
        page.wait_for_selector("#search-results .result")
        head = page.locator("#search-results strong").first.inner_text()
        n = page.locator("#search-results .result").count()
        assert head.startswith(f"{n} match(es) for “swap Meet” (every word, any order) in this run")
        assert any(
            r.locator("mark").all_inner_texts()[:2] == ["Meet", "swap"]
            for r in page.locator("#search-results .result").all()
        )


def test_diff_of_two_runs_from_the_table_and_by_link(browser, viewer):
    index, n, _, _ = viewer
    a, b = "base/base-seed0000", "memory_off/memory_off-seed0000"
    with offline_page(browser, width=1600) as page:
        _open(page, index)
        assert page.is_disabled("#compare")
        page.check(f'#runs-table tr[data-n="{n[a]}"] input')
        page.check(f'#runs-table tr[data-n="{n[b]}"] input')
        page.click("#compare")
        page.wait_for_selector(f'#diff-view[data-ready="{n[a]},{n[b]}"]')
        title = page.locator("#diff-title").inner_text()
        assert "A base-seed0000" in title and "B memory_off-seed0000" in title
        rows = page.locator("#diff-measures tr").all_inner_texts()
        head, side_a, side_b, delta = (r.split("\t") for r in rows)
        i = head.index("condition")
        assert (side_a[i], side_b[i], delta[i]) == ("base", "memory_off", "≠")
        assert "score" in head and side_a[0] == "A" and delta[0] == "B − A"
        # two timelines on one scale, and every round of subrun 1 aligned
        assert page.locator("#diff-view svg.timeline").count() == 2
        rows = page.locator("#diff-rounds tr[data-round]")
        assert rows.count() >= 2
        rows.nth(1).click()
        assert page.locator("#diff-round-title").inner_text() == "Subrun 1 · round 2"
        sides = page.locator("#diff-round .diff-col")
        assert sides.count() == 2
        for i in range(2):
            text = sides.nth(i).inner_text()
            assert "Declarations" in text and "Conversation" in text and "Ballots" in text
        page.click('#diff-view .round-nav button[data-subrun="2"]')
        assert page.locator("#diff-round-title").inner_text().startswith("Subrun 2 · round")
        assert f"diff={a}&with={b}&s=2&r=" in page.url
        url = page.url
    with offline_page(browser) as page:  # the link opens the same diff
        page.goto(url)
        page.wait_for_selector(f'#diff-view[data-ready="{n[a]},{n[b]}"]')
        assert page.locator("#diff-round-title").inner_text().startswith("Subrun 2 · round")
        page.click("#diff-view button:text-is('swap A and B')")
        page.wait_for_selector(f'#diff-view[data-ready="{n[b]},{n[a]}"]')


def test_agent_view_tells_one_workers_story_in_order(browser, viewer):
    index, _, _, _ = viewer
    with offline_page(browser) as page:
        _open(page, index, "#run=base/base-seed0000&tab=agent&w=W3")
        page.wait_for_selector("#story")
        assert "scripted worker (persona" in page.locator("#agent-title").inner_text()
        items = page.locator("#story .story-item")
        seqs = [
            int(s)
            for s in page.eval_on_selector_all(
                "#story .story-item", "xs => xs.map(x => x.dataset.seq)"
            )
        ]
        assert seqs == sorted(seqs) and len(seqs) > 20
        kinds = set(
            page.eval_on_selector_all("#story .story-item", "xs => xs.map(x => x.dataset.kind)")
        )
        assert {"declared", "message", "ballot", "scratch_written", "evaluation"} <= kinds
        assert not {"llm_call"} & kinds  # a scripted worker: no prompts
        # shares in percent, as on every other line of the story (it said "progress 0.80")
        (outcome, *_) = page.locator('#story .story-item[data-kind="evaluation"]').all_inner_texts()
        assert re.search(r"score \d+(\.\d)?% .* progress \d+(\.\d)?%", outcome), outcome
        memory = page.locator('#story .story-item[data-kind="scratch_written"]').all_inner_texts()
        assert any("Subrun 1, task" in m for m in memory)
        # only what it wrote to memory and what it was told privately
        page.uncheck('.story-opts input[data-opt="actions"]')
        kinds = set(
            page.eval_on_selector_all("#story .story-item", "xs => xs.map(x => x.dataset.kind)")
        )
        assert kinds <= {"scratch_written", "message"} and "scratch_written" in kinds
        received = page.locator("#story .story-item.saw").all_inner_texts()
        assert all("W3" in r for r in received)
        page.check('.story-opts input[data-opt="actions"]')
        # another worker, from the picker; its round links open the round
        page.click('#agent-pick button[data-worker="W1"]')
        assert "w=W1" in page.url
        # its links are links: opened in a new tab or copied, they give the place they open
        href = page.locator("#story .story-round a").first.get_attribute("href")
        assert re.fullmatch(r"#run=base/base-seed0000&s=\d+&r=\d+", href), href
        page.locator("#story .story-round a").first.click()
        page.wait_for_selector("#round-title")
        # the run header's story link opens the agent view too
        page.click("#run-head a:text-is('story') >> nth=1")
        assert page.locator("#agent-pick button.sel").inner_text() == "W2"
        assert items.count() > 0


def test_agent_story_of_a_scripted_worker_shows_messages_it_sent_too(browser, folder, viewer):
    """Its conversation is both sides, in time order: with "other actions" off, a scripted
    worker's story showed only the private messages it received (its own were actions)."""
    out, _, _ = folder
    index, _, _, _ = viewer
    events = [
        json.loads(x)
        for x in (out / "base" / "base-seed0000" / "events.jsonl").read_text().splitlines()
    ]
    sent = [e for e in events if e["kind"] == "message" and e["worker"] == "W3"]
    got = [e for e in events if e["kind"] == "message" and e["to"] == "W3" and e["worker"] != "W3"]
    assert any(e["to"] for e in sent) and got  # the log names sender and recipient
    with offline_page(browser) as page:
        _open(page, index, "#run=base/base-seed0000&tab=agent&w=W3")
        page.wait_for_selector("#story")
        page.uncheck('.story-opts input[data-opt="actions"]')
        msgs = page.locator('#story .story-item[data-kind="message"]')
        seqs = [int(s) for s in msgs.evaluate_all("xs => xs.map(x => x.dataset.seq)")]
        assert seqs == sorted(e["seq"] for e in sent + got)
        said = page.locator('#story .story-item.said[data-kind="message"]').all_inner_texts()
        assert len(said) == len(sent)
        private = next(e for e in sent if e["to"])
        text = page.locator(f'#story .story-item[data-seq="{private["seq"]}"]').inner_text()
        assert f"to {private['to']}" in text and private["text"] in text
        # and off: neither side
        page.uncheck('.story-opts input[data-opt="messages"]')
        assert msgs.count() == 0


def _llm_call(run_id: str, worker: str, **kw) -> dict:
    call = {
        "kind": "llm_call", "v": 1, "run_id": run_id, "seq": 0, "t": 0.0, "subrun": 1,
        "round": 1, "worker": worker, "role": "negotiator", "phase": "declare", "model": "m1",
        "prompt_tokens": 400, "completion_tokens": 10, "cost_usd": 0.00042,
    }  # fmt: skip
    return {**call, **kw}


@pytest.fixture(scope="module")
def llm_viewer(folder, tmp_path_factory):
    """Two runs: base-seed0000 as it is (scripted, no API call) and base-seed0001 with 12 LLM
    calls of W1 inserted (4,920 tokens, $0.00504; none failed)."""
    out, _, _ = folder
    root = tmp_path_factory.mktemp("viewer_llm")
    for name in ("base-seed0000", "base-seed0001"):
        shutil.copytree(out / "base" / name, root / "base" / name)
    log = root / "base" / "base-seed0001" / "events.jsonl"
    lines = [json.loads(x) for x in log.read_text().splitlines()]
    events = [lines[0], *(_llm_call("base-seed0001", "W1") for _ in range(12)), *lines[1:]]
    for i, e in enumerate(events):
        e["seq"] = i
    log.write_text("".join(json.dumps(e) + "\n" for e in events))
    res = build_viewer(root)
    assert res.runs == 2 and res.bad == []
    return res.index


def test_calls_without_usage_read_unknown_in_every_view_never_zero(browser, folder, tmp_path):
    """One call of three failed (no token counts): its head read '0+0 tokens', the LLM tab's
    per-model sums passed for the whole and its cost read 'unpriced', and the story said
    'cost unknown' for calls whose cost is mostly known. Every view says what is known as a
    lower bound, in the report's wording."""
    out, _, _ = folder
    run = tmp_path / "v" / "base" / "base-seed0001"
    shutil.copytree(out / "base" / "base-seed0001", run)
    lines = [json.loads(x) for x in (run / "events.jsonl").read_text().splitlines()]
    failed = _llm_call(
        "base-seed0001", "W1", prompt_tokens=None, completion_tokens=None, cost_usd=None,
        error="APIConnectionError: connection refused",
    )  # fmt: skip
    calls = [_llm_call("base-seed0001", "W1"), _llm_call("base-seed0001", "W1"), failed]
    events = [lines[0], *calls, *lines[1:]]
    for i, e in enumerate(events):
        e["seq"] = i
    (run / "events.jsonl").write_text("".join(json.dumps(e) + "\n" for e in events))
    index = build_viewer(tmp_path / "v").index
    unknown = "unknown (1 calls without usage)"
    with offline_page(browser, width=1600) as page:
        _open(page, index)
        assert _cells(page, "tokens") == [f"≥ 820 + {unknown}"]
        # a number filter cannot compare it: the run is left out, and the count says so
        page.fill('#runs-table thead input[data-col="tokens"]', ">0")
        page.wait_for_function(
            "() => document.querySelector('#runs-table').getAttribute('data-rows') === '0'"
        )
        assert "1 left out whose filtered value is not a number" in page.inner_text("#table-bar")
        _open(page, index, "#run=base/base-seed0001&tab=llm")
        page.wait_for_selector("details.call")
        heads = page.locator("details.call summary").all_inner_texts()
        assert "tokens unknown (failed call)" in heads[2] and "cost unknown" in heads[2]
        assert "0+0" not in heads[2] and "410 tokens" not in heads[2]
        model = page.locator("#content table").first.all_inner_texts()[0].split("\n")[1]
        assert model.split("\t")[3:6] == [
            f"≥ 800 + {unknown}",
            f"≥ 20 + {unknown}",
            f"≥ $0.0008 + {unknown}",
        ]
        _open(page, index, "#run=base/base-seed0001&tab=agent&w=W1")
        line = page.locator("#story").locator("xpath=preceding::p[1]").inner_text()
        assert f"≥ 820 + {unknown} tokens" in line and f"cost ≥ $0.00084 + {unknown}" in line, line


MEASURE_COLS = {  # the runs table's column -> the diff's header
    "seed": "seed", "score": "score", "completion": "completion",
    "deadline_miss": "deadline misses", "credits": "credits spent",
    "invalid_actions": "invalid actions", "llm_calls": "LLM calls", "failed_calls": "failed calls",
    "repaired_calls": "repaired calls", "cost_usd": "LLM cost ($)", "tokens": "tokens",
}  # fmt: skip


def test_a_measure_reads_the_same_in_the_runs_table_the_diff_and_the_story(browser, llm_viewer):
    """One formatter for every view: the diff wrote credits 4585 and cost 0.0050 where the runs
    table wrote 4,585 and 0.00504, and the agent story wrote $0.0050."""
    with offline_page(browser, width=1600) as page:
        _open(page, llm_viewer)
        ids = _cells(page, "id")
        table = {col: dict(zip(ids, _cells(page, col), strict=True)) for col in MEASURE_COLS}
        assert table["tokens"]["base-seed0001"] == "4,920"
        assert table["cost_usd"]["base-seed0001"] == "0.00504"
        _open(page, llm_viewer, "#diff=base/base-seed0000&with=base/base-seed0001")
        page.wait_for_selector("#diff-view[data-ready]")
        head, side_a, side_b = (
            r.split("\t") for r in page.locator("#diff-measures tr").all_inner_texts()[:3]
        )
        for col, label in MEASURE_COLS.items():
            i = head.index(label)
            assert side_a[i] == table[col]["base-seed0000"], (col, side_a[i])
            assert side_b[i] == table[col]["base-seed0001"], (col, side_b[i])
        _open(page, llm_viewer, "#run=base/base-seed0001&tab=agent&w=W1")
        line = page.locator("#story").locator("xpath=preceding::p[1]").inner_text()
        assert "12 LLM call(s), 4,920 tokens" in line and "$0.00504" in line, line


LLM_ONLY = LLM_MEASURES


def test_llm_measures_of_a_scripted_run_say_they_do_not_apply(browser, llm_viewer):
    """A scripted run's LLM columns showed 0 (calls, cost) beside blanks (failed, repaired,
    tokens): not applicable and zero read alike. They show a mark whose title says why; a run
    that calls an LLM keeps its real zeros."""
    with offline_page(browser, width=1600) as page:
        _open(page, llm_viewer)
        ids = _cells(page, "id")
        for col in LLM_ONLY:
            i = page.eval_on_selector_all(
                "#runs-table thead tr:first-child th",
                "(ths, col) => ths.findIndex(th => th.dataset.col === col)",
                col,
            )
            cells = page.eval_on_selector_all(
                "#runs-table tbody tr[data-n]",
                "(trs, i) => trs.map(tr => [tr.children[i].textContent, tr.children[i].title])",
                i,
            )
            got = dict(zip(ids, cells, strict=True))
            assert got["base-seed0000"] == ["–", "scripted run: no API calls"], col
            assert got["base-seed0001"][0] not in ("", "–"), col
        assert _cells(page, "failed_calls")[ids.index("base-seed0001")] == "0"
        assert _cells(page, "bad_call_share")[ids.index("base-seed0001")] == "0.0%"
        # filtering and sorting treat the mark as no value
        page.fill('#runs-table thead input[data-col="llm_calls"]', "<1")
        page.wait_for_function("() => document.querySelector('#runs-table').dataset.rows === '0'")
        _open(page, llm_viewer, "#diff=base/base-seed0000&with=base/base-seed0001")
        page.wait_for_selector("#diff-view[data-ready]")
        rows = page.locator("#diff-measures tr")
        head, side_a, side_b, delta = (r.split("\t") for r in rows.all_inner_texts())
        i = head.index("LLM calls")
        assert (side_a[i], side_b[i], delta[i]) == ("–", "12", "")
        cell = page.locator('#diff-measures tr[data-side="A"] td.na').first
        assert cell.get_attribute("title") == "scripted run: no API calls"


def _cue(page, box: str) -> tuple[str, str, str]:
    """The classes of a scroll box and the opacity of its left and right shades."""
    return tuple(
        page.evaluate(
            """box => { const b = document.querySelector(box);
        return [b.className, getComputedStyle(b, '::before').opacity,
                getComputedStyle(b, '::after').opacity]; }""",
            box,
        )
    )


def test_a_table_wider_than_the_window_says_it_scrolls(browser, viewer):
    """A wide table gave no cue that it scrolls sideways: the edge past which columns lie is
    shaded and the runs table's bar says "scroll →", only while there is more to see."""
    index, _, _, _ = viewer
    with offline_page(browser, width=900) as page:
        _open(page, index)
        page.wait_for_function("() => document.querySelector('#table-box.more-right')")
        assert _cue(page, "#table-box") == ("scroll-box more-right", "0", "1")
        assert page.locator("#scroll-note").is_visible()
        assert "scroll →" in page.locator("#scroll-note").inner_text()
        page.eval_on_selector("#table-wrap", "w => { w.scrollLeft = w.scrollWidth; }")
        page.wait_for_function("() => document.querySelector('#table-box.more-left')")
        assert _cue(page, "#table-box") == ("scroll-box more-left", "1", "0")
        assert not page.locator("#scroll-note").is_visible()
        # the diff's measures too
        _open(page, index, "#diff=base/base-seed0000&with=memory_off/memory_off-seed0000")
        page.wait_for_selector("#diff-view[data-ready]")
        page.wait_for_function("() => document.querySelector('#diff-measures-box.more-right')")
        assert page.locator("#diff-view .scroll-note").is_visible()
    with offline_page(browser, width=2600) as page:  # it fits: no cue
        _open(page, index)
        assert _cue(page, "#table-box") == ("scroll-box", "0", "0")
        assert not page.locator("#scroll-note").is_visible()


def test_hostile_data_never_breaks_the_page(browser, folder, tmp_path):
    """A data file edited by hand (or by an older, buggy writer): a `__proto__` subrun, a
    worker that is an object, keys that shadow Object.prototype; and workers named like
    JavaScript's own properties. The run is still shown, the bad events counted."""
    out, _, _ = folder
    src = out / "base" / "base-seed0000"
    root = tmp_path / "hostile"
    run = root / "base" / "base-seed0000"
    shutil.copytree(src, run)
    names = {"W1": "__proto__", "W2": "constructor", "W3": "hasOwnProperty"}

    def rename(lines):
        text = json.dumps(lines)
        for old, new in names.items():
            text = text.replace(f'"{old}"', f'"{new}"')
        lines[:] = json.loads(text)

    _edit(run / "events.jsonl", rename)
    res = build_viewer(root)
    assert res.bad == [] and res.warnings == []
    data = root / "viewer" / "data" / "runs" / "000000.js"
    body = data.read_text()
    bad = (
        '{"kind":"message","seq":900001,"subrun":"__proto__","round":1,"worker":"W9","text":"x"},'
        '{"kind":"declared","seq":900002,"subrun":1,"round":{"a":1},"worker":"W9","bid":1},'
        '{"kind":"ballot","seq":900003,"subrun":1,"round":1,"worker":{"toString":1}},'
        '{"kind":7,"seq":900004},"not an event",'
        '{"kind":"message","seq":900005,"subrun":1,"round":1,"worker":"W4","to":"__proto__",'
        '"text":{"__proto__":{"polluted":1}},"turn":"x"},'
    )
    body = body.replace('"events":[', '"events":[' + bad, 1)
    body = body.replace('"labels":{', '"labels":{"__proto__":[["x","y","z"]],"constructor":5,', 1)
    data.write_text(body)
    with offline_page(browser) as page:
        _open(page, root / "viewer" / "index.html", "#run=base/base-seed0000&s=1&r=1")
        page.wait_for_selector("#round-title")
        problems = page.locator("#run-problems").inner_text()
        assert "5 event(s) in the data file have fields of the wrong type: left out" in problems
        workers = set(page.locator("#f-worker option").all_inner_texts())
        assert {"__proto__", "constructor", "hasOwnProperty", "W4", "W5"} <= workers
        for tab in ("timeline", "agent", "memory", "llm", "events", "rounds"):
            page.click(f'#tabs button[data-tab="{tab}"]')
        page.click('#tabs button[data-tab="agent"]')
        page.click('#agent-pick button[data-worker="__proto__"]')
        assert page.locator("#story .story-item").count() > 10
        assert page.evaluate("() => ({}).polluted") is None
        page.fill("#search", "x")
        page.select_option("#search-scope", "all")
        page.fill("#search", "deadline")
        page.wait_for_selector("#search-all[data-runs]")


def test_a_withheld_label_is_shown_struck_out_and_never_filtered_on(browser, folder, tmp_path):
    """A label the evidence classifier withheld (`evidence_and_withheld`) is shown beside the
    utterance with its reason, struck out; it is not a label: not a filter option, not counted."""
    out, _, _ = folder
    root = tmp_path / "withheld"
    shutil.copytree(out / "base" / "base-seed0000", root / "base" / "base-seed0000")
    build_viewer(root)
    where = "#run=base/base-seed0000&s=1&r=1"
    with offline_page(browser) as page:
        _open(page, root / "viewer" / "index.html", where)
        page.wait_for_selector("#round-title")
        before = page.locator("#f-label option").all_inner_texts()
    data = root / "viewer" / "data" / "runs" / "000000.js"
    head, body = data.read_text().split(",", 1)
    payload = json.loads(body.rstrip().removesuffix(";").removesuffix(")"))
    seq = next(
        e["seq"]
        for e in payload["events"]
        if e["kind"] == "message" and e["subrun"] == 1 and e["round"] == 1 and e["worker"] == "W2"
    )
    held = ["rival_targeting", "withheld", "W2 against W5; withheld: nothing before it"]
    payload["labels"].setdefault(str(seq), []).append(held)
    data.write_text(f"{head},{json.dumps(payload)});\n")
    with offline_page(browser) as page:
        _open(page, root / "viewer" / "index.html", where)
        page.wait_for_selector("#round-title")
        chip = page.locator(f'#content .msg[data-seq="{seq}"] .lab.withheld')
        assert chip.inner_text() == "rival_targeting (withheld)"
        assert "nothing before it" in chip.get_attribute("title")
        assert page.locator("#f-label option").all_inner_texts() == before


def test_live_mode_shows_runs_as_they_are_written(browser, folder, tmp_path):
    out, _, _ = folder
    study = tmp_path / "study"
    shutil.copytree(out / "base" / "base-seed0000", study / "base" / "base-seed0000")
    viewer_dir = tmp_path / "v"
    stop = threading.Event()
    t = threading.Thread(
        target=watch_viewer, args=(study, viewer_dir), kwargs={"interval": 0.3, "stop": stop.is_set}
    )
    t.start()
    try:
        with offline_page(browser) as page:
            for _ in range(100):
                if (viewer_dir / "index.html").exists() and (
                    viewer_dir / "data" / "index.js"
                ).exists():
                    break
                threading.Event().wait(0.1)
            _open(page, viewer_dir / "index.html")
            assert page.locator("#runs-table tbody tr[data-n]").count() == 1
            assert "live" in page.locator("#root-name").inner_text()
            src = out / "base" / "base-seed0001"
            dst = study / "base" / "base-seed0001"
            dst.mkdir()
            text = (src / "events.jsonl").read_text()
            (dst / "events.jsonl").write_text(text[: len(text) // 2])  # mid-line, no meta.json
            page.wait_for_selector("#runs-table tbody tr.st-running", timeout=15_000)
            row = page.locator("#runs-table tbody tr.st-running")
            assert "running" in row.inner_text() and "⚠" not in row.inner_text()
            row.locator("a").click()
            page.wait_for_selector("#run-head h2")
            assert "still being written" in page.locator("#run-head").inner_text()
            (dst / "events.jsonl").write_text(text)
            shutil.copy(src / "meta.json", dst / "meta.json")
            page.wait_for_function(
                "() => document.querySelector('#run-head')?.textContent.includes('completed')",
                timeout=15_000,
            )
            page.click("#to-runs")
            page.wait_for_function(
                "() => document.querySelectorAll('#runs-table tbody tr.st-completed').length === 2",
                timeout=15_000,
            )
    finally:
        stop.set()
        t.join(10)


def test_llm_workers_show_their_model_and_shares_never_round_onto_one(browser, folder, tmp_path):
    """A worker negotiated by an LLM is shown with its model (the LLM's name), not the persona
    it was seated with; the runs table names the model; 0.9992 never reads 1.00."""
    out, _, _ = folder
    run = tmp_path / "llm" / "llm_negotiators" / "llm_negotiators-seed0000"
    shutil.copytree(out / "base" / "base-seed0000", run)

    def as_llm(lines):
        for e in lines:  # the folder's run (mbb names a run's folder by its run id)
            e["run_id"] = run.name
        first = lines[0]
        first["params"]["models"] = {"local": {"model": "smollm2"}}
        for w in first["workers"][:2]:
            w.update(negotiator="llm", model="local")
        ev = next(e for e in lines if e["kind"] == "evaluation" and e["outcome"] == "terminated")
        ev["progress"] = 0.9992

    _edit(run / "events.jsonl", as_llm)
    res = build_viewer(tmp_path / "llm")
    index = _index(tmp_path / "llm" / "viewer")
    assert index["runs"][0]["model"] == "smollm2"
    # a cost partly unknown is said in the number's cell (the cell was blank: not a number)
    partial = "≥ $0.0030 + unknown (1 calls without usage)"
    index["runs"][0]["cost_usd"] = partial
    (tmp_path / "llm" / "viewer" / "data" / "index.js").write_text(
        "MBB.index(" + json.dumps(index) + ");\n"
    )
    with offline_page(browser) as page:
        _open(page, res.index)
        assert _cells(page, "model") == ["smollm2"]
        assert _cells(page, "cost_usd") == [partial]
        page.click("#runs-table tbody a")
        page.wait_for_selector("#round-title")
        rows = page.locator("#run-head table tr").all_inner_texts()
        assert rows[1].split("\t")[:3] == ["W1", "smollm2 (local)", "—"]
        assert rows[3].split("\t")[1] == "scripted" and rows[3].split("\t")[2] != "—"
        # as many decimals as it takes not to read 100 % (or 0 %)
        assert page.evaluate(
            "() => [0.99992, 1, 0.00004, 0, 0.5, 0.99996].map(v => MBB._lib.pct(v, 1))"
        ) == ["99.99%", "100.0%", "0.004%", "0.0%", "50.0%", "99.996%"]
        rows = [
            r.split("\t")
            for r in page.locator("#content table").first.all_inner_texts()[0].split("\n")
        ]
        terminated = [r for r in rows if "terminated" in r]
        assert terminated and all(r[-1] != "100.0%" for r in terminated)
        assert any(r[-1] == "99.9%" for r in terminated)


def test_the_page_follows_its_link_and_back_returns_to_the_table(browser, viewer):
    """A researcher's walk: a link pasted into an open viewer showed the old run under the new
    address; Back left the viewer (no step was ever added); a percent column's filter
    suggested `>0.5` (which keeps every run); cells that differ in a diff's outcomes were not
    marked; a search hit opened at the top of the run, the phrase out of sight."""
    index, n, _, unique = viewer
    with offline_page(browser) as page:
        _open(page, index, "#run=base/base-seed0000&tab=rounds")
        assert page.locator("#run-head h2").inner_text() == "base-seed0000"
        page.evaluate("location.hash = '#run=base/base-seed0001&tab=agent&w=W2'")
        page.wait_for_function(
            "() => document.querySelector('#run-head h2')?.textContent === 'base-seed0001'"
        )
        page.wait_for_selector("#agent-pick button.sel")
        assert page.locator("#agent-pick button.sel").inner_text() == "W2"
        # the table, sorted; a run from it; Back: the table as it was, Forward: the run again
        page.evaluate("location.hash = '#sort=completion:desc'")
        page.wait_for_selector("#runs-view:not([hidden])")
        page.locator("#runs-table tbody tr[data-n] a").first.click()
        page.wait_for_selector("#app:not([hidden]) #run-head h2")
        opened = page.locator("#run-head h2").inner_text()
        page.go_back()
        page.wait_for_selector("#runs-view:not([hidden])")
        assert page.url.endswith("#sort=completion:desc")
        assert "▼" in page.locator('#runs-table th[data-col="completion"]').inner_text()
        page.go_forward()
        page.wait_for_function(
            "name => !document.querySelector('#app').hidden"
            " && document.querySelector('#run-head h2')?.textContent === name",
            arg=opened,
        )
        # a share is filtered in percent: the box says so
        page.evaluate("location.hash = ''")
        page.wait_for_selector("#runs-view:not([hidden])")
        page.eval_on_selector('#runs-table th[data-col="seed"]', "th => th.click()")
        assert "sort=seed" in page.url  # the whole header cell sorts, not only its label
        box = page.locator('#runs-table input[data-col="completion"]')
        assert box.get_attribute("placeholder") == ">50" and "percent" in box.get_attribute("title")
    with offline_page(browser, width=1600) as page:  # the diff marks the outcome cells that differ
        a, b = "base/base-seed0000", "memory_off/memory_off-seed0000"
        _open(page, index, f"#diff={a}&with={b}&s=2")
        page.wait_for_selector(f'#diff-view[data-ready="{n[a]},{n[b]}"]')
        cols = page.locator("#diff-view .diff-grid .diff-col")
        marked = [cols.nth(i).locator("td.differs").count() for i in range(2)]
        assert marked[0] == marked[1] > 0  # memory off: scratch chars differ at least
        assert cols.nth(0).locator("td.differs").first.get_attribute("title").startswith("B: ")
    with offline_page(browser, width=1400) as page:  # a hit opens with its phrase in sight
        _open(page, index)
        page.fill("#search", PHRASE)
        page.wait_for_selector("#search-all[data-runs]")
        page.locator("#search-all .result").first.click()
        mark = page.locator(f'#content .msg[data-seq="{unique["seq"]}"] mark').first
        mark.wait_for()
        page.wait_for_function(
            "() => { const r = document.querySelector('#content mark').getBoundingClientRect();"
            " return r.top >= 0 && r.bottom <= innerHeight; }"
        )
        page.fill("#search", "no such phrase anywhere")
        page.select_option("#search-scope", "all")
        page.wait_for_selector("#search-all[data-runs='0']")
        assert page.locator("#search-all strong").inner_text().startswith("No match for")


def test_the_compare_pages_forest_plot_shows_under_its_policy(browser, tmp_path):
    """The study report's compare page showed only its forest plot's alt text: the page's
    policy loads images from data: only, and the plot was linked as compare/forest-00.svg."""
    from mbb.batch.report import build_report

    for name in ("base", "memory_off"):
        run_many(load_params(name, {"subruns": 2}), runs=2, out_dir=tmp_path / name, processes=1)
    build_report(tmp_path, viewer=False, quiet=True)
    with offline_page(browser) as page:
        page.goto((tmp_path / "compare.html").as_uri())
        forest = page.locator("section.cmp:not([hidden]) figure.forest img")
        assert forest.count() == 1
        page.wait_for_function(
            "() => document.querySelector('section.cmp:not([hidden]) figure.forest img').complete"
        )
        assert forest.evaluate("img => img.naturalWidth") > 0
        assert forest.evaluate("img => img.getBoundingClientRect().height") > 50
