"""Linguistic drift (Figs. 18-19): does the way workers write change across subruns?

Per worker and subrun, over all its utterances (notes, messages, ballot reasoning):
- new_vocab_share: share of the word types it uses in a round that nobody had used earlier in
  the run (in any earlier round, by any worker) and that are not in the agents' instructions
  (`reference`), summed over the worker's rounds of the subrun (new types / types). The
  paper's summary gives the result (~50 % falling to ~12 %), not the reference vocabulary;
  this is mbb's choice of reference: what the conversation had already said plus what the
  agents were told, so the first subrun is not new by definition. Measured per round, the
  first round of a run is all new and later rounds of the first subrun are not;
- new_vocab_share_own: share of the word types it uses that it itself never used in an
  earlier subrun (the older, per-worker definition: 1.0 in its first subrun);
- bow_similarity: cosine similarity of its bag of words with its previous subrun's;
- trigram_similarity: Jaccard similarity of its word-trigram set with its previous subrun's;
- institutional_share: share of its utterances with evidence of an institutional category
  (marked † or ‡ in the taxonomy).
Words are lower-cased runs of letters and apostrophes; worker ids and numbers are dropped.
"""

from __future__ import annotations

import re
from collections.abc import Mapping

import polars as pl

from mbb.analysis._frames import By, by_keys, condition_of, labels_of, utterances
from mbb.core.taxonomy import CATEGORIES

__all__ = ["LINGUISTIC_LABELS", "linguistic_drift", "worker_linguistics"]

# how the drift measures are named, "name (unit)" (definitions: the module's docstring); the
# shares read in percent, the similarities on their 0-1 scale
LINGUISTIC_LABELS: dict[str, str] = {
    "new_vocab_share": "New vocabulary (% of word types)",
    "new_vocab_share_own": "Vocabulary new to the worker (% of word types)",
    "bow_similarity": "Word-use similarity to the previous subrun (cosine, 0-1)",
    "trigram_similarity": "Trigram overlap with the previous subrun (Jaccard, 0-1)",
    "institutional_share": "Institutional talk (% of utterances)",
}

W = ["run_id", "worker"]
INSTITUTIONAL = [c.name for c in CATEGORIES if c.marker != "none"]


_WORD = r"[a-z][a-z']*"


def worker_linguistics(
    tables: Mapping[str, pl.DataFrame], evidence: pl.DataFrame, *, reference: str | None = None
) -> pl.DataFrame:
    """The measures per (run, worker, subrun).

    tables: the run tables. evidence: the classifier's evidence rows (for
    institutional_share). reference: text whose words never count as new (the agents'
    instructions, e.g. `mbb.analysis.instructions.condition_instructions`); None: none.
    Words, workers and trigrams are mapped to integers (ranks and hashes) first so the
    group-bys over millions of word rows stay fast.
    """
    u = (
        utterances(tables)
        .select("run_id", "seq", "subrun", "round", "worker", "text")
        .with_columns(
            pl.struct("run_id", "worker").rank("dense").cast(pl.Int64).alias("wid"),
            pl.int_range(pl.len()).alias("uid"),
        )
    )
    wmap = u.select("wid", "run_id", "worker").unique("wid")
    words = (
        u.select(
            "uid",
            "wid",
            "run_id",
            "subrun",
            "round",
            pl.col("text").str.to_lowercase().str.extract_all(_WORD).alias("w"),
        )
        .explode("w")
        .drop_nulls("w")
        .with_columns(pl.col("w").hash())
    )
    K = ["wid", "subrun"]
    # new to the run: first used (by anyone) in this round, and not in the instructions
    told = pl.DataFrame(
        {"w": sorted(set(re.findall(_WORD, (reference or "").lower())))}, schema={"w": pl.String}
    ).select(pl.col("w").hash(), pl.lit(True).alias("told"))
    rk = pl.col("subrun") * 100_000 + pl.col("round")
    wr = words.select("wid", "run_id", "subrun", "round", "w").unique()
    wr = wr.with_columns(rk.min().over("run_id", "w").alias("first_rk")).join(
        told, on="w", how="left"
    )
    run_new = (
        wr.with_columns(((rk == pl.col("first_rk")) & pl.col("told").is_null()).alias("fresh"))
        .group_by(K)
        .agg(pl.len().alias("round_types"), pl.col("fresh").sum().alias("fresh_types"))
        .with_columns((pl.col("fresh_types") / pl.col("round_types")).alias("new_vocab_share"))
    )
    words = words.drop("run_id", "round")
    # sorted by (worker, word, subrun), a row's predecessor tells whether the worker used the
    # word before (new vocabulary) and how often in the previous subrun (bag-of-words dot)
    counts = words.group_by(*K, "w").agg(pl.len().alias("c")).sort("wid", "w", "subrun")
    seen = (pl.col("wid").shift(1) == pl.col("wid")) & (pl.col("w").shift(1) == pl.col("w"))
    prev_sub = seen & (pl.col("subrun").shift(1) == pl.col("subrun") - 1)
    counts = counts.with_columns(
        (~seen.fill_null(False)).alias("new"),
        pl.when(prev_sub).then(pl.col("c").shift(1)).otherwise(0).alias("cp"),
    )
    vocab = (
        counts.group_by(K)
        .agg(
            pl.len().alias("types"),
            pl.col("new").sum().alias("new_types"),
            (pl.col("c") ** 2).sum().alias("sq"),
            (pl.col("c") * pl.col("cp")).sum().alias("dot"),
        )
        .with_columns((pl.col("new_types") / pl.col("types")).alias("new_vocab_share_own"))
    )
    sq_prev = vocab.select(
        "wid", (pl.col("subrun") + 1).alias("subrun"), pl.col("sq").alias("sq_prev")
    )
    bow = vocab.join(sq_prev, on=K, how="left").with_columns(
        pl.when(pl.col("sq_prev").is_not_null())
        .then(pl.col("dot") / (pl.col("sq").sqrt() * pl.col("sq_prev").sqrt()))
        .alias("bow_similarity")
    )
    # trigrams by a global shift, kept only when all three words share an utterance;
    # words and trigrams are 64-bit hashes (collisions are negligible at these sizes)
    same = lambda k: pl.col("uid").shift(-k) == pl.col("uid")  # noqa: E731
    tri = (
        words.with_columns(
            pl.when(same(1) & same(2))
            .then(
                pl.struct(
                    pl.col("w"),
                    pl.col("w").shift(-1).alias("w1"),
                    pl.col("w").shift(-2).alias("w2"),
                ).hash()
            )
            .alias("t")
        )
        .drop_nulls("t")
        .select(*K, "t")
        .unique()
        .sort("wid", "t", "subrun")
    )
    in_prev = (
        (pl.col("wid").shift(1) == pl.col("wid"))
        & (pl.col("t").shift(1) == pl.col("t"))
        & (pl.col("subrun").shift(1) == pl.col("subrun") - 1)
    )
    tn = (
        tri.with_columns(in_prev.fill_null(False).alias("shared"))
        .group_by(K)
        .agg(pl.len().alias("nt"), pl.col("shared").sum().alias("inter"))
    )
    tj = tn.join(
        tn.select("wid", (pl.col("subrun") + 1).alias("subrun"), pl.col("nt").alias("ntp")),
        on=K,
        how="left",
    ).with_columns(
        pl.when(pl.col("ntp").is_not_null())
        .then(pl.col("inter") / (pl.col("nt") + pl.col("ntp") - pl.col("inter")))
        .alias("trigram_similarity")
    )
    inst = (
        evidence.filter(pl.col("category").is_in(INSTITUTIONAL))
        .select("run_id", "seq")
        .unique()
        .with_columns(pl.lit(True).alias("inst"))
    )
    ish = (
        u.join(inst, on=["run_id", "seq"], how="left")
        .group_by(K)
        .agg(
            pl.col("inst").fill_null(False).mean().alias("institutional_share"),
            pl.len().alias("utterances"),
        )
    )
    out = (
        ish.join(bow.select(*K, "new_vocab_share_own", "bow_similarity"), on=K, how="left")
        .join(run_new.select(*K, "new_vocab_share"), on=K, how="left")
        .join(tj.select(*K, "trigram_similarity"), on=K, how="left")
        .join(wmap, on="wid")
        .drop("wid")
    )
    return labels_of(condition_of(out, tables), tables).sort(*W, "subrun")


def linguistic_drift(
    tables: Mapping[str, pl.DataFrame],
    evidence: pl.DataFrame,
    *,
    by: By = "condition",
    reference: str | None = None,
) -> pl.DataFrame:
    """Figs. 18-19: the per-worker measures of `worker_linguistics`, averaged.

    by="condition": their means by condition, model and subrun, with the `workers` averaged.
    by="run_id": per run, every model pooled (the seed is the unit of a CI): the means over
    the run's worker-subruns of `bow_similarity` and `trigram_similarity` (each with the
    worker's previous subrun, so the first subrun has none), and the `institutional_share`
    of the run's first and last subrun with `institutional_drift` = last minus first.
    Averaging workers within a run before comparing runs is mbb's choice.

    tables, evidence, reference: as in `worker_linguistics`; by: as above."""
    keys = by_keys(
        by, "linguistic_drift", ["condition", "model", "subrun"], ["condition", "run_id"]
    )
    w = worker_linguistics(tables, evidence, reference=reference)
    if by == "condition":
        return (
            w.group_by(keys)
            .agg(
                pl.len().alias("workers"),
                pl.col("new_vocab_share").mean(),
                pl.col("new_vocab_share_own").mean(),
                pl.col("bow_similarity").mean(),
                pl.col("trigram_similarity").mean(),
                pl.col("institutional_share").mean(),
            )
            .sort(keys)
        )
    first, last = pl.col("subrun").min(), pl.col("subrun").max()
    share = pl.col("institutional_share")
    return (
        w.group_by(keys)
        .agg(
            pl.col("bow_similarity").mean(),
            pl.col("trigram_similarity").mean(),
            share.filter(pl.col("subrun") == first).mean().alias("institutional_first"),
            share.filter(pl.col("subrun") == last).mean().alias("institutional_last"),
        )
        .with_columns(
            (pl.col("institutional_last") - pl.col("institutional_first")).alias(
                "institutional_drift"
            )
        )
        .sort(keys)
    )
