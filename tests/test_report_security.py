"""Reports built only from what mbb executed, showing only what an allow-list lets through
(issue 26, item 2). Written as an attacker who read `mbb.batch.report` and shares a folder or a
notebook: forged provenance (a metadata key, a sweep record, a manifest of their own, a page
planted beside a real notebook), and hostile markup in every place a notebook can carry it —
markdown cells, HTML and markdown outputs, output carrying mbb's chart class, chart SVG and
spec, image metadata, cell tags and ids, mermaid and JavaScript outputs — with every
event-handler spelling, URL scheme trick, SVG/MathML construct and CSS trick we know of.

What must hold: such a notebook is not reported at all, or its page runs no script but mbb's
own (checked by parsing the page, by its Content-Security-Policy, and in headless Chromium with
a payload that would set `window.__pwned` or open a dialog), loads nothing, and lays nothing
over the page."""

from __future__ import annotations

import base64
import hashlib
import html
import json
import re
import shutil
from html.parser import HTMLParser
from pathlib import Path

import nbformat
import pytest
from helpers import tiny_notebook

from mbb.batch.report import (
    _ATTRIBUTES,
    _TAGS,
    EXECUTED,
    build_report,
    export_html,
    own_notebooks,
    record_executed,
    sanitize_html,
)
from mbb.viz.render import MIMETYPE

# --- payloads -----------------------------------------------------------------------------------
PWN = "window.__pwned=1;alert(1)"
PAYLOADS = [
    # event handlers, every spelling
    f"<img src=x onerror={PWN}>",
    f"<img src=x ONERROR={PWN}>",
    f"<img src=x oNeRrOr='{PWN}'>",
    f'<img/src="x"/onerror="{PWN}">',
    f"<img src=x onerror\n={PWN}>",
    f"<img src=x\tonerror={PWN}>",
    "<img src=x onerror=&#x61;lert(1)>",
    f"<body onload={PWN}>",
    f"<div onmouseover={PWN}>hover</div>",
    f"<details open ontoggle={PWN}>x</details>",
    f"<input autofocus onfocus={PWN}>",
    f"<video><source onerror={PWN}></video>",
    f"<marquee onstart={PWN}>x</marquee>",
    f"<p onpointerenter={PWN} style=position:fixed;inset:0>x</p>",
    # script and friends
    f"<script>{PWN}</script>",
    f"<SCRIPT>{PWN}</SCRIPT>",
    f"<scr<script>ipt>{PWN}</script>",
    f"<script src=data:text/javascript,{PWN}></script>",
    f"<iframe srcdoc='<script>{PWN}</script>'></iframe>",
    f"<iframe src=javascript:{PWN}></iframe>",
    f"<object data=javascript:{PWN}></object>",
    f"<embed src=javascript:{PWN}>",
    f"<form action=javascript:{PWN}><button>go</button></form>",
    f"<button formaction=javascript:{PWN}>go</button>",
    f"<meta http-equiv=refresh content='0;url=javascript:{PWN}'>",
    "<base href=https://evil.example/>",
    "<link rel=stylesheet href=https://evil.example/x.css>",
    f"<template><script>{PWN}</script></template>",
    f"<noscript><p title='</noscript><img src=x onerror={PWN}>'></noscript>",
    f"<math><mtext><table><mglyph><style><img src=x onerror={PWN}>",
    f"<svg><p><style><img src=x onerror={PWN}></style></p></svg>",
    # URL schemes
    f"<a href='javascript:{PWN}'>x</a>",
    f"<a href='JaVaScRiPt:{PWN}'>x</a>",
    f"<a href=' javascript:{PWN}'>x</a>",
    f"<a href='java&#x09;script:{PWN}'>x</a>",
    f"<a href='&#106;avascript:{PWN}'>x</a>",
    f"<a href='vbscript:{PWN}'>x</a>",
    "<a href='data:text/html;base64,PHNjcmlwdD5hbGVydCgxKTwvc2NyaXB0Pg=='>x</a>",
    "<a href='file:///etc/passwd'>x</a>",
    "<a href='evil.html'>a page planted beside the report</a>",
    "<img src='data:text/html,<script>alert(1)</script>'>",
    "<img src='https://beacon.example/t.gif'>",
    "<img srcset='https://beacon.example/t.gif 1x'>",
    # SVG
    f"<svg onload={PWN}></svg>",
    f"<svg><script>{PWN}</script></svg>",
    f"<svg><foreignObject><iframe srcdoc='<script>{PWN}</script>'></iframe></foreignObject></svg>",
    f"<svg><a xlink:href='javascript:{PWN}'><text x=20 y=20>x</text></a></svg>",
    f"<svg><animate attributeName=href values='javascript:{PWN}'/></svg>",
    f"<svg><set attributeName=onmouseover to='{PWN}'/></svg>",
    "<svg><use href='https://evil.example/x.svg#a'/></svg>",
    # CSS tricks
    "<style>body{display:none}</style>",
    "<style>@import url(https://evil.example/x.css)</style>",
    "<div style='background:url(https://beacon.example/x)'>x</div>",
    "<div style='position:fixed;top:0;left:0;width:100%;height:100%;background:#fff'>fake</div>",
    "<div style='background:red;position:fixed'>x</div>",
    "<div class='mbb-code-toggle'>a fixed element of the page's own CSS</div>",
    "<div class='jp-DocumentSearch-overlay lm-close-icon'>positioned classes</div>",
    "<div id='mbb-show-code'>stands in for the code toggle</div>",
    "<div id='mbb-chart-0'>stands in for a chart</div>",
]

_URL_ATTRS = {"href", "src", "srcset", "action", "formaction", "xlink:href", "data", "background"}


class _Page(HTMLParser):
    """Every element and attribute of a page, and the texts of its scripts."""

    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.elements: list[tuple[str, dict[str, str | None]]] = []
        self.scripts: list[str] = []
        self._script: list[str] | None = None

    def handle_starttag(self, tag, attrs):
        self.elements.append((tag, dict(attrs)))
        if tag == "script":
            self._script = []

    def handle_data(self, data):
        if self._script is not None:
            self._script.append(data)

    def handle_endtag(self, tag):
        if tag == "script" and self._script is not None:
            self.scripts.append("".join(self._script))
            self._script = None


def _parse(page: str) -> _Page:
    p = _Page()
    p.feed(page)
    p.close()
    return p


def _bad_attributes(elements) -> list[str]:
    bad = []
    for tag, attrs in elements:
        for name, value in attrs.items():
            v = html.unescape(value or "").strip().lower().replace("\t", "").replace("\n", "")
            if name.startswith("on"):
                bad.append(f"{tag} {name}")
            if name in _URL_ATTRS and not (
                v.startswith(("#", "http://", "https://", "mailto:"))
                if name == "href"
                else v.startswith("data:image/")
            ):
                bad.append(f"{tag} {name}={v[:40]}")
            if name == "style" and ("url(" in v or "position" in v or "@import" in v):
                bad.append(f"{tag} style={v[:40]}")
    return bad


@pytest.mark.parametrize("payload", PAYLOADS)
def test_the_sanitizer_lets_through_only_its_allow_list(payload: str) -> None:
    out = sanitize_html(f"<p>before</p>{payload}<p>after</p>")
    page = _parse(out)
    assert page.scripts == []
    assert {t for t, _ in page.elements} <= _TAGS, out
    for tag, attrs in page.elements:
        allowed = _ATTRIBUTES["*"] | _ATTRIBUTES.get(tag, set()) | {"rel"}
        assert set(attrs) <= allowed, (tag, attrs)
        assert "mbb" not in (attrs.get("id") or "")
        assert not any(
            c.startswith(("mbb-code", "lm-")) for c in (attrs.get("class") or "").split()
        )
    assert _bad_attributes(page.elements) == [], out
    assert not any("__pwned" in (v or "") for _, a in page.elements for v in a.values())
    assert "before" in out  # (an unclosed <style> or <template> takes what follows with it)


def test_the_sanitizer_keeps_what_reports_show() -> None:
    table = (
        '<table class="dataframe"><thead><tr><th>a</th></tr></thead>'
        "<tbody><tr><td>1</td></tr></tbody></table>"
    )
    assert sanitize_html(table) == table
    chip = '<span class="w" style="background:#1f77b4">W1</span>'
    assert sanitize_html(chip) == chip
    link = sanitize_html('<a href="https://example.org">x</a> <a href="#sec">y</a>')
    assert 'href="https://example.org"' in link and 'href="#sec"' in link
    png = "data:image/png;base64,iVBORw0KGgo="
    assert f'src="{png}"' in sanitize_html(f'<img src="{png}" width="120">')
    heading = sanitize_html(
        '<h2 id="Result">Result<a class="anchor-link" href="#Result">¶</a></h2>'
    )
    assert 'id="Result"' in heading and 'class="anchor-link"' in heading


def test_no_class_the_sanitizer_keeps_is_positioned_by_the_pages_css(tmp_path: Path) -> None:
    """A class the page's CSS positions (fixed, absolute, sticky) would let a notebook lay a fake
    page over the real one: every such rule needs a class the allow-list drops."""
    page = export_html(_recorded(tmp_path / "p.ipynb", nbformat.v4.new_markdown_cell("x")))
    css = "".join(re.findall(r"<style[^>]*>(.*?)</style>", page.read_text(), re.S))
    css = re.sub(r"/\*.*?\*/", "", css, flags=re.S)
    reachable = []
    for selectors, body in re.findall(r"([^{}]+)\{([^{}]*)\}", css):
        if not re.search(r"position\s*:\s*(fixed|absolute|sticky)", body):
            continue
        for selector in selectors.split(","):
            classes = re.findall(r"\.([\w-]+)", selector)
            ids = re.findall(r"#([\w-]+)", selector)
            if ids or not classes:
                continue  # ids of mbb's own are dropped; a bare element is not reachable alone
            probe = sanitize_html(f'<div class="{" ".join(classes)}">x</div>')
            if all(f" {c} " in f" {_classes(probe)} " for c in classes):
                reachable.append(selector.strip())
    assert reachable == []


def _classes(fragment: str) -> str:
    m = re.search(r'class="([^"]*)"', fragment)
    return m.group(1) if m else ""


# --- whole pages: a hostile notebook -----------------------------------------------------------
def _hostile_notebook() -> nbformat.NotebookNode:
    nb = nbformat.v4.new_notebook()
    nb.metadata["kernelspec"] = {
        "name": "python3",
        "display_name": "Python 3",
        "language": "python",
    }
    nb.metadata["title"] = f"</title><script>{PWN}</script>"
    md = "\n\n".join(
        [
            "# A report",
            f"[click](javascript:{PWN}) and ![img](javascript:{PWN}) and <javascript:{PWN}>",
            *PAYLOADS,
        ]
    )
    cells = [nbformat.v4.new_markdown_cell(md)]
    code = nbformat.v4.new_code_cell("x", execution_count=1)
    code.metadata["tags"] = [f'"><script>{PWN}</script>', "parameters onclick=alert(1)"]
    code.id = "a-cell"
    forged_chart = f'<div class="mbb-chart" id="mbb-chart-0"><script>{PWN}</script></div>'
    hostile_svg = (
        f'<svg xmlns="http://www.w3.org/2000/svg" onload="{PWN}"><script>{PWN}</script>'
        f'<foreignObject><iframe srcdoc="<script>{PWN}</script>"/></foreignObject></svg>'
    )
    spec = {
        "title": f"</script><script>{PWN}</script>",
        "data": {"values": [{"a": 1, "t": f"<img src=x onerror={PWN}>"}]},
        "mark": "point",
        "encoding": {"x": {"field": "a", "type": "quantitative"}, "tooltip": {"field": "t"}},
    }
    png = base64.b64encode(b"\x89PNG\r\n\x1a\n").decode()
    code.outputs = [
        nbformat.v4.new_output("display_data", data={"text/html": "\n".join(PAYLOADS)}),
        nbformat.v4.new_output("display_data", data={"text/html": forged_chart}),
        nbformat.v4.new_output("display_data", data={"text/markdown": f"[x](javascript:{PWN})"}),
        nbformat.v4.new_output("display_data", data={"image/svg+xml": hostile_svg}),
        nbformat.v4.new_output(
            "display_data",
            data={"image/png": png},
            metadata={"image/png": {"width": f"1 onerror={PWN}", "height": "2"}},
        ),
        nbformat.v4.new_output("display_data", data={"application/javascript": PWN}),
        nbformat.v4.new_output(
            "display_data", data={"text/vnd.mermaid": f"</pre><script>{PWN}</script>"}
        ),
        nbformat.v4.new_output(
            "display_data", data={"text/latex": f"</div><script>{PWN}</script>"}
        ),
        nbformat.v4.new_output(
            "display_data", data={MIMETYPE: spec, "image/svg+xml": hostile_svg, "text/plain": "c"}
        ),
        nbformat.v4.new_output("stream", name="stdout", text=f"<script>{PWN}</script>\n"),
        nbformat.v4.new_output(
            "error",
            ename="E",
            evalue=f"<script>{PWN}</script>",
            traceback=[f"<img src=x onerror={PWN}>"],
        ),
    ]
    cells.append(code)
    raw = nbformat.v4.new_raw_cell(f"<script>{PWN}</script>")
    raw.metadata["raw_mimetype"] = "text/html"
    cells.append(raw)
    nb.cells = cells
    return nb


def _recorded(path: Path, *cells: nbformat.NotebookNode, nb=None) -> Path:
    """A notebook written and recorded as mbb records what it executed."""
    if nb is None:
        nb = nbformat.v4.new_notebook()
        nb.cells = list(cells)
    path.parent.mkdir(parents=True, exist_ok=True)
    nbformat.write(nb, path)
    record_executed(path)
    return path


@pytest.fixture(scope="module")
def hostile_page(tmp_path_factory) -> Path:
    tmp = tmp_path_factory.mktemp("hostile")
    return export_html(_recorded(tmp / "cond" / "hostile.ipynb", nb=_hostile_notebook()))


def test_a_hostile_notebooks_page_runs_only_mbbs_scripts(hostile_page: Path) -> None:
    text = hostile_page.read_text(encoding="utf-8")
    page = _parse(text)
    # mbb's scripts: the Vega bundle and one vegaEmbed call for the one real chart
    assert len(page.scripts) == 2
    assert page.scripts[1].strip().startswith('vegaEmbed("#mbb-chart-0", {')
    assert "<\\/script><script>" in page.scripts[1]  # the spec's title stays data
    assert _bad_attributes(page.elements) == []
    kinds = {t for t, _ in page.elements}
    assert not kinds & {
        "iframe",
        "object",
        "embed",
        "form",
        "svg",
        "math",
        "base",
        "link",
        "template",
    }
    metas = [a for t, a in page.elements if t == "meta"]
    assert not any("refresh" in (a.get("http-equiv") or "").lower() for a in metas)
    csp = next(a["content"] for a in metas if a.get("http-equiv") == "Content-Security-Policy")
    for script in page.scripts:  # every script the page runs is allowed by hash, no other
        digest = base64.b64encode(hashlib.sha256(script.encode()).digest()).decode()
        assert f"'sha256-{digest}'" in csp
    assert csp.count("'sha256-") == len(page.scripts)
    assert "default-src 'none'" in csp and "img-src data:" in csp
    # one chart div, mbb's, and ids of mbb's elements only where mbb put them
    ids = [a.get("id") for _, a in page.elements if a.get("id", "") and "mbb" in a.get("id", "")]
    assert ids == ["mbb-show-code", "mbb-chart-0"]
    # styles: the page's own blocks in the head; in the body a colour at most
    body = text[text.index("<main>") :]
    assert "<style" not in body
    assert "<svg" not in body.split("<script")[0]  # the chart's SVG is an image, not markup


def test_a_hostile_notebooks_page_runs_nothing_in_chromium(hostile_page: Path) -> None:
    chromium = shutil.which("chromium") or shutil.which("chromium-browser")
    if chromium is None:
        pytest.fail("Chromium is needed for this test: apt-get install -y chromium")
    from playwright.sync_api import sync_playwright

    events: list[str] = []
    with sync_playwright() as p:
        browser = p.chromium.launch(
            executable_path=chromium,
            args=["--no-sandbox", "--disable-gpu", "--host-resolver-rules=MAP * ~NOTFOUND"],
        )
        page = browser.new_page(viewport={"width": 1280, "height": 900})
        page.on("dialog", lambda d: (events.append(f"dialog {d.message}"), d.dismiss()))
        page.on(
            "request",
            lambda r: (
                events.append(f"request {r.url}")
                if not r.url.startswith(("file:", "data:"))
                else None
            ),
        )
        page.goto(hostile_page.as_uri())
        page.wait_for_function(
            "() => document.querySelectorAll('div.mbb-chart.vega-embed svg.marks').length === 1",
            timeout=30_000,
        )  # mbb's own script did run: the chart is interactive
        for selector in ("a", "div", "span", "img", "p", "details"):  # hover and click around
            for el in page.locator(selector).all()[:40]:
                try:
                    el.hover(timeout=200)
                    if selector != "a":
                        el.click(timeout=200)
                except Exception:
                    pass
        pwned = page.evaluate("() => window.__pwned")
        cover = page.evaluate(
            "() => [...document.querySelectorAll('main *')].filter(e => "
            "['fixed','absolute','sticky'].includes(getComputedStyle(e).position) && "
            "!e.closest('.mbb-chart') && e.id !== 'mbb-show-code' && "
            "!e.classList.contains('mbb-code-toggle')).length"
        )
        browser.close()
    assert pwned is None and events == [], events
    assert cover == 0


# --- provenance ---------------------------------------------------------------------------------
def _plain(path: Path, text: str = "fine") -> nbformat.NotebookNode:
    nb = nbformat.v4.new_notebook()
    nb.cells = [nbformat.v4.new_markdown_cell(text)]
    path.parent.mkdir(parents=True, exist_ok=True)
    return nb


def test_only_notebooks_in_their_folders_verified_manifest_are_reported(
    tmp_path: Path, monkeypatch
) -> None:
    me, colleague = str(tmp_path / "me"), str(tmp_path / "colleague")
    monkeypatch.setenv("XDG_CONFIG_HOME", me)  # this user's key
    root = tmp_path / "sweep"
    _recorded(root / "base" / "run_condition.ipynb", nbformat.v4.new_markdown_cell("ok"))
    # 1. a metadata key anyone can write
    meta = _plain(root / "base" / "metadata_only.ipynb")
    meta.metadata["papermill"] = {"parameters": {}, "version": "2.6.0"}
    nbformat.write(meta, root / "base" / "metadata_only.ipynb")
    # 2. listed in the sweep's record
    nbformat.write(_plain(root / "base" / "listed.ipynb"), root / "base" / "listed.ipynb")
    (root / "sweep.json").write_text(
        json.dumps({"results": [{"notebook": str(root / "base" / "listed.ipynb"), "status": "ok"}]})
    )
    # 3. recorded, then edited (a cell swapped for a script)
    edited = _recorded(root / "base" / "edited.ipynb", nbformat.v4.new_markdown_cell("ok"))
    nb = nbformat.read(edited, as_version=4)
    nb.cells[0].source = "<script>alert(1)</script>"
    nbformat.write(nb, edited)
    # 4. a folder whose manifest the attacker wrote: the hash right, the MAC made up
    forged = root / "forged"
    nbformat.write(_plain(forged / "f.ipynb"), forged / "f.ipynb")
    digest = hashlib.sha256((forged / "f.ipynb").read_bytes()).hexdigest()
    entries = {"f.ipynb": {"sha256": digest, "page_sha256": None, "recorded": 0}}
    (forged / EXECUTED).write_text(
        json.dumps({"version": 1, "notebooks": entries, "hmac": "0" * 64})
    )
    # 5. a folder recorded under someone else's key (a colleague's real manifest)
    monkeypatch.setenv("XDG_CONFIG_HOME", colleague)
    _recorded(root / "theirs" / "t.ipynb", nbformat.v4.new_markdown_cell("theirs"))
    monkeypatch.setenv("XDG_CONFIG_HOME", me)
    mine = _recorded(root / "mine" / "m.ipynb", nbformat.v4.new_markdown_cell("mine"))
    # 6. a link to a recorded notebook, and a manifest that is a link to a real one
    (root / "mine" / "link.ipynb").symlink_to(mine)
    (root / "linked").mkdir()
    nbformat.write(_plain(root / "linked" / "m.ipynb"), root / "linked" / "m.ipynb")
    (root / "linked" / EXECUTED).symlink_to(root / "mine" / EXECUTED)
    # 7. a notebook in a folder without a manifest, beside folders that have one
    nbformat.write(_plain(root / "outside.ipynb"), root / "outside.ipynb")
    # 8. a worker's notebook in its workspace, recorded: inside a run folder, never looked at
    run = root / "base" / "base-seed0000"
    (run / "events.jsonl").parent.mkdir(parents=True)
    (run / "events.jsonl").write_text("")
    _recorded(
        run / "resource" / "workspaces" / "W1" / "w.ipynb", nbformat.v4.new_markdown_cell("w")
    )

    kept, skipped = own_notebooks(root)
    why = {p.relative_to(root).as_posix(): reason for p, reason in skipped}
    assert [p.relative_to(root).as_posix() for p in kept] == [
        "base/run_condition.ipynb",
        "mine/m.ipynb",
    ]
    assert "not in its folder's" in why["base/metadata_only.ipynb"]
    assert "not in its folder's" in why["base/listed.ipynb"]
    assert "changed since mbb executed it" in why["base/edited.ipynb"]
    assert "does not verify" in why["forged/f.ipynb"]
    assert "does not verify" in why["theirs/t.ipynb"]
    assert why["mine/link.ipynb"] == "a symbolic link"
    assert "symbolic link" in why["linked/m.ipynb"]
    assert "no mbb-executed.json" in why["outside.ipynb"]
    assert not any("w.ipynb" in k for k in why)
    index = build_report(root, viewer=False, quiet=True).read_text(encoding="utf-8")
    assert index.count('.html"') == 2 and "<script" not in index


def test_a_page_planted_beside_a_recorded_notebook_is_replaced(tmp_path: Path) -> None:
    """The report used to link any page newer than its notebook: a planted page ran its script
    from the index's link. Now only a page whose hash mbb recorded is kept."""
    nb = _recorded(tmp_path / "base" / "run_condition.ipynb", nbformat.v4.new_markdown_cell("real"))
    planted = nb.with_suffix(".html")
    planted.write_text(f"<script>{PWN}</script>")
    victim = tmp_path / "victim.html"
    victim.write_text("precious")
    index = build_report(tmp_path, viewer=False, quiet=True)
    page = planted.read_text(encoding="utf-8")
    assert PWN not in page and "real" in page and "Content-Security-Policy" in page
    assert 'href="base/run_condition.html"' in index.read_text(encoding="utf-8")
    # a page that is a link to a file elsewhere is replaced, its target untouched
    planted.unlink()
    planted.symlink_to(victim)
    build_report(tmp_path, viewer=False, quiet=True)
    assert victim.read_text() == "precious" and not planted.is_symlink()
    # a second report keeps the page mbb exported (its hash is recorded)
    before = planted.stat().st_mtime_ns
    build_report(tmp_path, viewer=False, quiet=True)
    assert planted.stat().st_mtime_ns == before


def test_a_notebook_mbb_executed_is_recorded_even_when_it_fails(tmp_path: Path) -> None:
    from mbb.batch.notebooks import execute_notebook

    src = tiny_notebook(tmp_path / "src" / "boom.ipynb", "raise RuntimeError('boom')")
    with pytest.raises(Exception, match="boom"):
        execute_notebook(src, tmp_path / "out", {"x": 2}, html=False)
    kept, _ = own_notebooks(tmp_path / "out")
    assert kept == [tmp_path / "out" / "boom.ipynb"]


def test_mbbs_tables_keep_their_look_in_a_report(tmp_path: Path) -> None:
    """A report page keeps no style block from an output, and its allow-list dropped the
    table's classes: every shared table lost its alignment and scroll box (free text right-
    aligned, a 1,280-row table's last columns past the page's edge; a reviewer's find). The
    page carries the table's styles itself, the classes are kept, and nothing is positioned
    (the test above checks every rule)."""
    import polars as pl

    from mbb.viz.table import table

    t = table(pl.DataFrame({"run": ["base-seed0000"], "completion": [0.3]}), caption="runs")
    cell = nbformat.v4.new_code_cell("t")
    cell.outputs = [
        nbformat.v4.new_output("execute_result", {"text/html": t._repr_html_()}, execution_count=1)
    ]
    text = export_html(_recorded(tmp_path / "t.ipynb", cell)).read_text(encoding="utf-8")
    assert re.search(r'<div class="mbb-table"', text)
    assert 'class="mbb-r"' in text and 'class="mbb-l"' in text
    css = "".join(re.findall(r"<style[^>]*>(.*?)</style>", text, re.S))
    assert ".mbb-table{overflow:auto" in css and ".mbb-table{max-height:40em}" in css
    assert ".mbb-table td.mbb-r,.mbb-table th.mbb-r{text-align:right}" in css
