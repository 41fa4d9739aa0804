"""Demand against capacity per subrun (`mbb.analysis.workload` defines the measures)."""

from __future__ import annotations

from collections.abc import Mapping

import altair as alt
import polars as pl

from mbb.analysis.workload import workload
from mbb.viz.theme import category_color

__all__ = ["workload_chart"]


def workload_chart(tables: Mapping[str, pl.DataFrame]) -> alt.FacetChart:
    """Per subrun (one panel per condition, shared y-scale): mean demand and used time as
    bars beside each other, with a 95 % CI over seeds as an error bar, against the capacity
    (a black tick); tooltips give the number of seeds, load and completion rate."""
    per_seed = workload(tables, by=("run_id", "subrun"))
    long = per_seed.unpivot(
        index=["condition", "seed", "subrun", "capacity_s", "load", "completion_rate"],
        on=["demand_s", "used_s"],
        variable_name="what",
        value_name="seconds",
    ).with_columns(pl.col("what").replace_strict({"demand_s": "demand (work W)", "used_s": "used"}))
    x = alt.X("subrun:O", title="subrun")
    bars = (
        alt.Chart()
        .mark_bar()
        .encode(
            x=x,
            xOffset=alt.XOffset("what:N"),
            y=alt.Y("mean(seconds):Q", title="seconds of resource time"),
            color=alt.Color(
                "what:N", title=None, scale=category_color(["demand (work W)", "used"])
            ),
            tooltip=[
                "what:N",
                alt.Tooltip("mean(seconds):Q", format=".0f", title="mean s"),
                alt.Tooltip("count(seconds):Q", title="n (seeds)"),
                alt.Tooltip("mean(load):Q", format=".2f", title="mean load"),
                alt.Tooltip("mean(completion_rate):Q", format=".0%", title="completed"),
            ],
        )
    )
    errs = (
        alt.Chart()
        .mark_errorbar(extent="ci")
        .encode(x=x, xOffset=alt.XOffset("what:N"), y=alt.Y("seconds:Q", title=""))
    )
    cap = (
        alt.Chart()
        .mark_tick(color="black", thickness=2)
        .encode(
            x=x,
            y="mean(capacity_s):Q",
            tooltip=[alt.Tooltip("mean(capacity_s):Q", format=".0f", title="capacity s")],
        )
    )
    return (
        alt.layer(bars, errs, cap, data=long)
        .facet(column=alt.Column("condition:N", title=None))
        .resolve_scale(y="shared")
        .properties(title="Demand and used time per subrun against capacity (tick)")
    )
