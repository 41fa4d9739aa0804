"""`mbb classify` and `mbb validate-classifier`: the taxonomy classifiers on utterance files
(the corpus format of `mbb.analysis.corpus`), for transcripts mbb did not produce.

Their arguments are declared in `mbb.cli.classify` (parsing must not import the analyses); this
module, imported only when one of them runs, does the work.

    mbb classify UTTERANCES.jsonl [--classifier evidence|llm] [--out FILE]
    mbb validate-classifier [GOLD.jsonl ...] [--frozen] [--classifier evidence|llm] [--boot 1000]

LLM options (both commands): --base-url http://127.0.0.1:PORT/v1 --model smollm2
--structured json_object_schema [--api-key-env NAME] [--cache FILE] [--batch-size N].

`validate-classifier --frozen` scores every frozen test split (`gold/test.jsonl`, writers B
and F, and the later ones `mbb.analysis.agreement.TEST_SPLITS` names with their writers). With
`--classifier llm` each split gets four reports: the LLM's table, the evidence classifier's,
their agreement per category (Cohen's kappa), and the combined classifier's (`combine`: the
evidence classifier decides where it is sure, the LLM where it is not).
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import polars as pl

from mbb.analysis.corpus import CorpusError, Utterance, read_utterances
from mbb.core.taxonomy import roll_up

__all__ = [
    "COMBINE_BAND",
    "LlmLabels",
    "classify_items",
    "cmd_classify",
    "cmd_validate",
    "combine",
    "evidence_decisions",
    "kappa_by_category",
]

# The combined classifier asks the LLM about a category when the evidence classifier's margin
# (probability minus what the label needed) is within this band of zero. Fixed before any LLM
# was scored on a frozen split, not tuned on them.
COMBINE_BAND = 0.15


def _evidence(items: Sequence[Utterance], model_path: str | None) -> list[list[dict[str, Any]]]:
    from mbb.analysis.gold_eval import evidence_labels

    return evidence_labels(items, model_path)


class LlmLabels(list[list[dict[str, Any]]]):
    """The LLM classifier's labels per item, plus `missing`: the indices of the items its
    replies left out (scored as unlabelled, but the combined classifier does not read them as
    the LLM saying no)."""

    def __init__(self, rows: Any = ()) -> None:
        super().__init__(rows)
        self.missing: set[int] = set()


def _llm(items: Sequence[Utterance], args: argparse.Namespace | None) -> tuple[LlmLabels, Any]:
    from pydantic import ValidationError

    from mbb.analysis.llm_classifier import LLMClassifier, llm_layer_complete_json
    from mbb.llm.client import LlmClient
    from mbb.llm.config import ModelConfig

    if args is None or not args.model:
        raise CorpusError("--classifier llm needs --model (and --base-url for a local server)")
    try:
        config = ModelConfig(
            model=args.model,
            base_url=args.base_url,
            api_key_env=args.api_key_env or None,
            structured=args.structured,
            temperature=0.0,
            max_tokens=args.max_tokens,
            max_retries=args.retries,
            timeout_s=args.timeout,
        )
        clf = LLMClassifier(
            llm_layer_complete_json(LlmClient(), config),
            model=args.model,
            batch_size=args.batch_size,
            concurrency=args.concurrency,
            cache=args.cache,
        )
    except ValidationError as exc:  # the option's own message (a key is never echoed)
        err = exc.errors()[0]
        where = ".".join(str(x) for x in err["loc"]) or "options"
        raise CorpusError(f"llm classifier: {where}: {err['msg']}") from None
    except (ValueError, OSError) as exc:  # a bad --batch-size/--concurrency, a damaged --cache
        raise CorpusError(f"llm classifier: {' '.join(str(exc).split())}") from None
    table = pl.DataFrame(
        {
            "run_id": ["file"] * len(items),
            "seq": list(range(len(items))),
            "subrun": [u.context.subrun or 0 for u in items],
            "round": [u.context.round or 0 for u in items],
            "worker": [u.context.speaker or "" for u in items],
            "source": [u.source for u in items],
            "text": [u.text for u in items],
            "context": [
                json.dumps({"channel": u.channel, **u.context.model_dump(exclude_none=True)})
                for u in items
            ],
        }
    )
    res = clf.classify_sync(table)
    out = LlmLabels([] for _ in items)
    for seq, cat, quote, ok in res.select(
        "seq", "category", "evidence", "quote_in_text"
    ).iter_rows():
        out[seq].append({"category": cat, "evidence": f'quote: "{quote}"', "quote_in_text": ok})
    # items the model never answered for (not cached: "missing from reply") are not "no label"
    from mbb.analysis.llm_classifier import _ctx_str, _key

    rows = table.select("source", "text", "context").rows()
    keys = [_key(s, t, _ctx_str(c), clf.model) for s, t, c in rows]
    out.missing = {i for i, k in enumerate(keys) if k not in clf.cache}
    return out, clf


def classify_items(
    items: Sequence[Utterance], classifier: str = "evidence", args: argparse.Namespace | None = None
) -> list[list[dict[str, Any]]]:
    """Per item, its labels with evidence (all 24 names; the 21-category view is `roll_up`)."""
    if classifier == "evidence":
        return _evidence(items, getattr(args, "model_file", None))
    out, clf = _llm(items, args)
    kinds: dict[str, int] = {}
    for p in clf.problems:
        kinds[p["problem"]] = kinds.get(p["problem"], 0) + 1
    for problem, n in sorted(kinds.items(), key=lambda kv: -kv[1]):
        print(f"warning: llm classifier: {n} x {problem}", file=sys.stderr)
    if out.missing:
        print(
            f"warning: llm classifier: {len(out.missing)} of {len(items)} item(s) unanswered "
            "(a failed or malformed reply; not 'no label', asked again next time)",
            file=sys.stderr,
        )
    if items and len(out.missing) == len(items):
        raise CorpusError(
            f"llm classifier: no item answered ({len(items)} asked): "
            + (next(iter(kinds)) if kinds else "no usable reply")
        )
    return out


def evidence_decisions(
    items: Sequence[Utterance], model_path: str | None = None
) -> list[tuple[list[dict[str, Any]], dict[str, float]]]:
    """Per item: the evidence classifier's labels (with evidence) and its margin per label."""
    from mbb.analysis.textclf import load_model

    model = load_model(model_path)
    out = []
    for u in items:
        labs, margins = model.decide(u.text, u.channel, u.context.model_dump(exclude_none=True))
        out.append(
            (
                [
                    {"category": x.category, "probability": x.probability, "evidence": x.evidence}
                    for x in labs
                ],
                margins,
            )
        )
    return out


def combine(
    evidence: Sequence[tuple[list[dict[str, Any]], dict[str, float]]],
    llm: Sequence[Sequence[dict[str, Any]]],
    band: float = COMBINE_BAND,
) -> list[list[dict[str, Any]]]:
    """The combined classifier: per item and label, the evidence classifier's decision where
    its margin is at least `band` from zero (labelled, or not), the LLM's where it is nearer
    (the evidence classifier is unsure there). Items the LLM never answered for (`missing` of
    `LlmLabels`) keep the evidence classifier's labels. Each label says who decided and why."""
    missing: set[int] = getattr(llm, "missing", set())
    out: list[list[dict[str, Any]]] = []
    for i, ((ev, margins), lm) in enumerate(zip(evidence, llm, strict=True)):
        given = {x["category"]: x for x in ev}
        said = {x["category"]: x for x in lm}
        labs = []
        if i in missing:
            out.append([{**x, "decided_by": "evidence (no LLM answer)"} for x in ev])
            continue
        for cat in sorted(set(margins) | set(given) | set(said)):
            m = margins.get(cat, -1.0)
            if cat in given and m >= band:
                labs.append({**given[cat], "decided_by": "evidence"})
            elif abs(m) < band and cat in said:
                labs.append(
                    {
                        "category": cat,
                        "evidence": f"LLM (evidence margin {m:+.2f}): {said[cat]['evidence']}",
                        "decided_by": "llm",
                    }
                )
        out.append(labs)
    return out


def kappa_by_category(
    a: Sequence[Sequence[str]], b: Sequence[Sequence[str]]
) -> dict[str, float | None]:
    """Cohen's kappa per category of the 21 (labels rolled up) between two classifiers'
    labels on the same items, plus `pooled` over every item x category decision."""
    import numpy as np

    from mbb.analysis.validation import cohen_kappa
    from mbb.core.taxonomy import CATEGORY_NAMES

    ra = [set(roll_up(x)) for x in a]
    rb = [set(roll_up(x)) for x in b]
    out: dict[str, float | None] = {}
    va_all, vb_all = [], []
    for c in CATEGORY_NAMES:
        va = np.array([c in x for x in ra])
        vb = np.array([c in x for x in rb])
        va_all.append(va)
        vb_all.append(vb)
        out[c] = cohen_kappa(va, vb)
    out["pooled"] = cohen_kappa(np.concatenate(va_all), np.concatenate(vb_all))
    return out


def _read(path: str, *, gold: bool) -> list[Utterance]:
    return read_utterances(path, require_labels=gold)


def _labels(items: Sequence[Utterance], args: argparse.Namespace) -> list[list[dict[str, Any]]]:
    from mbb.core.errors import EndpointDown
    from mbb.llm.client import LlmConfigError, LlmUnavailable

    try:
        return classify_items(items, args.classifier, args)
    except (LlmConfigError, LlmUnavailable, EndpointDown) as exc:
        raise CorpusError(f"llm classifier: {' '.join(str(exc).split())}") from None


def cmd_classify(args: argparse.Namespace) -> int:
    items = _read(args.utterances, gold=False)
    labels = _labels(items, args)
    out = open(args.out, "w", encoding="utf-8") if args.out else sys.stdout  # noqa: SIM115
    try:
        missing: set[int] = getattr(labels, "missing", set())
        for i, (u, labs) in enumerate(zip(items, labels, strict=True)):
            names = [x["category"] for x in labs]
            rec: dict[str, Any] = {
                "id": u.id,
                "channel": u.channel,
                "labels": sorted(set(names)),
                "taxonomy_labels": roll_up(names),
                "evidence": labs,
            }
            if i in missing:  # not "no label": the model gave no usable answer
                rec.update(labels=None, taxonomy_labels=None, unanswered=True)
            out.write(json.dumps(rec, ensure_ascii=False) + "\n")
    finally:
        if args.out:
            out.close()
    if args.out:
        print(f"{len(items)} utterances -> {args.out}", file=sys.stderr)
    return 0


def _gold_paths(args: argparse.Namespace) -> list[str]:
    from mbb.analysis.gold_eval import FROZEN_SPLITS, GOLD_DIR

    paths = list(args.gold or [])
    if getattr(args, "frozen", False):
        paths += [str(GOLD_DIR / name) for name in FROZEN_SPLITS]
    if not paths:
        raise CorpusError("give a gold file, or --frozen for the frozen test splits")
    return paths


def _names(labels: Sequence[Sequence[dict[str, Any]]]) -> list[list[str]]:
    return [[x["category"] for x in labs] for labs in labels]


def cmd_validate(args: argparse.Namespace) -> int:
    from mbb.analysis.gold_eval import model_behind_dev, provisional_items, score_gold

    report: dict[str, Any] = {}
    summary: list[tuple[str, int, pl.DataFrame]] = []
    pooled_items: list[Utterance] = []
    pooled_pred: list[list[str]] = []
    paths = _gold_paths(args)
    for path in paths:
        items = _read(path, gold=True)
        labels = _labels(items, args)
        missing: set[int] = getattr(labels, "missing", set())
        # the LLM's table is over the items it answered: an unanswered one is not "no label"
        answered = [i for i in range(len(items)) if i not in missing]
        scored = [items[i] for i in answered]
        names = _names([labels[i] for i in answered])
        t, sep = score_gold(scored, names, n_boot=args.boot)
        summary.append((Path(path).name, len(scored), t))
        pooled_items += scored
        pooled_pred += names
        print(f"{path}: {len(items)} items, classifier {args.classifier}")
        if missing:
            print(
                f"note: {len(missing)} of {len(items)} items unanswered by the LLM (failed or "
                f"malformed replies): its table and its agreement are over the {len(scored)} "
                "answered; the combined classifier keeps the evidence classifier's labels there"
            )
        provisional = provisional_items(items)
        if provisional:
            print(
                f"note: {provisional} of these items carry their author's labels alone "
                "(provisional: blind annotations not yet delivered)"
            )
        print("21 categories (separate labels rolled up), 95% bootstrap CIs over items:")
        _print(t)
        print("reported separately:")
        _print(sep)
        rep: dict[str, Any] = {
            "taxonomy": t.to_dicts(),
            "separate": sep.to_dicts(),
            "provisional_items": provisional,
            "items": len(items),
            "unanswered": sorted(items[i].id for i in missing),
        }
        if args.classifier == "llm":
            rep.update(_compare(items, labels, args))
        report[path] = rep
    if len(paths) > 1:
        t, _ = score_gold(pooled_items, pooled_pred, n_boot=args.boot)
        summary.append(("pooled", len(pooled_items), t))
        table = _print_summary(summary, args.classifier)
        report["summary"] = table.to_dicts()
    # after the tables, so a bad gold file's error stays the one line on stderr
    behind = model_behind_dev(getattr(args, "model_file", None))
    if behind:
        print(behind)
    if args.json:
        one = len(report) == 1
        Path(args.json).write_text(
            json.dumps(next(iter(report.values())) if one else report, indent=1)
        )
    return 0


def _compare(
    items: Sequence[Utterance], llm: Sequence[Sequence[dict[str, Any]]], args: argparse.Namespace
) -> dict[str, Any]:
    """The evidence classifier on the same items, its kappa with the LLM per category, and the
    combined classifier's table."""
    from mbb.analysis.gold_eval import score_gold

    ev = evidence_decisions(items, getattr(args, "model_file", None))
    ev_names = _names([e for e, _ in ev])
    t_ev, _ = score_gold(items, ev_names, n_boot=args.boot)
    missing: set[int] = getattr(llm, "missing", set())
    answered = [i for i in range(len(items)) if i not in missing]
    kappa = kappa_by_category([ev_names[i] for i in answered], _names([llm[i] for i in answered]))
    comb = combine(ev, llm)
    t_c, sep_c = score_gold(items, _names(comb), n_boot=args.boot)
    print("evidence classifier on the same items:")
    _print(t_ev)
    print("agreement of the LLM with the evidence classifier, Cohen's kappa per category:")
    for c, k in kappa.items():
        print(f"  {c:26s} {'   -' if k is None else f'{k:.2f}'}")
    asked = sum(x.get("decided_by") == "llm" for labs in comb for x in labs)
    print(
        f"combined (evidence where its margin is >= {COMBINE_BAND}, the LLM where nearer; "
        f"{asked} labels decided by the LLM):"
    )
    _print(t_c)
    return {
        "evidence": t_ev.to_dicts(),
        "kappa_llm_vs_evidence": kappa,
        "combined": t_c.to_dicts(),
        "combined_separate": sep_c.to_dicts(),
        "combined_llm_decided": asked,
    }


def _print_summary(
    scored: Sequence[tuple[str, int, pl.DataFrame]], classifier: str
) -> pl.DataFrame:
    """Print the files side by side (`gold_eval.splits_summary`, the last row all of them pooled)
    and return the table."""
    from mbb.analysis.gold_eval import splits_summary

    table = splits_summary(scored)
    print(
        f"summary, classifier {classifier} (95% bootstrap CIs over items; pooled: every item "
        "of the files above):"
    )
    print(f"{'file':18s} {'items':>5s}  {'macro F1':21s} {'weakest category':28s} neutral labelled")
    for r in table.iter_rows(named=True):
        weakest = "-" if r["weakest"] is None else f"{r['weakest']} {r['weakest_f1']:.2f}"
        share = (
            "-"
            if r["neutral_share"] is None
            else f"{r['neutral_labelled']}/{r['neutral']} {r['neutral_share']:.1%} "
            f"[{r['neutral_lo']:.1%},{r['neutral_hi']:.1%}]"
        )
        macro = (
            "-"
            if r["macro_f1"] is None
            else f"{r['macro_f1']:.3f} [{r['macro_lo']:.3f},{r['macro_hi']:.3f}]"
        )
        print(f"{r['split']:18s} {r['items']:5d}  {macro:21s} {weakest:28s} {share}")
    return table


def _print(t: pl.DataFrame) -> None:
    def f(x):
        return "   -" if x is None else f"{x:.2f}"

    print(f"{'category':26s} {'n':>4s} {'pred':>4s}  {'precision':17s} {'recall':17s} {'F1':17s}")
    for r in t.iter_rows(named=True):
        cells = []
        for k in ("precision", "recall", "f1"):
            cells.append(f"{f(r[k])} [{f(r[k + '_lo'])},{f(r[k + '_hi'])}]")
        print(
            f"{r['category']:26s} {r['support']:4d} {r['predicted']:4d}  "
            + " ".join(f"{c:17s}" for c in cells)
        )
