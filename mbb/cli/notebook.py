"""`mbb notebook NOTEBOOK`: execute a notebook with papermill and export it as HTML.

A notebook that runs a condition (`run_condition`) takes `--params` (with `--seed`, `--runs`,
`--set`); an analysis notebook takes the runs to read with `--from` (a study, a sweep,
condition or run folders) and never runs anything. `-p NAME VALUE` sets any other parameter.
An option the notebook does not take is refused with the parameters it does take.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from mbb.cli import common

__all__ = ["add_parser"]


def _declared(src: Path) -> dict[str, Any]:
    import papermill

    return dict(papermill.inspect_notebook(str(src)))


def _refuse(src: Path, option: str, name: str, declared: dict[str, Any]) -> None:
    valid = ", ".join(sorted(declared)) or "none: it has no parameters cell"
    raise common.CliError(
        f"{src.name} takes no {option} (no parameter {name!r}); its parameters are: {valid}"
    )


def _notebook_parameters(
    src: Path, given: Sequence[Sequence[str]] | None, declared: dict[str, Any]
) -> dict[str, Any]:
    """`-p NAME VALUE` pairs (papermill's convention; VALUE read as YAML, else kept as text),
    checked against the names the notebook's parameters cell defines."""
    import yaml

    from mbb.params import safe_yaml

    out: dict[str, Any] = {}
    for name, raw in given or ():
        if name not in declared:
            _refuse(src, f"-p {name}", name, declared)
        try:
            out[name] = safe_yaml(raw)
        except yaml.YAMLError:
            out[name] = raw
    return out


def _run(args: argparse.Namespace) -> int:
    from mbb.batch.build import load_params
    from mbb.batch.notebooks import execute_notebook
    from mbb.core.paths import output_dir, params_file, user_path

    src = common.notebook_source(args.notebook)
    declared = _declared(src)
    params: dict[str, Any] = {}
    name = src.stem
    if args.params is not None:
        if "params_path" not in declared:
            _refuse(src, "--params (it reads runs: give them with --from)", "params_path", declared)
        overrides = common.overrides(args.set)
        cond = load_params(args.params, overrides)  # fail fast, before starting a kernel
        name = cond.name
        params.update(params_path=str(params_file(args.params)), overrides=overrides)
        if args.runs is not None:
            params["runs"] = args.runs
        if args.seed is not None:
            params["seed"] = args.seed
    elif "params_path" in declared and not args.run_dirs:
        raise common.CliError(f"{src.name} runs a condition: give it with --params")
    elif args.set or args.seed is not None or args.runs is not None:
        raise common.CliError("--set, --seed and --runs go with --params (a condition to run)")
    if args.run_dirs:
        if "run_dirs" not in declared:
            _refuse(src, "--from (it runs a condition: give it --params)", "run_dirs", declared)
        missing = [d for d in args.run_dirs if not user_path(d).exists()]
        if missing:
            raise common.CliError(f"--from {missing[0]}: no such folder")
        params["run_dirs"] = [str(user_path(d)) for d in args.run_dirs]
    try:
        out = output_dir(args.out, name)
    except ValueError as exc:
        raise common.CliError(str(exc)) from None
    if "out_dir" in declared:
        params["out_dir"] = str(out)
    params.update(_notebook_parameters(src, args.parameter, declared))  # by name: they win
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
    n.add_argument("notebook", help="the notebook, e.g. run_condition or notebooks/x.ipynb")
    n.add_argument("--params", default=None, help="the condition to run (notebooks that run one)")
    n.add_argument(
        "--from",
        dest="run_dirs",
        nargs="+",
        default=None,
        metavar="DIR",
        help="the runs an analysis notebook reads: a study, a sweep, condition or run folders",
    )
    n.add_argument("--out", default=None, help="output folder (default outputs/<name>)")
    n.add_argument(
        "--seed",
        type=common.whole(0, common.MAX_SEED),
        default=None,
        help="first seed (default: params seed)",
    )
    n.add_argument(
        "--runs",
        type=common.whole(1, common.MAX_RUNS),
        default=None,
        help="number of runs (default: the notebook's)",
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
