"""`mbb resume RUN_DIR... --params P`: continue killed or stopped runs from their event logs.

The condition is the user's (`--params`, with the `--set` and `--model` of the command that
started the runs) and must equal the one recorded; `--trust-folder` takes the recorded one
instead, and `--key-env NAME` names each key variable it may read (`mbb.batch.resume`)."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

from mbb.cli import common
from mbb.cli.errors import expected

__all__ = ["add_parser"]


def _condition(args: argparse.Namespace) -> Any:
    if args.params is None:
        if args.set or args.model:
            raise common.CliError("mbb resume: --set and --model go with --params")
        return None
    if args.trust_folder:
        raise common.CliError("mbb resume: give --params or --trust-folder, not both")
    from mbb.batch.build import load_params
    from mbb.batch.runs import with_model
    from mbb.params import deep_merge

    overrides = common.overrides(args.set)
    if args.model:
        condition = load_params(args.params, overrides)
        overrides = deep_merge(overrides, with_model(condition, args.model))
    return load_params(args.params, overrides)


def _run(args: argparse.Namespace) -> int:
    from mbb.batch.resume import resume_run

    if args.key_env and not args.trust_folder:
        raise common.CliError("mbb resume: --key-env goes with --trust-folder")
    try:
        condition = _condition(args)
    except ValueError as exc:  # an unknown --model
        raise common.CliError(str(exc)) from None
    status = 0
    for d in args.run_dirs:
        try:
            out = resume_run(
                Path(d), condition, trust_folder=args.trust_folder, key_envs=args.key_env or ()
            )
        except Exception as exc:
            line = expected(exc)
            if line is None and isinstance(exc, FileNotFoundError | ValueError):
                line = " ".join(str(exc).split())
            if line is None:
                raise
            print(f"error: {line}", file=sys.stderr)
            status = common.EXIT_ERROR
            continue
        if out.status == "finished":
            print(f"{out.run_id}: already finished ({out.total} events); nothing to do")
        else:
            print(
                f"{out.run_id}: resumed after {out.recorded} recorded events; "
                f"{out.total} events now, run finished"
            )
    return status


def add_parser(sub: Any) -> None:
    rs = sub.add_parser(
        "resume",
        help="continue killed runs from their event logs",
        description="Continue killed or stopped runs. The condition is yours (--params, with the "
        "--set and --model of the command that started them) and must equal the one recorded "
        "in each log; a run folder is data, never a command.",
    )
    rs.add_argument("run_dirs", nargs="+", help="run folders (with events.jsonl)")
    rs.add_argument("--params", default=None, help="the params file the runs were started with")
    common.add_set(rs)
    rs.add_argument("--model", default=None, help="the model config the runs were started with")
    rs.add_argument(
        "--trust-folder",
        action="store_true",
        help="run the params recorded in each folder instead of yours (their endpoints; the "
        "cache file must lie inside the output folder)",
    )
    rs.add_argument(
        "--key-env",
        action="append",
        metavar="NAME",
        help="with --trust-folder: an environment variable the recorded models may read their "
        "key from (repeatable; any other is refused)",
    )
    rs.set_defaults(func=_run)
