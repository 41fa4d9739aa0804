"""Figures of rule and commitment transmission: lifecycle stages and transmission across
subruns (`mbb.analysis.rule_lifecycle`, `mbb.analysis.commitments`,
`mbb.analysis.transmission_rates`).

A lifecycle is drawn as a funnel only when its stages are nested — every accepted item was
proposed, every cited one accepted, every honoured or broken one cited (`nesting_violations`
checks it item by item). They often are not: a rule's proposer can honour it in later ballots
without anyone else accepting it. Then the stages are drawn as side-by-side bars, each counting
its own stage, and the subtitle says which inclusions fail. Subrun panels share one scale, and
a panel with nothing proposed says "none".
"""

from __future__ import annotations

from collections.abc import Sequence

import altair as alt
import polars as pl

from mbb.viz.theme import (
    PANEL_HEIGHT,
    PANEL_WIDTH,
    condition_hex,
    none_chart,
    none_layer,
    seeds_subtitle,
    shared_colour_note,
    with_empty_panels,
)

__all__ = [
    "STAGES",
    "STAGE_PARENT",
    "nesting_violations",
    "stage_counts",
    "stage_flags",
    "transmission_funnel",
    "transmission_rates_chart",
    "transmission_stages",
]

STAGES = ("proposed", "accepted", "cited", "honoured", "broken")
# the stage each stage must be a subset of for the lifecycle to be a funnel
STAGE_PARENT = {"accepted": "proposed", "cited": "accepted", "honoured": "cited", "broken": "cited"}
_COLORS = ("#bab0ac", "#4c78a8", "#72b7b2", "#54a24b", "#e45756")
_KINDS = ("rule", "commitment")


def stage_flags(rules: pl.DataFrame, commits: pl.DataFrame) -> pl.DataFrame:
    """One row per rule or commitment: run_id, kind, subrun (proposed in) and one boolean per
    stage of `STAGES`. A rule is cited when a later round cites it, a commitment when it is
    claimed; honoured and broken are the item's status.

    rules: `mbb.analysis.rule_lifecycle` output.
    commits: `mbb.analysis.commitments` output.
    """

    def flags(df: pl.DataFrame, kind: str, cited: pl.Expr) -> pl.DataFrame:
        return df.select(
            "run_id",
            pl.lit(kind).alias("kind"),
            pl.col("subrun").cast(pl.Int64),
            pl.lit(True).alias("proposed"),
            pl.col("accepted").fill_null(False).cast(pl.Boolean).alias("accepted"),
            cited.fill_null(False).alias("cited"),
            (pl.col("status") == "honoured").fill_null(False).alias("honoured"),
            (pl.col("status") == "broken").fill_null(False).alias("broken"),
        )

    return pl.concat(
        [
            flags(rules, "rule", pl.col("citing_rounds") > 0),
            flags(commits, "commitment", pl.col("claim_round").is_not_null()),
        ]
    )


def nesting_violations(flags: pl.DataFrame) -> pl.DataFrame:
    """Per kind and stage, the items in the stage but not in its parent stage (`STAGE_PARENT`);
    only the failing inclusions (no rows: the stages nest, a funnel is honest).

    flags: `stage_flags` output.
    """
    rows = [
        {"kind": kind, "stage": stage, "parent": parent, "items": n}
        for kind in _KINDS
        for stage, parent in STAGE_PARENT.items()
        if (n := flags.filter((pl.col("kind") == kind) & pl.col(stage) & ~pl.col(parent)).height)
    ]
    schema = {"kind": pl.String, "stage": pl.String, "parent": pl.String, "items": pl.Int64}
    return pl.DataFrame(rows, schema=schema)


def stage_counts(flags: pl.DataFrame, runs: int | None = None) -> pl.DataFrame:
    """Per kind, subrun proposed in and stage: `n` items, `per_run` (n / runs) and its 95 % CI
    over runs (`per_run_ci_low`, `per_run_ci_high`; null with one run).

    flags: `stage_flags` output.
    runs: how many runs the items come from (default: the runs with at least one item, which
        overstates per-run counts when some runs had none).
    """
    n_runs = runs if runs is not None else max(1, flags["run_id"].n_unique())
    if n_runs < 1:
        raise ValueError(f"runs must be at least 1, got {n_runs}")
    wide = flags.group_by("kind", "subrun").agg(pl.col(list(STAGES)).sum())
    return (
        wide.unpivot(
            index=["kind", "subrun"], on=list(STAGES), variable_name="stage", value_name="n"
        )
        .with_columns(pl.col("n").cast(pl.Int64), (pl.col("n") / n_runs).alias("per_run"))
        .join(_per_run_ci(flags, n_runs), on=["kind", "subrun", "stage"], how="left")
        .sort("kind", "subrun")
    )


def _per_run_ci(flags: pl.DataFrame, n_runs: int) -> pl.DataFrame:
    """The 95 % CI over runs of the count per run (`mbb.analysis.stats.bootstrap_ci`, the
    expanded percentile bootstrap): each run's count of the kind, subrun and stage, a run
    without any such item counting 0; null with fewer than 2 runs (no spread)."""
    from mbb.analysis.stats import bootstrap_ci

    per_run = flags.group_by("run_id", "kind", "subrun").agg(pl.col(list(STAGES)).sum())
    rows = []
    for (kind, subrun), part in per_run.group_by("kind", "subrun"):
        for stage in STAGES:
            counts = part[stage].cast(pl.Float64).to_list()
            counts += [0.0] * max(0, n_runs - len(counts))
            ci = bootstrap_ci(counts)
            rows.append((kind, subrun, stage, ci[0] if ci else None, ci[1] if ci else None))
    schema = {
        "kind": pl.String,
        "subrun": pl.Int64,
        "stage": pl.String,
        "per_run_ci_low": pl.Float64,
        "per_run_ci_high": pl.Float64,
    }
    return pl.DataFrame(rows, schema=schema, orient="row")


def _panels(flags: pl.DataFrame, subruns: Sequence[int] | None) -> pl.DataFrame:
    subs = sorted(set(subruns) if subruns is not None else set(flags["subrun"].to_list()))
    return pl.DataFrame(
        [(k, s) for k in _KINDS for s in subs],
        schema={"kind": pl.String, "subrun": pl.Int64},
        orient="row",
    )


def _violations(violations: pl.DataFrame) -> str:
    return "; ".join(
        f"{r['items']} {r['stage']} {r['kind']}(s) not {r['parent']}"
        for r in violations.iter_rows(named=True)
    )


def transmission_funnel(
    rules: pl.DataFrame,
    commits: pl.DataFrame,
    *,
    runs: int | None = None,
    subruns: Sequence[int] | None = None,
) -> alt.FacetChart | alt.Chart:
    """Funnel of rule and commitment lifecycles by the subrun they were proposed in: proposed
    -> accepted -> cited -> honoured / broken (per run), one panel per kind and subrun on one
    shared scale. Refused (ValueError) when the stages do not nest: use
    `transmission_stages`, which then draws bars.

    rules: `mbb.analysis.rule_lifecycle` output.
    commits: `mbb.analysis.commitments` output.
    runs: how many runs the items come from (see `stage_counts`).
    subruns: the subruns to show a panel for, "none" where nothing was proposed (default:
        those with an item).
    """
    flags = stage_flags(rules, commits)
    bad = nesting_violations(flags)
    if bad.height:
        raise ValueError(f"not a funnel, the stages do not nest: {_violations(bad)}")
    return _funnel(flags, runs, subruns)


def transmission_stages(
    rules: pl.DataFrame,
    commits: pl.DataFrame,
    *,
    runs: int | None = None,
    subruns: Sequence[int] | None = None,
) -> alt.FacetChart | alt.Chart:
    """Rule and commitment lifecycles by the subrun they were proposed in: a funnel when the
    stages nest, else side-by-side bars per stage with a note saying which inclusions fail.

    rules: `mbb.analysis.rule_lifecycle` output.
    commits: `mbb.analysis.commitments` output.
    runs: how many runs the items come from (see `stage_counts`).
    subruns: the subruns to show a panel for, "none" where nothing was proposed (default:
        those with an item).
    """
    flags = stage_flags(rules, commits)
    bad = nesting_violations(flags)
    if not bad.height:
        return _funnel(flags, runs, subruns)
    note = [
        "Not a funnel: the stages do not nest, so each bar counts its own stage",
        f"({_violations(bad)})",
        "whiskers: 95% CI over runs of the count per run (a run without the item counts 0)",
    ]
    return _bars(flags, runs, subruns, note)


def _interval_note(n_runs: int) -> pl.Expr:
    """What a count's interval is, or why it has none (one run: no spread)."""
    if n_runs < 2:
        return pl.lit(f"no interval ({n_runs} run)").alias("interval")
    return pl.lit(f"95% CI over {n_runs} runs (expanded percentile bootstrap)").alias("interval")


def _title(flags: pl.DataFrame, runs: int | None) -> str:
    n = runs if runs is not None else flags["run_id"].n_unique()
    return f"Rule and commitment lifecycles ({n} run(s))"


def _funnel(
    flags: pl.DataFrame, runs: int | None, subruns: Sequence[int] | None
) -> alt.FacetChart | alt.Chart:
    if flags.is_empty() and not subruns:
        return none_chart(_title(flags, runs), "no rule or commitment was proposed")
    counts = stage_counts(flags, runs).filter(pl.col("per_run").is_not_null())
    proposed = counts.filter(pl.col("stage") == "proposed").select(
        "kind", "subrun", pl.col("n").alias("proposed_n")
    )
    counts = (
        counts.join(proposed, on=["kind", "subrun"], how="left")
        .with_columns(
            (-pl.col("per_run") / 2).alias("left"),
            (pl.col("per_run") / 2).alias("right"),
            (pl.col("n") / pl.col("proposed_n")).alias("share_of_proposed"),
            _interval_note(runs if runs is not None else flags["run_id"].n_unique()),
        )
        .filter(pl.col("proposed_n") > 0)
    )
    data = with_empty_panels(counts, _panels(flags, subruns))
    tooltip = [
        "kind:N",
        alt.Tooltip("subrun:O", title="proposed in subrun"),
        "stage:N",
        alt.Tooltip("n:Q", title="count (all runs)"),
        alt.Tooltip("per_run:Q", format=".2f", title="per run"),
        alt.Tooltip("per_run_ci_low:Q", format=".2f", title="95% CI low"),
        alt.Tooltip("per_run_ci_high:Q", format=".2f", title="95% CI high"),
        alt.Tooltip("interval:N"),
        alt.Tooltip("share_of_proposed:Q", format=".0%", title="share of proposed"),
    ]
    bars = (
        alt.Chart()
        .mark_bar()
        .encode(
            y=alt.Y("stage:N", sort=list(STAGES), title=None),
            x=alt.X("left:Q", title="Count per run (bar width; number at its right)", axis=None),
            x2="right:Q",
            color=alt.Color(
                "stage:N",
                sort=list(STAGES),
                title="Stage",
                scale=alt.Scale(domain=list(STAGES), range=list(_COLORS)),
            ),
            tooltip=tooltip,
        )
        .transform_filter("datum.empty !== true")
    )
    numbers = (
        alt.Chart()
        .mark_text(align="left", dx=3, fontSize=11)
        .encode(
            y=alt.Y("stage:N", sort=list(STAGES)),
            x="right:Q",
            text=alt.Text("per_run:Q", format=".2~f"),
        )
        .transform_filter("datum.empty !== true && datum.n > 0")
    )
    none = none_layer(alt.value(PANEL_WIDTH / 2), alt.value(PANEL_HEIGHT * 0.7 / 2))
    return (
        alt.layer(bars, numbers, none, data=data)
        .properties(width=PANEL_WIDTH, height=PANEL_HEIGHT * 0.7)
        .facet(
            column=alt.Column("subrun:O", title="Subrun proposed in"),
            row=alt.Row("kind:N", title=None, sort=list(_KINDS)),
        )
        .properties(
            title={
                "text": _title(flags, runs),
                "subtitle": "A funnel: each stage is a subset of the one above (checked per item); "
                "numbers are counts per run (their 95% CI over runs in the tooltip)",
            }
        )
    )


def _bars(
    flags: pl.DataFrame, runs: int | None, subruns: Sequence[int] | None, note: list[str]
) -> alt.FacetChart:
    counts = stage_counts(flags, runs)
    proposed = counts.filter((pl.col("stage") == "proposed") & (pl.col("n") > 0)).select(
        "kind", "subrun"
    )
    counts = counts.join(proposed, on=["kind", "subrun"], how="semi").with_columns(
        _interval_note(runs if runs is not None else flags["run_id"].n_unique())
    )
    data = with_empty_panels(counts, _panels(flags, subruns))
    tooltip = [
        "kind:N",
        alt.Tooltip("subrun:O", title="proposed in subrun"),
        "stage:N",
        alt.Tooltip("n:Q", title="count (all runs)"),
        alt.Tooltip("per_run:Q", format=".2f", title="per run"),
        alt.Tooltip("per_run_ci_low:Q", format=".2f", title="95% CI low"),
        alt.Tooltip("per_run_ci_high:Q", format=".2f", title="95% CI high"),
        alt.Tooltip("interval:N"),
    ]
    bars = (
        alt.Chart()
        .mark_bar()
        .encode(
            x=alt.X("stage:N", title=None, sort=list(STAGES), axis=alt.Axis(labelAngle=-30)),
            y=alt.Y("per_run:Q", title="Count per run"),
            color=alt.Color(
                "stage:N",
                sort=list(STAGES),
                title="Stage",
                scale=alt.Scale(domain=list(STAGES), range=list(_COLORS)),
            ),
            tooltip=tooltip,
        )
        .transform_filter("datum.empty !== true")
    )
    whiskers = (
        alt.Chart()
        .mark_rule(color="black", strokeWidth=1.5)
        .encode(
            x=alt.X("stage:N", sort=list(STAGES)),
            y=alt.Y("per_run_ci_low:Q", title="Count per run"),
            y2="per_run_ci_high:Q",
            tooltip=tooltip,
        )
        .transform_filter("datum.empty !== true")
    )
    none = none_layer(alt.value(PANEL_WIDTH * 0.9 / 2), alt.value(PANEL_HEIGHT * 0.8 / 2))
    return (
        alt.layer(bars, whiskers, none, data=data)
        .properties(width=PANEL_WIDTH * 0.9, height=PANEL_HEIGHT * 0.8)
        .facet(
            column=alt.Column("subrun:O", title="Subrun proposed in"),
            row=alt.Row("kind:N", title=None, sort=list(_KINDS)),
        )
        .properties(title={"text": _title(flags, runs), "subtitle": note})
    )


def transmission_rates_chart(
    rates: pl.DataFrame,
) -> alt.LayerChart | alt.FacetChart | alt.Chart:
    """Share of institutions active in subrun s still cited in s+1, by kind, memory on vs
    off (scratch memory is what can carry them across the boundary): the mean over seeds of each
    run's share with its 95 % CI (a run's institutions are not independent); each bar carries
    its value (so 0 % is seen, not a missing bar), "none" marks a kind and condition with no
    institution to transmit (the rate is undefined there, not 0), and a mean of one seed says
    it has no interval; each condition has its colour of every mbb chart.

    rates: `mbb.analysis.transmission_rates` output (by="condition"; without its seed columns
    the pooled rate is drawn and the subtitle says there is no interval).
    """
    title = "Transmission across subruns: memory on vs off"
    if rates.is_empty():
        return none_chart(title, "no rule or commitment was active in a subrun followed by another")
    subtitle: list[str] = []
    if "seed_mean_rate" not in rates.columns:
        rates = rates.with_columns(
            pl.lit(None, pl.Int64).alias("seeds"),
            pl.col("transmission_rate").alias("seed_mean_rate"),
            pl.lit(None, pl.Float64).alias("seed_mean_rate_ci_low"),
            pl.lit(None, pl.Float64).alias("seed_mean_rate_ci_high"),
        )
        subtitle.append("pooled over institutions; no interval (no per-seed rates given)")
    d = rates.with_columns(
        pl.format(
            "{} (memory {})",
            "condition",
            pl.when(pl.col("memory").is_null())
            .then(pl.lit("unknown"))
            .when(pl.col("memory"))
            .then(pl.lit("on"))
            .otherwise(pl.lit("off")),
        ).alias("series"),
        pl.col("transmission_rate").is_null().alias("empty"),
        pl.when(pl.col("seeds").is_null())
        .then(pl.lit("no interval (pooled rate only)"))
        .when(pl.col("seed_mean_rate_ci_low").is_null())
        .then(pl.format("no interval ({} seed)", "seeds"))
        .otherwise(pl.lit("95% CI over seeds"))
        .alias("interval"),
    )
    drawn = d.filter(~pl.col("empty"))
    if drawn["seeds"].is_not_null().any():
        subtitle = seeds_subtitle(
            drawn["seeds"].drop_nulls(), "mean over seeds of each run's share cited again"
        )
        single = drawn.filter(pl.col("seed_mean_rate_ci_low").is_null()).height
        if single:
            subtitle.append(f"no interval (1 seed) for {single} of {drawn.height} bars")
    # each series in its condition's colour of every mbb chart (the label adds the memory)
    series = d.select("series", "condition").unique().sort("series")
    subtitle += shared_colour_note(series["condition"].to_list())
    base = alt.Chart().encode(
        x=alt.X("kind:N", title="Institution", sort=list(_KINDS), axis=alt.Axis(labelAngle=0)),
        xOffset=alt.XOffset("series:N"),
        color=alt.Color(
            "series:N",
            title="Condition (scratch memory)",
            legend=alt.Legend(labelLimit=0),
            scale=alt.Scale(
                domain=series["series"].to_list(),
                range=[condition_hex(c) for c in series["condition"]],
            ),
        ),
    )
    y_title = "Cited again in the next subrun (% of institutions)"
    tooltip = [
        "series:N",
        "kind:N",
        alt.Tooltip("seed_mean_rate:Q", format=".1%", title="mean over seeds"),
        alt.Tooltip("seed_mean_rate_ci_low:Q", format=".1%", title="95% CI low"),
        alt.Tooltip("seed_mean_rate_ci_high:Q", format=".1%", title="95% CI high"),
        alt.Tooltip("seeds:Q", title="seeds"),
        alt.Tooltip("interval:N"),
        alt.Tooltip("transmission_rate:Q", format=".1%", title="pooled over institutions"),
        alt.Tooltip("institutions:Q", title="active in s (with s+1)"),
        alt.Tooltip("cited_next_subrun:Q", title="cited in s+1"),
        alt.Tooltip(
            "mean_rounds_to_first_citation:Q", format=".2f", title="rounds to 1st citation"
        ),
    ]
    y_scale = alt.Scale(domain=[0, 1])
    bars = base.mark_bar(opacity=0.85).encode(
        y=alt.Y("seed_mean_rate:Q", title=y_title, axis=alt.Axis(format="%"), scale=y_scale),
        tooltip=tooltip,
    )
    whiskers = base.mark_rule(color="black", strokeWidth=1.5).encode(
        y=alt.Y("seed_mean_rate_ci_low:Q", title=y_title, scale=y_scale),
        y2="seed_mean_rate_ci_high:Q",
        color=alt.value("black"),  # over its bar: the bar's own colour would hide it
        tooltip=tooltip,
    )
    none = (
        base.mark_text(text="none", angle=270, align="left", dx=-4, fontStyle="italic")
        .encode(y=alt.datum(0))
        .transform_filter("datum.empty === true")
    )
    values = (
        base.mark_text(dy=-6, dx=9, fontSize=11)
        .encode(
            y="seed_mean_rate:Q",
            text=alt.Text("seed_mean_rate:Q", format=".0%"),
            color=alt.value("black"),
        )
        .transform_filter("datum.empty !== true")
    )
    return alt.layer(bars, whiskers, values, none, data=d).properties(
        width=300, height=240, title={"text": title, "subtitle": subtitle} if subtitle else title
    )
