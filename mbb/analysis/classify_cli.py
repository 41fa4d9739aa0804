"""`mbb classify` and `mbb validate-classifier`: the taxonomy classifiers on utterance files
(the corpus format of `mbb.analysis.corpus`), for transcripts mbb did not produce.

Their arguments are declared in `mbb.cli` (parsing must not import the analyses).

    mbb classify UTTERANCES.jsonl [--classifier evidence|llm] [--out FILE]
    mbb validate-classifier GOLD.jsonl [--classifier evidence|llm] [--boot 1000]

LLM options (both commands): --base-url http://127.0.0.1:PORT/v1 --model smollm2
--structured json_object_schema [--api-key-env NAME] [--cache FILE] [--batch-size N].
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

__all__ = ["classify_items", "cmd_classify", "cmd_validate"]


def _evidence(items: Sequence[Utterance], model_path: str | None) -> list[list[dict[str, Any]]]:
    from mbb.analysis.gold_eval import evidence_labels

    return evidence_labels(items, model_path)


def _llm(
    items: Sequence[Utterance], args: argparse.Namespace | None
) -> tuple[list[list[dict[str, Any]]], Any]:
    from mbb.analysis.llm_classifier import LLMClassifier, llm_layer_complete_json
    from mbb.llm.client import LlmClient
    from mbb.llm.config import ModelConfig

    if args is None or not args.model:
        raise CorpusError("--classifier llm needs --model (and --base-url for a local server)")
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
    out: list[list[dict[str, Any]]] = [[] for _ in items]
    for seq, cat, quote, ok in res.select(
        "seq", "category", "evidence", "quote_in_text"
    ).iter_rows():
        out[seq].append({"category": cat, "evidence": f'quote: "{quote}"', "quote_in_text": ok})
    return out, clf


def classify_items(
    items: Sequence[Utterance], classifier: str = "evidence", args: argparse.Namespace | None = None
) -> list[list[dict[str, Any]]]:
    """Per item, its labels with evidence (all 24 names; the 21-category view is `roll_up`)."""
    if classifier == "evidence":
        return _evidence(items, getattr(args, "model_file", None))
    out, clf = _llm(items, args)
    for p in clf.problems:
        print(f"warning: llm classifier: {p['problem']}", file=sys.stderr)
    return out


def _read(path: str, *, gold: bool) -> list[Utterance]:
    return read_utterances(path, require_labels=gold)


def _labels(items: Sequence[Utterance], args: argparse.Namespace) -> list[list[dict[str, Any]]]:
    from mbb.llm.client import LlmConfigError, LlmUnavailable

    try:
        return classify_items(items, args.classifier, args)
    except (LlmConfigError, LlmUnavailable) as exc:
        raise CorpusError(f"llm classifier: {' '.join(str(exc).split())}") from None


def cmd_classify(args: argparse.Namespace) -> int:
    items = _read(args.utterances, gold=False)
    labels = _labels(items, args)
    out = open(args.out, "w", encoding="utf-8") if args.out else sys.stdout  # noqa: SIM115
    try:
        for u, labs in zip(items, labels, strict=True):
            names = [x["category"] for x in labs]
            rec = {
                "id": u.id,
                "channel": u.channel,
                "labels": sorted(set(names)),
                "taxonomy_labels": roll_up(names),
                "evidence": labs,
            }
            out.write(json.dumps(rec, ensure_ascii=False) + "\n")
    finally:
        if args.out:
            out.close()
    if args.out:
        print(f"{len(items)} utterances -> {args.out}", file=sys.stderr)
    return 0


def cmd_validate(args: argparse.Namespace) -> int:
    from mbb.analysis.gold_eval import score_gold

    items = _read(args.gold, gold=True)
    labels = _labels(items, args)
    pred = [[x["category"] for x in labs] for labs in labels]
    t, sep = score_gold(items, pred, n_boot=args.boot)
    print(f"{args.gold}: {len(items)} items, classifier {args.classifier}")
    print("21 categories (separate labels rolled up), 95% bootstrap CIs over items:")
    _print(t)
    print("reported separately:")
    _print(sep)
    if args.json:
        Path(args.json).write_text(
            json.dumps({"taxonomy": t.to_dicts(), "separate": sep.to_dicts()}, indent=1)
        )
    return 0


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
