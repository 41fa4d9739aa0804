"""Outcome measures: definitions checked on hand-made values and on real runs."""

from __future__ import annotations

import math

import polars as pl
import pytest
from conftest import small

from mbb.analysis.mechanisms.compare import MEASURES, RUN_KEYS, compare, summary
from mbb.analysis.mechanisms.replay import replay
from mbb.analysis.outcome import gini, outcomes, waits
from mbb.batch.build import run_condition
from mbb.core.tables import concat_tables, tables_from_log


def recorded(folder, n):
    """The run folders of seeds 0..n-1 of the small condition (compare reads runs)."""
    return [run_condition(small(), s, folder).out_dir for s in range(n)]


@pytest.mark.parametrize(
    ("values", "expected"),
    [
        ([], None),
        ([0, 0], None),
        ([7], None),
        ([5, 5, 5], 0.0),
        ([0, 0, 0, 10], 0.75),
        ([1, 2, 3, 4], 0.25),
    ],
)
def test_gini(values, expected):
    """None: no spread to measure (fewer than two values, or nothing to share): nan, not 0."""
    if expected is None:
        assert math.isnan(gini(values))
    else:
        assert gini(values) == pytest.approx(expected)


def test_outcomes_match_the_evaluations():
    original = run_condition(small(), 1)
    t = concat_tables(
        [tables_from_log(original.log), tables_from_log(replay(original.log.lines, "fcfs").log)]
    )
    out = outcomes(t, RUN_KEYS).sort("base_run", "mechanism")
    assert out["mechanism"].to_list() == ["fcfs", "negotiated"]
    assert out["base_run"].n_unique() == 1
    ev = t["evaluations"].filter(pl.col("run_id") == original.run_id)
    neg = out.filter(pl.col("mechanism") == "negotiated").row(0, named=True)
    assert neg["deadline_miss"] == pytest.approx((ev["outcome"] == "terminated").mean())
    assert neg["progress"] == pytest.approx(ev["progress"].mean())
    assert neg["score"] == pytest.approx(ev["score"].mean())
    assert (
        neg["credits_per_run"]
        == t["payments"].filter(pl.col("run_id") == original.run_id)["amount"].sum()
    )
    assert out.filter(pl.col("mechanism") == "fcfs")["credits_per_run"].item() == 0
    for m in MEASURES:
        assert out[m].null_count() == 0, m
    w = waits(t)
    assert (w["wait_s"] >= 0).all()
    assert w.height == t["requests"].height


def test_compare_pairs_institutions_with_every_mechanism(tmp_path):
    runs = recorded(tmp_path / "runs", 2)
    c = compare(runs, mechanisms=("fcfs", "second_price"), out_dir=tmp_path)
    assert c.outcomes.height == 2 * 3
    assert set(c.outcomes["mechanism"]) == {"negotiated", "fcfs", "second_price"}
    assert c.screens.height == 2  # screens run on the institutions
    s = summary(c.outcomes)
    assert s["mechanism"].to_list() == ["negotiated", "fcfs", "second_price"]
    assert (tmp_path / "mechanisms" / "outcomes.parquet").is_file()
    with pytest.raises(ValueError, match="unknown mechanism"):
        compare(runs[:1], mechanisms=("lottery",))


def test_figures_build_from_a_comparison(tmp_path):
    from mbb.viz import mechanisms as mf

    c = compare(recorded(tmp_path, 2), mechanisms=("fcfs", "edf", "first_price"))
    for chart in (
        mf.outcome_comparison(c.outcomes),
        mf.differences_vs_institutions(c.outcomes),
        mf.waiting_distribution(c.waits),
        mf.execution_by_worker(c.execution),
        mf.screen_trips(c.screens),
    ):
        spec = chart.to_dict()
        assert spec["$schema"].startswith("https://vega.github.io/schema/vega-lite/")


@pytest.mark.notebook
def test_mechanisms_notebook_executes(tmp_path):
    import nbformat

    from mbb.batch.build import load_params
    from mbb.batch.notebooks import execute_notebook
    from mbb.batch.runner import run_many
    from mbb.core.paths import PROJECT_ROOT
    from mbb.viz.render import MIMETYPE

    # the notebook reads runs that exist, never runs them
    run_many(load_params("base", {"subruns": 2}), runs=2, out_dir=tmp_path / "runs" / "base")
    nb_path, _ = execute_notebook(
        PROJECT_ROOT / "notebooks" / "mechanisms.ipynb",
        tmp_path,
        {"run_dirs": [str(tmp_path / "runs")], "out_dir": str(tmp_path / "out")},
        html=False,
    )
    nb = nbformat.read(nb_path, as_version=4)
    outputs = [o for c in nb.cells if c.cell_type == "code" for o in c.get("outputs", [])]
    assert not [o for o in outputs if o.get("output_type") == "error"]
    assert sum(MIMETYPE in o.get("data", {}) for o in outputs) == 5
    assert (tmp_path / "out" / "base" / "mechanisms" / "outcomes.parquet").is_file()
    # the table's max wait is a mean of the runs' maxima, the chart's diamond the longest wait
    # of all: each says which (a reviewer read 702 s against 750 s as a contradiction)
    page = " ".join(str(o.get("data", {})) for o in outputs)
    assert "mean of the runs" in page and "the longest wait of any request" in page
    # base's deadlines are all equal: EDF is FCFS there, and the page says so and why (a
    # reviewer read the identical rows as a finding)
    text = " ".join(o.get("text", "") for o in outputs if o.get("output_type") == "stream")
    assert "⚠ base: fcfs = edf, the same schedule in all 2 runs" in text
    assert "every worker has the same deadline" in text


def test_identical_schedules_are_found_and_explained(tmp_path):
    """On urgent_worker the urgent W1 is also first in request order, so EDF and FCFS give the
    same windows in every run (said, with that reason); on mech_mixed_deadlines the tightest
    deadline queues last and they differ (not said)."""
    from mbb.analysis.mechanisms import same_schedules
    from mbb.batch.build import load_params

    runs = {
        name: [
            run_condition(load_params(name, {"subruns": 2}), s, tmp_path / name).out_dir
            for s in range(2)
        ]
        for name in ("urgent_worker", "mech_mixed_deadlines")
    }
    urgent = same_schedules(compare(runs["urgent_worker"], mechanisms=("fcfs", "edf", "sjf")))
    row = urgent.filter(pl.col("mechanisms") == "fcfs = edf").row(0, named=True)
    assert row["condition"] == "urgent_worker" and row["runs"] == 2
    assert "earliest deadline (W1) is also first in request order" in row["why"]
    mixed = compare(runs["mech_mixed_deadlines"], mechanisms=("fcfs", "edf"))
    assert "fcfs = edf" not in same_schedules(mixed)["mechanisms"].to_list()


def test_compare_conditions_refuses_a_misspelled_name_and_says_what_it_leaves_out(tmp_path, capsys):
    from mbb.analysis.mechanisms.compare import compare_conditions

    runs = recorded(tmp_path / "runs", 2)
    cell = runs[0].name.rsplit("-seed", 1)[0]
    with pytest.raises(ValueError, match=f"'{cell}x' match no run; the runs found are of: {cell}"):
        compare_conditions([tmp_path / "runs"], conditions=[f"{cell}x"], mechanisms=("fcfs",))
    log = runs[1] / "events.jsonl"
    log.write_text("".join(log.read_text().splitlines(keepends=True)[:-1]))  # cut short
    c = compare_conditions([tmp_path / "runs"], conditions=[cell], mechanisms=("fcfs",))
    assert set(c.outcomes["base_run"]) == {runs[0].name}
    assert f"left out 1 run(s): not finished (e.g. {runs[1].name})" in capsys.readouterr().out


def test_a_condition_that_imposes_a_mechanism_counts_each_seed_once(tmp_path):
    """mech_fcfs's runs are FCFS's runs: replayed under FCFS too, each seed counted twice (runs
    10 for 5 seeds, its interval over pseudo-seeds) and its `negotiated` row left blank."""
    import json

    from mbb.batch.build import load_params
    from mbb.viz import mechanisms as mf

    runs = [
        run_condition(load_params("mech_fcfs", {"subruns": 2}), s, tmp_path / "runs").out_dir
        for s in range(2)
    ]
    c = compare(runs, mechanisms=("fcfs", "edf"))
    fcfs = c.outcomes.filter(pl.col("mechanism") == "fcfs")
    assert sorted(fcfs["run_id"]) == [r.name for r in runs]  # the runs themselves, once each
    from mbb.analysis.mechanisms.compare import configured_mechanism

    assert configured_mechanism((runs[0] / "events.jsonl").read_text().splitlines()) == "fcfs"
    assert c.outcomes.filter(pl.col("mechanism") == "edf").height == 2
    s = summary(c.outcomes).filter(pl.col("condition") == "mech_fcfs")
    by_mech = {r["mechanism"]: r for r in s.iter_rows(named=True)}
    assert list(by_mech) == ["negotiated", "fcfs", "edf"]
    assert by_mech["fcfs"]["runs"] == 2 and by_mech["edf"]["runs"] == 2
    assert by_mech["fcfs"]["played"] == "as played: imposed by the condition"
    assert by_mech["edf"]["played"] == "replay of the recorded demand"
    neg = by_mech["negotiated"]
    assert neg["runs"] == 0 and neg["deadline_miss"] is None  # n/a, with the reason beside it
    assert neg["played"] == "none: the condition imposes fcfs, nothing was negotiated"
    spec = json.dumps(mf.outcome_comparison(c.outcomes).to_dict())
    assert "none: the condition imposes fcfs, nothing was negotiated" in spec
    assert "fewer than 5 seeds" in spec and "of 0 runs" not in spec


def test_mechanisms_that_give_one_schedule_are_one_line_with_the_reason(tmp_path):
    """On mech_fcfs nobody bids: the auctions fall back to request order, as FCFS and (equal
    deadlines) EDF do. Said as one group with that reason; it printed four pairwise lines
    ("edf = first_price: their orders agree") and left out FCFS, the mechanism played."""
    from mbb.analysis.mechanisms import same_schedules
    from mbb.batch.build import load_params

    runs = [
        run_condition(load_params("mech_fcfs", {"subruns": 2}), s, tmp_path).out_dir
        for s in range(2)
    ]
    same = same_schedules(compare(runs, mechanisms=("fcfs", "edf", "first_price", "second_price")))
    assert same["mechanisms"].to_list() == ["fcfs = edf = first_price = second_price"]
    why = same["why"].item()
    assert "no bid was declared in these runs (the condition imposes fcfs" in why
    assert "the auctions have nothing to rank by" in why
    assert "every worker has the same deadline" in why
