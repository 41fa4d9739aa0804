"""Tables people read: numbers rounded per measure, units in the headers, intervals written as
"0.52 [0.41, 0.63]", every row shown (a long table scrolls), every string escaped.

A polars frame shown as it is prints "shape: (54, 14)", dtype rows, quoted strings, six
decimals, and hides rows behind "…" and columns past the right edge. `table(df)` returns a
`Table` that notebooks show as HTML (`_repr_html_`) and that prints as aligned plain text; the
report pages call `Table.to_html()`. A small renderer of mbb's own rather than a library
(great_tables, itables): it needs only polars, nothing runs script in the page, and it writes
the same rules into notebooks, reports and the compare page.

How a column is shown (mbb's choices; `formats=` overrides any):

- text left-aligned, numbers right-aligned;
- shares and rates (`completion`, `deadline_miss`, `progress`, `score`, `*_rate`, `*_share`,
  `share_*`) as percentages, with more digits where rounding would make an unfinished 0.9992
  read 100 %;
- money (`*_usd`) in dollars; counts with thousands separators; other numbers to 3
  significant digits;
- an interval `x` with `x_ci_low`/`x_ci_high` (also `_low`/`_high`, `_lo`/`_hi`, and a bare
  `ci_low`/`ci_high` after `mean`) becomes one column "x [low, high]";
- a value that cannot be computed says so ("n/a", or "n/a (1 seed)" for an interval of one
  seed), never 0 or a blank; a text column `x_why` beside `x` is not shown as a column but says
  why in each of `x`'s missing cells ("n/a (scripted: no API calls)");
- a table whose rows rest on fewer than `MIN_SEEDS` seeds (an `n`, `seeds` or `runs` column)
  says so in its caption.
"""

from __future__ import annotations

import functools
import html
import math
import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import polars as pl

__all__ = [
    "MIN_SEEDS",
    "REPORT_CSS",
    "Table",
    "few_seeds_note",
    "format_value",
    "kind_of",
    "share_text",
    "table",
]

MIN_SEEDS = 5  # below this, a mean or an interval over seeds is flagged where it is shown
NA = "n/a"
MAX_HEIGHT_EM = 32  # taller tables scroll inside their block (the header stays in view)
_WRAP_FROM = 60  # characters: a text column with a longer cell wraps, others stay on one line

_SHARES = frozenset(
    {
        "completion",
        "deadline_miss",
        "progress",
        "score",
        "utilisation",
        "utilization",
        "load",
        "resolved",  # a share of worker-subruns, beside completion
        "repeat_win_chance",  # beside repeat_win_rate, compared with it
        "corrected",  # a corrected prevalence, beside its raw share
    }
)
# `share_of_rounds`, `share_relational_institution`: a share named first is one too (they read
# 1.00 and 0.800 beside percentages elsewhere in the same report, a reviewer's find)
_SHARE_RX = re.compile(r"(_rate|_share|^share|^share_.*|^rate|_prevalence|^prevalence)$")
_USD_RX = re.compile(r"(_usd|^usd|^cost)$")
_COUNT_COLUMNS = frozenset({"n", "runs", "seeds", "calls"})
_ID_COLUMNS = frozenset({"subrun", "round", "seed", "seq", "worker_subruns"})
_SEED_COLUMNS = ("n_seeds", "seeds", "runs", "n")
# (low suffix, high suffix) of an interval around the column it follows
_INTERVAL_SUFFIXES = (("_ci_low", "_ci_high"), ("_low", "_high"), ("_lo", "_hi"))
_BARE_CENTRES = ("mean", "value", "estimate", "rate", "diff")
# units of measures whose name does not carry them: shown in the header
UNITS: dict[str, str] = {
    "mean_bid": "credits",
    "credits_per_run": "credits",
    "credits_paid": "credits",
    "wall_s": "s",
    "mean_duration": "s",
    "spent": "credits",
    "spend_per_worker": "credits",
}


def share_text(value: float, decimals: int = 1, *, percent: bool = True) -> str:
    """A share in [0, 1] as text that never rounds an unfinished value onto done (0.9992 reads
    99.92 %, not 100.0 %) nor a non-zero one onto nothing.

    value: the share; decimals: digits after the point at least; percent: as a percentage
    (else as a fraction, 0.999)."""
    scale = 100.0 if percent else 1.0
    top = scale
    d = decimals
    text = f"{value * scale:.{d}f}"
    while 0 < value < 1 and d < 6 and float(text) in (0.0, top):
        d += 1
        text = f"{value * scale:.{d}f}"
    return f"{text}%" if percent else text


def _sig(value: float, digits: int = 3) -> str:
    """`value` to `digits` significant digits, never in exponent form, with separators."""
    if value == 0:
        return "0"
    mag = math.floor(math.log10(abs(value)))
    decimals = max(0, digits - 1 - mag)
    return f"{value:,.{decimals}f}"


@functools.cache
def _text_shares() -> frozenset[str]:
    """The text measures (`mbb.analysis.text_measures`): each a share of rounds, rules or
    words, shown in percent like the outcome shares (imported when first needed: the renderer
    itself needs only polars)."""
    from mbb.analysis.text_measures import TEXT_MEASURES

    return frozenset(TEXT_MEASURES)


def kind_of(name: str, dtype: pl.DataType) -> str:
    """How a column is shown: 'text', 'id' (a number that names: seed, subrun, round), 'int',
    'float', 'share', 'usd', 'bool' or 'list'.

    name: the column's name (measure names decide shares and money); dtype: its polars type."""
    base = name.lower()
    base = base.removesuffix("_diff")  # a difference of shares is shown as one (in points)
    if dtype == pl.Boolean:
        return "bool"
    if isinstance(dtype, pl.List | pl.Array):
        return "list"
    if not dtype.is_numeric():
        return "text"
    if base in _SHARES or _SHARE_RX.search(base) or base in _text_shares():
        return "share"
    if _USD_RX.search(base):
        return "usd"
    if base in _ID_COLUMNS and dtype.is_integer():
        return "id"
    if dtype.is_integer() or base in _COUNT_COLUMNS:
        return "int"
    return "float"


def format_value(value: Any, kind: str, *, signed: bool = False, na: str = NA) -> str:
    """One value as text, by `kind` (see `kind_of`).

    value: the value (None or NaN gives `na`); kind: how to show it; signed: write a + before
    positive numbers (differences); na: the text for a value that cannot be computed."""
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return na
    if kind == "bool":
        return "yes" if value else "no"
    if kind == "list":
        return ", ".join(str(v) for v in value)
    if kind in ("text", "id"):
        return str(value)
    if isinstance(value, float) and math.isinf(value):
        return "∞" if value > 0 else "−∞"
    sign = "+" if signed and value > 0 else ""
    if kind == "share":
        if signed:
            return f"{sign}{value * 100:.1f} pp"
        return share_text(float(value))
    if kind == "usd":
        v = float(value)
        body = f"{abs(v):,.2f}" if abs(v) >= 1 else _sig(abs(v), 3)
        return f"{'-' if v < 0 else sign}${body}"
    if kind == "int":
        if isinstance(value, float) and not value.is_integer():
            return sign + _sig(value)
        return f"{sign}{int(value):,}"
    return sign + _sig(float(value))


@dataclass(frozen=True)
class _Col:
    name: str  # the frame's column (the interval's centre)
    header: str
    kind: str
    low: str | None = None
    high: str | None = None
    signed: bool = False
    per_measure: bool = False  # the row's measure (`measure_column`) decides the format
    why: str | None = None  # a text column saying why a missing value is missing


def _intervals(columns: Sequence[str]) -> dict[str, tuple[str, str]]:
    """Centre column -> (low, high) columns, for every interval the frame holds."""
    cols = set(columns)
    out: dict[str, tuple[str, str]] = {}
    for c in columns:
        for lo, hi in _INTERVAL_SUFFIXES:
            if f"{c}{lo}" in cols and f"{c}{hi}" in cols and c not in out:
                out[c] = (f"{c}{lo}", f"{c}{hi}")
    if "ci_low" in cols and "ci_high" in cols:
        centre = next((c for c in _BARE_CENTRES if c in cols and c not in out), None)
        if centre is not None:
            out[centre] = ("ci_low", "ci_high")
    return out


def _seed_column(df: pl.DataFrame) -> str | None:
    return next((c for c in _SEED_COLUMNS if c in df.columns and df[c].dtype.is_numeric()), None)


def few_seeds_note(
    df: pl.DataFrame, min_seeds: int = MIN_SEEDS, column: str | None = None
) -> str | None:
    """A warning when a row of `df` rests on fewer than `min_seeds` seeds with a value, else
    None. A row whose value no seed could compute (0 seeds with a value) is n/a, not a mean
    over 0 seeds: the warning counts it apart. When `df` has a `<column>_na` column (the seeds
    whose value is n/a, as `n_na` beside `n` in `mbb.analysis.compare.condition_table`), the
    warning says how many seeds had a value and how many were n/a.

    df: the table shown; min_seeds: the threshold (mbb's: 5); column: the column holding each
    row's seeds with a value (default: the first of `n_seeds`, `seeds`, `runs`, `n`)."""
    col = column or _seed_column(df)
    if col is None or df.is_empty():
        return None
    na_col = f"{col}_na" if f"{col}_na" in df.columns else None
    low = df.filter((pl.col(col) > 0) & (pl.col(col) < min_seeds))
    none = df.filter(pl.col(col).fill_null(0) == 0)
    parts = []
    if low.height:
        least = low.sort(col).row(0, named=True)
        detail = f"as few as {least[col]} with a value"
        if na_col:
            with_na = low.filter(pl.col(na_col) > 0)
            # "0 n/a" reads oddly beside "as few as 3 with a value" (a reviewer's find)
            detail += (f", {least[na_col]} n/a" if least[na_col] else "") + (
                f"; {with_na.height} of these rows have seeds whose value is n/a "
                f"(up to {int(with_na[na_col].max())})"  # type: ignore[arg-type]
                if with_na.height
                else ""
            )
        parts.append(
            f"⚠ {low.height} of {df.height} row(s) rest on fewer than {min_seeds} seeds with a "
            f"value ({detail}): their means and intervals are not to be trusted"
        )
    if none.height:
        nas = sorted({int(v) for v in none[na_col].drop_nulls()}) if na_col else []
        seeds = "–".join(str(v) for v in dict.fromkeys([nas[0], nas[-1]])) if nas else ""
        parts.append(
            f"⚠ {none.height} of {df.height} row(s) have no seed with a value"
            + (f" ({seeds} seeds n/a)" if seeds else "")
            + ": not computable, shown n/a"
        )
    return "; ".join(parts) or None


@dataclass
class Table:
    """A formatted table: `_repr_html_` for notebooks, `to_html()` for pages, `str()` for
    terminals. Build it with `table(df, ...)`."""

    frame: pl.DataFrame
    columns: list[_Col]
    caption: str | None = None
    notes: list[str] = field(default_factory=list)
    na: Mapping[str, str] = field(default_factory=dict)
    max_height_em: int = MAX_HEIGHT_EM
    seeds_column: str | None = None
    measure_column: str | None = None
    measure_labels: Mapping[str, str] = field(default_factory=dict)

    def cells(self) -> list[list[str]]:
        """Every row's cells as text (the interval columns joined)."""
        rows = []
        for r in self.frame.iter_rows(named=True):
            row = []
            for c in self.columns:
                na = self.na.get(c.name, NA)
                k = c.kind
                if c.per_measure and self.measure_column is not None:
                    k = kind_of(str(r[self.measure_column]), pl.Float64())
                if c.why is not None and r[c.name] is None and r[c.why]:
                    na = f"{NA} ({r[c.why]})"
                text = format_value(r[c.name], k, signed=c.signed, na=na)
                if c.name == self.measure_column and r[c.name] is not None:
                    text = self.measure_labels.get(str(r[c.name]), text)
                if c.low is not None and c.high is not None and r[c.name] is not None:
                    lo, hi = r[c.low], r[c.high]
                    if lo is None or hi is None or _nan(lo) or _nan(hi) or _inf(lo, hi):
                        n = _row_seeds(r, self.seeds_column)
                        why = f"n/a ({n} seed{'s' if n != 1 else ''})" if n is not None else NA
                        text = f"{text} [{why}]"
                    else:
                        text = (
                            f"{text} [{format_value(lo, k, signed=c.signed)}, "
                            f"{format_value(hi, k, signed=c.signed)}]"
                        )
                row.append(text)
            rows.append(row)
        return rows

    def _aligns(self) -> list[str]:
        return ["l" if c.kind in ("text", "list", "bool") else "r" for c in self.columns]

    def to_html(self, *, table_id: str | None = None) -> str:
        """The table as an HTML fragment: caption and notes above, every row, numbers
        right-aligned, a block that scrolls past `max_height_em` with the header kept in view;
        every string escaped."""
        esc = html.escape
        rows = self.cells()
        aligns = self._aligns()
        # short text stays on one line; a column with long text (notes, evidence) wraps
        aligns = [
            "w" if a == "l" and any(len(r[i]) > _WRAP_FROM for r in rows) else a
            for i, a in enumerate(aligns)
        ]
        head = "".join(
            f'<th class="mbb-{a}" scope="col">{esc(c.header)}</th>'
            for c, a in zip(self.columns, aligns, strict=True)
        )
        body = "".join(
            "<tr>"
            + "".join(
                f'<td class="mbb-{a}">{esc(t)}</td>' for t, a in zip(row, aligns, strict=True)
            )
            + "</tr>"
            for row in rows
        )
        caption = f"<caption>{esc(self.caption)}</caption>" if self.caption else ""
        notes = "".join(f'<p class="mbb-note">{esc(n)}</p>' for n in self.notes)
        ident = f' id="{esc(table_id)}"' if table_id else ""
        empty = "" if self.frame.height else '<p class="mbb-note">no rows</p>'
        return (
            f"<style>{_CSS}</style>{notes}"
            f'<div class="mbb-table" style="max-height:{self.max_height_em}em">'
            f"<table{ident}>{caption}<thead><tr>{head}</tr></thead><tbody>{body}</tbody>"
            f"</table></div>{empty}"
        )

    def _repr_html_(self) -> str:
        return self.to_html()

    def __str__(self) -> str:
        rows = self.cells()
        headers = [c.header for c in self.columns]
        widths = [max([len(h), *(len(r[i]) for r in rows)]) for i, h in enumerate(headers)]
        aligns = self._aligns()

        def line(cells: Sequence[str]) -> str:
            return "  ".join(
                t.ljust(w) if a == "l" else t.rjust(w)
                for t, w, a in zip(cells, widths, aligns, strict=True)
            ).rstrip()

        out = [*(self.notes), *([self.caption] if self.caption else [])]
        out += [line(headers), line(["-" * w for w in widths]), *(line(r) for r in rows)]
        return "\n".join(out)

    def __repr__(self) -> str:
        return str(self)

    def to_csv(self) -> str:
        """The unformatted values as CSV (every column, full precision): for export; a text
        cell a spreadsheet would read as a formula (a colleague's worker name) is guarded
        (`mbb.core.csvsafe`)."""
        from mbb.core.csvsafe import write_csv

        return write_csv(self.frame) or ""


# the table's look, in the notebook (a style block in the output) and in a report's pages
# (which keep no style block from an output: `mbb.batch.report` writes `REPORT_CSS` itself)
_CSS = (
    ".mbb-table{overflow:auto;display:inline-block;max-width:100%;border:1px solid #ddd}"
    ".mbb-table table{border-collapse:collapse;font-size:13px;margin:0}"
    ".mbb-table th{position:sticky;top:0;background:#f3f3f3;z-index:1}"
    ".mbb-table th,.mbb-table td{border-bottom:1px solid #e3e3e3;padding:.25rem .6rem;"
    "white-space:nowrap;font-variant-numeric:tabular-nums}"
    ".mbb-table td.mbb-r,.mbb-table th.mbb-r{text-align:right}"
    ".mbb-table td.mbb-l,.mbb-table th.mbb-l{text-align:left}"
    ".mbb-table td.mbb-w,.mbb-table th.mbb-w{text-align:left;white-space:normal;min-width:20em;"
    "max-width:40em}"
    ".mbb-table caption{caption-side:top;text-align:left;font-weight:600;padding:.3rem .6rem}"
    "p.mbb-note{color:#8a5a00;margin:.2rem 0}"
)
# A report positions no class an output may carry (a notebook could lay a fake page over the
# real one): the header row is not sticky there, and the scroll box's height is fixed (the
# inline max-height is not kept).
REPORT_CSS = (
    _CSS.replace(
        ".mbb-table th{position:sticky;top:0;background:#f3f3f3;z-index:1}",
        ".mbb-table th{background:#f3f3f3}",
    )
    + ".mbb-table{max-height:40em}"
)


def _nan(v: Any) -> bool:
    return isinstance(v, float) and math.isnan(v)


def _inf(lo: Any, hi: Any) -> bool:
    return (isinstance(lo, float) and math.isinf(lo)) or (isinstance(hi, float) and math.isinf(hi))


def _row_seeds(row: Mapping[str, Any], column: str | None) -> int | None:
    v = row.get(column) if column else None
    if isinstance(v, int | float) and not _nan(v):
        return int(v)
    return None


# headers that say more than their column's name: mbb's tables name a scripted worker's persona
# in the `model` column (an LLM worker's model otherwise)
_HEADERS = {"model": "model / persona"}


def _header(name: str, kind: str, labels: Mapping[str, str], interval: bool) -> str:
    text = (
        labels[name]
        if name in labels
        else _HEADERS.get(name) or re.sub(r"_usd$", "", name).replace("_", " ")
    )
    unit = UNITS.get(name)
    if kind == "usd" and "usd" not in text.lower():
        unit = "USD"
    if unit and unit.lower() not in text.lower():
        text = f"{text} ({unit})"
    return f"{text} [95% CI]" if interval else text


def table(
    df: pl.DataFrame,
    *,
    caption: str | None = None,
    labels: Mapping[str, str] | None = None,
    formats: Mapping[str, str] | None = None,
    signed: Sequence[str] = ("diff",),
    hide: Sequence[str] = (),
    na: Mapping[str, str] | None = None,
    notes: Sequence[str] = (),
    min_seeds: int | None = MIN_SEEDS,
    seeds: str | None = "auto",
    measure_column: str | None = None,
    per_measure: Sequence[str] = ("mean", "diff"),
    measure_labels: Mapping[str, str] | None = None,
    max_height_em: int = MAX_HEIGHT_EM,
) -> Table:
    """A formatted `Table` of `df` (see the module's rules).

    df: the frame; caption: a title shown above it; labels: column -> header text; formats:
    column -> kind ('text', 'int', 'float', 'share', 'usd', 'bool', 'list'), over the guess of
    `kind_of`; signed: columns written with a sign (differences; `*_diff` columns always);
    hide: columns left out (say
    why in `notes`); na: column -> the text for its missing values (default "n/a"); notes:
    lines shown above the table; min_seeds: flag rows resting on fewer seeds (None: never);
    seeds: the column counting each row's seeds ("auto": the first of `n_seeds`, `seeds`,
    `runs`, `n`; None for a table whose counts are not seeds, e.g. items of a corpus);
    measure_column: in a long table (one row per measure), the column naming each row's
    measure; the `per_measure` columns are then formatted by that measure (a share as a
    percentage, a bid in credits) and each measure is shown by its readable name
    (`measure_labels`, default `mbb.analysis.compare.MEASURE_LABELS`: the one map of measure
    names, so a table never shows `mean_bid` where a chart shows "Mean bid (credits)");
    max_height_em: the height past which the table scrolls."""
    labels = labels or {}
    formats = formats or {}
    spans = _intervals(df.columns)
    bounds = {b for pair in spans.values() for b in pair}
    whys = {
        name.removesuffix("_why"): name
        for name in df.columns
        if name.endswith("_why")
        and name.removesuffix("_why") in df.columns
        and df.schema[name] == pl.String
    }
    cols = []
    for name in df.columns:
        if name in bounds or name in hide or name in whys.values():
            continue
        kind = formats.get(name) or kind_of(name, df.schema[name])
        low, high = spans.get(name, (None, None))
        cols.append(
            _Col(
                name=name,
                header=_header(name, kind, labels, low is not None),
                kind=kind,
                low=low,
                high=high,
                signed=name in signed or name.endswith("_diff"),
                per_measure=measure_column is not None and name in per_measure,
                why=whys.get(name),
            )
        )
    seeds_col = _seed_column(df) if seeds == "auto" else seeds
    all_notes = list(notes)
    warn = few_seeds_note(df, min_seeds, seeds_col) if min_seeds and seeds_col else None
    if warn is not None:
        all_notes.append(warn)
    if measure_column is not None and measure_labels is None:
        from mbb.analysis.compare import MEASURE_LABELS

        measure_labels = MEASURE_LABELS
    return Table(
        frame=df,
        columns=cols,
        caption=caption,
        notes=all_notes,
        na=dict(na or {}),
        max_height_em=max_height_em,
        seeds_column=seeds_col,
        measure_column=measure_column,
        measure_labels=dict(measure_labels or {}),
    )


# a function that turns a frame into a `Table` (for callers that take one)
Formatter = Callable[[pl.DataFrame], Table]
