"""HTML export: a notebook executed by papermill becomes one offline page with live charts."""

from __future__ import annotations

import os
import re
import sys
from pathlib import Path

import nbformat
import papermill
import pytest

from mbb.render import MIMETYPE
from mbb.report import embed_charts, export_html, external_urls, vega_bundle

ROOT = Path(__file__).resolve().parents[1]
BUNDLE_MARK = "window.vegaEmbed="  # occurs once in vl_convert.javascript_bundle()

CHARTS_CELL = """\
import sys
import altair as alt
import polars as pl
import mbb.render

mbb.render.enable()
df = pl.DataFrame({"x": list(range(20)), "y": [i % 7 for i in range(20)]})
line = alt.Chart(df, title="line").mark_line(tooltip=True).encode(x="x", y="y")
# A title that would end an inline <script> early if the spec were not escaped.
bars = alt.Chart(df, title="bars </script><b>").mark_bar(tooltip=True).encode(x="x:O", y="y")
display(line)
bars
"""


def _notebook(*cells: nbformat.NotebookNode) -> nbformat.NotebookNode:
    nb = nbformat.v4.new_notebook()
    nb.metadata["kernelspec"] = {
        "name": "python3",
        "display_name": "Python 3",
        "language": "python",
    }
    nb.cells = list(cells)
    return nb


@pytest.fixture(scope="module")
def executed(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A two-chart notebook executed through papermill (no cwd=, absolute paths only)."""
    tmp = tmp_path_factory.mktemp("nb")
    nb = _notebook(
        nbformat.v4.new_code_cell(f"import sys\nsys.path.insert(0, {str(ROOT)!r})"),
        nbformat.v4.new_code_cell(CHARTS_CELL),
        nbformat.v4.new_code_cell("print(sys.executable)"),
        nbformat.v4.new_markdown_cell("## Result\n\nInline math $x^2$ stays text offline."),
    )
    src, out = tmp / "charts.ipynb", tmp / "charts.out.ipynb"
    nbformat.write(nb, src)
    papermill.execute_notebook(str(src), str(out), kernel_name="python3", progress_bar=False)
    return out


@pytest.mark.notebook
def test_papermill_runs_in_this_venv_and_keeps_chart_outputs(executed: Path) -> None:
    nb = nbformat.read(executed, as_version=4)
    nbformat.validate(nb)
    # The python3 kernel is this interpreter: jupyter_client maps a kernelspec argv of "python"
    # to the launching sys.executable, so `mbb`'s dependencies are the venv's.
    printed = "".join(o.get("text", "") for o in nb.cells[2].outputs).strip()
    assert os.path.realpath(printed) == os.path.realpath(sys.executable)
    chart_outputs = [o for o in nb.cells[1].outputs if MIMETYPE in o.get("data", {})]
    assert len(chart_outputs) == 2
    for output in chart_outputs:
        assert {"image/png", "image/svg+xml", "text/plain"} <= set(output.data)
        assert isinstance(output.data[MIMETYPE], dict)


@pytest.mark.notebook
def test_export_html_is_self_contained_with_interactive_charts(executed: Path) -> None:
    html_path = export_html(executed)
    assert html_path == executed.with_suffix(".html")
    html = html_path.read_text(encoding="utf-8")

    assert 'class="jp-Notebook"' in html  # nbconvert's lab template
    assert "enable" in html  # inputs stay visible
    assert html.count(BUNDLE_MARK) == 1
    assert vega_bundle() in html  # inlined verbatim (not HTML-escaped)
    assert html.count('vegaEmbed("#mbb-chart-') == 2
    assert html.index(BUNDLE_MARK) < html.index('id="mbb-chart-0"')
    for n in range(2):
        assert re.search(rf'<div class="mbb-chart" id="mbb-chart-{n}"><svg', html)
        assert f'vegaEmbed("#mbb-chart-{n}", {{' in html
    # The hostile title is escaped inside the script; the only "</script>" are real tag ends.
    assert "bars <\\/script><b>" in html
    assert html.count("</script>") == len(re.findall(r"<script\b", html))

    assert external_urls(html) == []
    for cdn in ("cdnjs", "cdn.jsdelivr", "unpkg.com", "require.js", "mathjax", "mermaid.esm"):
        assert cdn not in html.lower()
    assert len(html.encode()) < 2_000_000


@pytest.mark.notebook
def test_export_html_to_explicit_path(executed: Path, tmp_path: Path) -> None:
    target = tmp_path / "sub" / "page.html"
    assert export_html(executed, target) == target
    assert target.read_text(encoding="utf-8").count(BUNDLE_MARK) == 1


def test_export_without_charts_has_no_bundle(tmp_path: Path) -> None:
    cell = nbformat.v4.new_code_cell("print('hi')", execution_count=1)
    cell.outputs = [nbformat.v4.new_output("stream", name="stdout", text="hi\n")]
    nb = _notebook(cell, nbformat.v4.new_markdown_cell("Math $a+b$ and [a link](https://x.org)."))
    path = tmp_path / "plain.ipynb"
    nbformat.write(nb, path)

    html = export_html(path).read_text(encoding="utf-8")
    assert BUNDLE_MARK not in html
    assert "vegaEmbed" not in html
    assert "hi" in html
    assert external_urls(html) == ["https://x.org"]  # a markdown link, loads nothing
    assert external_urls(html, include_links=False) == []
    assert len(html.encode()) < 600_000


def test_embed_charts_rerenders_missing_svg() -> None:
    spec = {
        "data": {"values": [{"a": 1}, {"a": 2}]},
        "mark": "point",
        "encoding": {"x": {"field": "a", "type": "quantitative"}},
    }
    cell = nbformat.v4.new_code_cell("c", execution_count=1)
    cell.outputs = [
        nbformat.v4.new_output("display_data", data={MIMETYPE: spec, "text/plain": "<c>"}),
        nbformat.v4.new_output("stream", name="stdout", text="x\n"),
    ]
    nb = _notebook(cell)
    assert embed_charts(nb) == 1
    data = nb.cells[0].outputs[0].data
    assert set(data) == {"text/html", "text/plain"}
    assert '<div class="mbb-chart" id="mbb-chart-0"><svg' in data["text/html"]


def test_external_urls_finds_every_kind_of_reference() -> None:
    page = (
        '<script src="https://cdn.example/a.js"></script>'
        "<link rel=stylesheet href='http://fonts.example/f.css'>"
        '<img src="//img.example/i.png" srcset="local.png 1x, https://img.example/2x.png 2x">'
        '<style>@import "https://css.example/x.css"; p{background:url(http://bg.example/b)}</style>'
        '<a href="#anchor">local</a><img src="data:image/png;base64,AAAA">'
        '<script>a.href="https://not-an-attribute.example";</script>'
    )
    assert external_urls(page) == [
        "https://cdn.example/a.js",
        "http://fonts.example/f.css",
        "//img.example/i.png",
        "https://img.example/2x.png",
        "https://css.example/x.css",
        "http://bg.example/b",
    ]
