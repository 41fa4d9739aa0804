"""`mbb estimate PARAMS`: predict the tokens and cost of a study before it runs."""

from __future__ import annotations

import argparse
import sys
from typing import Any

from mbb.cli import common

__all__ = ["add_parser"]


def _run(args: argparse.Namespace) -> int:
    from mbb.batch.build import load_params
    from mbb.batch.estimate import estimate_from_runs, estimate_study
    from mbb.batch.study import with_model
    from mbb.params import ParamsError, deep_merge

    overrides = common.overrides(args.set)
    cond = load_params(args.params, overrides)
    models = [m for m in (args.model or "").split(",") if m] or [None]
    for name in models:
        c = cond
        if name is not None:
            try:
                c = load_params(args.params, deep_merge(overrides, with_model(cond, name)))
            except ValueError as exc:
                if isinstance(exc, ParamsError):
                    raise
                print(f"error: {exc}", file=sys.stderr)
                return 2
        if args.recorded:
            est = estimate_from_runs(c, args.runs, args.recorded)
        else:
            est = estimate_study(c, args.runs, dry_runs=args.dry_runs)
        print(est.line())
    return 0


def add_parser(sub: Any) -> None:
    runs = common.whole(1, common.MAX_RUNS)
    e = sub.add_parser("estimate", help="predict the tokens and cost of a study before it runs")
    e.add_argument("params", help="params YAML file (the condition), or a condition's name")
    e.add_argument("--model", default=None, help="model config name(s), a,b: one line each")
    e.add_argument("--runs", type=runs, default=1, help="runs (seeds) the study will make")
    e.add_argument("--dry-runs", type=runs, default=2, help="seeds of the scripted dry run")
    e.add_argument(
        "--recorded", nargs="+", default=None, help="estimate from these recorded run folders"
    )
    common.add_set(e)
    e.set_defaults(func=_run)
