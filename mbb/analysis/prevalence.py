"""Prevalence corrected for the classifier's measured errors (Rogan-Gladen), with intervals that
carry the uncertainty of those errors.

A classifier that finds a category in a share `r` of the units it reads, with recall
(sensitivity) `se` and false-positive rate `fpr` (the share of units without the category that
it labels anyway), implies a true prevalence

    pi = (r - fpr) / (se - fpr)          (Rogan & Gladen 1978; clipped to [0, 1])

The raw share under-counts a category the classifier misses often and over-counts a rare one it
false-alarms on, and by how much depends on the category, so raw shares are biased in different
directions for different categories. `se` and `fpr` are measured on gold items (the frozen test
splits: `classifier_rates`), so they are uncertain, and so is `r` (a sample of units): the
interval draws all three from their posteriors (Beta(k + 1/2, n - k + 1/2), Jeffreys) and
reports percentiles of the implied `pi`. When `se - fpr` is small the correction divides by
nearly nothing: the row is flagged `identifiable = False` (its posterior probability of
se - fpr > MIN_YOUDEN is under 95 %) and its interval is wide.

What it assumes: the classifier's recall and false-positive rate on the units being counted are
those measured on the gold items. They are measured per utterance on independently written
text; on transcripts in another style, or counted per worker-round, they can differ — the
interval carries the sampling error of the rates, not that shift (see the README).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from functools import cache
from pathlib import Path

import numpy as np
import polars as pl

from mbb.core.taxonomy import ALL_LABELS, CATEGORY_NAMES, roll_up

__all__ = [
    "MIN_YOUDEN",
    "calibrated_prevalence",
    "classifier_rates",
    "corrected_prevalence",
    "frozen_split_rates",
    "rogan_gladen",
    "utterance_label_counts",
]

MIN_YOUDEN = 0.2  # se - fpr below this: the correction is not identified from these rates


def rogan_gladen(share: float, sensitivity: float, fpr: float) -> float:
    """The Rogan-Gladen prevalence implied by a raw share, clipped to [0, 1] (nan when
    sensitivity <= fpr: the classifier then carries no information about the category; nan
    for a share that is nan, e.g. of no units).

    share: the raw share labelled; sensitivity, fpr: the classifier's measured rates."""
    j = sensitivity - fpr
    if j <= 0 or np.isnan(share):  # max(0.0, nan) would say 0
        return float("nan")
    return float(min(1.0, max(0.0, (share - fpr) / j)))


def classifier_rates(
    gold: Sequence[Sequence[str]],
    pred: Sequence[Sequence[str]],
    categories: Sequence[str] = CATEGORY_NAMES,
) -> pl.DataFrame:
    """Per category: positives, true positives, negatives, false positives of `pred` against
    `gold` (label lists per item, rolled up to the 21 categories), with recall and FPR."""
    g = [set(roll_up([x for x in labs if x in ALL_LABELS])) for labs in gold]
    p = [set(roll_up([x for x in labs if x in ALL_LABELS])) for labs in pred]
    if len(g) != len(p):
        raise ValueError(f"gold has {len(g)} items, pred {len(p)}")
    rows = []
    for c in categories:
        pos = sum(c in a for a in g)
        tp = sum(c in a and c in b for a, b in zip(g, p, strict=True))
        neg = len(g) - pos
        fp = sum(c not in a and c in b for a, b in zip(g, p, strict=True))
        rows.append((c, pos, tp, neg, fp))
    df = pl.DataFrame(rows, schema=["category", "positives", "tp", "negatives", "fp"], orient="row")
    return df.with_columns(
        (pl.col("tp") / pl.col("positives")).alias("recall"),
        (pl.col("fp") / pl.col("negatives")).alias("fpr"),
    )


def utterance_label_counts(
    utter: pl.DataFrame, labels: pl.DataFrame, categories: Sequence[str] = CATEGORY_NAMES
) -> pl.DataFrame:
    """(category, units, labelled): how many utterances (rows of `utter`, keyed by run_id and
    seq) carry each category in `labels` (evidence rows or utterance predictions)."""
    n = utter.select("run_id", "seq").unique().height
    lab = (
        labels.join(utter.select("run_id", "seq").unique(), on=["run_id", "seq"])
        .select("run_id", "seq", "category")
        .unique()
        .group_by("category")
        .len("labelled")
    )
    return (
        pl.DataFrame({"category": list(categories)})
        .join(lab, on="category", how="left")
        .with_columns(pl.col("labelled").fill_null(0).cast(pl.Int64), pl.lit(n).alias("units"))
        .select("category", "units", "labelled")
    )


def _beta(rng: np.random.Generator, k: float, n: float, size: int) -> np.ndarray:
    return rng.beta(k + 0.5, n - k + 0.5, size)


def corrected_prevalence(
    counts: pl.DataFrame,
    rates: pl.DataFrame,
    *,
    n_draws: int = 4000,
    level: float = 0.95,
    seed: int = 0,
) -> pl.DataFrame:
    """Raw and corrected prevalence per category.

    `counts`: (category, units, labelled) — how many units were classified and how many got
    the category (`utterance_label_counts`, or worker-rounds); `rates`: `classifier_rates` on
    gold items. Returns per category: units, labelled, raw share with its interval, recall and
    FPR used, corrected prevalence (Rogan-Gladen at the measured rates) with its interval
    (percentiles of draws of share, recall and FPR from their Jeffreys posteriors), the
    corrected count (prevalence x units) and `identifiable`."""
    rng = np.random.default_rng(seed)
    r = {row["category"]: row for row in rates.iter_rows(named=True)}
    lo_q, hi_q = (1 - level) / 2, 1 - (1 - level) / 2
    rows = []
    for row in counts.iter_rows(named=True):
        c, n, k = row["category"], int(row["units"]), int(row["labelled"])
        if c not in r:
            raise ValueError(f"no measured rates for {c!r}")
        m = r[c]
        pos, tp, neg, fp = (int(m[x]) for x in ("positives", "tp", "negatives", "fp"))
        share = k / n if n else float("nan")
        s = _beta(rng, k, n, n_draws)
        raw_lo, raw_hi = (float(x) for x in np.quantile(s, [lo_q, hi_q]))
        if n == 0:  # nothing classified: no share, and no interval drawn from the prior alone
            raw_lo = raw_hi = float("nan")
        if n == 0 or pos == 0 or neg == 0:
            se_hat, fpr_hat = (
                (tp / pos if pos else float("nan")),
                (fp / neg if neg else float("nan")),
            )
            est = lo = hi = float("nan")
            ident = False
        else:
            se_hat, fpr_hat = tp / pos, fp / neg
            se = _beta(rng, tp, pos, n_draws)
            fpr = _beta(rng, fp, neg, n_draws)
            j = se - fpr
            ok = j > 0
            pi = np.clip((s[ok] - fpr[ok]) / j[ok], 0.0, 1.0)
            est = rogan_gladen(share, se_hat, fpr_hat)
            lo, hi = (float(x) for x in np.quantile(pi, [lo_q, hi_q])) if ok.any() else (0.0, 1.0)
            ident = bool(np.mean(j > MIN_YOUDEN) >= 0.95)
        rows.append(
            {
                "category": c,
                "units": n,
                "labelled": k,
                "raw_share": share,
                "raw_lo": raw_lo,
                "raw_hi": raw_hi,
                "recall": se_hat,
                "fpr": fpr_hat,
                "corrected": est,
                "corrected_lo": lo,
                "corrected_hi": hi,
                "corrected_count": est * n if n else float("nan"),
                "identifiable": ident,
            }
        )
    return pl.DataFrame(rows)


def rates_from_splits(
    splits: Mapping[str, tuple[Sequence[Sequence[str]], Sequence[Sequence[str]]]],
) -> pl.DataFrame:
    """`classifier_rates` pooled over several gold splits: name -> (gold labels, predicted)."""
    gold: list[Sequence[str]] = []
    pred: list[Sequence[str]] = []
    for g, p in splits.values():
        gold += list(g)
        pred += list(p)
    return classifier_rates(gold, pred)


@cache
def _frozen_rates(model_path: str | None, with_context: bool) -> pl.DataFrame:
    from mbb.analysis.corpus import read_utterances
    from mbb.analysis.gold_eval import FROZEN_SPLITS, GOLD_DIR, adjudicated_items, evidence_labels

    splits = {}
    for name in FROZEN_SPLITS:
        # an item still carrying its author's labels alone (blind annotations not yet in) is
        # not a measurement of the classifier against adjudicated labels: it waits outside
        items = adjudicated_items(read_utterances(GOLD_DIR / name, require_labels=True))
        if not with_context:
            items = [u.model_copy(update={"context": type(u.context)()}) for u in items]
        pred = [[x["category"] for x in labs] for labs in evidence_labels(items, model_path)]
        splits[name] = ([u.labels or [] for u in items], pred)
    return rates_from_splits(splits)


def frozen_split_rates(
    model_path: str | Path | None = None, *, with_context: bool = False
) -> pl.DataFrame:
    """`classifier_rates` of the evidence text classifier (the shipped model, or another model
    file) on the frozen test splits pooled (`gold_eval.FROZEN_SPLITS`: writers B and F and
    those `agreement.TEST_SPLITS` names, none of them used to train it);
    computed once per model file. Items whose blind annotations have not arrived (`provisional`
    in `annotations.jsonl`) stay out of the pool until they are adjudicated.

    `with_context=False` (default) reads each item's text alone, as `classify_evidence` reads
    utterances in runs (their context enters there as structural facts instead); True gives the
    rates of the corpus path (`mbb classify` on files with context)."""
    return _frozen_rates(str(model_path) if model_path else None, with_context)


def calibrated_prevalence(
    tables: Mapping[str, pl.DataFrame],
    evidence: pl.DataFrame,
    *,
    rates: pl.DataFrame | None = None,
    unit: str = "utterance",
    by: Sequence[str] = ("condition", "model"),
    n_draws: int = 4000,
    seed: int = 0,
) -> pl.DataFrame:
    """Per group (`by`: columns among condition, model, worker, run_id) and category of the 21:
    raw count and share of units labelled, and the prevalence corrected for the classifier's
    recall and FPR (`corrected_prevalence`), with intervals.

    `evidence`: `classify_evidence` rows (or an LLM classifier's, same columns), read in the
    21-category view (`classify_evidence` adds each separate label's roll-up row); `rates`:
    the classifier's measured rates (default `frozen_split_rates()`: the evidence text
    classifier's on the frozen splits, each item read alone as in runs — right only for its
    labels, and blind to the recall the structural facts add in runs); `unit`: "utterance"
    (the unit the rates were measured on) or "worker_round" (Fig. 6's unit: a worker-round
    counts when any of its utterances carries the category — the per-utterance rates then
    only approximate the worker-round ones, so the column `rates_unit` says which unit the
    rates came from)."""
    from mbb.analysis._frames import condition_of, labels_of, utterances
    from mbb.analysis.measures import worker_rounds

    if unit not in ("utterance", "worker_round"):
        raise ValueError(f"unit must be 'utterance' or 'worker_round', got {unit!r}")
    rates = frozen_split_rates() if rates is None else rates
    keys = ["run_id", "seq"] if unit == "utterance" else ["run_id", "subrun", "round", "worker"]
    if unit == "utterance":
        units = utterances(tables).select("run_id", "seq", "worker")
    else:
        units = worker_rounds(tables).select(keys)
    units = labels_of(condition_of(units, tables), tables)
    bad = [b for b in by if b not in units.columns]
    if bad:
        raise ValueError(f"cannot group by {bad}; choose among {sorted(units.columns)}")
    # the evidence rows already carry each separate label's roll-up (classify_evidence)
    ev = evidence.filter(pl.col("category").is_in(list(CATEGORY_NAMES)))
    ev = ev.select(*keys, "category").unique()
    out = []
    groups = units.group_by(list(by), maintain_order=True) if by else [((), units)]
    for g, part in groups:
        n = part.height
        hits = ev.join(part.select(keys), on=keys).group_by("category").len("labelled")
        counts = (
            pl.DataFrame({"category": list(CATEGORY_NAMES)})
            .join(hits, on="category", how="left")
            .with_columns(pl.col("labelled").fill_null(0).cast(pl.Int64), pl.lit(n).alias("units"))
        )
        t = corrected_prevalence(counts, rates, n_draws=n_draws, seed=seed)
        vals = g if isinstance(g, tuple) else (g,)
        t = t.with_columns(
            *(pl.lit(v).alias(b) for b, v in zip(by, vals, strict=True)),
            pl.lit(unit).alias("unit"),
            pl.lit("utterance").alias("rates_unit"),
        )
        out.append(t.select(*by, *[c for c in t.columns if c not in by]))
    return pl.concat(out)
