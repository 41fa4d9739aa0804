"""Planted and null tests for the commitment, coalition and reasoning-effort measures.

- honour rate (`honour_rate`): planted in test_planted_effects.py (`honour_rate: 0.2`);
  its null here: at one honour rate, scratch memory changes which debts fall due (debts carry
  across subruns only with memory), not the share honoured.
- coalitions (`coalitions`): a coalition builder in the roster plants invitations; the null is
  the first subrun with memory on vs off, where memory has had nothing to carry yet.
- reasoning effort (Table 9, `reasoning_effort_table`): synthetic runs whose messages are drawn
  by label from the gold corpus's held-out test split (the classifier was trained on dev;
  tests/analysis/synthetic.py); the condition named
  reasoning_high states rules at a higher rate than reasoning_low, and the table's
  rule-making group must show it through the classifier.
"""

from __future__ import annotations

import numpy as np
import polars as pl

from mbb import analysis as A

from .nulls import pool_null_coverage
from .synthetic import Knobs, synthetic_run
from .test_planted_effects import PER_REP, REPS, batch, ci, null_coverage

NULL_SEEDS = range(REPS * PER_REP)


def _paired(a: pl.DataFrame, b: pl.DataFrame, value: str) -> pl.DataFrame:
    """Per shared seed: a's value minus b's (`d`)."""
    return a.join(b.select("seed", pl.col(value).alias("b")), on="seed").with_columns(
        (pl.col(value) - pl.col("b")).alias("d")
    )


def test_honour_rate_null_memory_changes_which_debts_fall_due_not_the_rate():
    over = {"workers": {"behaviour": {"honour_rate": 0.6}}}
    on = A.honour_rate(batch("base", over, NULL_SEEDS), by="run_id")
    off = A.honour_rate(batch("memory_off", over, NULL_SEEDS), by="run_id")
    d = _paired(on, off, "honour_rate")
    assert d.height >= 0.9 * len(NULL_SEEDS)  # most seeds have debts that fell due on both sides
    assert d["d"].std() > 0  # the rate varies: the interval has something to cover
    # attenuated, not the knob's level: a debtor whose own order already puts the creditor
    # ahead, or who drops the debt but ranks the creditor ahead by bid, counts as honouring
    assert 0.6 < on["honour_rate"].mean() < 1.0
    assert null_coverage(d, "d") >= 0.9 * REPS


# --- coalitions -------------------------------------------------------------------------------
def _invitations(tables: dict, subrun: int | None = None) -> pl.DataFrame:
    """Per seed: coalitions founded (founder-subruns with an invitation), optionally in one
    subrun; every run has a row (0 when none)."""
    co = A.coalitions(tables, A.classify_evidence(tables))
    if subrun is not None:
        co = co.filter(pl.col("subrun") == subrun)
    n = co.group_by("run_id").agg(pl.col("invited").sum().cast(pl.Float64).alias("founded"))
    return (
        tables["runs"]
        .select("run_id", "seed")
        .join(n, on="run_id", how="left")
        .with_columns(pl.col("founded").fill_null(0.0))
    )


def test_coalitions_planted_by_a_coalition_builder():
    # the default roster with its coalition builder replaced by a second reciprocator
    roster = ["price_first", "deadline_advocate", "reciprocator", "reciprocator"]
    roster.append("shortest_job_advocate")
    with_builder = batch("base", {"name": "with_builder"})  # the default roster has one
    without = batch("base", {"name": "without_builder", "workers": {"personas": roster}})
    d = _paired(_invitations(with_builder), _invitations(without), "founded")
    mean, low, _ = ci(d["d"])
    assert mean > 0 and low > 0, (mean, low)
    assert _invitations(without)["founded"].max() == 0  # nobody else founds blocs


def test_coalitions_null_memory_has_nothing_to_carry_in_the_first_subrun():
    on = _invitations(batch("base", None, NULL_SEEDS), subrun=1)
    off = _invitations(batch("memory_off", None, NULL_SEEDS), subrun=1)
    d = _paired(on, off, "founded")
    assert on["founded"].mean() > 0  # there are coalitions to count
    assert null_coverage(d, "d") >= 0.9 * REPS


# --- reasoning effort (Table 9) ---------------------------------------------------------------
SYN_SEEDS = 15


def _effort_prevalence(events, knobs_by_effort: dict[str, Knobs], seeds: range) -> pl.DataFrame:
    """Per (effort, seed): the prevalence of Table 9's rule-making group in one synthetic run
    (one condition per run, mapped to its effort by `effort_of`)."""
    Log, tables_of = events
    rng = np.random.default_rng(20261202)
    logs, effort_of = [], {}
    for effort, knobs in knobs_by_effort.items():
        for i in seeds:
            cond = f"{effort}_{i}"
            effort_of[cond] = effort
            logs.append(synthetic_run(Log, f"{cond}-seed{i:04d}", knobs, rng))
    t = tables_of(*logs)
    wr = A.worker_round_predictions(A.classify_evidence(t))
    tab = A.reasoning_effort_table(t, wr, effort_of=effort_of)
    return tab.filter(pl.col("group") == "rule_making_citation").select(
        "effort",
        pl.col("condition").str.extract(r"_(\d+)$").cast(pl.Int64).alias("seed"),
        "prevalence",
    )


def _events():
    from .conftest import Log, tables_of

    return Log, tables_of


def test_reasoning_effort_table_planted():
    p = _effort_prevalence(
        _events(),
        {"high": Knobs(rule_later=0.3, split="test"), "low": Knobs(rule_later=0.0, split="test")},
        range(SYN_SEEDS),
    )
    high = p.filter(pl.col("effort") == "high")
    low = p.filter(pl.col("effort") == "low")
    assert high.height == low.height == SYN_SEEDS
    r = A.compare_samples(high["prevalence"].to_numpy(), low["prevalence"].to_numpy())
    assert r["diff"] > 0 and r["ci_low"] > 0, r


def test_reasoning_effort_table_null():
    """Both efforts drawn with the same knobs (60 runs each): over 200 draws of 20 vs 20 runs
    from the 120, as the text measures' nulls (test_planted_null.py), the CI of the
    difference includes 0 in at least 90 %."""
    same = Knobs(rule_later=0.15, split="test")
    p = _effort_prevalence(_events(), {"high": same, "low": same}, range(60))
    pool = p["prevalence"].to_numpy()
    assert pool.size == 120 and pool.std() > 0
    covered = pool_null_coverage(pool, per_side=20, draws=200, seed=7)
    assert covered >= 0.9 * 200, covered
