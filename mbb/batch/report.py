"""Self-contained, offline HTML export of executed notebooks with interactive charts, and the
report over a folder of them.

Every output carrying :data:`mbb.viz.render.MIMETYPE` (a Vega-Lite spec written by the ``mbb``
renderer) becomes a ``<div class="mbb-chart">`` holding the static chart as an image, followed
by a script that calls ``vegaEmbed`` on it: with JavaScript the chart is interactive (tooltips),
without it the image still shows. The Vega/Vega-Lite/vega-embed bundle from
``vl_convert.javascript_bundle()`` is inlined exactly once, in the page head, and only when the
notebook has charts.

Reports are shared, and a notebook's text comes from run folders that may be hostile, so a page
is built only from what mbb executed and shows only what an allow-list lets through:

- **Provenance.** A notebook is reported only if its folder's manifest (`EXECUTED`), written
  by mbb when it executed the notebook (`record_executed`), records its SHA-256, and the
  manifest's HMAC verifies under this user's key (`~/.config/mbb/provenance.key`): a metadata
  key, or a manifest anyone could write, is not provenance.
- **Sanitizing.** Everything between the page's own header and footer — markdown cells, every
  output, cell tags and ids, image metadata — passes `sanitize_html`, an allow-list sanitizer
  (nh3, the Python binding of the Rust crate ammonia): known tags, attributes and classes only;
  links to http(s), mailto or the page itself; images from ``data:image/...`` only; no style
  but a single colour. Charts are put in after it, built by mbb from their spec (as JSON inside
  the script) and their SVG (as an image: a browser runs no script and loads nothing from an
  SVG shown as an image). A Content-Security-Policy allows only the page's own scripts (by
  hash) and no network request.

The page loads nothing from the network: nbconvert's lab template references require.js, MathJax,
mermaid and the Jupyter widgets manager on CDNs; those blocks are overridden to nothing (so LaTeX
in markdown stays as source text and widgets are not rendered, neither of which our notebooks
use). CSS, the theme and images are already inlined by nbconvert.

Size: the JS bundle is ~0.9 MB, so a page with charts is ~1.2 MB (a notebook without charts
~0.3 MB of nbconvert CSS); each chart adds its spec (inlined data) plus its SVG.
"""

from __future__ import annotations

import base64
import contextlib
import fcntl
import hashlib
import hmac
import html
import json
import os
import re
import secrets
import sys
import time
import urllib.parse
from collections.abc import Iterable, Iterator, Sequence
from html.parser import HTMLParser
from pathlib import Path
from typing import Any

import nbformat
import nh3
import vl_convert as vlc
from nbconvert import HTMLExporter

from mbb.batch.outdir import replace_file
from mbb.batch.runs import spend_table_html
from mbb.core import csvsafe, safejson
from mbb.core.errors import for_terminal
from mbb.viz.render import MIMETYPE, render_svg, vl_version
from mbb.viz.table import REPORT_CSS as TABLE_REPORT_CSS
from mbb.viz.transcript import _CSS as _TRANSCRIPT_STYLE

__all__ = [
    "EXECUTED",
    "build_report",
    "comparison_tables",
    "embed_charts",
    "export_html",
    "external_urls",
    "own_notebooks",
    "record_executed",
    "sanitize_html",
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
.dataframe > thead > tr, .dataframe > tbody > tr { text-align: right; white-space: pre-wrap; }
.mbb-chart { display: inline-block; }
.mbb-chart .vg-tooltip { font-family: var(--jp-ui-font-family); }
"""
# Style blocks in outputs are not kept (`sanitize_html`): the page itself carries the styles of
# mbb's own outputs (the round transcript, polars' tables above).
_OWN_OUTPUT_CSS = re.sub(r"</?style>", "", _TRANSCRIPT_STYLE) + TABLE_REPORT_CSS

# Extends nbconvert's "lab" index template: every block that would load from a CDN is emptied,
# and the Vega bundle (if any) is inlined in the head, before the first chart.
_TEMPLATE = (
    """{%- extends 'index.html.j2' -%}
{%- block html_head_js_requirejs -%}
<meta name="mbb-csp">
{%- endblock html_head_js_requirejs -%}
{%- block jupyter_widgets -%}{%- endblock jupyter_widgets -%}
{%- block html_head_js_mathjax -%}{%- endblock html_head_js_mathjax -%}
{%- block html_head_js_mermaidjs -%}{%- endblock html_head_js_mermaidjs -%}
{%- block html_head_css -%}
{{ super() }}
<style type="text/css">
"""
    + _PAGE_CSS
    + """
{{ resources.mbb_output_css }}
</style>
{{ resources.mbb_head_scripts }}
{%- endblock html_head_css -%}
"""
)
# replaced by the page's policy once its scripts are known (nbconvert may close the tag: />)
_CSP_MARK = re.compile(r'<meta name="mbb-csp"\s*/?>')

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


def _chart_script(index: int, spec: dict[str, Any]) -> str:
    """The text of the script that upgrades chart `index` to an interactive one."""
    return (
        f'\nvegaEmbed("#mbb-chart-{index}", {_script_json(spec)}, '
        '{actions: false, renderer: "svg"}).catch(console.error);\n'
    )


def _chart_html(index: int, spec: dict[str, Any], svg: str) -> str:
    """The chart's div, its SVG shown as an image (inert: no script runs and nothing loads in an
    SVG shown as an image, whatever it holds), and the script that upgrades it."""
    image = base64.b64encode(svg.encode()).decode()
    return (
        f'<div class="mbb-chart" id="mbb-chart-{index}">'
        f'<img alt="chart" src="data:image/svg+xml;base64,{image}"></div>\n'
        f"<script>{_chart_script(index, spec)}</script>\n"
    )


def embed_charts(nb: nbformat.NotebookNode, mark: str | None = None) -> list[str]:
    """Replace, in place, every chart output by a placeholder; return the charts' HTML in order.

    The placeholder of chart `i` is a div holding only `<mark>-<i>` (`mark`: a random token of
    the export, so no text of the notebook can stand in for one); `export_html` puts each
    chart's HTML there after sanitizing the page. The SVG stored in the output is reused (it is
    re-rendered from the spec only if missing). PNG and spec are dropped from the exported copy."""
    mark = mark or secrets.token_hex(12)
    charts: list[str] = []
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
            if not isinstance(svg, str) or not svg:
                svg = render_svg(spec)
            text = data.get("text/plain", "<mbb chart>")
            output["data"] = nbformat.from_dict(
                {"text/html": f"<div>{mark}-{len(charts)}</div>", "text/plain": text}
            )
            output["metadata"] = nbformat.from_dict({})
            charts.append(_chart_html(len(charts), spec, svg))
    return charts


# --- the allow-list sanitizer ------------------------------------------------------------------
# nh3 (ammonia): an HTML5 parser and an allow-list; nothing outside these lists survives, however
# it is spelt. The tags and classes are the ones nbconvert's lab template, Pygments, polars'
# tables and mbb's own outputs use; none of the classes is given a position by the page's CSS
# (a class that is — a dialog, an overlay — could lay a fake page over the real one).
# fmt: off
_TAGS = frozenset({
    "a", "abbr", "b", "blockquote", "br", "caption", "code", "col", "colgroup", "dd", "del",
    "details", "div", "dl", "dt", "em", "figcaption", "figure", "h1", "h2", "h3", "h4", "h5",
    "h6", "hr", "i", "img", "ins", "kbd", "li", "mark", "ol", "p", "pre", "q", "s",
    "samp", "small", "span", "strong", "sub", "summary", "sup", "table", "tbody", "td",
    "tfoot", "th", "thead", "tr", "u", "ul", "var", "wbr",
})
# fmt: on
_ATTRIBUTES = {
    "*": {"class", "id", "title", "lang", "dir", "data-mime-type", "aria-hidden", "aria-label"},
    "a": {"href"},
    "img": {"src", "alt", "width", "height"},
    "td": {"colspan", "rowspan", "align"},
    "th": {"colspan", "rowspan", "align", "scope"},
    "ol": {"start"},
    "col": {"span"},
    "colgroup": {"span"},
    "details": {"open"},
    "span": {"style"},
    "div": {"style"},
}
# fmt: off
_JP_CLASSES = frozenset({
    "jp-Cell", "jp-CodeCell", "jp-MarkdownCell", "jp-Notebook-cell", "jp-mod-noOutputs",
    "jp-mod-noInput", "jp-Cell-inputWrapper", "jp-Cell-outputWrapper", "jp-Collapser",
    "jp-InputCollapser", "jp-OutputCollapser", "jp-Cell-inputCollapser",
    "jp-Cell-outputCollapser", "jp-InputArea", "jp-Cell-inputArea", "jp-InputPrompt",
    "jp-InputArea-prompt", "jp-InputArea-editor", "jp-CodeMirrorEditor", "jp-Editor",
    "jp-OutputArea", "jp-Cell-outputArea", "jp-OutputArea-child",
    "jp-OutputArea-executeResult", "jp-OutputPrompt", "jp-OutputArea-prompt",
    "jp-OutputArea-output", "jp-RenderedText", "jp-RenderedHTMLCommon", "jp-RenderedHTML",
    "jp-RenderedMarkdown", "jp-MarkdownOutput", "jp-RenderedImage", "jp-RenderedSVG",
    "jp-RenderedLatex", "jp-RenderedJavaScript", "jp-needs-light-background",
    "jp-needs-dark-background", "cm-editor", "cm-s-jupyter", "highlight", "anchor-link",
    "dataframe", "unconfined", "mbb-text", "mbb-tr",
    "mbb-table", "mbb-r", "mbb-l", "mbb-w", "mbb-note",  # mbb's tables (`mbb.viz.table`)
})
# fmt: on
# Pygments' token classes (k, kn, s2, ...), mbb's transcript (w, lab, priv, rev), nbconvert's
# highlighting (hl-python3) and cell tags (celltag_parameters), ANSI colours (ansi-red-fg)
_CLASS_FORMS = re.compile(r"[a-z]{1,4}[0-9]?|hl-[A-Za-z0-9_+-]+|celltag_[\w-]+|ansi-[a-z-]+")
_LINK = re.compile(r"(?:https?|mailto):|#", re.IGNORECASE)
_IMAGE = re.compile(r"data:image/(?:png|jpeg|gif|webp|svg\+xml);base64,[A-Za-z0-9+/=\s]*\Z")
_NUMBER = re.compile(r"\d{1,5}(?:px|%)?\Z")
_ALIGN = frozenset({"left", "right", "center", "justify"})
# the one style kept: a single colour (mbb's transcript colours its worker chips)
_COLOUR = re.compile(
    r"\s*(?:background|background-color|color)\s*:\s*(?:#[0-9a-fA-F]{3,8}|[a-zA-Z]{3,20})\s*;?\s*\Z"
)
_MIME = re.compile(r"[a-z0-9.+/-]{1,100}\Z")


def _attribute(tag: str, name: str, value: str) -> str | None:
    """Each kept attribute's value, checked against what it may be (None: dropped)."""
    if name == "class":
        kept = [c for c in value.split() if c in _JP_CLASSES or _CLASS_FORMS.fullmatch(c)]
        return " ".join(kept) or None
    if name == "id":  # mbb's own elements (the code toggle, the charts) cannot be stood in for
        return None if value.lower().startswith("mbb") or len(value) > 200 else value
    if name == "href":
        return value if _LINK.match(value.strip()) else None
    if name == "src":
        return value if _IMAGE.match(value.strip()) else None
    if name in ("width", "height", "colspan", "rowspan", "start", "span"):
        return value if _NUMBER.match(value.strip()) else None
    if name == "align":
        return value if value.strip().lower() in _ALIGN else None
    if name == "style":
        return value if _COLOUR.match(value) else None
    if name == "data-mime-type":
        return value if _MIME.match(value) else None
    return value


_CLEANER = nh3.Cleaner(
    tags=set(_TAGS),
    clean_content_tags={"script", "style"},
    attributes={k: set(v) for k, v in _ATTRIBUTES.items()},
    attribute_filter=_attribute,
    url_schemes={"http", "https", "mailto", "data"},
    strip_comments=True,
    link_rel="noopener noreferrer",
)


def sanitize_html(fragment: str) -> str:
    """`fragment` with everything the allow-list above does not name removed (nh3/ammonia):
    no script, style, frame, form, SVG or MathML element, no event handler, no link to anything
    but http(s), mailto and the page, no image but a ``data:image`` one, no style but a colour."""
    return _CLEANER.clean(fragment)


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


_POLARS_TEXT_TD = re.compile(r"<td>(&quot;|\")")


def scrub_notebook(nb: nbformat.NotebookNode, notebook_path: Path) -> None:
    """In place, before export: absolute paths of this machine replaced by neutral names (in
    sources and outputs). What may run or show is decided on the rendered page
    (`sanitize_html`), not here."""
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


def _script_hash(text: str) -> str:
    return "'sha256-" + base64.b64encode(hashlib.sha256(text.encode()).digest()).decode() + "'"


def content_security_policy(scripts: Iterable[str]) -> str:
    """The policy of a page whose only scripts are `scripts` (their texts): those run (by hash;
    Vega compiles its expressions, hence 'unsafe-eval'), nothing else does, nothing is fetched
    (images from data: URLs only), styles are the page's own."""
    hashes = " ".join(sorted({_script_hash(t) for t in scripts}))
    script_src = f"{hashes} 'unsafe-eval'" if hashes else "'none'"
    return (
        f"default-src 'none'; script-src {script_src}; style-src 'unsafe-inline'; "
        "img-src data:; font-src data:; base-uri 'none'; form-action 'none'"
    )


def _csp_meta(scripts: Iterable[str]) -> str:
    policy = html.escape(content_security_policy(scripts), quote=True)
    return f'<meta http-equiv="Content-Security-Policy" content="{policy}">'


def _finish_page(page: str, mark: str, charts: list[str], scripts: list[str]) -> str:
    """The exported page with everything between its own `<main>` and `</main>` sanitized, the
    charts put in their placeholders, the code toggle and the contents on top, and the policy
    allowing exactly the page's scripts."""
    head, sep, rest = page.partition("<main>")
    body, sep2, tail = rest.rpartition("</main>")
    if not sep or not sep2:
        raise ValueError("the page template has no <main> element to sanitize")
    clean = _POLARS_TEXT_TD.sub(r'<td class="mbb-text">\1', sanitize_html(body))
    for i, chart in enumerate(charts):
        clean = clean.replace(f"<div>{mark}-{i}</div>", chart, 1)
    header = (
        '\n<input type="checkbox" id="mbb-show-code" aria-label="show code">\n'
        '<label for="mbb-show-code" class="mbb-code-toggle"></label>\n' + _toc(clean)
    )
    head, found = _CSP_MARK.subn(lambda _: _csp_meta(scripts), head, count=1)
    if not found:
        raise ValueError("the page template has no place for its Content-Security-Policy")
    return f"{head}<main>{header}{clean}</main>{tail}"


def export_html(notebook_path: Path, html_path: Path | None = None) -> Path:
    """Export an executed notebook to a self-contained offline HTML page; return its path.

    ``html_path`` defaults to the notebook's path with ``.html``. Code cells are hidden behind a
    "show code" toggle, a table of contents leads the page, no absolute path of this machine is
    written (see :func:`scrub_notebook`), and nothing of the notebook reaches the page but what
    :func:`sanitize_html` lets through. Expect ~1.2 MB with charts (the inlined ~0.9 MB Vega
    bundle, once per page) and ~0.3 MB without.
    """
    notebook_path = Path(notebook_path)
    html_path = Path(html_path) if html_path is not None else notebook_path.with_suffix(".html")
    nb = nbformat.read(notebook_path, as_version=4)
    mark = secrets.token_hex(12)
    charts = embed_charts(nb, mark)
    scrub_notebook(nb, notebook_path)
    scripts = [f"\n{vega_bundle()}\n"] if charts else []
    resources: dict[str, Any] = {
        "metadata": {"name": notebook_path.stem, "path": "."},
        "mbb_output_css": _OWN_OUTPUT_CSS,
        "mbb_head_scripts": "".join(f"<script>{t}</script>" for t in scripts),
    }
    body, _ = _exporter().from_notebook_node(nb, resources=resources)
    scripts += [re.search(r"<script>(.*?)</script>", c, re.S).group(1) for c in charts]  # type: ignore[union-attr]
    body = _finish_page(body, mark, charts, scripts)
    html_path.parent.mkdir(parents=True, exist_ok=True)
    replace_file(html_path, body)
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
    print(f"warning: {for_terminal(msg)}", file=sys.stderr)


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


# --- provenance: what mbb executed, recorded where it did ---------------------------------------
EXECUTED = "mbb-executed.json"  # in a notebook's folder: what mbb executed there, with its hash
_KEY_ENV_DIR = "XDG_CONFIG_HOME"


def _key_path() -> Path:
    base = os.environ.get(_KEY_ENV_DIR) or str(Path.home() / ".config")
    return Path(base) / "mbb" / "provenance.key"


def _provenance_key() -> bytes:
    """This user's key for the manifests' HMAC, made on first use (32 random bytes, mode 0600).
    Machines that share the home folder (a cluster) share it."""
    path = _key_path()
    for _ in range(2):
        try:
            return bytes.fromhex(path.read_text(encoding="ascii").strip())
        except FileNotFoundError:
            pass
        except (ValueError, UnicodeDecodeError):
            raise ValueError(
                f"{path}: not an mbb provenance key (64 hex digits); delete it to make a new one "
                "(notebooks recorded with the old key are then no longer reported)"
            ) from None
        path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
        try:
            fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o600)
        except FileExistsError:
            continue  # another process made it first: read that one
        with os.fdopen(fd, "w", encoding="ascii") as fh:
            fh.write(secrets.token_hex(32))
    raise OSError(f"{path}: could not read or create the provenance key")


def _mac(entries: dict[str, Any]) -> str:
    blob = json.dumps(entries, sort_keys=True, separators=(",", ":")).encode()
    return hmac.new(_provenance_key(), blob, hashlib.sha256).hexdigest()


def _sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as fh:
        for chunk in iter(lambda: fh.read(1 << 20), b""):
            digest.update(chunk)
    return digest.hexdigest()


@contextlib.contextmanager
def _manifest_lock(folder: Path) -> Iterator[None]:
    fd = os.open(folder / f".{EXECUTED}.lock", os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW, 0o644)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        yield
    finally:
        os.close(fd)


def _manifest(folder: Path) -> tuple[dict[str, Any] | None, str]:
    """(the verified entries of `folder`'s manifest, '') or (None, why not)."""
    path = folder / EXECUTED
    if path.is_symlink():
        return None, f"its folder's {EXECUTED} is a symbolic link"
    if not path.is_file():
        return None, f"not executed by mbb (no {EXECUTED} beside it)"
    try:
        d = safejson.loads(safejson.read_text(path))
        entries, mac = d["notebooks"], d["hmac"]
    except (OSError, ValueError, KeyError, TypeError):
        return None, f"its folder's {EXECUTED} is not a manifest mbb wrote"
    if not isinstance(entries, dict) or not isinstance(mac, str):
        return None, f"its folder's {EXECUTED} is not a manifest mbb wrote"
    if not hmac.compare_digest(mac, _mac(entries)):
        return None, (
            f"its folder's {EXECUTED} does not verify (not written by mbb under this user's "
            "key: a copied, edited or forged record)"
        )
    return entries, ""


def record_executed(notebook: Path, page: Path | None = None) -> None:
    """Record in `notebook`'s folder that mbb executed it: its SHA-256 (and its page's) in the
    folder's manifest, signed with this user's key. Called by `execute_notebook` right after
    papermill wrote it, failed or not, and by the report when it exports a page again."""
    notebook = Path(notebook)
    folder = notebook.parent
    with _manifest_lock(folder):
        entries, _ = _manifest(folder)
        entries = dict(entries or {})
        entries[notebook.name] = {
            "sha256": _sha256(notebook),
            "page_sha256": _sha256(page) if page is not None and page.is_file() else None,
            "recorded": round(time.time(), 3),
        }
        record = {"version": 1, "notebooks": entries, "hmac": _mac(entries)}
        replace_file(folder / EXECUTED, json.dumps(record, indent=1, sort_keys=True))


def _executed_entry(nb_path: Path, manifests: dict[Path, tuple]) -> tuple[dict | None, str]:
    if nb_path.is_symlink():
        return None, "a symbolic link"
    folder = nb_path.parent
    if folder not in manifests:
        manifests[folder] = _manifest(folder)
    entries, why = manifests[folder]
    if entries is None:
        return None, why
    entry = entries.get(nb_path.name)
    if not isinstance(entry, dict):
        return None, f"not executed by mbb (not in its folder's {EXECUTED})"
    if entry.get("sha256") != _sha256(nb_path):
        return None, "changed since mbb executed it (its hash is not the one recorded)"
    return entry, ""


def own_notebooks(root: Path) -> tuple[list[Path], list[tuple[Path, str]]]:
    """(notebooks mbb executed under `root`, [(path, reason) skipped]).

    A notebook is mbb's when its folder's manifest (`EXECUTED`, HMAC-verified) records it with
    its current SHA-256, it is a valid notebook, and it lies outside every run folder. Anything
    else — a notebook a worker wrote, one edited after it ran, one with a forged record, a
    malformed file — is skipped with its reason, never exported or linked."""
    keep: list[Path] = []
    skipped: list[tuple[Path, str]] = []
    manifests: dict[Path, tuple] = {}
    for nb_path in _candidate_notebooks(root):
        entry, why = _executed_entry(nb_path, manifests)
        if entry is None:
            skipped.append((nb_path, why))
            continue
        try:
            nb = nbformat.read(nb_path, as_version=4)
            nbformat.validate(nb)
        except Exception as exc:  # any malformed file: say why and go on
            skipped.append((nb_path, f"not a valid notebook ({type(exc).__name__})"))
            continue
        keep.append(nb_path)
    return keep, skipped


def _page_is_current(nb_path: Path, page: Path) -> bool:
    """Whether `page` is the one mbb exported from `nb_path` (its hash in the manifest)."""
    entries, _ = _manifest(nb_path.parent)
    entry = (entries or {}).get(nb_path.name)
    return (
        isinstance(entry, dict)
        and page.is_file()
        and not page.is_symlink()
        and entry.get("page_sha256") == _sha256(page)
    )


def _notebook_failed(nb_path: Path) -> str | None:
    """The first error of an executed notebook (ename: evalue), or None."""
    nb = nbformat.read(nb_path, as_version=4)
    for cell in nb.cells:
        for out in cell.get("outputs", []):
            if out.get("output_type") == "error":
                return f"{out.get('ename')}: {out.get('evalue')}"[:300]
    return None


def _folder_tables(folder: Path) -> dict[str, Any] | None:
    """The tables of a condition folder's runs (the folders beside its notebook), read from
    their checked logs like every analysis (`mbb.analysis.load_runs`: never from the folder's
    parquet tables, which a colleague's folder could hold with other numbers), or None when it
    has no usable run."""
    from mbb.analysis.runs import load_runs

    try:
        if not any((d / "events.jsonl").is_file() for d in folder.iterdir()):
            return None
        return load_runs([folder])
    except (OSError, ValueError):  # no usable run (the comparison says why)
        return None


def _tables_under(folder: Path, loaded: dict[str, Any]) -> dict[str, Any] | None:
    """The part of `loaded` (the whole report's tables) that is the runs of `folder`, the same
    runs `_folder_tables(folder)` would read (a run folder is named by its run id), so the logs
    are parsed once per report; None when no run folder sits beside the notebook."""
    import polars as pl

    from mbb.analysis.runs import find_run_dirs

    try:
        if not any((d / "events.jsonl").is_file() for d in folder.iterdir()):
            return None
        ids = [d.name for d in find_run_dirs([folder])]
    except OSError:
        return None
    return {
        name: t.filter(pl.col("run_id").is_in(ids))
        if isinstance(t, pl.DataFrame) and "run_id" in t.columns
        else t
        for name, t in loaded.items()
    }


def _condition_summary(folder: Path, loaded: dict[str, Any] | None = None) -> dict[str, Any]:
    """Runs, completion, deadline misses, progress and mean bid of a condition folder, pooled
    over its worker-subruns (`mbb.analysis.outcome.outcomes`); {} when it has no tables.
    `loaded`: the report's tables of every run under its root, when it has them (its runs are
    then taken from there instead of reading their logs again)."""
    import polars as pl

    from mbb.analysis.outcome import outcomes

    tables = _folder_tables(folder) if loaded is None else _tables_under(folder, loaded)
    if tables is None:
        return {}
    if tables["evaluations"].is_empty():
        return {"runs": 0}
    whole = tables["evaluations"].select("run_id").unique().with_columns(pl.lit(1).alias("_all"))
    row = outcomes(tables, "_all", attributes=[whole]).row(0, named=True)
    return {k: row[k] for k in ("runs", "completion", "deadline_miss", "progress", "mean_bid")}


def _conditions_html(
    table: Any, default: str, loaded: Any, viewer_index: Path | None, intro: str = ""
) -> str:
    """The index's table of conditions: runs and the main measures with their CIs, and the
    difference from the default baseline; `intro`: HTML said under its heading."""
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
        + intro
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
    root: Path, *, include_invalid: bool = False, everything: dict[str, Any] | None = None
) -> tuple[dict[str, Any], dict[str, Any] | None]:
    """(`mbb.analysis.compare.condition_table` of the conditions found under `root` against
    each one as the baseline, the runs' tables): the compare page switches between the
    baselines, the index shows the default's: one computation, one bootstrap, paired on shared
    seeds. Conditions are cells (`mbb.analysis.runs`): a condition, with its model when its
    workers are LLMs; invalid runs are left out unless `include_invalid`. ({}, None) without
    finished runs.

    root: the report folder; include_invalid: compare invalid runs too; everything: its runs'
    tables with the invalid ones (`report_runs`), when already read."""
    import polars as pl

    from mbb.analysis.compare import condition_table
    from mbb.analysis.runs import valid_only

    if everything is None:
        everything = report_runs(root)
    if everything is None:
        return {}, None
    loaded = everything if include_invalid else valid_only(everything)
    if loaded["runs"].is_empty():
        reasons = loaded["excluded"]["reason"].str.split(":").list.first().value_counts()
        left = "; ".join(f"{n} {why}" for why, n in sorted(reasons.iter_rows()))
        _warn(f"no comparison of conditions: no valid run (left out: {left})")
        return {}, None
    labels = loaded["runs"]["condition"].unique(maintain_order=True).sort().to_list()
    out = {b: condition_table(loaded, b) for b in labels}
    for b, t in out.items():  # LLM cost only where some run spent something
        costs = t.filter(pl.col("measure") == "cost_per_run_usd")["mean"].fill_null(0)
        if costs.sum() == 0:
            out[b] = t.filter(pl.col("measure") != "cost_per_run_usd")
    return out, loaded


def report_runs(root: Path) -> dict[str, Any] | None:
    """The tables of every finished run under `root`, invalid ones included and marked
    (`mbb.analysis.runs.load_runs`), read once for the comparison and the spend; None without
    any (a report of notebooks only, or nothing usable: said in one line).

    root: the report folder."""
    from mbb.analysis.runs import load_runs

    try:
        return load_runs([root], include_invalid=True)
    except FileNotFoundError:  # no runs: a report of notebooks only
        return None
    except ValueError as exc:  # a copied run, runs of two conditions in one cell, none usable
        _warn(f"no comparison of conditions: {exc}")
        return None


def _spend_html(everything: dict[str, Any] | None) -> str:
    """The "LLM spend by model" table over every finished run, invalid ones too: their calls
    were paid for (a study whose runs were all invalid showed no spend at all).

    everything: `report_runs`' tables (None: no runs, no table)."""
    if everything is None:
        return ""
    invalid = int((~everything["runs"]["valid"]).sum())
    note = f"{invalid} invalid run(s), left out of the comparison, included" if invalid else ""
    return spend_table_html(everything["llm_calls"], note=note)


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
    """A table as CSV, its text cells guarded against being read as formulas (`csvsafe`)."""
    return csvsafe.write_csv(df) or ""


def write_comparison_files(
    root: Path, tables: dict[str, Any], loaded: dict[str, Any] | None
) -> dict[str, dict[str, str]]:
    """Write the compare page's files into `root/compare/`: per baseline the comparison table as
    CSV and JSON and its forest plot as SVG and PNG; all baselines in one CSV/JSON; the per-run
    values every comparison is computed from. Returns baseline -> {kind: path relative to
    root}, with "" for the files of all baselines, and under "inline" the forest plot as a
    ``data:`` URI: the page's policy loads images from ``data:`` only, so a link to the SVG
    file would show its alt text. Files are numbered, never named after a condition (names come
    from colleagues' folders).

    root: the report folder; tables: baseline -> `mbb.analysis.compare.condition_table`;
    loaded: the runs' tables (`comparison_tables`), for the per-run export."""
    import polars as pl

    from mbb.viz import render
    from mbb.viz.compare import forest_plot

    out = root / COMPARE_DIR
    if out.is_symlink():  # a link planted in a shared folder: replaced, its target untouched
        out.unlink()
    out.mkdir(exist_ok=True)
    for old in out.glob("*"):  # files of an earlier report with other conditions
        if old.is_file() and old.suffix in (".csv", ".json", ".svg", ".png"):
            old.unlink()
    links: dict[str, dict[str, str]] = {}
    for i, (baseline, table) in enumerate(tables.items()):
        stem = f"against-{i:02d}"
        replace_file(out / f"{stem}.csv", _csv(table))
        replace_file(out / f"{stem}.json", _json_rows(table))
        spec = render.legible(forest_plot(table).to_dict())
        svg = render.render_svg(spec)
        replace_file(out / f"forest-{i:02d}.svg", svg)
        replace_file(out / f"forest-{i:02d}.png", render.render_png(spec))
        links[baseline] = {
            "csv": f"{COMPARE_DIR}/{stem}.csv",
            "json": f"{COMPARE_DIR}/{stem}.json",
            "svg": f"{COMPARE_DIR}/forest-{i:02d}.svg",
            "png": f"{COMPARE_DIR}/forest-{i:02d}.png",
            "inline": _svg_data_uri(svg),
        }
    every = pl.concat(list(tables.values()), how="diagonal_relaxed")
    replace_file(out / "comparison.csv", _csv(every))
    replace_file(out / "comparison.json", _json_rows(every))
    links[""] = {"csv": f"{COMPARE_DIR}/comparison.csv", "json": f"{COMPARE_DIR}/comparison.json"}
    if loaded is not None:
        from mbb.analysis.compare import run_table

        runs = run_table(loaded)
        replace_file(out / "runs.csv", _csv(runs))
        replace_file(out / "runs.json", _json_rows(runs))
        links[""] |= {
            "runs_csv": f"{COMPARE_DIR}/runs.csv",
            "runs_json": f"{COMPARE_DIR}/runs.json",
        }
    return links


def _svg_data_uri(svg: str) -> str:
    """`svg` as a ``data:image/svg+xml`` URI: an image the page's Content-Security-Policy
    (``img-src data:``) lets show, and inert (no script runs and nothing loads in an SVG shown
    as an image), as the notebook pages show their charts (`_chart_html`)."""
    return "data:image/svg+xml;base64," + base64.b64encode(svg.encode()).decode()


def _compare_html(
    tables: dict[str, Any],
    default: str,
    viewer: bool,
    files: dict[str, dict[str, str]] | None = None,
    name: str = "",
) -> str:
    """The comparison page; `name`: the study (else the folder) it compares, in its title
    and heading (a reviewer's find: 'Conditions compared' did not say of what)."""
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
            f"<figure class=forest><img src='{esc(own['inline'])}' alt='forest plot: each "
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
    switch = (
        "document.getElementById('baseline').addEventListener('change',function(){"
        "var v=this.value;document.querySelectorAll('section.cmp').forEach(function(s){"
        "s.hidden=s.getAttribute('data-baseline')!==v;});});"
    )
    script = f"<script>{switch}</script>"
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
        f"{_csp_meta([switch])}<title>{esc(name) + ' — ' if name else ''}conditions compared "
        f"(mbb)</title><style>{_INDEX_CSS}</style></head><body>"
        f"<h1>Conditions compared{': ' + esc(name) if name else ''}</h1>"
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
    root: Path,
    *,
    baseline: str | None = None,
    viewer: bool = True,
    quiet: bool = False,
    llm_caches: Sequence[Path] = (),
    study_name: str | None = None,
) -> Path:
    """Export every executed notebook of mbb's under `root` to HTML (when stale), write the
    offline viewer of its runs (`root/viewer/`), the comparison of its conditions
    (`root/compare.html`) and `root/index.html` linking them all. Returns the index path.

    `baseline`: the condition the comparison page opens on (default `base` if present, else
    the first); the page can switch to any other. Notebooks that are not mbb's (see
    :func:`own_notebooks`) are skipped with a warning. Everything renders offline.
    `viewer`: write the viewer; `quiet`: no warning for skipped notebooks; `llm_caches`: LLM
    caches outside `root` the viewer shows prompts from (`mbb.batch.viewer.build_viewer`);
    `study_name`: the study the folder holds, named in the page's heading and title beside the
    folder's name (which, `local_smoke-stub` or one given with `--out`, need not say it)."""
    root = Path(root).resolve()
    status_of: dict[str, str] = {}  # a sweep's record of its jobs: shown, never provenance
    sweep_record = root / "sweep.json"
    if sweep_record.is_file():
        try:
            for r in safejson.loads(safejson.read_text(sweep_record)).get("results", []):
                status_of[str(Path(r["notebook"]).resolve())] = str(r["status"])
        except (ValueError, KeyError, TypeError, AttributeError):
            _warn(f"{sweep_record.name}: unreadable, ignored")
    notebooks, skipped = own_notebooks(root)
    for path, reason in skipped:
        if not quiet:
            _warn(f"{path.relative_to(root)}: skipped: {reason}")
    rows = []
    for nb_path in notebooks:
        page = nb_path.with_suffix(".html")
        if not _page_is_current(nb_path, page):  # a page mbb did not export from it: again
            export_html(nb_path, page)
            record_executed(nb_path, page)
        error = _notebook_failed(nb_path)
        status = "failed" if error else status_of.get(str(nb_path.resolve()), "ok")
        status = status if status in ("ok", "failed", "stopped", "skipped") else "ok"
        rows.append((nb_path, page, status, error))

    viewer_index = None
    if viewer:
        from mbb.batch.viewer import build_viewer

        res = build_viewer(root, root / VIEWER_DIR, llm_caches=llm_caches)
        viewer_index = res.index
        if not quiet:
            for run, reason in res.bad:
                _warn(f"{run}: not shown in the viewer: {reason}")
            print(f"viewer: {res.index}")

    everything = report_runs(root)
    tables, loaded = comparison_tables(root, everything=everything)
    has_compare = bool(tables)
    summaries = [_condition_summary(r[0].parent, loaded) for r in rows]
    default = ""
    if has_compare:
        default = baseline if baseline in tables else next(iter(tables))
        if baseline is None and "base" in tables:
            default = "base"
        files = write_comparison_files(root, tables, loaded)
        replace_file(
            root / COMPARE_PAGE,
            _compare_html(
                tables, default, viewer_index is not None, files, study_name or root.name
            ),
        )

    def fmt(v: Any, pct: bool = False) -> str:
        if v is None:
            return ""
        return f"{v:.1%}" if pct else (f"{v:.1f}" if isinstance(v, float) else str(v))

    esc = html.escape
    cells = _rows_of(tables[default]) if has_compare else {}
    body, analyses = [], []
    for (nb_path, page, status, error), s in zip(rows, summaries, strict=True):
        rel = page.relative_to(root).as_posix()
        cond = nb_path.parent.relative_to(root).as_posix() or "."
        key = nb_path.parent.relative_to(root).as_posix() or root.name  # as in `conditions`
        link = f'<a href="{esc(urllib.parse.quote(rel))}">{esc(nb_path.stem)}</a>'
        status_cell = f"<td class='l {esc(status)}'>{esc(status)}</td>"
        error_cell = f"<td class=l>{esc(error or '')}</td>"
        if not s.get("runs"):  # an analysis over many folders (a study's notebooks/): no row
            # of one condition's measures, which read as blanks under a condition's columns
            folder = "" if cond == "." else f"{esc(cond)}/"
            analyses.append(f"<tr><td class=l>{folder}{link}</td>{status_cell}{error_cell}</tr>")
            continue
        runs_link = (
            f' <a href="{VIEWER_DIR}/index.html#cond={esc(urllib.parse.quote(cond))}">runs</a>'
            if viewer_index is not None
            else ""
        )
        body.append(
            "<tr>"
            f"<td class=l>{esc(cond)}{runs_link}</td>"
            f"<td class=l>{link}</td>{status_cell}"
            f"<td>{fmt(s.get('runs'))}</td>"
            + "".join(
                _cell(cells.get((key, m)), key == default)
                if has_compare
                else f"<td>{fmt(s.get(m), m in _PCT)}</td>"
                for m in _INDEX_MEASURES
            )
            + f"{error_cell}</tr>"
        )
    notebook_tables = ""
    if body:
        notebook_tables += (
            "<table><tr><th class=l>condition</th><th class=l>notebook</th>"
            "<th class=l>status</th><th>runs</th><th>completion</th><th>deadline miss</th>"
            "<th>mean progress</th><th>mean bid</th><th class=l>error</th></tr>"
            + "".join(body)
            + "</table>"
        )
    if analyses:
        notebook_tables += (
            "<h2>Analyses</h2><table><tr><th class=l>notebook</th><th class=l>status</th>"
            f"<th class=l>error</th></tr>{''.join(analyses)}</table>"
        )
    explain = (
        "<p>Each cell: the mean over seeds (one value per run) with its 95% percentile "
        f"bootstrap CI; below it, the difference from <code>{esc(default)}</code> with the "
        "CI of the difference and its effect size (d_z, seeds paired, when both conditions "
        "ran the same seeds; else Hedges' g, seeds resampled independently; bold: the CI "
        "excludes 0).</p>"
        if has_compare
        else ""
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
    heading = f"<code>{esc(root.name)}</code>"
    if study_name is not None:
        heading = f"study <b>{esc(study_name)}</b> in <code>{esc(root.name)}</code>"
    page_html = (
        "<!doctype html><html lang=en><head><meta charset='utf-8'>"
        f"{_csp_meta([])}<title>{esc(study_name or root.name)} — mbb report</title>"
        f"<style>{_INDEX_CSS}</style></head><body>"
        f"<h1>{esc(study_name or root.name)} — mbb report</h1>"
        f"<nav class=links>{''.join(links)}</nav>"
        f"<p>{heading} — {len(rows)} notebook(s), {n_failed} failed.</p>"
        + (explain if body else "")  # before the first table whose cells it explains
        + notebook_tables
        + (
            _conditions_html(
                tables[default], default, loaded, viewer_index, "" if body else explain
            )
            if has_compare
            else ""
        )
        + _spend_html(everything)
        + f"{skipped_html}</body></html>"
    )
    index = root / "index.html"
    replace_file(index, page_html)
    return index
