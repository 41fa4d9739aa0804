"""Figures that put conditions side by side (tables from `mbb.analysis.compare.load_conditions` or
`mbb.analysis.runs.load_runs`, with a `condition` column or a `runs` table).

Every mean is drawn with its 95 % CI over seeds (the expanded percentile bootstrap of
`mbb.analysis.stats`, the interval every comparison uses). Conditions sit side by side within a
subrun (an offset each), each in its colour everywhere (`mbb.viz.theme.condition_color`); lines
of one colour are dashed apart.
"""

from __future__ import annotations

import math
import textwrap
from collections.abc import Mapping, Sequence

import altair as alt
import polars as pl

from mbb.analysis.outcome import outcomes
from mbb.viz.theme import (
    INK,
    MAX_WIDTH,
    MIN_SEEDS,
    PANEL_HEIGHT,
    WIDE_WIDTH,
    condition_color,
    condition_dash,
    none_chart,
    seeds_subtitle,
    shared_colour_note,
)

__all__ = ["bids_by_condition", "forest_plot", "outcomes_by_condition"]

# each panel's header says its unit: the panels share one 0-100 % axis but not what it counts
_MEASURES = {
    "completion": ["completion", "(share of worker-subruns)"],
    "deadline_miss": ["deadline miss", "(share of worker-subruns)"],
    "progress": ["progress", "(mean share of work done)"],
}


def _per_subrun(
    tables: Mapping[str, pl.DataFrame],
    values: Sequence[str],
    per_run: pl.DataFrame | None = None,
) -> tuple[pl.DataFrame, list[str]]:
    """The mean over seeds of `values` per condition and subrun with its CI (long form).

    per_run: `outcomes` by condition, run and subrun, when the caller has it already."""
    from mbb.analysis.stats import seed_summary

    if per_run is None:
        per_run = outcomes(tables, ["condition", "run_id", "subrun"])
    per_run = per_run.select("condition", "run_id", "subrun", *values)
    agg = seed_summary(per_run, ["condition", "subrun"], list(values)).sort("condition", "subrun")
    return agg, sorted(agg["condition"].unique().to_list())


def _dodged(
    agg: pl.DataFrame, conditions: list[str], y: alt.Y, y_title: str, fmt: str
) -> alt.LayerChart | alt.FacetChart:
    """Points, lines and CI whiskers, conditions offset within a subrun, coloured as everywhere
    (lines of one colour dashed apart)."""
    x = alt.X("subrun:O", title="Subrun", axis=alt.Axis(labelAngle=0))
    offset = alt.XOffset("condition:N", sort=conditions)
    color = alt.Color(
        "condition:N", title="Condition", sort=conditions, scale=condition_color(conditions)
    )
    dash = alt.StrokeDash(
        "condition:N", title="Condition", sort=conditions, scale=condition_dash(conditions)
    )
    tooltip = [
        "condition:N",
        "subrun:O",
        alt.Tooltip("mean:Q", format=fmt, title="mean over seeds"),
        alt.Tooltip("ci_low:Q", format=fmt, title="95% CI low"),
        alt.Tooltip("ci_high:Q", format=fmt, title="95% CI high"),
        alt.Tooltip("n:Q", title="seeds"),
    ]
    lines = alt.Chart().mark_line(strokeWidth=1.5).encode(x=x, xOffset=offset, y=y, color=color)
    lines = lines.encode(strokeDash=dash)
    points = (
        alt.Chart()
        .mark_point(filled=True, size=45)
        .encode(x=x, xOffset=offset, y=y, color=color, tooltip=tooltip)
    )
    whiskers = (
        alt.Chart()
        .mark_rule(strokeWidth=1.5)
        .encode(
            x=x,
            xOffset=offset,
            y=alt.Y("ci_low:Q", title=y_title),
            y2="ci_high:Q",
            color=color,
            tooltip=tooltip,
        )
    )
    return alt.layer(lines, whiskers, points)


def outcomes_by_condition(tables: Mapping[str, pl.DataFrame]) -> alt.FacetChart | alt.Chart:
    """Completion rate and mean progress per subrun (and the deadline-miss rate, unless it is
    1 − completion in every run: then it is the same fact twice, and the subtitle says so):
    per condition the mean over seeds with its 95 % CI (expanded percentile bootstrap over
    seeds), conditions offset side by side in their own colours; the panels share one 0-100 %
    scale, each header saying what its percentage counts.

    tables: the event tables of several conditions.
    """
    from mbb.analysis.outcome import misses_complete_completion

    title = "Outcomes by condition and subrun"
    if tables["evaluations"].is_empty():
        return none_chart(title, "no task was evaluated")
    per_run = outcomes(tables, ["condition", "run_id", "subrun"])
    measures = dict(_MEASURES)
    first = ""
    if misses_complete_completion(per_run):
        del measures["deadline_miss"]
        first = (
            "deadline-miss rate not drawn: it is 100% − completion here (every worker-subrun "
            "completed or hit its deadline); the table has it"
        )
    agg, conditions = _per_subrun(tables, list(measures), per_run)
    headers = {m: "|".join(h) for m, h in measures.items()}
    agg = agg.with_columns(pl.col("measure").replace_strict(headers))
    y_title = "Mean over seeds (%)"
    y = alt.Y("mean:Q", title=y_title, axis=alt.Axis(format="%"), scale=alt.Scale(domain=[0, 1]))
    return (
        _dodged(agg, conditions, y, y_title, ".1%")
        # the panels and a legend of long condition names within a page
        .properties(width=50 * max(3, agg["subrun"].n_unique()), height=PANEL_HEIGHT)
        .facet(
            column=alt.Column(
                "measure:N",
                title=None,
                sort=list(headers.values()),
                # one header of two lines: the measure, then what its percentage counts
                header=alt.Header(labelExpr="split(datum.value, '|')"),
            ),
            data=agg,
        )
        .properties(
            title={
                "text": title,
                "subtitle": seeds_subtitle(agg["n"], first) + shared_colour_note(conditions),
            }
        )
    )


def bids_by_condition(
    tables: Mapping[str, pl.DataFrame],
) -> alt.Chart | alt.LayerChart | alt.FacetChart:
    """Mean declared bid per subrun: per condition the mean over seeds (each run's mean bid)
    with its 95 % CI (expanded percentile bootstrap over seeds), conditions offset and in their
    own colours; conditions in which no bid was declared (centralized mechanisms without bids) are
    named in the subtitle rather than silently missing.

    tables: the event tables of several conditions.
    """
    title = "Mean bid by subrun and condition"
    conditions = outcomes(tables, "condition").select("condition", "mean_bid")
    silent = sorted(conditions.filter(pl.col("mean_bid").is_null())["condition"].to_list())
    agg, names = _per_subrun(tables, ["mean_bid"])
    agg = agg.filter(pl.col("mean").is_not_null())
    if agg.is_empty():
        return none_chart(title, "no bid was declared in any condition")
    first = f"no bids declared in: {', '.join(silent)}" if silent else ""
    y_title = "Mean declared bid (credits)"
    names = [c for c in names if c not in silent]
    return _dodged(agg, names, alt.Y("mean:Q", title=y_title), y_title, ".1f").properties(
        data=agg,
        # room for its legend within a page (eight conditions of four subruns were 1,345 px)
        width=min(MAX_WIDTH - 260, max(WIDE_WIDTH, 40 * agg["subrun"].n_unique() * len(names))),
        height=240,
        title={
            "text": title,
            "subtitle": seeds_subtitle(agg["n"], first) + shared_colour_note(names),
        },
    )


_TICKS = 5  # the forest plot's tick count (vega's, set on its axes): its steps are d3's
# the forest plot's grid: panels side by side (the conditions' names only left of the first),
# rows of conditions this tall, and no taller than a screen and a half: the measures past it
# are named under the title and left to the table (one panel a measure reached 4,345 px)
FOREST_COLUMNS = 3
FOREST_PANEL_WIDTH = 230
FOREST_ROW = 16
FOREST_MAX_HEIGHT = 1600
_FOREST_CHROME = 95  # a grid row's panel titles (two lines), x axes and spacing
_FOREST_HEADER = 90  # the chart's title and subtitle


def _tick_decimals(span: float, ticks: int = _TICKS) -> int:
    """Decimals that tell apart ticks `ticks` to a `span` (d3's tickStep, which vega uses for
    a tick count: span / ticks rounded to the nearest 1, 2 or 5 times a power of ten), so a
    narrow axis never reads "0% 0% 1% 1%", nor -6% -5% for ticks at -5.5 and -4.5."""
    if not span > 0 or not math.isfinite(span):
        return 0
    raw = span / ticks
    power = 10 ** math.floor(math.log10(raw))
    error = raw / power
    step = power * (
        10
        if error >= math.sqrt(50)
        else 5
        if error >= math.sqrt(10)
        else 2
        if error >= math.sqrt(2)
        else 1
    )
    return max(0, -math.floor(math.log10(step) + 1e-9))


def _axis_format(measure: str, part: pl.DataFrame) -> tuple[str, str, float]:
    """(d3 format, unit, scale) of a measure's difference on its own axis: shares in
    percentage points (the values drawn times `scale` 100, signed: "+10", not "10%", as the
    table beside it reads "+9.9 pp"), money in dollars, other numbers; each with as many
    decimals as the axis's range (0 included: the line at 0 is drawn) needs for its ticks to
    differ, never an exponent."""
    from mbb.viz.table import kind_of

    kind = kind_of(measure, pl.Float64())
    values = [
        0.0,
        *(v for c in ("diff", "diff_ci_low", "diff_ci_high") for v in part[c].drop_nulls()),
    ]
    span = max(values) - min(values)
    if kind == "share":
        return f"+.{_tick_decimals(span * 100)}f", "percentage points", 100.0
    if kind == "usd":
        return f"$.{max(2, _tick_decimals(span))}f", "USD", 1.0
    return f",.{_tick_decimals(span)}f", "", 1.0


def forest_plot(
    table: pl.DataFrame,
    *,
    labels: Mapping[str, str] | None = None,
    measures: Sequence[str] | None = None,
) -> alt.ConcatChart | alt.Chart:
    """Each measure's difference from the baseline condition with its 95 % CI, one panel per
    measure (each on its own axis: measures have different units), one row per condition; a
    line at 0; a difference whose CI excludes 0 drawn filled. The CI is that of
    `mbb.analysis.compare.condition_table`: seeds paired when both conditions ran them, else
    resampled independently (expanded percentile bootstrap).

    Panels sit `FOREST_COLUMNS` to a row, so the chart fits a page's width and stays under
    `FOREST_MAX_HEIGHT`; the measures that would make it taller are not drawn, and the
    subtitle names them (they are in `table`, which a report shows beside the chart). Every
    condition is drawn, in at least one row of panels, however many there are.

    table: `mbb.analysis.compare.condition_table` (one baseline); labels: measure -> title,
    over `mbb.analysis.compare.MEASURE_LABELS` (the one map of readable names); measures: the
    measures drawn, in order (default: all)."""
    from mbb.analysis.compare import MEASURE_LABELS

    labels = {**MEASURE_LABELS, **(labels or {})}
    baseline = str(table["baseline"][0]) if table.height else "?"
    title = f"Difference from {baseline} (95% CI over seeds)"
    d = table.filter(pl.col("condition") != baseline)
    left_out = []
    if "cost_per_run_usd" in d["measure"]:  # scripted runs make no paid call: no cost to compare
        costs = table.filter(pl.col("measure") == "cost_per_run_usd")["mean"].fill_null(0)
        if costs.abs().sum() == 0:
            d = d.filter(pl.col("measure") != "cost_per_run_usd")
            left_out.append("LLM cost per run: no run made a paid call")
    if d.is_empty():
        return none_chart(title, "no condition besides the baseline")
    present = set(d["measure"].to_list())
    order = [m for m in (measures or dict.fromkeys(d["measure"].to_list())) if m in present]
    conditions = sorted(d["condition"].unique().to_list())
    panel_height = FOREST_ROW * len(conditions)
    grid_rows = max(1, (FOREST_MAX_HEIGHT - _FOREST_HEADER) // (panel_height + _FOREST_CHROME))
    order, undrawn = order[: grid_rows * FOREST_COLUMNS], order[grid_rows * FOREST_COLUMNS :]
    # measures that are 0 in every seed of every condition (condition_table's note says so)
    notes = (
        d.group_by("measure").agg(
            pl.col("note").fill_null("").str.starts_with("0 in every seed").all().alias("zero")
        )
        if "note" in d.columns
        else pl.DataFrame({"measure": [], "zero": []})
    )
    zeros = dict(notes.iter_rows())
    # a condition with values for a measure the baseline has none for: no difference, said why
    # (it read a bare "n/a"; condition_table's note says the same in the table)
    base_n = table.filter(pl.col("condition") == baseline).select(
        "measure", pl.col("n").alias("_base_n")
    )
    d = d.join(base_n, on="measure", how="left")
    base_none = (pl.col("n") > 0) & pl.col("diff").is_null() & (pl.col("_base_n") == 0)
    no_base = sorted(set(d.filter(base_none & pl.col("measure").is_in(order))["measure"]))
    panels = []
    for i, m in enumerate(order):
        part = d.filter(pl.col("measure") == m).with_columns(
            pl.col("excludes_zero").fill_null(False),
            pl.when(pl.col("n") == 0)
            .then(pl.lit("n/a (no value in any seed)"))
            .when(base_none)
            .then(pl.lit(f"n/a ({baseline} has none)"))
            .when(pl.col("diff").is_null())
            .then(pl.lit("n/a (see the table's note)"))
            .when(pl.col("diff_ci_low").is_null())
            .then(pl.lit("no interval (") + pl.col("n").cast(pl.String) + pl.lit(" seed)"))
            .otherwise(pl.lit(""))
            .alias("note"),
        )
        fmt, unit, scale = _axis_format(m, part)
        part = part.with_columns(pl.col("diff", "diff_ci_low", "diff_ci_high") * scale)
        label = labels.get(m, m)
        x_title = f"Δ {label}"
        if unit and unit not in label:  # "Δ Rule-making (share of rounds, percentage points)"
            x_title = f"{x_title[:-1]}, {unit})" if x_title.endswith(")") else f"{x_title} ({unit})"
        first = i % FOREST_COLUMNS == 0  # the conditions' names: left of a grid row only
        y = alt.Y(
            "condition:N",
            title=None,
            sort=conditions,
            axis=alt.Axis(labels=first, ticks=first, domain=first),
        )
        x = alt.X(
            "diff:Q",
            title=_lines(x_title, 34),
            axis=alt.Axis(format=fmt, tickCount=_TICKS),
        )
        tooltip = [
            "condition:N",
            alt.Tooltip("diff:Q", format=fmt, title="difference"),
            alt.Tooltip("diff_ci_low:Q", format=fmt, title="95% CI low"),
            alt.Tooltip("diff_ci_high:Q", format=fmt, title="95% CI high"),
            alt.Tooltip("n:Q", title="seeds with a value"),
            *([alt.Tooltip("n_na:Q", title="seeds n/a")] if "n_na" in part.columns else []),
            alt.Tooltip("paired:N", title="paired by seed"),
            alt.Tooltip("note:N", title="note"),
        ]
        zero = alt.Chart(pl.DataFrame({"zero": [0.0]})).mark_rule(color="#888", strokeDash=[4, 3])
        zero = zero.encode(x="zero:Q")
        ci = (
            alt.Chart(part)
            .mark_rule(strokeWidth=2, color=INK)
            .encode(x=alt.X("diff_ci_low:Q", title=_lines(x_title, 34)), x2="diff_ci_high:Q", y=y)
        )
        point = (
            alt.Chart(part)
            .mark_point(size=70, color=INK, strokeWidth=2)
            .encode(
                x=x,
                y=y,
                fill=alt.condition("datum.excludes_zero", alt.value(INK), alt.value("white")),
                tooltip=tooltip,
            )
        )
        missing = (
            alt.Chart(part.filter(pl.col("note") != ""))
            .mark_text(align="left", dx=4, color="#8a5a00", fontStyle="italic")
            .encode(x=alt.value(0), y=y, text="note:N")
        )
        heading: str | list[str] | dict[str, str | list[str]] = _lines(label, 28)
        if zeros.get(m):  # all dots on the line at 0: say that nothing happened, not a bug
            heading = {
                "text": _lines(label, 28),
                "subtitle": _lines(f"0 in every seed of every condition ({baseline} too)", 40),
            }
        panels.append(
            alt.layer(zero, ci, point, missing).properties(
                width=FOREST_PANEL_WIDTH, height=panel_height, title=heading
            )
        )
    if not panels:
        return none_chart(title, "no measure to draw")
    few = d.filter((pl.col("n") < MIN_SEEDS) & (pl.col("n") > 0))
    subtitle = [
        "filled: the CI excludes 0; hollow: it does not; seeds paired where both conditions "
        "ran them (expanded percentile bootstrap)",
        *(f"left out: {why}" for why in left_out),
    ]
    if no_base:
        names = ", ".join(labels.get(m, m) for m in no_base)
        subtitle += textwrap.wrap(
            f"n/a ({baseline} has none): no seed of {baseline} has a value for {names}, so no "
            "difference is drawn (the table's note says so; its means are there); to compare "
            "the conditions that have one, set the baseline to one of them",
            110,
        )
    if undrawn:
        names = ", ".join(labels.get(m, m) for m in undrawn)
        subtitle += textwrap.wrap(
            f"not drawn, to keep the chart to a page: {len(undrawn)} more measure(s), in the "
            f"table: {names}",
            110,
        )
    if few.height:
        least = few.sort("n").row(0, named=True)
        na = f", {least['n_na']} n/a" if "n_na" in few.columns else ""
        subtitle.append(
            f"⚠ {few['condition'].n_unique()} condition(s) rest on fewer than {MIN_SEEDS} seeds "
            f"with a value (as few as {least['n']}{na}): read their differences as anecdotes"
        )
    return alt.concat(*panels, columns=FOREST_COLUMNS, spacing=16).properties(
        title={"text": title, "subtitle": subtitle}
    )


def _lines(text: str, width: int) -> str | list[str]:
    """`text` as it fits a narrow panel: itself when short, else wrapped into lines."""
    return text if len(text) <= width else textwrap.wrap(text, width, break_on_hyphens=False)
