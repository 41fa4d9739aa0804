"""Behaviour measures validated both ways on the offline population: an effect planted with a
persona knob is recovered with the right sign and a CI over seeds that excludes 0; with the
knob off the CI includes 0 in at least 90 % of repetitions (disjoint seed sets).

Runs are in memory (no run folders); every batch is built once per module."""

from __future__ import annotations

from collections import defaultdict
from typing import Any

import numpy as np
import polars as pl
import pytest

from mbb import analysis as A
from mbb.batch.build import load_params, run_condition
from mbb.core.paths import PROJECT_ROOT
from mbb.core.tables import tables_from_lines

SEEDS = range(10)
REPS, PER_REP = 20, 8  # null tests: 20 disjoint sets of 8 seeds
BIDS_OFF = {"urgency_premium": False, "termination_discount": False}


def batch(name: str, overrides: dict[str, Any] | None = None, seeds=SEEDS) -> dict:
    """Tables (with run info) of `seeds` of params/<name>.yaml with `overrides`, in memory."""
    cond = load_params(PROJECT_ROOT / "params" / f"{name}.yaml", overrides)
    by_kind: dict[str, list[str]] = defaultdict(list)
    for seed in seeds:
        for kind, lines in run_condition(cond, seed).log.by_kind.items():
            by_kind[kind].extend(lines)
    return A.with_run_info(tables_from_lines(by_kind), by_kind=by_kind)


def ci(values) -> tuple[float, float, float]:
    return A.seed_bootstrap_ci(np.asarray(values, dtype=float))


def excludes_zero(low: float, high: float) -> bool:
    return low > 0 or high < 0


def null_coverage(per_seed: pl.DataFrame, value: str, per_rep: int = PER_REP) -> int:
    """How many of the REPS disjoint sets of `per_rep` seeds give a CI that includes 0."""
    hits = 0
    for rep in range(REPS):
        part = per_seed.filter(pl.col("seed").is_in(range(rep * per_rep, (rep + 1) * per_rep)))
        _, low, high = ci(part[value])
        hits += low <= 0 <= high
    return hits


def rule_makers(name: str, recall: str, memory: bool) -> dict:
    return batch(
        "base",
        {
            "name": name,
            "workers": {"personas": ["rule_maker"], "behaviour": {"rule_recall": recall}},
            "memory": {"enabled": memory},
        },
    )


def transmission(tables: dict, kind: str) -> pl.DataFrame:
    t = A.transmission_rates(tables, A.classify_evidence(tables), by="run_id")
    return t.filter(pl.col("kind") == kind)


# --- transmission ---------------------------------------------------------------------------
def test_rule_makers_relying_on_memory_transmit_only_with_memory():
    on = transmission(rule_makers("rm_memory_on", "memory", True), "rule")
    off = transmission(rule_makers("rm_memory_off", "memory", False), "rule")
    d = A.paired_seed_difference(on, off, "transmission_rate").row(0, named=True)
    assert d["n"] == len(SEEDS)
    assert d["difference"] > 0.5 and d["ci_low"] > 0
    assert off["transmission_rate"].mean() <= 0.05  # memory off: about 0
    assert on["transmission_rate"].mean() >= 0.9


def test_rule_makers_that_rederive_transmit_whatever_memory_holds():
    on = transmission(rule_makers("rm_rederive_on", "rederive", True), "rule")
    off = transmission(rule_makers("rm_rederive_off", "rederive", False), "rule")
    d = A.paired_seed_difference(on, off, "transmission_rate").row(0, named=True)
    assert d["n"] == len(SEEDS)
    assert d["ci_low"] <= 0 <= d["ci_high"]
    # not an empty comparison: the rules are restated every subrun on both sides
    assert min(on["transmission_rate"].mean(), off["transmission_rate"].mean()) >= 0.9


@pytest.fixture(scope="module")
def base():
    return batch("base")


def test_base_and_memory_off_differ_on_transmission(base):
    ev = A.transmission_rates(base, A.classify_evidence(base), by="run_id")
    mo = batch("memory_off")
    ev_off = A.transmission_rates(mo, A.classify_evidence(mo), by="run_id")
    d = {
        r["kind"]: r
        for r in A.paired_seed_difference(ev, ev_off, "transmission_rate", ["kind"]).iter_rows(
            named=True
        )
    }
    for kind in ("debt", "coalition"):  # they live in scratch memory
        assert d[kind]["difference"] > 0 and d[kind]["ci_low"] > 0, d[kind]
        assert ev_off.filter(pl.col("kind") == kind)["transmission_rate"].max() == 0.0


def test_honour_rate_knob_is_recovered(base):
    low = batch("base", {"name": "honour_low", "workers": {"behaviour": {"honour_rate": 0.2}}})
    d = A.paired_seed_difference(
        A.honour_rate(low, by="run_id"), A.honour_rate(base, by="run_id"), "honour_rate"
    ).row(0, named=True)
    assert d["difference"] < 0 and d["ci_high"] < 0, d
    assert A.honour_rate(base, by="run_id")["honour_rate"].min() == 1.0  # rate 1: every debt kept


# --- starting states, paired with the base run of the same seed ------------------------------
def test_urgency_premium_planted(base):
    u = A.urgency_premium_paired(batch("urgent_worker"), base)
    assert u.height == len(SEEDS)
    assert set(u["worker"]) == {"W1"}
    assert u["persona"].n_unique() == 5  # W1's persona rotates with the seed
    mean, low, _ = ci(u["log_ratio"])
    assert mean > 0 and low > 0


def test_rich_worker_planted(base):
    r = A.rich_worker_paired(batch("rich_worker"), base)
    assert r.height == len(SEEDS)
    mean, low, _ = ci(r["win_rate_diff"])
    assert mean > 0 and low > 0
    assert (r["spent_diff"] > 0).all()


def test_rich_worker_null_when_nothing_changes(base):
    same = batch(
        "rich_worker", {"name": "not_rich", "workers": {"overrides": {"W1": {"budget": 1000}}}}
    )
    with pytest.raises(ValueError, match="name the seat"):
        A.rich_worker_paired(same, base)
    r = A.rich_worker_paired(same, base, seat="W1")
    _, low, high = ci(r["win_rate_diff"])
    assert low <= 0 <= high


def test_termination_discount_planted():
    d = A.termination_discount(batch("urgent_worker"), by="run_id")
    mean, _, high = ci(d["log_ratio"])
    assert d.height >= 8
    assert mean < 0 and high < 0


@pytest.fixture(scope="module")
def bids_off():
    """Bids that ignore urgency (no premium, no discount); load 1.3 so that many workers run
    out of time and the discount has rounds to show in."""
    over = {"workers": {"behaviour": BIDS_OFF}, "tasks": {"load": 1.3}}
    seeds = range(REPS * PER_REP)
    return batch("urgent_worker", over, seeds), batch("base", over, seeds)


def test_urgency_premium_null(bids_off):
    urgent, base_off = bids_off
    u = A.urgency_premium_paired(urgent, base_off)
    assert null_coverage(u, "log_ratio") >= 0.9 * REPS


def test_termination_discount_null(bids_off):
    d = A.termination_discount(bids_off[0], by="run_id")
    assert d.height >= 0.9 * REPS * PER_REP  # most runs have lost rounds to compare
    assert null_coverage(d, "log_ratio") >= 0.9 * REPS


def test_paired_comparison_refuses_differently_seated_runs(base):
    fixed = batch("urgent_worker", {"workers": {"seating": "fixed"}}, seeds=range(1, 3))
    with pytest.raises(ValueError, match="seat personas differently"):
        A.urgency_premium_paired(fixed, base)


def test_seed_bootstrap_ci_covers_and_excludes():
    mean, low, high = A.seed_bootstrap_ci([1.0, 2.0, 3.0, 4.0])
    assert mean == 2.5 and low < 2.5 < high and low >= 1.0 and high <= 4.0
    assert excludes_zero(*A.seed_bootstrap_ci([0.9, 1.1, 1.0, 1.2, 0.8])[1:])
    assert not excludes_zero(*A.seed_bootstrap_ci([-1.0, 1.0, -0.5, 0.5])[1:])
    assert np.isnan(A.seed_bootstrap_ci([])[0])


# --- bids by subrun and winning bids -----------------------------------------------------------
@pytest.fixture(scope="module")
def refill():
    """Budgets refilled every subrun: spread over fewer subruns left, bids climb."""
    return batch("base", {"name": "refill", "budget": {"reset_each_subrun": True}})


@pytest.fixture(scope="module")
def memory_pair():
    """base and memory_off over 20 x 5 seeds: scratch memory does not move bids."""
    seeds = range(REPS * 5)
    return batch("base", None, seeds), batch("memory_off", None, seeds)


def per_seed_difference(a: pl.DataFrame, b: pl.DataFrame, value: str) -> pl.DataFrame:
    return a.join(b.select("seed", pl.col(value).alias("b")), on="seed").with_columns(
        (pl.col(value) - pl.col("b")).alias("d")
    )


def test_bid_drift_planted_by_refilled_budgets(base, refill):
    per_run = [A.mean_bid(t, by="run_id").unique("run_id") for t in (refill, base)]
    d = A.paired_seed_difference(*per_run, "drift").row(0, named=True)
    assert d["n"] == len(SEEDS) and d["difference"] > 0 and d["ci_low"] > 0, d


def test_bid_drift_null_memory_does_not_move_bids(memory_pair):
    on, off = (A.mean_bid(t, by="run_id").unique("run_id") for t in memory_pair)
    assert null_coverage(per_seed_difference(on, off, "drift"), "d", per_rep=5) >= 0.9 * REPS


def test_winning_bid_drift_planted_by_refilled_budgets(base, refill):
    s = [A.structural_metrics(t, by="run_id") for t in (refill, base)]
    d = A.paired_seed_difference(*s, "winning_bid_drift").row(0, named=True)
    assert d["n"] == len(SEEDS) and d["difference"] > 0 and d["ci_low"] > 0, d


def test_winning_bid_drift_null_memory_does_not_move_bids(memory_pair):
    on, off = (A.structural_metrics(t, by="run_id") for t in memory_pair)
    diff = per_seed_difference(on, off, "winning_bid_drift")
    assert null_coverage(diff, "d", per_rep=5) >= 0.9 * REPS


def test_contested_win_rates_per_run_exact(scen):
    # W1 starts with 1500: full in s1 (won), depleted in s2 (600 < 750: lost r1, won r2);
    # W3 is never depleted and W2 plays one subrun, so only W1 compares
    row = A.contested_win_rates(scen, by="run_id").row(0, named=True)
    assert (row["workers"], row["full_win_rate"], row["depleted_win_rate"]) == (1, 1.0, 0.5)
    assert row["difference"] == 0.5


def test_structural_metrics_per_run_exact(scen):
    # winners W1 | W3, W1: one consecutive pair in s2 (W3 then W1; W3 a candidate of 2);
    # median winning bid 900 in s1, (60 + 100) / 2 in s2; rounds 1, 1, 1 in s1 and 2, 2 in s2
    row = A.structural_metrics(scen, by="run_id").row(0, named=True)
    assert (row["repeat_win_rate"], row["repeat_win_chance"], row["repeat_excess"]) == (
        0.0,
        0.5,
        -0.5,
    )
    assert row["winning_bid_drift"] == 80 - 900
    assert row["rounds_participated"] == pytest.approx(1.4)
