"""`mbb study FILE`: run a study (conditions x models x roles x seeds) from one YAML file,
resumably, then its analyses and report; `--estimate` says what it would cost first;
`--stub` answers every model from a loopback stub (no keys, no network)."""

from __future__ import annotations

import argparse
import contextlib
import signal
import sys
from collections.abc import Iterator
from typing import Any

from mbb.cli import common
from mbb.core.errors import one_line

__all__ = ["add_parser"]


@contextlib.contextmanager
def _term_as_interrupt() -> Iterator[None]:
    """SIGTERM (a batch scheduler's time limit, `kill`) stops a study as Ctrl-C does: the
    record says which runs were interrupted, one line says how to finish them, exit 130. It
    ended the study with no word and no record before. Only where SIGTERM has its default
    handler (mbb's sandbox reaper installs its own on first use, and keeps it then).

    A study started in the background of a script (`mbb study F &`) inherits SIGINT ignored,
    which would swallow the SIGTERM sent on as SIGINT (a newcomer's `kill` let a study spend
    on to its end): for the study's duration SIGINT is Python's own Ctrl-C again.

    Runs in the main thread only (Python's signal handlers do)."""
    if signal.getsignal(signal.SIGTERM) is not signal.SIG_DFL:
        yield
        return

    def as_ctrl_c(signum: int, frame: object) -> None:
        # sent on as SIGINT, handled by whichever Ctrl-C handler is in place (the event loop's
        # cancels the study's task cleanly; raising KeyboardInterrupt here would cut the loop)
        signal.raise_signal(signal.SIGINT)

    ignored = signal.getsignal(signal.SIGINT) is signal.SIG_IGN
    if ignored:
        signal.signal(signal.SIGINT, signal.default_int_handler)
    signal.signal(signal.SIGTERM, as_ctrl_c)
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, signal.SIG_DFL)
        if ignored:
            signal.signal(signal.SIGINT, signal.SIG_IGN)


def _run(args: argparse.Namespace) -> int:
    from mbb.batch.study import StudyError, load_study, run_study, summary_lines

    try:
        study = load_study(args.study, stub=args.stub, out=args.out)
    except StudyError as exc:
        raise common.CliError(str(exc)) from None
    if args.estimate:
        from mbb.batch.estimate import EstimateError, format_rows
        from mbb.batch.study import estimate_study

        bar = None
        if not args.quiet:
            from tqdm.auto import tqdm

            bar = tqdm(total=len(study.cells), desc="dry runs", unit="cell", file=sys.stderr)

        def step(done: int, total: int, name: str) -> None:
            if bar is not None:
                bar.n = done
                bar.set_postfix_str(name, refresh=True)

        try:
            rows = estimate_study(study, dry_runs=args.dry_runs, progress=step)
        except EstimateError as exc:
            raise common.CliError(str(exc)) from None
        finally:
            if bar is not None:
                bar.close()
        for line in format_rows(rows):
            print(line)
        if args.stub:  # the stub's models are not yours: their family rules and reasoning differ
            print(
                "note: an estimate under --stub is of the stub models (stub-<slot>: no model "
                "family, reasoning assumed), not of your endpoints; without --stub "
                "`mbb study FILE --estimate` needs no key either",
                file=sys.stderr,
            )
        return 0
    try:
        with _term_as_interrupt():
            outcome = run_study(
                study,
                progress=not args.quiet,
                report=not args.no_report,
                cluster=(args.scheduler or "dask") if args.cluster == "dask" else None,
                workers=args.workers,
                say=lambda line: print(line, file=sys.stderr),
                reanalyse=args.reanalyse,
            )
    except StudyError as exc:
        raise common.CliError(str(exc)) from None
    for line in summary_lines(study, outcome):
        print(line)
    for err in outcome.errors:
        print(f"FAILED {one_line(err, 2000)}", file=sys.stderr)  # no control character
    return outcome.status


def add_parser(sub: Any) -> None:
    s = sub.add_parser(
        "study", help="run a study file: conditions x models x roles x seeds, then its report"
    )
    s.add_argument("study", help="the study YAML file (e.g. studies/scarce.yaml)")
    s.add_argument(
        "--estimate", action="store_true", help="tokens, calls and cost per cell; runs nothing"
    )
    s.add_argument(
        "--stub",
        action="store_true",
        help="answer every model from a loopback stub (no keys, no network): the whole path, "
        "not a model's behaviour; models are named stub-<slot>, slots still to fill in are "
        "allowed, the default folder is outputs/studies/<name>-stub",
    )
    s.add_argument(
        "--dry-runs",
        type=common.whole(1, 100),
        default=1,
        help="with --estimate: seeds dry-run per condition and preset",
    )
    s.add_argument("--out", default=None, help="output folder (instead of the file's `out`)")
    s.add_argument(
        "--cluster",
        choices=["local", "dask"],
        default="local",
        help="local: every run on this process's event loop; dask: the cells spread over a "
        "Dask cluster (a LocalCluster by default), each endpoint's limits shared among them",
    )
    s.add_argument(
        "--workers", type=int, default=2, help="with --cluster dask: LocalCluster processes"
    )
    s.add_argument("--scheduler", default=None, help="with --cluster dask: scheduler address")
    s.add_argument("--no-report", action="store_true", help="runs only: no notebooks, no report")
    s.add_argument(
        "--reanalyse",
        action="store_true",
        help="run the analysis notebooks even when nothing they read has changed since the "
        "last analysis (by default its report is kept)",
    )
    s.add_argument("--quiet", action="store_true", help="no progress bar, no notebook lines")
    s.set_defaults(func=_run)
