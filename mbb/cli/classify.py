"""`mbb classify` and `mbb validate-classifier`: the taxonomy classifiers on utterance files
(the work is in `mbb.cli.classify_run`, imported when they run)."""

from __future__ import annotations

import argparse
from typing import Any

__all__ = ["add_parser"]


def _classifier_options(p: argparse.ArgumentParser) -> None:
    """The options `classify` and `validate-classifier` share: which classifier, and the LLM's."""
    p.add_argument(
        "--classifier",
        choices=["evidence", "llm"],
        default="evidence",
        help="evidence: cues, model and structure, offline (default); llm: an endpoint",
    )
    p.add_argument("--model-file", default=None, help=argparse.SUPPRESS)
    _llm_options(p)


def _llm_options(p: argparse.ArgumentParser) -> None:
    g = p.add_argument_group("LLM classifier (--classifier llm)")
    g.add_argument("--base-url", default="http://127.0.0.1:8080/v1", help="OpenAI-compatible URL")
    g.add_argument("--model", default=None, help="model name, e.g. smollm2")
    g.add_argument(
        "--structured",
        default="json_object_schema",
        choices=["json_schema", "json_object_schema", "prompt_only"],
        help="how the endpoint takes a JSON schema (llama.cpp: json_object_schema)",
    )
    g.add_argument("--api-key-env", default=None, help="NAME of the env var with the key")
    g.add_argument("--cache", default=None, help="JSON file caching labels between runs")
    g.add_argument("--batch-size", type=int, default=10, help="utterances per request")
    g.add_argument("--concurrency", type=int, default=2, help="requests at once")
    g.add_argument("--max-tokens", type=int, default=2048, help="answer length cap per request")
    g.add_argument("--retries", type=int, default=4, help="retries per request")
    g.add_argument("--timeout", type=float, default=300.0, help="seconds per attempt")


def add_parser(sub: Any) -> None:
    c = sub.add_parser(
        "classify",
        help="label an utterance file (JSONL, corpus format) with taxonomy labels + evidence",
    )
    c.add_argument("utterances", help="JSONL: id, channel, text, optional context")
    c.add_argument("--out", default=None, help="output JSONL (default: stdout)")
    _classifier_options(c)
    c.set_defaults(func=_cmd_classify)

    v = sub.add_parser(
        "validate-classifier",
        help="per-category precision/recall/F1 with bootstrap CIs against a gold file",
    )
    v.add_argument("gold", nargs="*", help="gold JSONL files (corpus format with labels)")
    v.add_argument(
        "--frozen",
        action="store_true",
        help="also score every frozen test split (gold/test.jsonl and the later test<N>.jsonl)",
    )
    v.add_argument("--boot", type=int, default=1000, help="bootstrap resamples")
    v.add_argument(
        "--json",
        default=None,
        help="also write the tables as JSON here (one file: its tables; several: each file's "
        "under its path, and the summary table under `summary`)",
    )
    _classifier_options(v)
    v.set_defaults(func=_cmd_validate)


def _cmd_classify(args: argparse.Namespace) -> int:
    from mbb.cli.classify_run import cmd_classify

    return cmd_classify(args)


def _cmd_validate(args: argparse.Namespace) -> int:
    from mbb.cli.classify_run import cmd_validate

    return cmd_validate(args)
