"""Command line: run, tables, notebook, sweep, report, view, resume, figures, params, tasks,
classify, validate-classifier.

Every expected failure (bad input, a corrupt log, an output folder in use, a full disk) is one
line on stderr, `error: ...`, and exit status 2; Ctrl-C is one line and status 130. Anything
else is a bug: its traceback is kept, followed by a line saying where to report it.
"""

from __future__ import annotations

import argparse
import errno
import json
import sys
import traceback
from collections.abc import Sequence
from pathlib import Path
from typing import Any, NoReturn

from mbb.params import ParamsError, deep_merge, load_params, parse_set_option

__all__ = ["EXIT_ERROR", "EXIT_INTERRUPTED", "CliError", "main"]

EXIT_ERROR = 2  # an expected failure: bad input, a corrupt log, a busy or unusable folder
EXIT_INTERRUPTED = 130  # Ctrl-C (128 + SIGINT)
MAX_RUNS = 100_000  # per command (and per sweep job); checked before anything is allocated
MAX_PROCESSES = 64
MAX_SEED = 2**31 - 1
BUG_REPORT = (
    "mbb: this is a bug, not a problem with your input; please report it on mbb's issue "
    "tracker with the command and the traceback above"
)


class CliError(Exception):
    """An expected failure, reported as one line (`error: <message>`) with exit status 2."""


class _Parser(argparse.ArgumentParser):
    """argparse, but a usage error is one line (`error: mbb run: ...`) and exit status 2."""

    def error(self, message: str) -> NoReturn:
        print(f"error: {self.prog}: {message} (see {self.prog} --help)", file=sys.stderr)
        raise SystemExit(EXIT_ERROR)


def _whole(lo: int, hi: int) -> Any:
    """An argparse type: a whole number in [lo, hi] (`1e9`, `0`, `-3` get one clear line)."""

    def parse(text: str) -> int:
        try:
            value = int(text, 10)
        except ValueError:
            value = None
        if value is None or not lo <= value <= hi:
            raise argparse.ArgumentTypeError(
                f"expected a whole number from {lo} to {hi}, got {text!r}"
            )
        return value

    parse.__name__ = "whole number"
    return parse


def _overrides(options: Sequence[str] | None) -> dict:
    merged: dict = {}
    for opt in options or ():
        merged = deep_merge(merged, parse_set_option(opt))
    return merged


def _cmd_run(args: argparse.Namespace) -> int:
    from mbb.batch.runner import run_many
    from mbb.batch.study import model_label, with_model

    overrides = _overrides(args.set)
    cond = load_params(args.params, overrides)
    if args.model:
        try:
            overrides = deep_merge(overrides, with_model(cond, args.model))
        except ValueError as exc:  # an unknown model: the message lists the configured ones
            raise CliError(str(exc)) from None
        cond = load_params(args.params, overrides)
    label = model_label(cond)  # LLM runs: one default folder per condition and model
    out = Path(args.out or f"outputs/{cond.name}" + (f"-{label}" if label else ""))
    batch = run_many(
        cond,
        seed=args.seed,
        runs=args.runs,
        out_dir=out,
        processes=args.processes,
        progress=not args.quiet,
        skip_done=not args.force,
    )
    ok = len(batch.run_ids)
    kept = f", {batch.skipped} already done" if batch.skipped else ""
    print(
        f"{ok} run(s) of '{cond.name}'{kept} in {batch.seconds:.2f} s -> {out}/ "
        f"(tables in {out / 'tables'})"
    )
    for rid, err in batch.failed.items():
        print(f"FAILED {rid}: {err}", file=sys.stderr)
    for rid, why in batch.stopped.items():
        print(f"STOPPED {rid}: {why} (continue with: mbb resume {out / rid})", file=sys.stderr)
    return 1 if batch.failed else (3 if batch.stopped else 0)


def _cmd_tables(args: argparse.Namespace) -> int:
    from mbb.core.tables import tables_from_run_dirs, write_tables

    root = Path(args.run_dir)
    if not root.is_dir():
        raise CliError(f"{root}: no such folder")
    if (root / "events.jsonl").is_file():
        run_dirs = [root]
    else:
        run_dirs = sorted(p.parent for p in root.glob("*/events.jsonl"))
    if not run_dirs:
        raise CliError(f"{root}: no events.jsonl here or in its sub-folders")
    tables = tables_from_run_dirs(run_dirs)
    out = Path(args.out) if args.out else root / "tables"
    if out.exists() and not out.is_dir():
        raise CliError(f"{out}: is a file, not a folder")
    write_tables(tables, out)
    for name, df in tables.items():
        print(f"{name:16s} {df.height:8d} rows")
    print(f"{len(run_dirs)} run(s) -> {out}/")
    return 0


def _notebook_source(notebook: str) -> Path:
    from mbb.core.paths import notebook_file

    try:
        src = notebook_file(notebook)
    except FileNotFoundError as exc:
        raise CliError(str(exc)) from None
    if not src.is_file():
        raise CliError(f"{notebook}: no such notebook ({src})")
    return src


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
            raise CliError(f"{src.name}: no parameter {name!r}; its parameters are: {valid}")
        try:
            out[name] = safe_yaml(raw)
        except yaml.YAMLError:
            out[name] = raw
    return out


def _cmd_notebook(args: argparse.Namespace) -> int:
    from mbb.batch.notebooks import execute_notebook
    from mbb.core.paths import params_file, user_path

    src = _notebook_source(args.notebook)
    overrides = _overrides(args.set)
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


def _cmd_sweep(args: argparse.Namespace) -> int:
    from mbb.batch.report import build_report
    from mbb.batch.sweep import parse_seeds, plan_sweep, run_sweep

    try:
        seeds = parse_seeds(args.seeds)
    except ValueError as exc:
        raise CliError(str(exc)) from None
    if seeds[1] - seeds[0] + 1 > MAX_RUNS:
        raise CliError(f"--seeds {args.seeds}: more than {MAX_RUNS} seeds per condition")
    _notebook_source(args.notebook)
    models = [m for m in (args.models or "").split(",") if m] or None
    try:
        jobs = plan_sweep(
            args.params,
            seeds,
            args.out,
            overrides=_overrides(args.set),
            notebook=args.notebook,
            models=models,
        )
    except ParamsError:
        raise
    except ValueError as exc:  # two files naming one condition, an unknown model
        raise CliError(str(exc)) from None
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
    from mbb.batch.report import build_report

    root = Path(args.dir)
    if not root.is_dir():
        raise CliError(f"{root} is not a folder")
    notebooks = [p for p in root.rglob("*.ipynb") if ".ipynb_checkpoints" not in p.parts]
    if not notebooks:
        raise CliError(
            f"{root}: no executed notebooks here or in its sub-folders, nothing to report "
            "(`mbb notebook` or `mbb sweep` write them)"
        )
    index = build_report(root)
    print(f"report: {index}")
    return 0


def _cmd_view(args: argparse.Namespace) -> int:
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


def _cmd_figures(args: argparse.Namespace) -> int:
    from mbb.batch.runner import run_many
    from mbb.viz import render
    from mbb.viz import run as figures

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
    from mbb.batch.resume import resume_run

    status = 0
    for d in args.run_dirs:
        try:
            out = resume_run(Path(d))
        except Exception as exc:
            line = _expected(exc)
            if line is None and isinstance(exc, FileNotFoundError | ValueError):
                line = str(exc).splitlines()[0]
            if line is None:
                raise
            print(f"error: {line}", file=sys.stderr)
            status = EXIT_ERROR
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
    from mbb.batch.estimate import estimate_from_runs, estimate_study
    from mbb.batch.study import with_model

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


def _add_set(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--set",
        action="append",
        metavar="KEY=VALUE",
        help="override one field of the params file, e.g. budget.credits=1500 or llm.cache=off "
        "(VALUE is read as YAML; repeatable)",
    )


def _classifier_options(p: argparse.ArgumentParser) -> None:
    """The options `classify` and `validate-classifier` share: which classifier, and the LLM's."""
    p.add_argument(
        "--classifier",
        choices=["evidence", "llm"],
        default="evidence",
        help="evidence: cues, model and structure, offline (default); llm: an endpoint",
    )
    p.add_argument("--model-file", default=None, help=argparse.SUPPRESS)
    _llm_options(p)


def _llm_options(p: argparse.ArgumentParser) -> None:
    g = p.add_argument_group("LLM classifier (--classifier llm)")
    g.add_argument("--base-url", default="http://127.0.0.1:8080/v1", help="OpenAI-compatible URL")
    g.add_argument("--model", default=None, help="model name, e.g. smollm2")
    g.add_argument(
        "--structured",
        default="json_object_schema",
        choices=["json_schema", "json_object_schema", "prompt_only"],
        help="how the endpoint takes a JSON schema (llama.cpp: json_object_schema)",
    )
    g.add_argument("--api-key-env", default=None, help="NAME of the env var with the key")
    g.add_argument("--cache", default=None, help="JSON file caching labels between runs")
    g.add_argument("--batch-size", type=int, default=10, help="utterances per request")
    g.add_argument("--concurrency", type=int, default=2, help="requests at once")
    g.add_argument("--max-tokens", type=int, default=2048, help="answer length cap per request")
    g.add_argument("--retries", type=int, default=4, help="retries per request")
    g.add_argument("--timeout", type=float, default=300.0, help="seconds per attempt")


def _add_classify_parsers(sub: Any) -> None:
    c = sub.add_parser(
        "classify",
        help="label an utterance file (JSONL, corpus format) with taxonomy labels + evidence",
    )
    c.add_argument("utterances", help="JSONL: id, channel, text, optional context")
    c.add_argument("--out", default=None, help="output JSONL (default: stdout)")
    _classifier_options(c)
    c.set_defaults(func=_cmd_classify)

    v = sub.add_parser(
        "validate-classifier",
        help="per-category precision/recall/F1 with bootstrap CIs against a gold file",
    )
    v.add_argument("gold", nargs="*", help="gold JSONL files (corpus format with labels)")
    v.add_argument(
        "--frozen",
        action="store_true",
        help="also score both frozen test splits (gold/test.jsonl, gold/test2.jsonl)",
    )
    v.add_argument("--boot", type=int, default=1000, help="bootstrap resamples")
    v.add_argument("--json", default=None, help="also write the tables as JSON here")
    _classifier_options(v)
    v.set_defaults(func=_cmd_validate)


def _cmd_classify(args: argparse.Namespace) -> int:
    from mbb.analysis.classify_cli import cmd_classify

    return cmd_classify(args)


def _cmd_validate(args: argparse.Namespace) -> int:
    from mbb.analysis.classify_cli import cmd_validate

    return cmd_validate(args)


def build_parser() -> argparse.ArgumentParser:
    p = _Parser(prog="mbb", description=__doc__)
    sub = p.add_subparsers(dest="command", required=True, metavar="COMMAND")

    runs = _whole(1, MAX_RUNS)
    seed = _whole(0, MAX_SEED)
    r = sub.add_parser("run", help="run a condition for K seeds")
    r.add_argument("params", help="params YAML file (the condition)")
    r.add_argument("--seed", type=seed, default=None, help="first seed (default: params seed)")
    r.add_argument(
        "--runs", type=runs, default=1, help=f"number of runs K, seeds N..N+K-1 (1..{MAX_RUNS})"
    )
    r.add_argument(
        "--out", default=None, help="output folder (default outputs/<condition>[-<model>])"
    )
    r.add_argument(
        "--processes",
        type=_whole(1, MAX_PROCESSES),
        default=None,
        help=f"worker processes, 1..{MAX_PROCESSES} (default: automatic)",
    )
    _add_set(r)
    r.add_argument("--quiet", action="store_true", help="no progress bar")
    r.add_argument(
        "--force",
        action="store_true",
        help="run again the seeds whose runs already finished in the output folder (default: "
        "keep them, so re-running an interrupted command finishes the rest)",
    )
    r.add_argument("--model", default=None, help="model config (params `models:`) for LLM workers")
    r.set_defaults(func=_cmd_run)

    t = sub.add_parser("tables", help="derive parquet tables from a run (or condition) folder")
    t.add_argument("run_dir", help="a run folder (with events.jsonl) or a folder of run folders")
    t.add_argument("--out", default=None, help="tables folder (default RUN_DIR/tables)")
    t.set_defaults(func=_cmd_tables)

    n = sub.add_parser("notebook", help="execute a notebook with papermill and export HTML")
    n.add_argument("notebook", help="the notebook to run, e.g. notebooks/run_condition.ipynb")
    n.add_argument("--params", required=True, help="params YAML file (the condition)")
    n.add_argument("--out", default=None, help="output folder (default outputs/<condition>)")
    n.add_argument("--seed", type=seed, default=None, help="first seed (default: params seed)")
    n.add_argument("--runs", type=runs, default=4, help="number of runs (default 4)")
    _add_set(n)
    n.add_argument(
        "-p",
        "--parameter",
        nargs=2,
        action="append",
        metavar=("NAME", "VALUE"),
        help="set any parameter of the notebook's parameters cell (papermill's convention; "
        "VALUE read as YAML; repeatable); an unknown NAME is refused",
    )
    n.set_defaults(func=_cmd_notebook)

    s = sub.add_parser("sweep", help="execute notebooks for conditions x seeds (local or Dask)")
    s.add_argument("params", nargs="+", help="params files, one condition each")
    s.add_argument("--seeds", default="0..3", help="seed range A..B (inclusive), per condition")
    s.add_argument(
        "--workers",
        type=_whole(1, MAX_PROCESSES),
        default=2,
        help="jobs at once (threads or Dask workers)",
    )
    s.add_argument("--out", default="outputs/sweep", help="sweep output folder")
    s.add_argument(
        "--notebook",
        default="notebooks/run_condition.ipynb",
        help="the notebook executed per condition",
    )
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
    _add_set(s)
    s.add_argument("--quiet", action="store_true", help="no progress bar")
    s.set_defaults(func=_cmd_sweep)

    rep = sub.add_parser("report", help="export executed notebooks to HTML + an index page")
    rep.add_argument("dir", help="a sweep's output folder, or outputs/")
    rep.set_defaults(func=_cmd_report)

    vw = sub.add_parser("view", help="write an offline viewer of every run under a folder")
    vw.add_argument("dir", help="a run folder, a condition's or a sweep's output folder")
    vw.add_argument("--out", default=None, help="viewer folder (default DIR/viewer)")
    vw.set_defaults(func=_cmd_view)

    rs = sub.add_parser("resume", help="continue killed runs from their event logs")
    rs.add_argument("run_dirs", nargs="+", help="run folders (with events.jsonl)")
    rs.set_defaults(func=_cmd_resume)

    f = sub.add_parser("figures", help="save the main figures of a condition as PNG/SVG/spec")
    f.add_argument("params", help="params YAML file (the condition)")
    f.add_argument("--runs", type=runs, default=20, help="runs drawn (default 20)")
    f.add_argument("--out", default="docs/figures", help="folder for the PNG/SVG/spec files")
    _add_set(f)
    f.set_defaults(func=_cmd_figures)

    from mbb.tasks.cli import add_parsers as add_task_parsers

    _add_classify_parsers(sub)

    add_task_parsers(sub)

    e = sub.add_parser("estimate", help="predict the tokens and cost of a study before it runs")
    e.add_argument("params", help="params YAML file (the condition), or a condition's name")
    e.add_argument("--model", default=None, help="model config name(s), a,b: one line each")
    e.add_argument("--runs", type=runs, default=1, help="runs (seeds) the study will make")
    e.add_argument("--dry-runs", type=runs, default=2, help="seeds of the scripted dry run")
    e.add_argument(
        "--recorded", nargs="+", default=None, help="estimate from these recorded run folders"
    )
    _add_set(e)
    e.set_defaults(func=_cmd_estimate)

    v = sub.add_parser("params", help="validate a params file and print the resolved condition")
    v.add_argument("params", help="params YAML file (the condition)")
    _add_set(v)
    v.set_defaults(func=_cmd_params)
    return p


def _os_error(exc: OSError) -> str:
    where = exc.filename if exc.filename is not None else None
    if exc.errno in (errno.ENOSPC, errno.EDQUOT):
        what = "no space left on the device" if exc.errno == errno.ENOSPC else "disk quota exceeded"
        return f"{what}{f' (writing {where})' if where else ''}: free some space and run again"
    text = exc.strerror or str(exc)
    return f"{where}: {text}" if where else text


def _expected(exc: BaseException) -> str | None:
    """The one-line message of an expected failure, or None (a bug)."""
    import sqlite3

    from mbb.analysis.corpus import CorpusError
    from mbb.batch.outdir import OutputError
    from mbb.batch.study import ForeignRunError
    from mbb.core.events import EventLogError, ResumeMismatch

    expected = (CliError, ParamsError, EventLogError, OutputError, CorpusError, ForeignRunError)
    if isinstance(exc, expected):
        return " ".join(str(exc).split())
    if isinstance(exc, ResumeMismatch):
        return str(exc).splitlines()[0]
    if type(exc).__name__ in ("LlmCacheError", "CacheMiss", "SuiteBuildError"):
        return " ".join(str(exc).split())
    if isinstance(exc, sqlite3.DatabaseError):
        return f"LLM cache: {exc}"
    if isinstance(exc, OSError):
        return _os_error(exc)
    return None


def main(argv: Sequence[str] | None = None) -> int:
    try:
        args = build_parser().parse_args(argv)
    except SystemExit as exc:  # --help (0) or a usage error (2, already printed)
        return exc.code if isinstance(exc.code, int) else EXIT_ERROR
    try:
        return int(args.func(args))
    except KeyboardInterrupt as exc:
        from mbb.batch.runner import BatchInterrupted

        if isinstance(exc, BatchInterrupted):
            tables = f", tables in {exc.tables_dir}" if exc.tables_dir else ""
            print(
                f"interrupted: {exc.done} of {exc.total} run(s) of {exc.condition!r} finished"
                f"{tables}; the same command finishes the rest",
                file=sys.stderr,
            )
        else:
            print("interrupted", file=sys.stderr)
        return EXIT_INTERRUPTED
    except Exception as exc:
        line = _expected(exc)
        if line is None:
            traceback.print_exc()
            print(BUG_REPORT, file=sys.stderr)
            return 1
        print(f"error: {line}", file=sys.stderr)
        return EXIT_ERROR


if __name__ == "__main__":
    raise SystemExit(main())
