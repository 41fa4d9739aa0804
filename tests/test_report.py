"""HTML export: a notebook executed by papermill becomes one offline page with live charts."""

from __future__ import annotations

import base64
import json
import os
import re
import sys
from pathlib import Path

import nbformat
import papermill
import pytest

from mbb.batch.report import embed_charts, export_html, external_urls, vega_bundle
from mbb.viz.render import MIMETYPE

ROOT = Path(__file__).resolve().parents[1]
BUNDLE_MARK = "window.vegaEmbed="  # occurs once in vl_convert.javascript_bundle()

CHARTS_CELL = """\
import sys
import altair as alt
import polars as pl
import mbb.viz.render

mbb.viz.render.enable()
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
    for n in range(2):  # the static chart is an image (inert), upgraded by vegaEmbed
        assert (
            f'<div class="mbb-chart" id="mbb-chart-{n}"><img alt="chart" '
            'src="data:image/svg+xml;base64,' in html
        )
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
    charts = embed_charts(nb, "MARK")
    assert len(charts) == 1
    data = nb.cells[0].outputs[0].data
    assert set(data) == {"text/html", "text/plain"}
    assert data["text/html"] == "<div>MARK-0</div>"  # the chart goes there after sanitizing
    svg = base64.b64decode(charts[0].split("base64,")[1].split('"')[0]).decode()
    assert svg.startswith("<svg")  # re-rendered from the spec


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


# --- shared pages: code hidden, contents, no paths of this machine, only mbb's notebooks -------
@pytest.mark.notebook
def test_export_hides_code_has_contents_and_no_absolute_paths(executed: Path) -> None:
    html = export_html(executed).read_text(encoding="utf-8")
    assert 'id="mbb-show-code"' in html and 'class="mbb-code-toggle"' in html
    assert "#mbb-show-code:not(:checked) ~ .jp-CodeCell .jp-Cell-inputWrapper" in html
    assert '<nav class="mbb-toc">' not in html  # one heading only: no contents box
    for path in (str(ROOT), str(executed.parent), sys.prefix, str(Path.home())):
        assert path not in html, path
    assert "&lt;mbb&gt;" in html  # the sys.path line of the first cell, neutralised


def _papermill_notebook(path: Path, *cells: nbformat.NotebookNode) -> Path:
    nb = _notebook(*cells)
    nb.metadata["papermill"] = {"parameters": {}}
    nbformat.write(nb, path)
    return path


def test_export_contents_left_aligned_text_and_no_script_from_outputs(tmp_path: Path) -> None:
    cell = nbformat.v4.new_code_cell("t", execution_count=1)
    table = '<table class="dataframe"><tr><td>1</td><td>&quot;free text&quot;</td></tr></table>'
    hostile = "<b>hi</b><script>alert(1)</script><img src=x onerror=alert(2)>"
    cell.outputs = [
        nbformat.v4.new_output("display_data", data={"text/html": table, "text/plain": "t"}),
        nbformat.v4.new_output("display_data", data={"text/html": hostile, "text/plain": "h"}),
        nbformat.v4.new_output("stream", name="stdout", text=f"wrote {tmp_path}/x.parquet\n"),
    ]
    path = _papermill_notebook(
        tmp_path / "n.ipynb",
        nbformat.v4.new_markdown_cell("# One\n\n## Two\n\n### Three"),
        cell,
    )
    html = export_html(path).read_text(encoding="utf-8")
    toc = html[html.index('<nav class="mbb-toc">') : html.index("</nav>")]
    assert [t in toc for t in ('href="#One"', 'href="#Two"', 'href="#Three"')] == [True] * 3
    assert re.search(r'<td>1</td><td class="mbb-text">(&quot;|")free text(&quot;|")</td>', html)
    assert "<b>hi</b>" in html  # what the allow-list names is kept, the rest is not
    assert "alert(1)" not in html and "onerror" not in html and "alert(2)" not in html
    assert str(tmp_path) not in html and "wrote ./x.parquet" in html


def test_report_skips_foreign_and_malformed_notebooks(tmp_path: Path, capsys) -> None:
    from mbb.batch.report import build_report, record_executed

    cond = tmp_path / "base"
    ok = _papermill_notebook((cond.mkdir(parents=True) or cond) / "run_condition.ipynb")
    record_executed(ok)  # as execute_notebook does
    ws = cond / "base-seed0000" / "resource" / "workspaces" / "W1"
    ws.mkdir(parents=True)
    (cond / "base-seed0000" / "meta.json").write_text("{}")
    _papermill_notebook(
        ws / "evil.ipynb", nbformat.v4.new_markdown_cell("<script>alert('ws')</script>")
    )
    (cond / "broken.ipynb").write_text('{"cells": [')  # malformed
    record_executed(cond / "broken.ipynb")
    _notebook_path = tmp_path / "foreign.ipynb"  # valid, but not executed by mbb
    nbformat.write(_notebook(nbformat.v4.new_markdown_cell("<script>x</script>")), _notebook_path)

    index = build_report(tmp_path, viewer=False)
    err = capsys.readouterr().err
    page = index.read_text(encoding="utf-8")
    assert ok.with_suffix(".html").is_file()
    assert 'href="base/run_condition.html"' in page
    for name in ("broken", "foreign", "evil"):
        assert not list(tmp_path.rglob(f"{name}.html")), name
        assert f'href="{name}' not in page and f"/{name}.html" not in page
    assert "broken.ipynb: skipped: not a valid notebook" in err
    assert "foreign.ipynb: skipped: not executed by mbb (no mbb-executed.json" in err
    assert "evil" not in err + page  # never even looked at: it is inside a run folder
    assert "<script" not in page
    assert str(tmp_path) not in page


def _assert_forest_shows(compare: str, section: str, svg_file: Path) -> None:
    """The section's forest plot is an image the page's policy lets load (`img-src data:`
    only; a link to the SVG file showed only the alt text), and it is the exported SVG."""
    from mbb.batch.report import content_security_policy

    policy = re.search(r'http-equiv="Content-Security-Policy" content="([^"]+)"', compare)
    assert policy and "img-src data:;" in policy.group(1)
    assert "img-src data:;" in content_security_policy([])  # not loosened
    srcs = re.findall(r"<img src='([^']*)'", compare)
    assert srcs and all(s.startswith("data:image/") for s in srcs), srcs
    forest = re.search(
        r"<figure class=forest><img src='data:image/svg\+xml;base64,([^']+)'", section
    )
    assert forest, section[:500]
    assert base64.b64decode(forest.group(1)).decode() == svg_file.read_text()


def test_comparison_page_and_viewer_links(tmp_path: Path, capsys) -> None:
    from mbb.batch.build import load_params
    from mbb.batch.report import build_report
    from mbb.batch.runner import run_many

    for name in ("memory_off", "base"):
        run_many(load_params(name, {"subruns": 2}), runs=3, out_dir=tmp_path / name, processes=1)
    index = build_report(tmp_path)
    out = capsys.readouterr().out
    assert f"viewer: {tmp_path / 'viewer' / 'index.html'}" in out
    page = index.read_text(encoding="utf-8")
    assert "href='compare.html'" in page and "href='viewer/index.html'" in page
    compare = (tmp_path / "compare.html").read_text(encoding="utf-8")
    assert external_urls(compare, include_links=False) == []
    assert "<select id=baseline>" in compare
    # base is the default baseline; the other table is there, hidden, for the select
    assert "<section class=cmp data-baseline='base'>" in compare
    assert "<section class=cmp data-baseline='memory_off' hidden>" in compare
    shown = compare[compare.index("data-baseline='base'>") :]
    shown = shown[: shown.index("</section>")]
    assert shown.count("<td>3</td>") == 2  # n seeds of both conditions
    assert "95% CI [" in shown and "Δ " in shown and "baseline" in shown
    assert 'href="viewer/index.html#cond=memory_off"' in shown
    assert (tmp_path / "viewer" / "data" / "index.js").is_file()
    assert "fewer than 5 seeds" in shown  # 3 seeds: said where the numbers are
    # a forest plot and the table's exports, written next to the page and linked from it
    _assert_forest_shows(compare, shown, tmp_path / "compare" / "forest-00.svg")
    for link in ("compare/against-00.csv", "compare/against-00.json", "compare/forest-00.png"):
        assert f"href='{link}'" in shown and (tmp_path / link).is_file(), link
    assert "href='compare/comparison.csv'" in compare and "href='compare/runs.json'" in compare
    import polars as pl

    from mbb.analysis.compare import condition_table
    from mbb.analysis.runs import load_runs

    exported = pl.read_csv(tmp_path / "compare" / "against-00.csv")
    expected = condition_table(load_runs([tmp_path]), "base")
    expected = expected.filter(pl.col("measure") != "cost_per_run_usd")  # no paid call: left out
    assert exported.height == expected.height
    assert exported["mean"].to_list() == pytest.approx(expected["mean"].to_list(), nan_ok=True)
    rows = json.loads((tmp_path / "compare" / "against-00.json").read_text())
    assert [r["measure"] for r in rows] == expected["measure"].to_list()
    assert {r["baseline"] for r in rows} == {"base"}
    svg = (tmp_path / "compare" / "forest-00.svg").read_text()
    assert "<svg" in svg and "memory_off" in svg and "Difference from base" in svg


def test_the_index_and_the_compare_page_show_one_computation(tmp_path: Path) -> None:
    """Both pages of a report read `mbb.analysis.compare.condition_table`: the same intervals
    and the same verdicts (paired on shared seeds)."""
    import polars as pl

    from mbb.analysis.compare import condition_table
    from mbb.analysis.runs import load_runs
    from mbb.batch.build import load_params
    from mbb.batch.report import _cell, comparison_tables
    from mbb.batch.runner import run_many

    for name in ("deadline_10", "base"):
        run_many(load_params(name, {"subruns": 2}), runs=4, out_dir=tmp_path / name, processes=1)
    tables, _ = comparison_tables(tmp_path)
    expected = condition_table(load_runs([tmp_path]), "base")
    got = tables["base"].filter(pl.col("measure") != "cost_per_run_usd")
    assert got.equals(expected.filter(pl.col("measure") != "cost_per_run_usd"))
    row = got.filter(
        (pl.col("condition") == "deadline_10") & pl.col("effect_size").is_not_null()
    ).row(0, named=True)
    cell = _cell(row, is_base=False)
    assert row["paired"] and "paired" in cell and "d_z" in cell and "95% CI [" in cell
    assert ("'d sig'" in cell) == row["excludes_zero"]
    assert "baseline" in _cell(row, is_base=True)
    assert _cell(None, is_base=False) == "<td>—</td>"


def test_a_colleagues_folder_cannot_change_the_comparison(tmp_path: Path, capsys) -> None:
    """A red team's finds. (1) Forged parquet tables (every evaluation `completed`) moved base's
    completion in the report from 40 % to 100 %: load_runs read a folder's tables when they
    held its run ids; now every number comes from the logs. (2) Runs renamed to another
    condition's folder names were counted under that name: a run whose log is not of a run
    named as its folder is left out, said. (3) A copied run made the whole comparison vanish
    without a word: it is now a warning."""
    import shutil

    import polars as pl

    from mbb.analysis.runs import load_runs
    from mbb.batch.build import load_params
    from mbb.batch.report import build_report
    from mbb.batch.runner import run_many

    run_many(load_params("base", {"subruns": 1}), runs=2, out_dir=tmp_path / "base", processes=1)
    honest = load_runs([tmp_path])["evaluations"]
    evals = tmp_path / "base" / "tables" / "evaluations.parquet"
    forged = pl.read_parquet(evals).with_columns(pl.lit("completed").alias("outcome"))
    forged.write_parquet(evals)
    assert load_runs([tmp_path])["evaluations"].equals(honest)

    shutil.copytree(tmp_path / "base" / "base-seed0001", tmp_path / "base" / "best-seed0001")
    loaded = load_runs([tmp_path])
    assert sorted(loaded["runs"]["run_id"].to_list()) == ["base-seed0000", "base-seed0001"]
    (why,) = loaded["excluded"].filter(pl.col("run_id") == "best-seed0001")["reason"].to_list()
    assert why == "its log is of run 'base-seed0001', not of a run named as its folder"

    shutil.copytree(tmp_path / "base" / "base-seed0001", tmp_path / "copy" / "base-seed0001")
    build_report(tmp_path, viewer=False)
    err = capsys.readouterr().err
    assert "warning: no comparison of conditions: " in err and "(a copy?)" in err


def test_a_notebooks_row_reads_its_runs_from_the_reports_tables(tmp_path: Path) -> None:
    """The index's row for a notebook summarises the runs beside it. It takes them from the
    tables the comparison already read (each log parsed once per report), and they are the
    numbers reading that folder's logs alone gives."""
    from mbb.batch.build import load_params
    from mbb.batch.report import _condition_summary, comparison_tables
    from mbb.batch.runner import run_many

    runs = {"memory_off": 2, "base": 3}
    for name, n in runs.items():
        run_many(load_params(name, {"subruns": 1}), runs=n, out_dir=tmp_path / name, processes=1)
    (tmp_path / "base" / "base-seed0002" / "events.jsonl").write_text("{}\n")  # unusable
    _, loaded = comparison_tables(tmp_path)
    assert loaded is not None
    for name, n in runs.items():
        alone = _condition_summary(tmp_path / name)
        shared = _condition_summary(tmp_path / name, loaded)
        assert shared == alone and alone["runs"] == min(n, 2)
    assert _condition_summary(tmp_path, loaded) == _condition_summary(tmp_path) == {}


def test_a_report_with_invalid_runs_reads_each_log_once(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """The comparison leaves invalid runs out and the spend table counts them (their calls
    were paid for): both come from one reading of the logs (the spend table read every log
    again, valid runs too, when some run was invalid)."""
    import collections
    from typing import Any

    import mbb.analysis.runs as runs_module
    from mbb.batch.build import load_params
    from mbb.batch.report import build_report
    from mbb.batch.runner import run_many

    run_many(load_params("base", {"subruns": 1}), runs=3, out_dir=tmp_path / "base", processes=1)
    meta = tmp_path / "base" / "base-seed0001" / "meta.json"
    meta.write_text(json.dumps({**json.loads(meta.read_text()), "valid": False}))
    reads: collections.Counter[str] = collections.Counter()
    real = runs_module.read_lines

    def counted(path: Path, *args: Any, **kwargs: Any) -> list[str]:
        reads[Path(path).parent.name] += 1
        return real(path, *args, **kwargs)

    monkeypatch.setattr(runs_module, "read_lines", counted)
    build_report(tmp_path, viewer=False)
    assert reads == {f"base-seed000{i}": 1 for i in range(3)}, reads
    assert "warning" not in capsys.readouterr().err
    # (the spend note on invalid runs is checked on an LLM study: tests/llm/test_study.py)


def test_comparison_page_and_index_name_the_study(tmp_path: Path) -> None:
    """compare.html was titled 'mbb comparison of conditions' under the heading 'Conditions
    compared', the index's heading 'mbb report': neither said which study (L6)."""
    from mbb.batch.build import load_params
    from mbb.batch.report import build_report
    from mbb.batch.runner import run_many

    for name in ("memory_off", "base"):
        run_many(load_params(name, {"subruns": 2}), runs=2, out_dir=tmp_path / name, processes=1)
    index = build_report(tmp_path, study_name="my_study").read_text(encoding="utf-8")
    compare = (tmp_path / "compare.html").read_text(encoding="utf-8")
    assert "<title>my_study — conditions compared (mbb)</title>" in compare
    assert "<h1>Conditions compared: my_study</h1>" in compare
    assert "<h1>my_study — mbb report</h1>" in index
