"""Offline chart rendering for notebooks and README figures.

Altair's built-in renderers either need a CDN (blank charts offline), fail papermill's
validation (the Vega-Lite v6 mimetype has no ``+json`` suffix), or do not survive being
reopened untrusted. The ``mbb`` renderer emits, per chart:

- ``image/png`` (ppi 144, sharp on high-DPI screens): shows everywhere, trusted or not;
- ``image/svg+xml``: crisp in live JupyterLab and in HTML;
- :data:`VEGA_MIMETYPE` (the spec compiled to Vega by vl-convert): JupyterLab renders it
  natively with the Vega it bundles, so charts are interactive (tooltips) in JupyterLab too,
  offline; a ``+json`` type, so papermill's validation accepts it. Front ends without a Vega
  renderer fall back to the SVG/PNG;
- :data:`MIMETYPE` (the Vega-Lite spec as a dict): read back by :mod:`mbb.batch.report` to build
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

from mbb.viz.theme import FONT_SIZES

__all__ = [
    "LEGIBLE_CONFIG",
    "MIMETYPE",
    "PPI",
    "RENDERER_NAME",
    "VEGA_MIMETYPE",
    "chart_title",
    "enable",
    "legible",
    "mimebundle",
    "render_png",
    "render_svg",
    "save_chart",
    "to_vega",
    "vl_version",
]

MIMETYPE = "application/vnd.mbb.vegalite.v6+json"
VEGA_MIMETYPE = "application/vnd.vega.v5+json"  # JupyterLab 4's built-in Vega renderer
# Vega-Lite compiles for JupyterLab's Vega 5 with the newest Vega-Lite 5 vl-convert has (the same
# spec compiled by Vega-Lite 6 targets Vega 6); if that fails, the Vega-Lite 6 compilation.
_LAB_VL_VERSION = "v5_21"
# legible font sizes (the shared theme's), merged under a chart's own config (which wins)
LEGIBLE_CONFIG: dict[str, Any] = FONT_SIZES
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


def legible(spec: dict[str, Any]) -> dict[str, Any]:
    """A copy of `spec` with :data:`LEGIBLE_CONFIG` under its own `config` (its own wins)."""
    config = dict(spec.get("config") or {})
    for group, values in LEGIBLE_CONFIG.items():
        config[group] = {**values, **(config.get(group) or {})}
    return {**spec, "config": config}


def to_vega(spec: dict[str, Any]) -> dict[str, Any]:
    """The Vega spec JupyterLab's built-in renderer draws (Vega 5)."""
    try:
        vega = vlc.vegalite_to_vega(spec, vl_version=_LAB_VL_VERSION)
    except Exception:  # a Vega-Lite 6 feature: its own compilation (Vega 6, mostly compatible)
        vega = vlc.vegalite_to_vega(spec, vl_version=vl_version())
    vega["$schema"] = "https://vega.github.io/schema/vega/v5.json"
    return vega


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
    spec = legible(spec)
    png = render_png(spec)
    svg = render_svg(spec)
    width, height = _png_size(png)
    factor = PPI / _DEFAULT_PPI
    data = {
        "image/png": base64.b64encode(png).decode("ascii"),
        "image/svg+xml": svg,
        VEGA_MIMETYPE: to_vega(spec),
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
    spec = legible(chart.to_dict())
    paths = {
        "png": path_stem.with_name(path_stem.name + ".png"),
        "svg": path_stem.with_name(path_stem.name + ".svg"),
        "json": path_stem.with_name(path_stem.name + ".vl.json"),
    }
    paths["png"].write_bytes(render_png(spec))
    paths["svg"].write_text(render_svg(spec), encoding="utf-8")
    paths["json"].write_text(json.dumps(spec, indent=2) + "\n", encoding="utf-8")
    return paths
