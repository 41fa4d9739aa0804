"""The notebook runs under papermill in the test suite, and its HTML export renders offline."""

from __future__ import annotations

import json

import nbformat
import pytest

from mbb.batch.notebooks import execute_notebook
from mbb.batch.report import external_urls
from mbb.viz.render import MIMETYPE


@pytest.mark.notebook
def test_run_condition_notebook_executes(root, tmp_path):
    out = tmp_path / "base"
    nb_path, html = execute_notebook(
        root / "notebooks" / "run_condition.ipynb",
        out,
        {
            "params_path": str(root / "params" / "base.yaml"),
            "overrides": {"subruns": 2},
            "out_dir": str(out),
            "runs": 2,
        },
    )
    nb = nbformat.read(nb_path, as_version=4)
    charts = [
        o
        for c in nb.cells
        if c.cell_type == "code"
        for o in c.get("outputs", [])
        if MIMETYPE in o.get("data", {})
    ]
    assert (
        len(charts) == 7
    )  # timeline, bids, budgets, demand vs capacity, outcomes, tokens, transmission
    for o in charts:
        assert {"image/png", "image/svg+xml"} <= set(o["data"])
    errors = [
        o
        for c in nb.cells
        if c.cell_type == "code"
        for o in c.get("outputs", [])
        if o.get("output_type") == "error"
    ]
    assert not errors
    page = html.read_text()
    assert page.count("vegaEmbed(") >= 6
    assert external_urls(page, include_links=False) == []
    assert sorted(p.name for p in out.glob("base-seed*")) == ["base-seed0000", "base-seed0001"]
    assert (out / "tables" / "rounds.parquet").is_file()


def test_committed_notebooks_have_no_outputs(root):
    for path in (root / "notebooks").glob("*.ipynb"):
        nb = json.loads(path.read_text())
        tagged = [c for c in nb["cells"] if "parameters" in c.get("metadata", {}).get("tags", [])]
        assert len(tagged) == 1, f"{path.name}: exactly one 'parameters' cell"
        for c in nb["cells"]:
            if c["cell_type"] == "code":
                assert not c.get("outputs") and c.get("execution_count") is None, path.name


@pytest.mark.notebook
def test_compare_conditions_notebook_executes(root, tmp_path):
    from mbb.batch.build import load_params
    from mbb.batch.runner import run_many

    out = tmp_path / "cmp"
    for name in ("base", "memory_off"):  # the notebook reads runs that exist, never runs them
        run_many(load_params(name), runs=2, out_dir=tmp_path / "conditions" / name)
    nb_path, _ = execute_notebook(
        root / "notebooks" / "compare_conditions.ipynb",
        out,
        {"run_dirs": [str(tmp_path / "conditions")]},
        html=False,
    )
    nb = nbformat.read(nb_path, as_version=4)
    outputs = [o for c in nb.cells if c.cell_type == "code" for o in c.get("outputs", [])]
    assert not [o for o in outputs if o.get("output_type") == "error"]
    assert len([o for o in outputs if MIMETYPE in o.get("data", {})]) == 2
    table = next(o for o in outputs if "text/html" in o.get("data", {}))["data"]["text/html"]
    assert "memory_off" in table and "base" in table
    assert sorted(p.name for p in (tmp_path / "conditions").iterdir()) == ["base", "memory_off"]
