"""`mbb estimate PARAMS...`: calls, tokens, reasoning, wall time and cost of a study before it runs
(a thin layer over `mbb.batch.estimate.estimate`)."""

from __future__ import annotations

import argparse
from typing import Any

from mbb.cli import common

__all__ = ["add_parser"]


def _reasoning(text: str | None) -> dict[str, int] | None:
    """`low=300,medium=900` (efforts or model names) -> {name: tokens per call}."""
    from mbb.llm.presets import EFFORTS

    if not text:
        return None
    out = {}
    for part in text.split(","):
        key, eq, value = part.partition("=")
        if not eq or not value.strip().isdigit():
            raise common.CliError(
                f"--reasoning-tokens: {part!r} is not NAME=TOKENS (NAME: an effort of "
                f"{'|'.join(EFFORTS)} or a model name), e.g. low=300,medium=900"
            )
        out[key.strip()] = int(value)
    return out


def _run(args: argparse.Namespace) -> int:
    from mbb.batch.build import load_params
    from mbb.batch.estimate import EstimateError, Latency, Limits, estimate, format_rows
    from mbb.batch.estimate import reasoning_from as calibrate
    from mbb.params import ParamsError

    overrides = common.overrides(args.set)
    conds = [load_params(p, overrides) for p in args.params]
    models = [m for m in (args.model or "").split(",") if m] or None
    reasoning = _reasoning(args.reasoning_tokens)
    if args.reasoning_from:
        try:
            reasoning = {**calibrate(args.reasoning_from), **(reasoning or {})}
        except FileNotFoundError as exc:
            raise common.CliError(str(exc)) from None
    limits = None
    if args.rpm or args.tpm:
        names = set(models or [n for c in conds for n in c.models])
        limits = {
            n: Limits(
                c.models[n].concurrency, args.rpm or c.models[n].rpm, args.tpm or c.models[n].tpm
            )
            for c in conds
            for n in names
            if n in c.models
        }
    try:
        rows = estimate(
            conds,
            models=models,
            runs=args.runs,
            dry_runs=args.dry_runs,
            recorded=args.recorded,
            reasoning_tokens=reasoning,
            limits=limits,
            latency=Latency(args.first_token_s, args.tokens_per_s),
        )
    except ParamsError:
        raise
    except (EstimateError, ValueError, FileNotFoundError) as exc:
        raise common.CliError(str(exc)) from None
    for line in format_rows(rows):
        print(line)
    return 0


def _positive(text: str) -> float:
    try:
        v = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a number: {text!r}") from None
    if not v > 0:
        raise argparse.ArgumentTypeError(f"must be > 0, got {text}")
    return v


def add_parser(sub: Any) -> None:
    runs = common.whole(1, common.MAX_RUNS)
    e = sub.add_parser(
        "estimate",
        help="predict calls, tokens, reasoning, wall time and cost of a study before it runs",
    )
    e.add_argument("params", nargs="+", help="params YAML file(s) (conditions), or their names")
    e.add_argument("--model", default=None, help="model config name(s), a,b: a row each")
    e.add_argument("--runs", type=runs, default=1, help="runs (seeds) per condition and model")
    e.add_argument("--dry-runs", type=runs, default=2, help="seeds of the dry run")
    e.add_argument(
        "--recorded", nargs="+", default=None, help="scale these recorded run folders instead"
    )
    e.add_argument(
        "--reasoning-tokens",
        default=None,
        help="reasoning tokens per call, by effort or model name (low=300,o4-mini=900); "
        "default: mbb's assumption (see the README)",
    )
    e.add_argument(
        "--reasoning-from",
        nargs="+",
        default=None,
        help="calibrate reasoning tokens per call from these recorded runs (per model)",
    )
    e.add_argument("--rpm", type=_positive, default=None, help="requests/minute per endpoint")
    e.add_argument("--tpm", type=_positive, default=None, help="tokens/minute per endpoint")
    e.add_argument(
        "--first-token-s", type=_positive, default=0.8, help="assumed seconds to a first token"
    )
    e.add_argument(
        "--tokens-per-s", type=_positive, default=60.0, help="assumed completion tokens/second"
    )
    common.add_set(e)
    e.set_defaults(func=_run)
