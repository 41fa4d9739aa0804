"""Figures of the token audit: tokens per run by worker, subrun or model, role and phase, and
tokens per credit won (`mbb.analysis.token_audit`, `mbb.analysis.token_efficiency`).

Scripted runs are counted with an approximate tokenizer, which every title says.
"""

from __future__ import annotations

import altair as alt
import polars as pl

from mbb.analysis.tokens import total_cost
from mbb.viz.theme import model_color, none_chart, worker_order

__all__ = ["token_audit_chart", "tokens_per_credit_chart"]


def token_audit_chart(audit: pl.DataFrame, by: str = "worker") -> alt.FacetChart | alt.Chart:
    """Tokens per run, stacked by phase, per worker (or subrun / model), one panel per role;
    scripted runs are counted with the approximate tokenizer, which the title says."""
    if by not in ("worker", "subrun", "model"):
        raise ValueError(f"by must be 'worker', 'subrun' or 'model', got {by!r}")
    n_runs = max(1, audit["run_id"].drop_nulls().n_unique())
    if audit.is_empty():
        return none_chart(f"Token audit by {by}", "no token was spent")
    agg = audit.group_by(by, "role", "phase").agg(
        (pl.col("total_tokens").sum() / n_runs).alias("tokens_per_run"),
        pl.col("calls").sum().alias("calls"),
        total_cost().alias("cost_usd"),
    )
    approx = bool(audit["approximate"].all()) if audit.height else False
    sort = worker_order(agg[by].cast(pl.String).to_list()) if by == "worker" else None
    note = " — approximate tokenizer (scripted text)" if approx else ""
    return (
        alt.Chart(agg)
        .mark_bar()
        .encode(
            x=alt.X(f"{by}:{'O' if by == 'subrun' else 'N'}", title=by.capitalize(), sort=sort),
            y=alt.Y("tokens_per_run:Q", title="Tokens per run", stack="zero"),
            color=alt.Color("phase:N", title="Phase"),
            tooltip=[
                alt.Tooltip(f"{by}:N"),
                "role:N",
                "phase:N",
                alt.Tooltip("tokens_per_run:Q", format=",.0f", title="tokens per run"),
                alt.Tooltip("calls:Q", title="calls / utterances (all runs)"),
                alt.Tooltip("cost_usd:Q", format="$.4f", title="cost (all runs)"),
            ],
        )
        .properties(width=max(160, 40 * agg[by].n_unique()), height=220)
        .facet(column=alt.Column("role:N", title="Role"))
        .properties(title=f"Token audit by {by}, role and phase ({n_runs} run(s)){note}")
    )


def tokens_per_credit_chart(efficiency: pl.DataFrame) -> alt.Chart:
    """Tokens spent per credit paid for won windows, per model (lower: cheaper talk per
    unit of resource won), from `token_efficiency`."""
    d = efficiency.drop_nulls("tokens_per_credit_won")
    if d.is_empty():
        return none_chart("Tokens per credit won", "no credit was paid for a won window")
    colors = model_color(d["model"].to_list())
    approx = bool(d["approximate"].all()) if d.height else False
    return (
        alt.Chart(d)
        .mark_bar()
        .encode(
            x=alt.X("model:N", title="Model / persona", axis=alt.Axis(labelAngle=-30)),
            y=alt.Y("tokens_per_credit_won:Q", title="Tokens per credit won"),
            color=alt.Color("model:N", scale=colors, legend=None),
            column=alt.Column("condition:N", title="Condition"),
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
            width=40 * max(3, d["model"].n_unique()),
            height=220,
            title="Tokens per credit won" + (" (approximate tokenizer)" if approx else ""),
        )
    )
