"""Figures that put conditions side by side (tables from `mbb.analysis.compare.load_conditions` or
`mbb.analysis.runs.load_runs`, with a `condition` column or a `runs` table)."""

from __future__ import annotations

from collections.abc import Mapping

import altair as alt
import polars as pl

from mbb.analysis.outcome import outcomes
from mbb.viz.theme import PANEL_HEIGHT, WIDE_WIDTH, none_chart

__all__ = ["bids_by_condition", "outcomes_by_condition"]

_MEASURES = {"completion": "completion", "deadline_miss": "deadline miss", "progress": "progress"}


def outcomes_by_condition(tables: Mapping[str, pl.DataFrame]) -> alt.FacetChart | alt.Chart:
    """Completion and deadline-miss rates and mean progress per subrun, one line per condition
    (`mbb.analysis.outcome.outcomes`); the three panels share one 0-1 scale.

    tables: the event tables of several conditions.
    """
    title = "Outcomes by condition and subrun"
    if tables["evaluations"].is_empty():
        return none_chart(title, "no task was evaluated")
    agg = outcomes(tables, ["condition", "subrun"]).select(
        "condition", "subrun", "worker_subruns", *_MEASURES
    )
    long = (
        agg.unpivot(
            index=["condition", "subrun", "worker_subruns"],
            on=list(_MEASURES),
            variable_name="measure",
            value_name="value",
        )
        .with_columns(pl.col("measure").replace_strict(_MEASURES))
        .sort("condition", "subrun")
    )
    return (
        alt.Chart(long)
        .mark_line(point=True)
        .encode(
            x=alt.X("subrun:O", title="Subrun"),
            y=alt.Y(
                "value:Q",
                title="Share of worker-subruns / mean progress",
                axis=alt.Axis(format="%"),
                scale=alt.Scale(domain=[0, 1]),
            ),
            color=alt.Color("condition:N", title="Condition"),
            column=alt.Column("measure:N", title=None, sort=list(_MEASURES.values())),
            tooltip=[
                "condition:N",
                "subrun:O",
                "measure:N",
                alt.Tooltip("value:Q", format=".1%"),
                alt.Tooltip("worker_subruns:Q", title="worker-subruns"),
            ],
        )
        .properties(width=200, height=PANEL_HEIGHT, title=title)
    )


def bids_by_condition(tables: Mapping[str, pl.DataFrame]) -> alt.Chart:
    """Mean declared bid per subrun, one line per condition; conditions in
    which no bid was declared (centralized mechanisms without bids) are named in the subtitle
    rather than silently missing.

    tables: the event tables of several conditions.
    """
    title = "Mean bid by subrun and condition"
    conditions = outcomes(tables, "condition").select("condition", "mean_bid")
    silent = sorted(conditions.filter(pl.col("mean_bid").is_null())["condition"].to_list())
    d = (
        outcomes(tables, ["condition", "subrun"])
        .select("condition", "subrun", "runs", "mean_bid")
        .drop_nulls("mean_bid")
        .sort("condition", "subrun")
    )
    if d.is_empty():
        return none_chart(title, "no bid was declared in any condition")
    subtitle = f"no bids declared in: {', '.join(silent)}" if silent else ""
    return (
        alt.Chart(d)
        .mark_line(point=True)
        .encode(
            x=alt.X("subrun:O", title="Subrun"),
            y=alt.Y("mean_bid:Q", title="Mean declared bid (credits)"),
            color=alt.Color("condition:N", title="Condition"),
            tooltip=[
                "condition:N",
                "subrun:O",
                alt.Tooltip("mean_bid:Q", format=".1f", title="mean bid"),
                alt.Tooltip("runs:Q", title="runs"),
            ],
        )
        .properties(width=WIDE_WIDTH, height=240, title={"text": title, "subtitle": subtitle})
    )
