"""`mbb tables DIR`: (re)derive the parquet tables of a run or condition folder."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

from mbb.cli import common

__all__ = ["add_parser"]


def _run(args: argparse.Namespace) -> int:
    from mbb.core.tables import tables_from_run_dirs, write_tables

    root = Path(args.run_dir)
    if not root.is_dir():
        raise common.CliError(f"{root}: no such folder")
    if (root / "events.jsonl").is_file():
        run_dirs = [root]
    else:
        run_dirs = sorted(p.parent for p in root.glob("*/events.jsonl"))
    if not run_dirs:
        raise common.CliError(f"{root}: no events.jsonl here or in its sub-folders")
    tables = tables_from_run_dirs(run_dirs)
    out = Path(args.out) if args.out else root / "tables"
    if out.exists() and not out.is_dir():
        raise common.CliError(f"{out}: is a file, not a folder")
    write_tables(tables, out)
    for name, df in tables.items():
        print(f"{name:16s} {df.height:8d} rows")
    print(f"{len(run_dirs)} run(s) -> {out}/")
    return 0


def add_parser(sub: Any) -> None:
    t = sub.add_parser("tables", help="derive parquet tables from a run (or condition) folder")
    t.add_argument("run_dir", help="a run folder (with events.jsonl) or a folder of run folders")
    t.add_argument("--out", default=None, help="tables folder (default RUN_DIR/tables)")
    t.set_defaults(func=_run)
