"""Institutions: self-discovered (not mandated) and forward-scoped, per worker and per pair."""

from __future__ import annotations

import polars as pl

from mbb.agents.personas import PERSONAS
from mbb.analysis import (
    institution_summary,
    institutions,
    pair_institution_summary,
    pair_institutions,
    utterance_predictions,
    worker_round_predictions,
)
from mbb.core.taxonomy import CATEGORY_NAMES


def test_every_persona_names_what_it_enacts_in_known_categories():
    for persona in PERSONAS:
        assert "price_primary" in persona.enacts and persona.enacts <= set(CATEGORY_NAMES)


def test_worker_institutions(scen, scen_ev):
    # utterance labels tie forward scope to the utterance (worker-round labels to the round)
    inst = institutions(scen, utterance_predictions(scen_ev))
    marked = inst.filter(pl.col("marker") != "none").select(
        "worker", "category", "rounds", "subruns", "mandated", "forward_scoped", "institutional"
    )
    # (the classifier finds neither W1's kept promise as coalition loyalty nor W3's
    # "owe me one from before" as reputation; see test_evidence.test_exact_labels_per_utterance)
    assert marked.rows() == [
        # the price-first worker took up a debt and honoured it a subrun later: institutional
        # ("Accepted, W3. Next time we meet, you go ahead of me": scoped to a later round)
        ("W1", "reciprocity", 2, 2, False, True, True),
        # "equal bids by queue order": about this round, so not an institution
        ("W1", "tie_break_deference", 1, 1, False, False, False),
        ("W2", "earliest_deadline_first", 1, 1, True, False, False),
        ("W2", "rule_making_citation", 1, 1, True, False, False),
        # the reciprocator's persona dictates reciprocity: mandated, so not self-discovered
        ("W3", "reciprocity", 2, 2, True, True, False),
    ]
    # price-primary: every persona's code enacts it (and it is unmarked): never an institution
    pp = inst.filter(pl.col("category") == "price_primary")
    assert pp["mandated"].all() and not pp["institutional"].any()


def test_summary_and_pairs(scen, scen_ev):
    s = institution_summary(institutions(scen, worker_round_predictions(scen_ev)))
    assert s.select("model", "share_relational_institution").rows() == [
        ("deadline_advocate", 0.0),
        ("price_first", 1.0),
        ("reciprocator", 0.0),  # its reciprocity is its persona's: mandated
    ]
    p = pair_institutions(scen, scen_ev).select(
        "worker", "peer", "category", "rounds", "forward_scoped", "institutional"
    )
    assert p.rows() == [
        # one round, but W1's acceptance commits to "next time we meet": forward-scoped, and
        # reciprocity is no part of the price-first persona: an institution of the pair
        ("W1", "W3", "reciprocity", 1, True, True),
        # the reciprocator's offer is forward-scoped but its persona dictates reciprocity
        ("W3", "W1", "reciprocity", 2, True, False),
    ]


def test_mandated_means_imposed_by_a_rule():
    """Each registered rule declares what it imposes, in taxonomy categories; a condition
    mandates the union of the rules in force, never what its instructions read like."""
    from mbb.batch.build import load_params
    from mbb.protocol import rules
    from mbb.protocol.explain import imposed

    registries = [rules.AGGREGATION, rules.ALLOCATION, rules.PAYMENT, rules.MECHANISMS]
    registries += [rules.TIME_MODELS, *rules.SWITCHES.values()]
    for registry in registries:
        for rule in registry:
            assert rule.imposes <= set(CATEGORY_NAMES), rule.name
    expect = {
        "base": set(),  # Kemeny ballots, pay your bid: no ordering is imposed
        "fixed_bids": set(),
        "memory_off": set(),
        "mech_edf": {"earliest_deadline_first"},
        "mech_sjf": {"shortest_job_first"},
        "mech_fcfs": {"recency_first"},
        "mech_round_robin": {"recency_first"},
        "mech_first_price": {"price_primary"},
        "mech_second_price": {"price_primary"},
        "mech_proportional_share": {"price_primary"},
    }
    for name, cats in expect.items():
        assert imposed(load_params(name)) == cats, name
    price = load_params("base", {"mechanism": {"aggregation": "price_only"}})
    assert imposed(price) == {"price_primary"}
    # an aggregation rule is not in force where no ballots are aggregated
    edf = load_params("mech_edf", {"mechanism": {"aggregation": "price_only"}})
    assert imposed(edf) == {"earliest_deadline_first"}


def test_forward_scope_is_scope_not_recurrence(events):
    """A category voiced in many rounds for the round at hand is persistent, not
    forward-scoped; one utterance scoped to later rounds is forward-scoped."""
    from mbb.analysis import classify_evidence

    Log, tables_of = events
    log = Log("base-seed0007")
    log.run_started(
        "base", [("A", "quitter", 100, 100.0), ("B", "price_first", 100, 100.0)], subruns=1
    )
    log.subrun_started(1, {"A": 100, "B": 100}, {"A": 100.0, "B": 100.0})
    texts = [
        ("A", "W2, you go first this round and in return rank me first next round. Deal?"),
        ("A", "Tied again at 50. Same as before: the tie goes by queue rank, no contest."),
        ("A", "Tied again at 50. Same as before: the tie goes by queue rank, no contest."),
    ]
    for r, (w, text) in enumerate(texts, 1):
        log.round(
            1,
            r,
            ["A", "B"],
            {"A": (5, 60, ""), "B": (9, 90, "")},
            [(w, "B", text)],
            {"A": (["B", "A"], ""), "B": (["B", "A"], "")},
            ["B", "A"],
            [9, 5],
        )
    t = tables_of(log)
    inst = institutions(t, utterance_predictions(classify_evidence(t)))
    got = {r["category"]: r for r in inst.filter(pl.col("worker") == "A").iter_rows(named=True)}
    assert got["reciprocity"]["forward_scoped"] and got["reciprocity"]["institutional"]
    tie = got["tie_break_deference"]
    assert tie["persistent"] and not tie["forward_scoped"] and not tie["institutional"]


def _seated(scen, llm: set[str]):
    """`scen` with the negotiators of the seats in `llm` recorded as LLMs (model "m")."""
    w = scen["workers"]
    is_llm = pl.col("worker").is_in(sorted(llm))
    w = w.with_columns(
        pl.when(is_llm).then(pl.lit("llm")).otherwise("negotiator").alias("negotiator"),
        pl.when(is_llm).then(pl.lit("m")).otherwise("model").alias("model"),
        pl.when(is_llm).then(pl.lit("m")).otherwise("label").alias("label"),
    )
    return {**scen, "workers": w}


def test_a_mixed_runs_institution_tables_say_so(scen, scen_ev):
    """I-2: where LLM and scripted negotiators share a run, LLM agents read personas' messages
    that model institutions (and personas acting on the true remaining work), so the run's
    institutions are not evidence of emergence among LLM agents: every table says so, naming
    the scripted seats; a pure-LLM or pure-scripted run's tables do not."""
    from mbb.analysis.institutions import MIXED_NOTE

    wr = worker_round_predictions(scen_ev)
    for llm, mixed in (({"W1"}, True), (set(), False), ({"W1", "W2", "W3"}, False)):
        t = _seated(scen, llm)
        inst = institutions(t, wr)
        pairs = pair_institutions(t, scen_ev)
        seats = "W2 (deadline_advocate), W3 (reciprocator)" if mixed else None
        for rows in (inst, pairs):
            assert rows.height and rows["mixed_negotiators"].to_list() == [mixed] * rows.height
            assert rows["scripted_seats"].to_list() == [seats] * rows.height
        note = MIXED_NOTE if mixed else None
        for s in (
            institution_summary(inst),
            institution_summary(inst, by="run_id"),
            pair_institution_summary(pairs),
            pair_institution_summary(pairs, by="run_id"),
        ):
            assert s.height and s["mixed_negotiators"].to_list() == [mixed] * s.height
            assert s["note"].to_list() == [note] * s.height
        by_run = institution_summary(inst, by="run_id")
        assert by_run["scripted_seats"].to_list() == [seats]
    assert "not evidence of emergence among LLM agents" in MIXED_NOTE


def test_the_institutions_chart_warns_of_mixed_runs(scen, scen_ev):
    """The chart a researcher reads carries the same warning as the tables: a mixed run's
    institutions are no evidence of emergence among LLM agents; a pure run's chart says
    nothing of it."""
    from mbb.viz.taxonomy import institutional_behaviours

    wr = worker_round_predictions(scen_ev)
    for llm, warned in (({"W1"}, True), ({"W1", "W2", "W3"}, False)):
        t = _seated(scen, llm)
        chart = institutional_behaviours(institutions(t, wr), pair_institutions(t, scen_ev))
        subtitle = " ".join(chart.to_dict()["title"]["subtitle"])
        assert ("mixed LLM and scripted negotiators" in subtitle) is warned, subtitle
