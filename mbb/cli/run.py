"""`mbb run PARAMS`: run a condition for K seeds into its output folder."""

from __future__ import annotations

import argparse
import shlex
import sys
from typing import Any

from mbb.cli import common

__all__ = ["add_parser"]


def _run(args: argparse.Namespace) -> int:
    from mbb.batch.build import load_params
    from mbb.batch.runner import run_many
    from mbb.batch.runs import model_label, with_model
    from mbb.core.paths import output_dir
    from mbb.params import deep_merge

    overrides = common.overrides(args.set)
    cond = load_params(args.params, overrides)
    if args.model:
        try:
            overrides = deep_merge(overrides, with_model(cond, args.model))
        except ValueError as exc:  # an unknown model: the message lists the configured ones
            raise common.CliError(str(exc)) from None
        cond = load_params(args.params, overrides)
    label = model_label(cond)  # LLM runs: one default folder per condition and model
    try:
        out = output_dir(args.out, f"{cond.name}" + (f"-{label}" if label else ""))
    except ValueError as exc:
        raise common.CliError(str(exc)) from None
    batch = run_many(
        cond,
        seed=args.seed,
        runs=args.runs,
        out_dir=out,
        processes=args.processes,
        progress=not args.quiet,
        skip_done=not args.force,
    )
    ok = len(batch.run_ids)
    kept = f", {batch.skipped} already done" if batch.skipped else ""
    print(
        f"{ok} run(s) of '{cond.name}'{kept} in {batch.seconds:.2f} s -> {out}/ "
        f"(tables in {out / 'tables'})"
    )
    for rid, err in batch.failed.items():
        print(f"FAILED {rid}: {err}", file=sys.stderr)
    again = [args.params, *(x for s in args.set or () for x in ("--set", s))]
    again += ["--model", args.model] if args.model else []
    for rid, why in batch.stopped.items():
        command = shlex.join(["mbb", "resume", str(out / rid), "--params", *again])
        print(f"STOPPED {rid}: {why} (continue with: {command})", file=sys.stderr)
    return 1 if batch.failed else (3 if batch.stopped else 0)


def add_parser(sub: Any) -> None:
    runs = common.whole(1, common.MAX_RUNS)
    r = sub.add_parser("run", help="run a condition for K seeds")
    r.add_argument("params", help="params YAML file (the condition)")
    r.add_argument(
        "--seed",
        type=common.whole(0, common.MAX_SEED),
        default=None,
        help="first seed (default: params seed)",
    )
    r.add_argument(
        "--runs",
        type=runs,
        default=1,
        help=f"number of runs K, seeds N..N+K-1 (1..{common.MAX_RUNS})",
    )
    r.add_argument(
        "--out", default=None, help="output folder (default outputs/<condition>[-<model>])"
    )
    r.add_argument(
        "--processes",
        type=common.whole(1, common.MAX_PROCESSES),
        default=None,
        help=f"worker processes, 1..{common.MAX_PROCESSES} (default: automatic)",
    )
    common.add_set(r)
    r.add_argument("--quiet", action="store_true", help="no progress bar")
    r.add_argument(
        "--force",
        action="store_true",
        help="run again the seeds whose runs already finished in the output folder (default: "
        "keep them, so re-running an interrupted command finishes the rest)",
    )
    r.add_argument("--model", default=None, help="model config (params `models:`) for LLM workers")
    r.set_defaults(func=_run)
