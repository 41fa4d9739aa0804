"""The analysis notebooks run under papermill on small scripted batches, draw their charts
offline and raise nothing; the committed copies are thin and carry no outputs."""

from __future__ import annotations

import json
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import nbformat
import pytest

from mbb.batch.build import load_params
from mbb.batch.notebooks import execute_notebook
from mbb.batch.runner import run_many
from mbb.viz.render import MIMETYPE

NOTEBOOKS = ("taxonomy_audit", "token_audit", "transmission", "starting_states")
# small enough to keep the suite quick; two subruns so drift and transmission have an s+1
SMALL = {"runs": 2, "overrides": {"subruns": 2}}
# the conditions the analysis notebooks read (transmission: memory on and off; starting states:
# the rich and the urgent worker against base)
CONDITIONS = ("base", "memory_off", "rich_worker", "urgent_worker")


def _outputs(nb: nbformat.NotebookNode) -> list[dict[str, Any]]:
    return [o for c in nb.cells if c.cell_type == "code" for o in c.get("outputs", [])]


def _run(root: Path, name: str, out: Path, **params: Any) -> nbformat.NotebookNode:
    nb_path, _ = execute_notebook(root / "notebooks" / f"{name}.ipynb", out, params, html=False)
    nb = nbformat.read(nb_path, as_version=4)
    assert not [o for o in _outputs(nb) if o.get("output_type") == "error"]
    return nb


def _charts(nb: nbformat.NotebookNode) -> list[dict[str, Any]]:
    return [o for o in _outputs(nb) if MIMETYPE in o.get("data", {})]


@pytest.mark.parametrize("name", NOTEBOOKS)
def test_committed_notebook_is_thin_and_clean(root, name):
    nb = json.loads((root / "notebooks" / f"{name}.ipynb").read_text())
    tagged = [c for c in nb["cells"] if "parameters" in c.get("metadata", {}).get("tags", [])]
    assert len(tagged) == 1
    for c in nb["cells"]:
        if c["cell_type"] == "code":
            assert not c.get("outputs") and c.get("execution_count") is None


@pytest.fixture(scope="module")
def executed(root, tmp_path_factory) -> dict[str, tuple[nbformat.NotebookNode, Path]]:
    """All five notebooks, two at a time in this process (papermill is thread-safe when no
    `cwd=` is passed; the measured gain is about 40 %)."""
    base = tmp_path_factory.mktemp("analysis_notebooks")
    labelled = base / "labelled.csv"
    labelled.write_text(  # the IPW review format: stratum sizes and weights
        "run_id,seq,source,text,stratum,N_h,n_h,weight,predicted,human_labels\n"
        "base-seed0000,1,message,My bid stands.,anchoring,4,1,4.0,anchoring,anchoring\n"
        "base-seed0000,2,message,Hello.,none,30,1,30.0,,reciprocity\n"
    )
    runs = base / "runs"  # analyses read recorded runs, never run them
    for name in CONDITIONS:
        cond = load_params(name, {"subruns": 2})
        run_many(cond, runs=SMALL["runs"], out_dir=runs / name, processes=1).check()
    read = {"run_dirs": [str(runs)]}
    params = {
        "taxonomy_audit": {
            **read,
            "out_dir": str(base / "taxonomy_audit"),
            "review_csv": str(labelled),
        },
        "token_audit": read,
        "transmission": read,
        "starting_states": read,
        "run_condition": {"out_dir": str(base / "run_condition"), **SMALL},
    }
    with ThreadPoolExecutor(max_workers=2) as pool:
        futs = {n: pool.submit(_run, root, n, base / n, **p) for n, p in params.items()}
        return {n: (f.result(), base / n) for n, f in futs.items()}


@pytest.mark.notebook
@pytest.mark.parametrize("name", NOTEBOOKS)
def test_notebook_executes_and_draws(executed, name):
    nb, _ = executed[name]
    charts = _charts(nb)
    assert charts
    for o in charts:
        assert {"image/png", "image/svg+xml"} <= set(o["data"])


@pytest.mark.notebook
def test_taxonomy_audit_exports_and_imports_review(executed):
    nb, out = executed["taxonomy_audit"]
    assert len(_charts(nb)) >= 9  # the corrected-prevalence chart too
    assert (out / "review_sample.csv").is_file()
    text = "".join(o.get("text", "") for o in _outputs(nb) if o.get("output_type") == "stream")
    assert "No labelled review" not in text
    md = "".join(c.source for c in nb.cells if c.cell_type == "markdown")
    assert "stand-in" in md and "excluded from the agreement statistics" in md
    assert "No labelled review" not in text
    html = "".join(o.get("data", {}).get("text/html", "") for o in _outputs(nb))
    # the gold table with kappa; the IPW estimates with their intervals in one column
    assert "kappa min" in html and "recall [95% CI]" in html
    assert "Test split 2" in md


@pytest.mark.notebook
@pytest.mark.parametrize("name", [*NOTEBOOKS, "run_condition"])
def test_tables_are_formatted_not_dumped(executed, name):
    """Every table a notebook shows is mbb's formatted HTML: no polars dump (shape line, dtype
    row, quoted strings, rows hidden behind an ellipsis)."""
    nb, _ = executed[name]
    for o in _outputs(nb):
        data = o.get("data", {})
        plain = str(data.get("text/plain", ""))
        assert "shape: (" not in plain and "┆" not in plain, plain[:300]
        page = str(data.get("text/html", ""))
        if "<table" in page and "mbb-tr" not in page:  # a round's transcript is its own page
            assert 'class="mbb-table"' in page, page[:300]


@pytest.mark.notebook
def test_token_audit_says_counts_are_approximate(executed):
    nb, _ = executed["token_audit"]
    text = "".join(o.get("text", "") for o in _outputs(nb) if o.get("output_type") == "stream")
    assert "approximate counts: True" in text
    assert any("approximate tokenizer" in o["data"]["text/plain"] for o in _charts(nb))


@pytest.mark.notebook
def test_transmission_compares_memory_on_and_off(executed):
    nb, out = executed["transmission"]
    assert not any(out.glob("**/events.jsonl"))  # it read the recorded runs, ran none
    assert any("memory on vs off" in o["data"]["text/plain"] for o in _charts(nb))
    # the table's pooled rate is named so beside the chart's mean of the runs' rates (one
    # quantity read as two numbers, 22.2% and 13%, by a reviewer)
    html = " ".join(str(o.get("data", {}).get("text/html", "")) for o in _outputs(nb))
    assert "rate pooled over institutions" in html and "(the chart)" in html


@pytest.mark.notebook
def test_run_condition_draws_token_audit_and_transmission(executed):
    nb, _ = executed["run_condition"]
    titles = [o["data"]["text/plain"] for o in _charts(nb)]
    assert any("Token audit" in t for t in titles)
    assert any("lifecycles" in t for t in titles)
