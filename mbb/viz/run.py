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
    category_color,
    model_color,
    none_chart,
    none_layer,
    seeds_subtitle,
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


def _who(tables: Mapping[str, pl.DataFrame]) -> pl.DataFrame | None:
    """(run_id, worker, label): the persona of a scripted worker, the model of an LLM one
    (`mbb.analysis.with_run_info` adds the `workers` table); None without it."""
    w = tables.get("workers")
    if w is None or "label" not in w.columns or w.is_empty():
        return None
    return w.select("run_id", "worker", "label")


def _by_persona(
    per_worker: pl.DataFrame, tables: Mapping[str, pl.DataFrame], value: str
) -> tuple[pl.DataFrame, str]:
    """Per run, subrun, round and persona (or seat, without the workers table) the mean of
    `value` over that run's workers of the persona: one value per seed, ready for
    `seed_summary`. Returns the frame and the column the lines follow."""
    who = _who(tables)
    key = "worker"
    if who is not None:
        per_worker = per_worker.join(who, on=["run_id", "worker"], how="left").with_columns(
            pl.col("label").fill_null(pl.col("worker"))
        )
        key = "label"
    per_run = per_worker.group_by("run_id", "subrun", "round", key).agg(pl.col(value).mean())
    return per_run, key


def _per_round_lines(
    per_run: pl.DataFrame,
    key: str,
    value: str,
    tables: Mapping[str, pl.DataFrame],
    y_title: str,
    title: str,
    mark: dict,
    fmt: str,
) -> alt.FacetChart:
    """One line per persona (or seat) over rounds with its 95 % CI band, one panel per subrun
    sharing the y scale; "none" in a subrun without data; the subtitle says what the band is
    and warns where few seeds stand behind a point."""
    from mbb.analysis.stats import seed_summary

    agg = seed_summary(per_run, ["subrun", "round", key], [value]).sort("subrun", "round")
    data = with_empty_panels(
        agg, pl.DataFrame({"subrun": _subruns(tables)}, schema={"subrun": agg.schema["subrun"]})
    )
    if key == "worker":
        colors = worker_color(_workers(tables))
        legend = "Seat (personas blended)"
        first = (
            "each seat's line blends the personas seated there across seeds "
            "(pass tables with `workers` for one line per persona)"
        )
    else:
        colors = model_color(agg[key].drop_nulls().to_list())
        legend = "Persona / model"
        first = "one line per persona (scripted) or model (LLM), whatever seat it had"
    color = alt.Color(f"{key}:N", scale=colors, title=legend)
    x = alt.X("round:O", title="Round")
    tooltip = [
        alt.Tooltip(f"{key}:N", title=legend),
        "subrun:O",
        "round:O",
        alt.Tooltip("mean:Q", format=fmt, title="mean"),
        alt.Tooltip("ci_low:Q", format=fmt, title="95% CI low"),
        alt.Tooltip("ci_high:Q", format=fmt, title="95% CI high"),
        alt.Tooltip("n:Q", title="seeds"),
    ]
    band = (
        alt.Chart()
        .mark_area(opacity=0.13, **mark)
        .encode(
            x=x,
            y=alt.Y("ci_low:Q", title=y_title),
            y2="ci_high:Q",
            color=color,
        )
        .transform_filter("datum.empty !== true && isValid(datum.ci_low)")
    )
    lines = (
        alt.Chart()
        .mark_line(point=True, **mark)
        .encode(x=x, y=alt.Y("mean:Q", title=y_title), color=color, tooltip=tooltip)
        .transform_filter("datum.empty !== true")
    )
    none = none_layer(alt.value(PANEL_WIDTH / 2), alt.value(PANEL_HEIGHT / 2))
    return (
        alt.layer(lines, band, none, data=data)  # the first layer's marks make the legend
        .properties(width=PANEL_WIDTH, height=PANEL_HEIGHT)
        .facet(column=alt.Column("subrun:O", title="Subrun"))
        .properties(title={"text": title, "subtitle": seeds_subtitle(agg["n"], first)})
    )


def bids_by_round(tables: Mapping[str, pl.DataFrame]) -> alt.FacetChart | alt.Chart:
    """Final declared bid per round, one line per persona (scripted) or model (LLM) with the
    mean over seeds and its 95 % CI band (expanded percentile bootstrap over seeds,
    `mbb.analysis.stats.seed_summary`), one panel per subrun sharing the bid scale.

    Seating rotates personas over seeds, so a seat's mean would blend five strategies: lines
    follow the persona. Without the `workers` table (`mbb.analysis.with_run_info`) they follow
    the seat, and the subtitle says what each line blends.

    tables: the event tables (`mbb.core.tables`), with `workers` for per-persona lines.
    """
    title = "Bids per round"
    d = tables["declarations"].sort("seq").group_by("run_id", "subrun", "round", "worker").last()
    if d.is_empty():
        return none_chart(title, "no bid was declared (a centralized mechanism, or no rounds)")
    per_run, key = _by_persona(
        d.select("run_id", "subrun", "round", "worker", "bid"), tables, "bid"
    )
    return _per_round_lines(per_run, key, "bid", tables, "Bid (credits)", title, {}, ".1f")


def budgets_over_rounds(tables: Mapping[str, pl.DataFrame]) -> alt.FacetChart | alt.Chart:
    """Credits left after each round's payments, one line per persona (or model) with the mean
    over seeds and its 95 % CI band (as `bids_by_round`), one panel per subrun sharing the
    credit scale.

    tables: the event tables (`mbb.core.tables`), with `workers` for per-persona lines.
    """
    title = "Budgets over rounds"
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
    per_run, key = _by_persona(
        grid.select("run_id", "subrun", "round", "worker", "balance"), tables, "balance"
    )
    return _per_round_lines(
        per_run,
        key,
        "balance",
        tables,
        "Credits left after the round",
        title,
        {"interpolate": "step-after"},
        ".0f",
    )


_OUTCOME_LABELS = {
    "completion": "completion",
    "deadline_miss": "deadline miss",
    "progress": "mean progress",
    "score": "mean score",
}


def outcomes_by_subrun(tables: Mapping[str, pl.DataFrame]) -> alt.FacetChart | alt.Chart:
    """Completion rate, mean progress and mean test score per subrun (and the deadline-miss
    rate, unless it is 1 − completion in every run: the same fact twice, said in the
    subtitle): the mean over seeds (each run's rate over its worker-subruns,
    `mbb.analysis.outcome.outcomes`) with its 95 % CI (expanded percentile bootstrap over
    seeds, `mbb.analysis.stats.seed_summary`), all on one 0-100 % scale shared by the panels,
    the subtitle saying what each percentage counts.

    tables: the event tables (`mbb.core.tables`).
    """
    from mbb.analysis.outcome import misses_complete_completion
    from mbb.analysis.stats import seed_summary

    title = "Outcomes per subrun"
    if tables["evaluations"].is_empty():
        return none_chart(title, "no task was evaluated")
    per_run = outcomes(tables, ["run_id", "subrun"]).select("run_id", "subrun", *_OUTCOME_LABELS)
    labels = dict(_OUTCOME_LABELS)
    lines = []
    if misses_complete_completion(per_run):
        del labels["deadline_miss"]
        lines.append(
            "deadline-miss rate not drawn: it is 100% − completion here (every worker-subrun "
            "completed or hit its deadline)"
        )
    units = "completion" + (", deadline miss" if "deadline_miss" in labels else "")
    lines.append(
        f"{units}: share of worker-subruns; progress: mean share of work done; "
        "score: mean share of hidden tests passed"
    )
    agg = seed_summary(per_run, ["subrun"], list(labels)).with_columns(
        pl.col("measure").replace_strict(labels)
    )
    order = list(labels.values())
    x = alt.X("measure:N", title=None, sort=order, axis=alt.Axis(labelAngle=-30))
    y_title = "Mean over seeds (%)"
    y = alt.Y(
        "mean:Q",
        title=y_title,
        axis=alt.Axis(format="%"),
        scale=alt.Scale(domain=[0, 1]),
    )
    tooltip = [
        "subrun:O",
        "measure:N",
        alt.Tooltip("mean:Q", format=".1%", title="mean over seeds"),
        alt.Tooltip("ci_low:Q", format=".1%", title="95% CI low"),
        alt.Tooltip("ci_high:Q", format=".1%", title="95% CI high"),
        alt.Tooltip("n:Q", title="seeds"),
    ]
    bars = (
        alt.Chart()
        .mark_bar(opacity=0.85)
        .encode(
            x=x,
            y=y,
            color=alt.Color(
                "measure:N", sort=order, legend=None, scale=category_color(order, sort=False)
            ),
            tooltip=tooltip,
        )
    )
    whiskers = (
        alt.Chart()
        .mark_errorbar(ticks=True, color="black")
        .encode(x=x, y=alt.Y("ci_low:Q", title=y_title), y2="ci_high:Q", tooltip=tooltip)
    )
    return (
        alt.layer(bars, whiskers, data=agg)
        .properties(width=120, height=220)
        .facet(column=alt.Column("subrun:O", title="Subrun"))
        .properties(title={"text": title, "subtitle": [*lines, *seeds_subtitle(agg["n"])]})
    )
