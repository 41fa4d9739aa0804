"""The paper's own starting-state tables (Tables 4 and 5: `urgency_premium`, `rich_worker`)
validated both ways, one value per seed.

They compare the treated seat with the other workers of its run, who are other personas; with
`workers.seating: rotate` the treated seat's persona changes with the seed, so over seeds the
persona mix averages out and only the starting state remains. Planted: the `urgent_worker` and
`rich_worker` conditions. Null: the seat singled out by a negligible edge (a deadline 0.01 min
shorter, one credit more), so the tables pick the same seat with nothing to find.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping

import numpy as np
import polars as pl

from mbb import analysis as A

from .test_planted_effects import PER_REP, REPS, SEEDS, batch, ci, null_coverage

NULL_SEEDS = range(REPS * PER_REP)


def per_seed(tables: Mapping[str, pl.DataFrame], measure: Callable[[dict], float]) -> pl.DataFrame:
    """`measure` of each run on its own (the tables filtered to the run), one row per seed."""
    rows = []
    for run_id, seed in tables["runs"].select("run_id", "seed").iter_rows():
        one = {k: v.filter(pl.col("run_id") == run_id) for k, v in tables.items()}
        rows.append((seed, measure(one)))
    return pl.DataFrame(rows, schema={"seed": pl.Int64, "value": pl.Float64}, orient="row")


def urgent_log_bid_ratio(one: dict) -> float:
    """Table 4, first subrun: log of the urgent worker's mean bid over the others'."""
    u = A.urgency_premium(one).filter((pl.col("subrun") == 1) & (pl.col("group") == "urgent"))
    return float(np.log(u["bid_ratio"][0]))


def rich_win_rate_difference(one: dict) -> float:
    """Table 5, over the run: the rich worker's win rate minus the others' (per worker-round)."""
    r = A.rich_worker(one)
    g = r.group_by("group").agg(pl.col("wins").sum() / pl.col("rounds").sum())
    rate = dict(g.iter_rows())
    return float(rate["rich"] - rate["others"])


def test_urgency_premium_table_planted():
    v = per_seed(batch("urgent_worker"), urgent_log_bid_ratio)
    mean, low, _ = ci(v["value"])
    assert v.height == len(SEEDS) and mean > 0 and low > 0, (mean, low)


def test_urgency_premium_table_null():
    edge = {"name": "urgent_edge", "workers": {"overrides": {"W1": {"deadline_min": 24.99}}}}
    v = per_seed(batch("base", edge, NULL_SEEDS), urgent_log_bid_ratio)
    assert v["value"].std() > 0
    assert null_coverage(v, "value") >= 0.9 * REPS


def test_rich_worker_table_planted():
    v = per_seed(batch("rich_worker"), rich_win_rate_difference)
    mean, low, _ = ci(v["value"])
    assert v.height == len(SEEDS) and mean > 0 and low > 0, (mean, low)


def test_rich_worker_table_null():
    edge = {"name": "rich_edge", "workers": {"overrides": {"W1": {"budget": 1001}}}}
    v = per_seed(batch("base", edge, NULL_SEEDS), rich_win_rate_difference)
    assert v["value"].std() > 0
    assert null_coverage(v, "value") >= 0.9 * REPS
