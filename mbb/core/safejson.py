"""JSON and text from files anyone can write (a colleague's run folder, a model's answer), read
so that nothing but a ValueError or an OSError comes out, and nothing blocks.

`json.loads` of text nested deeper than its parser recurses ("[[[[..." 100,000 deep) raises
RecursionError, which is not a ValueError: every reader written `except ValueError` let it
through, and `mbb view`, `load_runs` and `mbb run --out` crashed on such a file. A file that
is a named pipe blocks whoever opens it until someone writes to it: `load_runs` waited for ever
on a run whose meta.json was one (`open_text` refuses anything but a regular file)."""

from __future__ import annotations

import errno
import json
import os
import stat
from pathlib import Path
from typing import Any, BinaryIO, TextIO

__all__ = ["NotRegularFile", "loads", "open_binary", "open_text", "read_object"]


class NotRegularFile(OSError):
    """A path that is not read: a symbolic link (where links are refused), a pipe, a device or
    a folder."""


def loads(text: str | bytes) -> Any:
    """`json.loads(text)`, with JSON nested too deeply for the parser raising JSONDecodeError
    (a ValueError) like any other malformed JSON.

    text: the JSON document."""
    try:
        return json.loads(text)
    except RecursionError:
        doc = text if isinstance(text, str) else text.decode("utf-8", "replace")
        raise json.JSONDecodeError("JSON nested too deeply", doc[:100], 0) from None


def _regular_fd(path: str | Path, follow_links: bool) -> int:
    """A descriptor of `path` opened for reading, checked on the descriptor itself to be a
    regular file (so a file swapped for a pipe after a check cannot slip through)."""
    flags = os.O_RDONLY | os.O_NONBLOCK | (0 if follow_links else os.O_NOFOLLOW)
    try:
        fd = os.open(path, flags)
    except OSError as exc:
        if exc.errno == errno.ELOOP and not follow_links:
            raise NotRegularFile(f"{path}: a symbolic link: not read") from None
        raise
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            raise NotRegularFile(f"{path}: not a regular file (a pipe, a device or a folder)")
        os.set_blocking(fd, True)
    except BaseException:
        os.close(fd)
        raise
    return fd


def open_text(path: str | Path, *, follow_links: bool = True, newline: str | None = None) -> TextIO:
    """`path` opened for reading as UTF-8 text, when it is a regular file; else NotRegularFile
    (an OSError), without blocking: a pipe is opened non-blocking and refused, so no reader
    waits on one. A missing file raises FileNotFoundError as `open` does.

    path: the file; follow_links: False refuses a symbolic link (in a shared folder it could
    point at any file of the reader's); newline: as `open`'s ("" for the csv module)."""
    fd = _regular_fd(path, follow_links)
    try:
        return os.fdopen(fd, encoding="utf-8", newline=newline)
    except BaseException:
        os.close(fd)
        raise


def open_binary(path: str | Path, *, follow_links: bool = True) -> BinaryIO:
    """`open_text`'s rule for a file read as bytes (an event log, whose size is checked on
    the open file before it is read).

    path: the file; follow_links: False refuses a symbolic link."""
    fd = _regular_fd(path, follow_links)
    try:
        return os.fdopen(fd, "rb")
    except BaseException:
        os.close(fd)
        raise


def read_object(path: str | Path, *, follow_links: bool = False) -> dict[str, Any] | None:
    """The JSON object file `path` holds, or None when it is missing, a link (unless
    `follow_links`), not a regular file, unreadable, not UTF-8, not JSON or not an object: for
    records that are optional to their reader (a run's meta.json).

    path: the file; follow_links: read a symbolic link's target."""
    try:
        with open_text(path, follow_links=follow_links) as fh:
            value = loads(fh.read())
    except (OSError, ValueError):  # UnicodeDecodeError is a ValueError
        return None
    return value if isinstance(value, dict) else None
