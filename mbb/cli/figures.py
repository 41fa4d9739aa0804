"""`mbb figures PARAMS`: save a condition's main figures as PNG, SVG and spec (with `--vs`, also
the forest plot of other conditions against it)."""

from __future__ import annotations

import argparse
from typing import Any

from mbb.cli import common

__all__ = ["add_parser"]


def _run(args: argparse.Namespace) -> int:
    import polars as pl

    from mbb.analysis import with_run_info
    from mbb.analysis.compare import condition_table
    from mbb.batch.build import load_params
    from mbb.batch.runner import run_many
    from mbb.core.paths import user_path
    from mbb.viz import render
    from mbb.viz import run as figures
    from mbb.viz.compare import forest_plot

    overrides = common.overrides(args.set)
    cond = load_params(args.params, overrides)
    batch = run_many(cond, runs=args.runs, out_dir=None, write=False).check()
    tables = with_run_info(batch.tables, by_kind=batch.by_kind)  # personas: per-persona lines
    out = user_path(args.out)
    charts: dict[str, Any] = {
        "resource_timeline": figures.resource_timeline(tables),
        "bids_by_round": figures.bids_by_round(tables),
        "outcomes_by_subrun": figures.outcomes_by_subrun(tables),
    }
    if args.vs:
        parts = [tables]
        names = [cond.name]
        for other in args.vs:
            c = load_params(other, overrides)
            b = run_many(c, runs=args.runs, out_dir=None, write=False).check()
            parts.append(with_run_info(b.tables, by_kind=b.by_kind))
            names.append(c.name)
        merged = {
            k: pl.concat(
                [
                    p[k].with_columns(pl.lit(n).alias("condition"))
                    for p, n in zip(parts, names, strict=True)
                ],
                how="diagonal_relaxed",
            )
            for k in tables
        }
        charts["forest_plot"] = forest_plot(condition_table(merged, cond.name))
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
    f.add_argument(
        "--vs",
        nargs="+",
        default=None,
        metavar="PARAMS",
        help="other conditions: also draw the forest plot of their differences from PARAMS",
    )
    f.add_argument("--out", default="docs/figures", help="folder for the PNG/SVG/spec files")
    common.add_set(f)
    f.set_defaults(func=_run)
