"""Linguistic drift (Figs. 18-19): does the way workers write change across subruns?

Per worker and subrun, over all its utterances (notes, messages, ballot reasoning):
- new_vocab_share: share of the word types it uses that it never used in an earlier subrun
  (1.0 in its first subrun, by definition);
- bow_similarity: cosine similarity of its bag of words with its previous subrun's;
- trigram_similarity: Jaccard similarity of its word-trigram set with its previous subrun's;
- institutional_share: share of its utterances with evidence of an institutional category
  (marked † or ‡ in the taxonomy).
Words are lower-cased runs of letters and apostrophes; worker ids and numbers are dropped.
"""

from __future__ import annotations

from collections.abc import Mapping

import polars as pl

from mbb.analysis._frames import condition_of, labels_of, utterances
from mbb.taxonomy import CATEGORIES

__all__ = ["linguistic_drift", "worker_linguistics"]

W = ["run_id", "worker"]
INSTITUTIONAL = [c.name for c in CATEGORIES if c.marker != "none"]


def worker_linguistics(
    tables: Mapping[str, pl.DataFrame], evidence: pl.DataFrame
) -> pl.DataFrame:
    """The four measures per (run, worker, subrun)."""
    u = utterances(tables).select("run_id", "seq", "subrun", "worker", "text")
    words = (
        u.with_columns(pl.col("text").str.to_lowercase().str.extract_all(r"[a-z][a-z']*")
                       .alias("w"))
        .select("run_id", "seq", "subrun", "worker", "w")
        .explode("w").drop_nulls("w")
    )
    counts = words.group_by(*W, "subrun", "w").agg(pl.len().alias("c"))
    first = counts.group_by(*W, "w").agg(pl.col("subrun").min().alias("s0"))
    vocab = counts.join(first, on=[*W, "w"]).group_by(*W, "subrun").agg(
        pl.len().alias("types"), (pl.col("subrun") == pl.col("s0")).sum().alias("new_types"),
        (pl.col("c") ** 2).sum().alias("sq"),
    ).with_columns((pl.col("new_types") / pl.col("types")).alias("new_vocab_share"))
    prev = counts.with_columns((pl.col("subrun") + 1).alias("subrun")).rename({"c": "cp"})
    dot = counts.join(prev, on=[*W, "subrun", "w"]).group_by(*W, "subrun").agg(
        (pl.col("c") * pl.col("cp")).sum().alias("dot")
    )
    sq_prev = vocab.select(*W, (pl.col("subrun") + 1).alias("subrun"),
                           pl.col("sq").alias("sq_prev"))
    bow = vocab.join(sq_prev, on=[*W, "subrun"], how="left").join(
        dot, on=[*W, "subrun"], how="left"
    ).with_columns(
        pl.when(pl.col("sq_prev").is_not_null())
        .then(pl.col("dot").fill_null(0) / (pl.col("sq").sqrt() * pl.col("sq_prev").sqrt()))
        .alias("bow_similarity")
    )
    tri = (
        words.with_columns(
            pl.concat_str(
                [pl.col("w"), pl.col("w").shift(-1).over("run_id", "seq"),
                 pl.col("w").shift(-2).over("run_id", "seq")], separator=" ",
            ).alias("t")
        )
        .drop_nulls("t").select(*W, "subrun", "t").unique()
    )
    tn = tri.group_by(*W, "subrun").agg(pl.len().alias("nt"))
    tprev = tri.with_columns((pl.col("subrun") + 1).alias("subrun"))
    inter = tri.join(tprev, on=[*W, "subrun", "t"]).group_by(*W, "subrun").agg(
        pl.len().alias("inter")
    )
    tj = tn.join(tn.with_columns((pl.col("subrun") + 1).alias("subrun")).rename({"nt": "ntp"}),
                 on=[*W, "subrun"], how="left").join(inter, on=[*W, "subrun"], how="left")
    tj = tj.with_columns(
        pl.when(pl.col("ntp").is_not_null())
        .then(pl.col("inter").fill_null(0)
              / (pl.col("nt") + pl.col("ntp") - pl.col("inter").fill_null(0)))
        .alias("trigram_similarity")
    )
    inst = evidence.filter(pl.col("category").is_in(INSTITUTIONAL)).select(
        "run_id", "seq"
    ).unique().with_columns(pl.lit(True).alias("inst"))
    ish = u.join(inst, on=["run_id", "seq"], how="left").group_by(*W, "subrun").agg(
        pl.col("inst").fill_null(False).mean().alias("institutional_share"),
        pl.len().alias("utterances"),
    )
    out = ish.join(bow.select(*W, "subrun", "new_vocab_share", "bow_similarity"),
                   on=[*W, "subrun"], how="left").join(
        tj.select(*W, "subrun", "trigram_similarity"), on=[*W, "subrun"], how="left")
    return labels_of(condition_of(out, tables), tables).sort(*W, "subrun")


def linguistic_drift(
    tables: Mapping[str, pl.DataFrame], evidence: pl.DataFrame
) -> pl.DataFrame:
    """Means of the per-worker measures by condition, model and subrun."""
    w = worker_linguistics(tables, evidence)
    return w.group_by("condition", "model", "subrun").agg(
        pl.len().alias("workers"),
        pl.col("new_vocab_share").mean(),
        pl.col("bow_similarity").mean(),
        pl.col("trigram_similarity").mean(),
        pl.col("institutional_share").mean(),
    ).sort("condition", "model", "subrun")
