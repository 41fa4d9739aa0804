"""Validating classifiers: P/R/F1 against scripted ground truth, Cohen's kappa between two
classifiers, a stratified manual-review loop (export CSV -> humans label -> import), per-category
P/R/F1 with bootstrap CIs against a gold file (`gold_prf`), and a review sample that includes the
unlabelled stratum with inverse-probability weights, so recall is estimated honestly
(`export_ipw_sample` -> review -> `ipw_estimates`)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path

import numpy as np
import polars as pl

from mbb.analysis._frames import utterances
from mbb.core.csvsafe import write_csv
from mbb.core.taxonomy import ALL_LABELS, CATEGORY_NAMES

__all__ = [
    "cohen_kappa",
    "export_ipw_sample",
    "export_review_sample",
    "gold_prf",
    "ground_truth",
    "import_review",
    "ipw_estimates",
    "kappa_table",
    "prf_table",
    "review_agreement",
]

UTT = ["run_id", "seq"]
WR = ["run_id", "subrun", "round", "worker"]


def ground_truth(tables: Mapping[str, pl.DataFrame], level: str = "utterance") -> pl.DataFrame:
    """Scripted labels, long: (keys..., category), unique. level: 'utterance' | 'worker_round'."""
    u = utterances(tables).explode("labels").drop_nulls("labels").rename({"labels": "category"})
    keys = UTT if level == "utterance" else WR
    return u.select(*keys, "category").unique()


def prf_table(
    truth: pl.DataFrame,
    pred: pl.DataFrame,
    keys: Sequence[str],
    categories: Sequence[str] = CATEGORY_NAMES,
) -> pl.DataFrame:
    """Per category: support, predicted, tp, precision, recall, f1 (nulls when undefined).

    A last row `macro (enacted)` averages over categories with support > 0.
    """
    t = truth.select(*keys, "category").unique().with_columns(pl.lit(True).alias("t"))
    p = pred.select(*keys, "category").unique().with_columns(pl.lit(True).alias("p"))
    j = t.join(p, on=[*keys, "category"], how="full", coalesce=True)
    agg = j.group_by("category").agg(
        pl.col("t").is_not_null().sum().alias("support"),
        pl.col("p").is_not_null().sum().alias("predicted"),
        (pl.col("t").is_not_null() & pl.col("p").is_not_null()).sum().alias("tp"),
    )
    base = pl.DataFrame({"category": list(categories)})
    out = base.join(agg, on="category", how="left").with_columns(
        pl.col("support", "predicted", "tp").fill_null(0).cast(pl.Int64)
    )
    prec = pl.when(pl.col("predicted") > 0).then(pl.col("tp") / pl.col("predicted"))
    rec = pl.when(pl.col("support") > 0).then(pl.col("tp") / pl.col("support"))
    out = out.with_columns(prec.alias("precision"), rec.alias("recall"))
    out = out.with_columns(
        pl.when(pl.col("support") > 0)
        .then(
            pl.when(pl.col("precision").fill_null(0) + pl.col("recall") > 0)
            .then(
                2
                * pl.col("precision").fill_null(0)
                * pl.col("recall")
                / (pl.col("precision").fill_null(0) + pl.col("recall"))
            )
            .otherwise(0.0)
        )
        .alias("f1")
    )
    enacted = out.filter(pl.col("support") > 0)
    macro = pl.DataFrame(
        {
            "category": ["macro (enacted)"],
            "support": [int(enacted["support"].sum())],
            "predicted": [int(enacted["predicted"].sum())],
            "tp": [int(enacted["tp"].sum())],
            "precision": [enacted["precision"].fill_null(0).mean()],
            "recall": [enacted["recall"].mean()],
            "f1": [enacted["f1"].mean()],
        },
        schema=out.schema,
    )
    return pl.concat([out, macro])


def cohen_kappa(a: np.ndarray, b: np.ndarray) -> float | None:
    """Cohen's kappa of two binary (or categorical) label vectors; None if undefined."""
    a, b = np.asarray(a), np.asarray(b)
    if a.size == 0:
        return None
    po = float(np.mean(a == b))
    cats = np.union1d(a, b)
    pe = float(sum(np.mean(a == c) * np.mean(b == c) for c in cats))
    if pe >= 1.0:
        return 1.0 if po == 1.0 else None
    return (po - pe) / (1 - pe)


def kappa_table(
    items: pl.DataFrame,
    a: pl.DataFrame,
    b: pl.DataFrame,
    keys: Sequence[str] = UTT,
    categories: Sequence[str] = CATEGORY_NAMES,
) -> pl.DataFrame:
    """Kappa per category over `items` (every classified unit), plus a pooled row.

    Each unit × category is a yes/no decision by each classifier.
    """
    items = items.select(*keys).unique()
    n = items.height
    rows = []
    pa_all, pb_all = [], []
    sa = a.select(*keys, "category").unique()
    sb = b.select(*keys, "category").unique()
    for c in categories:
        ka = items.join(sa.filter(pl.col("category") == c), on=list(keys), how="left")
        va = (
            items.join(
                sa.filter(pl.col("category") == c).with_columns(pl.lit(1).alias("x")),
                on=list(keys),
                how="left",
            )
            .sort(list(keys))["x"]
            .fill_null(0)
            .to_numpy()
        )
        vb = (
            items.join(
                sb.filter(pl.col("category") == c).with_columns(pl.lit(1).alias("x")),
                on=list(keys),
                how="left",
            )
            .sort(list(keys))["x"]
            .fill_null(0)
            .to_numpy()
        )
        del ka
        pa_all.append(va)
        pb_all.append(vb)
        rows.append(
            (
                c,
                n,
                int(va.sum()),
                int(vb.sum()),
                float(np.mean(va == vb)) if n else None,
                cohen_kappa(va, vb),
            )
        )
    va, vb = np.concatenate(pa_all), np.concatenate(pb_all)
    rows.append(
        (
            "pooled",
            n,
            int(va.sum()),
            int(vb.sum()),
            float(np.mean(va == vb)) if n else None,
            cohen_kappa(va, vb),
        )
    )
    return pl.DataFrame(
        rows, schema=["category", "units", "n_a", "n_b", "agreement", "kappa"], orient="row"
    )


def export_review_sample(
    utter: pl.DataFrame,
    pred: pl.DataFrame,
    path: str | Path,
    *,
    per_stratum: int = 5,
    seed: int = 0,
) -> pl.DataFrame:
    """Write a stratified sample (source × first predicted category, 'none' included) to CSV
    for human labelling; the `human_labels` column is left blank (';'-separated names)."""
    p = pred.group_by(UTT).agg(pl.col("category").unique().sort().alias("predicted"))
    u = utter.join(p, on=UTT, how="left").with_columns(pl.col("predicted").fill_null([]))
    u = u.with_columns(pl.col("predicted").list.first().fill_null("none").alias("stratum"))
    sample = (
        u.with_columns(
            pl.int_range(pl.len()).shuffle(seed=seed).over("source", "stratum").alias("_r")
        )
        .filter(pl.col("_r") < per_stratum)
        .sort("source", "stratum", "run_id", "seq")
        .select(
            "run_id",
            "seq",
            "subrun",
            "round",
            "worker",
            "source",
            "stratum",
            "text",
            pl.col("predicted").list.join(";").alias("predicted"),
            pl.lit("").alias("human_labels"),
        )
    )
    # a person opens it in a spreadsheet: texts from a colleague's runs are not run as formulas
    write_csv(sample, path, keep=UTT)
    return sample


def import_review(path: str | Path) -> pl.DataFrame:
    """Read a labelled review CSV; rejects unknown category names, naming the row."""
    df = pl.read_csv(path, schema_overrides={"human_labels": pl.String, "predicted": pl.String})
    df = df.with_columns(
        pl.col("human_labels")
        .fill_null("")
        .str.split(";")
        .list.eval(pl.element().str.strip_chars())
        .list.eval(pl.element().filter(pl.element() != "")),
        pl.col("predicted")
        .fill_null("")
        .str.split(";")
        .list.eval(pl.element().filter(pl.element() != "")),
    )
    bad = (
        df.explode("human_labels")
        .drop_nulls("human_labels")
        .filter(~pl.col("human_labels").is_in(list(ALL_LABELS)))
    )
    if bad.height:
        r = bad.row(0, named=True)
        raise ValueError(
            f"{path}: unknown category {r['human_labels']!r} in human_labels "
            f"(run {r['run_id']}, seq {r['seq']}); valid: {', '.join(ALL_LABELS)}"
        )
    return df


def review_agreement(reviewed: pl.DataFrame) -> pl.DataFrame:
    """Classifier vs human on the reviewed sample: per-category P/R/F1 (human = truth) and
    kappa; the macro row carries the pooled kappa."""
    truth = reviewed.select(*UTT, pl.col("human_labels").alias("category")).explode("category")
    truth = truth.drop_nulls("category")
    pred = reviewed.select(*UTT, pl.col("predicted").alias("category")).explode("category")
    pred = pred.drop_nulls("category")
    prf = prf_table(truth, pred, UTT)
    kap = kappa_table(reviewed.select(UTT), pred, truth).select(
        pl.col("category").replace("pooled", "macro (enacted)"), "kappa"
    )
    return prf.join(kap, on="category", how="left")


# --- gold files: per-category P/R/F1 with bootstrap CIs -----------------------------------


def gold_prf(
    gold: Sequence[Sequence[str]],
    pred: Sequence[Sequence[str]],
    categories: Sequence[str] = CATEGORY_NAMES,
    *,
    n_boot: int = 1000,
    seed: int = 0,
    neutral: Sequence[bool] | None = None,
) -> pl.DataFrame:
    """Per category: support n, predicted, precision, recall, F1 and percentile bootstrap 95 %
    CIs (items resampled with replacement, `n_boot` times, seeded), then a `macro` row (mean
    F1 over categories with support, its CI from the same resamples) and, when `neutral` flags
    the gold-neutral items, a `neutral labelled` row (share of them given any label)."""
    n = len(gold)
    g = np.array([[c in set(x) for c in categories] for x in gold], dtype=bool).reshape(n, -1)
    p = np.array([[c in set(x) for c in categories] for x in pred], dtype=bool).reshape(n, -1)
    rng = np.random.default_rng(seed)
    idx = [np.arange(n)] + [rng.integers(0, n, n) for _ in range(n_boot)]

    def stats(ii):
        gg, pp = g[ii], p[ii]
        tp = (gg & pp).sum(0).astype(float)
        sup, npred = gg.sum(0).astype(float), pp.sum(0).astype(float)
        with np.errstate(invalid="ignore", divide="ignore"):
            prec = np.where(npred > 0, tp / npred, np.nan)
            rec = np.where(sup > 0, tp / sup, np.nan)
            f1 = np.where(sup > 0, 2 * tp / (sup + npred), np.nan)
        return sup, npred, prec, rec, f1

    sup, npred, prec, rec, f1 = stats(idx[0])
    has = sup > 0
    boots = [stats(ii) for ii in idx[1:]]
    B_prec = np.array([b[2] for b in boots])
    B_rec = np.array([b[3] for b in boots])
    B_f1 = np.array([b[4] for b in boots])

    def ci(a):
        with np.errstate(invalid="ignore"):
            lo = np.nanpercentile(a, 2.5, axis=0) if a.size else np.full(len(categories), np.nan)
            hi = np.nanpercentile(a, 97.5, axis=0) if a.size else np.full(len(categories), np.nan)
        return lo, hi

    import warnings

    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        (pl_, ph), (rl, rh), (fl, fh) = ci(B_prec), ci(B_rec), ci(B_f1)
        macro_b = np.nanmean(B_f1[:, has], axis=1) if has.any() else np.array([np.nan])

    def num(x):
        return None if x is None or not np.isfinite(x) else round(float(x), 4)

    rows = []
    for j, c in enumerate(categories):
        rows.append(
            (
                c,
                int(sup[j]),
                int(npred[j]),
                num(prec[j]),
                num(pl_[j]),
                num(ph[j]),
                num(rec[j]),
                num(rl[j]),
                num(rh[j]),
                num(f1[j]),
                num(fl[j]),
                num(fh[j]),
            )
        )
    mf = float(np.nanmean(f1[has])) if has.any() else None
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        m_lo, m_hi = np.nanpercentile(macro_b, 2.5), np.nanpercentile(macro_b, 97.5)
    rows.append(
        (
            "macro",
            int(sup.sum()),
            int(npred.sum()),
            None,
            None,
            None,
            None,
            None,
            None,
            num(mf),
            num(m_lo),
            num(m_hi),
        )
    )
    if neutral is not None:
        nm = np.asarray(neutral, dtype=bool)
        labelled = np.array([bool(x) for x in pred], dtype=bool)
        shares = [labelled[ii][nm[ii]].mean() for ii in idx if nm[ii].any()]
        if nm.any():
            rows.append(
                (
                    "neutral labelled",
                    int(nm.sum()),
                    int(labelled[nm].sum()),
                    None,
                    None,
                    None,
                    None,
                    None,
                    None,
                    num(labelled[nm].mean()),
                    num(np.percentile(shares[1:], 2.5)) if len(shares) > 1 else None,
                    num(np.percentile(shares[1:], 97.5)) if len(shares) > 1 else None,
                )
            )
    cols = [
        "category",
        "support",
        "predicted",
        "precision",
        "precision_lo",
        "precision_hi",
        "recall",
        "recall_lo",
        "recall_hi",
        "f1",
        "f1_lo",
        "f1_hi",
    ]
    schema = {
        c: (pl.String if c == "category" else pl.Int64 if c in cols[1:3] else pl.Float64)
        for c in cols
    }
    return pl.DataFrame(rows, schema=schema, orient="row")


# --- manual review with inverse-probability weights ----------------------------------------


def export_ipw_sample(
    utter: pl.DataFrame,
    pred: pl.DataFrame,
    path: str | Path,
    *,
    per_stratum: int = 20,
    unlabelled: int = 60,
    seed: int = 0,
    keys: Sequence[str] = UTT,
) -> pl.DataFrame:
    """A stratified review sample for estimating precision AND recall honestly.

    Strata: each predicted category (an utterance with several labels is in the stratum of
    its first label, alphabetically) and `none` — the utterances the classifier left
    unlabelled, which is where missed behaviour hides. `per_stratum` items are drawn from each
    labelled stratum and `unlabelled` from `none` (all, when a stratum is smaller), seeded.
    Each row carries its stratum size N_h, sample size n_h and inverse-probability weight
    N_h / n_h, so `ipw_estimates` can weigh reviewed items back to the population. Reviewers
    fill `human_labels` (';'-separated category names, empty = none apply)."""
    p = pred.group_by(list(keys)).agg(pl.col("category").unique().sort().alias("predicted"))
    u = utter.join(p, on=list(keys), how="left").with_columns(pl.col("predicted").fill_null([]))
    u = u.with_columns(pl.col("predicted").list.first().fill_null("none").alias("stratum"))
    size = u.group_by("stratum").agg(pl.len().alias("N_h"))
    u = u.join(size, on="stratum").with_columns(
        pl.int_range(pl.len()).shuffle(seed=seed).over("stratum").alias("_r"),
        pl.when(pl.col("stratum") == "none")
        .then(pl.lit(unlabelled))
        .otherwise(pl.lit(per_stratum))
        .alias("_k"),
    )
    s = u.filter(pl.col("_r") < pl.col("_k"))
    s = s.join(s.group_by("stratum").agg(pl.len().alias("n_h")), on="stratum")
    sample = s.sort("stratum", *keys).select(
        *keys,
        *[c for c in ("source", "text") if c in s.columns],
        "stratum",
        "N_h",
        "n_h",
        (pl.col("N_h") / pl.col("n_h")).alias("weight"),
        pl.col("predicted").list.join(";").alias("predicted"),
        pl.lit("").alias("human_labels"),
    )
    # a person opens it in a spreadsheet: texts from a colleague's runs are not run as formulas
    # (the run id is left as it is, so a filled-in file still joins back on it; a worker name
    # is a colleague's text like any other: a worker-round sample guards it too)
    write_csv(sample, path, keep=("run_id",))
    return sample


def _split(col: str) -> pl.Expr:
    return (
        pl.col(col)
        .fill_null("")
        .str.split(";")
        .list.eval(pl.element().str.strip_chars())
        .list.eval(pl.element().filter(pl.element() != ""))
    )


def ipw_estimates(
    reviewed: pl.DataFrame | str | Path,
    categories: Sequence[str] = CATEGORY_NAMES,
    *,
    n_boot: int = 1000,
    seed: int = 0,
) -> pl.DataFrame:
    """Population precision and recall per category from a reviewed IPW sample (a CSV from
    `export_ipw_sample` with `human_labels` filled, or its DataFrame), with bootstrap 95 % CIs.

    With weight w_i = N_h / n_h: precision = sum w [pred & human] / sum w [pred] and recall =
    sum w [pred & human] / sum w [human] — the unlabelled stratum's reviewed items count for
    the whole stratum, so behaviour the classifier misses lowers recall as it should. The
    bootstrap resamples within each stratum (weights fixed). Unknown category names in
    `human_labels` are an error naming the row."""
    df = (
        pl.read_csv(reviewed, infer_schema_length=0)
        if isinstance(reviewed, str | Path)
        else (reviewed)
    )
    df = df.with_columns(
        _split("human_labels").alias("human"),
        _split("predicted").alias("pred"),
        pl.col("weight").cast(pl.Float64),
    )
    bad = df.with_row_index("row").explode("human").drop_nulls("human")
    bad = bad.filter(~pl.col("human").is_in(list(categories)))
    if bad.height:
        r = bad.row(0, named=True)
        raise ValueError(
            f"unknown category {r['human']!r} in human_labels (row {r['row'] + 1}); "
            f"valid: {', '.join(categories)}"
        )
    w = df["weight"].to_numpy()
    strata = df["stratum"].to_numpy()
    H = np.array([[c in set(x) for c in categories] for x in df["human"].to_list()], dtype=bool)
    P = np.array([[c in set(x) for c in categories] for x in df["pred"].to_list()], dtype=bool)
    H = H.reshape(len(df), -1)
    P = P.reshape(len(df), -1)

    def est(ii):
        ww = w[ii][:, None]
        tp = (ww * (H[ii] & P[ii])).sum(0)
        pp = (ww * P[ii]).sum(0)
        hh = (ww * H[ii]).sum(0)
        with np.errstate(invalid="ignore", divide="ignore"):
            return np.where(pp > 0, tp / pp, np.nan), np.where(hh > 0, tp / hh, np.nan), hh

    rng = np.random.default_rng(seed)
    groups = [np.flatnonzero(strata == s) for s in np.unique(strata)]
    prec, rec, hh = est(np.arange(len(df)))
    bp, br = [], []
    for _ in range(n_boot):
        ii = np.concatenate([g[rng.integers(0, len(g), len(g))] for g in groups])
        a, b, _ = est(ii)
        bp.append(a)
        br.append(b)
    import warnings

    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        plo, phi = np.nanpercentile(bp, 2.5, axis=0), np.nanpercentile(bp, 97.5, axis=0)
        rlo, rhi = np.nanpercentile(br, 2.5, axis=0), np.nanpercentile(br, 97.5, axis=0)

    def num(x):
        return None if not np.isfinite(x) else round(float(x), 4)

    return pl.DataFrame(
        {
            "category": list(categories),
            "reviewed_positive": H.sum(0).astype(np.int64),
            "est_positive": [round(float(x), 2) for x in hh],
            "precision": [num(x) for x in prec],
            "precision_lo": [num(x) for x in plo],
            "precision_hi": [num(x) for x in phi],
            "recall": [num(x) for x in rec],
            "recall_lo": [num(x) for x in rlo],
            "recall_hi": [num(x) for x in rhi],
        }
    )
