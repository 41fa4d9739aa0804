"""`mbb tables DIR`: (re)derive the parquet tables of a run or condition folder.

A folder being written is not tabulated: its tables would count the runs finished so far and
say nothing. An output folder whose lock another mbb process holds (`mbb.batch.outdir`) is
refused, and so are runs whose log has no `run_ended` (still running without a lock, or killed;
`mbb resume` finishes those); `--partial` tabulates them as they are, with a warning naming them.
"""

from __future__ import annotations

import argparse
import contextlib
import fcntl
import os
import sys
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

from mbb.cli import common

__all__ = ["add_parser"]

LOCK_NAME = ".mbb.lock"  # mbb.batch.outdir.LOCK_NAME (not imported: `mbb --help` stays light)
_TAIL = 8192  # bytes read from a log's end to find its last line (run_ended's error is <= 2,000)


@contextlib.contextmanager
def _not_being_written(folders: Sequence[Path], partial: bool) -> Iterator[None]:
    """Hold a shared lock on each output folder's `.mbb.lock` while reading it: a writer holds
    it exclusively (`mbb run`, `mbb resume`, a notebook's `run_many`), so a folder being written
    is refused (or, with `partial`, warned about), and none starts writing meanwhile."""
    fds: list[int] = []
    try:
        for folder in folders:
            lock = folder / LOCK_NAME
            try:
                fd = os.open(lock, os.O_RDONLY | os.O_NOFOLLOW)
            except OSError:
                continue  # no lock file (or a planted link): no mbb writer has it
            fds.append(fd)
            try:
                fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
            except BlockingIOError:
                pid = os.pread(fd, 32, 0).decode(errors="replace").strip() or "?"
                what = f"{folder}: an mbb process (pid {pid}) is writing into this folder"
                if not partial:
                    raise common.CliError(
                        f"{what}; its tables would count only the runs finished so far: wait for "
                        "it to end, or give --partial to tabulate them anyway"
                    ) from None
                print(f"warning: {what}: tabulating the runs as they are now", file=sys.stderr)
        yield
    finally:
        for fd in fds:
            os.close(fd)  # releases the lock


def _ended(log: Path) -> bool:
    """Whether the log's last complete line is a `run_ended` event (read from its tail)."""
    with log.open("rb") as fh:
        fh.seek(0, os.SEEK_END)
        size = fh.tell()
        fh.seek(max(0, size - _TAIL))
        tail = fh.read()
    lines = [x for x in tail.split(b"\n")[:-1] if x]  # complete lines only
    return bool(lines) and lines[-1].startswith(b'{"kind":"run_ended"')


def _run(args: argparse.Namespace) -> int:
    from mbb.core.tables import tables_from_run_dirs, write_tables

    root = Path(args.run_dir)
    if not root.is_dir():
        raise common.CliError(f"{root}: no such folder")
    if (root / "events.jsonl").is_file():
        run_dirs = [root]
    else:
        run_dirs = sorted(p.parent for p in root.glob("*/events.jsonl"))
    if not run_dirs:
        raise common.CliError(f"{root}: no events.jsonl here or in its sub-folders")
    folders = sorted({d.parent for d in run_dirs} | ({root} if root not in run_dirs else set()))
    with _not_being_written(folders, args.partial):
        tables = tables_from_run_dirs(run_dirs)  # every log parsed first: a bad line is named
        open_runs = [d for d in run_dirs if not _ended(d / "events.jsonl")]
        if open_runs:
            names = ", ".join(d.name for d in open_runs[:3]) + (
                ", ..." if len(open_runs) > 3 else ""
            )
            what = f"{len(open_runs)} of {len(run_dirs)} run(s) have not ended ({names})"
            if not args.partial:
                raise common.CliError(
                    f"{root}: {what}: still being written, or killed (`mbb resume` finishes "
                    "them); give --partial to tabulate them as they are"
                )
            print(f"warning: {root}: {what}: tabulated as they are", file=sys.stderr)
        out = Path(args.out) if args.out else root / "tables"
        if out.exists() and not out.is_dir():
            raise common.CliError(f"{out}: is a file, not a folder")
        write_tables(tables, out)
    for name, df in tables.items():
        print(f"{name:16s} {df.height:8d} rows")
    print(f"{len(run_dirs)} run(s) -> {out}/")
    return 0


def add_parser(sub: Any) -> None:
    t = sub.add_parser("tables", help="derive parquet tables from a run (or condition) folder")
    t.add_argument("run_dir", help="a run folder (with events.jsonl) or a folder of run folders")
    t.add_argument("--out", default=None, help="tables folder (default RUN_DIR/tables)")
    t.add_argument(
        "--partial",
        action="store_true",
        help="tabulate a folder being written, or runs that have not ended, as they are (with "
        "a warning); by default they are refused",
    )
    t.set_defaults(func=_run)
