"""`mbb view DIR`: write the offline viewer of every run under a folder."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

__all__ = ["add_parser"]


def _run(args: argparse.Namespace) -> int:
    from mbb.batch.viewer import build_viewer

    root = Path(args.dir)
    if not root.is_dir():
        print(f"error: {root} is not a folder", file=sys.stderr)
        return 2
    result = build_viewer(root, Path(args.out) if args.out else None)
    for run, reason in result.bad:
        print(f"warning: {run}: not shown: {reason}", file=sys.stderr)
    for run, problem in result.warnings:
        print(f"warning: {run}: {problem}", file=sys.stderr)
    if result.runs == 0:
        print(f"warning: {root}: no runs (no events.jsonl under it)", file=sys.stderr)
    print(f"{result.runs} run(s) in {result.seconds:.1f} s -> viewer: {result.index}")
    return 0


def add_parser(sub: Any) -> None:
    vw = sub.add_parser("view", help="write an offline viewer of every run under a folder")
    vw.add_argument("dir", help="a run folder, a condition's or a sweep's output folder")
    vw.add_argument("--out", default=None, help="viewer folder (default DIR/viewer)")
    vw.set_defaults(func=_run)
