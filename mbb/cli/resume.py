"""`mbb resume RUN_DIR...`: continue killed or stopped runs from their event logs."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

from mbb.cli import common
from mbb.cli.errors import expected

__all__ = ["add_parser"]


def _run(args: argparse.Namespace) -> int:
    from mbb.batch.resume import resume_run

    status = 0
    for d in args.run_dirs:
        try:
            out = resume_run(Path(d))
        except Exception as exc:
            line = expected(exc)
            if line is None and isinstance(exc, FileNotFoundError | ValueError):
                line = str(exc).splitlines()[0]
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
    rs = sub.add_parser("resume", help="continue killed runs from their event logs")
    rs.add_argument("run_dirs", nargs="+", help="run folders (with events.jsonl)")
    rs.set_defaults(func=_run)
