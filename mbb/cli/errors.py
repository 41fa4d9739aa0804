"""Which failures are expected (one line, exit 2) and which are bugs (a traceback)."""

from __future__ import annotations

import errno

from mbb.cli.common import CliError
from mbb.core.errors import for_terminal

__all__ = ["BUG_REPORT", "expected"]

BUG_REPORT = (
    "mbb: this is a bug, not a problem with your input; please report it on mbb's issue "
    "tracker with the command and the traceback above"
)


def _os_error(exc: OSError) -> str:
    where = exc.filename if exc.filename is not None else None
    if exc.errno in (errno.ENOSPC, errno.EDQUOT):
        what = "no space left on the device" if exc.errno == errno.ENOSPC else "disk quota exceeded"
        return f"{what}{f' (writing {where})' if where else ''}: free some space and run again"
    text = exc.strerror or str(exc)
    return f"{where}: {text}" if where else text


def expected(exc: BaseException) -> str | None:
    """The one-line message of an expected failure, or None (a bug); its control characters
    written out (`for_terminal`: a name from a shared folder may hold an escape sequence)."""
    message = _expected(exc)
    return None if message is None else for_terminal(message)


def _expected(exc: BaseException) -> str | None:
    import sqlite3

    from mbb.analysis.corpus import CorpusError
    from mbb.batch.outdir import OutputError
    from mbb.batch.runner import BatchWorkerDied
    from mbb.batch.runs import ForeignRunError
    from mbb.core.eventlog import EventLogError, ResumeMismatch
    from mbb.params import ParamsError

    expected = (
        CliError,
        ParamsError,
        EventLogError,
        OutputError,
        CorpusError,
        ForeignRunError,
        BatchWorkerDied,
    )
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
