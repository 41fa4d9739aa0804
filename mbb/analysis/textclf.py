"""The text classifier: lexicon cues + context facts + word/character n-grams, one linear
(logistic) model per label, shipped as auditable JSON (`taxonomy_model.json`).

Features of one utterance (`features`):
- `w:` word unigrams and `b:` bigrams of the lower-cased text, numbers as `<n>`, agent names
  (W1..W9) as `<w>`;
- `c:` character 4-grams within words (robust to spelling and morphology: "renegotiat");
- `cue:` / `neg:` hits of the lexicon (`mbb.analysis.lexicon`), plain or negated;
- `ch:` the channel; `ctx:` facts from the optional context: whether a ballot's ranking equals
  the bid order, the shortest-duration order, the disclosed-deadline order, the arrival order or
  the previous schedule; whether the speaker ranks itself below its bid position; whether the
  utterance answers a message or refers to earlier lines, and whether an earlier line proposed a
  standing rule.

Scores are sum(w * x) + b over the l2-normalised n-gram block plus the binary cue/context
block; a label is given when its logistic probability reaches its threshold (chosen by
cross-validation by writer in `mbb.analysis.train_taxonomy`). Each label's evidence is its top
contributing features with their weights, so a reader can see what fired. Inference needs only
the JSON file and numpy-free Python; scikit-learn is used by the training script.
"""

from __future__ import annotations

import itertools
import json
import math
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from functools import cache
from pathlib import Path
from typing import Any

from mbb.analysis.lexicon import cue_hits

__all__ = [
    "MODEL_PATH",
    "TextModel",
    "context_facts",
    "features",
    "load_model",
]

ANY = "__any__"  # the gate label: does the utterance enact any category?
# n-gram features are scaled down relative to the binary cue/context features: under the same
# L2 penalty this regularises the n-grams harder, so the model leans on the paraphrase cues
# (which carry across writers) and uses n-grams to correct them, not to memorise a style.
NGRAM_SCALE = 1.0
MODEL_PATH = Path(__file__).with_name("taxonomy_model.json")
_TOKEN = re.compile(r"\bw\d\b|[a-z]+(?:'[a-z]+)?|\d+(?:\.\d+)?|[?!]")
_AGENT = re.compile(r"^w\d$")
_RULE_PROPOSAL = re.compile(
    r"from now on|going forward|from here on|standing rule|every (?:round|subrun)|in future"
    r"|rule:|let'?s (?:always|alternate|rotate)|\b(?:alternat|rotat)\w+|whoever|\bcap\b",
    re.I,
)


def _tokens(text: str) -> list[str]:
    out = []
    for t in _TOKEN.findall(text.lower()):
        if t[0].isdigit():
            out.append("<n>")
        elif _AGENT.match(t):
            out.append("<w>")
        else:
            out.append(t)
    return out


def _order(values: Mapping[str, float], ranked: Sequence[str], reverse: bool) -> list[str] | None:
    """`ranked` restricted to those with a value, re-sorted by value (stable on the ranking)."""
    have = [w for w in ranked if w in values]
    if len(have) < 2 or len({values[w] for w in have}) < 2:
        return None
    return sorted(have, key=lambda w: -values[w] if reverse else values[w])


def context_facts(channel: str, ctx: Mapping[str, Any] | None) -> list[str]:
    """Structural facts from an utterance's context (the names of `ctx:` features)."""
    if not ctx:
        return []
    out = []
    rk = ctx.get("ranking") or []
    if rk:
        out.append("ctx:has_ranking")
        for key, name, rev in (
            ("bids", "rank=bid_order", True),
            ("durations", "rank=shortest_first", False),
            ("deadlines_disclosed", "rank=deadline_order", False),
        ):
            vals = ctx.get(key) or {}
            o = _order(vals, rk, rev)
            if o is not None:
                have = [w for w in rk if w in vals]
                out.append(f"ctx:{name}" if have == o else f"ctx:not_{name}")
        arr = ctx.get("arrival") or []
        if len(arr) >= 2:
            have = [w for w in rk if w in arr]
            out.append(
                "ctx:rank=arrival" if have == [w for w in arr if w in have] else "ctx:not_arrival"
            )
        prev = ctx.get("previous_schedule") or []
        if len(prev) >= 2:
            same = [w for w in rk if w in prev] == [w for w in prev if w in rk]
            out.append("ctx:rank=previous" if same else "ctx:rank!=previous")
        sp = ctx.get("speaker")
        bids = ctx.get("bids") or {}
        if sp in rk:
            if rk[-1] == sp:
                out.append("ctx:self_last")
            if rk[0] == sp:
                out.append("ctx:self_first")
            o = _order(bids, rk, True)
            if o is not None and sp in o and rk.index(sp) > o.index(sp):
                out.append("ctx:self_below_bid")
        elif sp:
            out.append("ctx:self_absent")
    if ctx.get("in_reply_to"):
        out.append("ctx:replies")
    earlier = ctx.get("earlier") or []
    if earlier:
        out.append("ctx:earlier")
        if any(_RULE_PROPOSAL.search(e) for e in earlier):
            out.append("ctx:earlier_rule")
    if ctx.get("deadlines_disclosed"):
        out.append("ctx:deadlines")
    return out


def features(text: str, channel: str, ctx: Mapping[str, Any] | None = None) -> dict[str, float]:
    """Feature name -> value for one utterance (see the module docstring)."""
    toks = _tokens(text)
    grams: dict[str, float] = {}
    for t in toks:
        grams[f"w:{t}"] = 1.0
    for a, b in itertools.pairwise(toks):
        grams[f"b:{a} {b}"] = 1.0
    for t in toks:
        if len(t) >= 4:
            p = f"<{t}>"
            for i in range(len(p) - 3):
                grams[f"c:{p[i : i + 4]}"] = 1.0
    norm = (math.sqrt(len(grams)) or 1.0) / NGRAM_SCALE
    f = {k: v / norm for k, v in grams.items()}
    src = {"note": "declaration", "ballot": "ballot"}.get(channel, "message")
    for h in cue_hits(text, src):
        f[f"{'neg' if h.negated else 'cue'}:{h.category}/{h.name}"] = 1.0
    f[f"ch:{channel}"] = 1.0
    for name in context_facts(channel, ctx):
        f[name] = 1.0
    return f


@dataclass(frozen=True, slots=True)
class Label:
    category: str
    probability: float
    evidence: str  # top contributing features, or the cue that matched


class TextModel:
    """A trained model loaded from JSON: labels, thresholds, per-label sparse weights."""

    def __init__(self, spec: Mapping[str, Any]) -> None:
        self.spec = spec
        self.labels: list[str] = list(spec["labels"])
        self.thresholds: dict[str, float] = dict(spec["thresholds"])
        self.intercepts: dict[str, float] = dict(spec["intercepts"])
        vocab = spec["vocabulary"]
        self.weights: dict[str, dict[str, float]] = {
            lab: {vocab[i]: w for i, w in spec["weights"][lab]} for lab in self.labels
        }
        by_feat: dict[str, list[tuple[str, float]]] = {}
        for lab, ws in self.weights.items():
            for feat, w in ws.items():
                by_feat.setdefault(feat, []).append((lab, w))
        self._by_feat = by_feat

    def scores(self, feats: Mapping[str, float]) -> dict[str, float]:
        """Logistic probability per label."""
        z = dict(self.intercepts)
        for feat, x in feats.items():
            for lab, w in self._by_feat.get(feat, ()):
                z[lab] += w * x
        return {lab: 1.0 / (1.0 + math.exp(-max(min(v, 30.0), -30.0))) for lab, v in z.items()}

    def explain(self, feats: Mapping[str, float], label: str, k: int = 3) -> str:
        ws = self.weights[label]
        contrib = sorted(
            ((ws[f] * x, f) for f, x in feats.items() if f in ws and ws[f] * x > 0),
            key=lambda t: (-t[0], t[1]),
        )[:k]
        return ", ".join(f"{_show(f)} {c:+.2f}" for c, f in contrib)

    def predict(
        self,
        text: str,
        channel: str,
        ctx: Mapping[str, Any] | None = None,
        *,
        threshold_shift: float = 0.0,
        model_only_margin: float | None = None,
        cued_discount: float | None = None,
    ) -> list[Label]:
        """Labels (all 24 names) with evidence: the lexicon span when a cue of that category
        fired un-negated, plus the model's top contributing features and its probability."""
        feats = features(text, channel, ctx)
        probs = self.scores(feats)
        src = {"note": "declaration", "ballot": "ballot"}.get(channel, "message")
        spans: dict[str, str] = {}
        trusted = set(self.spec.get("trusted_cues", ()))
        required = set(self.spec.get("cue_required", ()))
        sure: dict[str, str] = {}
        for h in cue_hits(text, src):
            if not h.negated:
                spans.setdefault(h.category, f'{h.name}: "{h.match}"')
                if f"{h.category}/{h.name}" in trusted:
                    sure.setdefault(h.category, f'{h.name}: "{h.match}"')
        gate = probs.get(ANY)
        if gate is not None and gate < self.thresholds[ANY] + threshold_shift:
            return []  # the gate judges the utterance neutral
        out = []
        for lab in self.labels:
            if lab == ANY:
                continue
            if lab in required and lab not in spans:
                continue
            p = probs[lab]
            need = self.thresholds[lab] + threshold_shift
            if lab not in spans:  # no cue of this category: the n-grams alone must be surer
                m = self.spec.get("model_only_margin", 0.0)
                need += m if model_only_margin is None else model_only_margin
            else:  # a cue of this category fired: the model need not be as sure
                need -= (
                    self.spec.get("cued_discount", 0.0)
                    if cued_discount is None
                    else (cued_discount)
                )
            if p >= need:
                ev = f"model p={p:.2f}: {self.explain(feats, lab)}"
                if lab in spans:
                    ev = f"{spans[lab]}; {ev}"
                out.append(Label(lab, round(p, 4), ev))
            elif lab in sure:  # a cue precise on the dev corpus labels even when outvoted
                ev = f"{sure[lab]}; trusted cue (model p={p:.2f})"
                out.append(Label(lab, round(p, 4), ev))
        return out


def _show(feat: str) -> str:
    kind, _, val = feat.partition(":")
    return {
        "w": f'word "{val}"',
        "b": f'phrase "{val}"',
        "c": f'chars "{val}"',
        "cue": f"cue [{val}]",
        "neg": f"negated cue [{val}]",
        "ch": f"channel {val}",
        "ctx": f"context {val}",
    }.get(kind, feat)


@cache
def _load(path: str) -> TextModel:
    return TextModel(json.loads(Path(path).read_text(encoding="utf-8")))


def load_model(path: str | Path | None = None) -> TextModel:
    """The shipped model (or another trained file); cached per path."""
    return _load(str(Path(path) if path else MODEL_PATH))


def predict_many(
    model: TextModel, items: Iterable[tuple[str, str, Mapping[str, Any] | None]]
) -> list[list[Label]]:
    return [model.predict(t, ch, ctx) for t, ch, ctx in items]
