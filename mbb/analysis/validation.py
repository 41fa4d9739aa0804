"""Validating classifiers: P/R/F1 against scripted ground truth, Cohen's kappa between two
classifiers, and a stratified manual-review loop (export CSV -> humans label -> import)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path

import numpy as np
import polars as pl

from mbb.analysis._frames import utterances
from mbb.taxonomy import CATEGORY_NAMES

__all__ = [
    "cohen_kappa",
    "export_review_sample",
    "ground_truth",
    "import_review",
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
    sample.write_csv(path)
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
        .filter(~pl.col("human_labels").is_in(list(CATEGORY_NAMES)))
    )
    if bad.height:
        r = bad.row(0, named=True)
        raise ValueError(
            f"{path}: unknown category {r['human_labels']!r} in human_labels "
            f"(run {r['run_id']}, seq {r['seq']}); valid: {', '.join(CATEGORY_NAMES)}"
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
