"""Figures: altair charts from the event tables, aggregated in polars before plotting.

Every figure colours workers with the same scale (`worker_color`), labels axes with units and
carries tooltips. Render them offline with `mbb.render.enable()`.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import altair as alt
import polars as pl

__all__ = [
    "bids_by_round",
    "budgets_over_rounds",
    "outcomes_by_subrun",
    "resource_timeline",
    "worker_color",
]

PALETTE = (
    "#4c78a8",
    "#f58518",
    "#54a24b",
    "#e45756",
    "#72b7b2",
    "#b279a2",
    "#ff9da6",
    "#9d755d",
    "#bab0ac",
    "#eeca3b",
)


def _worker_key(w: str) -> tuple[int, str]:
    digits = "".join(ch for ch in w if ch.isdigit())
    return (int(digits) if digits else 10**9, w)


def worker_color(workers: Sequence[str]) -> alt.Scale:
    """One colour per worker, identical in every figure for the same population."""
    domain = sorted(set(workers), key=_worker_key)
    return alt.Scale(domain=domain, range=[PALETTE[i % len(PALETTE)] for i in range(len(domain))])


def _workers(tables: Mapping[str, pl.DataFrame]) -> list[str]:
    return tables["subrun_workers"]["worker"].unique().to_list()


def resource_timeline(tables: Mapping[str, pl.DataFrame], run_id: str | None = None) -> alt.Chart:
    """Gantt of execution windows per worker and subrun; deadlines marked; waiting shaded."""
    run_id = run_id or tables["windows"]["run_id"].min()
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
    y = alt.Y("worker:N", title="Worker", sort=sorted(colors.domain, key=_worker_key))
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
        .properties(width=640, height=26 * len(colors.domain))
        .facet(row=alt.Row("subrun:O", title="Subrun"))
        .properties(
            title=f"Resource timeline — {run_id} (bars: windows; grey: waiting; tick: deadline)"
        )
    )


def bids_by_round(tables: Mapping[str, pl.DataFrame]) -> alt.Chart:
    """Final declared bid per worker per round (mean over runs), one panel per subrun."""
    d = tables["declarations"].sort("seq").group_by("run_id", "subrun", "round", "worker").last()
    agg = (
        d.group_by("subrun", "round", "worker")
        .agg(pl.col("bid").mean().alias("mean_bid"), pl.len().alias("n"))
        .sort("subrun", "round")
    )
    colors = worker_color(_workers(tables))
    return (
        alt.Chart(agg)
        .mark_line(point=True)
        .encode(
            x=alt.X("round:O", title="Round"),
            y=alt.Y("mean_bid:Q", title="Bid (credits)"),
            color=alt.Color("worker:N", scale=colors, title="Worker"),
            tooltip=[
                "worker:N",
                "subrun:O",
                "round:O",
                alt.Tooltip("mean_bid:Q", format=".1f", title="mean bid"),
                alt.Tooltip("n:Q", title="runs with this round"),
            ],
        )
        .properties(width=150, height=240)
        .facet(column=alt.Column("subrun:O", title="Subrun"))
        .properties(title="Bids per round (mean over runs)")
    )


def budgets_over_rounds(tables: Mapping[str, pl.DataFrame]) -> alt.Chart:
    """Credits left per worker after each round's payments (mean over runs), per subrun."""
    sw = tables["subrun_workers"].select("run_id", "subrun", "worker", "budget")
    pay = (
        tables["payments"]
        .group_by("run_id", "subrun", "round", "worker")
        .agg(pl.col("amount").sum())
    )
    rounds = tables["rounds"].select("run_id", "subrun", "round").unique()
    grid = rounds.join(sw.select("run_id", "worker").unique(), on="run_id")
    grid = grid.join(pay, on=["run_id", "subrun", "round", "worker"], how="left").with_columns(
        pl.col("amount").fill_null(0)
    )
    grid = grid.join(sw, on=["run_id", "subrun", "worker"], how="left").sort(
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
    colors = worker_color(_workers(tables))
    return (
        alt.Chart(agg)
        .mark_line(interpolate="step-after", point=True)
        .encode(
            x=alt.X("round:O", title="Round"),
            y=alt.Y("balance:Q", title="Credits left after the round"),
            color=alt.Color("worker:N", scale=colors, title="Worker"),
            tooltip=[
                "worker:N",
                "subrun:O",
                "round:O",
                alt.Tooltip("balance:Q", format=".0f", title="credits left"),
            ],
        )
        .properties(width=150, height=240)
        .facet(column=alt.Column("subrun:O", title="Subrun"))
        .properties(title="Budgets over time (mean over runs)")
    )


def outcomes_by_subrun(tables: Mapping[str, pl.DataFrame]) -> alt.Chart:
    """Completion rate, deadline-miss rate and mean progress per subrun (over runs)."""
    e = tables["evaluations"]
    agg = (
        e.group_by("subrun")
        .agg(
            (pl.col("outcome") == "completed").mean().alias("completion"),
            (pl.col("outcome") == "terminated").mean().alias("deadline miss"),
            pl.col("progress").mean().alias("mean progress"),
            pl.col("score").mean().alias("mean score"),
            pl.len().alias("n"),
        )
        .sort("subrun")
    )
    long = agg.unpivot(
        index=["subrun", "n"],
        on=["completion", "deadline miss", "mean progress", "mean score"],
        variable_name="measure",
        value_name="value",
    )
    return (
        alt.Chart(long)
        .mark_bar()
        .encode(
            x=alt.X("measure:N", title=None, axis=alt.Axis(labelAngle=-30)),
            y=alt.Y(
                "value:Q",
                title="Share of workers",
                axis=alt.Axis(format="%"),
                scale=alt.Scale(domain=[0, 1]),
            ),
            color=alt.Color("measure:N", legend=None),
            column=alt.Column("subrun:O", title="Subrun"),
            tooltip=[
                "subrun:O",
                "measure:N",
                alt.Tooltip("value:Q", format=".1%"),
                alt.Tooltip("n:Q", title="worker-subruns"),
            ],
        )
        .properties(width=120, height=220, title="Outcomes per subrun")
    )
