"""Planted and null tests for the classifier-based behaviour measures (relational share vs bid,
prevalence, drift, institutions and their self-discovered split, linguistic drift), on text the
classifier was not trained on: items of the gold corpus's held-out *test* split, picked by the
annotators' labels (`synthetic.extended_run`), so a planted effect is recovered only as far as
the classifier reads those labels right on independent text.

Planted: a condition with the knob on against one with it off, 15 seeds each: the difference of
the per-run values has the right sign and its bootstrap CI over seeds excludes 0. Null: both
"conditions" drawn from one pool of 120 runs with every knob at a middling value; over 200
repetitions (20 + 20 seeds drawn from the pool) the CI of the difference includes 0 in at least
90 % of them. `drift_tests` (a chi-square test, not a CI) is validated the same way: it rejects
on the planted drift and keeps p >= 0.05 in at least 90 % of null repetitions.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
import polars as pl
import pytest

from mbb.analysis import (
    behaviour_drift,
    behaviour_prevalence,
    classify_evidence,
    compare_samples,
    drift_tests,
    institution_summary,
    institutions,
    linguistic_drift,
    pair_institution_summary,
    pair_institutions,
    relational_vs_bid,
    utterance_predictions,
    worker_round_predictions,
)
from mbb.core.taxonomy import CATEGORIES

from .nulls import pool_null_coverage
from .synthetic import Knobs, synthetic_run

SEEDS = 15
NULL_POOL = 120
NULL_SEEDS = 20
NULL_REPS = 200
ROUNDS = 6  # per subrun (3 subruns): 18 rounds, so a run's bid-share correlation has points
T = "test"  # the held-out gold split
EDF = "earliest_deadline_first"

RELATIONAL = frozenset(c.name for c in CATEGORIES if c.marker == "relational")
# what SCARCE's agents invented (§6): reciprocity debts, reputation, tie-breaks
INVENTED = frozenset({"reciprocity", "reputation", "tie_break_deference"})

CONDITIONS = {
    # relational items in low-bid rounds far more than in high-bid ones, vs independent of bids
    "rvb_on": Knobs(split=T, relational_low=0.4, relational_high=0.05),
    "rvb_off": Knobs(split=T, relational_low=0.225, relational_high=0.225),
    # EDF items in 20 % of messages vs none
    "prev_on": Knobs(split=T, cat=EDF, cat_first=0.2, cat_last=0.2),
    "prev_off": Knobs(split=T, cat=EDF),
    # relational items rising from 5 % to 45 % over the subruns vs flat at 25 %
    "drift_on": Knobs(split=T, cat="relational", cat_first=0.05, cat_last=0.45),
    "drift_off": Knobs(split=T, cat="relational", cat_first=0.25, cat_last=0.25),
    # reciprocity, reputation and tie-break items voiced by LLM workers, whom no rule of the
    # condition tells to use them (self-discovered), vs the same items voiced by scripted
    # reciprocators, whose persona's code enacts all three (mandated)
    "inst_invented": Knobs(
        split=T, deal=0.4, deal_label="institution", negotiator="llm", private=0.5
    ),
    "inst_imposed": Knobs(
        split=T, deal=0.4, deal_label="institution", persona="reciprocator", private=0.5
    ),
    # fresh wording in later subruns vs mostly repeats of the run's earlier text
    "ling_on": Knobs(split=T, fresh_later=1.0),
    "ling_off": Knobs(split=T, fresh_later=0.2),
}
NULL = Knobs(
    split=T,
    relational_low=0.15,
    relational_high=0.15,
    cat=EDF,
    cat_first=0.1,
    cat_last=0.1,
    deal=0.15,
    # no repeats: a repeat re-voices the run's earlier (relational) text, which is drift
    fresh_later=1.0,
    # two LLM workers and two scripted reciprocators (whose relational categories are
    # mandated), so the self-discovered share varies from run to run
    negotiator="mixed",
    persona="reciprocator",
    private=0.5,
)


def _col(name: str) -> Callable[[pl.DataFrame], pl.DataFrame]:
    return lambda df: df.select("condition", pl.col(name).cast(pl.Float64).alias("value"))


# measure: (per-run table key, value, on, off, expected sign of on - off)
PLANTS = {
    "relational_vs_bid_corr": ("rvb", "corr", "rvb_on", "rvb_off", -1),
    "relational_vs_bid_high_minus_low": ("rvb", "high_minus_low", "rvb_on", "rvb_off", -1),
    "prevalence_edf": ("prev", "prevalence", "prev_on", "prev_off", +1),
    "drift_relational_delta": ("drift", "delta", "drift_on", "drift_off", +1),
    "self_discovered_share": (
        "inst",
        "self_discovered_share",
        "inst_invented",
        "inst_imposed",
        +1,
    ),
    "relational_institution_share": (
        "inst",
        "share_relational_institution",
        "inst_invented",
        "inst_imposed",
        +1,
    ),
    "pair_institutional_share": (
        "pairs",
        "institutional_share",
        "inst_invented",
        "inst_imposed",
        +1,
    ),
    "bow_similarity": ("ling", "bow_similarity", "ling_on", "ling_off", -1),
    "trigram_similarity": ("ling", "trigram_similarity", "ling_on", "ling_off", -1),
    "institutional_drift": ("ling", "institutional_drift", "drift_on", "drift_off", +1),
}


@pytest.fixture(scope="module")
def built():
    """Tables, evidence and worker-round labels of every condition and the null pool, once."""
    from .conftest import Log, tables_of

    rng = np.random.default_rng(20261202)
    logs = []
    for c, knobs in CONDITIONS.items():
        logs += [
            synthetic_run(Log, f"{c}-seed{i:04d}", knobs, rng, rounds=ROUNDS) for i in range(SEEDS)
        ]
    logs += [
        synthetic_run(Log, f"null-seed{i:04d}", NULL, rng, rounds=ROUNDS) for i in range(NULL_POOL)
    ]
    t = tables_of(*logs)
    ev = classify_evidence(t)
    return t, ev, worker_round_predictions(ev)


@pytest.fixture(scope="module")
def per_run(built):
    """Per-run tables of every measure, keyed as in PLANTS."""
    t, ev, wr = built
    inst = institutions(t, utterance_predictions(ev))
    return {
        "rvb": relational_vs_bid(t, wr, by="run_id"),
        "prev": behaviour_prevalence(t, wr, [EDF], by="run_id"),
        "drift": behaviour_drift(t, wr, by="run_id").filter(pl.col("group") == "relational"),
        "inst": institution_summary(inst, by="run_id"),
        "pairs": pair_institution_summary(pair_institutions(t, ev), by="run_id"),
        "ling": linguistic_drift(t, ev, by="run_id"),
        "_inst_rows": inst,
    }


def _values(df: pl.DataFrame, condition: str, value: str) -> np.ndarray:
    return df.filter(pl.col("condition") == condition)[value].cast(pl.Float64).to_numpy()


@pytest.mark.parametrize("measure", list(PLANTS))
def test_planted_behaviour_is_detected_with_the_right_sign(per_run, measure):
    key, value, on_c, off_c, sign = PLANTS[measure]
    on, off = _values(per_run[key], on_c, value), _values(per_run[key], off_c, value)
    assert on.size == off.size == SEEDS
    # self_discovered_share is undefined in a run with no forward-scoped relational row (a
    # third of the coalition-deal runs: the gold coalition items seldom commit to later rounds)
    assert np.isfinite(on).sum() >= 10 and np.isfinite(off).sum() >= 10
    r = compare_samples(on, off)
    if sign > 0:
        assert r["diff"] > 0 and r["ci_low"] > 0, r
    else:
        assert r["diff"] < 0 and r["ci_high"] < 0, r


@pytest.mark.parametrize("measure", list(PLANTS))
def test_null_behaviour_ci_includes_zero_in_at_least_90_percent(per_run, measure):
    key, value = PLANTS[measure][:2]
    pool = _values(per_run[key], "null", value)
    assert pool.size == NULL_POOL
    pool = pool[np.isfinite(pool)]
    assert pool.size >= 0.9 * NULL_POOL  # a run without a value is rare in the null
    assert pool.std() > 0  # the null has spread: the CI has something to cover
    covered = pool_null_coverage(pool, per_side=NULL_SEEDS, draws=NULL_REPS, seed=11)
    assert covered / NULL_REPS >= 0.90, covered / NULL_REPS


def test_pooled_relational_vs_bid_and_institution_summary_agree_with_the_plants(built, per_run):
    """The pooled tables (Fig. 12's corr, the institution summary) point the same way as the
    per-run forms on the planted conditions."""
    t, _, wr = built
    corr = dict(relational_vs_bid(t, wr).select("condition", "corr").unique().iter_rows())
    assert corr["rvb_on"] < 0 and corr["rvb_on"] < corr["rvb_off"], corr
    s = institution_summary(per_run["_inst_rows"])
    share = dict(s.select("condition", "share_relational_institution").iter_rows())
    assert share["inst_invented"] > share["inst_imposed"]


def test_invented_institutions_are_self_discovered_and_imposed_ones_are_not(per_run):
    """The issue's planted test and its null, row by row: reciprocity, reputation and
    tie-breaks that LLM workers voice under rules imposing none of them are never mandated, and
    (voiced for later rounds) institutions; the same categories voiced by workers whose
    persona's code enacts them are always mandated, so never institutions."""
    inst = per_run["_inst_rows"].filter(pl.col("category").is_in(list(INVENTED)))
    invented = inst.filter(pl.col("condition") == "inst_invented")
    imposed = inst.filter(pl.col("condition") == "inst_imposed")
    assert invented.height > 0 and imposed.height > 0
    assert not invented["mandated"].any() and set(invented["category"]) == INVENTED
    # the relational ones are voiced for later rounds, so institutions; the gold tie-break
    # items settle the tie at hand, so they are self-discovered but seldom forward-scoped
    fwd = invented.filter("forward_scoped")
    assert fwd["institutional"].all()
    assert {"reciprocity", "reputation"} <= set(fwd["category"])
    assert imposed["mandated"].all() and not imposed["institutional"].any()


def _subset(t: dict[str, pl.DataFrame], runs: list[str]) -> dict[str, pl.DataFrame]:
    return {
        k: (df.filter(pl.col("run_id").is_in(runs)) if "run_id" in df.columns else df)
        for k, df in t.items()
    }


def test_drift_tests_rejects_on_planted_drift(built):
    t, _, wr = built
    d = drift_tests(t, wr, by_model=False).filter(pl.col("group") == "relational")
    row = dict(zip(d["condition"], d.iter_rows(named=True), strict=True))
    assert row["drift_on"]["delta"] > 0 and row["drift_on"]["p_value"] < 0.05, row["drift_on"]


def test_drift_tests_keeps_its_size_on_the_null(built):
    t, _, wr = built
    runs = sorted(t["runs"].filter(pl.col("condition") == "null")["run_id"].to_list())
    assert len(runs) == NULL_POOL
    rng = np.random.default_rng(13)
    kept = 0
    for _ in range(NULL_REPS):
        pick = [runs[i] for i in rng.permutation(NULL_POOL)[:NULL_SEEDS]]
        sub = _subset(t, pick)
        d = drift_tests(sub, wr.filter(pl.col("run_id").is_in(pick)), by_model=False)
        kept += d.filter(pl.col("group") == "relational")["p_value"].item() >= 0.05
    assert kept / NULL_REPS >= 0.90, kept / NULL_REPS
