"""Command line: run, tables, notebook, sweep, report, figures, params, tasks.

Bad input (a params file, an override) prints a clear message without a traceback and exits 2.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Sequence
from pathlib import Path

from mbb.params import ParamsError, deep_merge, load_params, parse_set_option

__all__ = ["main"]


def _overrides(options: Sequence[str] | None) -> dict:
    merged: dict = {}
    for opt in options or ():
        merged = deep_merge(merged, parse_set_option(opt))
    return merged


def _cmd_run(args: argparse.Namespace) -> int:
    from mbb.runner import run_many
    from mbb.study import ForeignRunError, with_model

    overrides = _overrides(args.set)
    cond = load_params(args.params, overrides)
    if getattr(args, "model", None):
        try:
            overrides = deep_merge(overrides, with_model(cond, args.model))
        except ValueError as exc:
            print(f"error: {exc}", file=sys.stderr)
            return 2
        cond = load_params(args.params, overrides)
    out = Path(args.out) if args.out else Path("outputs") / cond.name
    try:
        batch = run_many(
            cond,
            seed=args.seed,
            runs=args.runs,
            out_dir=out,
            processes=args.processes,
            progress=not args.quiet,
        )
    except ForeignRunError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    ok = len(batch.run_ids)
    print(
        f"{ok} run(s) of '{cond.name}' in {batch.seconds:.2f} s -> {out}/ "
        f"(tables in {out / 'tables'})"
    )
    for rid, err in batch.failed.items():
        print(f"FAILED {rid}: {err}", file=sys.stderr)
    for rid, why in batch.stopped.items():
        print(f"STOPPED {rid}: {why} (continue with: mbb resume {out / rid})", file=sys.stderr)
    return 1 if batch.failed else (3 if batch.stopped else 0)


def _cmd_tables(args: argparse.Namespace) -> int:
    from mbb.tables import tables_from_run_dirs, write_tables

    root = Path(args.run_dir)
    if (root / "events.jsonl").is_file():
        run_dirs = [root]
    else:
        run_dirs = sorted(p.parent for p in root.glob("*/events.jsonl"))
    if not run_dirs:
        print(f"{root}: no events.jsonl here or in its sub-folders", file=sys.stderr)
        return 2
    tables = tables_from_run_dirs(run_dirs)
    out = Path(args.out) if args.out else root / "tables"
    write_tables(tables, out)
    for name, df in tables.items():
        print(f"{name:16s} {df.height:8d} rows")
    print(f"{len(run_dirs)} run(s) -> {out}/")
    return 0


def _cmd_notebook(args: argparse.Namespace) -> int:
    from mbb.notebooks import execute_notebook
    from mbb.paths import params_file, user_path

    overrides = _overrides(args.set)
    cond = load_params(args.params, overrides)  # fail fast, before starting a kernel
    out = user_path(args.out or f"outputs/{cond.name}")
    params = {
        "params_path": str(params_file(args.params)),
        "overrides": overrides,
        "out_dir": str(out),
        "runs": args.runs,
    }
    if args.seed is not None:
        params["seed"] = args.seed
    try:
        nb, html = execute_notebook(args.notebook, out, params)
    except Exception as exc:  # papermill keeps the failed notebook; say where it is
        print(f"notebook failed: {type(exc).__name__}: {str(exc)[:2000]}", file=sys.stderr)
        print(f"partial notebook: {out / Path(args.notebook).name}", file=sys.stderr)
        return 1
    print(f"executed notebook: {nb}")
    print(f"HTML report:       {html}")
    return 0


def _cmd_sweep(args: argparse.Namespace) -> int:
    from mbb.report import build_report
    from mbb.sweep import parse_seeds, plan_sweep, run_sweep

    try:
        seeds = parse_seeds(args.seeds)
    except ValueError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    models = [m for m in (getattr(args, "models", None) or "").split(",") if m] or None
    try:
        jobs = plan_sweep(
            args.params,
            seeds,
            args.out,
            overrides=_overrides(args.set),
            notebook=args.notebook,
            models=models,
        )
    except ValueError as exc:
        if isinstance(exc, ParamsError):
            raise
        print(f"error: {exc}", file=sys.stderr)
        return 2
    cluster = None
    if args.cluster == "dask":
        cluster = args.scheduler or "dask"
    results = run_sweep(
        jobs,
        workers=args.workers,
        cluster=cluster,
        skip_done=not args.force,
        progress=not args.quiet,
        max_cost_usd=getattr(args, "max_cost_usd", None),
        max_tokens_total=getattr(args, "max_tokens_total", None),
    )
    for r in results:
        line = f"{r.status:8s} {r.condition:24s} {r.seconds:7.1f} s  {r.html or r.notebook}"
        print(line if r.status != "failed" else f"{line}\n         {r.error}")
    index = build_report(Path(args.out))
    print(f"report: {index}")
    return 1 if any(r.status == "failed" for r in results) else 0


def _cmd_report(args: argparse.Namespace) -> int:
    from mbb.report import build_report

    root = Path(args.dir)
    if not root.is_dir():
        print(f"error: {root} is not a folder", file=sys.stderr)
        return 2
    index = build_report(root)
    print(f"report: {index}")
    return 0


def _cmd_figures(args: argparse.Namespace) -> int:
    from mbb import figures, render
    from mbb.runner import run_many

    cond = load_params(args.params, _overrides(args.set))
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


def _cmd_resume(args: argparse.Namespace) -> int:
    from mbb.resume import resume_run

    status = 0
    for d in args.run_dirs:
        try:
            out = resume_run(Path(d))
        except (FileNotFoundError, ValueError) as exc:
            print(f"error: {exc}", file=sys.stderr)
            status = 2
            continue
        if out.status == "finished":
            print(f"{out.run_id}: already finished ({out.total} events); nothing to do")
        else:
            print(
                f"{out.run_id}: resumed after {out.recorded} recorded events; "
                f"{out.total} events now, run finished"
            )
    return status


def _cmd_estimate(args: argparse.Namespace) -> int:
    from mbb.estimate import estimate_from_runs, estimate_study
    from mbb.study import with_model

    overrides = _overrides(args.set)
    cond = load_params(args.params, overrides)
    models = [m for m in (args.model or "").split(",") if m] or [None]
    for name in models:
        c = cond
        if name is not None:
            try:
                c = load_params(args.params, deep_merge(overrides, with_model(cond, name)))
            except ValueError as exc:
                if isinstance(exc, ParamsError):
                    raise
                print(f"error: {exc}", file=sys.stderr)
                return 2
        if args.recorded:
            est = estimate_from_runs(c, args.runs, args.recorded)
        else:
            est = estimate_study(c, args.runs, dry_runs=args.dry_runs)
        print(est.line())
    return 0


def _cmd_params(args: argparse.Namespace) -> int:
    cond = load_params(args.params, _overrides(args.set))
    print(json.dumps(cond.model_dump(mode="json"), indent=2))
    return 0


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="mbb", description=__doc__)
    sub = p.add_subparsers(dest="command", required=True)

    r = sub.add_parser("run", help="run a condition for K seeds")
    r.add_argument("params", help="params YAML file")
    r.add_argument("--seed", type=int, default=None, help="first seed (default: params seed)")
    r.add_argument("--runs", type=int, default=1, help="number of runs K (seeds N..N+K-1)")
    r.add_argument("--out", default=None, help="output folder (default outputs/<condition>)")
    r.add_argument("--processes", type=int, default=None, help="worker processes (default: auto)")
    r.add_argument("--set", action="append", metavar="KEY=VALUE", help="override a field")
    r.add_argument("--quiet", action="store_true", help="no progress bar")
    r.add_argument("--model", default=None, help="model config (params `models:`) for LLM workers")
    r.set_defaults(func=_cmd_run)

    t = sub.add_parser("tables", help="derive parquet tables from a run (or condition) folder")
    t.add_argument("run_dir")
    t.add_argument("--out", default=None)
    t.set_defaults(func=_cmd_tables)

    n = sub.add_parser("notebook", help="execute a notebook with papermill and export HTML")
    n.add_argument("notebook")
    n.add_argument("--params", required=True)
    n.add_argument("--out", default=None)
    n.add_argument("--seed", type=int, default=None)
    n.add_argument("--runs", type=int, default=4)
    n.add_argument("--set", action="append", metavar="KEY=VALUE")
    n.set_defaults(func=_cmd_notebook)

    s = sub.add_parser("sweep", help="execute notebooks for conditions x seeds (local or Dask)")
    s.add_argument("params", nargs="+", help="params files, one condition each")
    s.add_argument("--seeds", default="0..3", help="seed range A..B (inclusive), per condition")
    s.add_argument("--workers", type=int, default=2, help="jobs at once (threads or Dask workers)")
    s.add_argument("--out", default="outputs/sweep", help="sweep output folder")
    s.add_argument("--notebook", default="notebooks/run_condition.ipynb")
    s.add_argument(
        "--cluster",
        choices=["local", "dask"],
        default="local",
        help="local: threads here; dask: a Dask cluster (LocalCluster by default)",
    )
    s.add_argument("--scheduler", default=None, help="with --cluster dask: scheduler address")
    s.add_argument("--force", action="store_true", help="re-run jobs already done")
    s.add_argument(
        "--models", default=None, help="model axis: model config names a,b (conditions x models)"
    )
    s.add_argument("--max-cost-usd", type=float, default=None, help="cap the sweep's LLM spend")
    s.add_argument("--max-tokens-total", type=int, default=None, help="cap the sweep's tokens")
    s.add_argument("--set", action="append", metavar="KEY=VALUE")
    s.add_argument("--quiet", action="store_true")
    s.set_defaults(func=_cmd_sweep)

    rep = sub.add_parser("report", help="export executed notebooks to HTML + an index page")
    rep.add_argument("dir", help="a sweep's output folder, or outputs/")
    rep.set_defaults(func=_cmd_report)

    rs = sub.add_parser("resume", help="continue killed runs from their event logs")
    rs.add_argument("run_dirs", nargs="+", help="run folders (with events.jsonl)")
    rs.set_defaults(func=_cmd_resume)

    f = sub.add_parser("figures", help="save the main figures of a condition as PNG/SVG/spec")
    f.add_argument("params")
    f.add_argument("--runs", type=int, default=20)
    f.add_argument("--out", default="docs/figures")
    f.add_argument("--set", action="append", metavar="KEY=VALUE")
    f.set_defaults(func=_cmd_figures)

    from mbb.tasks.cli import add_parsers as add_task_parsers

    add_task_parsers(sub)

    e = sub.add_parser("estimate", help="predict the tokens and cost of a study before it runs")
    e.add_argument("params")
    e.add_argument("--model", default=None, help="model config name(s), a,b: one line each")
    e.add_argument("--runs", type=int, default=1, help="runs (seeds) the study will make")
    e.add_argument("--dry-runs", type=int, default=2, help="seeds of the scripted dry run")
    e.add_argument(
        "--recorded", nargs="+", default=None, help="estimate from these recorded run folders"
    )
    e.add_argument("--set", action="append", metavar="KEY=VALUE")
    e.set_defaults(func=_cmd_estimate)

    v = sub.add_parser("params", help="validate a params file and print the resolved condition")
    v.add_argument("params")
    v.add_argument("--set", action="append", metavar="KEY=VALUE")
    v.set_defaults(func=_cmd_params)
    return p


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    try:
        return int(args.func(args))
    except ParamsError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    raise SystemExit(main())
