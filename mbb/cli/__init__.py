"""mbb's command line: one module per command, each a thin layer over a library function.

Every expected failure (bad input, a corrupt log, an output folder in use, a full disk) is one
line on stderr, `error: ...`, and exit status 2; Ctrl-C is one line and status 130. Anything
else is a bug: its traceback is kept, followed by a line saying where to report it.

A command module has `add_parser(subparsers)`; it imports the library it drives inside its
command function, so `mbb --help` stays fast. To add a command: write `mbb/cli/<name>.py` and
list it in `COMMANDS`.
"""

from __future__ import annotations

import sys
import traceback
from collections.abc import Sequence
from types import ModuleType

from mbb.cli import (
    classify,
    common,
    estimate,
    figures,
    local_llm,
    notebook,
    params,
    report,
    resume,
    run,
    study,
    sweep,
    tables,
    tasks,
    view,
)
from mbb.cli.common import EXIT_ERROR, EXIT_INTERRUPTED, CliError
from mbb.cli.errors import BUG_REPORT, expected

__all__ = ["COMMANDS", "EXIT_ERROR", "EXIT_INTERRUPTED", "CliError", "build_parser", "main"]

# in the order `mbb --help` lists them
COMMANDS: tuple[ModuleType, ...] = (
    study,
    run,
    tables,
    notebook,
    sweep,
    report,
    view,
    resume,
    figures,
    estimate,
    params,
    classify,
    tasks,
    local_llm,
)


def build_parser() -> common.Parser:
    """The `mbb` parser with every command of `COMMANDS`."""
    p = common.Parser(
        prog="mbb",
        description="The SCARCE arena: run conditions and studies, analyse and report them.",
    )
    sub = p.add_subparsers(dest="command", required=True, metavar="COMMAND")
    for command in COMMANDS:
        command.add_parser(sub)
    return p


def _interrupted_beneath(exc: BaseException) -> bool:
    """Whether a KeyboardInterrupt lies in `exc`'s chain of explicit causes (`raise .. from`).

    Only causes, not contexts: an error raised while handling a Ctrl-C is a bug to report.

    Parameters:
        exc: the exception the command raised.
    """
    seen: set[int] = set()
    current: BaseException | None = exc
    while current is not None and id(current) not in seen:
        if isinstance(current, KeyboardInterrupt):
            return True
        seen.add(id(current))
        current = current.__cause__
    return False


def main(argv: Sequence[str] | None = None) -> int:
    try:
        try:
            args = build_parser().parse_args(argv)
        except SystemExit as exc:  # --help (0) or a usage error (2, already printed)
            return exc.code if isinstance(exc.code, int) else EXIT_ERROR
        return int(args.func(args))
    except KeyboardInterrupt as exc:
        # no import here: a Ctrl-C can land while a library is half imported, and importing
        # again would fail on it (a traceback); a BatchInterrupted exists only once its module
        # is loaded
        runner = sys.modules.get("mbb.batch.runner")
        if runner is not None and isinstance(exc, runner.BatchInterrupted):
            tables = f", tables in {exc.tables_dir}" if exc.tables_dir else ""
            print(
                f"interrupted: {exc.done} of {exc.total} run(s) of {exc.condition!r} finished"
                f"{tables}; the same command finishes the rest",
                file=sys.stderr,
            )
        else:
            print(getattr(exc, "line", "interrupted"), file=sys.stderr)
        return EXIT_INTERRUPTED
    except Exception as exc:
        if _interrupted_beneath(exc):
            # Python wraps some exceptions raised during class creation: a Ctrl-C landing in a
            # dataclass's __set_name__ while a module imports arrives as a RuntimeError whose
            # cause is the KeyboardInterrupt; it is still the user's Ctrl-C, not a bug
            print("interrupted", file=sys.stderr)
            return EXIT_INTERRUPTED
        line = expected(exc)
        if line is None:
            traceback.print_exc()
            print(BUG_REPORT, file=sys.stderr)
            return 1
        print(f"error: {line}", file=sys.stderr)
        return EXIT_ERROR

    raise SystemExit(main())
