"""`mbb figures PARAMS`: save a condition's main figures as PNG, SVG and spec."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

from mbb.cli import common

__all__ = ["add_parser"]


def _run(args: argparse.Namespace) -> int:
    from mbb.batch.build import load_params
    from mbb.batch.runner import run_many
    from mbb.viz import render
    from mbb.viz import run as figures

    cond = load_params(args.params, common.overrides(args.set))
    batch = run_many(cond, runs=args.runs, out_dir=None, write=False).check()
    out = Path(args.out)
    charts = {
        "resource_timeline": figures.resource_timeline(batch.tables),
        "bids_by_round": figures.bids_by_round(batch.tables),
        "outcomes_by_subrun": figures.outcomes_by_subrun(batch.tables),
    }
    for name, chart in charts.items():
        paths = render.save_chart(chart, out / name)
        print(f"{name}: {paths['png']}")
    return 0


def add_parser(sub: Any) -> None:
    f = sub.add_parser("figures", help="save the main figures of a condition as PNG/SVG/spec")
    f.add_argument("params", help="params YAML file (the condition)")
    f.add_argument(
        "--runs", type=common.whole(1, common.MAX_RUNS), default=20, help="runs drawn (default 20)"
    )
    f.add_argument("--out", default="docs/figures", help="folder for the PNG/SVG/spec files")
    common.add_set(f)
    f.set_defaults(func=_run)
