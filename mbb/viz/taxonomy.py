"""Figures of the taxonomy analyses: behaviour prevalence, strategic profiles, institutions,
relational behaviour against the bid level (Fig. 12), the structural metrics (Table 8),
behaviour and linguistic drift, and the classifier's validation.

Inputs are the tables dict (with `runs`/`workers` from `mbb.analysis.with_run_info`) and the
tidy outputs of `mbb.analysis`. Categories are in taxonomy order († relational,
‡ non-relational); models and personas keep one colour (`mbb.viz.theme.model_color`), workers
one order. Shares are drawn on a 0-100 % scale shared by every panel; a chart with nothing to
show says "none".
"""

from __future__ import annotations

import textwrap
from collections.abc import Mapping
from typing import Any

import altair as alt
import polars as pl

from mbb import analysis as A
from mbb.core.taxonomy import CATEGORIES, SEPARATE
from mbb.viz.theme import (
    CATEGORY_PALETTE,
    INK,
    MAX_WIDTH,
    category_color,
    condition_color,
    condition_dash,
    model_color,
    none_chart,
    none_layer,
    shared_colour_note,
    with_empty_panels,
    worker_order,
)

__all__ = [
    "behaviour_drift_chart",
    "classifier_validation",
    "institutional_behaviours",
    "linguistic_drift_chart",
    "prevalence_heatmap",
    "relational_vs_bid_chart",
    "strategic_profile",
    "structural_table",
]

_TITLE = {c.name: f"{c.title} {c.symbol}".strip() for c in CATEGORIES}
# reported on their own rows, below the 21 (metagaming rolls up into none of them)
_TITLE |= {c.name: f"{c.title} (separate)" for c in SEPARATE}
_ORDER = [_TITLE[c.name] for c in (*CATEGORIES, *SEPARATE)]
_CAT = pl.DataFrame(
    {
        "category": [c.name for c in (*CATEGORIES, *SEPARATE)],
        "label": [_TITLE[c.name] for c in (*CATEGORIES, *SEPARATE)],
        "family": [c.family for c in (*CATEGORIES, *SEPARATE)],
        "marker": [c.marker for c in (*CATEGORIES, *SEPARATE)],
    }
)
_MARKER_NAME = {"relational": "relational †", "non_relational": "non-relational ‡", "none": "none"}


def prevalence_heatmap(
    tables: Mapping[str, pl.DataFrame], wr_pred: pl.DataFrame, by: str = "model"
) -> alt.Chart:
    """Share of worker-rounds showing each category, per model, persona or condition — the
    paper's Fig. 6 grid; categories in taxonomy order, † relational, ‡ non-relational, then
    exclusionary coalitions, divide-and-conquer and metagaming on rows of their own (the first
    two also count under rival targeting; metagaming under none of the 21)."""
    if by not in ("model", "persona", "condition"):
        raise ValueError(f"by must be 'model', 'persona' or 'condition', got {by!r}")
    wr = A.worker_rounds(tables)
    if wr.is_empty():
        return none_chart(f"Behaviour prevalence by {by}", "no worker took part in a round")
    if by == "persona":
        wr = wr.join(
            _workers(tables).select("run_id", "worker", "persona"),
            on=["run_id", "worker"],
            how="left",
        ).with_columns(pl.col("persona").fill_null("unknown"))
    keys = ["run_id", "subrun", "round", "worker"]
    denom = wr.group_by(by).agg(pl.len().alias("worker_rounds"))
    hits = (
        wr.join(wr_pred.select(*keys, "category").unique(), on=keys)
        .group_by(by, "category")
        .agg(pl.len().alias("n"))
    )
    grid = (
        denom.join(_CAT, how="cross")
        .join(hits, on=[by, "category"], how="left")
        .with_columns(pl.col("n").fill_null(0))
        .with_columns((pl.col("n") / pl.col("worker_rounds")).alias("prevalence"))
    )
    return (
        alt.Chart(grid)
        .mark_rect()
        .encode(
            x=alt.X(f"{by}:N", title=by.capitalize(), axis=alt.Axis(labelAngle=-30)),
            y=alt.Y("label:N", title="Taxonomy category", sort=_ORDER),
            color=alt.Color(
                "prevalence:Q",
                title="Share of worker-rounds",
                scale=alt.Scale(scheme="blues", domain=[0, 1]),
                legend=alt.Legend(format="%"),
            ),
            tooltip=[
                alt.Tooltip(f"{by}:N"),
                alt.Tooltip("label:N", title="category"),
                alt.Tooltip("prevalence:Q", format=".1%", title="share of worker-rounds"),
                alt.Tooltip("n:Q", title="worker-rounds with it"),
                alt.Tooltip("worker_rounds:Q", title="worker-rounds"),
            ],
        )
        .properties(
            width=max(120, 60 * denom.height),
            height=len(_ORDER) * 16,
            title=f"Behaviour prevalence by {by} (share of worker-rounds)",
        )
    )


def strategic_profile(tables: Mapping[str, pl.DataFrame], wr_pred: pl.DataFrame) -> alt.Chart:
    """Per model: share of worker-rounds using any category of each family (negotiation,
    rules) and each institution marker (relational †, non-relational ‡) — a model's style.
    Each share pools the model's worker-rounds over all runs (a descriptive profile, not a
    mean over seeds: no interval); the subtitle gives each model's n."""
    keys = ["run_id", "subrun", "round", "worker"]
    wr = A.worker_rounds(tables)
    if wr.is_empty():
        return none_chart("Strategic profile per model", "no worker took part in a round")
    the21 = _CAT.filter(pl.col("category").is_in([c.name for c in CATEGORIES]))
    p = wr_pred.select(*keys, "category").unique().join(the21, on="category")
    profile = pl.concat(
        [
            p.select(*keys, pl.format("family: {}", "family").alias("profile")),
            p.filter(pl.col("marker") != "none").select(
                *keys,
                pl.col("marker").replace_strict(_MARKER_NAME).alias("profile"),
            ),
        ]
    ).unique()
    denom = wr.group_by("model").agg(pl.len().alias("worker_rounds"))
    hits = (
        wr.select(*keys, "model")
        .join(profile, on=keys)
        .group_by("model", "profile")
        .agg(pl.len().alias("n"))
    )
    order = ["family: negotiation", "family: rules", "relational †", "non-relational ‡"]
    grid = (
        denom.join(pl.DataFrame({"profile": order}), how="cross")
        .join(hits, on=["model", "profile"], how="left")
        .with_columns(pl.col("n").fill_null(0))
        .with_columns((pl.col("n") / pl.col("worker_rounds")).alias("share"))
    )
    colors = model_color(grid["model"].to_list())
    return (
        alt.Chart(grid)
        .mark_bar()
        .encode(
            x=alt.X("model:N", title=None, axis=alt.Axis(labels=False, ticks=False)),
            y=alt.Y(
                "share:Q",
                title="Share of worker-rounds",
                axis=alt.Axis(format="%"),
                scale=alt.Scale(domain=[0, 1]),
            ),
            color=alt.Color("model:N", scale=colors, title="Model / persona"),
            column=alt.Column("profile:N", title=None, sort=order),
            tooltip=[
                "model:N",
                alt.Tooltip("profile:N", title="family / marker"),
                alt.Tooltip("share:Q", format=".1%", title="share of worker-rounds"),
                alt.Tooltip("n:Q", title="worker-rounds"),
            ],
        )
        .properties(
            width=130,
            height=220,
            title={
                "text": "Strategic profile per model",
                "subtitle": [
                    "share of the model's worker-rounds, pooled over runs: a descriptive "
                    "profile, not a mean over seeds, so no interval is drawn",
                    *textwrap.wrap(
                        "n worker-rounds: "
                        + ", ".join(f"{m} {n:,}" for m, n in denom.sort("model").iter_rows()),
                        100,
                    ),
                ],
            },
        )
    )


def institutional_behaviours(
    inst: pl.DataFrame, pairs: pl.DataFrame
) -> alt.HConcatChart | alt.Chart:
    """Left: institutions per worker and run (self-discovered, forward-scoped, marked), by
    marker. Right: per (worker, peer), the share of runs with a forward-scoped relational
    behaviour in private messages, and how many of those are self-discovered."""
    n_runs = max(1, inst["run_id"].n_unique())
    if (
        not inst.filter(pl.col("institutional")).height
        and not pairs.filter(pl.col("forward_scoped")).height
    ):
        return none_chart(
            f"Institutional behaviours ({n_runs} run(s))",
            "no institutional category and no forward-scoped relational tie",
        )
    per_worker = (
        inst.filter(pl.col("institutional"))
        .group_by("worker", "marker")
        .agg(
            (pl.len() / n_runs).alias("per_run"),
            pl.col("category").unique().sort().str.join(", ").alias("categories"),
        )
        .with_columns(pl.col("marker").replace_strict(_MARKER_NAME))
    )
    workers = worker_order(inst["worker"].to_list())
    left = (
        alt.Chart(per_worker)
        .mark_bar()
        .encode(
            x=alt.X("worker:N", title="Worker", sort=workers),
            y=alt.Y("per_run:Q", title="Institutional categories per run"),
            color=alt.Color(
                "marker:N",
                title="Marker",
                scale=alt.Scale(
                    domain=["relational †", "non-relational ‡"],
                    range=[CATEGORY_PALETTE[0], CATEGORY_PALETTE[2]],
                ),
            ),
            tooltip=[
                "worker:N",
                "marker:N",
                alt.Tooltip("per_run:Q", format=".2f", title="categories per run"),
                alt.Tooltip("categories:N", title="categories"),
            ],
        )
        .properties(width=36 * max(3, len(workers)), height=220, title="Per worker")
    )
    n_pair_runs = max(1, pairs["run_id"].n_unique()) if pairs.height else 1
    pw = (
        pairs.filter(pl.col("forward_scoped"))
        .group_by("worker", "peer")
        .agg(
            (pl.col("run_id").n_unique() / n_pair_runs).alias("share_of_runs"),
            pl.col("institutional").sum().alias("self_discovered"),
            pl.col("category").unique().sort().str.join(", ").alias("categories"),
        )
    )
    right = (
        alt.Chart(pw)
        .mark_rect()
        .encode(
            x=alt.X("peer:N", title="Peer (addressee of private messages)", sort=workers),
            y=alt.Y("worker:N", title="Worker", sort=workers),
            color=alt.Color(
                "share_of_runs:Q",
                title="Share of runs",
                scale=alt.Scale(scheme="oranges", domain=[0, 1]),
                legend=alt.Legend(format="%"),
            ),
            tooltip=[
                "worker:N",
                "peer:N",
                alt.Tooltip("share_of_runs:Q", format=".0%", title="runs with a tie"),
                alt.Tooltip("self_discovered:Q", title="self-discovered (worker-peer-category)"),
                alt.Tooltip("categories:N", title="relational categories"),
            ],
        )
        .properties(width=36 * max(3, len(workers)), height=36 * max(3, len(workers)))
        .properties(title="Per pair (forward-scoped relational ties)")
    )
    return alt.hconcat(left, right).properties(
        title={
            "text": f"Institutional behaviours ({n_runs} run(s))",
            "subtitle": [
                f"left: each worker's institutional categories summed over the {n_runs} run(s) "
                f"read, ÷ {n_runs}; right: share of the {n_pair_runs} run(s) with a relational "
                "private message",
                "descriptive counts of the runs read, not means over seeds compared between "
                "conditions: no interval is drawn",
                *_mixed_warning(inst),
            ],
        }
    )


def _mixed_warning(inst: pl.DataFrame) -> list[str]:
    """A subtitle line when some run read had LLM and scripted negotiators together
    (`mbb.analysis.institutions.MIXED_NOTE`): what it shows there is not emergence."""
    if "mixed_negotiators" not in inst.columns:
        return []
    mixed = inst.filter(pl.col("mixed_negotiators"))["run_id"].n_unique()
    if not mixed:
        return []
    return [
        f"⚠ {mixed} of the {inst['run_id'].n_unique()} run(s) mixed LLM and scripted "
        "negotiators: scripted personas' messages model institutions there, so those "
        "runs are no evidence of emergence among LLM agents"
    ]


def classifier_validation(
    prf: pl.DataFrame, kappa: pl.DataFrame | None = None
) -> alt.HConcatChart | alt.Chart:
    """Per-category F1 (bars) with precision and recall (points) against ground truth, and,
    when given, Cohen's kappa between two classifiers; categories without support are
    dropped (their F1 is undefined)."""
    macro = prf.filter(pl.col("category") == "macro (enacted)")
    body = (
        prf.filter(pl.col("support") > 0)
        .join(_CAT.select("category", "label"), on="category")
        .select("label", "support", "predicted", "tp", "precision", "recall", "f1")
    )
    order = [c for c in _ORDER if c in set(body["label"])]
    if body.is_empty():
        return none_chart(
            "Classifier validation against ground truth", "no category has ground-truth labels"
        )
    y = alt.Y("label:N", title="Taxonomy category", sort=order)
    tip = [
        alt.Tooltip("label:N", title="category"),
        alt.Tooltip("f1:Q", format=".2f", title="F1"),
        alt.Tooltip("precision:Q", format=".2f"),
        alt.Tooltip("recall:Q", format=".2f"),
        alt.Tooltip("support:Q", title="true labels"),
        alt.Tooltip("predicted:Q", title="predicted labels"),
    ]
    h = 16 * max(3, len(order))
    f1 = (
        alt.Chart(body)
        .mark_bar(color=INK)
        .encode(x=alt.X("f1:Q", title="F1 (0-1)", scale=alt.Scale(domain=[0, 1])), y=y, tooltip=tip)
        .properties(width=200, height=h, title="F1 per category")
    )
    pr_long = body.unpivot(
        index=["label", "support", "predicted"],
        on=["precision", "recall"],
        variable_name="measure",
        value_name="value",
    )
    pr = (
        alt.Chart(pr_long)
        .mark_point(filled=True, size=60)
        .encode(
            x=alt.X("value:Q", title="Precision / recall (0-1)", scale=alt.Scale(domain=[0, 1])),
            y=alt.Y("label:N", title=None, sort=order, axis=alt.Axis(labels=False)),
            color=alt.Color(
                "measure:N",
                title="Measure",
                scale=category_color(["precision", "recall"]),
            ),
            shape=alt.Shape(
                "measure:N",
                title="Measure",
                scale=alt.Scale(domain=["precision", "recall"], range=["circle", "square"]),
            ),
            tooltip=[
                alt.Tooltip("label:N", title="category"),
                "measure:N",
                alt.Tooltip("value:Q", format=".2f"),
                alt.Tooltip("support:Q", title="true labels"),
                alt.Tooltip("predicted:Q", title="predicted labels"),
            ],
        )
        .properties(width=200, height=h, title="Precision and recall")
    )
    parts: list[alt.Chart] = [f1, pr]
    title = "Classifier validation against ground truth"
    if macro.height and macro["f1"][0] is not None:
        title += f" — macro F1 {macro['f1'][0]:.2f}"
    if kappa is not None:
        pooled = kappa.filter(pl.col("category") == "pooled")
        k = (
            kappa.filter(pl.col("category") != "pooled")
            .join(_CAT.select("category", "label"), on="category")
            .filter(pl.col("label").is_in(order) | ((pl.col("n_a") + pl.col("n_b")) > 0))
        )
        korder = [c for c in _ORDER if c in set(k["label"])]
        parts.append(
            alt.Chart(k)
            .mark_bar(color=INK)
            .encode(
                x=alt.X(
                    "kappa:Q", title="Cohen's kappa (-1 to 1)", scale=alt.Scale(domain=[-1, 1])
                ),
                y=alt.Y("label:N", title=None, sort=korder),
                tooltip=[
                    alt.Tooltip("label:N", title="category"),
                    alt.Tooltip("kappa:Q", format=".2f"),
                    alt.Tooltip("agreement:Q", format=".1%", title="raw agreement"),
                    alt.Tooltip("n_a:Q", title="labels by A"),
                    alt.Tooltip("n_b:Q", title="labels by B"),
                    alt.Tooltip("units:Q", title="units"),
                ],
            )
            .properties(width=200, height=16 * max(3, len(korder)), title="Agreement (kappa)")
        )
        if pooled.height and pooled["kappa"][0] is not None:
            title += f"; pooled kappa {pooled['kappa'][0]:.2f}"
    return alt.hconcat(*parts).properties(title=title)


def behaviour_drift_chart(drift: pl.DataFrame, tests: pl.DataFrame) -> alt.FacetChart | alt.Chart:
    """Prevalence of each strategy group by subrun, one panel per model and condition (all on
    one 0-100 % scale; "none" for a model absent from a condition); the chi-square test of
    change across subruns is in each line's tooltip, and the count of significant changes in
    the subtitle, Holm-adjusted over the series tested (`mbb.analysis.stats.holm_adjust`: 45
    tests at an uncorrected 0.05 would find about two by chance alone); the series with no test
    are counted there too, by why (`_untested`). Panels are narrowed to
    keep the chart within a page, and the y axis is titled once, in the subtitle (a title per
    row of panels overprinted its neighbours).

    drift: `mbb.analysis.behaviour_drift` output.
    tests: `mbb.analysis.drift_tests` output.
    """
    keys = ["condition", "model", "group"]
    if drift.is_empty():
        return none_chart("Behaviour drift", "no worker-round to classify")
    level = "subrun" if "subrun" in drift.columns else "round"
    untested_lines = textwrap.wrap(_untested(drift, tests, keys, level), 110)
    drift, level_title = _binned_levels(drift, level)
    from mbb.analysis.stats import holm_adjust

    tests = tests.with_columns(
        pl.Series("p_holm", holm_adjust(tests["p_value"].to_list()), pl.Float64)
    )
    t = tests.select(*keys, "chi2", "dof", "p_value", "p_holm", "delta")
    d = drift.join(t, on=keys, how="left")
    n_sig = tests.filter(pl.col("p_holm") < 0.05).height
    n_tested = tests["p_value"].drop_nulls().len()  # a series that cannot change is not tested
    n_models = max(1, d["model"].n_unique())
    # the models side by side within a page: the row labels and y axis left, the legend below
    width = max(60, min(130, (MAX_WIDTH - 120) // n_models - 20))
    panels = d.select("condition").unique().join(d.select("model").unique(), how="cross")
    data = with_empty_panels(d, panels)
    lines = (
        alt.Chart()
        .mark_line(point=True)
        .encode(
            x=alt.X(f"{level}:O", title=level_title),
            y=alt.Y(
                "prevalence:Q",
                title=None,  # one title for all rows, in the subtitle
                axis=alt.Axis(format="%"),
                scale=alt.Scale(domain=[0, 1]),
            ),
            color=alt.Color(
                "group:N",
                title="Strategy group",
                scale=category_color(d["group"].drop_nulls()),
                legend=alt.Legend(orient="bottom", direction="horizontal", columns=3),
            ),
            tooltip=[
                "condition:N",
                "model:N",
                "group:N",
                alt.Tooltip(f"{level}:O"),
                alt.Tooltip("prevalence:Q", format=".1%"),
                alt.Tooltip("worker_rounds:Q", title="worker-rounds"),
                alt.Tooltip("chi2:Q", format=".2f", title="chi-square"),
                alt.Tooltip("dof:Q", title="dof"),
                alt.Tooltip("p_value:Q", format=".3g", title="p (change across levels)"),
                alt.Tooltip("p_holm:Q", format=".3g", title="p, Holm-adjusted over series"),
                alt.Tooltip("delta:Q", format="+.1%", title="last minus first"),
            ],
        )
        .transform_filter("datum.empty !== true")
    )
    none = none_layer(alt.value(65), alt.value(75))
    return (
        alt.layer(lines, none, data=data)
        .properties(width=width, height=150)
        .facet(
            column=alt.Column("model:N", title="Model"),
            row=alt.Row("condition:N", title="Condition"),
        )
        .properties(
            title={
                "text": f"Behaviour drift over {level}s",
                "subtitle": [
                    "y: worker-rounds showing the group (%), per condition (rows) and model",
                    f"chi-square test of change per (model, group) series: {n_sig} of "
                    f"{n_tested} change at p < 0.05, Holm-adjusted over the {n_tested} tests",
                    *untested_lines,
                ],
            }
        )
    )


def _untested(drift: pl.DataFrame, tests: pl.DataFrame, keys: list[str], level: str) -> str:
    """The subtitle line on the series with no chi-square test, by why: a change needs the group
    both present and absent, in two or more levels, so a group that never appears (often: a
    behaviour the condition's workers do not show), one in every worker-round, and a series
    over one level have nothing to test. "" when every series was tested."""
    untested = tests.filter(pl.col("p_value").is_null()).select(keys)
    if untested.is_empty():
        return ""
    per = untested.join(
        drift.group_by(keys).agg(
            pl.col("prevalence").max().alias("most"),
            pl.col("prevalence").min().alias("least"),
            pl.col(level).n_unique().alias("levels"),
        ),
        on=keys,
        how="left",
    )
    never = per.filter(pl.col("most") == 0).height
    always = per.filter(pl.col("least") == 1).height
    single = per.filter((pl.col("most") > 0) & (pl.col("least") < 1)).height
    reasons = [
        *([f"in {never} the group never appears"] if never else []),
        *([f"in {always} it is in every worker-round"] if always else []),
        *([f"{single} span one {level}"] if single else []),
    ]
    return (
        f"no test for {untested.height} series (a change needs the group both present and "
        f"absent, in two or more {level}s): {', '.join(reasons)}"
    )


MAX_LEVELS = 20  # more subruns or rounds than this are drawn in bins (a readable x axis)


def _binned_levels(drift: pl.DataFrame, level: str) -> tuple[pl.DataFrame, str]:
    """`drift` with its levels in at most MAX_LEVELS equal bins, each labelled by its first level,
    prevalence weighted by worker-rounds, and the axis title saying so. Runs whose rounds go on
    for hundreds (scripted negotiators waiting on LLM solvers) would otherwise draw one point
    per round and exceed what a page can hold."""
    top = int(drift.select(pl.col(level).max()).item() or 0)
    if top <= MAX_LEVELS:
        return drift, level.capitalize()
    width = -(-top // MAX_LEVELS)
    binned = (
        drift.with_columns(((pl.col(level) - 1) // width * width + 1).alias(level))
        .group_by("condition", "model", "group", level)
        .agg(
            (pl.col("prevalence") * pl.col("worker_rounds")).sum().alias("present"),
            pl.col("worker_rounds").sum(),
        )
        .with_columns((pl.col("present") / pl.col("worker_rounds")).alias("prevalence"))
        .drop("present")
        .sort("condition", "model", "group", level)
    )
    return binned, f"{level.capitalize()} (bins of {width})"


# the conditions' line dashes on the linguistic-drift chart (colour there is the model), in an
# order that keeps neighbours in the legend unlike: solid, long dash, dots, dash-dot, ...
_DRIFT_DASHES: tuple[tuple[int, ...], ...] = (
    (1, 0),
    (8, 4),
    (2, 3),
    (8, 3, 2, 3),
    (16, 6),
    (12, 3, 2, 3, 2, 3),
    (1, 7),
    (4, 2, 4, 8),
)
_DRIFT_PER_ROW = 2  # measure panels per row: four side by side were ~1,280 px


def linguistic_drift_chart(ling: pl.DataFrame) -> alt.ConcatChart | alt.Chart:
    """The four linguistic measures by subrun (means over workers), one line per model and
    condition: vocabulary renewal, similarity to the previous subrun, institutional talk. One
    panel per measure, two to a row so the figure fits a page (~1,000 px), its axis titled with
    its unit (`LINGUISTIC_LABELS`: shares in %, similarities 0-1), all on the 0-1 range so
    panels compare. Colour is the model, the line's dash the condition; the legend draws the
    dashes (it drew every condition as the same black circle).

    ling: `mbb.analysis.linguistic_drift` output (by condition)."""
    from mbb.analysis.linguistic import LINGUISTIC_LABELS

    measures = ["new_vocab_share", "bow_similarity", "trigram_similarity", "institutional_share"]
    long = ling.unpivot(
        index=["condition", "model", "subrun", "workers"],
        on=measures,
        variable_name="measure",
        value_name="value",
    ).drop_nulls("value")
    if long.is_empty():
        return none_chart("Linguistic drift across subruns", "no negotiation text")
    colors = model_color(long["model"].to_list())
    conditions = sorted(set(long["condition"].drop_nulls()))
    dashes = alt.Scale(
        domain=conditions,
        range=[list(_DRIFT_DASHES[i % len(_DRIFT_DASHES)]) for i in range(len(conditions))],
    )
    dash_legend = alt.Legend(
        symbolType="stroke", symbolStrokeWidth=2, symbolSize=900, symbolStrokeColor="#333"
    )
    title: dict[str, Any] = {"text": "Linguistic drift across subruns (mean over workers)"}
    if len(conditions) > len(_DRIFT_DASHES):
        title["subtitle"] = (
            f"⚠ {len(conditions)} conditions, {len(_DRIFT_DASHES)} dashes: some conditions "
            "share a dash (hover a line for its condition)"
        )
    panels = []
    for m in measures:
        label = LINGUISTIC_LABELS[m]
        name, unit = label.removesuffix(")").rsplit(" (", 1)  # panel title, axis title
        share = "%" in unit
        fmt = ".1%" if share else ".3f"
        tooltip: list[str | alt.Tooltip] = [
            "condition:N",
            "model:N",
            "subrun:O",
            alt.Tooltip("value:Q", format=fmt, title=label),
            alt.Tooltip("workers:Q", title="worker-subruns"),
        ]
        base = alt.Chart(long.filter(pl.col("measure") == m)).encode(
            x=alt.X("subrun:O", title="Subrun", axis=alt.Axis(labelAngle=0)),
            y=alt.Y(
                "value:Q",
                title=unit,
                scale=alt.Scale(domain=[0, 1]),
                axis=alt.Axis(format="%" if share else ".1f"),
            ),
            color=alt.Color("model:N", scale=colors, title="Model / persona"),
            tooltip=tooltip,
        )
        # the points in a layer of their own: on a line with points, vega-lite drew the dash
        # legend's symbols as filled circles (or, as strokes, transparent)
        lines = base.mark_line().encode(
            strokeDash=alt.StrokeDash(
                "condition:N", title="Condition", scale=dashes, legend=dash_legend
            ),
        )
        panels.append(
            alt.layer(lines, base.mark_point(filled=True, size=30)).properties(
                width=260, height=170, title=name
            )
        )
    return alt.concat(*panels, columns=_DRIFT_PER_ROW).properties(title=title)


def _workers(tables: Mapping[str, pl.DataFrame]) -> pl.DataFrame:
    if "workers" not in tables:
        raise KeyError(
            "this figure needs the 'workers' table; add it with "
            "mbb.analysis.with_run_info(tables, by_kind=batch.by_kind) or run_dirs=..."
        )
    return tables["workers"]


def relational_vs_bid_chart(rvb: pl.DataFrame) -> alt.Chart:
    """Fig. 12: the share of worker-rounds with a relational behaviour against the round's
    mean bid (rounds in quantile bins of their mean bid, per condition); the correlation over
    the condition's rounds in the tooltip.

    rvb: `mbb.analysis.relational_vs_bid` output."""
    if rvb.is_empty():
        return none_chart("Relational behaviour vs mean bid", "no round to bin")
    # each condition in its colour of every mbb chart, lines of one colour dashed apart (it
    # drew vega's default scheme: memory_off red here, orange in compare)
    conditions = rvb["condition"].drop_nulls().unique().to_list()
    title: dict[str, Any] = {"text": "Relational behaviour vs mean bid (Fig. 12)"}
    if note := shared_colour_note(conditions):
        title["subtitle"] = note
    return (
        alt.Chart(rvb)
        .mark_line(point=True)
        .encode(
            x=alt.X("mean_bid:Q", title="Mean bid of the rounds in the bin (credits)"),
            y=alt.Y(
                "relational_share:Q",
                title="Share of worker-rounds with a relational behaviour",
                axis=alt.Axis(format="%"),
                scale=alt.Scale(domain=[0, 1]),
            ),
            color=alt.Color("condition:N", title="Condition", scale=condition_color(conditions)),
            strokeDash=alt.StrokeDash(
                "condition:N", title="Condition", scale=condition_dash(conditions)
            ),
            tooltip=[
                "condition:N",
                alt.Tooltip("bid_bin:O", title="bid bin"),
                alt.Tooltip("rounds:Q"),
                alt.Tooltip("mean_bid:Q", format=".0f"),
                alt.Tooltip("relational_share:Q", format=".1%"),
                alt.Tooltip("corr:Q", format=".2f", title="corr (rounds)"),
            ],
        )
        .properties(width=360, height=220, title=title)
    )


def structural_table(metrics: pl.DataFrame) -> pl.DataFrame:
    """Table 8 as the paper prints it: one row per condition and model (all: the condition's
    rounds pooled), one column per metric (per-subrun metrics: one column per subrun).

    metrics: `mbb.analysis.structural_metrics` output."""
    named = metrics.with_columns(
        pl.when(pl.col("subrun").is_null())
        .then(pl.col("metric"))
        .otherwise(pl.format("{} (subrun {})", "metric", "subrun"))
        .alias("column")
    )
    wide = named.pivot(on="column", index=["condition", "model"], values="value")
    return wide.sort("condition", pl.col("model") != "all", "model")
