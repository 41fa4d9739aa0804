"""A value that cannot be computed is null (or counted apart), never a 0 that reads as a result
and never a seed dropped without a word. Each case was found by an audit of the measures
(a drift over one subrun read 0.0, a zero bid dropped its seed, a test that could not run said
p = 1); each test fails on the code before the fix."""

from __future__ import annotations

import math

import polars as pl
import pytest

from mbb import analysis as A
from mbb.analysis.outcome import gini, outcomes
from mbb.analysis.prevalence import corrected_prevalence, rogan_gladen
from mbb.analysis.workload import workload

from .test_planted_effects import batch

SEEDS = range(3)


@pytest.fixture(scope="module")
def one_subrun():
    return batch("base", {"name": "one_subrun", "subruns": 1}, SEEDS)


@pytest.fixture(scope="module")
def pair():
    """(urgent_worker, base) over three seeds."""
    return batch("urgent_worker", seeds=SEEDS), batch("base", seeds=SEEDS)


def test_a_drift_over_one_subrun_is_null(one_subrun):
    t = one_subrun
    assert A.mean_bid(t, by="run_id")["drift"].null_count() == len(SEEDS)
    assert A.structural_metrics(t, by="run_id")["winning_bid_drift"].null_count() == len(SEEDS)
    wr = A.worker_round_predictions(A.classify_evidence(t))
    per_run = A.behaviour_drift(t, wr, by="run_id")
    assert (per_run["levels"] == 1).all() and per_run["delta"].null_count() == per_run.height
    tests = A.drift_tests(t, wr, by_model=False)
    assert tests["delta"].null_count() == tests.height
    assert tests["p_value"].null_count() == tests.height  # nothing to test, not p = 1
    assert tests["chi2"].null_count() == tests.height


def test_a_drift_over_two_subruns_is_still_computed(pair):
    _, base = pair
    assert A.mean_bid(base, by="run_id")["drift"].null_count() == 0


def _set_opening_bid(tables: dict, run_id: str, worker: str, bid: int) -> dict:
    d = tables["declarations"]
    hit = (pl.col("run_id") == run_id) & (pl.col("worker") == worker) & (pl.col("round") == 1)
    return {
        **tables,
        "declarations": d.with_columns(pl.when(hit).then(bid).otherwise("bid").alias("bid")),
    }


def test_a_zero_opening_bid_keeps_its_seed_with_a_note(pair):
    urgent, base = pair
    run = urgent["runs"].filter(pl.col("seed") == 1)["run_id"].item()
    zero = _set_opening_bid(urgent, run, "W1", 0)
    u = A.urgency_premium_paired(zero, base)
    assert u["seed"].to_list() == list(SEEDS)  # the old code dropped seed 1
    row = u.filter(pl.col("seed") == 1).row(0, named=True)
    assert row["log_ratio"] is None and row["treated_bid"] == 0.0
    assert row["note"] == "opened at 0 in the treated run: no log ratio"
    assert u.filter(pl.col("seed") != 1)["note"].is_null().all()


def test_a_treated_seed_without_its_base_run_keeps_a_row(pair):
    urgent, base = pair
    ids = base["runs"].filter(pl.col("seed") != 2)["run_id"].to_list()
    fewer = {
        k: v.filter(pl.col("run_id").is_in(ids)) if "run_id" in v.columns else v
        for k, v in base.items()
    }
    for measure in (A.urgency_premium_paired, A.rich_worker_paired):
        out = (
            measure(urgent, fewer)
            if measure is A.urgency_premium_paired
            else measure(batch("rich_worker", seeds=SEEDS), fewer)
        )
        assert out["seed"].to_list() == list(SEEDS), measure.__name__
        row = out.filter(pl.col("seed") == 2).row(0, named=True)
        assert row["note"] == "no base run of this seed", measure.__name__
        value = "log_ratio" if measure is A.urgency_premium_paired else "win_rate_diff"
        assert row[value] is None


def test_zero_bids_when_lost_are_counted_not_dropped(pair):
    urgent, _ = pair
    before = A.termination_discount(urgent, by="run_id")
    assert (before["workers_zero_when_lost"] == 0).all()
    # every bid of every worker set to 0 in the rounds the measure calls lost
    nb = A.measures._normalized_bids(urgent).filter(pl.col("urgency") > 1.0)
    lost = nb.select("run_id", "subrun", "round", "worker").with_columns(
        pl.lit(True).alias("_lost")
    )
    d = urgent["declarations"].join(lost, on=["run_id", "subrun", "round", "worker"], how="left")
    zeroed = {
        **urgent,
        "declarations": d.with_columns(
            pl.when(pl.col("_lost")).then(0).otherwise("bid").alias("bid")
        ).drop("_lost"),
    }
    after = A.termination_discount(zeroed, by="run_id")
    assert after["run_id"].to_list() == before["run_id"].to_list()  # no run vanished
    assert after["workers_zero_when_lost"].to_list() == before["workers"].to_list()
    assert (after["workers"] == 0).all() and after["log_ratio"].null_count() == after.height
    pooled = A.termination_discount(zeroed)
    assert pooled["workers_zero_when_lost"].item() == before["workers"].sum()


def test_gini_and_waits_without_anything_to_measure_are_null(pair):
    assert math.isnan(gini([])) and math.isnan(gini([0.0, 0.0])) and math.isnan(gini([5.0]))
    assert gini([0.0, 10.0]) == pytest.approx(0.5)
    _, base = pair
    per_worker = outcomes(base, ["run_id", "worker"])
    assert per_worker["gini_exec"].null_count() == per_worker.height  # one worker: no spread
    no_requests = {**base, "requests": base["requests"].clear()}
    waits = outcomes(no_requests, ["run_id"])
    assert waits["mean_wait_s"].null_count() == waits.height
    assert waits["max_wait_s"].null_count() == waits.height


def test_a_share_of_no_units_corrects_to_nothing():
    assert math.isnan(rogan_gladen(float("nan"), 0.9, 0.05))
    counts = pl.DataFrame({"category": ["price_primary"], "units": [0], "labelled": [0]})
    rates = pl.DataFrame(
        {"category": ["price_primary"], "positives": [40], "tp": [36], "negatives": [60], "fp": [3]}
    )
    row = corrected_prevalence(counts, rates).row(0, named=True)
    assert all(math.isnan(row[c]) for c in ("raw_lo", "raw_hi", "corrected", "corrected_lo"))
    assert row["identifiable"] is False


def test_workload_counts_seeds_without_a_completion_rate(pair):
    _, base = pair
    run = base["runs"]["run_id"][0]
    cut = {
        **base,
        "evaluations": base["evaluations"].filter(
            ~((pl.col("run_id") == run) & (pl.col("subrun") == 2))
        ),
    }
    w = workload(cut).filter(pl.col("subrun") == 2).row(0, named=True)
    assert w["n"] == len(SEEDS) and w["seeds_without_completion"] == 1
    per_run = workload(cut, by=("run_id", "subrun")).filter(pl.col("subrun") == 2)
    assert w["completion_rate"] == pytest.approx(per_run["completion_rate"].drop_nulls().mean())


@pytest.fixture(scope="module")
def centralized():
    """mech_fcfs: a centralized mechanism, so nobody negotiates (no declaration, message or
    ballot: no text and no bid)."""
    return batch("mech_fcfs", seeds=range(2))


def test_text_measures_of_a_run_without_negotiation_text_are_na_not_0(centralized, pair):
    # compare_conditions read "Rule-making 0.0 %" for mech_fcfs, as if measured (a reviewer)
    per_run = A.text_measures_by_run(centralized, A.classify_evidence(centralized))
    for m in A.TEXT_MEASURES:
        assert per_run[m].null_count() == per_run.height, m
    dyn = A.rule_dynamics(centralized, A.classify_evidence(centralized))
    assert dyn.height and dyn["share_of_rounds"].null_count() == dyn.height
    assert dyn["rounds_with"].null_count() == dyn.height
    _, base = pair  # a run that negotiated and stated no rule still measures 0
    measured = A.text_measures_by_run(base, A.classify_evidence(base))
    assert (measured["rule_making"] == 0).all()
    assert (A.rule_dynamics(base, A.classify_evidence(base))["rounds_with"].is_not_null()).all()
