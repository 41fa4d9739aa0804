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
            f"(`mbb notebook compare_conditions --from {root}` writes one over its runs, and "
            f"`mbb view {root}` shows the runs themselves; a study writes its own report)"
        )
    for f in args.llm_cache:
        if not Path(f).is_file():
            raise common.CliError(f"--llm-cache {f}: no such file")
    index = build_report(root, llm_caches=[Path(f) for f in args.llm_cache])
    print(f"report: {index}")
    return 0


def add_parser(sub: Any) -> None:
    rep = sub.add_parser("report", help="export executed notebooks to HTML + an index page")
    rep.add_argument("dir", help="a sweep's output folder, or outputs/")
    rep.add_argument(
        "--llm-cache",
        action="append",
        default=[],
        metavar="FILE",
        help="an LLM cache outside DIR whose prompts the viewer shows (repeatable); a run's "
        "own cache is read only when it lies inside DIR",
    )
    rep.set_defaults(func=_run)
