"""Open the generated HTML report in headless Chromium with the network disabled.

Checks that no request leaves the page (everything is inlined), and that every chart was drawn
by vega-embed (the interactive renderer, not just the static SVG fallback). A screenshot is
saved under outputs/screenshots/.
"""

from __future__ import annotations

import shutil

import pytest

from mbb.batch.notebooks import execute_notebook
from mbb.batch.report import build_report
from mbb.core.paths import PROJECT_ROOT

CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")


@pytest.fixture(scope="module")
def report(tmp_path_factory, root):
    out = tmp_path_factory.mktemp("report")
    cond_dir = out / "base"
    execute_notebook(
        root / "notebooks" / "run_condition.ipynb",
        cond_dir,
        {
            "params_path": str(root / "params" / "base.yaml"),
            "overrides": {"subruns": 2},
            "out_dir": str(cond_dir),
            "runs": 2,
        },
    )
    return build_report(out), cond_dir / "run_condition.html"


@pytest.mark.notebook
def test_report_renders_offline_in_chromium(report):
    if CHROMIUM is None:
        pytest.fail("Chromium is needed for this test: apt-get install -y chromium")
    from playwright.sync_api import sync_playwright

    index, page_path = report
    requests: list[str] = []
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
        page = browser.new_page(viewport={"width": 1280, "height": 900})
        page.on("request", lambda r: requests.append(r.url))
        page.goto(index.as_uri())
        assert "mbb report" in page.title()
        assert page.locator("td.ok").count() == 1
        page.goto(page_path.as_uri())
        n = page.locator("div.mbb-chart").count()
        assert n == 7  # the run_condition notebook draws seven charts
        # vega-embed marks each container and draws its own SVG inside it
        page.wait_for_function(
            "n => document.querySelectorAll('div.mbb-chart.vega-embed svg.marks').length === n",
            arg=n,
            timeout=30_000,
        )
        drawn = page.evaluate(
            "() => [...document.querySelectorAll('div.mbb-chart svg.marks')]"
            ".map(s => s.querySelectorAll('path, rect, line, text').length)"
        )
        assert len(drawn) == n and all(k > 10 for k in drawn), drawn
        shots = PROJECT_ROOT / "outputs" / "screenshots"
        shots.mkdir(parents=True, exist_ok=True)
        page.screenshot(path=str(shots / "run_condition_report.png"), full_page=True)
        browser.close()
    external = [u for u in requests if not u.startswith(("file:", "data:", "about:", "blob:"))]
    assert external == [], external
