"""Figures of rule and commitment transmission: lifecycle stages per condition and transmission
across subruns (`mbb.analysis.rule_lifecycle`, `mbb.analysis.commitments`,
`mbb.analysis.transmission_rates`).

A lifecycle follows the stated sequence proposed -> accepted -> cited -> honoured / broken, and
mbb counts each stage as the items that reached it through every stage before it, so each
stage is a subset of the stage it follows (a funnel, by construction; honoured and broken are
the two outcomes of a cited item, side by side). An item can reach a stage
while skipping one before it — in the scripted population a debtor who never accepted an offer
is called in and repays it; a rule's proposer keeps a rule nobody else took up. Such an item
is counted apart, in its own visible category ("honoured without accepted": it reached
honoured, and accepted is the first stage it skipped), never in a stage it did not reach
through the sequence, and never dropped. Conditions are drawn side by side in every panel,
each as a count per run of that condition, so they can be compared; subrun panels share one
scale, and a panel with nothing proposed says "none".
"""

from __future__ import annotations

from collections.abc import Sequence

import altair as alt
import polars as pl

from mbb.viz.theme import (
    PANEL_WIDTH,
    condition_hex,
    none_chart,
    none_layer,
    seeds_subtitle,
    shared_colour_note,
    with_empty_panels,
)

__all__ = [
    "OFF_SEQUENCE",
    "STAGES",
    "STAGE_PARENT",
    "stage_counts",
    "stage_flags",
    "transmission_rates_chart",
    "transmission_stages",
]

STAGES = ("proposed", "accepted", "cited", "honoured", "broken")
# the stage each stage follows in the stated sequence
STAGE_PARENT = {"accepted": "proposed", "cited": "accepted", "honoured": "cited", "broken": "cited"}
# an item that reached a stage (first word) while skipping an earlier one (last word)
OFF_SEQUENCE = tuple(
    f"{stage} without {skipped}"
    for skipped in ("accepted", "cited")
    for stage in ("cited", "honoured", "broken")
    if stage != skipped
)
CATEGORIES = STAGES + OFF_SEQUENCE
_KINDS = ("rule", "commitment")
_BAR_STEP = 13  # pixels per bar (one condition of one category): room for its 11 px number
_LABEL_SIZE = 11  # the numbers beside the bars (8 read as 7 px on a page)
_ROW_MIN = 20  # pixels per category row, at least: its label is 12 px high


def _chain(stage: str) -> list[str]:
    """The stages before `stage` in the sequence, nearest first (without "proposed")."""
    out = []
    while (stage := STAGE_PARENT.get(stage, "proposed")) != "proposed":
        out.append(stage)
    return out


def stage_flags(
    rules: pl.DataFrame, commits: pl.DataFrame, runs: pl.DataFrame | None = None
) -> pl.DataFrame:
    """One row per rule or commitment: run_id, condition, kind, subrun (proposed in), one
    boolean per stage of `STAGES` — true when the item reached the stage through every stage
    before it (mbb's choice: the stated sequence defines the stages, so they nest per item) —
    and one per category of `OFF_SEQUENCE`, true when the item reached that stage but skipped
    the named one (the first it skipped). A rule is cited when a later round cites it, a
    commitment when it is claimed; honoured and broken are the item's status.

    rules: `mbb.analysis.rule_lifecycle` output.
    commits: `mbb.analysis.commitments` output.
    runs: the runs table (run_id, condition; `mbb.analysis.load_runs`); default (and for a run
        it does not list): the condition is the run id without its `-seedNNNN` suffix.
    """

    def own(df: pl.DataFrame, kind: str, cited: pl.Expr) -> pl.DataFrame:
        return df.select(
            "run_id",
            pl.lit(kind).alias("kind"),
            pl.col("subrun").cast(pl.Int64),
            pl.col("accepted").fill_null(False).cast(pl.Boolean).alias("accepted"),
            cited.fill_null(False).alias("cited"),
            (pl.col("status") == "honoured").fill_null(False).alias("honoured"),
            (pl.col("status") == "broken").fill_null(False).alias("broken"),
        )

    raw = pl.concat(
        [
            own(rules, "rule", pl.col("citing_rounds") > 0),
            own(commits, "commitment", pl.col("claim_round").is_not_null()),
        ]
    )
    along = {s: pl.all_horizontal(pl.col(s), *map(pl.col, _chain(s))) for s in STAGES[1:]}
    skipped = {}
    for cat in OFF_SEQUENCE:
        stage, first = cat.split(" without ")
        before = _chain(stage)  # nearest first: the first skipped is the farthest one missing
        outer = before[before.index(first) + 1 :]
        skipped[cat] = pl.all_horizontal(pl.col(stage), ~pl.col(first), *map(pl.col, outer))
        if stage == "cited":  # cited without accepted, and no outcome after it
            skipped[cat] = skipped[cat] & ~pl.col("honoured") & ~pl.col("broken")
    named = (
        raw.join(runs.select("run_id", "condition").unique(), on="run_id", how="left")
        if runs is not None
        else raw.with_columns(pl.lit(None, pl.String).alias("condition"))
    )
    return named.select(
        "run_id",
        # a run the runs table does not list: its condition is read from its id
        pl.col("condition").fill_null(pl.col("run_id").str.replace(r"-seed\d+$", "")),
        "kind",
        "subrun",
        pl.lit(True).alias("proposed"),
        *(e.alias(s) for s, e in along.items()),
        *(e.alias(c) for c, e in skipped.items()),
    )


_NO_TALK = "no messages in its runs: nothing to propose or accept"


def stage_counts(
    flags: pl.DataFrame,
    runs: pl.DataFrame | None = None,
    talked: Sequence[str] | pl.Series | None = None,
) -> pl.DataFrame:
    """Per condition, kind, subrun proposed in and category (`STAGES`, then `OFF_SEQUENCE`):
    `runs` of the condition, `n` items, `per_run` (n / runs) and its 95 % CI over the
    condition's runs (`per_run_ci_low`, `per_run_ci_high`; null with one run). Every condition
    has a row wherever any condition proposed an item of the kind in the subrun: a condition
    that proposed none there counts 0, it is not left out.

    flags: `stage_flags` output.
    runs: the runs table (run_id, condition), so that a run without any item counts 0
        (default: the runs with at least one item, which overstates per-run counts when some
        runs had none).
    talked: the runs with any message (`mbb.analysis.measured_runs(tables, "conversation")`):
        a condition none of whose runs sent one could not propose or accept anything, so its
        counts are n/a (null), never 0, and `per_run_why` says why (default: every run talked).
    """
    run_cond = (runs if runs is not None else flags).select("run_id", "condition").unique()
    n_runs = run_cond.group_by("condition").agg(pl.len().cast(pl.Int64).alias("runs"))
    panels = flags.select("kind", "subrun").unique()
    grid = n_runs.join(panels, how="cross")
    wide = flags.group_by("condition", "kind", "subrun").agg(pl.col(list(CATEGORIES)).sum())
    counts = (
        grid.join(wide, on=["condition", "kind", "subrun"], how="left")
        .with_columns(pl.col(list(CATEGORIES)).fill_null(0))
        .unpivot(
            index=["condition", "runs", "kind", "subrun"],
            on=list(CATEGORIES),
            variable_name="stage",
            value_name="n",
        )
        .with_columns(pl.col("n").cast(pl.Int64))
        .with_columns((pl.col("n") / pl.col("runs")).alias("per_run"))
    )
    order = {c: i for i, c in enumerate(CATEGORIES)}
    silent = pl.lit(False)
    if talked is not None:
        spoke = run_cond.filter(
            pl.col("run_id").is_in(pl.Series(talked, dtype=pl.String).implode())
        )
        silent = ~pl.col("condition").is_in(spoke["condition"].unique().implode())
    return (
        counts.join(
            _per_run_ci(flags, run_cond), on=["condition", "kind", "subrun", "stage"], how="left"
        )
        .sort("condition", "kind", "subrun", pl.col("stage").replace_strict(order))
        .with_columns(silent.alias("_silent"))
        .select(
            "condition",
            "kind",
            "subrun",
            "stage",
            "runs",
            *(
                pl.when(pl.col("_silent")).then(None).otherwise(pl.col(c)).alias(c)
                for c in ("n", "per_run", "per_run_ci_low", "per_run_ci_high")
            ),
            pl.when(pl.col("_silent")).then(pl.lit(_NO_TALK)).alias("per_run_why"),
        )
    )


def _per_run_ci(flags: pl.DataFrame, run_cond: pl.DataFrame) -> pl.DataFrame:
    """The 95 % CI over a condition's runs of the count per run
    (`mbb.analysis.stats.bootstrap_ci`, the expanded percentile bootstrap): each run's count of
    the kind, subrun and category, a run without any such item counting 0; null with fewer
    than 2 runs (no spread)."""
    from mbb.analysis.stats import bootstrap_ci

    per_run = (
        run_cond.join(flags.select("kind", "subrun").unique(), how="cross")
        .join(
            flags.group_by("run_id", "kind", "subrun").agg(pl.col(list(CATEGORIES)).sum()),
            on=["run_id", "kind", "subrun"],
            how="left",
        )
        .with_columns(pl.col(list(CATEGORIES)).fill_null(0))
    )
    rows = []
    for (cond, kind, subrun), part in per_run.group_by("condition", "kind", "subrun"):
        for stage in CATEGORIES:
            ci = bootstrap_ci(part[stage].cast(pl.Float64).to_list())
            rows.append((cond, kind, subrun, stage, *(ci if ci else (None, None))))
    schema = {
        "condition": pl.String,
        "kind": pl.String,
        "subrun": pl.Int64,
        "stage": pl.String,
        "per_run_ci_low": pl.Float64,
        "per_run_ci_high": pl.Float64,
    }
    return pl.DataFrame(rows, schema=schema, orient="row")


def _silent_conditions(
    runs: pl.DataFrame | None, talked: Sequence[str] | pl.Series | None
) -> pl.DataFrame:
    """condition and runs of each condition none of whose runs sent a message."""
    if runs is None or talked is None:
        return pl.DataFrame(schema={"condition": pl.String, "runs": pl.Int64})
    spoke = pl.Series(talked, dtype=pl.String).implode()
    return (
        runs.select("run_id", "condition")
        .unique()
        .group_by("condition")
        .agg(pl.len().cast(pl.Int64).alias("runs"), pl.col("run_id").is_in(spoke).any().alias("t"))
        .filter(~pl.col("t"))
        .select("condition", "runs")
    )


def _panels(flags: pl.DataFrame, subruns: Sequence[int] | None) -> pl.DataFrame:
    subs = sorted(set(subruns) if subruns is not None else set(flags["subrun"].to_list()))
    return pl.DataFrame(
        [(k, s) for k in _KINDS for s in subs],
        schema={"kind": pl.String, "subrun": pl.Int64},
        orient="row",
    )


def _interval_note(runs: pl.Expr) -> pl.Expr:
    """What a count's interval is, or why it has none (one run: no spread)."""
    return (
        pl.when(runs < 2)
        .then(pl.format("no interval ({} run)", runs))
        .otherwise(pl.format("95% CI over the condition's {} runs", runs))
        .alias("interval")
    )


def _off_sequence_note(counts: pl.DataFrame) -> list[str]:
    """One line per kind that has items off the sequence: how many, in which categories."""
    off = counts.filter(pl.col("stage").is_in(OFF_SEQUENCE) & (pl.col("n") > 0))
    lines = []
    for kind in _KINDS:
        part = off.filter(pl.col("kind") == kind).group_by("stage").agg(pl.col("n").sum())
        if part.height:
            what = ", ".join(
                f"{n} {s}" for s, n in sorted(part.rows(), key=lambda r: CATEGORIES.index(r[0]))
            )
            lines.append(f"{kind}s off the sequence, counted apart: {what}")
    return lines


# the count axis: few ticks, so that "0.0" and "0.5" do not run together in a narrow panel
_X_AXIS = alt.Axis(tickCount=3, format="~g", labelOverlap=True)

# one tooltip for every mark of the lifecycle chart
_LIFECYCLE_TOOLTIP = [
    alt.Tooltip("condition:N"),
    alt.Tooltip("runs:Q", title="runs of the condition"),
    "kind:N",
    alt.Tooltip("subrun:O", title="proposed in subrun"),
    alt.Tooltip("stage:N", title="stage"),
    alt.Tooltip("n:Q", title="count (the condition's runs)"),
    alt.Tooltip("per_run:Q", format=".2f", title="per run"),
    alt.Tooltip("per_run_ci_low:Q", format=".2f", title="95% CI low"),
    alt.Tooltip("per_run_ci_high:Q", format=".2f", title="95% CI high"),
    alt.Tooltip("interval:N"),
    alt.Tooltip("share_of_proposed:Q", format=".0%", title="share of proposed"),
]


def transmission_stages(
    rules: pl.DataFrame,
    commits: pl.DataFrame,
    *,
    runs: pl.DataFrame | None = None,
    subruns: Sequence[int] | None = None,
    talked: Sequence[str] | pl.Series | None = None,
) -> alt.FacetChart | alt.Chart:
    """Rule and commitment lifecycles per condition, by the subrun they were proposed in: one
    panel per kind and subrun on one shared scale; in each, one bar per condition and stage
    (the count per run of that condition, its 95 % CI over the condition's runs a whisker).
    The stages nest (`stage_flags`): items that skipped a stage get their own rows under the
    funnel, shown only when some item is in them (their counts say so in the subtitle).

    rules: `mbb.analysis.rule_lifecycle` output.
    commits: `mbb.analysis.commitments` output.
    runs: the runs table (run_id, condition; see `stage_counts`).
    subruns: the subruns to show a panel for, "none" where nothing was proposed (default:
        those with an item).
    talked: the runs with any message (see `stage_counts`): a condition none of whose runs
        talked is n/a, named in the subtitle, not drawn as rows of 0.
    """
    title = "Rule and commitment lifecycles per condition"
    flags = stage_flags(rules, commits, runs)
    # named from the runs, not the counts: with nothing proposed anywhere there are no counts
    silent = _silent_conditions(runs, talked)
    if flags.is_empty() and not subruns:
        return none_chart(
            title,
            "n/a: no messages in any run, so nothing to propose or accept"
            if runs is not None and silent.height == runs["condition"].n_unique()
            else "no rule or commitment was proposed",
        )
    counts = stage_counts(flags, runs, talked)
    silent_note = [
        "n/a (no messages in any run, so nothing to propose or accept): "
        + ", ".join(f"{c} ({r} runs)" for c, r in silent.unique().sort("condition").rows())
    ]
    counts = counts.filter(pl.col("per_run_why").is_null())
    present = set(counts.filter(pl.col("n") > 0)["stage"].to_list())
    shown = [*STAGES, *(c for c in OFF_SEQUENCE if c in present)]
    proposed = counts.filter(pl.col("stage") == "proposed").select(
        "condition", "kind", "subrun", pl.col("n").alias("proposed_n")
    )
    counts = (
        counts.filter(pl.col("stage").is_in(shown))
        .join(proposed, on=["condition", "kind", "subrun"], how="left")
        .with_columns(
            pl.when(pl.col("proposed_n") > 0)  # none proposed: no share (not 0, not NaN)
            .then(pl.col("n") / pl.col("proposed_n"))
            .alias("share_of_proposed"),
            _interval_note(pl.col("runs")),
            pl.format("{} ({} runs)", "condition", "runs").alias("series"),
            pl.max_horizontal("per_run", "per_run_ci_high").alias("label_at"),  # past the whisker
        )
    )
    conditions = counts.select("condition", "series").unique().sort("condition")
    series = conditions["series"].to_list()
    data = with_empty_panels(counts, _panels(flags, subruns))
    y = alt.Y("stage:N", sort=shown, title=None)
    y_offset = alt.YOffset("series:N", sort=series)
    x_title = "Count per run"
    bars = (
        alt.Chart()
        .mark_bar()
        .encode(
            y=y,
            yOffset=y_offset,
            x=alt.X("per_run:Q", title=x_title, axis=_X_AXIS),
            color=alt.Color(
                "series:N",
                sort=series,
                title="Condition",
                # each condition in its colour of every mbb chart (the label adds its runs)
                scale=alt.Scale(
                    domain=series, range=[condition_hex(c) for c in conditions["condition"]]
                ),
                # below the panels: beside them it took a page's width from them
                legend=alt.Legend(labelLimit=0, orient="bottom", columns=3),
            ),
            tooltip=_LIFECYCLE_TOOLTIP,
        )
        .transform_filter("datum.empty !== true")
    )
    whiskers = (
        alt.Chart()
        .mark_rule(color="black", strokeWidth=1)
        .encode(
            y=y,
            yOffset=y_offset,
            x=alt.X("per_run_ci_low:Q", title=x_title, axis=_X_AXIS),
            x2="per_run_ci_high:Q",
            tooltip=_LIFECYCLE_TOOLTIP,
        )
        .transform_filter("datum.empty !== true")
    )
    numbers = (  # each bar says its count per run; a 0 says nothing (a stack of "0 0 0 0"
        # per stage hid the counts that were not): its row is empty, its tooltip says 0
        alt.Chart()
        .mark_text(align="left", dx=2, fontSize=_LABEL_SIZE)
        .encode(
            y=y,
            yOffset=y_offset,
            x=alt.X("label_at:Q", title=x_title, axis=_X_AXIS),
            text=alt.Text("per_run:Q", format=".2~f"),
            tooltip=_LIFECYCLE_TOOLTIP,
        )
        .transform_filter("datum.empty !== true && datum.per_run > 0")
    )
    # a category row is never narrower than its label (with one condition too)
    height = len(shown) * max(_ROW_MIN, _BAR_STEP * len(series))
    none = none_layer(alt.value(PANEL_WIDTH / 2), alt.value(height / 2))
    subtitle = [  # lines short enough for the chart's width (one of 200 characters was not)
        # honoured and broken are two outcomes of a cited item, not one inside the other
        "Each stage counts the items that reached it through every stage before it: proposed, "
        "accepted, cited,",
        "then honoured or broken: two outcomes of a cited item, side by side; so each is a "
        "subset of the stage it follows",
        *_off_sequence_note(counts),
        *(silent_note if silent.height else []),
        "bars and numbers: count per run of the condition (no number: 0); whiskers: 95% CI over "
        "its runs",
        "(expanded percentile bootstrap; a run without the item counts 0)",
        *shared_colour_note(conditions["condition"].to_list()),
    ]
    return (
        alt.layer(bars, whiskers, numbers, none, data=data)
        .properties(width=PANEL_WIDTH, height=height)
        .facet(
            column=alt.Column("subrun:O", title="Subrun proposed in"),
            row=alt.Row("kind:N", title=None, sort=list(_KINDS)),
        )
        .properties(title={"text": title, "subtitle": subtitle})
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
