"""Planted and null tests for rule transmission across subruns and the rule lifecycle, on
text the rule detector's cues were not written from: gold corpus items of the held-out test
split, picked by their labels (`synthetic.py`).

Planted: a worker restates each rule item it posted in subrun s, word for word, in s+1 with
probability 0.8 (`rule_carry`) against 0: the per-run rule transmission rate
(`transmission_rates` per run) is higher, and the bootstrap CI of the difference over seeds
excludes 0. Null: both sides drawn with the same `rule_carry` (0.4); over 200 repetitions
(20 + 20 runs from a pool of 120) the CI of the difference includes 0 in at least 90 % of
them. Invented rules: with rule items drawn only from those labelled with none of the fixed
conventions (EDF, SJF, arrival, tie-break, price), `rule_lifecycle` finds them, names their
first speaker, and the carried ones are cited in a later subrun more often.
"""

from __future__ import annotations

import numpy as np
import polars as pl
import pytest

from mbb.analysis import (
    classify_evidence,
    compare_samples,
    rule_lifecycle,
    transmission_rates,
)

from .nulls import pool_null_coverage
from .synthetic import Knobs, pools, synthetic_run

SEEDS = 15
NULL_POOL = 120
NULL_SEEDS = 20
NULL_REPS = 200
BASE = {"rule_any": 0.15, "split": "test"}
CONDITIONS = {
    "carry_on": Knobs(rule_carry=0.8, **BASE),
    "carry_off": Knobs(rule_carry=0.0, **BASE),
    "invented_on": Knobs(rule_carry=0.8, rule_pool="invented", **BASE),
    "invented_off": Knobs(rule_carry=0.0, rule_pool="invented", **BASE),
}
NULL = Knobs(rule_carry=0.4, **BASE)


@pytest.fixture(scope="module")
def data():
    """Tables, evidence, per-run rule transmission and the rule lifecycle, built once."""
    from .conftest import Log, tables_of

    rng = np.random.default_rng(20261202)
    logs = [
        synthetic_run(Log, f"{name}-seed{i:04d}", knobs, rng)
        for name, knobs in CONDITIONS.items()
        for i in range(SEEDS)
    ]
    logs += [synthetic_run(Log, f"null-seed{i:04d}", NULL, rng) for i in range(NULL_POOL)]
    t = tables_of(*logs)
    ev = classify_evidence(t)
    rates = transmission_rates(t, ev, by="run_id").filter(pl.col("kind") == "rule")
    return t, rates, rule_lifecycle(t, ev)


def _rates(rates: pl.DataFrame, condition: str) -> np.ndarray:
    part = rates.filter(pl.col("condition") == condition).sort("run_id")
    return part["transmission_rate"].to_numpy()


@pytest.mark.parametrize("pool", ["carry", "invented"])
def test_planted_rule_carry_raises_transmission(data, pool):
    _, rates, _ = data
    on, off = _rates(rates, f"{pool}_on"), _rates(rates, f"{pool}_off")
    # nearly every run has a rule stated in a subrun followed by another
    assert min(on.size, off.size) >= SEEDS - 2
    r = compare_samples(on, off)
    print(pool, r)
    assert r["diff"] > 0 and r["ci_low"] > 0, r


def _null_coverage(pool: np.ndarray) -> int:
    """Of NULL_REPS draws of 20 vs 20 runs from the null pool, how many CIs of the difference
    include 0."""
    return pool_null_coverage(pool, per_side=NULL_SEEDS, draws=NULL_REPS, seed=11)


def test_null_rule_transmission_ci_includes_zero_in_at_least_90_percent(data):
    _, rates, _ = data
    pool = _rates(rates, "null")
    # most runs have a rule in a subrun followed by another; the null has spread
    assert pool.size >= 0.9 * NULL_POOL and pool.std() > 0
    covered = _null_coverage(pool)
    print("null coverage", covered, "/", NULL_REPS)
    assert covered / NULL_REPS >= 0.90, covered / NULL_REPS


def _cited_later(t: dict, life: pl.DataFrame) -> pl.DataFrame:
    """Per run: the share of its rules (lifecycle rows) cited in a later subrun."""
    return (
        life.join(t["runs"].select("run_id", "condition"), on="run_id")
        .group_by("condition", "run_id")
        .agg((pl.col("citing_subruns") > 0).mean().alias("cited_later"))
        .sort("run_id")
    )


def test_null_rule_lifecycle_ci_includes_zero_in_at_least_90_percent(data):
    t, _, life = data
    pool = _cited_later(t, life).filter(pl.col("condition") == "null")["cited_later"].to_numpy()
    assert pool.size >= 0.9 * NULL_POOL and pool.std() > 0
    covered = _null_coverage(pool)
    print("lifecycle null coverage", covered, "/", NULL_REPS)
    assert covered / NULL_REPS >= 0.90, covered / NULL_REPS


def _first_statements(t: dict, conditions: tuple[str, ...]) -> pl.DataFrame:
    """Messages of `conditions` that are invented gold rule items, each the first time its
    speaker posts that item in the run (the planted proposals), with their run and speaker."""
    invented = set(pools("test")["invented"])
    return (
        t["messages"]
        .join(t["runs"].select("run_id", "condition"), on="run_id")
        .filter(pl.col("condition").is_in(conditions) & pl.col("text").is_in(invented))
        .sort("seq")
        .unique(["run_id", "text"], keep="first")
    )


def test_invented_rules_are_found_and_tracked(data):
    t, _, life = data
    planted = _first_statements(t, ("invented_on", "invented_off"))
    assert planted.height >= 2 * SEEDS  # several invented rules per run
    # a planted item is found when a lifecycle row's rule text is one of its sentences and
    # names its speaker as proposer (the same item posted earlier by another worker excepted)
    rows = life.join(planted.select("run_id", "text", "worker"), on="run_id").filter(
        pl.col("text").str.contains(pl.col("rule_text"), literal=True)
    )
    found_items = rows.select("run_id", "text").unique().height
    share = found_items / planted.select("run_id", "text").unique().height
    proposer_ok = rows.filter(pl.col("proposer") == pl.col("worker")).height / rows.height
    print("invented found", round(share, 3), "proposer matches", round(proposer_ok, 3))
    assert share >= 0.6
    assert proposer_ok >= 0.8
    # no fixed convention is needed to track them: the carried ones are cited in a later
    # subrun more often (per run: share of its rules cited in a later subrun)
    cited = _cited_later(t, life)
    on = cited.filter(pl.col("condition") == "invented_on")["cited_later"].to_numpy()
    off = cited.filter(pl.col("condition") == "invented_off")["cited_later"].to_numpy()
    r = compare_samples(on, off)
    print("invented cited later", r)
    assert r["diff"] > 0 and r["ci_low"] > 0, r
