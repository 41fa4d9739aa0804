"""Corrected prevalence (Rogan-Gladen with the uncertainty of recall and FPR): the algebra, a
planted prevalence recovered with honest coverage, a null (nothing there) found as nothing, and
a classifier that carries no information flagged."""

from __future__ import annotations

import math

import numpy as np
import polars as pl
import pytest

from mbb.analysis.prevalence import (
    classifier_rates,
    corrected_prevalence,
    rogan_gladen,
    utterance_label_counts,
)


def test_rogan_gladen_inverts_the_classifier():
    pi, se, fpr = 0.2, 0.6, 0.02
    share = fpr + pi * (se - fpr)
    assert rogan_gladen(share, se, fpr) == pytest.approx(pi)
    assert rogan_gladen(0.0, se, fpr) == 0.0  # below the false-positive floor: clipped
    assert rogan_gladen(0.99, se, fpr) == 1.0
    assert math.isnan(rogan_gladen(0.3, 0.1, 0.1))


def test_classifier_rates_count_per_category_with_the_rollup():
    gold = [["anchoring"], [], ["divide_and_conquer"], ["anchoring", "cheap_talk"]]
    pred = [["anchoring"], ["anchoring"], ["rival_targeting"], []]
    r = {x["category"]: x for x in classifier_rates(gold, pred).iter_rows(named=True)}
    assert (r["anchoring"]["positives"], r["anchoring"]["tp"]) == (2, 1)
    assert (r["anchoring"]["negatives"], r["anchoring"]["fp"]) == (2, 1)
    assert r["rival_targeting"]["tp"] == 1  # divide-and-conquer rolls up into rival targeting
    assert r["cheap_talk"]["recall"] == 0.0


def simulate(rng, pi, se, fpr, units=4000, gold_pos=60, gold_neg=400):
    """Units counted by a classifier with known errors, and a gold set that measures them."""
    truth = rng.random(units) < pi
    labelled = np.where(truth, rng.random(units) < se, rng.random(units) < fpr)
    gpos, gneg = rng.random(gold_pos) < se, rng.random(gold_neg) < fpr
    gold = [["anchoring"]] * gold_pos + [[]] * gold_neg
    pred = [["anchoring"] if x else [] for x in np.concatenate([gpos, gneg])]
    counts = pl.DataFrame(
        {"category": ["anchoring"], "units": [units], "labelled": [int(labelled.sum())]}
    )
    rates = classifier_rates(gold, pred, ["anchoring"])
    return corrected_prevalence(counts, rates, n_draws=2000, seed=int(rng.integers(1 << 30)))


def test_a_planted_prevalence_is_recovered_and_the_raw_share_is_not():
    rng = np.random.default_rng(7)
    pi, se, fpr = 0.2, 0.6, 0.02
    covered = raw_covered = 0
    est = []
    for _ in range(200):
        row = simulate(rng, pi, se, fpr).row(0, named=True)
        covered += row["corrected_lo"] <= pi <= row["corrected_hi"]
        raw_covered += row["raw_lo"] <= pi <= row["raw_hi"]
        est.append(row["corrected"])
        assert row["identifiable"]
    assert covered >= 186, covered  # nominal 95 %: at least 93 % of 200
    assert raw_covered == 0  # the raw share (about 0.136) under-counts every time
    assert abs(np.mean(est) - pi) < 0.01


def test_a_null_is_found_as_nothing():
    rng = np.random.default_rng(11)
    his, zero_in = [], 0
    for _ in range(200):
        row = simulate(rng, 0.0, 0.6, 0.02).row(0, named=True)
        zero_in += row["corrected_lo"] == 0.0
        his.append(row["corrected_hi"])
        assert row["raw_share"] > 0.0  # false alarms alone give a raw count above zero
    assert zero_in >= 190, zero_in
    assert np.median(his) < 0.06


def test_a_classifier_without_information_is_flagged():
    rng = np.random.default_rng(3)
    row = simulate(rng, 0.2, 0.12, 0.1).row(0, named=True)
    assert not row["identifiable"]
    assert row["corrected_hi"] - row["corrected_lo"] > 0.5  # wide, as it should be


def test_counts_from_utterance_labels():
    utter = pl.DataFrame({"run_id": ["r"] * 4, "seq": [0, 1, 2, 3]})
    labels = pl.DataFrame(
        {
            "run_id": ["r", "r", "r", "x"],
            "seq": [0, 0, 2, 0],  # a repeated label counts once; another run's not at all
            "category": ["anchoring", "anchoring", "anchoring", "cheap_talk"],
        }
    )
    c = utterance_label_counts(utter, labels, ["anchoring", "cheap_talk"])
    assert c.rows() == [("anchoring", 4, 2), ("cheap_talk", 4, 0)]
    with pytest.raises(ValueError, match="no measured rates for 'cheap_talk'"):
        corrected_prevalence(c, classifier_rates([["anchoring"]], [[]], ["anchoring"]))


def _rates(se: float, fpr: float, n: int = 1000) -> pl.DataFrame:
    from mbb.core.taxonomy import CATEGORY_NAMES

    pos, neg = n, n
    return pl.DataFrame(
        {
            "category": list(CATEGORY_NAMES),
            "positives": [pos] * 21,
            "tp": [round(se * pos)] * 21,
            "negatives": [neg] * 21,
            "fp": [round(fpr * neg)] * 21,
        }
    )


def test_calibrated_prevalence_of_a_run(scen, scen_ev):
    from mbb.analysis import calibrated_prevalence
    from mbb.analysis._frames import utterances

    exact = calibrated_prevalence(scen, scen_ev, rates=_rates(1.0, 0.0), by=())
    n = utterances(scen).height
    pp = exact.filter(pl.col("category") == "price_primary").row(0, named=True)
    want = scen_ev.filter(pl.col("category") == "price_primary").select("run_id", "seq")
    assert pp["units"] == n and pp["labelled"] == want.unique().height
    assert pp["corrected"] == pytest.approx(pp["raw_share"])  # a perfect classifier: no change
    # a classifier that finds half of what is there doubles the estimate
    half = calibrated_prevalence(scen, scen_ev, rates=_rates(0.5, 0.0), by=())
    pp2 = half.filter(pl.col("category") == "price_primary").row(0, named=True)
    assert pp2["corrected"] == pytest.approx(min(1.0, 2 * pp["raw_share"]))
    by = calibrated_prevalence(scen, scen_ev, rates=_rates(0.8, 0.01), unit="worker_round")
    assert set(by.columns) >= {"condition", "model", "unit", "rates_unit", "corrected_lo"}
    assert by["unit"].unique().to_list() == ["worker_round"]
    assert by.height == 21 * by.select("condition", "model").unique().height
    with pytest.raises(ValueError, match="cannot group by"):
        calibrated_prevalence(scen, scen_ev, rates=_rates(1, 0), by=("colour",))


def test_the_frozen_pool_holds_only_adjudicated_items(monkeypatch):
    """Items still carrying their author's labels alone (blind annotations not yet in) stay out
    of the rates `calibrated_prevalence` corrects with; every adjudicated frozen item is in."""
    import mbb.analysis.agreement as agreement
    import mbb.analysis.gold_eval as gold_eval
    from mbb.analysis import prevalence
    from mbb.analysis.corpus import read_utterances
    from mbb.analysis.gold_eval import FROZEN_SPLITS, GOLD_DIR

    ann = agreement.read_annotations()
    items = [u for name in FROZEN_SPLITS for u in read_utterances(GOLD_DIR / name)]
    adjudicated = [u for u in items if set(ann[u.id]) != {"author"}]
    rates = prevalence.frozen_split_rates()
    assert (rates["positives"] + rates["negatives"]).unique().to_list() == [len(adjudicated)]
    # one frozen writer's items turned provisional (as while its annotations are awaited)
    pending = {u.id for u in items if u.id.startswith("BL-")}
    assert len(pending) == 122
    marked = {i: ({"author": a["author"]} if i in pending else a) for i, a in ann.items()}
    monkeypatch.setattr(gold_eval, "read_annotations", lambda *a, **k: marked)
    fewer = prevalence._frozen_rates.__wrapped__(None, False)
    n = len(adjudicated) - len(pending & {u.id for u in adjudicated})
    assert (fewer["positives"] + fewer["negatives"]).unique().to_list() == [n]
