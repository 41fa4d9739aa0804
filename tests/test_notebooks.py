"""The notebook runs under papermill in the test suite, and its HTML export renders offline."""

from __future__ import annotations

import json

import nbformat
import pytest
from helpers import tiny_notebook

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
def test_compare_conditions_with_one_seed_each_says_power_needs_two(root, tmp_path):
    """A newcomer's study with one seed per cell ended its comparison notebook in
    `ValueError: power needs at least 2 pilot values per condition` (exit 0, the line lost in
    the progress bar): the notebook now says so and runs to the end."""
    from mbb.batch.runner import run_conditions

    run_conditions(["base", "memory_off"], runs=1, out_root=tmp_path / "conditions")
    nb_path, _ = execute_notebook(
        root / "notebooks" / "compare_conditions.ipynb",
        tmp_path / "cmp",
        {"run_dirs": [str(tmp_path / "conditions")]},
        html=False,
    )
    nb = nbformat.read(nb_path, as_version=4)
    outputs = [o for c in nb.cells if c.cell_type == "code" for o in c.get("outputs", [])]
    assert not [o for o in outputs if o.get("output_type") == "error"]
    text = "".join(str(o.get("text", "")) for o in outputs)
    assert "power needs at least 2 seeds of base as a pilot; these runs have 1" in text
    # the comparison table says which rows are the baseline's and why a difference is missing
    html = "".join(str(o.get("data", {}).get("text/html", "")) for o in outputs)
    assert ">baseline</td>" in html and "(baseline)" not in html


@pytest.mark.notebook
def test_compare_conditions_notebook_executes(root, tmp_path):
    """The comparison notebook reads finished conditions and shows every row of its tables
    formatted (no polars dump), a forest plot and the charts with intervals."""
    from mbb.batch.runner import run_conditions

    run_conditions(["base", "memory_off"], runs=2, out_root=tmp_path / "conditions")
    out = tmp_path / "cmp"
    nb_path, _ = execute_notebook(
        root / "notebooks" / "compare_conditions.ipynb",
        out,
        {"run_dirs": [str(tmp_path / "conditions")]},
        html=False,
    )
    nb = nbformat.read(nb_path, as_version=4)
    outputs = [o for c in nb.cells if c.cell_type == "code" for o in c.get("outputs", [])]
    assert not [o for o in outputs if o.get("output_type") == "error"]
    charts = [o["data"][MIMETYPE] for o in outputs if MIMETYPE in o.get("data", {})]
    titles = [str(c.get("title")) for c in charts]
    assert len(charts) == 3 and "Difference from base" in titles[0], titles
    tables = [
        o["data"]["text/html"]
        for o in outputs
        if "text/html" in o.get("data", {}) and 'class="mbb-table"' in o["data"]["text/html"]
    ]
    assert len(tables) == 2
    runs_html, diff_html = tables
    assert runs_html.count("<tr>") == 1 + 4  # every run, nothing behind "…"
    assert "memory_off" in diff_html and "mean [95% CI]" in diff_html
    assert "fewer than 5 seeds" in diff_html  # 2 seeds: said next to the numbers
    text = "".join(str(o.get("data", {}).get("text/plain", "")) for o in outputs)
    assert "shape: (" not in text


def test_kernel_is_shut_down_without_an_interrupt(tmp_path, monkeypatch):
    """jupyter_client interrupts a kernel (SIGINT) before asking it to shut down, and a kernel
    still handling a message then prints "KeyboardInterrupt caught in kernel." to the terminal
    of a study's analyses. mbb's kernels are asked to shut down and never sent SIGINT."""
    import signal

    from jupyter_client import AsyncKernelManager

    sent: list[int] = []
    original = AsyncKernelManager._async_signal_kernel

    async def recording(self, signum):
        sent.append(signum)
        await original(self, signum)

    monkeypatch.setattr(AsyncKernelManager, "_async_signal_kernel", recording)
    src = tiny_notebook(tmp_path / "tiny.ipynb", "print(x + 1)")
    target, _ = execute_notebook(src, tmp_path / "out", {"x": 2}, html=False)
    out = nbformat.read(target, as_version=4).cells[-1].outputs
    assert out[0]["text"] == "3\n"
    assert signal.SIGINT not in sent


def test_the_quiet_kernel_manager_is_built_once_and_only_when_asked_for():
    """The kernel manager class is one class for every notebook run (it was built anew on each
    call), and importing mbb's notebook runner still leaves jupyter_client unimported."""
    import subprocess
    import sys

    from mbb.batch.notebooks import _kernel_manager_class

    assert _kernel_manager_class() is _kernel_manager_class()
    code = (
        "import sys, mbb.batch.notebooks\n"
        "assert 'jupyter_client' not in sys.modules, 'imported by mbb.batch.notebooks'\n"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr[-2000:]
