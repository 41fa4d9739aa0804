"""Run figures (`mbb.viz.run`): offline rendering, one worker palette and order, subrun panels
on one scale, "none" where nothing happened, and altair kept out of `import mbb`."""

from __future__ import annotations

import subprocess
import sys
from typing import Any

import polars as pl
import pytest

from mbb.viz import render, theme
from mbb.viz import run as figures

FIGURES = [
    figures.resource_timeline,
    figures.bids_by_round,
    figures.budgets_over_rounds,
    figures.outcomes_by_subrun,
]


def walk(node: Any):
    """Every dict in a Vega-Lite spec, depth first."""
    if isinstance(node, dict):
        yield node
        for v in node.values():
            yield from walk(v)
    elif isinstance(node, list):
        for v in node:
            yield from walk(v)


def data_rows(spec: dict) -> list[dict]:
    return [r for rows in spec.get("datasets", {}).values() for r in rows]


def none_marks(spec: dict) -> list[dict]:
    return [
        n["mark"]
        for n in walk(spec)
        if isinstance(n.get("mark"), dict) and n["mark"].get("text") == theme.NONE
    ]


@pytest.mark.parametrize("fig", FIGURES, ids=lambda f: f.__name__)
def test_figure_renders_offline(fig, base_batch, tmp_path):
    chart = fig(base_batch.tables)
    spec = chart.to_dict()
    assert spec.get("title") or any("title" in str(v) for v in spec.values())
    paths = render.save_chart(chart, tmp_path / fig.__name__)
    assert paths["png"].read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert "<svg" in paths["svg"].read_text()


def test_worker_colours_are_consistent_across_figures(base_batch):
    scales = set()
    for fig in (figures.resource_timeline, figures.bids_by_round, figures.budgets_over_rounds):
        # without the workers table the round charts follow seats, coloured as seats
        for node in walk(fig(base_batch.tables).to_dict()):
            if node.get("field") == "worker" and "scale" in node:
                scales.add((tuple(node["scale"]["domain"]), tuple(node["scale"]["range"])))
    assert len(scales) == 1
    ((domain, colours),) = scales
    assert domain == ("W1", "W2", "W3", "W4", "W5")
    assert len(set(colours)) == 5


def test_worker_colour_order_is_numeric():
    s = theme.worker_color(["W10", "W2", "W1"])
    assert s.domain == ["W1", "W2", "W10"]
    assert theme.worker_order(["late", "W10", "W2", "W2"]) == ["W2", "W10", "late"]


@pytest.mark.parametrize("fig", FIGURES, ids=lambda f: f.__name__)
def test_subrun_panels_share_their_scales(fig, base_batch):
    spec = fig(base_batch.tables).to_dict()
    resolved = [n["resolve"] for n in walk(spec) if "resolve" in n]
    assert not any("independent" in str(r) for r in resolved), resolved


def test_outcome_shares_are_drawn_on_one_zero_to_one_scale(base_batch):
    spec = figures.outcomes_by_subrun(base_batch.tables).to_dict()
    domains = [
        n["scale"]["domain"] for n in walk(spec) if n.get("field") == "mean" and "scale" in n
    ]
    assert domains == [[0, 1]]


def test_outcomes_per_subrun_show_the_interval_over_seeds(base_batch):
    """Each bar is a mean over seeds with its bootstrap CI, and 3 seeds are flagged on the
    chart itself (not only in a log)."""
    spec = figures.outcomes_by_subrun(base_batch.tables).to_dict()
    rows = data_rows(spec)
    assert rows and all(r["n"] == 3 for r in rows)
    assert all(r["ci_low"] <= r["mean"] <= r["ci_high"] for r in rows)
    assert any(
        n.get("mark", {}) == {"type": "errorbar", "ticks": True, "color": "black"}
        or n.get("mark") == "errorbar"
        or (isinstance(n.get("mark"), dict) and n["mark"].get("type") == "errorbar")
        for n in walk(spec)
    )
    subtitle = " ".join(spec["title"]["subtitle"])
    assert "bootstrap over seeds" in subtitle and "fewer than 5 seeds" in subtitle


def test_bids_follow_personas_not_seats(base_batch):
    """Seating rotates personas over seeds: with the workers table one line per persona (each
    with its CI band); without it the title says each seat's line blends personas."""
    from mbb.analysis import with_run_info

    t = with_run_info(base_batch.tables, by_kind=base_batch.by_kind)
    spec = figures.bids_by_round(t).to_dict()
    keys = {r["label"] for r in data_rows(spec) if "label" in r}
    assert keys == set(t["workers"]["label"].unique()) and "W1" not in keys
    assert any(
        isinstance(n.get("mark"), dict) and n["mark"].get("type") == "area" for n in walk(spec)
    )
    seat = figures.bids_by_round(base_batch.tables).to_dict()
    assert "blends the personas" in " ".join(seat["title"]["subtitle"])
    # the persona's mean at (subrun 1, round 1) is the mean over seeds of that persona's bid
    d = t["declarations"].sort("seq").group_by("run_id", "subrun", "round", "worker").last()
    d = d.join(t["workers"].select("run_id", "worker", "label"), on=["run_id", "worker"])
    one = d.filter((pl.col("subrun") == 1) & (pl.col("round") == 1))
    for label, part in one.group_by("label"):
        (row,) = [
            r
            for r in data_rows(spec)
            if r.get("label") == label[0] and r["subrun"] == 1 and r["round"] == 1
        ]
        assert row["mean"] == pytest.approx(part["bid"].mean()) and row["n"] == part.height


def test_a_subrun_without_bids_says_none(base_batch):
    t = dict(base_batch.tables)
    t["declarations"] = t["declarations"].filter(pl.col("subrun") != 3)
    spec = figures.bids_by_round(t).to_dict()
    empty = [r for r in data_rows(spec) if r.get("empty") is True]
    assert [r["subrun"] for r in empty] == [3]
    assert none_marks(spec), "no 'none' text layer"
    full = figures.bids_by_round(base_batch.tables).to_dict()
    assert not [r for r in data_rows(full) if r.get("empty") is True]


def test_a_run_without_any_bid_says_none(base_batch):
    t = {**base_batch.tables, "declarations": base_batch.tables["declarations"].clear()}
    spec = figures.bids_by_round(t).to_dict()
    assert [r["text"] for r in data_rows(spec) or spec["data"]["values"]] == [theme.NONE]
    assert "no bid was declared" in str(spec["title"])


def test_import_mbb_leaves_altair_unimported():
    code = (
        "import sys, runpy\n"
        "import mbb, mbb.viz, mbb.viz.theme, mbb.analysis.compare, mbb.analysis.outcome\n"
        "import mbb.viz.transcript\n"
        "assert 'altair' not in sys.modules, 'imported by mbb'\n"
        "sys.argv = ['mbb', '--help']\n"
        "try:\n    runpy.run_module('mbb', run_name='__main__')\n"
        "except SystemExit:\n    pass\n"
        "assert 'altair' not in sys.modules, 'imported by mbb --help'\n"
        "from mbb.viz import run\n"
        "assert 'altair' in sys.modules  # the figure modules do import it\n"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr[-2000:]


def test_outcomes_draw_completion_once_and_say_what_each_share_counts(base_batch):
    """Completion and deadline miss are complements when every worker-subrun completed or hit
    its deadline: one of them is drawn and the subtitle says why; the y title says what the
    axis is in one unit (it read 'Share of worker-subruns / mean (0-1)' over % ticks, and
    compare's 'Share of worker-subruns / mean progress')."""
    from mbb.analysis.outcome import misses_complete_completion, outcomes
    from mbb.viz import compare

    per_run = outcomes(base_batch.tables, ["run_id", "subrun"])
    assert misses_complete_completion(per_run)
    assert not misses_complete_completion(
        per_run.with_columns(pl.col("deadline_miss") * 0.5)  # some withdrawn or unfinished
    )
    run_spec = figures.outcomes_by_subrun(base_batch.tables).to_dict()
    cmp_spec = compare.outcomes_by_condition(base_batch.tables).to_dict()
    for spec in (run_spec, cmp_spec):
        measures = {r["measure"] for r in data_rows(spec)}
        assert not any("deadline" in m for m in measures), measures
        assert any("completion" in m for m in measures)
        assert "deadline-miss rate not drawn" in " ".join(spec["title"]["subtitle"])
        titles = {n["title"] for n in walk(spec) if n.get("field") == "mean" and "scale" in n}
        assert titles == {"Mean over seeds (%)"}, titles
    assert "progress: mean share of work done" in " ".join(run_spec["title"]["subtitle"])
    assert {r["measure"] for r in data_rows(cmp_spec)} == {
        "completion|(share of worker-subruns)",
        "progress|(mean share of work done)",
    }
