"""`mbb sweep PARAMS...`: execute a notebook per condition (x model) over a seed range."""

from __future__ import annotations

import argparse
from typing import Any

from mbb.cli import common

__all__ = ["add_parser"]


def _run(args: argparse.Namespace) -> int:
    from mbb.batch.report import build_report
    from mbb.batch.sweep import parse_seeds, plan_sweep, run_sweep
    from mbb.params import ParamsError

    try:
        seeds = parse_seeds(args.seeds)
    except ValueError as exc:
        raise common.CliError(str(exc)) from None
    if seeds[1] - seeds[0] + 1 > common.MAX_RUNS:
        raise common.CliError(
            f"--seeds {args.seeds}: more than {common.MAX_RUNS} seeds per condition"
        )
    from mbb.core.paths import output_dir

    common.notebook_source(args.notebook)
    try:
        out = output_dir(args.out, "sweep")
    except ValueError as exc:
        raise common.CliError(str(exc)) from None
    models = [m for m in (args.models or "").split(",") if m] or None
    try:
        jobs = plan_sweep(
            args.params,
            seeds,
            out,
            overrides=common.overrides(args.set),
            notebook=args.notebook,
            models=models,
        )
    except ParamsError:
        raise
    except ValueError as exc:  # two files naming one condition, an unknown model
        raise common.CliError(str(exc)) from None
    cluster = None
    if args.cluster == "dask":
        cluster = args.scheduler or "dask"
    try:
        results = run_sweep(
            jobs,
            workers=args.workers,
            cluster=cluster,
            skip_done=not args.force,
            progress=not args.quiet,
            max_cost_usd=getattr(args, "max_cost_usd", None),
            max_tokens_total=getattr(args, "max_tokens_total", None),
        )
    except ParamsError:
        raise
    except ValueError as exc:  # a cap in USD over a model without a price
        raise common.CliError(str(exc)) from None
    for r in results:
        line = f"{r.status:8s} {r.condition:24s} {r.seconds:7.1f} s  {r.html or r.notebook}"
        print(line if r.status != "failed" else f"{line}\n         {r.error}")
    caches = sorted({c for job in jobs if (c := job.llm_cache()) is not None})
    index = build_report(out, llm_caches=caches)
    print(f"report: {index}")
    return 1 if any(r.status == "failed" for r in results) else 0


def add_parser(sub: Any) -> None:
    s = sub.add_parser("sweep", help="execute notebooks for conditions x seeds (local or Dask)")
    s.add_argument("params", nargs="+", help="params files, one condition each")
    s.add_argument("--seeds", default="0..3", help="seed range A..B (inclusive), per condition")
    s.add_argument(
        "--workers",
        type=common.whole(1, common.MAX_PROCESSES),
        default=2,
        help="jobs at once (threads or Dask workers)",
    )
    s.add_argument("--out", default=None, help="sweep output folder (default outputs/sweep)")
    s.add_argument(
        "--notebook",
        default="run_condition",
        help="the notebook executed per condition (default mbb's run_condition)",
    )
    s.add_argument(
        "--cluster",
        choices=["local", "dask"],
        default="local",
        help="local: threads here; dask: a Dask cluster (LocalCluster by default)",
    )
    s.add_argument("--scheduler", default=None, help="with --cluster dask: scheduler address")
    s.add_argument("--force", action="store_true", help="re-run jobs already done")
    s.add_argument(
        "--models", default=None, help="model axis: model config names a,b (conditions x models)"
    )
    s.add_argument("--max-cost-usd", type=float, default=None, help="cap the sweep's LLM spend")
    s.add_argument("--max-tokens-total", type=int, default=None, help="cap the sweep's tokens")
    common.add_set(s)
    s.add_argument("--quiet", action="store_true", help="no progress bar")
    s.set_defaults(func=_run)
