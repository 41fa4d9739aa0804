"""`mbb view DIR`: write the offline viewer of every run under a folder (`--watch`: keep it up
to date as runs are written)."""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path
from typing import Any

__all__ = ["add_parser"]


def _run(args: argparse.Namespace) -> int:
    from mbb.batch.viewer import build_viewer, watch_viewer
    from mbb.core.errors import for_terminal

    root = Path(args.dir)
    if not root.is_dir():
        print(f"error: {root} is not a folder", file=sys.stderr)
        return 2
    out = Path(args.out) if args.out else None
    for f in args.columns:
        if not Path(f).is_file():
            print(f"error: --columns {f}: no such file", file=sys.stderr)
            return 2
    for f in args.llm_cache:
        if not Path(f).is_file():
            print(f"error: --llm-cache {f}: no such file", file=sys.stderr)
            return 2
    if args.watch is not None and not args.watch > 0:
        print(f"error: --watch {args.watch}: a positive number of seconds", file=sys.stderr)
        return 2

    first = [True]
    said: set[str] = set()  # the warnings printed so far (watching: each is said once)

    def report(result: Any) -> None:
        lines = [f"warning: {run}: not shown: {reason}" for run, reason in result.bad]
        lines += [f"warning: {run}: {problem}" for run, problem in result.warnings]
        for line in lines:
            if line not in said:
                print(for_terminal(line), file=sys.stderr)
        said.clear()  # a problem that goes away and comes back is said again
        said.update(lines)
        if not first[0]:  # watching: one line per pass that changed something
            stamp = time.strftime("%H:%M:%S")
            print(f"{stamp} {result.runs} run(s), {result.changed} new or changed")
            return
        first[0] = False
        if result.runs == 0:
            print(f"warning: {root}: no runs (no events.jsonl under it)", file=sys.stderr)
        print(f"{result.runs} run(s) in {result.seconds:.1f} s -> viewer: {result.index}")

    if args.watch is None:
        report(build_viewer(root, out, columns=args.columns, llm_caches=args.llm_cache))
        return 0
    print(f"watching {root} every {args.watch:g} s (Ctrl-C to stop)")
    try:
        watch_viewer(
            root,
            out,
            interval=args.watch,
            columns=args.columns,
            report=report,
            llm_caches=args.llm_cache,
        )
    except KeyboardInterrupt:
        print("stopped watching")
    return 0


def add_parser(sub: Any) -> None:
    vw = sub.add_parser("view", help="write an offline viewer of every run under a folder")
    vw.add_argument("dir", help="a run folder, a condition's or a sweep's output folder")
    vw.add_argument("--out", default=None, help="viewer folder (default DIR/viewer)")
    vw.add_argument(
        "--columns",
        action="append",
        default=[],
        metavar="FILE",
        help="CSV or JSON of per-run values keyed by run id: extra columns of the runs table "
        "(repeatable; DIR/viewer-columns.csv or .json is read too)",
    )
    vw.add_argument(
        "--llm-cache",
        action="append",
        default=[],
        metavar="FILE",
        help="an LLM cache (sqlite) outside DIR to show prompts and answers from (repeatable); "
        "a run's own cache is read only when it lies inside DIR",
    )
    vw.add_argument(
        "--watch",
        nargs="?",
        type=float,
        const=2.0,
        default=None,
        metavar="SECONDS",
        help="keep the viewer up to date as runs are written (every 2 s, or SECONDS); the open "
        "page picks the new runs up",
    )
    vw.set_defaults(func=_run)
