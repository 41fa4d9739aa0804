"""Self-contained, offline HTML export of executed notebooks with interactive charts.

Every output carrying :data:`mbb.viz.render.MIMETYPE` (a Vega-Lite spec written by the ``mbb``
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

import html
import json
import os
import re
import sys
import urllib.parse
from collections.abc import Iterable
from html.parser import HTMLParser
from pathlib import Path
from typing import Any

import nbformat
import vl_convert as vlc
from nbconvert import HTMLExporter

from mbb.batch.runs import spend_table_html
from mbb.viz.render import MIMETYPE, render_svg, vl_version

__all__ = [
    "build_report",
    "comparison_tables",
    "embed_charts",
    "export_html",
    "external_urls",
    "own_notebooks",
    "vega_bundle",
    "write_comparison_files",
]

# Code cells are hidden by default in the shared page; a checkbox (CSS only, works without
# JavaScript) shows them. Free text in tables is left-aligned; sizes are legible.
_PAGE_CSS = """
#mbb-show-code { position: fixed; top: .7rem; right: 1rem; opacity: 0; pointer-events: none; }
.mbb-code-toggle { position: fixed; top: .55rem; right: 1rem; z-index: 10; cursor: pointer;
  background: #f3f3f3; border: 1px solid #ccc; border-radius: 4px; padding: .1rem .5rem;
  font: 13px var(--jp-ui-font-family); }
.mbb-code-toggle::after { content: "show code"; }
#mbb-show-code:checked + .mbb-code-toggle::after { content: "hide code"; }
#mbb-show-code:not(:checked) ~ .jp-CodeCell .jp-Cell-inputWrapper { display: none; }
#mbb-show-code:not(:checked) ~ .jp-CodeCell.jp-mod-noOutputs { display: none; }
#mbb-show-code:not(:checked) ~ .jp-CodeCell .jp-OutputPrompt { visibility: hidden; }
nav.mbb-toc { border: 1px solid #ddd; background: #fafafa; border-radius: 6px;
  padding: .5rem 1rem; margin: 1rem 0 1rem 0; font: 14px var(--jp-ui-font-family);
  max-width: 60rem; }
nav.mbb-toc ul { margin: .2rem 0; padding-left: 1.2rem; }
nav.mbb-toc li.h3 { margin-left: 1.2rem; }
.jp-RenderedHTMLCommon td.mbb-text, .jp-RenderedHTMLCommon th.mbb-text { text-align: left; }
.jp-RenderedHTMLCommon { font-size: 14px; }
"""

# Extends nbconvert's "lab" index template: every block that would load from a CDN is emptied,
# and the Vega bundle (if any) is inlined in the head, before the first chart.
_TEMPLATE = (
    """{%- extends 'index.html.j2' -%}
{%- block html_head_js_requirejs -%}{%- endblock html_head_js_requirejs -%}
{%- block jupyter_widgets -%}{%- endblock jupyter_widgets -%}
{%- block html_head_js_mathjax -%}{%- endblock html_head_js_mathjax -%}
{%- block html_head_js_mermaidjs -%}{%- endblock html_head_js_mermaidjs -%}
{%- block html_head_css -%}
{{ super() }}
<style type="text/css">
"""
    + _PAGE_CSS
    + """
</style>
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
{%- block body_header -%}
{{ super() }}
<input type="checkbox" id="mbb-show-code" aria-label="show code">
<label for="mbb-show-code" class="mbb-code-toggle"></label>
<!--MBB_TOC-->
{%- endblock body_header -%}
"""
)

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
    # the stub marks `snippet` required; vl-convert defaults it (no snippet: the bundle alone)
    return vlc.javascript_bundle(vl_version=vl_version())  # type: ignore[call-arg]


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


def _path_replacements(notebook_path: Path) -> list[tuple[str, str]]:
    """(absolute prefix, neutral name) pairs, longest first: the page's folder and its parent,
    the project, the Python environment, the current directory and the home folder."""
    from mbb.core.paths import PROJECT_ROOT

    folder = notebook_path.resolve().parent
    pairs = [(str(folder), "."), (str(PROJECT_ROOT), "<mbb>"), (str(Path.home()), "~")]
    if len(folder.parent.parts) > 2:
        pairs.append((str(folder.parent), ".."))
    for prefix, name in ((sys.prefix, "<venv>"), (sys.base_prefix, "<python>")):
        pairs += [(prefix, name), (str(Path(prefix).resolve()), name)]
    if len(Path.cwd().parts) > 2:
        pairs.append((str(Path.cwd()), "."))
    seen: dict[str, str] = {}
    for prefix, name in pairs:
        if len(Path(prefix).parts) > 1:
            seen.setdefault(prefix, name)
    return sorted(seen.items(), key=lambda kv: len(kv[0]), reverse=True)


def _replace_paths(value: Any, pairs: list[tuple[str, str]]) -> Any:
    if isinstance(value, str):
        for prefix, name in pairs:
            if prefix in value:
                value = value.replace(prefix, name)
        return value
    if isinstance(value, list):
        return [_replace_paths(v, pairs) for v in value]
    if isinstance(value, dict):
        return json.loads(_replace_paths(json.dumps(value), pairs))
    return value


_UNSAFE_HTML = re.compile(
    r"<\s*(script|iframe|object|embed)\b|<[^>]*\son[a-z]+\s*=|javascript:", re.I
)
_POLARS_TEXT_TD = re.compile(r"<td>(&quot;)")


def scrub_notebook(nb: nbformat.NotebookNode, notebook_path: Path) -> None:
    """In place, before export: absolute paths of this machine replaced by neutral names (in
    sources and outputs); an HTML output that could run script (not a chart of ours) shown as
    escaped text; free-text cells of polars tables marked for left alignment."""
    pairs = _path_replacements(notebook_path)
    for cell in nb.cells:
        cell["source"] = _replace_paths(cell.get("source", ""), pairs)
        for out in cell.get("outputs", []):
            for key in ("text", "evalue", "traceback"):
                if key in out:
                    out[key] = _replace_paths(out[key], pairs)
            data = out.get("data")
            if not data:
                continue
            for mime in list(data):
                data[mime] = _replace_paths(data[mime], pairs)
            page = data.get("text/html")
            if page is None or 'class="mbb-chart"' in str(page)[:200]:
                continue
            page = "".join(page) if isinstance(page, list) else page
            if _UNSAFE_HTML.search(page):
                page = f"<pre>{html.escape(page)}</pre>"
            data["text/html"] = _POLARS_TEXT_TD.sub(r'<td class="mbb-text">\1', page)


_HEADING = re.compile(r'<h([1-3]) id="([^"]+)"[^>]*>(.*?)</h\1>', re.S)
_TAG = re.compile(r"<[^>]+>")


def _toc(body: str) -> str:
    """A table of contents from the page's h1-h3 headings (their nbconvert anchors)."""
    items = []
    for level, anchor, inner in _HEADING.findall(body):
        text = html.unescape(_TAG.sub("", inner)).replace("¶", "").strip()
        if text:
            items.append(f'<li class="h{level}"><a href="#{anchor}">{html.escape(text)}</a></li>')
    if len(items) < 2:
        return ""
    return f'<nav class="mbb-toc"><strong>Contents</strong><ul>{"".join(items)}</ul></nav>'


def export_html(notebook_path: Path, html_path: Path | None = None) -> Path:
    """Export an executed notebook to a self-contained offline HTML page; return its path.

    ``html_path`` defaults to the notebook's path with ``.html``. Code cells are hidden behind a
    "show code" toggle, a table of contents leads the page, and no absolute path of this
    machine is written (see :func:`scrub_notebook`). Expect ~1.2 MB with charts (the inlined
    ~0.9 MB Vega bundle, once per page) and ~0.3 MB without.
    """
    notebook_path = Path(notebook_path)
    html_path = Path(html_path) if html_path is not None else notebook_path.with_suffix(".html")
    nb = nbformat.read(notebook_path, as_version=4)
    n_charts = embed_charts(nb)
    scrub_notebook(nb, notebook_path)
    resources: dict[str, Any] = {
        "metadata": {"name": notebook_path.stem, "path": "."},
        "mbb_vega_bundle": vega_bundle() if n_charts else "",
    }
    body, _ = _exporter().from_notebook_node(nb, resources=resources)
    body = body.replace("<!--MBB_TOC-->", _toc(body), 1)
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
body{font-family:system-ui,-apple-system,Segoe UI,Roboto,sans-serif;margin:2rem;color:#222;
font-size:15px}table{border-collapse:collapse;margin-top:1rem}th,td{border:1px solid #ccc;
padding:.35rem .6rem;text-align:right;vertical-align:top}th{background:#f3f3f3}
td.l,th.l{text-align:left}.failed{color:#b00020;font-weight:600}.ok{color:#1b7f3b}
.skipped{color:#666}code{background:#f6f6f6;padding:0 .2rem}.ci{color:#555;font-size:13px}
.d{font-size:13px}.sig{font-weight:700}nav.links a{margin-right:1.2rem}.warn{color:#8a5a00}
.ci.few{color:#8a5a00}div.scroll{overflow:auto;max-height:80vh;max-width:100%}
div.scroll th{position:sticky;top:0}figure.forest img{max-width:100%}
"""
_SKIP_DIRS = frozenset({"tables", "viewer", "compare", "resource", "workspaces", "__pycache__"})
MIN_SEEDS = 5  # fewer seeds behind a mean: its interval is flagged (mbb.viz.table.MIN_SEEDS)
VIEWER_DIR = "viewer"
COMPARE_PAGE = "compare.html"


def _warn(msg: str) -> None:
    print(f"warning: {msg}", file=sys.stderr)


def _is_run_dir(names: Iterable[str]) -> bool:
    return "events.jsonl" in names or "meta.json" in names


def _candidate_notebooks(root: Path) -> list[Path]:
    """`.ipynb` files under `root` outside every run folder (a run folder holds the workers'
    workspaces), `tables/`, the viewer, hidden folders and checkpoints."""
    found = []
    for dirpath, dirnames, filenames in os.walk(root):
        here = Path(dirpath)
        if here != root and _is_run_dir(filenames):
            dirnames[:] = []
            continue
        dirnames[:] = sorted(d for d in dirnames if d not in _SKIP_DIRS and not d.startswith("."))
        found += [here / f for f in filenames if f.endswith(".ipynb")]
    return sorted(found)


def own_notebooks(root: Path, listed: Iterable[Path] = ()) -> tuple[list[Path], list[tuple]]:
    """(notebooks mbb executed under `root`, [(path, reason) skipped]).

    A notebook is mbb's when it is listed in the sweep's manifest (`listed`) or was executed by
    papermill (the `papermill` metadata every `mbb notebook`/`mbb sweep` run writes), is a valid
    notebook, and lies outside every run folder. Anything else — a notebook a worker wrote, a
    malformed file — is skipped with its reason, never exported or linked."""
    listed = {Path(p).resolve() for p in listed}
    keep: list[Path] = []
    skipped: list[tuple[Path, str]] = []
    for nb_path in _candidate_notebooks(root):
        try:
            nb = nbformat.read(nb_path, as_version=4)
            nbformat.validate(nb)
        except Exception as exc:  # any malformed file: say why and go on
            skipped.append((nb_path, f"not a valid notebook ({type(exc).__name__})"))
            continue
        if nb_path.resolve() not in listed and "papermill" not in nb.metadata:
            skipped.append((nb_path, "not executed by mbb (no papermill record)"))
            continue
        keep.append(nb_path)
    return keep, skipped


def _notebook_failed(nb_path: Path) -> str | None:
    """The first error of an executed notebook (ename: evalue), or None."""
    nb = nbformat.read(nb_path, as_version=4)
    for cell in nb.cells:
        for out in cell.get("outputs", []):
            if out.get("output_type") == "error":
                return f"{out.get('ename')}: {out.get('evalue')}"[:300]
    return None


def _folder_tables(folder: Path) -> dict[str, Any] | None:
    """The event tables of a condition folder (a table missing on disk read as empty), or
    None when it has none."""
    from mbb.core.tables import TABLES, load_tables, tables_from_lines

    tdir = folder / "tables"
    if not (tdir / "evaluations.parquet").is_file():
        return None
    present = [n for n in TABLES if (tdir / f"{n}.parquet").is_file()]
    return {**tables_from_lines({}), **load_tables(tdir, present)}


def _condition_summary(folder: Path) -> dict[str, Any]:
    """Runs, completion, deadline misses, progress and mean bid of a condition folder, pooled
    over its worker-subruns (`mbb.analysis.outcome.outcomes`); {} when it has no tables."""
    import polars as pl

    from mbb.analysis.outcome import outcomes

    tables = _folder_tables(folder)
    if tables is None:
        return {}
    if tables["evaluations"].is_empty():
        return {"runs": 0}
    whole = tables["evaluations"].select("run_id").unique().with_columns(pl.lit(1).alias("_all"))
    row = outcomes(tables, "_all", attributes=[whole]).row(0, named=True)
    return {k: row[k] for k in ("runs", "completion", "deadline_miss", "progress", "mean_bid")}


def _conditions_html(table: Any, default: str, loaded: Any, viewer_index: Path | None) -> str:
    """The index's table of conditions: runs and the main measures with their CIs, and the
    difference from the default baseline."""
    esc = html.escape
    cells = _rows_of(table)
    excluded = loaded["excluded"].group_by("cell").len() if loaded is not None else None
    left_out = dict(excluded.iter_rows()) if excluded is not None else {}
    rows = []
    for cond in dict.fromkeys(table["condition"].to_list()):
        n = max((r["n"] for (c, _), r in cells.items() if c == cond), default=0)
        link = (
            f' <a href="{VIEWER_DIR}/index.html#cond={esc(urllib.parse.quote(cond))}">runs</a>'
            if viewer_index is not None
            else ""
        )
        out = f" ({left_out[cond]} left out)" if left_out.get(cond) else ""
        rows.append(
            f"<tr><td class=l>{esc(cond)}{link}</td><td>{n}{out}</td>"
            + "".join(_cell(cells.get((cond, m)), cond == default) for m in _INDEX_MEASURES)
            + "</tr>"
        )
    import polars as pl

    from mbb.viz.table import few_seeds_note

    warn = few_seeds_note(table.group_by("condition").agg(pl.col("n").max()), column="n")
    return (
        "<h2>Conditions</h2>"
        + (f"<p class=warn>{esc(warn)}</p>" if warn else "")
        + "<table><tr><th class=l>condition</th><th>runs</th>"
        "<th>completion</th><th>deadline miss</th><th>mean progress</th><th>mean bid</th></tr>"
        + "".join(rows)
        + "</table>"
    )


# --- the comparison: one table per baseline, from mbb.analysis.compare -------------------------
_INDEX_MEASURES = ("completion", "deadline_miss", "progress", "mean_bid")
_PCT = frozenset({"completion", "deadline_miss", "progress", "score"})


def comparison_tables(
    root: Path, *, include_invalid: bool = False
) -> tuple[dict[str, Any], dict[str, Any] | None]:
    """(`mbb.analysis.compare.condition_table` of the conditions found under `root` against
    each one as the baseline, the runs' tables): the compare page switches between the
    baselines, the index shows the default's: one computation, one bootstrap, paired on shared
    seeds. Conditions are cells (`mbb.analysis.runs`): a condition, with its model when its
    workers are LLMs; invalid runs are left out unless `include_invalid`. ({}, None) without
    finished runs."""
    import polars as pl

    from mbb.analysis.compare import condition_table
    from mbb.analysis.runs import load_runs

    try:
        loaded = load_runs([root], include_invalid=include_invalid)
    except (FileNotFoundError, ValueError):
        return {}, None
    labels = loaded["runs"]["condition"].unique(maintain_order=True).sort().to_list()
    out = {b: condition_table(loaded, b) for b in labels}
    for b, t in out.items():  # LLM cost only where some run spent something
        costs = t.filter(pl.col("measure") == "cost_per_run_usd")["mean"].fill_null(0)
        if costs.sum() == 0:
            out[b] = t.filter(pl.col("measure") != "cost_per_run_usd")
    return out, loaded


def _num(v: float | None, measure: str, signed: bool = False) -> str:
    """A measure's value as the report writes it (`mbb.viz.table.format_value`: shares in
    percent, never rounded onto 0 or 1; differences of shares in percentage points)."""
    import polars as pl

    from mbb.viz.table import format_value, kind_of

    if v is None:
        return "—"
    return format_value(v, kind_of(measure, pl.Float64()), signed=signed)


def _ci(
    lo: float | None, hi: float | None, measure: str, signed: bool = False, n: int | None = None
) -> str:
    if lo is None or hi is None:
        seeds = f"{n} seed{'s' if n != 1 else ''}" if n is not None else "fewer than 2 seeds"
        return f"95% CI n/a ({seeds})"
    return f"95% CI [{_num(lo, measure, signed)}, {_num(hi, measure, signed)}]"


def _cell(row: dict[str, Any] | None, is_base: bool) -> str:
    """One table cell: the mean over seeds with its CI and, off the baseline, the difference
    with its CI and effect size (bold when the CI excludes 0)."""
    if row is None or row["mean"] is None:
        return "<td>—</td>"
    m = row["measure"]
    n = row.get("n")
    ci_text = _ci(row["ci_low"], row["ci_high"], m, n=n)
    few = " few" if n is not None and n < MIN_SEEDS else ""
    txt = f"{_num(row['mean'], m)}<div class='ci{few}'>{ci_text}</div>"
    if is_base:
        return f"<td>{txt}<div class=d>baseline</div></td>"
    if row.get("diff") is None:
        return f"<td>{txt}</td>"
    es = (
        ""
        if row["effect_size"] is None
        else f", {row['effect_size_kind']} {row['effect_size']:+.2f}"
    )
    cls = "d sig" if row["excludes_zero"] else "d"
    ci = _ci(row["diff_ci_low"], row["diff_ci_high"], m, True, n=n)
    return (
        f"<td>{txt}<div class='{cls}'>Δ {_num(row['diff'], m, True)}"
        f" <span class=ci>{ci}{es}{', paired' if row['paired'] else ''}</span></div></td>"
    )


def _rows_of(table: Any) -> dict[tuple[str, str], dict[str, Any]]:
    return {(r["condition"], r["measure"]): r for r in table.iter_rows(named=True)}


COMPARE_DIR = "compare"  # the compare page's figures and exports, next to it


def _json_rows(df: Any) -> str:
    """A table as a JSON list of rows (NaN and infinities written as null: valid JSON)."""
    import math

    def clean(v: Any) -> Any:
        return None if isinstance(v, float) and not math.isfinite(v) else v

    return json.dumps([{k: clean(v) for k, v in r.items()} for r in df.to_dicts()], indent=1)


def _csv(df: Any) -> str:
    """A table as CSV; a text cell a spreadsheet would run as a formula (=, +, -, @ first) gets
    a leading ' (runs from colleagues are hostile input)."""
    import polars as pl

    text = [c for c, t in df.schema.items() if t == pl.String]
    return df.with_columns(
        pl.when(pl.col(c).str.contains(r"^[=+\-@\t\r]"))
        .then(pl.lit("'") + pl.col(c))
        .otherwise(pl.col(c))
        .alias(c)
        for c in text
    ).write_csv()


def write_comparison_files(
    root: Path, tables: dict[str, Any], loaded: dict[str, Any] | None
) -> dict[str, dict[str, str]]:
    """Write the compare page's files into `root/compare/`: per baseline the comparison table as
    CSV and JSON and its forest plot as SVG and PNG; all baselines in one CSV/JSON; the per-run
    values every comparison is computed from. Returns baseline -> {kind: path relative to
    root}, with "" for the files of all baselines. Files are numbered, never named after a
    condition (names come from colleagues' folders).

    root: the report folder; tables: baseline -> `mbb.analysis.compare.condition_table`;
    loaded: the runs' tables (`comparison_tables`), for the per-run export."""
    import polars as pl

    from mbb.viz import render
    from mbb.viz.compare import forest_plot

    out = root / COMPARE_DIR
    out.mkdir(exist_ok=True)
    for old in out.glob("*"):  # files of an earlier report with other conditions
        if old.is_file() and old.suffix in (".csv", ".json", ".svg", ".png"):
            old.unlink()
    links: dict[str, dict[str, str]] = {}
    for i, (baseline, table) in enumerate(tables.items()):
        stem = f"against-{i:02d}"
        (out / f"{stem}.csv").write_text(_csv(table), encoding="utf-8")
        (out / f"{stem}.json").write_text(_json_rows(table), encoding="utf-8")
        spec = render.legible(forest_plot(table).to_dict())
        (out / f"forest-{i:02d}.svg").write_text(render.render_svg(spec), encoding="utf-8")
        (out / f"forest-{i:02d}.png").write_bytes(render.render_png(spec))
        links[baseline] = {
            "csv": f"{COMPARE_DIR}/{stem}.csv",
            "json": f"{COMPARE_DIR}/{stem}.json",
            "svg": f"{COMPARE_DIR}/forest-{i:02d}.svg",
            "png": f"{COMPARE_DIR}/forest-{i:02d}.png",
        }
    every = pl.concat(list(tables.values()), how="diagonal_relaxed")
    (out / "comparison.csv").write_text(_csv(every), encoding="utf-8")
    (out / "comparison.json").write_text(_json_rows(every), encoding="utf-8")
    links[""] = {"csv": f"{COMPARE_DIR}/comparison.csv", "json": f"{COMPARE_DIR}/comparison.json"}
    if loaded is not None:
        from mbb.analysis.compare import run_table

        runs = run_table(loaded)
        (out / "runs.csv").write_text(_csv(runs), encoding="utf-8")
        (out / "runs.json").write_text(_json_rows(runs), encoding="utf-8")
        links[""] |= {
            "runs_csv": f"{COMPARE_DIR}/runs.csv",
            "runs_json": f"{COMPARE_DIR}/runs.json",
        }
    return links


def _compare_html(
    tables: dict[str, Any],
    default: str,
    viewer: bool,
    files: dict[str, dict[str, str]] | None = None,
) -> str:
    import polars as pl

    from mbb.analysis.compare import MEASURE_LABELS
    from mbb.viz.table import few_seeds_note

    esc = html.escape
    files = files or {}
    sections = []
    for baseline, table in tables.items():
        cell = _rows_of(table)
        measures = list(dict.fromkeys(table["measure"].to_list()))
        conditions = list(dict.fromkeys(table["condition"].to_list()))
        head = "".join(f"<th>{esc(MEASURE_LABELS.get(m, m))}</th>" for m in measures)
        body = []
        for cond in conditions:
            link = (
                f' <a href="{VIEWER_DIR}/index.html#cond={esc(urllib.parse.quote(cond))}">runs</a>'
                if viewer
                else ""
            )
            tds = "".join(_cell(cell.get((cond, m)), cond == baseline) for m in measures)
            n = max((r["n"] for (c, _), r in cell.items() if c == cond), default=0)
            body.append(f"<tr><td class=l><b>{esc(cond)}</b>{link}</td><td>{n}</td>{tds}</tr>")
        hidden = "" if baseline == default else " hidden"
        own = files.get(baseline, {})
        exports = (
            f"<p class=links>this table as <a href='{esc(own['csv'])}'>CSV</a> · "
            f"<a href='{esc(own['json'])}'>JSON</a>; the forest plot as "
            f"<a href='{esc(own['png'])}'>PNG</a> · <a href='{esc(own['svg'])}'>SVG</a></p>"
            if own
            else ""
        )
        forest = (
            f"<figure class=forest><img src='{esc(own['svg'])}' alt='forest plot: each "
            f"measure&#39;s difference from {esc(baseline)} with its 95% CI'></figure>"
            if own
            else ""
        )
        per_cond = table.group_by("condition").agg(pl.col("n").max())  # its seeds
        warn = few_seeds_note(per_cond, column="n")
        warn_html = f"<p class=warn>{esc(warn)}</p>" if warn else ""
        sections.append(
            f"<section class=cmp data-baseline='{esc(baseline)}'{hidden}>"
            f"<h2>Against <code>{esc(baseline)}</code></h2>{exports}{warn_html}{forest}"
            f"<div class=scroll><table><tr><th class=l>condition</th>"
            f"<th>n seeds</th>{head}</tr>{''.join(body)}</table></div></section>"
        )
    options = "".join(
        f"<option value='{esc(c)}'{' selected' if c == default else ''}>{esc(c)}</option>"
        for c in tables
    )
    script = (
        "<script>document.getElementById('baseline').addEventListener('change',function(){"
        "var v=this.value;document.querySelectorAll('section.cmp').forEach(function(s){"
        "s.hidden=s.getAttribute('data-baseline')!==v;});});</script>"
    )
    viewer_link = (
        f' · <a href="{VIEWER_DIR}/index.html">every run in the viewer</a>' if viewer else ""
    )
    every = files.get("", {})
    all_exports = (
        "<p class=links>Every baseline's table in one file: "
        f"<a href='{esc(every['csv'])}'>CSV</a> · <a href='{esc(every['json'])}'>JSON</a>"
        + (
            f"; the value of every run they are computed from: <a href='{esc(every['runs_csv'])}'>"
            f"CSV</a> · <a href='{esc(every['runs_json'])}'>JSON</a>"
            if "runs_csv" in every
            else ""
        )
        + ". Numbers in the files are unrounded.</p>"
        if every
        else ""
    )
    return (
        "<!doctype html><html lang=en><head><meta charset='utf-8'>"
        "<title>mbb comparison of conditions</title>"
        f"<style>{_INDEX_CSS}</style></head><body><h1>Conditions compared</h1>"
        f"<nav class=links><a href='index.html'>report index</a>{viewer_link}</nav>"
        "<p>One value per run (seed), then per condition: the mean over seeds, its 95% "
        "percentile bootstrap CI (2,000 resamples, expanded for few seeds), and the difference "
        "from the baseline with the CI of the difference and its effect size (d_z, seeds "
        "paired, when both conditions ran the same seeds; else Hedges' g, seeds resampled "
        "independently; bold: the CI excludes 0). Rates are shares of worker-subruns; "
        "differences of rates are in percentage points (pp). The forest plot draws each "
        "difference with its CI (filled: the CI excludes 0). The report index shows the same "
        "numbers (`mbb.analysis.compare.condition_table`).</p>"
        f"{all_exports}"
        f"<p><label>baseline <select id=baseline>{options}</select></label></p>"
        f"{''.join(sections)}{script}</body></html>"
    )


def build_report(
    root: Path, *, baseline: str | None = None, viewer: bool = True, quiet: bool = False
) -> Path:
    """Export every executed notebook of mbb's under `root` to HTML (when stale), write the
    offline viewer of its runs (`root/viewer/`), the comparison of its conditions
    (`root/compare.html`) and `root/index.html` linking them all. Returns the index path.

    `baseline`: the condition the comparison page opens on (default `base` if present, else
    the first); the page can switch to any other. Notebooks that are not mbb's (see
    :func:`own_notebooks`) are skipped with a warning. Everything renders offline."""
    root = Path(root).resolve()
    status_of: dict[str, str] = {}
    manifest = root / "sweep.json"
    if manifest.is_file():
        try:
            for r in json.loads(manifest.read_text()).get("results", []):
                status_of[str(Path(r["notebook"]).resolve())] = r["status"]
        except (ValueError, KeyError, TypeError, AttributeError):
            _warn(f"{manifest.name}: unreadable, ignored")
    notebooks, skipped = own_notebooks(root, [Path(p) for p in status_of])
    for path, reason in skipped:
        if not quiet:
            _warn(f"{path.relative_to(root)}: skipped: {reason}")
    rows = []
    for nb_path in notebooks:
        page = nb_path.with_suffix(".html")
        if not page.is_file() or page.stat().st_mtime < nb_path.stat().st_mtime:
            export_html(nb_path, page)
        error = _notebook_failed(nb_path)
        status = "failed" if error else status_of.get(str(nb_path.resolve()), "ok")
        rows.append((nb_path, page, status, error, _condition_summary(nb_path.parent)))

    viewer_index = None
    if viewer:
        from mbb.batch.viewer import build_viewer

        res = build_viewer(root, root / VIEWER_DIR)
        viewer_index = res.index
        if not quiet:
            for run, reason in res.bad:
                _warn(f"{run}: not shown in the viewer: {reason}")
            print(f"viewer: {res.index}")

    tables, loaded = comparison_tables(root)
    has_compare = bool(tables)
    default = ""
    if has_compare:
        default = baseline if baseline in tables else next(iter(tables))
        if baseline is None and "base" in tables:
            default = "base"
        files = write_comparison_files(root, tables, loaded)
        (root / COMPARE_PAGE).write_text(
            _compare_html(tables, default, viewer_index is not None, files), encoding="utf-8"
        )

    def fmt(v: Any, pct: bool = False) -> str:
        if v is None:
            return ""
        return f"{v:.1%}" if pct else (f"{v:.1f}" if isinstance(v, float) else str(v))

    esc = html.escape
    cells = _rows_of(tables[default]) if has_compare else {}
    body = []
    for nb_path, page, status, error, s in rows:
        rel = page.relative_to(root).as_posix()
        cond = nb_path.parent.relative_to(root).as_posix() or "."
        key = nb_path.parent.relative_to(root).as_posix() or root.name  # as in `conditions`
        runs_link = (
            f' <a href="{VIEWER_DIR}/index.html#cond={esc(urllib.parse.quote(cond))}">runs</a>'
            if viewer_index is not None and s.get("runs")
            else ""
        )
        body.append(
            "<tr>"
            f"<td class=l>{esc(cond)}{runs_link}</td>"
            f'<td class=l><a href="{esc(urllib.parse.quote(rel))}">{esc(nb_path.stem)}</a></td>'
            f"<td class='l {esc(status)}'>{esc(status)}</td>"
            f"<td>{fmt(s.get('runs'))}</td>"
            + "".join(
                _cell(cells.get((key, m)), key == default)
                if has_compare
                else f"<td>{fmt(s.get(m), m in _PCT)}</td>"
                for m in _INDEX_MEASURES
            )
            + f"<td class=l>{esc(error or '')}</td></tr>"
        )
    n_failed = sum(1 for r in rows if r[2] == "failed")
    links = []
    if has_compare:
        links.append(f"<a href='{COMPARE_PAGE}'>conditions compared (seeds, CIs, differences)</a>")
    if viewer_index is not None:
        links.append(f"<a href='{VIEWER_DIR}/index.html'>every run in the viewer</a>")
    skipped_html = ""
    if skipped:
        items = "".join(
            f"<li><code>{esc(p.relative_to(root).as_posix())}</code>: {esc(why)}</li>"
            for p, why in skipped
        )
        skipped_html = (
            f"<p class=warn>{len(skipped)} file(s) skipped (not mbb's executed notebooks; "
            f"not exported):</p><ul class=warn>{items}</ul>"
        )
    page_html = (
        "<!doctype html><html lang=en><head><meta charset='utf-8'><title>mbb report</title>"
        f"<style>{_INDEX_CSS}</style></head><body>"
        f"<h1>mbb report</h1><nav class=links>{''.join(links)}</nav>"
        f"<p><code>{esc(root.name)}</code> — {len(rows)} notebook(s), {n_failed} failed.</p>"
        + (
            "<p>Each cell: the mean over seeds (one value per run) with its 95% percentile "
            f"bootstrap CI; below it, the difference from <code>{esc(default)}</code> with the "
            "CI of the difference and its effect size (d_z, seeds paired, when both conditions "
            "ran the same seeds; else Hedges' g, seeds resampled independently; bold: the CI "
            "excludes 0).</p>"
            if has_compare
            else ""
        )
        + "<table><tr><th class=l>condition</th><th class=l>notebook</th>"
        "<th class=l>status</th><th>runs</th><th>completion</th><th>deadline miss</th>"
        "<th>mean progress</th><th>mean bid</th><th class=l>error</th></tr>"
        + "".join(body)
        + "</table>"
        + (_conditions_html(tables[default], default, loaded, viewer_index) if has_compare else "")
        + (spend_table_html(loaded["llm_calls"]) if loaded is not None else "")
        + f"{skipped_html}</body></html>"
    )
    index = root / "index.html"
    index.write_text(page_html, encoding="utf-8")
    return index
