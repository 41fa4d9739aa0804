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

__all__ = [
    "MAX_RECORD_BYTES",
    "NotRegularFile",
    "TooLarge",
    "loads",
    "open_binary",
    "open_text",
    "read_object",
    "read_text",
]

# the largest JSON record read from a folder (mbb's choice): a run's meta.json is about 6 KB,
# a condition.json 5 KB, a study's record a few hundred bytes per run; a 3 GB sparse meta.json
# (0 bytes on disk, in a tarball too) had been read whole by `mbb view` and `load_runs` and
# ended in a MemoryError
MAX_RECORD_BYTES = 64 << 20


class NotRegularFile(OSError):
    """A path that is not read: a symbolic link (where links are refused), a pipe, a device or
    a folder."""


class TooLarge(ValueError):
    """A record larger than any mbb writes (`MAX_RECORD_BYTES`): refused before it is read
    whole; the message is one line naming the file, its size and the cap."""


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


def read_text(path: str | Path, *, follow_links: bool = True, cap: int = MAX_RECORD_BYTES) -> str:
    """The UTF-8 text of the record file `path`, refused (TooLarge, a ValueError) when it is
    larger than `cap` bytes: its size is checked on the open file, and at most `cap` + 1 bytes
    are read, so a file that grows after the check is refused too. A link (unless
    `follow_links`), a pipe or a device raises NotRegularFile (an OSError); text that is not
    UTF-8 a UnicodeDecodeError (a ValueError).

    path: the file; follow_links: read a symbolic link's target; cap: the most bytes read."""
    with open_binary(path, follow_links=follow_links) as fh:
        size = os.fstat(fh.fileno()).st_size
        data = b"" if size > cap else fh.read(cap + 1)
    if size > cap or len(data) > cap:
        shown = max(size, len(data))
        raise TooLarge(
            f"{path}: {shown:,} bytes, larger than any record mbb writes (at most "
            f"{cap:,} bytes read, mbb's choice): not read"
        )
    return data.decode("utf-8")


def read_object(path: str | Path, *, follow_links: bool = False) -> dict[str, Any] | None:
    """The JSON object file `path` holds, or None when it is missing, a link (unless
    `follow_links`), not a regular file, unreadable, not UTF-8, not JSON or not an object: for
    records that are optional to their reader (a run's meta.json). A file larger than any
    record mbb writes raises TooLarge (a ValueError, one line): it is not a record of mbb's,
    and its reader says so rather than reading it as missing.

    path: the file; follow_links: read a symbolic link's target."""
    try:
        value = loads(read_text(path, follow_links=follow_links))
    except TooLarge:
        raise
    except (OSError, ValueError):  # UnicodeDecodeError is a ValueError
        return None
    return value if isinstance(value, dict) else None
