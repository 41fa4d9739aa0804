"""Planted and null tests for the text measures, on text the measures' cues were not written
from: gold corpus items picked by their labels from the held-out test split (`synthetic.py`;
the cues were written, and the classifier trained, on the dev split).

Planted: a condition with the knob on against one with it off, 15 seeds each: the difference
has the right sign and its bootstrap CI over seeds excludes 0. Null: both conditions drawn with
the same knob; over 200 repetitions (20 + 20 seeds drawn from a pool of 120 null runs) the CI of the
difference includes 0 in at least 90 % of them.
"""

from __future__ import annotations

import numpy as np
import polars as pl
import pytest

from mbb.analysis import classify_evidence, compare_samples
from mbb.analysis.text_measures import text_measures_by_run

from .nulls import pool_null_coverage
from .synthetic import Knobs, synthetic_run

SEEDS = 15
T = "test"  # the held-out split: the cues and the classifier were written and trained on dev
NULL_POOL = 120
NULL_SEEDS = 20
NULL_REPS = 200

PLANTS = {
    # measure: (knobs with the effect, knobs without it)
    "forward_commitments": (Knobs(deal=0.35, split=T), Knobs(deal=0.0, split=T)),
    "new_rules_later": (Knobs(rule_later=0.3, split=T), Knobs(rule_later=0.0, split=T)),
    "rule_making_later": (Knobs(rule_later=0.3, split=T), Knobs(rule_later=0.0, split=T)),
    "new_vocab_last": (Knobs(fresh_later=1.0, split=T), Knobs(fresh_later=0.2, split=T)),
    "metagaming": (Knobs(meta=0.2, split=T), Knobs(meta=0.0, split=T)),
}
# the null pool: every knob at a middling value, the same in both "conditions"
NULL = Knobs(deal=0.15, rule_later=0.15, meta=0.1, fresh_later=0.6, split=T)


@pytest.fixture(scope="module")
def measured(events):
    """Per-run text measures of every planted condition and of the null pool, computed once."""
    Log, tables_of = events
    rng = np.random.default_rng(20261201)
    logs = []
    for m, (on, off) in PLANTS.items():
        for tag, knobs in (("on", on), ("off", off)):
            logs += [synthetic_run(Log, f"{m}_{tag}-seed{i:04d}", knobs, rng) for i in range(SEEDS)]
    logs += [synthetic_run(Log, f"null-seed{i:04d}", NULL, rng) for i in range(NULL_POOL)]
    t = tables_of(*logs)
    return text_measures_by_run(t, classify_evidence(t))


@pytest.fixture(scope="module")
def events():
    from .conftest import Log, tables_of

    return Log, tables_of


def _values(per_run: pl.DataFrame, condition: str, measure: str) -> np.ndarray:
    return per_run.filter(pl.col("condition") == condition)[measure].to_numpy()


@pytest.mark.parametrize("measure", list(PLANTS))
def test_planted_effect_is_detected_with_the_right_sign(measured, measure):
    on = _values(measured, f"{measure}_on", measure)
    off = _values(measured, f"{measure}_off", measure)
    assert on.size == off.size == SEEDS
    r = compare_samples(on, off)
    assert r["diff"] > 0 and r["ci_low"] > 0, r


@pytest.mark.parametrize("measure", list(PLANTS))
def test_null_ci_includes_zero_in_at_least_90_percent(measured, measure):
    pool = _values(measured, "null", measure)
    assert pool.size == NULL_POOL and np.isfinite(pool).all()
    assert pool.std() > 0  # the null has spread: the CI has something to cover
    covered = pool_null_coverage(pool, per_side=NULL_SEEDS, draws=NULL_REPS, seed=7)
    assert covered / NULL_REPS >= 0.90, covered / NULL_REPS
