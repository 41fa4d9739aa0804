"""A measure's two forms (`by="condition"`, `by="run_id"`) count the same things: on scripted
batches, what the pooled table counts is the sum of what the per-run rows count, and the
per-run rows carry every run's condition and seed. `by` takes nothing else."""

from __future__ import annotations

import polars as pl
import pytest
from polars.testing import assert_frame_equal

from mbb import analysis as A
from mbb.analysis.workload import workload
from mbb.core.tables import concat_tables

R = "run_id"


@pytest.fixture(scope="module")
def batch(tmp_path_factory):
    """base, memory_off and urgent_worker, three seeds each: debts, rules, coalitions, lost
    rounds and contested rounds to count."""
    from mbb.batch.build import load_params
    from mbb.batch.runner import run_many
    from mbb.core.paths import PROJECT_ROOT

    parts = []
    for name in ("base", "memory_off", "urgent_worker"):
        b = run_many(
            load_params(PROJECT_ROOT / "params" / f"{name}.yaml"),
            runs=3,
            out_dir=tmp_path_factory.mktemp(name),
            processes=1,
        ).check()
        parts.append(A.with_run_info(b.tables, by_kind=b.by_kind))
    t = concat_tables(parts)
    t["runs"] = pl.concat([p["runs"] for p in parts])
    t["workers"] = pl.concat([p["workers"] for p in parts])
    return t


@pytest.fixture(scope="module")
def ev(batch):
    return A.classify_evidence(batch)


@pytest.fixture(scope="module")
def wr(ev):
    return A.worker_round_predictions(ev)


def sums(df: pl.DataFrame, keys: list[str], counts: list[str]) -> pl.DataFrame:
    return df.group_by(keys).agg(pl.col(counts).sum().cast(pl.Int64)).sort(keys)


def same_sums(pooled: pl.DataFrame, per_run: pl.DataFrame, keys: list[str], counts: list[str]):
    assert per_run.height > 0
    assert_frame_equal(sums(pooled, keys, counts), sums(per_run, keys, counts))


def test_behaviour_prevalence_forms_count_the_same_worker_rounds(batch, wr):
    pooled, per_run = (A.behaviour_prevalence(batch, wr, by=b) for b in ("condition", R))
    same_sums(pooled, per_run, ["condition", "category"], ["worker_rounds", "n"])


def test_direct_message_use_forms_count_the_same_messages(batch):
    pooled, per_run = (A.direct_message_use(batch, by=b) for b in ("condition", R))
    same_sums(pooled, per_run, ["condition"], ["worker_rounds", "messages", "direct_messages"])


def test_mean_bid_forms_count_the_same_worker_rounds(batch):
    pooled, per_run = (A.mean_bid(batch, by=b) for b in ("condition", R))
    same_sums(pooled, per_run, ["condition", "subrun"], ["worker_rounds"])


def test_behaviour_drift_forms_read_the_same_levels(batch, wr):
    pooled = A.behaviour_drift(batch, wr)
    per_run = A.behaviour_drift(batch, wr, by=R)
    levels = pooled.group_by("condition").agg(pl.col("subrun").n_unique().alias("levels"))
    j = per_run.join(levels, on="condition", suffix="_pooled")
    assert j.height == per_run.height > 0
    assert (j["levels"] <= j["levels_pooled"]).all()


def test_transmission_rates_forms_count_the_same_institutions(batch, ev):
    pooled, per_run = (A.transmission_rates(batch, ev, by=b) for b in ("condition", R))
    same_sums(pooled, per_run, ["condition", "kind"], ["institutions", "cited_next_subrun"])


def test_honour_rate_forms_count_the_same_debts(batch):
    pooled, per_run = (A.honour_rate(batch, by=b) for b in ("condition", R))
    same_sums(pooled, per_run, ["condition"], ["fell_due"])
    # the pooled rate is the per-run rates weighted by the debts that fell due
    w = per_run.group_by("condition").agg(
        ((pl.col("honour_rate") * pl.col("fell_due")).sum() / pl.col("fell_due").sum()).alias(
            "honour_rate"
        )
    )
    assert_frame_equal(
        pooled.select("condition", "honour_rate").sort("condition"), w.sort("condition")
    )


def test_termination_discount_forms_average_the_same_workers(batch):
    pooled, per_run = (A.termination_discount(batch, by=b) for b in ("condition", R))
    same_sums(pooled, per_run, ["condition"], ["workers", "lost_rounds"])
    w = per_run.group_by("condition").agg(
        ((pl.col("log_ratio") * pl.col("workers")).sum() / pl.col("workers").sum()).alias(
            "log_ratio"
        )
    )
    assert_frame_equal(
        pooled.select("condition", "log_ratio").sort("condition"), w.sort("condition")
    )


def test_institution_summaries_count_the_same_workers_and_pairs(batch, wr, ev):
    inst = A.institutions(batch, wr)
    pooled, per_run = (A.institution_summary(inst, by=b) for b in ("condition", R))
    same_sums(pooled, per_run, ["condition"], ["workers"])
    pairs = A.pair_institutions(batch, ev)
    pooled, per_run = (A.pair_institution_summary(pairs, by=b) for b in ("condition", R))
    same_sums(pooled, per_run, ["condition"], ["pairs", "forward_scoped", "institutional"])


def test_workload_forms_come_from_the_same_rows(batch):
    rows = workload(batch, by=("run_id", "subrun"))
    table = workload(batch, by=("condition", "subrun"))
    mean = (
        rows.group_by("condition", "subrun")
        .agg(pl.len().cast(pl.Int64).alias("n"), pl.col("load").mean())
        .sort("condition", "subrun")
    )
    assert_frame_equal(table.select("condition", "subrun", "n", "load"), mean)
    runs = workload(batch, by="run_id")
    assert_frame_equal(
        sums(runs, ["condition"], ["subruns"]),
        rows.group_by("condition").agg(pl.len().cast(pl.Int64).alias("subruns")).sort("condition"),
    )


@pytest.mark.parametrize(
    "call",
    [
        lambda t, wr, ev: A.behaviour_prevalence(t, wr, by=R),
        lambda t, wr, ev: A.behaviour_drift(t, wr, by=R),
        lambda t, wr, ev: A.relational_vs_bid(t, wr, by=R),
        lambda t, wr, ev: A.direct_message_use(t, by=R),
        lambda t, wr, ev: A.contested_win_rates(t, by=R),
        lambda t, wr, ev: A.mean_bid(t, by=R),
        lambda t, wr, ev: A.structural_metrics(t, by=R),
        lambda t, wr, ev: A.termination_discount(t, by=R),
        lambda t, wr, ev: A.transmission_rates(t, ev, by=R),
        lambda t, wr, ev: A.honour_rate(t, by=R),
        lambda t, wr, ev: A.linguistic_drift(t, ev, by=R),
        lambda t, wr, ev: workload(t, by=R),
    ],
)
def test_per_run_rows_carry_each_runs_condition_and_seed(batch, wr, ev, call):
    out = call(batch, wr, ev)
    truth = batch["runs"].select("run_id", "condition", "seed")
    got = out.select("run_id", "condition", *(["seed"] if "seed" in out.columns else [])).unique()
    assert got.height > 0
    assert_frame_equal(got.join(truth, on=got.columns, how="anti"), got.clear())


@pytest.mark.parametrize("by", ["seed", "run", ("condition", "model")])
def test_by_names_a_condition_or_a_run(scen, by):
    with pytest.raises(ValueError, match=r"behaviour_prevalence: by=.*'condition'.*'run_id'"):
        A.behaviour_prevalence(scen, A.worker_round_predictions(A.classify_evidence(scen)), by=by)
    with pytest.raises(ValueError, match="workload: by="):
        workload(scen, by=by)
