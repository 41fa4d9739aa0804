"""Offline chart rendering for notebooks and README figures.

Altair's built-in renderers either need a CDN (blank charts offline), fail papermill's
validation (the Vega-Lite v6 mimetype has no ``+json`` suffix), or do not survive being
reopened untrusted. The ``mbb`` renderer emits, per chart:

- ``image/png`` (ppi 144, sharp on high-DPI screens): shows everywhere, trusted or not;
- ``image/svg+xml``: crisp in live JupyterLab and in HTML;
- :data:`MIMETYPE` (the Vega-Lite spec as a dict): read back by :mod:`mbb.report` to build
  interactive ``vegaEmbed`` charts in the self-contained HTML export;
- ``text/plain``: a short label instead of a ``alt.Chart(...)`` repr.

Call :func:`enable` explicitly (e.g. in a notebook's first cell); importing this module has no
side effects.
"""

from __future__ import annotations

import base64
import json
import struct
from pathlib import Path
from typing import Any

import altair as alt
import vl_convert as vlc

__all__ = [
    "MIMETYPE",
    "PPI",
    "RENDERER_NAME",
    "chart_title",
    "enable",
    "mimebundle",
    "render_png",
    "render_svg",
    "save_chart",
    "vl_version",
]

MIMETYPE = "application/vnd.mbb.vegalite.v6+json"
RENDERER_NAME = "mbb"
PPI = 144  # 2x the 72 ppi default: sharp PNGs on high-DPI screens and in READMEs
_DEFAULT_PPI = 72
MAX_ROWS = 5_000  # altair's own default; figures aggregate in polars before charting


def vl_version() -> str:
    """vl-convert's version key (e.g. ``"v6_4"``) matching altair's Vega-Lite schema.

    Pinning it keeps the static images, the HTML bundle and altair's validation on the same
    Vega-Lite release instead of vl-convert's newest one.
    """
    return "_".join(alt.SCHEMA_VERSION.split(".")[:2])


def render_png(spec: dict[str, Any], ppi: int = PPI) -> bytes:
    """PNG bytes of a Vega-Lite spec, rendered offline by vl-convert."""
    return vlc.vegalite_to_png(spec, vl_version=vl_version(), ppi=ppi)


def render_svg(spec: dict[str, Any]) -> str:
    """SVG text of a Vega-Lite spec, rendered offline by vl-convert."""
    return vlc.vegalite_to_svg(spec, vl_version=vl_version())


def chart_title(spec: dict[str, Any]) -> str:
    """Human label for ``text/plain``: the spec's title, else its description, else "untitled"."""
    title = spec.get("title")
    if isinstance(title, dict):
        title = title.get("text")
    if isinstance(title, list):
        title = " ".join(str(t) for t in title)
    if not title:
        title = spec.get("description") or "untitled"
    return str(title)


def _png_size(png: bytes) -> tuple[int, int]:
    """(width, height) in pixels from the PNG IHDR chunk (always the first chunk)."""
    width, height = struct.unpack(">II", png[16:24])
    return width, height


def mimebundle(spec: dict[str, Any]) -> tuple[dict[str, Any], dict[str, Any]]:
    """The renderer: (data, metadata) for one Vega-Lite spec.

    The PNG metadata carries the CSS size (pixels / 2 at ppi 144) so the high-DPI image is shown
    at the chart's natural size rather than doubled.
    """
    png = render_png(spec)
    svg = render_svg(spec)
    width, height = _png_size(png)
    factor = PPI / _DEFAULT_PPI
    data = {
        "image/png": base64.b64encode(png).decode("ascii"),
        "image/svg+xml": svg,
        MIMETYPE: spec,
        "text/plain": f"<mbb chart: {chart_title(spec)}>",
    }
    metadata = {"image/png": {"width": round(width / factor), "height": round(height / factor)}}
    return data, metadata


def _renderer(spec: dict[str, Any], **_options: Any) -> tuple[dict[str, Any], dict[str, Any]]:
    """Altair renderer entry point; embed options are ignored (the HTML export sets its own)."""
    return mimebundle(spec)


def enable() -> None:
    """Register (idempotent) and activate the ``mbb`` renderer and the default data transformer.

    The data transformer stays altair's ``default`` (data inlined into the spec, so the spec is
    self-contained) with its 5,000-row limit: figures aggregate first, and a too-large chart
    should fail loudly rather than bloat notebooks and HTML pages.
    """
    if RENDERER_NAME not in alt.renderers.names():
        alt.renderers.register(RENDERER_NAME, _renderer)
    alt.renderers.enable(RENDERER_NAME)
    alt.data_transformers.enable("default", max_rows=MAX_ROWS)


def save_chart(chart: alt.TopLevelMixin, path_stem: Path) -> dict[str, Path]:
    """Write ``<stem>.png`` (ppi 144), ``<stem>.svg`` and ``<stem>.vl.json`` for README figures.

    The spec is computed once and each format converted once. Returns ``{"png", "svg", "json"}``
    to paths. Parent directories are created.
    """
    path_stem = Path(path_stem)
    path_stem.parent.mkdir(parents=True, exist_ok=True)
    spec = chart.to_dict()
    paths = {
        "png": path_stem.with_name(path_stem.name + ".png"),
        "svg": path_stem.with_name(path_stem.name + ".svg"),
        "json": path_stem.with_name(path_stem.name + ".vl.json"),
    }
    paths["png"].write_bytes(render_png(spec))
    paths["svg"].write_text(render_svg(spec), encoding="utf-8")
    paths["json"].write_text(json.dumps(spec, indent=2) + "\n", encoding="utf-8")
    return paths
