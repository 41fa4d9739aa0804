"""Institutions: self-discovered (not mandated) and forward-scoped, per worker and per pair."""

from __future__ import annotations

import polars as pl

from mbb.analysis import (
    PERSONA_MANDATES,
    institution_summary,
    institutions,
    pair_institutions,
    worker_round_predictions,
)
from mbb.params import PERSONAS
from mbb.taxonomy import CATEGORY_NAMES


def test_mandates_cover_every_persona_with_known_categories():
    assert set(PERSONA_MANDATES) == set(PERSONAS)
    for cats in PERSONA_MANDATES.values():
        assert "price_primary" in cats and cats <= set(CATEGORY_NAMES)


def test_worker_institutions(scen, scen_ev):
    inst = institutions(scen, worker_round_predictions(scen_ev))
    marked = inst.filter(pl.col("marker") != "none").select(
        "worker", "category", "rounds", "subruns", "mandated", "forward_scoped", "institutional"
    )
    # (the classifier finds neither W1's kept promise as coalition loyalty nor W3's
    # "owe me one from before" as reputation; see test_evidence.test_exact_labels_per_utterance)
    assert marked.rows() == [
        # the price-first worker took up a debt and honoured it a subrun later: institutional
        ("W1", "reciprocity", 2, 2, False, True, True),
        # "equal bids by queue order", once: not forward-scoped, so not an institution
        ("W1", "tie_break_deference", 1, 1, False, False, False),
        ("W2", "earliest_deadline_first", 1, 1, True, False, False),
        ("W2", "rule_making_citation", 1, 1, True, False, False),
        # the reciprocator's persona dictates reciprocity: mandated, so not self-discovered
        ("W3", "reciprocity", 2, 2, True, True, False),
    ]
    # price-primary is mandated for everyone and unmarked: never an institution
    pp = inst.filter(pl.col("category") == "price_primary")
    assert pp["mandated"].all() and not pp["institutional"].any()


def test_summary_and_pairs(scen, scen_ev):
    s = institution_summary(institutions(scen, worker_round_predictions(scen_ev)))
    assert s.select("model", "share_relational_institution").rows() == [
        ("deadline_advocate", 0.0),
        ("price_first", 1.0),
        ("reciprocator", 0.0),
    ]
    p = pair_institutions(scen, scen_ev).select(
        "worker", "peer", "category", "rounds", "forward_scoped", "institutional"
    )
    assert p.rows() == [
        ("W1", "W3", "reciprocity", 1, False, False),
        # W3 calls in the favour in s2 (message 27, "you owe me one from before"): two rounds
        ("W3", "W1", "reciprocity", 2, True, False),
    ]
