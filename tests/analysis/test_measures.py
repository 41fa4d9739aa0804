"""Every paper measure on the hand-made scenario, with values worked out by hand (see the
scenario in conftest.py)."""

from __future__ import annotations

import polars as pl
import pytest

from mbb.analysis import (
    behaviour_drift,
    behaviour_prevalence,
    chi2_sf,
    contested_win_rates,
    direct_message_use,
    drift_tests,
    mean_bid,
    outcomes,
    relational_vs_bid,
    rich_worker,
    rule_dynamics,
    structural_metrics,
    urgency_premium,
    worker_round_predictions,
    worker_rounds,
)


@pytest.fixture
def wr(scen_ev):
    return worker_round_predictions(scen_ev)


def test_worker_rounds(scen):
    w = worker_rounds(scen)
    assert w.height == 7
    assert w.filter(pl.col("worker") == "W1")["bid"].to_list() == [900, 120, 100]


def test_behaviour_prevalence(scen, wr):
    p = behaviour_prevalence(scen, wr)
    assert p.height == 3 * 21  # every category for every model, zeros included
    got = p.filter(pl.col("n") > 0).select("model", "category", "worker_rounds", "n").rows()
    assert got == [
        ("deadline_advocate", "earliest_deadline_first", 1, 1),
        ("deadline_advocate", "rule_making_citation", 1, 1),
        ("price_first", "price_primary", 3, 3),
        ("price_first", "reciprocity", 3, 2),
        ("price_first", "tie_break_deference", 3, 1),
        # by bid in every round: its "By bid." ballots and "By bid; with W1 ahead of me as
        # offered, for a favour later." (test_evidence pins the labels)
        ("reciprocator", "price_primary", 3, 3),
        ("reciprocator", "reciprocity", 3, 2),
    ]


def test_direct_message_use(scen):
    d = direct_message_use(scen).select(
        "model", "messages", "direct_messages", "direct_per_worker_round", "direct_share"
    )
    assert d.rows() == [
        ("deadline_advocate", 1, 0, 0.0, 0.0),
        ("price_first", 1, 1, pytest.approx(1 / 3), 1.0),
        ("reciprocator", 2, 2, pytest.approx(2 / 3), 1.0),
    ]


def test_rule_dynamics(scen, scen_ev):
    # the scenario advocates EDF for this round ("Proposal: earliest deadline first") but
    # states no standing rule: a convention advocated once is EDF, not rule-making
    r = rule_dynamics(scen, scen_ev).select("bids", "subrun", "behaviour", "rounds", "rounds_with")
    assert r.rows() == [
        ("revisable", 1, "renegotiation", 1, 0),
        ("revisable", 2, "renegotiation", 2, 0),
        ("revisable", 1, "rule_citation", 1, 0),
        ("revisable", 2, "rule_citation", 2, 0),
        ("revisable", 1, "rule_making", 1, 0),
        ("revisable", 2, "rule_making", 2, 0),
    ]


def _rule_run(Log, run_id: str, texts: list[str], *, subruns: int = 1):
    """One run of two workers, one round per text (A says it publicly), `subruns` subruns."""
    log = Log(run_id)
    log.run_started(
        run_id.split("-seed")[0],
        [("A", "shortest_job_advocate", 100, 100.0), ("B", "price_first", 100, 100.0)],
        bids="fixed",
        subruns=subruns,
    )
    per = len(texts) // subruns
    for s in range(1, subruns + 1):
        log.subrun_started(s, {"A": 100, "B": 100}, {"A": 100.0, "B": 100.0})
        for r, text in enumerate(texts[(s - 1) * per : s * per], 1):
            log.round(
                s,
                r,
                ["A", "B"],
                {"A": (5, 60, ""), "B": (9, 90, "")},
                [("A", None, text)],
                {"A": (["A", "B"], ""), "B": (["B", "A"], "")},
                ["B", "A"],
                [9, 5],
            )
    return log


def test_rule_citation_in_a_later_round_is_not_making(events):
    from mbb.analysis import classify_evidence

    Log, tables_of = events
    log = _rule_run(
        Log,
        "fixed_bids-seed0003",
        [
            "From now on, whoever held the first slot last round goes last.",
            "Whoever held the first slot last round goes last, per the rule from round 1.",
        ],
    )
    t = tables_of(log)
    r = rule_dynamics(t, classify_evidence(t)).filter(pl.col("behaviour") != "renegotiation")
    assert r.select("bids", "behaviour", "rounds", "rounds_with").rows() == [
        ("fixed", "rule_citation", 2, 1),
        ("fixed", "rule_making", 2, 1),
    ]


def test_a_new_rule_in_a_later_subrun_is_making(events):
    """Any rule counts, not a fixed list: a rule invented in subrun 2 is making there, and an
    earlier rule invoked as agreed is citation."""
    from mbb.analysis import classify_evidence
    from mbb.analysis.rules import rule_statements

    Log, tables_of = events
    log = _rule_run(
        Log,
        "base-seed0004",
        [
            "From now on, ties go to the shorter window.",
            "Going forward nobody bids more than 150 credits per window.",
            "Ties go to the shorter window, as we settled in the subrun 1 rule.",
            "From now on, a window that ends early passes its unused seconds to the next in line.",
        ],
        subruns=2,
    )
    t = tables_of(log)
    r = rule_dynamics(t, classify_evidence(t)).filter(pl.col("behaviour") != "renegotiation")
    assert r.select("subrun", "behaviour", "rounds_with").sort("behaviour", "subrun").rows() == [
        (1, "rule_citation", 0),
        (2, "rule_citation", 1),
        (1, "rule_making", 2),
        (2, "rule_making", 1),
    ]
    st = rule_statements(t).select("subrun", "round", "rule", "role", "new_to_run")
    assert st.rows() == [
        (1, 1, 0, "making", True),
        (1, 2, 1, "making", True),
        (2, 1, 0, "citation", False),
        (2, 2, 2, "making", True),
    ]


def test_urgency_premium(scen):
    u = urgency_premium(scen).select(
        "subrun", "group", "mean_bid", "mean_duration", "rounds_per_worker", "bid_ratio"
    )
    assert u.rows() == [
        (1, "others", 490.0, 105.0, 1.0, 1.0),
        (1, "urgent", 50.0, 60.0, 1.0, pytest.approx(50 / 490)),
        (2, "others", 80.0, 80.0, 2.0, 1.0),
    ]


def test_rich_worker(scen):
    r = rich_worker(scen).select(
        "subrun", "group", "workers", "wins", "rounds", "spent", "spend_per_worker", "win_rate"
    )
    assert r.rows() == [
        (1, "others", 2, 0, 2, 130, 65.0, 0.0),
        (1, "rich", 1, 1, 1, 900, 900.0, 1.0),
        (2, "others", 1, 1, 2, 100, 100.0, 0.5),
        (2, "rich", 1, 1, 2, 220, 220.0, 0.5),
    ]


def test_contested_win_rates_full_vs_depleted(scen):
    # W1 starts with 1,500; after paying 900 it enters subrun 2 with 600 < 750: depleted
    c = contested_win_rates(scen).select(
        "group", "budget_state", "contested_rounds", "wins", "win_rate"
    )
    assert c.rows() == [
        ("others", "full", 4, 1, 0.25),
        ("rich", "depleted", 2, 1, 0.5),
        ("rich", "full", 1, 1, 1.0),
    ]


def test_relational_vs_bid(scen, wr):
    r = relational_vs_bid(scen, wr, bins=2).select(
        "bid_bin", "rounds", "mean_bid", "relational_share"
    )
    assert r.rows() == [
        (0, 1, 70.0, 0.0),
        (1, 2, pytest.approx((1030 / 3 + 90) / 2), pytest.approx(5 / 6)),
    ]


def test_mean_bid(scen):
    m = mean_bid(scen).select("budgets", "model", "subrun", "mean_bid")
    assert m.rows() == [
        ("uneven", "deadline_advocate", 1, 50.0),
        ("uneven", "price_first", 1, 900.0),
        ("uneven", "price_first", 2, 110.0),
        ("uneven", "reciprocator", 1, 80.0),
        ("uneven", "reciprocator", 2, 50.0),
    ]


def test_structural_metrics(scen):
    s = {
        (m, model, sub): v
        for m, model, sub, v in structural_metrics(scen)
        .select("metric", "model", "subrun", "value")
        .rows()
    }
    assert s[("repeat_win_rate", "all", None)] == 0.0
    assert s[("repeat_win_chance", "all", None)] == 0.5
    assert s[("median_winning_bid", "all", 1)] == 900.0
    assert s[("median_winning_bid", "all", 2)] == 80.0
    assert s[("winning_bid_drift", "all", None)] == -820.0
    assert s[("rounds_participated", "price_first", None)] == 1.5
    assert s[("rounds_participated", "deadline_advocate", None)] == 1.0
    edf = "Proposal: earliest deadline first. Whoever runs out of time soonest goes first."
    assert s[("message_chars", "deadline_advocate", None)] == len(edf)


def test_outcomes(scen):
    o = outcomes(scen, "subrun").select(
        "subrun", "completion", "deadline_miss", "progress", "score"
    )
    assert o.rows() == [
        (1, pytest.approx(2 / 3), pytest.approx(1 / 3), pytest.approx(2.5 / 3), pytest.approx(0.8)),
        (2, pytest.approx(2 / 3), 0.0, pytest.approx(2.2 / 3), pytest.approx(0.7)),
    ]


def test_behaviour_drift_and_test(scen, wr):
    d = behaviour_drift(scen, wr).filter(
        (pl.col("model") == "price_first") & (pl.col("group") == "relational")
    )
    assert d.select("subrun", "worker_rounds", "prevalence").rows() == [(1, 1, 1.0), (2, 2, 0.5)]
    r = behaviour_drift(scen, wr, level="round").filter(
        (pl.col("model") == "reciprocator") & (pl.col("group") == "relational")
    )
    assert r.select("round", "worker_rounds", "prevalence").rows() == [(1, 2, 1.0), (2, 1, 0.0)]
    t = (
        drift_tests(scen, wr)
        .filter((pl.col("model") == "price_first") & (pl.col("group") == "relational"))
        .row(0, named=True)
    )
    # table [[1, 0], [1, 1]]: chi2 = 0.75 on 1 dof
    assert t["chi2"] == pytest.approx(0.75) and t["dof"] == 1
    assert t["p_value"] == pytest.approx(chi2_sf(0.75, 1)) and t["delta"] == -0.5
    with pytest.raises(ValueError, match="level must be"):
        behaviour_drift(scen, wr, level="run")


def test_a_missing_bid_ratio_says_why_and_durations_have_units(scen):
    """The urgency table's bid ratio read a bare n/a on every uniform row (base, memory_off,
    rich_worker); now its note says why, and the duration's header carries seconds."""
    from mbb.viz.table import table

    u = urgency_premium(scen)
    assert u["bid_ratio"].is_not_null().all() and u["note"].is_null().all()
    sw = scen["subrun_workers"].with_columns(pl.lit(600.0).alias("deadline_s"))
    uniform = urgency_premium({**scen, "subrun_workers": sw})
    assert set(uniform["group"]) == {"uniform"} and uniform["bid_ratio"].is_null().all()
    assert set(uniform["note"]) == {"no bid ratio: every worker starts with the same deadline"}
    headers = [c.header for c in table(u).columns]
    assert "mean duration (s)" in headers


def test_a_run_without_declared_bids_has_no_winning_bid(tmp_path):
    """A centralized mechanism without bids records rounds with bids of 0: Table 8 read a
    median winning bid of 0 for mech_fcfs (a reviewer's find); it has none."""
    from mbb.analysis.runs import load_runs
    from mbb.batch.runner import run_conditions

    dirs = run_conditions(
        ["params/mech_fcfs.yaml", "params/base.yaml"],
        runs=1,
        out_root=tmp_path,
        overrides={"subruns": 2},
    )
    rows = structural_metrics(load_runs(dirs)).filter(
        pl.col("metric").is_in(["median_winning_bid", "winning_bid_drift"])
    )
    fcfs = rows.filter(pl.col("condition") == "mech_fcfs")["value"].to_list()
    base = rows.filter(pl.col("condition") == "base")["value"].to_list()
    assert fcfs and all(v is None for v in fcfs), fcfs
    assert base and all(v is not None for v in base), base
