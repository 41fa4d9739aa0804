"""`mbb notebook NOTEBOOK --params P`: execute a notebook with papermill, export HTML."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from mbb.cli import common

__all__ = ["add_parser"]


def _notebook_parameters(src: Path, given: Sequence[Sequence[str]] | None) -> dict[str, Any]:
    """`-p NAME VALUE` pairs (papermill's convention; VALUE read as YAML, else kept as text),
    checked against the names the notebook's parameters cell defines."""
    if not given:
        return {}
    import papermill
    import yaml

    from mbb.params import safe_yaml

    declared = papermill.inspect_notebook(str(src))
    out: dict[str, Any] = {}
    for name, raw in given:
        if name not in declared:
            valid = ", ".join(sorted(declared)) or "none: it has no parameters cell"
            raise common.CliError(f"{src.name}: no parameter {name!r}; its parameters are: {valid}")
        try:
            out[name] = safe_yaml(raw)
        except yaml.YAMLError:
            out[name] = raw
    return out


def _run(args: argparse.Namespace) -> int:
    from mbb.batch.build import load_params
    from mbb.batch.notebooks import execute_notebook
    from mbb.core.paths import params_file, user_path

    src = common.notebook_source(args.notebook)
    overrides = common.overrides(args.set)
    cond = load_params(args.params, overrides)  # fail fast, before starting a kernel
    extra = _notebook_parameters(src, args.parameter)
    out = user_path(args.out or f"outputs/{cond.name}")
    params = {
        "params_path": str(params_file(args.params)),
        "overrides": overrides,
        "out_dir": str(out),
        "runs": args.runs,
    }
    if args.seed is not None:
        params["seed"] = args.seed
    params.update(extra)  # given by name: they win
    try:
        nb, html = execute_notebook(src, out, params)
    except Exception as exc:  # papermill keeps the failed notebook; say where it is
        if type(exc).__name__ != "PapermillExecutionError":
            raise
        head = " ".join(str(exc).split())[:300]
        partial = out / src.name
        where = f"; the executed part is in {partial}" if partial.is_file() else ""
        print(f"error: notebook {src.name} failed: {head}{where}", file=sys.stderr)
        return 1
    print(f"executed notebook: {nb}")
    print(f"HTML report:       {html}")
    return 0


def add_parser(sub: Any) -> None:
    n = sub.add_parser("notebook", help="execute a notebook with papermill and export HTML")
    n.add_argument("notebook", help="the notebook to run, e.g. notebooks/run_condition.ipynb")
    n.add_argument("--params", required=True, help="params YAML file (the condition)")
    n.add_argument("--out", default=None, help="output folder (default outputs/<condition>)")
    n.add_argument(
        "--seed",
        type=common.whole(0, common.MAX_SEED),
        default=None,
        help="first seed (default: params seed)",
    )
    n.add_argument(
        "--runs",
        type=common.whole(1, common.MAX_RUNS),
        default=4,
        help="number of runs (default 4)",
    )
    common.add_set(n)
    n.add_argument(
        "-p",
        "--parameter",
        nargs=2,
        action="append",
        metavar=("NAME", "VALUE"),
        help="set any parameter of the notebook's parameters cell (papermill's convention; "
        "VALUE read as YAML; repeatable); an unknown NAME is refused",
    )
    n.set_defaults(func=_run)
