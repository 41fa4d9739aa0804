"""Charts are interactive in JupyterLab too, offline: a papermill-executed notebook opened in a
real JupyterLab (headless Chromium, every request off 127.0.0.1 blocked) is drawn by JupyterLab's
built-in Vega renderer (vega-embed's SVG marks and its actions menu), not shown as the PNG."""

from __future__ import annotations

import shutil
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import nbformat
import papermill
import pytest

ROOT = Path(__file__).resolve().parents[1]
CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")
CELL = f"""\
import sys
sys.path.insert(0, {str(ROOT)!r})
import altair as alt, polars as pl, mbb.viz.render
mbb.viz.render.enable()
df = pl.DataFrame({{"x": list(range(10)), "y": [i % 4 for i in range(10)]}})
alt.Chart(df, title="bars").mark_bar(tooltip=True).encode(x="x:O", y="y")
"""


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.mark.notebook
def test_chart_is_interactive_in_jupyterlab_offline(tmp_path: Path) -> None:
    if CHROMIUM is None:
        pytest.fail("Chromium is needed for this test: apt-get install -y chromium")
    jupyter = Path(sys.executable).parent / "jupyter"
    if not (jupyter.is_file() and (Path(sys.executable).parent / "jupyter-lab").is_file()):
        pytest.skip("JupyterLab is not installed (pip install -e '.[dev]')")
    from playwright.sync_api import sync_playwright

    nb = nbformat.v4.new_notebook()
    nb.metadata["kernelspec"] = {
        "name": "python3",
        "display_name": "Python 3",
        "language": "python",
    }
    nb.cells = [nbformat.v4.new_code_cell(CELL)]
    nbformat.write(nb, tmp_path / "src.ipynb")
    papermill.execute_notebook(
        str(tmp_path / "src.ipynb"), str(tmp_path / "chart.ipynb"), progress_bar=False
    )
    nbformat.validate(nbformat.read(tmp_path / "chart.ipynb", as_version=4))

    port = _free_port()
    server = subprocess.Popen(
        [
            str(jupyter),
            "lab",
            "--no-browser",
            f"--port={port}",
            "--ip=127.0.0.1",
            "--allow-root",
            "--ServerApp.token=",
            "--ServerApp.password=",
            f"--ServerApp.root_dir={tmp_path}",
            "--LabApp.news_url=",
        ],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    base = f"http://127.0.0.1:{port}"
    blocked: list[str] = []
    try:
        for _ in range(120):
            try:
                urllib.request.urlopen(f"{base}/api", timeout=1)
                break
            except OSError:
                time.sleep(0.5)
        with sync_playwright() as p:
            browser = p.chromium.launch(executable_path=CHROMIUM, args=["--no-sandbox"])
            ctx = browser.new_context(viewport={"width": 1200, "height": 800})

            def route(r):
                if r.request.url.startswith((base, "data:", "blob:")):
                    r.continue_()
                else:
                    blocked.append(r.request.url)
                    r.abort()

            ctx.route("**/*", route)
            page = ctx.new_page()
            page.goto(f"{base}/lab/tree/chart.ipynb")
            page.wait_for_selector(".jp-OutputArea-output .vega-embed canvas", timeout=90_000)
            out = page.locator(".jp-OutputArea-output").first
            assert out.locator(".vega-embed").count() == 1  # vega-embed, with its actions menu
            assert out.locator("img").count() == 0  # not the PNG fallback
            box = out.locator(".vega-embed canvas").bounding_box()
            assert box is not None and box["width"] > 200 and box["height"] > 200
            # hover the tallest bars (x = 3 and 7): the chart answers with a tooltip
            for frac in (0.34, 0.36, 0.38, 0.70, 0.72, 0.74):
                page.mouse.move(box["x"] + box["width"] * frac, box["y"] + box["height"] * 0.45)
                page.wait_for_timeout(300)
                if page.locator("#vg-tooltip-element.visible").count():
                    break
            assert page.locator("#vg-tooltip-element.visible").count() == 1
            browser.close()
    finally:
        server.terminate()
        try:
            server.wait(timeout=20)
        except subprocess.TimeoutExpired:
            server.kill()
            server.wait()
    assert blocked == [], blocked
