"""Train the text classifier's linear model on a dev gold file and write it as JSON.

    python -m mbb.analysis.train_taxonomy [--dev DEV.jsonl] [--out mbb/analysis/taxonomy_model.json]
                                          [--cv] [--exclude-writers W1,W2]

DEV.jsonl (also accepted as the first positional argument) defaults to
`mbb/analysis/gold/dev.jsonl` (the corpus format of `mbb.analysis.corpus`); it may hold any
number of writers. Deterministic: the same input gives the same file, byte for byte (liblinear
with a fixed seed, sorted vocabulary, rounded weights, no timestamps). Only the dev split is
read; C (from C_GRID) and the thresholds are chosen on out-of-fold probabilities (leave one
writer out when the file has several writers, at most MAX_FOLDS folds, else five folds), so they
are not fitted to the items they judge. Every item on which a lexicon cue fires also trains
once more with its cues' words removed (`masked_text`), and every ballot once more without its
context, as runs read it (`_copy_feats`, both at COPY_WEIGHT).
`--cv` also prints the cross-validation by writer: train on all writers but one, test on it.
`--exclude-writers` leaves those dev writers out (by default those of `EXCLUDED_WRITERS`, the
contrast writers CN and CO, that the file has); the model file records the list beside the dev
file's hash.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from mbb.analysis.corpus import CorpusError, Utterance, read_utterances
from mbb.analysis.textclf import (
    MODEL_PATH,
    LineModel,
    TextModel,
    expand,
    features,
    text_features,
)
from mbb.core.taxonomy import ALL_LABELS, CATEGORY_NAMES, roll_up

if TYPE_CHECKING:
    from scipy.sparse import csr_matrix

__all__ = ["DEFAULT_DEV", "fit", "grouped_cv", "main", "score_items", "writer_cv"]

DEFAULT_DEV = Path(__file__).with_name("gold") / "dev.jsonl"
# dev writers the shipped model is not trained on (`--exclude-writers` overrides); their items
# stay in dev.jsonl, adjudicated like every other writer's, and the spec records the list. CN
# and CO are the contrast writers (`gold_briefs --kind contrast`): minimal sets that put
# neighbouring categories in the same words. Trained with them the model lost recall on fresh
# text (split 16: 0.888 against 0.907 without them); the round-17 rule then tested leaving them
# out on split 17, which no model had read (0.891 against the round-12 model's 0.876). Round
# 22's dev writers DJ-DQ join the training set in round 23, with replies that turn down or ask
# about what they answer no longer inheriting its category (textclf._DECLINE, _WH_QUESTION).
# DV-EC are round 24's dev writers: trained with them the model read better on split 24 read
# alone and over the twenty-four splits, but labelled more of the pooled neutral items (38 of
# 1,395 against 32), so by its rule it did not ship; round 25 trained them again with the
# utterance's form read (branch cand25), and again the pooled neutral items labelled rose (41
# of 1,447 against 34). Round 26 trains them with the gate held to 4.5 % of the neutral dev
# items (NEUTRAL_TARGET), and they join the training set: on split 26, which no model had read,
# macro-F1 0.966 against 0.957, no neutral item labelled against one
EXCLUDED_WRITERS: tuple[str, ...] = ("CN", "CO")
C_REG = 8.0  # inverse regularisation strength of each logistic regression (when not chosen)
# candidate C: `fit` keeps the one whose out-of-fold macro-F1 (folds by writer) is best, so the
# strength follows the dev file as writers are added (writer CV on the 4 dev writers: mean
# macro-F1 0.749 with C fixed at 8 -> 0.751, the worst writer's neutral items labelled 9.7% ->
# 5.3%; one-element grid = fixed C). Round 20 asked whether 16, the top of the grid that every
# shipped model chose, hid a better C: on (8, 16, 32) the 58 training writers' out-of-fold
# macro-F1 was 0.8204, 0.8216 and 0.8207, and 32 left liblinear unconverged after 1,000
# iterations on some labels (training 35 min against 22-30), so 16 is the optimum's inside and
# the grid stays where it was
C_GRID: tuple[float, ...] = (4.0, 8.0, 16.0)
MIN_DF = 2  # an n-gram must occur in at least this many dev utterances
# ...and be used by at least this many writers (when the training items have that many): an
# n-gram only one writer uses is that writer's style, not the category's (writer CV: mean
# macro-F1 0.751 -> 0.751, worst writer 0.716 -> 0.721, its neutral items labelled 5.3% -> 2.6%)
MIN_WRITERS = 2
MIN_SUPPORT = 4  # labels with fewer positives get no model (never predicted)
PRUNE = 0.02  # weights smaller than this are dropped from the shipped file
# a label with no cue of its category needs p >= threshold + MODEL_ONLY_MARGIN; one whose cue
# fired, p >= threshold - CUED_DISCOUNT. Round 1 (writers who use the categories' words) chose
# 0.1 and 0.1; on the 19 dev writers the discount only adds false alarms on near-miss neutral
# items (fast CV at C 4 with F-beta 1.25 thresholds, margin 0.1: writer macro-F1 0.798 -> 0.805
# and style 0.722 -> 0.726 without it) and a smaller margin finds more of the categories
# enacted without their words (margin 0.05: writer 0.805, style 0.730, context-style recall
# 0.71 -> 0.73; margin 0 adds recall but labels 8.7 % of neutral items, against 8.3 %)
MODEL_ONLY_MARGIN = 0.05
CUED_DISCOUNT = 0.0
GRID = [round(0.30 + 0.05 * i, 2) for i in range(13)]  # candidate thresholds 0.30..0.90
# rival categories: two categories that share under RIVAL_SHARE of the smaller one's positives
# on the dev items. A label with no cue of its own is dropped when a rival's cue fired on the
# same utterance and the rival is labelled (mbb's choice, against generic words carrying a
# second, rarely co-occurring label: "I'll rank you ahead of me this round if you back me next
# time we meet. Fair?" read as coalition formation beside its reciprocity on "me", "we" and
# "?"); 0 turns the rule off. Fast CV on the 25 dev writers: dropping every such label costs
# recall (writer macro-F1 0.809 -> 0.803); dropping only a near one (RIVAL_MARGIN) is neutral
# (writer 0.809 -> 0.810, style 0.729 -> 0.729) and still drops the exchange above (0.79
# against 0.75 needed). Round 5: trained with the round's writers, coalition formation's
# threshold fell (0.65; 0.55 in a trial on the authors' labels) and the exchange cleared what it
# needs by 0.08 (0.21 in the trial);
# writer-grouped fast CV on the 29 dev writers (6 folds, C 16) by margin: 0.05 macro-F1 0.829
# pooled (writer mean 0.826), 0.1 0.830, 0.2 0.830, 0.3 0.828 (0.825), every label 0.824
# (0.821), neutral items labelled 4.7 % throughout. mbb's choice: 0.3, the widest margin that
# costs no more than noise (0.001) and the one that keeps the exchange reciprocity alone
RIVAL_SHARE = 0.03
RIVAL_MARGIN = 0.3  # ...and only when its probability clears what it needs by less than this
# Round 16 tried letting the rival's cue suffice, labelled or not: every model retrained since
# round 12 reads the scripted ballot "By bid; with W1 ahead of me as offered, for a favour
# later." as coalition loyalty on "offered" (no cue of its own, 0.01 to 0.22 above what it
# needs) beside the cues of two rivals, reciprocity and price-primary, whose own models say no.
# Fast writer-grouped CV on the round-16 dev file (12,576 items, 6 folds, C 16, the same fold
# models): macro-F1 0.858 -> 0.805, neutral items labelled 4.5 % -> 4.1 %, coalition loyalty
# 0.77 -> 0.68, context-style recall 0.72 -> 0.66 (997 items change): the lexicon's cues fire
# too often beside a category they rarely share an utterance with to veto it. Not adopted.


Features = list[dict[str, float]]  # one feature dict per utterance (textclf.features)
# per utterance, the features of its training copies (`_copy_feats`): its cue-masked copy when a
# cue fired, its context-free copy when it is a ballot; often none
Copies = list[list[dict[str, float]]]
LabelModels = dict[
    str, tuple[np.ndarray, float]
]  # label -> (weights over the vocabulary, intercept)


def _feats(items: Sequence[Utterance], earlier: dict[str, Any] | None = None) -> Features:
    """Each item's features; `earlier`: the earlier-line model's spec (`fit_earlier`)."""
    scorer = LineModel(earlier) if earlier else None
    return [
        features(u.text, u.channel, u.context.model_dump(exclude_none=True), scorer) for u in items
    ]


# Masked copies (mbb's choice, round 7): every dev utterance on which a lexicon cue fires is
# trained on a second time with the words of its cues removed, at weight COPY_WEIGHT, so the
# n-grams around a cue learn the category too and a writer who enacts it without its usual
# words is still read (the cue's own weight is learnt from the unmasked utterance as before).
# MASK_OWN_CUES_ONLY: remove only the cues of the utterance's own categories (True) or every
# cue that fired (False). Fast writer-grouped CV on the 34 dev writers (C 16, thresholds and
# gate chosen again with the copies): no copies pooled macro-F1 0.816, neutral items labelled
# 4.8 % (round-6 writers alone 0.795, 11.0 %); every cue masked, weight 0.5: 0.835, 4.8 %
# (0.815, 8.7 %); weight 1: 0.827, 4.6 % (0.808, 8.7 %); own cues, weight 0.5: 0.835, 4.8 %
# (0.823, 10.2 %); enacted-style recall 0.75 -> 0.78, terse 0.76 -> 0.81 with either.
COPY_WEIGHT = 0.5
MASK_OWN_CUES_ONLY = False
# Context-free ballot copies (mbb's choice, round 8): every dev ballot is trained on a second
# time without its context, at COPY_WEIGHT. Runs read a ballot's text alone (its ranking enters
# as structural evidence), but the dev ballots carry their ranking, and the masked copies taught
# the model to lean on it: read alone, ballots lost their tie-breaks and price arguments. Fast
# writer-grouped CV on the 37 round-7 dev writers, masked copies as shipped, without / with:
# pooled macro-F1 with context 0.838 / 0.838, neutral items labelled 4.9 % / 5.0 %; every item
# read alone 0.705 / 0.730 (neutral 3.1 % / 3.6 %), ballots read alone 0.637 / 0.755.
CONTEXT_FREE_BALLOTS = True
# Context-free message copies (mbb's choice, round 9): every dev message (note, private, public)
# that answers no thread (no `in_reply_to`, no `earlier`) is also trained on without its context
# (bids, deadlines, ranking, arrival), at COPY_WEIGHT: runs read messages alone too. A message
# that answers a thread gets none: its reply alone need not show its category ("Fine, same as
# last time then."), and a copy labelled with it would teach short replies to read as tactics.
# Fast writer-grouped CV on the 39 round-8 dev writers, the round-8 code without / with (C 16,
# thresholds and gate chosen again): pooled macro-F1 with context 0.841 / 0.841, neutral items
# labelled 4.9 % / 4.8 % (dev writers over 5 %: 15 / 12 of 39, the worst 21 % / 17 %),
# context-style recall 0.73 / 0.72; every item read alone 0.733 / 0.756 (neutral 3.7 % /
# 3.9 %), messages read alone 0.724 / 0.752, ballots read alone 0.754 / 0.770.
CONTEXT_FREE_MESSAGES = True
MASK_PASSES = 4


def _reads_alone_in_training(u: Utterance) -> bool:
    """Whether `u` also trains as a context-free copy (CONTEXT_FREE_BALLOTS,
    CONTEXT_FREE_MESSAGES)."""
    if u.channel == "ballot":
        return CONTEXT_FREE_BALLOTS
    return CONTEXT_FREE_MESSAGES and not (u.context.in_reply_to or u.context.earlier)


def masked_text(u: Utterance) -> str | None:
    """`u`'s text (spelled out, `textclf.expand`) with the words of its plain (not negated)
    lexicon cues removed, or None when no such cue fires (nothing to mask). A cue that matches
    again after its first match is removed is removed again (at most MASK_PASSES passes)."""
    from mbb.analysis.lexicon import cue_hits

    text, hit = expand(u.text), False
    own = set(u.labels or [])
    for _ in range(MASK_PASSES):
        cues = [
            h
            for h in cue_hits(text, u.source)
            if not h.negated and h.match and (not MASK_OWN_CUES_ONLY or h.category in own)
        ]
        if not cues:
            break
        for h in cues:
            if h.match in text:
                text, hit = text.replace(h.match, " ", 1), True
    return text if hit and text.strip() else None


def _copy_feats(items: Sequence[Utterance], earlier: dict[str, Any] | None = None) -> Copies:
    """Each item's training copies' features: its cue-masked copy (`masked_text`, its context as
    the item's) when a cue fires, and its text without context for a ballot or a message that
    answers no thread (`_reads_alone_in_training`); none at all when COPY_WEIGHT is 0."""
    if COPY_WEIGHT <= 0:
        return [[] for _ in items]
    scorer = LineModel(earlier) if earlier else None
    out: Copies = []
    for u in items:
        rows = []
        t = masked_text(u)
        if t is not None:
            rows.append(features(t, u.channel, u.context.model_dump(exclude_none=True), scorer))
        if _reads_alone_in_training(u):
            rows.append(features(u.text, u.channel, {}, scorer))
        out.append(rows)
    return out


# the earlier-line model's inverse regularisation and the smallest weight it keeps: fixed, not
# chosen per fit (it only makes features). Fast CV on the 14 round-1/2 dev writers: C 8 / prune
# 0.05 and C 2 / prune 0.1 give the same macro-F1 (writer 0.778, style 0.711) and context-style
# recall 0.53 / 0.55; the second is half the size (1.8 MB on the 19 writers)
EARLIER_C = 2.0
EARLIER_PRUNE = 0.1


def fit_earlier(items: Sequence[Utterance]) -> dict[str, Any]:
    """The earlier-line model (`textclf.LineModel`) trained on `items`' own text alone: the
    same logistic regressions as the main model over the text features (n-grams, cues,
    channel), no context. The main model then reads each earlier message of an utterance
    through it (`ep:`/`acp:` features)."""
    fs = [text_features(u.text, u.channel) for u in items]
    vocab, models = _fit_weights(fs, items, list(ALL_LABELS), EARLIER_C)
    inv = sorted(vocab, key=vocab.__getitem__)
    used = {
        lab: [(inv[j], round(float(w[j]), 4)) for j in np.flatnonzero(np.abs(w) >= EARLIER_PRUNE)]
        for lab, (w, _) in models.items()
    }
    feats = sorted({f for ws in used.values() for f, _ in ws})
    idx = {f: i for i, f in enumerate(feats)}
    labels = [lab for lab in ALL_LABELS if lab in models]
    return {
        "labels": labels,
        "intercepts": {lab: round(models[lab][1], 4) for lab in labels},
        "vocabulary": feats,
        "weights": {lab: [[idx[f], w] for f, w in used[lab]] for lab in labels},
    }


def _matrix(fs: Features, vocab: dict[str, int]) -> csr_matrix:
    from scipy.sparse import csr_matrix

    rows, cols, vals = [], [], []
    for i, f in enumerate(fs):
        for k, v in f.items():
            j = vocab.get(k)
            if j is not None:
                rows.append(i)
                cols.append(j)
                vals.append(v)
    return csr_matrix((vals, (rows, cols)), shape=(len(fs), len(vocab)), dtype=np.float64)


def _vocab(fs: Features, writers: Sequence[str] | None = None) -> dict[str, int]:
    df: dict[str, int] = {}
    by: dict[str, set[str]] = {}
    for i, f in enumerate(fs):
        for k in f:
            df[k] = df.get(k, 0) + 1
            if writers is not None:
                by.setdefault(k, set()).add(writers[i])
    need_w = min(MIN_WRITERS, len(set(writers))) if writers is not None else 1
    keep = sorted(
        k
        for k, n in df.items()
        if (n >= MIN_DF and (need_w <= 1 or len(by[k]) >= need_w))
        or k.split(":", 1)[0] in {"cue", "neg"}
    )
    return {k: i for i, k in enumerate(keep)}


ANY = "__any__"  # the gate: does the utterance enact any category at all?
GATE_LOSS = 0.05  # the gate may silence at most this share of labelled dev items (out of fold)


def _y(items: Sequence[Utterance], lab: str) -> np.ndarray:
    if lab == ANY:
        return np.array([bool(u.labels) for u in items], dtype=np.int64)
    return np.array([lab in (u.labels or []) for u in items], dtype=np.int64)


def _gate_threshold(p: np.ndarray, y: np.ndarray) -> float:
    """The highest threshold that silences at most GATE_LOSS of the labelled items."""
    pos = np.sort(p[y == 1])
    if not len(pos):
        return 0.0
    k = int(np.floor(GATE_LOSS * len(pos)))
    return float(np.floor(pos[k] * 1000) / 1000)


def _fit_weights(
    fs: Features,
    items: Sequence[Utterance],
    labels: Sequence[str],
    c: float = C_REG,
    copies: Copies | None = None,
) -> tuple[dict[str, int], LabelModels]:
    """(vocab, {label: (coef array, intercept)}) from logistic regressions.

    `fs`, `items`: the training utterances' features and the utterances; `labels`: the labels
    to fit; `c`: inverse regularisation; `copies`: their training copies' features (parallel
    to `fs`, `_copy_feats`), added as extra rows at COPY_WEIGHT with the item's labels. The
    vocabulary comes from the utterances alone."""
    from sklearn.linear_model import LogisticRegression

    vocab = _vocab(fs, [u.writer or "" for u in items])
    extra = [(f, u) for fc, u in zip(copies, items, strict=True) for f in fc] if copies else []
    X = _matrix([*fs, *(f for f, _ in extra)], vocab)
    rows = [*items, *(u for _, u in extra)]
    weight = np.concatenate([np.ones(len(fs)), np.full(len(extra), COPY_WEIGHT)]) if extra else None
    models: LabelModels = {}
    for lab in labels:
        y = _y(rows, lab)
        if y.sum() < MIN_SUPPORT or y.sum() == len(y):
            continue
        clf = LogisticRegression(
            C=c,
            class_weight="balanced",
            solver="liblinear",
            dual=True,  # n_features > n_samples: 10x faster than the primal, same optimum
            random_state=0,
            max_iter=1000,
        )
        keep = _own_cues_only(vocab, lab) if OWN_CUES_ONLY else None
        clf.fit(X if keep is None else X[:, keep], y, sample_weight=weight)
        w = clf.coef_[0]
        if keep is not None:
            w_full = np.zeros(len(vocab))
            w_full[keep] = w
            w = w_full
        models[lab] = (w, float(clf.intercept_[0]))
    return vocab, models


# Each label's model sees only its own category's lexicon cues (and those of the categories it
# rolls up into, for the separate labels), never another category's: otherwise it learns
# "another cue fired, so probably not me", which breaks utterances that enact two categories.
OWN_CUES_ONLY = True
_CUE_FAMILY = {
    "exclusionary_coalition": {"exclusionary_coalition", "rival_targeting", "coalition_formation"},
    "divide_and_conquer": {"divide_and_conquer", "rival_targeting"},
}


def _own_cues_only(vocab: dict[str, int], lab: str) -> np.ndarray:
    own = _CUE_FAMILY.get(lab, {lab})
    keep = []
    for f, j in vocab.items():
        kind, _, rest = f.partition(":")
        if kind in ("cue", "neg") and lab != ANY and rest.split("/", 1)[0] not in own:
            continue
        keep.append(j)
    return np.array(sorted(keep))


def _probs(
    vocab: dict[str, int], models: LabelModels, fs: Features, labels: Sequence[str]
) -> dict[str, np.ndarray]:
    X = _matrix(fs, vocab)
    out: dict[str, np.ndarray] = {}
    for lab in labels:
        if lab in models:
            w, b = models[lab]
            out[lab] = 1.0 / (1.0 + np.exp(-(X @ w + b)))
        else:
            out[lab] = np.zeros(len(fs))
    return out


MAX_FOLDS = 6  # with more writers than this, the inner folds hold several writers each


MAX_STYLE_FOLDS = 3  # the inner style folds hold three styles each (training time)


def _style_folds(items: Sequence[Utterance]) -> list[np.ndarray]:
    """Held-out masks by style (items without a style are never held out): the proxy for text
    written in a style no training item has. Styles are dealt to at most MAX_STYLE_FOLDS
    folds in sorted order, so each fold holds out several styles at once."""
    styles = sorted({u.style for u in items if u.style})
    if len(styles) < 2:
        return []
    k = min(len(styles), MAX_STYLE_FOLDS)
    fold_of = {st: i % k for i, st in enumerate(styles)}
    return [
        np.array([u.style is not None and fold_of[u.style] == j for u in items]) for j in range(k)
    ]


def _folds(items: Sequence[Utterance]) -> list[np.ndarray]:
    """Held-out masks: one writer each (at most MAX_FOLDS folds: writers are dealt to the folds
    in sorted order, so a dev file with many writers keeps training time bounded), or five
    hash folds when the file has a single writer."""
    writers = sorted({u.writer or "" for u in items})
    if len(writers) >= 2:
        k = min(len(writers), MAX_FOLDS)
        fold_of = {w: i % k for i, w in enumerate(writers)}
        return [np.array([fold_of[u.writer or ""] == j for u in items]) for j in range(k)]
    h = np.array([int(hashlib.sha256(u.id.encode()).hexdigest(), 16) % 5 for u in items])
    return [h == k for k in range(5)]


# each label's threshold maximises F-beta out of fold. mbb's choice: beta 1 (F1). Round 3
# tried 1.25, weighing recall above precision because text from other hands lost recall: on
# the 19 dev writers it kept macro-F1 (fast CV by writer 0.797 -> 0.798, by style 0.715 ->
# 0.722) and raised mean recall (0.778 -> 0.807), but its lower thresholds (coalition
# formation 0.75 -> 0.55, rival targeting 0.75 -> 0.50) read the scripted reciprocator's
# two-party exchange as a bloc against a rival, so the coalition measure's planted test found
# coalitions in runs without a coalition builder
THRESHOLD_BETA = 1.0


def _best_threshold(p: np.ndarray, y: np.ndarray) -> float:
    """The threshold of GRID with the best out-of-fold F-beta (THRESHOLD_BETA)."""
    best, best_f = 0.5, -1.0
    b2 = THRESHOLD_BETA**2
    for t in GRID:
        pred = p >= t
        tp = int((pred & (y == 1)).sum())
        f = (1 + b2) * tp / (int(pred.sum()) + b2 * int(y.sum())) if y.sum() else 0.0
        if f > best_f + 1e-12:  # ties keep the lower threshold: recall is what was missing
            best, best_f = t, f
    return best


def _oof_one(
    items: Sequence[Utterance],
    fs: Features,
    labels: Sequence[str],
    c: float,
    folds: Sequence[np.ndarray],
    copies: Copies | None = None,
) -> tuple[dict[str, np.ndarray], np.ndarray]:
    """Out-of-fold probabilities over the held-out items of `folds` and their indices (the
    training folds' copies train, a held-out item's copies never do)."""
    held = np.flatnonzero(np.any(folds, axis=0))
    pos = {int(i): k for k, i in enumerate(held)}
    oof = {lab: np.zeros(len(held)) for lab in labels}
    for test in folds:
        tr = [i for i in range(len(items)) if not test[i]]
        vocab, models = _fit_weights(
            [fs[i] for i in tr],
            [items[i] for i in tr],
            labels,
            c,
            [copies[i] for i in tr] if copies else None,
        )
        te = np.flatnonzero(test)
        pr = _probs(vocab, models, [fs[i] for i in te], labels)
        at = [pos[int(i)] for i in te]
        for lab in labels:
            oof[lab][at] = pr[lab]
    return oof, held


Pooled = tuple[dict[str, np.ndarray], np.ndarray]  # pooled OOF probabilities, item indices


def _oof(
    items: Sequence[Utterance],
    fs: Features,
    labels: Sequence[str],
    c: float,
    copies: Copies | None = None,
) -> Pooled:
    """Out-of-fold probabilities of models with inverse regularisation c, pooled over two
    schemes: folds by writer (every item once) and folds by style (every item with a style
    once more). Choosing thresholds on the pool weighs both: a threshold must hold for unseen
    writers and for unseen styles."""
    a, ia = _oof_one(items, fs, labels, c, _folds(items), copies)
    parts, idx = [a], [ia]
    sf = _style_folds(items)
    if sf:
        b, ib = _oof_one(items, fs, labels, c, sf, copies)
        parts.append(b)
        idx.append(ib)
    return {lab: np.concatenate([p[lab] for p in parts]) for lab in labels}, np.concatenate(idx)


def _f1_at_best(p: np.ndarray, y: np.ndarray) -> float:
    pred = p >= _best_threshold(p, y)
    return 2 * int((pred & (y == 1)).sum()) / (int(pred.sum()) + int(y.sum())) if y.sum() else 0.0


def _choose_c(
    items: Sequence[Utterance],
    fs: Features,
    labels: Sequence[str],
    grid: Sequence[float] = C_GRID,
    copies: Copies | None = None,
) -> tuple[float, Pooled]:
    """The C of `grid` whose pooled out-of-fold macro-F1 is best, and its probabilities."""
    best: tuple[float, float, Pooled] | None = None
    for c in grid:
        oof = _oof(items, fs, labels, c, copies)
        if len(grid) == 1:
            return c, oof
        p, idx = oof
        sub = [items[i] for i in idx]
        f = float(np.mean([_f1_at_best(p[lab], _y(sub, lab)) for lab in labels if lab != ANY]))
        print(f"C {c:g}: out-of-fold macro-F1 {f:.4f}", file=sys.stderr)
        if best is None or f > best[0] + 1e-9:  # ties keep the smaller C (listed first)
            best = (f, c, oof)
    assert best is not None, "C_GRID is empty"
    return best[1], best[2]


# the gate aims to leave at most NEUTRAL_TARGET of the neutral items labelled, out of fold with
# folds by writer (an unseen writer in the styles training has seen), silencing at most
# GATE_MAX_LOSS of the labelled items. The style folds do not set it: there a style no training
# item has labels up to a fifth of its near-miss neutral items and no gate within that loss
# reaches 5 % (on the 19 dev writers the pooled target of 3 % fell back to GATE_LOSS, a gate of
# 0.45, which labelled 7.4 % of neutral items by held-out writer; 5 % is the bound).
# Round 26 (mbb's choice): 4.5 %. With round 24's writers trained on, a 5 % gate (0.44) labelled
# more of the frozen splits' neutral items than the round-23 model (39 against 34 of 1,447);
# one training gave the gates for 5, 4.5, 4, 3.5 and 3 % (out of fold by writer: macro-F1
# 0.8777, 0.8767, 0.8756, 0.8730, 0.8696; gates 0.44, 0.51, 0.58, 0.68, 0.77), and over the
# twenty-five read splits 4.5 % alone kept both macro-F1 and the neutral count no worse (0.9036
# against 0.9032, 33 neutral items against 34). Split 26, read after that choice, is its blind
# check (0.966 against 0.957, none of 52 neutral items labelled against one). Round 30: a 3 %
# gate (0.77) would keep every read split within the 5 % bound, but pooled it clears 11
# neutral items by losing 105 of 6,939 gold labels (recall 0.871 -> 0.856), so 4.5 % stays
NEUTRAL_TARGET = 0.045
GATE_MAX_LOSS = 0.10
# a label at least this sure passes a gate that judged the utterance neutral (mbb's choice,
# round 12): otherwise the gate and the label's own model must agree, and out of fold the gate
# silenced labels their model was all but certain of (read alone most of all). The gate is then
# chosen with the override in place (`_neutral_gate`), so it rises to keep the neutral bound.
# Writer-grouped fast CV on the 48 round-11 dev writers (C 16, the shipped thresholds; the gate
# each override chooses on the pooled out-of-fold probabilities): no override, gate 0.70:
# macro-F1 0.844, 4.7 % of neutral items labelled, read alone 0.762; 0.99 (gate 0.76): 0.852,
# 4.8 %, 0.768; 0.98 (gate 0.86): 0.850, 4.8 %, 0.762; 0.97 and 0.95 meet no gate within
# GATE_MAX_LOSS (their own false alarms, 3.5 and 4.9 % of neutral items out of fold, leave
# the gate too little; 0.95 at gate 0.85: 0.856 but 6.8 %). None turns it off
GATE_OVERRIDE: float | None = 0.99


def _neutral_gate(
    p: dict[str, np.ndarray], sub: Sequence[Utterance], th: dict[str, float]
) -> float:
    """The lowest gate threshold at which, out of fold, at most NEUTRAL_TARGET of the neutral
    items would get a label (some label over its threshold and the gate passed, or the label
    over GATE_OVERRIDE) while at most GATE_MAX_LOSS of the labelled items are silenced (gate
    failed and no label over the override); GATE_LOSS's threshold when the target cannot be
    met within that loss."""
    y = _y(sub, ANY)
    g = p[ANY]
    any_lab = np.zeros(len(sub), dtype=bool)
    sure = np.zeros(len(sub), dtype=bool)  # some label passes the gate whatever it says
    for lab, t in th.items():
        if lab != ANY:
            any_lab |= p[lab] >= t
            if GATE_OVERRIDE is not None:
                sure |= p[lab] >= max(t, GATE_OVERRIDE)
    neutral, pos = y == 0, y == 1
    for t in np.round(np.arange(0.0, 0.951, 0.01), 2):
        passed = (g >= t) | sure
        fp = float(np.mean(any_lab[neutral] & passed[neutral])) if neutral.any() else 0.0
        lost = float(np.mean(~passed[pos])) if pos.any() else 0.0
        if lost > GATE_MAX_LOSS:
            break
        if fp <= NEUTRAL_TARGET:
            return float(t)
    return _gate_threshold(g, y)


def _thresholds(items: Sequence[Utterance], labels: Sequence[str], oof: Pooled) -> dict[str, float]:
    """Each label's threshold on the pooled out-of-fold probabilities (both schemes); the gate
    on the first scheme's part alone (folds by writer: every item once, first in the pool)."""
    p, idx = oof
    sub = [items[i] for i in idx]
    th = {lab: _best_threshold(p[lab], _y(sub, lab)) for lab in labels if lab != ANY}
    if ANY in labels:
        n = len(items)
        th[ANY] = _neutral_gate({lab: v[:n] for lab, v in p.items()}, sub[:n], th)
    return th


# labels given only when a lexicon cue of their own fired. Round 1 required one for metagaming
# and rival targeting (their n-grams, "test", "W3", overlap ordinary negotiation); with the
# second round's writers, who enact categories without their usual words, the requirement costs
# more than it saves (fast writer-grouped CV on the 14 dev writers: macro-F1 0.774 -> 0.778,
# style-grouped 0.706 -> 0.711), so no label requires a cue now
CUE_REQUIRED: tuple[str, ...] = ()
TRUST_PRECISION = 0.9  # a cue that is right this often on the dev items labels on its own
TRUST_MIN_HITS = 5


def _trusted_cues(items: Sequence[Utterance]) -> list[str]:
    """Cues precise enough on `items` to label without the model (its n-grams can outvote a
    cue when several categories co-occur in one short text)."""
    from mbb.analysis.lexicon import cue_hits

    hits: dict[tuple[str, str], list[bool]] = {}
    for u in items:
        for h in cue_hits(u.text, u.source):
            if not h.negated:
                hits.setdefault((h.category, h.name), []).append(h.category in (u.labels or []))
    return sorted(
        f"{c}/{n}"
        for (c, n), v in hits.items()
        if len(v) >= TRUST_MIN_HITS and sum(v) / len(v) >= TRUST_PRECISION
    )


def fit(
    items: Sequence[Utterance],
    *,
    source_name: str = "",
    source_sha: str = "",
    feats: Features | None = None,
    copies: Copies | None = None,
    earlier: dict[str, Any] | None = None,
    c_grid: Sequence[float] = C_GRID,
    excluded: Sequence[str] = (),
) -> dict[str, Any]:
    """The model spec (JSON-able) trained on `items`.

    `source_name`, `source_sha`: the dev file's name and hash, recorded in the spec;
    `excluded`: the dev file's writers left out of `items` (recorded in the spec); `feats`,
    `copies`: the items' features and their training copies' (`_copy_feats`) if already
    computed, with `earlier` (the earlier-line model they were computed with, or None for
    none); without `feats`, the earlier-line model is trained on `items` and both are computed;
    `c_grid`: the candidate C, chosen by pooled out-of-fold macro-F1. The earlier-line model
    is trained once on all of `items`, so the inner out-of-fold probabilities that choose C
    and the thresholds read earlier lines through a model that saw the other folds' text
    (never their labels of those lines: earlier lines carry none)."""
    labels = [*ALL_LABELS, ANY]
    if feats is None:
        if earlier is None:
            earlier = fit_earlier(items)
        feats = _feats(items, earlier)
        copies = _copy_feats(items, earlier)
    c, oof = _choose_c(items, feats, labels, c_grid, copies)
    thresholds = _thresholds(items, labels, oof)
    vocab, models = _fit_weights(feats, items, labels, c, copies)
    return _spec(items, vocab, models, thresholds, c, source_name, source_sha, earlier, excluded)


def _rivals(items: Sequence[Utterance]) -> list[list[str]]:
    """Pairs of categories (each with at least MIN_SUPPORT positives) that share fewer than
    RIVAL_SHARE of the smaller category's positives."""
    pos: dict[str, set[int]] = {lab: set() for lab in ALL_LABELS}
    for i, u in enumerate(items):
        for lab in u.labels or []:
            if lab in pos:
                pos[lab].add(i)
    cats = [lab for lab in ALL_LABELS if len(pos[lab]) >= MIN_SUPPORT]
    return [
        [a, b]
        for k, a in enumerate(cats)
        for b in cats[k + 1 :]
        if len(pos[a] & pos[b]) < RIVAL_SHARE * min(len(pos[a]), len(pos[b]))
    ]


def _spec(
    items: Sequence[Utterance],
    vocab: dict[str, int],
    models: LabelModels,
    thresholds: dict[str, float],
    c: float,
    source_name: str = "",
    source_sha: str = "",
    earlier: dict[str, Any] | None = None,
    excluded: Sequence[str] = (),
) -> dict[str, Any]:
    labels = [*ALL_LABELS, ANY]
    inv = sorted(vocab, key=vocab.__getitem__)  # feature names by column
    used: dict[str, list[tuple[str, float]]] = {}
    for lab, (w, _) in models.items():
        nz = np.flatnonzero(np.abs(w) >= PRUNE)
        used[lab] = [(inv[j], round(float(w[j]), 4)) for j in nz]
    feats = sorted({f for ws in used.values() for f, _ in ws})
    idx = {f: i for i, f in enumerate(feats)}
    return {
        "format": "mbb-taxonomy-linear-v1",
        "trained_on": {
            "file": source_name,
            "sha256": source_sha,
            "items": len(items),
            "writers": sorted({u.writer or "" for u in items}),
            **({"excluded_writers": sorted(excluded)} if excluded else {}),
        },
        "hyperparameters": {
            "C": c,
            "min_df": MIN_DF,
            "min_writers": MIN_WRITERS,
            "min_support": MIN_SUPPORT,
            "trust_precision": TRUST_PRECISION,
            "trust_min_hits": TRUST_MIN_HITS,
        },
        "model_only_margin": MODEL_ONLY_MARGIN,
        "cued_discount": CUED_DISCOUNT,
        **({"gate_override": GATE_OVERRIDE} if GATE_OVERRIDE is not None else {}),
        "trusted_cues": _trusted_cues(items),
        "cue_required": list(CUE_REQUIRED),
        "rivals": _rivals(items),
        "rival_margin": RIVAL_MARGIN,
        "labels": [lab for lab in labels if lab in models],
        "thresholds": {lab: thresholds[lab] for lab in labels if lab in models},
        "intercepts": {lab: round(models[lab][1], 4) for lab in labels if lab in models},
        "vocabulary": feats,
        "weights": {lab: [[idx[f], w] for f, w in used[lab]] for lab in labels if lab in models},
        **({"earlier_model": earlier} if earlier else {}),
    }


def dumps(spec: dict[str, Any]) -> str:
    return json.dumps(spec, sort_keys=True, separators=(",", ":"), ensure_ascii=False) + "\n"


def score_items(
    gold: Sequence[Utterance],
    pred: Sequence[Sequence[str]],
    categories: Sequence[str] = CATEGORY_NAMES,
) -> dict[str, Any]:
    """Per-category P/R/F1 in the 21-category view (labels rolled up), macro-F1 over the
    categories with support, and the share of neutral items given any label."""
    per: dict[str, dict[str, Any]] = {}
    g = [set(roll_up(u.labels or [])) for u in gold]
    p = [set(roll_up([x for x in ps if x in ALL_LABELS])) for ps in pred]
    for c in categories:
        tp = sum(c in a and c in b for a, b in zip(g, p, strict=True))
        sup = sum(c in a for a in g)
        npred = sum(c in b for b in p)
        prec = tp / npred if npred else 0.0
        rec = tp / sup if sup else None
        f1 = (2 * tp / (sup + npred)) if sup else None
        per[c] = {"support": sup, "predicted": npred, "precision": prec, "recall": rec, "f1": f1}
    f1s = [v["f1"] for v in per.values() if v["f1"] is not None]
    neutral = [i for i, u in enumerate(gold) if not u.labels]
    fp_neutral = sum(bool(pred[i]) for i in neutral)
    return {
        "per_category": per,
        "macro_f1": float(np.mean(f1s)) if f1s else None,
        "neutral_items": len(neutral),
        "neutral_labelled": fp_neutral / len(neutral) if neutral else None,
    }


def _predict(model: TextModel, items: Sequence[Utterance]) -> list[list[str]]:
    return [
        [x.category for x in model.predict(u.text, u.channel, u.context.model_dump())]
        for u in items
    ]


def _groups(items: Sequence[Utterance], by: str) -> list[str]:
    if by not in ("writer", "style"):
        raise ValueError(f"by must be 'writer' or 'style', got {by!r}")
    return sorted({getattr(u, by) or "" for u in items} - {""})


def grouped_cv(
    items: Sequence[Utterance],
    by: str = "writer",
    *,
    fast: bool = False,
    c_grid: Sequence[float] = C_GRID,
) -> dict[str, Any]:
    """Cross-validation holding out one writer (`by="writer"`) or one style (`by="style"`;
    items without a style always train) at a time.

    Nested (default): each training set goes through `fit` (C from `c_grid` and thresholds by
    its own inner writer- and style-grouped CV), so nothing is chosen on the held-out group
    (pass a one-element `c_grid` to fix C, e.g. at the value chosen on the whole file, and
    save the time of choosing it again per fold).
    `fast=True`: one fit per fold at the first C of C_GRID, with thresholds chosen on the
    pooled out-of-fold probabilities of both schemes over all of `items` — optimistic, for
    comparing feature sets quickly, never for reporting.

    Returns {"folds": {group: score_items of that group}, "pooled": score_items over all
    held-out items, "recall_by_style": {style: (found, positives)}, "predictions":
    {item id: labels}}."""
    groups = _groups(items, by)
    pred: dict[str, list[str]] = {}
    folds: dict[str, dict[str, Any]] = {}
    labels = [*ALL_LABELS, ANY]
    earlier_all: dict[str, Any] | None = None
    thresholds: dict[str, float] = {}
    fs: Features = []
    copies: Copies = []
    if fast:
        earlier_all = fit_earlier(items)
        fs = _feats(items, earlier_all)
        copies = _copy_feats(items, earlier_all)
        thresholds = _thresholds(items, labels, _oof(items, fs, labels, C_GRID[0], copies))
    for g in groups:
        tr = [i for i, u in enumerate(items) if (getattr(u, by) or "") != g]
        te = [i for i, u in enumerate(items) if (getattr(u, by) or "") == g]
        train = [items[i] for i in tr]
        if fast:
            vocab, models = _fit_weights(
                [fs[i] for i in tr], train, labels, C_GRID[0], [copies[i] for i in tr]
            )
            spec = _spec(train, vocab, models, thresholds, C_GRID[0], earlier=earlier_all)
        else:  # the earlier-line model too is trained without the held-out group
            spec = fit(train, c_grid=c_grid)
        test = [items[i] for i in te]
        p = _predict(TextModel(spec), test)
        folds[g] = score_items(test, p)
        pred.update({u.id: labs for u, labs in zip(test, p, strict=True)})
    held = [u for u in items if u.id in pred]
    pooled = score_items(held, [pred[u.id] for u in held])
    rec: dict[str, tuple[int, int]] = {}
    for u in held:
        if not u.style:
            continue
        want = set(roll_up(u.labels or []))
        got = set(roll_up([x for x in pred[u.id] if x in ALL_LABELS]))
        f, n = rec.get(u.style, (0, 0))
        rec[u.style] = (f + len(want & got), n + len(want))
    return {"folds": folds, "pooled": pooled, "recall_by_style": rec, "predictions": pred}


def writer_cv(items: Sequence[Utterance]) -> dict[str, dict[str, Any]]:
    """Train on every writer but one (nested selection), test on the held-out one."""
    return grouped_cv(items, "writer")["folds"]


def _cv_table(cv: dict[str, dict[str, Any]]) -> str:
    """Per-category F1 by held-out group (writer or style), with the mean over groups with
    support."""
    ws = list(cv)
    wd = [max(7, len(w) + 1) for w in ws]
    head = (
        f"{'category':<28}"
        + "".join(f"{w:>{d}}" for w, d in zip(ws, wd, strict=True))
        + f"{'mean':>7}"
    )
    lines = [head]
    for c in CATEGORY_NAMES:
        fs = [cv[w]["per_category"][c]["f1"] for w in ws]
        have = [f for f in fs if f is not None]
        cells = "".join(
            f"{'-':>{d}}" if f is None else f"{f:{d}.2f}" for f, d in zip(fs, wd, strict=True)
        )
        lines.append(f"{c:<28}{cells}{np.mean(have) if have else float('nan'):7.2f}")
    macro = [cv[w]["macro_f1"] or 0.0 for w in ws]
    row = "".join(f"{m:{d}.3f}" for m, d in zip(macro, wd, strict=True))
    lines.append(f"{'macro-F1':<28}{row}{np.mean(macro):7.3f}")
    neut = [cv[w]["neutral_labelled"] or 0.0 for w in ws]
    lines.append(
        f"{'neutral labelled':<28}" + "".join(f"{n:{d}.1%}" for n, d in zip(neut, wd, strict=True))
    )
    return "\n".join(lines)


def main(argv: Sequence[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m mbb.analysis.train_taxonomy")
    ap.add_argument("dev_file", nargs="?", metavar="DEV", help="dev gold file (same as --dev)")
    ap.add_argument(
        "--dev", default=None, help=f"dev gold file (JSONL; default {DEFAULT_DEV.name} of gold/)"
    )
    ap.add_argument("--out", default=str(MODEL_PATH), help="model file to write")
    ap.add_argument("--cv", action="store_true", help="print cross-validation by writer")
    ap.add_argument(
        "--exclude-writers",
        default=None,
        metavar="W1,W2",
        help="dev writers left out of training, comma-separated, each one the file must have "
        f"(default: those of EXCLUDED_WRITERS, {','.join(EXCLUDED_WRITERS) or 'none'}, that the "
        "file has; give '' for none)",
    )
    args = ap.parse_args(argv)
    if args.dev_file and args.dev and Path(args.dev_file) != Path(args.dev):
        ap.error("give the dev file once (DEV or --dev)")
    args.dev = args.dev or args.dev_file or str(DEFAULT_DEV)
    try:
        items = read_utterances(args.dev, require_labels=True)
    except CorpusError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    writers = {u.writer or "" for u in items}
    if args.exclude_writers is None:  # mbb's own list: only the writers this file has
        excluded = sorted(set(EXCLUDED_WRITERS) & writers)
    else:
        excluded = sorted({w.strip() for w in args.exclude_writers.split(",") if w.strip()})
        unknown = sorted(set(excluded) - writers)
        if unknown:
            print(
                f"error: --exclude-writers names no writer of {args.dev}: {unknown}",
                file=sys.stderr,
            )
            return 2
    if excluded:
        print(f"leaving out dev writers {', '.join(excluded)} (recorded in the model file)")
    items = [u for u in items if (u.writer or "") not in excluded]
    raw = Path(args.dev).read_bytes()
    spec = fit(
        items,
        source_name=Path(args.dev).name,
        source_sha=hashlib.sha256(raw).hexdigest(),
        excluded=excluded,
    )
    text = dumps(spec)
    Path(args.out).write_text(text, encoding="utf-8")
    print(
        f"{len(items)} items, {len(spec['labels'])} labels, {len(spec['vocabulary'])} features "
        f"-> {args.out} ({len(text.encode()) / 1e6:.2f} MB)"
    )
    if args.cv:
        c = float(spec["hyperparameters"]["C"])
        print(f"nested cross-validation (C fixed at {c}, chosen on the whole file; thresholds")
        print("and gate chosen again inside every training set):")
        for by in ("writer", "style"):
            res = grouped_cv(items, by, c_grid=(c,))
            if not res["folds"]:
                continue
            for w, r in res["folds"].items():
                worst = sorted(
                    (v["f1"], c) for c, v in r["per_category"].items() if v["f1"] is not None
                )[:4]
                print(
                    f"held-out {by} {w}: macro-F1 {r['macro_f1']:.3f}, neutral labelled "
                    f"{r['neutral_labelled'] or 0:.1%} of {r['neutral_items']}; worst: "
                    + ", ".join(f"{c} {f:.2f}" for f, c in worst)
                )
            print(_cv_table(res["folds"]))
            p = res["pooled"]
            print(
                f"pooled over the held-out {by}s: macro-F1 {p['macro_f1']:.3f}, neutral "
                f"labelled {p['neutral_labelled'] or 0:.1%} of {p['neutral_items']}"
            )
            rec = res["recall_by_style"]
            if rec:
                print(
                    "recall by style: "
                    + ", ".join(f"{st} {a / n:.2f} ({a}/{n})" for st, (a, n) in sorted(rec.items()))
                )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
