"""Figures of the starting-state analyses: the urgent worker's bids and durations, the rich
worker's spend and wins, and win rates in contested rounds at full vs depleted budget.

Every mark is a mean over seeds with its 95 % CI (`mbb.analysis.starting_state_seeds`: one value
per run, expanded percentile bootstrap); a mean of one seed is drawn without an interval and
says so. A condition keeps its colour of every mbb chart (`mbb.viz.theme.condition_color`) and a
group (the treated worker, the others, the uniform baseline) one dash in every chart of the
notebook: the scales' domains are those of the whole summary, not of the rows one chart draws.
"""

from __future__ import annotations

from typing import Any

import altair as alt
import polars as pl

from mbb.viz.theme import condition_color, none_chart, seeds_subtitle, shared_colour_note

__all__ = ["contested_win_chart", "rich_worker_chart", "urgency_chart"]

GROUPS = ("urgent", "rich", "others", "uniform")  # the treated worker first, then the rest
_DASHES = {"urgent": [1, 0], "rich": [1, 0], "others": [6, 3], "uniform": [2, 2]}
# one shape each: the two treated groups shared a circle, and the legend read as if they were one
_SHAPES = {"urgent": "circle", "rich": "diamond", "others": "square", "uniform": "triangle-up"}


def _scales(seeds: pl.DataFrame) -> dict[str, alt.Scale]:
    """Colour per condition (mbb's, `condition_color`) and dash / shape per group, over every
    group of the summary (so a chart that lacks a group does not shift the others' looks)."""
    groups = [g for g in GROUPS if g in set(seeds["group"])]
    return {
        "color": condition_color(seeds["condition"].to_list()),
        "dash": alt.Scale(domain=groups, range=[_DASHES[g] for g in groups]),
        "shape": alt.Scale(domain=groups, range=[_SHAPES[g] for g in groups]),
    }


def _with_notes(d: pl.DataFrame) -> pl.DataFrame:
    """`series` ("condition: group") and `interval`, which says why a mean has no interval."""
    return d.with_columns(
        pl.format("{}: {}", "condition", "group").alias("series"),
        pl.when(pl.col("ci_low").is_null())
        .then(pl.format("no interval ({} seed)", "n"))
        .otherwise(pl.lit("95% CI over seeds"))
        .alias("interval"),
    )


def _subtitle(d: pl.DataFrame, first: str = "") -> list[str]:
    lines = seeds_subtitle(d["n"], first) + shared_colour_note(d["condition"].to_list())
    single = d.filter(pl.col("ci_low").is_null() & (pl.col("n") > 0)).height
    if single:
        lines.append(f"no interval (1 seed) for {single} of {d.height} means: a point alone")
    return lines


def _means(
    d: pl.DataFrame,
    scales: dict[str, alt.Scale],
    x: alt.X,
    y_title: str,
    fmt: str,
    *,
    percent: bool = False,
    line: bool = True,
) -> alt.LayerChart | alt.FacetChart:
    """Mean (point, joined by a line across `x` when `line`) and 95 % CI whisker per series,
    series offset side by side within an x step so no whisker hides another."""
    axis = alt.Axis(format="%") if percent else alt.Axis()
    y = alt.Y("mean:Q", title=y_title, axis=axis, scale=alt.Scale(zero=False))
    color = alt.Color("condition:N", title="Condition", scale=scales["color"])
    # the legend lists the groups this chart draws (the scale keeps every group's look)
    present = [g for g in GROUPS if g in set(d["group"])]
    dash = alt.StrokeDash(
        "group:N", title="Group", scale=scales["dash"], legend=alt.Legend(values=present)
    )
    shape = alt.Shape(
        "group:N", title="Group", scale=scales["shape"], legend=alt.Legend(values=present)
    )
    offset = alt.XOffset("series:N")
    tooltip: list[Any] = [
        "condition:N",
        "group:N",
        alt.Tooltip("mean:Q", format=fmt, title="mean over seeds"),
        alt.Tooltip("ci_low:Q", format=fmt, title="95% CI low"),
        alt.Tooltip("ci_high:Q", format=fmt, title="95% CI high"),
        alt.Tooltip("n:Q", title="seeds"),
        alt.Tooltip("interval:N", title="interval"),
    ]
    base = alt.Chart(d).encode(x=x, xOffset=offset, color=color, tooltip=tooltip)
    layers = [
        base.mark_rule(strokeWidth=1.5).encode(
            y=alt.Y("ci_low:Q", title=y_title, axis=axis, scale=alt.Scale(zero=False)),
            y2="ci_high:Q",
        ),
        base.mark_point(filled=True, size=50).encode(y=y, shape=shape),
    ]
    if line:
        layers.insert(0, base.mark_line(strokeWidth=1.5).encode(y=y, strokeDash=dash))
    return alt.layer(*layers)


def urgency_chart(seeds: pl.DataFrame) -> alt.HConcatChart | alt.Chart:
    """The urgent worker's mean bid and requested duration by subrun vs the others and the
    uniform baseline, each a mean over seeds with its 95 % CI: the figure where the paper
    reads a premium early and a termination discount later; its title names what is drawn,
    not what the paper found (a reader's runs may show neither).

    seeds: `mbb.analysis.starting_state_seeds` (every figure's rows: the colours are shared)."""
    title = "Bid and requested duration by subrun: closest deadline vs others"
    d = seeds.filter(pl.col("figure") == "urgency")
    if "urgent" not in set(d["group"]):
        return none_chart(title, "no urgent worker (no deadline differs)")
    scales, d = _scales(seeds), _with_notes(d)
    x = alt.X("subrun:O", title="Subrun", axis=alt.Axis(labelAngle=0))
    panels = [
        _means(d.filter(pl.col("measure") == m), scales, x, y_title, fmt).properties(
            width=260, height=220, title=name
        )
        for m, name, y_title, fmt in (
            ("mean_bid", "Bid", "Mean bid (credits)", ".1f"),
            ("mean_duration", "Requested duration", "Mean requested duration (seconds)", ".0f"),
        )
    ]
    return alt.hconcat(*panels).properties(title={"text": title, "subtitle": _subtitle(d)})


_RICH = {
    "spend_per_worker": ("Credits spent per worker (credits)", ".0f", False),
    "wins_per_worker": ("Wins per worker (rounds won)", ".2f", False),
    "win_rate": ("Win rate (% of rounds declared in)", ".1%", True),
}


def rich_worker_chart(seeds: pl.DataFrame) -> alt.HConcatChart | alt.Chart:
    """The richest worker's spend, wins and win rate per subrun vs the others and the
    uniform-budget baseline (per worker, so groups of different size compare), each a mean
    over seeds with its 95 % CI; each panel its own axis and unit.

    seeds: `mbb.analysis.starting_state_seeds`."""
    title = "Rich worker: spend, wins and win rate by subrun"
    d = seeds.filter(pl.col("figure") == "rich_worker")
    if "rich" not in set(d["group"]):
        return none_chart(title, "no rich worker (no budget differs)")
    scales, d = _scales(seeds), _with_notes(d)
    x = alt.X("subrun:O", title="Subrun", axis=alt.Axis(labelAngle=0))
    panels = [
        _means(d.filter(pl.col("measure") == m), scales, x, y_title, fmt, percent=pct).properties(
            width=220, height=200
        )
        for m, (y_title, fmt, pct) in _RICH.items()
    ]
    return alt.hconcat(*panels).properties(
        title={"text": title, "subtitle": _subtitle(d, "each panel its own axis and unit")}
    )


def contested_win_chart(seeds: pl.DataFrame) -> alt.LayerChart | alt.FacetChart | alt.Chart:
    """Win rate in contested rounds at full vs depleted budget, per condition and group: the
    mean over seeds of each run's rate with its 95 % CI.

    seeds: `mbb.analysis.starting_state_seeds`."""
    title = "Contested win rate at full vs depleted budget (< 50 % of the start)"
    d = seeds.filter(pl.col("figure") == "contested")
    if d.is_empty():
        return none_chart(title, "no contested round")
    scales, d = _scales(seeds), _with_notes(d)
    x = alt.X(
        "budget_state:N",
        title="Budget at round start",
        sort=["full", "depleted"],
        axis=alt.Axis(labelAngle=0),
    )
    chart = _means(
        d, scales, x, "Win rate in contested rounds (%)", ".1%", percent=True, line=False
    )
    return chart.properties(width=360, height=220, title={"text": title, "subtitle": _subtitle(d)})
