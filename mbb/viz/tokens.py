"""Figures of the token audit: tokens per run by worker, subrun or model, role and phase, and
tokens per credit won (`mbb.analysis.token_audit`, `mbb.analysis.token_efficiency`).

Scripted runs are counted with an approximate tokenizer, which every title says.
"""

from __future__ import annotations

import textwrap

import altair as alt
import polars as pl

from mbb.analysis.tokens import total_cost
from mbb.viz.theme import (
    MAX_WIDTH,
    category_color,
    model_color,
    none_chart,
    seeds_subtitle,
    worker_order,
)

__all__ = ["token_audit_chart", "tokens_per_credit_chart"]

_PANELS_PER_ROW = 4
_BAR_WIDTH = 32  # pixels per bar of a panel
_Y_AXIS = 80  # pixels left of the first panel (the y axis, its labels and title)
_LEGEND = 130  # pixels right of the panels (a legend)
_GAP = 25  # pixels between panels


def _panel_width(df: pl.DataFrame, by: str) -> int:
    """A panel as wide as the most bars one condition draws (its axis lists only its own)."""
    bars = df.group_by("condition").agg(pl.col(by).n_unique().alias("bars"))["bars"]
    return max(120, _BAR_WIDTH * max([1, *bars.to_list()]))


def _columns(width: int, panels: int, *, legend: bool) -> int:
    """Panels to a row, at most `_PANELS_PER_ROW`, that keep the chart within `MAX_WIDTH`."""
    room = MAX_WIDTH - _Y_AXIS - (_LEGEND if legend else 0)
    return max(1, min(_PANELS_PER_ROW, panels, room // (width + _GAP)))


def token_audit_chart(
    audit: pl.DataFrame, by: str = "worker"
) -> alt.VConcatChart | alt.FacetChart | alt.Chart:
    """Tokens per run, stacked by phase, per worker (or subrun / model): one panel per
    condition, one row of panels per role. Each bar's total is the mean over the condition's
    runs with its 95 % CI (expanded percentile bootstrap over the condition's seeds: a
    whisker); mbb's choice is per condition, never pooled: runs of different conditions are
    not seeds of one distribution. Roles differ in size (a solver spends far more than a
    negotiator, a classifier little), so each role has its own y scale, shared by its
    conditions so that they can be compared; scripted runs are counted with the approximate
    tokenizer, which the title says.

    audit: `mbb.analysis.token_audit` output (one row per condition, run, worker, model, role,
        phase and subrun).
    by: the bars: "worker", "subrun" or "model".
    """
    from mbb.analysis.stats import seed_summary

    if by not in ("worker", "subrun", "model"):
        raise ValueError(f"by must be 'worker', 'subrun' or 'model', got {by!r}")
    if audit.is_empty():
        return none_chart(f"Token audit by {by}", "no token was spent")
    seats_note = ""
    if by == "model":
        # a persona of several seats (rule_makers: five rule_maker workers) pooled them into
        # one bar beside one-seat personas, reading as five times the spend: per seat instead
        seats = audit.group_by("run_id", "model").agg(pl.col("worker").n_unique().alias("_seats"))
        audit = audit.join(seats, on=["run_id", "model"], how="left").with_columns(
            pl.col("total_tokens") / pl.col("_seats"), pl.col("calls") / pl.col("_seats")
        )
        many = seats.filter(pl.col("_seats") > 1).group_by("model").agg(pl.col("_seats").max())
        seats_note = "; a model's tokens per seat it held" + (
            " (" + ", ".join(f"{m}: {n} seats" for m, n in sorted(many.rows())) + ")"
            if many.height
            else ""
        )
    runs = audit.select("condition", "run_id").unique()
    n_runs = runs.group_by("condition").agg(pl.len().alias("runs"))
    agg = (
        audit.group_by("condition", by, "role", "phase")
        .agg(
            pl.col("total_tokens").sum().alias("tokens"),
            pl.col("calls").sum().alias("calls"),
            total_cost().alias("cost_usd"),
        )
        .join(n_runs, on="condition")
        .with_columns((pl.col("tokens") / pl.col("runs")).alias("tokens_per_run"))
    )
    # a run that spent nothing on a (role, bar) of its condition counts 0 there: every run of
    # the condition is a seed
    cells = audit.select("condition", by, "role").unique()
    per_run = (
        runs.join(cells, on="condition")
        .join(
            audit.group_by("run_id", by, "role").agg(pl.col("total_tokens").sum()),
            on=["run_id", by, "role"],
            how="left",
        )
        .with_columns(pl.col("total_tokens").fill_null(0))
    )
    totals = seed_summary(per_run, ["condition", by, "role"], ["total_tokens"])
    approx = bool(audit["approximate"].all())
    levels = agg[by].unique().to_list()  # an axis in its own order, never in the data's
    sort = (
        worker_order([str(v) for v in levels])
        if by == "worker"
        else [str(v) for v in sorted(levels)]
    )
    note = " — approximate tokenizer (scripted text)" if approx else ""
    x_title = "Model / persona" if by == "model" else by.capitalize()
    x = alt.X(f"{by}:{'O' if by == 'subrun' else 'N'}", title=x_title, sort=sort)
    y_title = "Tokens per run and seat" if by == "model" else "Tokens per run"
    data = pl.concat(
        [
            agg.with_columns(pl.lit("bar").alias("kind"), pl.col(by).cast(pl.String)),
            totals.with_columns(pl.lit("total").alias("kind"), pl.col(by).cast(pl.String)),
        ],
        how="diagonal_relaxed",
    )
    conditions = sorted(data["condition"].unique().to_list())
    bars = (
        alt.Chart()
        .transform_filter("datum.kind === 'bar'")
        .mark_bar()
        .encode(
            x=x,
            y=alt.Y("tokens_per_run:Q", title=y_title, stack="zero"),
            color=alt.Color(
                "phase:N", title="Phase", scale=category_color(data["phase"].drop_nulls())
            ),
            tooltip=[
                "condition:N",
                alt.Tooltip(f"{by}:N"),
                "role:N",
                "phase:N",
                alt.Tooltip("tokens_per_run:Q", format=",.0f", title="tokens per run"),
                alt.Tooltip("runs:Q", title="runs of the condition"),
                alt.Tooltip("calls:Q", title="calls / utterances (the condition's runs)"),
                alt.Tooltip("cost_usd:Q", format="$.4f", title="cost (the condition's runs)"),
            ],
        )
    )
    whiskers = (
        alt.Chart()
        .transform_filter("datum.kind === 'total' && isValid(datum.ci_low)")
        .mark_errorbar(ticks=True, color="black")
        .encode(
            x=x,
            y=alt.Y("ci_low:Q", title=y_title),
            y2="ci_high:Q",
            tooltip=[
                "condition:N",
                alt.Tooltip(f"{by}:N"),
                "role:N",
                alt.Tooltip("mean:Q", format=",.0f", title="total per run (mean)"),
                alt.Tooltip("ci_low:Q", format=",.0f", title="95% CI low"),
                alt.Tooltip("ci_high:Q", format=",.0f", title="95% CI high"),
                alt.Tooltip("n:Q", title="seeds (runs of the condition)"),
            ],
        )
    )
    # a condition's axis lists only its own bars: a panel is as wide as the most any draws
    width = _panel_width(agg, by)
    rows = [
        alt.layer(bars, whiskers, data=data.filter(pl.col("role") == role))
        .properties(width=width, height=220)
        # a study of many cells wraps its panels (72 in the paper's design), as many to a row
        # as a page holds
        .facet(
            facet=alt.Facet("condition:N", title=f"Role: {role}", sort=conditions),
            columns=_columns(width, len(conditions), legend=True),
        )
        .resolve_scale(x="independent")  # a condition's axis lists only its own bars
        for role in sorted(data["role"].unique().to_list())
    ]
    chart = rows[0] if len(rows) == 1 else alt.vconcat(*rows).resolve_scale(y="independent")
    n_total = int(n_runs["runs"].sum())
    return chart.properties(
        title={
            "text": f"Token audit by {by}, role and phase, per condition "
            f"({n_runs.height} condition(s), {n_total} run(s)){note}",
            "subtitle": [
                *seeds_subtitle(
                    totals["n"],
                    "bars: phases stacked; whisker: total; per condition (its runs are its seeds)"
                    + seats_note,
                ),
                "each role its own y scale, shared by the conditions",
            ],
        }
    )


def tokens_per_credit_chart(efficiency: pl.DataFrame) -> alt.Chart:
    """Tokens spent per credit paid for won windows, per model (lower: cheaper talk per
    unit of resource won), from `token_efficiency`: a ratio of sums over each condition's
    runs, not a mean over seeds, so no interval; the subtitle says so and how many runs each
    condition pools."""
    d = efficiency.drop_nulls("tokens_per_credit_won")
    if d.is_empty():
        return none_chart("Tokens per credit won", "no credit was paid for a won window")
    colors = model_color(d["model"].to_list())
    approx = bool(d["approximate"].all()) if d.height else False
    # one panel per condition, wrapped to a page (seven side by side were 1,880 px), each
    # listing only its own models
    width = _panel_width(d, "model")
    conditions = sorted(d["condition"].unique().to_list())
    return (
        alt.Chart(d)
        .mark_bar()
        .encode(
            x=alt.X("model:N", title="Model / persona", axis=alt.Axis(labelAngle=-90)),
            y=alt.Y("tokens_per_credit_won:Q", title="Tokens per credit won"),
            color=alt.Color("model:N", scale=colors, legend=None),
            facet=alt.Facet(
                "condition:N",
                title="Condition",
                sort=conditions,
                columns=_columns(width, len(conditions), legend=False),
            ),
            tooltip=[
                "condition:N",
                "model:N",
                alt.Tooltip("tokens_per_credit_won:Q", format=".2f", title="tokens per credit"),
                alt.Tooltip("tokens_per_window_won:Q", format=".1f", title="tokens per window"),
                alt.Tooltip("tokens_per_test_passed:Q", format=".1f", title="tokens per test"),
                alt.Tooltip("total_tokens:Q", format=",", title="tokens"),
                alt.Tooltip("credits_paid:Q", format=",", title="credits paid"),
                alt.Tooltip("cost_usd:Q", format="$.4f", title="cost"),
            ],
        )
        .properties(
            width=width,
            height=220,
            title={
                "text": "Tokens per credit won" + (" (approximate tokenizer)" if approx else ""),
                "subtitle": _pooled_subtitle(d),
            },
        )
        .resolve_scale(x="independent")
    )


def _pooled_subtitle(d: pl.DataFrame) -> list[str]:
    """Why a tokens-per-credit bar has no interval, and the n behind each condition."""
    lines = [
        "each bar: all the model's tokens ÷ all the credits it paid for won windows, pooled "
        "over the condition's runs",
        "(a ratio of sums, not a mean over seeds: no interval is drawn)",
    ]
    if "runs" in d.columns:
        runs = d.group_by("condition").agg(pl.col("runs").max()).sort("condition")
        counts = ", ".join(f"{c} {n}" for c, n in runs.iter_rows())
        lines += textwrap.wrap(f"runs pooled: {counts}", 100)
    return lines
