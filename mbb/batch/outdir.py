"""An output folder holds one condition and has one writer at a time.

`claim(out_dir, condition)` is held while runs are written into a condition's folder (by
`run_many` and `resume_run`): it creates the folder, takes an exclusive `fcntl` lock on
`<out>/.mbb.lock` (a second writer gets `OutputBusy` at once; the lock goes with the process,
so a killed writer leaves nothing to clean up) and checks that the folder holds no other
condition (`condition.json`, or the logs already there, against this one's resolved params).
"""

from __future__ import annotations

import contextlib
import errno
import fcntl
import json
import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from mbb.core import safejson
from mbb.core.eventlog import MAX_LINE_CHARS
from mbb.core.nested import comparable_params, first_difference
from mbb.core.paths import replace_file
from mbb.params import Condition

__all__ = ["ConditionMismatch", "OutputBusy", "OutputError", "claim", "replace_file"]

LOCK_NAME = ".mbb.lock"
MARKER_NAME = "condition.json"


class OutputError(RuntimeError):
    """The output folder cannot be used (a file, not writable, busy, another condition)."""


class OutputBusy(OutputError):
    """Another process is writing into the folder."""


class ConditionMismatch(OutputError):
    """The folder already holds runs of another condition."""


def _os_problem(path: Path, exc: OSError) -> OutputError:
    if exc.errno in (errno.EACCES, errno.EPERM, errno.EROFS):
        return OutputError(f"{path}: not writable ({exc.strerror})")
    if exc.errno in (errno.ENOTDIR, errno.EEXIST):
        return OutputError(f"{path}: a file is in the way of the folder ({exc.strerror})")
    return OutputError(f"{path}: {exc.strerror or exc}")


def _held_condition(out_dir: Path) -> tuple[str, dict[str, Any], str] | None:
    """(name, params, where) of the condition the folder already holds, if any."""
    marker = out_dir / MARKER_NAME
    if marker.is_file():
        try:
            d = safejson.loads(safejson.read_text(marker))
            return str(d["condition"]), dict(d["params"]), str(marker)
        except safejson.TooLarge as exc:
            raise OutputError(str(exc)) from None
        except (ValueError, KeyError, TypeError):
            raise OutputError(f"{marker}: not a condition record (corrupt)") from None
    for log in sorted(out_dir.glob("*/events.jsonl")):  # a folder written before the record
        try:
            with safejson.open_text(log, follow_links=False) as fh:
                first = safejson.loads(fh.readline(MAX_LINE_CHARS + 1))
            return str(first["condition"]), dict(first["params"]), str(log)
        except (ValueError, KeyError, TypeError, OSError):
            continue  # not readable as a run: reported when it is read
    return None


def _check_condition(out_dir: Path, condition: Condition) -> None:
    params = condition.model_dump(mode="json")
    held = _held_condition(out_dir)
    if held is not None:
        name, old, _where = held
        if comparable_params(old) != comparable_params(params):
            this = (
                f"this run is {condition.name!r}"
                if name != condition.name
                else "this run has other params"
            )
            raise ConditionMismatch(
                f"{out_dir} holds runs of condition {name!r} and {this} "
                f"({first_difference(old, params)}); a folder never mixes conditions: choose "
                "another --out"
            )
    if held is None or not (out_dir / MARKER_NAME).is_file():
        # a fresh file (O_EXCL: never one planted in a shared folder), renamed over the name
        tmp = out_dir / f".{MARKER_NAME}.{os.getpid()}.{os.urandom(4).hex()}"
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o644)
        with os.fdopen(fd, "w", encoding="utf-8") as fh:
            fh.write(json.dumps({"condition": condition.name, "params": params}, indent=1))
        os.replace(tmp, out_dir / MARKER_NAME)


@contextlib.contextmanager
def claim(out_dir: str | Path, condition: Condition) -> Iterator[Path]:
    """Hold `out_dir` for writing runs of `condition` (see the module's docstring)."""
    out_dir = Path(out_dir)
    if out_dir.exists() and not out_dir.is_dir():
        raise OutputError(f"{out_dir}: is a file, not a folder")
    try:
        out_dir.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise _os_problem(out_dir, exc) from None
    lock = out_dir / LOCK_NAME
    try:
        # never through a link: a `.mbb.lock` planted in a shared folder would be truncated
        fd = os.open(lock, os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW, 0o644)
    except OSError as exc:
        if exc.errno == errno.ELOOP:
            raise OutputError(
                f"{lock}: a symbolic link; mbb locks an output folder only with a file of its own"
            ) from None
        raise _os_problem(out_dir, exc) from None
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            pid = os.pread(fd, 32, 0).decode(errors="replace").strip() or "?"
            raise OutputBusy(
                f"{out_dir}: another mbb process (pid {pid}) is writing into this folder; wait "
                "for it to finish or choose another --out"
            ) from None
        os.ftruncate(fd, 0)
        os.pwrite(fd, f"{os.getpid()}\n".encode(), 0)
        try:
            _check_condition(out_dir, condition)
        except OSError as exc:
            raise _os_problem(out_dir, exc) from None
        yield out_dir
    finally:
        os.close(fd)  # releases the lock
