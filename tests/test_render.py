"""The mbb altair renderer: complete, valid mimebundles and README figure files, all offline."""

from __future__ import annotations

import base64
import json
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import altair as alt
import nbformat
import polars as pl
import pytest

from mbb.viz import render
from mbb.viz.render import MIMETYPE, VEGA_MIMETYPE

ROOT = Path(__file__).resolve().parents[1]
PNG_MAGIC = b"\x89PNG\r\n\x1a\n"


@pytest.fixture
def restore_altair() -> Iterator[None]:
    """Keep altair's global renderer/transformer state from leaking between tests."""
    renderer = alt.renderers.active
    transformer = alt.data_transformers.active
    options = dict(alt.data_transformers.options)
    yield
    alt.renderers.enable(renderer)
    alt.data_transformers.enable(transformer, **options)


@pytest.fixture
def chart() -> alt.Chart:
    df = pl.DataFrame({"x": [1, 2, 3, 4], "y": [3.0, 1.0, 4.0, 1.5]})
    return alt.Chart(df, title="tiny").mark_line(tooltip=True).encode(x="x", y="y")


def test_mimebundle_has_png_svg_spec_and_text(chart: alt.Chart) -> None:
    spec = chart.to_dict()
    data, metadata = render.mimebundle(spec)
    assert set(data) == {"image/png", "image/svg+xml", MIMETYPE, VEGA_MIMETYPE, "text/plain"}
    png = base64.b64decode(data["image/png"], validate=True)  # a str, as Jupyter expects
    assert png.startswith(PNG_MAGIC)
    assert "<svg" in data["image/svg+xml"]
    assert data[MIMETYPE] == render.legible(spec)  # legible font sizes under its own config
    assert data[MIMETYPE]["config"]["axis"]["labelFontSize"] == 12
    # JupyterLab's built-in renderer draws this Vega 5 spec: interactive charts, offline
    vega = data[VEGA_MIMETYPE]
    assert vega["$schema"].endswith("/vega/v5.json") and vega["marks"]
    assert json.loads(json.dumps(vega)) == vega
    assert data["text/plain"] == "<mbb chart: tiny>"
    # ppi 144 doubles the pixels; the metadata shows the image at its natural CSS size.
    width, height = render._png_size(png)
    assert metadata["image/png"] == {"width": round(width / 2), "height": round(height / 2)}


def test_enable_is_idempotent_and_used_by_repr(chart: alt.Chart, restore_altair: None) -> None:
    render.enable()
    render.enable()
    assert alt.renderers.active == "mbb"
    assert alt.data_transformers.active == "default"
    data, _ = chart._repr_mimebundle_()
    assert set(data) == {"image/png", "image/svg+xml", MIMETYPE, VEGA_MIMETYPE, "text/plain"}


def test_max_rows_error_is_kept(restore_altair: None) -> None:
    render.enable()
    big = pl.DataFrame({"x": list(range(5_001))})
    with pytest.raises(alt.MaxRowsError):
        alt.Chart(big).mark_tick().encode(x="x").to_dict()


def test_import_has_no_side_effects() -> None:
    code = "import altair as alt, mbb.viz.render; print(alt.renderers.active)"
    out = subprocess.run(
        [sys.executable, "-c", code],
        capture_output=True,
        text=True,
        check=True,
        env={"PYTHONPATH": str(ROOT), "PATH": "/usr/bin:/bin"},
    )
    assert out.stdout.strip() == "default"


def test_output_with_custom_mimetype_passes_nbformat_validation(chart: alt.Chart) -> None:
    data, metadata = render.mimebundle(chart.to_dict())
    nb = nbformat.v4.new_notebook()
    cell = nbformat.v4.new_code_cell("chart", execution_count=1)
    cell.outputs = [nbformat.v4.new_output("display_data", data=data, metadata=metadata)]
    nb.cells = [cell]
    nbformat.validate(nb)
    # And it survives a write/read round trip with the spec still a dict.
    text = nbformat.writes(nb)
    back = nbformat.reads(text, as_version=4)
    assert back.cells[0].outputs[0].data[MIMETYPE] == data[MIMETYPE]


def test_chart_title_variants() -> None:
    assert render.chart_title({"title": {"text": "a"}}) == "a"
    assert render.chart_title({"title": ["a", "b"]}) == "a b"
    assert render.chart_title({"description": "d"}) == "d"
    assert render.chart_title({}) == "untitled"


def test_save_chart_writes_png_svg_and_spec(chart: alt.Chart, tmp_path: Path) -> None:
    paths = render.save_chart(chart, tmp_path / "figs" / "fig1")
    assert paths == {
        "png": tmp_path / "figs" / "fig1.png",
        "svg": tmp_path / "figs" / "fig1.svg",
        "json": tmp_path / "figs" / "fig1.vl.json",
    }
    assert paths["png"].read_bytes().startswith(PNG_MAGIC)
    assert "<svg" in paths["svg"].read_text(encoding="utf-8")
    assert json.loads(paths["json"].read_text(encoding="utf-8")) == render.legible(chart.to_dict())


def test_vl_version_matches_altair_schema() -> None:
    major, minor = alt.SCHEMA_VERSION.lstrip("v").split(".")[:2]
    assert render.vl_version() == f"v{major}_{minor}"


def test_legible_keeps_a_charts_own_config() -> None:
    spec = {"mark": "point", "config": {"axis": {"labelFontSize": 20}, "view": {"stroke": None}}}
    out = render.legible(spec)
    assert out["config"]["axis"] == {"labelFontSize": 20, "titleFontSize": 13}
    assert out["config"]["view"] == {"stroke": None} and out["config"]["title"]["fontSize"] == 15
    assert "config" in spec and spec["config"]["axis"] == {"labelFontSize": 20}  # not mutated


def test_every_figure_compiles_for_jupyterlab(base_batch) -> None:
    from mbb.viz import run as figures

    for fn in (figures.resource_timeline, figures.bids_by_round, figures.outcomes_by_subrun):
        vega = render.to_vega(fn(base_batch.tables).to_dict())
        assert vega["$schema"].endswith("/vega/v5.json") and vega["marks"], fn.__name__
