"""`mbb report DIR`: export executed notebooks to offline HTML, with an index page."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

from mbb.cli import common

__all__ = ["add_parser"]


def _run(args: argparse.Namespace) -> int:
    from mbb.batch.report import build_report

    root = Path(args.dir)
    if not root.is_dir():
        raise common.CliError(f"{root} is not a folder")
    notebooks = [p for p in root.rglob("*.ipynb") if ".ipynb_checkpoints" not in p.parts]
    if not notebooks:
        raise common.CliError(
            f"{root}: no executed notebooks here or in its sub-folders, nothing to report "
            "(`mbb notebook` or `mbb sweep` write them)"
        )
    index = build_report(root)
    print(f"report: {index}")
    return 0


def add_parser(sub: Any) -> None:
    rep = sub.add_parser("report", help="export executed notebooks to HTML + an index page")
    rep.add_argument("dir", help="a sweep's output folder, or outputs/")
    rep.set_defaults(func=_run)
