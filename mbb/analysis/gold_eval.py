"""Scoring a classifier against a gold file (corpus format): the per-category table with
bootstrap CIs that `mbb validate-classifier` prints and `taxonomy_audit.ipynb` shows, and the
inter-annotator kappa of the gold corpus beside it.

What the numbers mean: precision, recall and F1 per category of the 21 (the separate labels
rolled up: exclusionary coalitions and divide-and-conquer count as rival targeting) on the
items of the gold file, with 95 % percentile-bootstrap intervals over items; `support` is the
number of gold items with the category. They describe agreement with the adjudicated labels of
that corpus's authors on that corpus's kind of text; they are not the classifier's accuracy on
real LLM transcripts (estimate that with the IPW review, `mbb.analysis.validation`). Kappa is
the annotators' agreement with each other: the ceiling a classifier's agreement can be read
against.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import polars as pl

from mbb.analysis.agreement import TEST_SPLITS, read_annotations
from mbb.analysis.corpus import Utterance, read_utterances
from mbb.analysis.validation import gold_prf
from mbb.core.taxonomy import CATEGORY_NAMES, SEPARATE_NAMES, roll_up

__all__ = [
    "FROZEN_SPLITS",
    "GOLD_DIR",
    "adjudicated_items",
    "agreement_table",
    "evaluate_gold",
    "evidence_labels",
    "model_behind_dev",
    "provisional_items",
    "score_gold",
    "splits_summary",
]

GOLD_DIR = Path(__file__).resolve().parent / "gold"
# the frozen test splits, no training item from their writers: B and F (first round), then the
# later rounds' (`agreement.TEST_SPLITS`: Q and R, Y and Z, AC and AH, AI, AS and AV); the README
# says how often each was scored
FROZEN_SPLITS: tuple[str, ...] = ("test.jsonl", *(f"{name}.jsonl" for name in TEST_SPLITS))


def evidence_labels(
    items: Sequence[Utterance], model_path: str | Path | None = None
) -> list[list[dict[str, Any]]]:
    """The evidence (text) classifier's labels for each item, with evidence."""
    from mbb.analysis.textclf import load_model

    model = load_model(model_path)
    return [
        [
            {"category": x.category, "probability": x.probability, "evidence": x.evidence}
            for x in model.predict(u.text, u.channel, u.context.model_dump(exclude_none=True))
        ]
        for u in items
    ]


def score_gold(
    items: Sequence[Utterance], pred: Sequence[Sequence[str]], *, n_boot: int = 1000
) -> tuple[pl.DataFrame, pl.DataFrame]:
    """(21-category table incl. `macro` and `neutral labelled` rows, separate-label table)."""
    neutral = [not u.labels for u in items]
    t = gold_prf(
        [roll_up(u.labels or []) for u in items],
        [roll_up(p) for p in pred],
        CATEGORY_NAMES,
        n_boot=n_boot,
        neutral=neutral,
    )
    sep = gold_prf(
        [[x for x in (u.labels or []) if x in SEPARATE_NAMES] for u in items],
        [[x for x in p if x in SEPARATE_NAMES] for p in pred],
        SEPARATE_NAMES,
        n_boot=n_boot,
    ).filter(pl.col("category") != "macro")
    return t, sep


def evaluate_gold(
    path: str | Path | None = None, *, n_boot: int = 1000, model_path: str | Path | None = None
) -> tuple[pl.DataFrame, pl.DataFrame]:
    """The evidence classifier scored on a gold file (default: the frozen test split)."""
    items = read_utterances(path or GOLD_DIR / "test.jsonl", require_labels=True)
    pred = [[x["category"] for x in labs] for labs in evidence_labels(items, model_path)]
    return score_gold(items, pred, n_boot=n_boot)


def agreement_table(path: str | Path | None = None) -> pl.DataFrame | None:
    """Per category: gold count and the three pairwise Cohen's kappas between annotators
    (author, blind in order, blind shuffled) from `gold/agreement.json`, plus their minimum;
    None when the file is absent."""
    p = Path(path) if path else GOLD_DIR / "agreement.json"
    if not p.is_file():
        return None
    cats: list[dict[str, Any]] = json.loads(p.read_text())["categories"]
    df = pl.DataFrame(cats)
    k = [c for c in df.columns if c.startswith("kappa_")]
    return df.select("category", "gold_n", *k).with_columns(
        pl.min_horizontal(*k).alias("kappa_min")
    )


def model_behind_dev(
    model_path: str | Path | None = None, dev_path: str | Path | None = None
) -> str | None:
    """A one-line note when the model was trained on another version of the dev file than the
    one in the gold folder (new writers delivered, not yet trained on); None when they match.

    `model_path`: the model file (default: the shipped one); `dev_path`: the dev file (default:
    `gold/dev.jsonl`). A model with no `trained_on` record gets a note saying so."""
    from mbb.analysis.textclf import MODEL_PATH

    spec = json.loads(Path(model_path or MODEL_PATH).read_text(encoding="utf-8"))
    dev = Path(dev_path or GOLD_DIR / "dev.jsonl")
    raw = dev.read_bytes()
    trained = spec.get("trained_on") or {}
    if not trained.get("sha256"):
        return f"note: the model does not record which dev file it was trained on ({dev.name})"
    if trained["sha256"] == hashlib.sha256(raw).hexdigest():
        return None
    writers = {json.loads(x).get("writer") for x in raw.decode("utf-8").splitlines() if x.strip()}
    # writers the model left out on purpose (`excluded_writers`) are not new
    seen = set(trained.get("writers", ())) | set(trained.get("excluded_writers", ()))
    new = sorted(w for w in writers - seen if w)
    return (
        f"note: the model was trained on {trained.get('items', '?')} items of an earlier "
        f"{dev.name}; it now has {len(raw.decode('utf-8').splitlines())} items"
        + (f" (writers not trained on: {', '.join(new)})" if new else "")
        + "; retrain with `python -m mbb.analysis.train_taxonomy`"
    )


def adjudicated_items(
    items: Sequence[Utterance], annotations: str | Path | None = None
) -> list[Utterance]:
    """`items` without those carrying their author's labels alone in the gold corpus
    (`provisional` in `annotations.jsonl`: the blind annotations not yet delivered); items the
    corpus does not hold are kept. A measurement against labels only the writer gave is not a
    measurement against adjudicated gold, so the frozen-split rates use this filter.

    `items`: the items to filter; `annotations`: the annotations file (default: the gold
    folder's)."""
    ann = read_annotations(Path(annotations or GOLD_DIR / "annotations.jsonl"))
    return [u for u in items if set(ann.get(u.id, ())) != {"author"}]


def provisional_items(items: Sequence[Utterance], annotations: str | Path | None = None) -> int:
    """How many of `items` carry their author's labels alone (the complement of
    `adjudicated_items`). Items the corpus does not hold count 0.

    `items`: the scored items; `annotations`: the annotations file (default: the gold folder's)."""
    return len(items) - len(adjudicated_items(items, annotations))


def splits_summary(scored: Sequence[tuple[str, int, pl.DataFrame]]) -> pl.DataFrame:
    """One row per scored gold file, from its `score_gold` table: macro F1 with its interval,
    the weakest category (lowest F1 among those with gold items), and the share of neutral
    items given any label with its interval (None, not 0, in a file with no neutral item);
    what a reader compares across test splits.

    `scored`: (the file's name, its number of items, its 21-category table) per file."""
    rows = []
    for name, n_items, t in scored:
        by = {r["category"]: r for r in t.iter_rows(named=True)}
        cats = [
            r for c, r in by.items() if c in CATEGORY_NAMES and r["support"] and r["f1"] is not None
        ]
        weakest = min(cats, key=lambda r: r["f1"]) if cats else None
        macro = by["macro"]
        neutral = by.get("neutral labelled") or dict.fromkeys(("predicted", "f1", "f1_lo", "f1_hi"))
        neutral["support"] = neutral.get("support") or 0  # a file without neutral items: none
        rows.append(
            {
                "split": name,
                "items": n_items,
                "macro_f1": macro["f1"],
                "macro_lo": macro["f1_lo"],
                "macro_hi": macro["f1_hi"],
                "weakest": None if weakest is None else weakest["category"],
                "weakest_f1": None if weakest is None else weakest["f1"],
                "neutral": neutral["support"],
                "neutral_labelled": neutral["predicted"],
                "neutral_share": neutral["f1"],
                "neutral_lo": neutral["f1_lo"],
                "neutral_hi": neutral["f1_hi"],
            }
        )
    floats = ("weakest_f1", "neutral_share", "neutral_lo", "neutral_hi")
    schema = {
        "weakest": pl.String,
        "neutral_labelled": pl.Int64,
        **dict.fromkeys(floats, pl.Float64),
    }
    return pl.DataFrame(rows, schema_overrides=schema)
