"""A population that changes between subruns: leavers stop, newcomers arrive with an empty
scratch and a fresh budget, and every table and analysis handles it."""

from __future__ import annotations

import polars as pl
import pytest

from mbb import analysis as A
from mbb.analysis.mechanisms.screens import screens
from mbb.batch.build import load_params
from mbb.batch.runner import run_many
from mbb.params import ParamsError
from mbb.viz import run as figures

CHANGES = {
    "population_changes": [
        {"subrun": 2, "remove": ["W2"], "add": [{"persona": "quitter"}]},
        {"subrun": 3, "add": [{"name": "late", "persona": "rule_maker", "budget": 400}]},
        {"subrun": 4, "remove": ["W6", "W4"]},
    ]
}
PRESENT = {
    1: {"W1", "W2", "W3", "W4", "W5"},
    2: {"W1", "W3", "W4", "W5", "W6"},
    3: {"W1", "W3", "W4", "W5", "W6", "late"},
    4: {"W1", "W3", "W5", "late"},
}


@pytest.fixture(scope="module")
def changing(root):
    cond = load_params(root / "params" / "base.yaml", {**CHANGES, "name": "changing"})
    batch = run_many(cond, runs=4, processes=1).check()
    return A.with_run_info(batch.tables, by_kind=batch.by_kind)


def test_who_takes_part_in_each_subrun(changing):
    for name in ("evaluations", "subrun_workers"):
        got = changing[name].group_by("subrun").agg(pl.col("worker").unique())
        for subrun, workers in got.iter_rows():
            assert set(workers) == PRESENT[subrun], (name, subrun)
    for name in ("declarations", "ballots", "windows", "payments"):
        df = changing[name]
        for subrun, present in PRESENT.items():
            assert set(df.filter(pl.col("subrun") == subrun)["worker"]) <= present, name


def test_newcomers_start_fresh(changing):
    sw = changing["subrun_workers"]
    w6 = sw.filter((pl.col("worker") == "W6") & (pl.col("subrun") == 2)).row(0, named=True)
    late = sw.filter((pl.col("worker") == "late") & (pl.col("subrun") == 3)).row(0, named=True)
    assert w6["scratch_chars"] == 0 and w6["budget"] == 1000
    assert late["scratch_chars"] == 0 and late["budget"] == 400
    veteran = sw.filter((pl.col("worker") == "W1") & (pl.col("subrun") == 2))
    assert (veteran["scratch_chars"] > 0).all()


def test_every_analysis_table_handles_it(changing):
    t = changing
    ev = A.classify_evidence(t)
    wr = A.worker_round_predictions(ev)
    tables = [
        A.behaviour_prevalence(t, wr),
        A.direct_message_use(t),
        A.institutions(t, wr),
        A.pair_institutions(t, ev),
        A.transmission_rates(t, ev),
        A.rule_lifecycle(t, ev),
        A.commitments(t),
        A.rule_dynamics(t, ev),
        A.urgency_premium(t),
        A.rich_worker(t),
        A.contested_win_rates(t),
        A.relational_vs_bid(t, wr),
        A.mean_bid(t),
        A.structural_metrics(t),
        A.outcomes(t, ["condition", "subrun"]),
        A.outcomes(t, ["worker", "persona"]),
        A.behaviour_drift(t, wr),
        A.drift_tests(t, wr),
        A.linguistic_drift(t, ev),
        A.worker_linguistics(t, ev),
        A.token_audit(t),
        A.outcomes(t, ["run_id", "mechanism"]),
        screens(t),
    ]
    assert all(isinstance(x, pl.DataFrame) for x in tables)
    audit = A.token_audit(t)
    assert set(audit["worker"]) >= {"W6", "late"}
    assert A.token_efficiency(t, audit).height > 0
    for fig in (
        figures.resource_timeline,
        figures.bids_by_round,
        figures.budgets_over_rounds,
        figures.outcomes_by_subrun,
    ):
        fig(t).to_dict()


@pytest.mark.parametrize(
    ("change", "message"),
    [
        ({"subrun": 2, "remove": ["W9"]}, "removes 'W9', who is not in the population"),
        ({"subrun": 2, "add": [{"name": "W3"}]}, "newcomer name 'W3' is taken"),
        ({"subrun": 9, "add": [{}]}, "subrun 9 is after the last subrun"),
        ({"subrun": 1, "add": [{}]}, "population_changes.0.subrun"),
    ],
)
def test_impossible_changes_are_rejected(root, change, message):
    with pytest.raises(ParamsError, match=message):
        load_params(root / "params" / "base.yaml", {"population_changes": [change]})
