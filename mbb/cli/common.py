"""What the commands share: the error type, number arguments, `--set` overrides, notebooks."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any, NoReturn

__all__ = [
    "EXIT_ERROR",
    "EXIT_INTERRUPTED",
    "MAX_PROCESSES",
    "MAX_RUNS",
    "MAX_SEED",
    "CliError",
    "Parser",
    "add_set",
    "notebook_source",
    "overrides",
    "whole",
]

EXIT_ERROR = 2  # an expected failure: bad input, a corrupt log, a busy or unusable folder
EXIT_INTERRUPTED = 130  # Ctrl-C (128 + SIGINT)
MAX_RUNS = 100_000  # per command (and per sweep job); checked before anything is allocated
MAX_PROCESSES = 64
MAX_SEED = 2**31 - 1


class CliError(Exception):
    """An expected failure, reported as one line (`error: <message>`) with exit status 2."""


class Parser(argparse.ArgumentParser):
    """argparse, but a usage error is one line (`error: mbb run: ...`) and exit status 2."""

    def error(self, message: str) -> NoReturn:
        print(f"error: {self.prog}: {message} (see {self.prog} --help)", file=sys.stderr)
        raise SystemExit(EXIT_ERROR)


def whole(lo: int, hi: int) -> Any:
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


def overrides(options: Sequence[str] | None) -> dict[str, Any]:
    """The `--set KEY=VALUE` options, deep-merged into one mapping."""
    from mbb.params import deep_merge, parse_set_option

    merged: dict[str, Any] = {}
    for opt in options or ():
        merged = deep_merge(merged, parse_set_option(opt))
    return merged


def notebook_source(notebook: str) -> Path:
    """The notebook a command names (a bare name is one of mbb's own), or a CliError."""
    from mbb.core.paths import notebook_file

    try:
        src = notebook_file(notebook)
    except FileNotFoundError as exc:
        raise CliError(str(exc)) from None
    if not src.is_file():
        raise CliError(f"{notebook}: no such notebook ({src})")
    return src


def add_set(p: argparse.ArgumentParser) -> None:
    """The repeatable `--set KEY=VALUE` option."""
    p.add_argument(
        "--set",
        action="append",
        metavar="KEY=VALUE",
        help="override one field of the params file, e.g. budget.credits=1500 or llm.cache=off "
        "(VALUE is read as YAML; repeatable)",
    )
