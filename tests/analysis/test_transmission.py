"""Transmission lifecycle on the hand-made scenario (exact), and memory on vs off on scripted
runs: the reciprocator's debts carry into the next subrun only when memory is on."""

from __future__ import annotations

import polars as pl
import pytest

from mbb.analysis import (
    classify_evidence,
    commitment_acts,
    commitments,
    rule_lifecycle,
    transmission_rates,
    validate_commitment_acts,
    with_run_info,
)
from mbb.core.tables import concat_tables


def test_commitment_acts_from_text(scen):
    acts = commitment_acts(scen).select("seq", "worker", "to", "act")
    assert acts.rows() == [
        (7, "W3", "W1", "offer"),
        (8, "W1", "W3", "accept"),
        (27, "W3", "W1", "claim"),
    ]


def test_commitment_lifecycle(scen):
    c = commitments(scen).drop("run_id").to_dicts()
    assert c == [
        {
            "creditor": "W3",
            "debtor": "W1",
            "subrun": 1,
            "round": 1,
            "offer_seq": 7,
            "accepted": True,
            "claim_subrun": 2,
            "claim_round": 1,
            "rounds_to_first_citation": 1,
            "honour_subrun": 2,
            "honour_round": 1,
            "honour_stated": True,
            "later_rounds_together": 2,
            "status": "honoured",
            "later_subrun": True,
            "in_scratch": True,
        }
    ]


def test_broken_and_open_commitments(events):
    Log, tables_of = events

    log = Log("base-seed0002")
    log.run_started(
        "base",
        [
            ("A", "reciprocator", 100, 100.0),
            ("B", "price_first", 100, 100.0),
            ("C", "price_first", 100, 100.0),
        ],
        subruns=1,
    )
    log.subrun_started(1, {"A": 100, "B": 100, "C": 100}, {w: 100.0 for w in "ABC"})
    offer_b = "B: I'll rank you ahead of me this round if you back me ahead of you later."
    offer_c = "C, I can wait this time. In return, rank me above you in a later round."
    log.round(
        1,
        1,
        ["A", "B", "C"],
        {"A": (5, 60, ""), "B": (9, 60, ""), "C": (7, 60, "")},
        [("A", "B", offer_b), ("A", "C", offer_c)],
        {w: (["B", "C", "A"], "") for w in "ABC"},
        ["B", "C", "A"],
        [9, 7, 5],
    )
    # round 2: only A and B meet; B keeps itself ahead of A -> broken; C never meets A -> open
    log.round(
        1,
        2,
        ["A", "B"],
        {"A": (5, 60, ""), "B": (9, 60, "")},
        [],
        {"A": (["B", "A"], ""), "B": (["B", "A"], "")},
        ["B", "A"],
        [9, 5],
    )
    c = commitments(tables_of(log))
    assert c.select("debtor", "accepted", "status", "later_rounds_together").rows() == [
        ("B", False, "broken", 1),
        ("C", False, "open", 0),
    ]


def test_rule_lifecycle(scen, scen_ev):
    # W2's "Proposal: earliest deadline first. Whoever runs out of time soonest goes first."
    # orders this decision only (no scope beyond it, no earlier agreement): not a rule statement
    r = rule_lifecycle(scen, scen_ev)
    assert r.is_empty()
    assert {"rule", "rule_text", "proposer", "accepted", "citing_rounds", "status"} <= set(
        r.columns
    )


def _rule_run(events, second_reasoning: str):
    Log, tables_of = events

    log = Log("base-seed0004")
    log.run_started(
        "base",
        [
            ("A", "shortest_job_advocate", 100, 100.0),
            ("B", "price_first", 100, 100.0),
            ("C", "price_first", 100, 100.0),
        ],
        subruns=1,
    )
    log.subrun_started(1, {w: 100 for w in "ABC"}, {w: 100.0 for w in "ABC"})
    decls = {"A": (5, 30, ""), "B": (9, 90, ""), "C": (7, 60, "")}  # bid order B C A, SJF A C B
    log.round(
        1,
        1,
        list("ABC"),
        decls,
        [("A", None, "From now on, the shortest window goes first.")],
        {
            "A": (list("ACB"), "Shortest requested duration first."),
            "B": (list("BCA"), ""),
            "C": (list("BCA"), ""),
        },
        list("BCA"),
        [9, 7, 5],
    )
    log.round(
        1,
        2,
        list("ABC"),
        decls,
        [],
        {
            "A": (list("ACB") if "shortest" in second_reasoning else list("BCA"), second_reasoning),
            "B": (list("ACB"), ""),
            "C": (list("BCA"), ""),
        },
        list("ACB"),
        [5, 7, 9],
    )
    t = tables_of(log)
    return rule_lifecycle(t, classify_evidence(t)).row(0, named=True)


def test_rule_honoured_and_followed_by_another(events):
    r = _rule_run(events, "Per our rule, the shortest window goes first.")
    assert (r["rule"], r["rule_text"], r["convention"], r["proposer"]) == (
        0,
        "From now on, the shortest window goes first.",
        "shortest_job_first",
        "A",
    )
    assert (r["citing_rounds"], r["rounds_to_first_citation"]) == (1, 1)
    # B's round-2 ballot follows SJF without a word: accepted by behaviour
    assert r["uses_by_others"] == 1 and r["accepted"]
    assert (r["proposer_ballots_after"], r["proposer_ballots_applying"], r["status"]) == (
        1,
        1,
        "honoured",
    )


def test_rule_broken_by_its_proposer(events):
    r = _rule_run(events, "Strictly by bid this time.")
    assert (
        r["proposer_ballots_after"],
        r["proposer_ballots_applying"],
        r["proposer_ballots_breaking"],
        r["status"],
    ) == (1, 0, 1, "broken")


def _invented_rule_run(events, a_reasoning: str, c_message: str):
    """A states a rule no fixed list knows; C may cite it; A's later ballot says what it says."""
    Log, tables_of = events

    log = Log("base-seed0005")
    log.run_started("base", [(w, "price_first", 100, 100.0) for w in "ABC"], subruns=2)
    decls = {"A": (5, 30, ""), "B": (9, 90, ""), "C": (7, 60, "")}
    for s in (1, 2):
        log.subrun_started(s, {w: 100 for w in "ABC"}, {w: 100.0 for w in "ABC"})
        msgs = (
            [("A", None, "From now on, whoever lost the last round goes first in the next.")]
            if s == 1
            else [("C", None, c_message)]
        )
        ballots = {w: (list("BCA"), "") for w in "BC"}
        ballots["A"] = (list("BCA"), a_reasoning if s == 2 else "")
        log.round(s, 1, list("ABC"), decls, msgs, ballots, list("BCA"), [9, 7, 5])
    t = tables_of(log)
    ev = classify_evidence(t)
    return rule_lifecycle(t, ev), transmission_rates(t, ev)


def test_invented_rule_cited_by_another_and_carried_to_the_next_subrun(events):
    rules, rates = _invented_rule_run(
        events,
        "Per our rule, whoever lost the last round goes first.",
        "As we agreed: whoever lost the last round goes first in the next, still stands.",
    )
    r = rules.row(0, named=True)
    assert rules.height == 1 and r["convention"] is None and r["proposer"] == "A"
    assert (r["citing_rounds"], r["citing_subruns"], r["rounds_to_first_citation"]) == (1, 1, 1)
    assert (r["uses_by_others"], r["accepted"], r["status"]) == (1, True, "honoured")
    rule = rates.filter(pl.col("kind") == "rule").row(0, named=True)
    assert (rule["institutions"], rule["cited_next_subrun"]) == (1, 1)


def test_invented_rule_silent_later_is_open_and_not_transmitted(events):
    rules, rates = _invented_rule_run(events, "By bid.", "By bid, as always.")
    r = rules.row(0, named=True)
    assert (r["citing_rounds"], r["uses_by_others"], r["accepted"]) == (0, 0, False)
    # a silent ballot neither applies nor breaks a rule its order cannot be checked against
    assert (r["proposer_ballots_after"], r["proposer_ballots_breaking"], r["status"]) == (
        1,
        0,
        "open",
    )
    rule = rates.filter(pl.col("kind") == "rule").row(0, named=True)
    assert (rule["institutions"], rule["cited_next_subrun"]) == (1, 0)


def test_transmission_rates_exact(scen, scen_ev):
    t = transmission_rates(scen, scen_ev)
    # pooled: institutions, cited, rate; over seeds: one seed, its rate, no interval; then the
    # mean rounds to the first citation
    assert t.rows() == [
        ("base", True, "debt", 1, 1, 1.0, 1, 1.0, None, None, 1.0),
    ]


@pytest.fixture(scope="module")
def memory_pair(tmp_path_factory):
    from mbb.batch.build import load_params
    from mbb.batch.runner import run_many
    from mbb.core.paths import PROJECT_ROOT

    parts = []
    for name in ("base", "memory_off"):
        out = tmp_path_factory.mktemp(name)
        b = run_many(
            load_params(PROJECT_ROOT / "params" / f"{name}.yaml"), runs=8, out_dir=out, processes=1
        ).check()
        parts.append(with_run_info(b.tables, by_kind=b.by_kind))
    t = concat_tables(parts)
    t["runs"] = pl.concat([p["runs"] for p in parts])
    t["workers"] = pl.concat([p["workers"] for p in parts])
    return t


def test_memory_on_carries_debts_and_memory_off_does_not(memory_pair):
    t = memory_pair
    rates = transmission_rates(t, classify_evidence(t))
    rate = {(m, k): r for m, k, r in rates.select("memory", "kind", "transmission_rate").rows()}
    # (with the balanced workload at load 0.9 fewer creditors meet their debtor early in the
    # next subrun than under the fixed rotation; the per-seed CI test is test_planted_effects)
    assert rate[(True, "debt")] >= 0.3
    assert rate[(False, "debt")] == 0.0
    # (how many scripted bloc messages count as loyalty depends on the classifier)
    assert rate[(True, "coalition")] >= 0.75
    assert rate[(False, "coalition")] == 0.0
    # debts reach scratch only with memory on
    c = commitments(t).join(t["runs"].select("run_id", "memory"), on="run_id")
    assert c.filter(pl.col("memory"))["in_scratch"].any()
    assert not c.filter(~pl.col("memory"))["in_scratch"].any()


def test_text_extraction_matches_intents(memory_pair):
    v = validate_commitment_acts(memory_pair)
    assert v["precision"].min() == 1.0 and v["recall"].min() == 1.0
    assert set(v["act"]) == {"offer", "accept", "claim"}
