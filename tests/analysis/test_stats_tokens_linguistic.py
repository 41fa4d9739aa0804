"""Significance tests, the token audit and linguistic drift, with exact values."""

from __future__ import annotations

import numpy as np
import polars as pl
import pytest

from mbb.analysis import (
    approx_tokens,
    chi2_contingency,
    chi2_sf,
    classifier_spend,
    classify_evidence,
    cost_by_model,
    linguistic_drift,
    permutation_pvalue,
    token_audit,
    token_efficiency,
)
from mbb.analysis.linguistic import worker_linguistics


@pytest.mark.parametrize(
    ("x", "dof", "p"),
    [
        (3.841458820694124, 1, 0.05),
        (5.991464547107979, 2, 0.05),
        (11.070497693516351, 5, 0.05),
        (0.5, 3, 0.918891411654676),
        (100.0, 10, 2.7735209462083e-16),
    ],
)
def test_chi2_sf_known_values(x, dof, p):
    assert chi2_sf(x, dof) == pytest.approx(p, rel=1e-6)


def test_chi2_contingency_exact():
    stat, dof, p = chi2_contingency(np.array([[10, 20], [30, 40]]))
    assert stat == pytest.approx(0.7936507936507936) and dof == 1
    assert p == pytest.approx(0.37299848361, rel=1e-8)
    # a group never present: nothing to test, not "p = 1"
    stat, dof, p = chi2_contingency(np.array([[3, 0], [4, 0]]))
    assert np.isnan(stat) and dof == 0 and np.isnan(p)
    with pytest.raises(ValueError, match="dof must be positive"):
        chi2_sf(1.0, 0)


def test_holm_adjust_exact():
    """Holm's step-down: the k-th smallest of m tested p-values times m - k + 1, made
    non-decreasing, capped at 1; an untested series (None, NaN) is not counted and stays None.
    (The behaviour-drift chart counted 11 of 45 series at an uncorrected p < 0.05.)"""
    from mbb.analysis.stats import holm_adjust

    got = holm_adjust([0.01, None, 0.04, 0.03, float("nan"), 0.5])
    assert got[1] is None and got[4] is None
    # m = 4: 0.01 * 4, 0.03 * 3, max(0.04 * 2, 0.09), min(1, 0.5 * 1)
    assert got[0] == pytest.approx(0.04)
    assert got[3] == pytest.approx(0.09)
    assert got[2] == pytest.approx(0.09)
    assert got[5] == pytest.approx(0.5)
    assert holm_adjust([0.6, 0.7]) == [1.0, 1.0]
    assert holm_adjust([]) == []


def test_permutation_pvalue():
    x = np.array([0.0] * 10 + [1.0] * 10)
    g = np.array([1] * 10 + [2] * 10)
    assert permutation_pvalue(x, g, n=500) < 0.01
    assert permutation_pvalue(np.ones(6), np.array([1, 1, 1, 2, 2, 2]), n=100) == 1.0
    assert np.isnan(permutation_pvalue(np.ones(3), np.array([1, 1, 1])))  # one group


def test_approx_tokens():
    df = pl.DataFrame({"t": ["Bidding 900 for 120s.", "I'll go — fine", ""]})
    assert df.select(approx_tokens(pl.col("t")))["t"].to_list() == [5, 6, 0]


def test_token_audit_scripted_is_approximate(scen):
    a = token_audit(scen)
    assert a["approximate"].all() and not a["classifier"].any()
    w2 = a.filter(pl.col("worker") == "W2").sort("phase")
    # note: 50 credits , 60s . For transparency : roughly 5 . 0 min before my deadline . = 17
    assert w2.select("phase", "calls", "completion_tokens").rows() == [
        ("ballot", 1, 8),
        ("conversation", 1, 15),
        ("declaration", 1, 17),
    ]
    assert set(a.filter(pl.col("phase") == "report")["worker"]) == {"W1", "W3"}
    # scripted text costs nothing that a price could say: unknown, and the table says why
    (row,) = cost_by_model(a, by=("model",)).iter_rows(named=True)
    assert row["model"] == "scripted" and row["cost_usd"] is None
    assert row["cost_unknown_because"] == "scripted: no API calls"


def test_token_audit_with_llm_calls(scen):
    calls = pl.DataFrame(
        {
            "run_id": ["base-seed0001"] * 3,
            "subrun": [1, 1, 2],
            "round": [1, 1, None],
            "worker": ["W1", "W1", None],
            "role": ["negotiator", "negotiator", "classifier"],
            "phase": ["ballot", "ballot", "classification"],
            "model": ["m", "m", "judge"],
            "prompt_tokens": [100, 50, 1000],
            "completion_tokens": [10, 5, 100],
            "reasoning_tokens": [0, 20, None],
            "cached_tokens": [0, 40, 0],
            "cost_usd": [0.01, 0.02, 0.5],
            "cache_hit": [False, True, False],
        }
    )
    t = {**scen, "llm_calls": calls}
    a = token_audit(t)
    assert not a["approximate"].any()
    neg = a.filter(~pl.col("classifier")).row(0, named=True)
    assert (neg["calls"], neg["total_tokens"], neg["cached_tokens"], neg["cache_hits"]) == (
        2,
        185,
        40,
        1,
    )
    assert neg["cost_usd"] == pytest.approx(0.03)
    cs = classifier_spend(a)
    assert cs.select("calls", "total_tokens").rows() == [(1, 1100)]
    eff = token_efficiency(t, a).filter(pl.col("model") == "price_first")
    # W1's label in the run table is price_first; its llm rows carry the endpoint's model "m":
    # its tokens are counted under its label, with the windows and credits it won (joined on
    # "m" they never met: an LLM study's tokens per credit were all n/a)
    assert eff.height == 1 and eff["total_tokens"].item() == 185
    assert eff["windows_paid"].item() == 3 and eff["tokens_per_credit_won"].item() is not None
    assert eff["calls_without_usage"].item() == 0  # said beside the sum, never left out
    per_model = {r["model"]: r for r in cost_by_model(a).iter_rows(named=True)}
    assert set(per_model) == {"m", "judge"}
    m = per_model["m"]
    assert (m["runs"], m["calls"], m["total_tokens"]) == (1, 2, 185)
    assert m["cost_usd"] == pytest.approx(0.03) == m["cost_per_run_usd"]
    assert per_model["judge"]["cost_usd"] == pytest.approx(0.5)


def test_token_efficiency_scripted(scen):
    a = token_audit(scen)
    scripted = cost_by_model(a)
    assert scripted["approximate"].all() and scripted["cost_usd"].is_null().all()
    # scripted runs have no model: one "scripted" row per condition, never a persona's name
    assert scripted["model"].to_list() == ["scripted"] * scripted["condition"].n_unique()
    assert scripted["calls"].sum() == a["calls"].sum()
    e = token_efficiency(scen, a).filter(pl.col("model") == "price_first").row(0, named=True)
    total = a.filter(pl.col("model") == "price_first")["total_tokens"].sum()
    assert e["windows_paid"] == 3 and e["credits_paid"] == 1120 and e["tests_passed"] == 20
    assert e["tokens_per_credit_won"] == pytest.approx(total / 1120)
    assert e["tokens_per_test_passed"] == pytest.approx(total / 20)
    assert e["cost_usd"] is None


def test_linguistic_measures_exact(events):
    Log, tables_of = events

    log = Log("base-seed0005")
    log.run_started("base", [("A", "price_first", 100, 100.0), ("B", "quitter", 100, 100.0)])
    for s, note in ((1, "alpha beta gamma"), (2, "alpha beta delta")):
        log.subrun_started(s, {"A": 100, "B": 100}, {"A": 100.0, "B": 100.0})
        log.round(
            s,
            1,
            ["A", "B"],
            {"A": (5, 60, note), "B": (1, 60, "per the rule we agreed last subrun")},
            [],
            {},
            ["A", "B"],
            [5, 1],
        )
    t = tables_of(log)
    ev = classify_evidence(t)
    w = worker_linguistics(t, ev).filter(pl.col("worker") == "A")
    assert w.select(
        "subrun", "new_vocab_share", "bow_similarity", "trigram_similarity", "institutional_share"
    ).rows() == [
        (1, 1.0, None, None, 0.0),
        (2, pytest.approx(1 / 3), pytest.approx(2 / 3), 0.0, 0.0),
    ]
    b = linguistic_drift(t, ev).filter(pl.col("model") == "quitter")
    # "per the rule we agreed last subrun" cites a rule (institutional); identical text in both
    # subruns
    assert b.select(
        "subrun", "new_vocab_share", "bow_similarity", "trigram_similarity", "institutional_share"
    ).rows() == [(1, 1.0, None, None, 1.0), (2, 0.0, pytest.approx(1.0), 1.0, 1.0)]


def test_new_vocabulary_is_new_to_the_run_not_to_the_worker(events):
    """In its first subrun a worker repeating what another said earlier writes nothing new to
    the run (the per-worker share calls it all new); words of the instructions never count."""
    Log, tables_of = events
    log = Log("base-seed0006")
    log.run_started("base", [("A", "price_first", 100, 100.0), ("B", "quitter", 100, 100.0)])
    log.subrun_started(1, {"A": 100, "B": 100}, {"A": 100.0, "B": 100.0})
    for r, (note_a, note_b) in enumerate(
        [("alpha beta gamma", "delta"), ("delta", "alpha beta epsilon")], 1
    ):
        log.round(
            1, r, ["A", "B"], {"A": (5, 60, note_a), "B": (1, 60, note_b)}, [], {}, ["A"], [5]
        )
    t = tables_of(log)
    ev = classify_evidence(t)
    w = {r["worker"]: r for r in worker_linguistics(t, ev).iter_rows(named=True)}
    # A: round 1 alpha beta gamma (3 new), round 2 delta (B said it in round 1): 3 of 4
    assert w["A"]["new_vocab_share"] == pytest.approx(3 / 4)
    # B: round 1 delta (new), round 2 alpha beta epsilon (only epsilon new): 2 of 4
    assert w["B"]["new_vocab_share"] == pytest.approx(2 / 4)
    assert w["A"]["new_vocab_share_own"] == w["B"]["new_vocab_share_own"] == 1.0
    told = worker_linguistics(t, ev, reference="Alpha and gamma are in the prompt.")
    a = told.filter(pl.col("worker") == "A")["new_vocab_share"].item()
    assert a == pytest.approx(1 / 4)  # only beta is new


def test_power_from_a_small_pilot_says_so_in_the_same_line():
    """'177 seeds ... (pilot: 2 seeds)' was printed with no caveat (L3)."""
    from mbb.analysis import power_sentence

    small = power_sentence("completion", 177, 0.1, 2, "base")
    assert small.startswith("completion: 177 seeds per condition") and "\n" not in small
    assert "rough guide only: the spread of 2 seeds is itself uncertain" in small
    assert "rough guide" not in power_sentence("completion", 12, 0.1, 5, "base")
    assert "more than 256 seeds" in power_sentence("completion", None, 0.1, 8, "base")
