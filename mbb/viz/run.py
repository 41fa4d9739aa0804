"""Figures of one condition's runs: resource timeline, bids, budgets and outcomes per subrun.

Aggregated in polars before plotting; workers coloured and ordered as everywhere
(`mbb.viz.theme`). Subrun panels share their scales, and a subrun in which nothing of the kind
happened (no bid declared, no credit paid) says "none".
"""

from __future__ import annotations

from collections.abc import Mapping

import altair as alt
import polars as pl

from mbb.analysis.outcome import outcomes
from mbb.viz.theme import (
    PANEL_HEIGHT,
    PANEL_WIDTH,
    ROW_HEIGHT,
    none_chart,
    none_layer,
    with_empty_panels,
    worker_color,
    worker_order,
)

__all__ = ["bids_by_round", "budgets_over_rounds", "outcomes_by_subrun", "resource_timeline"]


def _workers(tables: Mapping[str, pl.DataFrame]) -> list[str]:
    return tables["subrun_workers"]["worker"].unique().to_list()


def _subruns(tables: Mapping[str, pl.DataFrame]) -> list[int]:
    return sorted(tables["subrun_workers"]["subrun"].unique().drop_nulls().to_list())


def resource_timeline(
    tables: Mapping[str, pl.DataFrame], run_id: str | None = None
) -> alt.FacetChart | alt.Chart:
    """Gantt of execution windows per worker and subrun; deadlines marked; waiting shaded. The
    subrun rows share one time axis, so their lengths compare.

    tables: the event tables (`mbb.core.tables`).
    run_id: the run to draw (default: the first run id).
    """
    first = tables["subrun_workers"]["run_id"].min()
    run_id = run_id or (str(first) if first is not None else None)
    if run_id is None:
        return none_chart("Resource timeline", "no runs in these tables")
    win = tables["windows"].filter((pl.col("run_id") == run_id) & (pl.col("status") == "ran"))
    req = (
        tables["requests"]
        .filter(pl.col("run_id") == run_id)
        .select("subrun", "worker", pl.col("t").alias("requested"))
    )
    # waiting = from the latest request before a window to its start
    wait = (
        win.select("subrun", "worker", "round", "start")
        .join(req, on=["subrun", "worker"])
        .filter(pl.col("requested") <= pl.col("start"))
        .group_by("subrun", "worker", "round", "start")
        .agg(pl.col("requested").max())
        .filter(pl.col("requested") < pl.col("start"))
        .with_columns(pl.lit("waiting").alias("what"))
    )
    dl = (
        tables["subrun_workers"]
        .filter(pl.col("run_id") == run_id)
        .select("subrun", "worker", "deadline_s", "task")
    )
    colors = worker_color(_workers(tables))
    y = alt.Y("worker:N", title="Worker", sort=worker_order(_workers(tables)))
    base = alt.Chart().encode(y=y)
    waiting = (
        base.mark_bar(opacity=0.18, color="#888")
        .encode(
            x=alt.X("requested:Q", title="Simulated time since subrun start (s)"),
            x2="start:Q",
            tooltip=[
                alt.Tooltip("worker:N"),
                alt.Tooltip("requested:Q", title="requested at (s)", format=".0f"),
                alt.Tooltip("start:Q", title="window start (s)", format=".0f"),
            ],
        )
        .transform_filter("datum.kind == 'wait'")
    )
    bars = (
        base.mark_bar(height=14, cornerRadius=2)
        .encode(
            x="start:Q",
            x2="end:Q",
            color=alt.Color("worker:N", scale=colors, title="Worker"),
            tooltip=[
                alt.Tooltip("worker:N"),
                alt.Tooltip("round:Q"),
                alt.Tooltip("start:Q", title="start (s)", format=".0f"),
                alt.Tooltip("used:Q", title="used (s)", format=".0f"),
                alt.Tooltip("allocation:Q", title="allocated (s)"),
                alt.Tooltip("price:Q", title="paid (credits)"),
                alt.Tooltip("reason:N", title="ended by"),
                alt.Tooltip("progress:Q", format=".0%"),
            ],
        )
        .transform_filter("datum.kind == 'window'")
    )
    ticks = (
        base.mark_tick(color="black", thickness=2, size=22)
        .encode(
            x="deadline_s:Q",
            tooltip=[
                alt.Tooltip("worker:N"),
                alt.Tooltip("deadline_s:Q", title="deadline (s)"),
                alt.Tooltip("task:N"),
            ],
        )
        .transform_filter("datum.kind == 'deadline'")
    )
    data = pl.concat(
        [
            win.select(
                "subrun",
                "worker",
                "round",
                "start",
                "end",
                "used",
                "allocation",
                "price",
                "reason",
                "progress",
            ).with_columns(pl.lit("window").alias("kind")),
            wait.select("subrun", "worker", "round", "start", "requested").with_columns(
                pl.lit("wait").alias("kind")
            ),
            dl.with_columns(pl.lit("deadline").alias("kind")),
        ],
        how="diagonal_relaxed",
    )
    return (
        alt.layer(waiting, bars, ticks, data=data)
        .properties(width=640, height=ROW_HEIGHT * len(worker_order(_workers(tables))))
        .facet(row=alt.Row("subrun:O", title="Subrun"))
        .properties(
            title=f"Resource timeline — {run_id} (bars: windows; grey: waiting; tick: deadline)"
        )
    )


def _per_round_lines(
    agg: pl.DataFrame,
    tables: Mapping[str, pl.DataFrame],
    y: alt.Y,
    tooltip: list,
    title: str,
    mark: dict,
) -> alt.FacetChart:
    """Lines per worker over rounds, one panel per subrun sharing the y scale; "none" in a
    subrun without data."""
    data = with_empty_panels(
        agg, pl.DataFrame({"subrun": _subruns(tables)}, schema={"subrun": agg.schema["subrun"]})
    )
    colors = worker_color(_workers(tables))
    lines = (
        alt.Chart()
        .mark_line(point=True, **mark)
        .encode(
            x=alt.X("round:O", title="Round"),
            y=y,
            color=alt.Color("worker:N", scale=colors, title="Worker"),
            tooltip=tooltip,
        )
        .transform_filter("datum.empty !== true")
    )
    none = none_layer(alt.value(PANEL_WIDTH / 2), alt.value(PANEL_HEIGHT / 2))
    return (
        alt.layer(lines, none, data=data)
        .properties(width=PANEL_WIDTH, height=PANEL_HEIGHT)
        .facet(column=alt.Column("subrun:O", title="Subrun"))
        .properties(title=title)
    )


def bids_by_round(tables: Mapping[str, pl.DataFrame]) -> alt.FacetChart | alt.Chart:
    """Final declared bid per worker per round (mean over runs), one panel per subrun; the
    panels share the bid scale.

    tables: the event tables (`mbb.core.tables`).
    """
    title = "Bids per round (mean over runs)"
    d = tables["declarations"].sort("seq").group_by("run_id", "subrun", "round", "worker").last()
    if d.is_empty():
        return none_chart(title, "no bid was declared (a centralized mechanism, or no rounds)")
    agg = (
        d.group_by("subrun", "round", "worker")
        .agg(pl.col("bid").mean().alias("mean_bid"), pl.len().alias("n"))
        .sort("subrun", "round")
    )
    return _per_round_lines(
        agg,
        tables,
        alt.Y("mean_bid:Q", title="Bid (credits)"),
        [
            "worker:N",
            "subrun:O",
            "round:O",
            alt.Tooltip("mean_bid:Q", format=".1f", title="mean bid"),
            alt.Tooltip("n:Q", title="runs with this round"),
        ],
        title,
        {},
    )


def budgets_over_rounds(tables: Mapping[str, pl.DataFrame]) -> alt.FacetChart | alt.Chart:
    """Credits left per worker after each round's payments (mean over runs), one panel per
    subrun sharing the credit scale.

    tables: the event tables (`mbb.core.tables`).
    """
    title = "Budgets over time (mean over runs)"
    sw = tables["subrun_workers"].select("run_id", "subrun", "worker", "budget")
    rounds = tables["rounds"].select("run_id", "subrun", "round").unique()
    if rounds.is_empty():
        return none_chart(title, "no negotiation round was held")
    pay = (
        tables["payments"]
        .group_by("run_id", "subrun", "round", "worker")
        .agg(pl.col("amount").sum())
    )
    grid = rounds.join(sw.select("run_id", "worker").unique(), on="run_id")
    grid = grid.join(pay, on=["run_id", "subrun", "round", "worker"], how="left").with_columns(
        pl.col("amount").fill_null(0)
    )
    grid = grid.join(sw, on=["run_id", "subrun", "worker"], how="inner").sort(
        "run_id", "worker", "subrun", "round"
    )
    grid = grid.with_columns(
        (pl.col("budget") - pl.col("amount").cum_sum().over("run_id", "worker", "subrun")).alias(
            "balance"
        )
    )
    agg = (
        grid.group_by("subrun", "round", "worker")
        .agg(pl.col("balance").mean().alias("balance"))
        .sort("subrun", "round")
    )
    return _per_round_lines(
        agg,
        tables,
        alt.Y("balance:Q", title="Credits left after the round"),
        [
            "worker:N",
            "subrun:O",
            "round:O",
            alt.Tooltip("balance:Q", format=".0f", title="credits left"),
        ],
        title,
        {"interpolate": "step-after"},
    )


_OUTCOME_LABELS = {
    "completion": "completion",
    "deadline_miss": "deadline miss",
    "progress": "mean progress",
    "score": "mean score",
}


def outcomes_by_subrun(tables: Mapping[str, pl.DataFrame]) -> alt.FacetChart | alt.Chart:
    """Completion and deadline-miss rates, mean progress and mean test score per subrun (over
    runs; `mbb.analysis.outcome.outcomes`), all on one 0-1 scale shared by the panels.

    tables: the event tables (`mbb.core.tables`).
    """
    title = "Outcomes per subrun"
    if tables["evaluations"].is_empty():
        return none_chart(title, "no task was evaluated")
    agg = outcomes(tables, "subrun").select("subrun", "worker_subruns", *_OUTCOME_LABELS)
    long = agg.unpivot(
        index=["subrun", "worker_subruns"],
        on=list(_OUTCOME_LABELS),
        variable_name="measure",
        value_name="value",
    ).with_columns(pl.col("measure").replace_strict(_OUTCOME_LABELS))
    order = list(_OUTCOME_LABELS.values())
    return (
        alt.Chart(long)
        .mark_bar()
        .encode(
            x=alt.X("measure:N", title=None, sort=order, axis=alt.Axis(labelAngle=-30)),
            y=alt.Y(
                "value:Q",
                title="Share of worker-subruns / mean (0-1)",
                axis=alt.Axis(format="%"),
                scale=alt.Scale(domain=[0, 1]),
            ),
            color=alt.Color("measure:N", sort=order, legend=None),
            column=alt.Column("subrun:O", title="Subrun"),
            tooltip=[
                "subrun:O",
                "measure:N",
                alt.Tooltip("value:Q", format=".1%"),
                alt.Tooltip("worker_subruns:Q", title="worker-subruns"),
            ],
        )
        .properties(width=120, height=220, title=title)
    )
