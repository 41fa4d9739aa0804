"""Self-contained, offline HTML export of executed notebooks with interactive charts.

Every output carrying :data:`mbb.render.MIMETYPE` (a Vega-Lite spec written by the ``mbb``
renderer) becomes a ``<div class="mbb-chart">`` holding the static SVG, followed by a script that
calls ``vegaEmbed`` on it: with JavaScript the chart is interactive (tooltips), without it the SVG
still shows. The Vega/Vega-Lite/vega-embed bundle from ``vl_convert.javascript_bundle()`` is
inlined exactly once, in the page head, and only when the notebook has charts.

The page loads nothing from the network: nbconvert's lab template references require.js, MathJax,
mermaid and the Jupyter widgets manager on CDNs; those blocks are overridden to nothing (so LaTeX
in markdown stays as source text and widgets are not rendered, neither of which our notebooks
use). CSS, the theme and images are already inlined by nbconvert.

Size: the JS bundle is ~0.9 MB, so a page with charts is ~1.2 MB (a notebook without charts
~0.3 MB of nbconvert CSS); each chart adds its spec (inlined data) plus its SVG.
"""

from __future__ import annotations

import json
import re
from html.parser import HTMLParser
from pathlib import Path
from typing import Any

import nbformat
import vl_convert as vlc
from nbconvert import HTMLExporter

from mbb.render import MIMETYPE, render_svg, vl_version

__all__ = ["build_report", "embed_charts", "export_html", "external_urls", "vega_bundle"]

# Extends nbconvert's "lab" index template: every block that would load from a CDN is emptied,
# and the Vega bundle (if any) is inlined in the head, before the first chart.
_TEMPLATE = """{%- extends 'index.html.j2' -%}
{%- block html_head_js_requirejs -%}{%- endblock html_head_js_requirejs -%}
{%- block jupyter_widgets -%}{%- endblock jupyter_widgets -%}
{%- block html_head_js_mathjax -%}{%- endblock html_head_js_mathjax -%}
{%- block html_head_js_mermaidjs -%}{%- endblock html_head_js_mermaidjs -%}
{%- block html_head_css -%}
{{ super() }}
{%- if resources.mbb_vega_bundle %}
<style type="text/css">
.mbb-chart { display: inline-block; }
.mbb-chart .vg-tooltip { font-family: var(--jp-ui-font-family); }
</style>
<script>
{{ resources.mbb_vega_bundle }}
</script>
{%- endif %}
{%- endblock html_head_css -%}
"""

_CSS_URL = re.compile(r"""(?:url\(\s*["']?|@import\s+["'])\s*((?:https?:)?//[^"')\s]+)""")
_EXTERNAL = re.compile(r"^(?:https?:)?//", re.IGNORECASE)
_LINK_TAGS = frozenset({"a", "area"})


class _UrlCollector(HTMLParser):
    """Collects external ``src``/``href``/``srcset`` attribute values and CSS ``url()`` targets.

    A real HTML parser rather than a regex over the page: script bodies (the 0.9 MB bundle) are
    opaque CDATA to it, so JS code such as ``a.href=x`` is not mistaken for an attribute.
    """

    def __init__(self, include_links: bool) -> None:
        super().__init__(convert_charrefs=True)
        self.include_links = include_links
        self.urls: list[str] = []
        self._in_style = False

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self._in_style = tag == "style"
        for name, value in attrs:
            if value is None:
                continue
            if name in ("src", "href"):
                if name == "href" and tag in _LINK_TAGS and not self.include_links:
                    continue
                if _EXTERNAL.match(value.strip()):
                    self.urls.append(value.strip())
            elif name == "srcset":
                candidates = (c.strip().split(" ")[0] for c in value.split(","))
                self.urls.extend(c for c in candidates if _EXTERNAL.match(c))
            elif name == "style":
                self.urls.extend(m.group(1) for m in _CSS_URL.finditer(value))

    def handle_endtag(self, tag: str) -> None:
        if tag == "style":
            self._in_style = False

    def handle_data(self, data: str) -> None:
        if self._in_style:
            self.urls.extend(m.group(1) for m in _CSS_URL.finditer(data))


def vega_bundle() -> str:
    """The offline Vega + Vega-Lite + vega-embed bundle; defines ``window.vegaEmbed``.

    Built for the same Vega-Lite version as the static images. vl-convert caches it per process
    (first call ~2.5 s, later ones ~1 ms).
    """
    return vlc.javascript_bundle(vl_version=vl_version())


def _script_json(value: Any) -> str:
    """JSON safe to place inside an inline ``<script>``: ``</`` and ``<!--`` cannot occur."""
    return (
        json.dumps(value, separators=(",", ":"))
        .replace("</", "<\\/")
        .replace("<!--", "<\\!--")
        .replace("\u2028", "\\u2028")
        .replace("\u2029", "\\u2029")
    )


def _chart_html(index: int, spec: dict[str, Any], svg: str) -> str:
    """The div (static SVG fallback) and the script that upgrades it to an interactive chart."""
    chart_id = f"mbb-chart-{index}"
    return (
        f'<div class="mbb-chart" id="{chart_id}">{svg}</div>\n'
        "<script>\n"
        f'vegaEmbed("#{chart_id}", {_script_json(spec)}, '
        '{actions: false, renderer: "svg"}).catch(console.error);\n'
        "</script>\n"
    )


def embed_charts(nb: nbformat.NotebookNode) -> int:
    """Replace, in place, every chart output's data by the interactive HTML; return the count.

    The SVG stored in the output is reused; it is re-rendered only if missing. PNG and spec are
    dropped from the exported copy: the HTML shows the SVG/vegaEmbed version and the page stays
    small.
    """
    count = 0
    for cell in nb.cells:
        if cell.get("cell_type") != "code":
            continue
        for output in cell.get("outputs", []):
            data = output.get("data")
            if not data or MIMETYPE not in data:
                continue
            spec = data[MIMETYPE]
            if isinstance(spec, str):  # tolerate a spec stored as JSON text
                spec = json.loads(spec)
            svg = data.get("image/svg+xml")
            if isinstance(svg, list):  # nbformat may keep multiline strings split
                svg = "".join(svg)
            if not svg:
                svg = render_svg(spec)
            text = data.get("text/plain", "<mbb chart>")
            output["data"] = nbformat.from_dict(
                {"text/html": _chart_html(count, spec, svg), "text/plain": text}
            )
            output["metadata"] = nbformat.from_dict({})
            count += 1
    return count


def _exporter() -> HTMLExporter:
    """nbconvert's lab HTML exporter with every CDN reference switched off."""
    return HTMLExporter(
        template_name="lab",
        raw_template=_TEMPLATE,
        mathjax_url="",
        require_js_url="",
        mermaid_js_url="",
        mermaid_layout_elk_js_url="",
        jupyter_widgets_base_url="",
        widget_renderer_url="",
        embed_images=True,
    )


def export_html(notebook_path: Path, html_path: Path | None = None) -> Path:
    """Export an executed notebook to a self-contained offline HTML page; return its path.

    ``html_path`` defaults to the notebook's path with ``.html``. Inputs stay visible. Expect
    ~1.2 MB with charts (the inlined ~0.9 MB Vega bundle, once per page) and ~0.3 MB without.
    """
    notebook_path = Path(notebook_path)
    html_path = Path(html_path) if html_path is not None else notebook_path.with_suffix(".html")
    nb = nbformat.read(notebook_path, as_version=4)
    n_charts = embed_charts(nb)
    resources: dict[str, Any] = {
        "metadata": {"name": notebook_path.stem, "path": str(notebook_path.parent)},
        "mbb_vega_bundle": vega_bundle() if n_charts else "",
    }
    body, _ = _exporter().from_notebook_node(nb, resources=resources)
    html_path.parent.mkdir(parents=True, exist_ok=True)
    html_path.write_text(body, encoding="utf-8")
    return html_path


def external_urls(html: str, include_links: bool = True) -> list[str]:
    """Every http(s) URL the page references: ``src=``, ``href=``, ``srcset=`` and CSS ``url()``.

    Protocol-relative ``//host/...`` counts as external (served over http it is). With
    ``include_links=False``, ``<a href>`` navigation links (e.g. from markdown) are skipped: they
    load nothing. URLs are returned in page order, duplicates kept, so a failing test lists every
    offender.
    """
    collector = _UrlCollector(include_links=include_links)
    collector.feed(html)
    collector.close()
    return collector.urls


# --- reports over a folder of executed notebooks ---------------------------------------------
_INDEX_CSS = """
body{font-family:system-ui,-apple-system,Segoe UI,Roboto,sans-serif;margin:2rem;color:#222}
table{border-collapse:collapse;margin-top:1rem}th,td{border:1px solid #ccc;padding:.35rem .6rem;
text-align:right}th{background:#f3f3f3}td.l,th.l{text-align:left}.failed{color:#b00020;
font-weight:600}.ok{color:#1b7f3b}.skipped{color:#666}code{background:#f6f6f6;padding:0 .2rem}
"""


def _notebook_failed(nb_path: Path) -> str | None:
    """The first error of an executed notebook (ename: evalue), or None."""
    nb = nbformat.read(nb_path, as_version=4)
    for cell in nb.cells:
        for out in cell.get("outputs", []):
            if out.get("output_type") == "error":
                return f"{out.get('ename')}: {out.get('evalue')}"[:300]
    return None


def _condition_summary(folder: Path) -> dict[str, Any]:
    import polars as pl

    ev_path = folder / "tables" / "evaluations.parquet"
    if not ev_path.is_file():
        return {}
    e = pl.read_parquet(ev_path)
    if e.is_empty():
        return {"runs": 0}
    row: dict[str, Any] = {
        "runs": e["run_id"].n_unique(),
        "completion": (e["outcome"] == "completed").mean(),
        "deadline_miss": (e["outcome"] == "terminated").mean(),
        "progress": e["progress"].mean(),
    }
    d_path = folder / "tables" / "declarations.parquet"
    if d_path.is_file():
        row["mean_bid"] = pl.read_parquet(d_path)["bid"].mean()
    return row


def _spend_by_model(folders: list[Path]) -> str:
    from mbb.study import spend_table_html

    return spend_table_html(folders)


def build_report(root: Path) -> Path:
    """Export every executed notebook under `root` to HTML (when stale) and write
    `root/index.html`: one row per notebook with status, a summary of its condition's tables,
    and links. Returns the index path. Everything renders offline."""
    import html as _html

    root = Path(root).resolve()
    status_of: dict[str, str] = {}
    manifest = root / "sweep.json"
    if manifest.is_file():
        for r in json.loads(manifest.read_text()).get("results", []):
            status_of[str(Path(r["notebook"]).resolve())] = r["status"]
    rows = []
    for nb_path in sorted(root.rglob("*.ipynb")):
        if ".ipynb_checkpoints" in nb_path.parts:
            continue
        page = nb_path.with_suffix(".html")
        if not page.is_file() or page.stat().st_mtime < nb_path.stat().st_mtime:
            export_html(nb_path, page)
        error = _notebook_failed(nb_path)
        status = "failed" if error else status_of.get(str(nb_path.resolve()), "ok")
        rows.append((nb_path, page, status, error, _condition_summary(nb_path.parent)))

    def fmt(v: Any, pct: bool = False) -> str:
        if v is None:
            return ""
        return f"{v:.1%}" if pct else (f"{v:.1f}" if isinstance(v, float) else str(v))

    body = []
    for nb_path, page, status, error, s in rows:
        rel = page.relative_to(root).as_posix()
        cond = nb_path.parent.relative_to(root).as_posix() or "."
        body.append(
            "<tr>"
            f"<td class=l>{_html.escape(cond)}</td>"
            f'<td class=l><a href="{_html.escape(rel)}">{_html.escape(nb_path.stem)}</a></td>'
            f"<td class='l {status}'>{status}</td>"
            f"<td>{fmt(s.get('runs'))}</td><td>{fmt(s.get('completion'), True)}</td>"
            f"<td>{fmt(s.get('deadline_miss'), True)}</td><td>{fmt(s.get('progress'), True)}</td>"
            f"<td>{fmt(s.get('mean_bid'))}</td>"
            f"<td class=l>{_html.escape(error or '')}</td></tr>"
        )
    n_failed = sum(1 for r in rows if r[2] == "failed")
    page_html = (
        "<!doctype html><html><head><meta charset='utf-8'><title>mbb report</title>"
        f"<style>{_INDEX_CSS}</style></head><body>"
        f"<h1>mbb report</h1><p><code>{_html.escape(str(root))}</code> — {len(rows)} notebook(s),"
        f" {n_failed} failed.</p><table><tr><th class=l>condition</th><th class=l>notebook</th>"
        "<th class=l>status</th><th>runs</th><th>completion</th><th>deadline miss</th>"
        "<th>mean progress</th><th>mean bid</th><th class=l>error</th></tr>"
        + "".join(body)
        + "</table>"
        + _spend_by_model(sorted({r[0].parent for r in rows}))
        + "</body></html>"
    )
    index = root / "index.html"
    index.write_text(page_html, encoding="utf-8")
    return index
