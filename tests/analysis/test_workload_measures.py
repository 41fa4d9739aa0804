"""Demand against capacity (mbb.analysis.workload) on the hand-made scenario, and the chart."""

from __future__ import annotations

import pytest

from mbb.analysis.workload import workload
from mbb.viz.workload import workload_chart


def test_workload_per_run_and_subrun_exact(scen):
    # three workers of 100 s each in s1 (W1 and W3 complete, W2 is terminated), the latest
    # deadline 1500 s; no window ran in the hand-made log, so nothing was used
    rows = workload(scen, by=("run_id", "subrun")).to_dicts()
    assert [(r["subrun"], r["workers"], r["demand_s"], r["capacity_s"]) for r in rows] == [
        (1, 3, 300.0, 1500.0),
        (2, 3, 300.0, 1500.0),
    ]
    assert rows[0]["load"] == pytest.approx(0.2)
    assert rows[0]["completion_rate"] == pytest.approx(2 / 3)
    assert rows[1]["completion_rate"] == pytest.approx(2 / 3)
    assert {r["utilisation"] for r in rows} == {0.0}
    assert {(r["condition"], r["seed"]) for r in rows} == {("base", 0)}


def test_workload_table_counts_seeds_and_brackets_the_mean(events):
    from tests.analysis.conftest import build_scenario

    _, tables_of = events
    t = tables_of(build_scenario("base-seed0001"), build_scenario("base-seed0002"))
    # the hand-made logs all record seed 0: take each run's seed from its id
    seed = t["runs"]["run_id"].str.extract(r"(\d+)$").cast(int)
    t["runs"] = t["runs"].with_columns(seed.alias("seed"))
    table = workload(t, by=("condition", "subrun")).to_dicts()
    assert [r["n"] for r in table] == [2, 2]
    for r in table:  # two identical runs: every interval collapses onto the value
        assert r["load_low"] == r["load"] == r["load_high"] == pytest.approx(0.2)
        assert r["completion_rate"] == pytest.approx(2 / 3)


def test_workload_chart_shares_the_y_scale_across_conditions(scen):
    spec = workload_chart(scen).to_dict()
    assert spec["resolve"]["scale"]["y"] == "shared"
    layers = spec["spec"]["layer"]
    marks = [m["type"] if isinstance(m, dict) else m for m in (x["mark"] for x in layers)]
    assert marks == ["bar", "errorbar", "tick"]
