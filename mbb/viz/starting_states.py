"""Figures of the starting-state analyses: the urgent worker's bids and durations, the rich
worker's spend and wins, and win rates in contested rounds at full vs depleted budget.

Each line is one "condition: group" series (the treated worker vs the others, and the
uniform baseline).
"""

from __future__ import annotations

from typing import Any

import altair as alt
import polars as pl

from mbb.viz.theme import none_chart

__all__ = ["contested_win_chart", "rich_worker_chart", "urgency_chart"]


def _series(df: pl.DataFrame) -> pl.DataFrame:
    """`series` = "condition: group" — one line per starting-state group and condition."""
    return df.with_columns(pl.format("{}: {}", "condition", "group").alias("series"))


def urgency_chart(premium: pl.DataFrame) -> alt.HConcatChart | alt.Chart:
    """The urgent worker's mean bid and requested duration by subrun vs the others and the
    uniform baseline: a premium early (ratio > 1), a termination discount later (< 1)."""
    if premium.is_empty():
        return none_chart(
            "Urgency premium, then termination discount", "no urgent worker (no deadline differs)"
        )
    d = _series(premium)
    tip: list[Any] = [
        "series:N",
        "subrun:O",
        alt.Tooltip("mean_bid:Q", format=".1f", title="mean bid (credits)"),
        alt.Tooltip("mean_duration:Q", format=".0f", title="mean duration (s)"),
        alt.Tooltip("bid_ratio:Q", format=".2f", title="bid / others' bid"),
        alt.Tooltip("rounds_per_worker:Q", format=".2f", title="rounds per worker"),
        alt.Tooltip("withdrawals:Q"),
    ]
    base = alt.Chart(d).encode(
        x=alt.X("subrun:O", title="Subrun"),
        color=alt.Color("series:N", title="Condition: group"),
        tooltip=tip,
    )
    bid = base.mark_line(point=True).encode(y=alt.Y("mean_bid:Q", title="Mean bid (credits)"))
    dur = base.mark_line(point=True).encode(
        y=alt.Y("mean_duration:Q", title="Mean requested duration (s)")
    )
    return alt.hconcat(
        bid.properties(width=240, height=220, title="Bid"),
        dur.properties(width=240, height=220, title="Requested duration"),
    ).properties(title="Urgency premium, then termination discount (closest deadline vs others)")


def rich_worker_chart(rich: pl.DataFrame) -> alt.FacetChart | alt.Chart:
    """The richest worker's spend, wins and win rate per subrun vs the others and the
    uniform-budget baseline (per worker, so groups of different size compare)."""
    if rich.is_empty():
        return none_chart(
            "Rich worker: spend, wins and win rate by subrun", "no rich worker (no budget differs)"
        )
    d = _series(rich)
    measures = {
        "spend_per_worker": "credits spent per worker",
        "wins_per_worker": "wins per worker",
        "win_rate": "win rate (wins / rounds)",
    }
    long = d.unpivot(
        index=["series", "subrun", "workers", "rounds", "wins", "spent"],
        on=list(measures),
        variable_name="measure",
        value_name="value",
    ).with_columns(pl.col("measure").replace_strict(measures))
    return (
        alt.Chart(long)
        .mark_line(point=True)
        .encode(
            x=alt.X("subrun:O", title="Subrun"),
            y=alt.Y("value:Q", title="Credits / wins / share"),
            color=alt.Color("series:N", title="Condition: group"),
            tooltip=[
                "series:N",
                "subrun:O",
                "measure:N",
                alt.Tooltip("value:Q", format=".2f"),
                alt.Tooltip("workers:Q", title="worker-runs"),
                alt.Tooltip("rounds:Q", title="worker-rounds"),
                alt.Tooltip("wins:Q"),
                alt.Tooltip("spent:Q", title="credits spent"),
            ],
        )
        .properties(width=200, height=200)
        .facet(column=alt.Column("measure:N", title=None, sort=list(measures.values())))
        .resolve_scale(y="independent")
        .properties(
            title={
                "text": "Rich worker: spend, wins and win rate by subrun",
                "subtitle": "each panel its own scale (credits, wins, share)",
            }
        )
    )


def contested_win_chart(contested: pl.DataFrame) -> alt.Chart:
    """Win rate in contested rounds at full vs depleted budget, per starting-state group."""
    if contested.is_empty():
        return none_chart("Contested win rate at full vs depleted budget", "no contested round")
    d = _series(contested)
    return (
        alt.Chart(d)
        .mark_bar()
        .encode(
            x=alt.X("budget_state:N", title="Budget at round start", sort=["full", "depleted"]),
            xOffset=alt.XOffset("series:N"),
            y=alt.Y(
                "win_rate:Q",
                title="Win rate in contested rounds",
                axis=alt.Axis(format="%"),
                scale=alt.Scale(domain=[0, 1]),
            ),
            color=alt.Color("series:N", title="Condition: group"),
            tooltip=[
                "series:N",
                "budget_state:N",
                alt.Tooltip("win_rate:Q", format=".1%", title="win rate"),
                alt.Tooltip("wins:Q"),
                alt.Tooltip("contested_rounds:Q", title="contested worker-rounds"),
            ],
        )
        .properties(
            width=320,
            height=220,
            title="Contested win rate at full vs depleted budget (< 50 % of the start)",
        )
    )
