"""Figures for "do institutions help or hurt?": altair charts from
`mbb.analysis.mechanisms.compare`.

Every chart aggregates in polars first (means with 95 % intervals, quantiles), labels axes with
units, carries tooltips, and keeps one order and colour per mechanism (the agents'
institutions first, in black); workers are coloured and ordered as everywhere
(`mbb.viz.theme`). Conditions drawn one above the other share each measure's scale, so a bar
in one condition compares with the bar below it; measures in different units get their own.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence

import altair as alt
import polars as pl

from mbb.protocol.scheduling.centralized import CENTRALIZED
from mbb.viz.theme import (
    INK,
    MECHANISM_PALETTE,
    WIDE_WIDTH,
    none_chart,
    seeds_subtitle,
    worker_color,
    worker_order,
)

__all__ = [
    "BETTER",
    "DEFAULT_MEASURES",
    "LABELS",
    "MECHANISM_ORDER",
    "MECHANISM_SCALE",
    "PER_ROW",
    "axis_title",
    "differences_vs_institutions",
    "execution_by_worker",
    "outcome_comparison",
    "screen_trips",
    "waiting_distribution",
]

MECHANISM_ORDER = ["negotiated", *CENTRALIZED]  # the registry's order: a new mechanism shows up
# the agents' institutions in black, then each registered mechanism its own colour of the
# mechanism palette (never a condition's colour: `mbb.viz.theme.MECHANISM_PALETTE`)
_COLORS = [
    "#222222",
    *(MECHANISM_PALETTE[i % len(MECHANISM_PALETTE)] for i in range(len(CENTRALIZED))),
]
MECHANISM_SCALE = alt.Scale(domain=MECHANISM_ORDER, range=_COLORS)
_FLAG = "#b2182b"  # a flagged run's bar: an alarm red no condition has
PER_ROW = 2  # measure blocks per row of the comparison figures
_PANEL_WIDTH = 200  # a measure's plot area (its mechanism labels and axis title come on top)
# the columns of `mbb.analysis.outcome.outcomes` (definitions there) and their axis titles
LABELS = {
    "deadline_miss": "Deadline-miss rate (share of worker-subruns)",
    "completion": "Completion (share of worker-subruns)",
    "progress": "Collective progress (mean share of work done)",
    "mean_wait_s": "Mean wait per request (s)",
    "max_wait_s": "Max wait (s)",
    "max_lateness_s": "Max lateness (s)",
    "gini_exec": "Gini of execution time (0 = equal)",
    "credits_per_run": "Credits spent per run",
    # the name the rest of the report gives it (mbb.analysis.compare.MEASURE_LABELS)
    "score": "Mean score (share of hidden tests passed)",
}
DEFAULT_MEASURES = ("deadline_miss", "progress", "gini_exec", "score")
# which way is better, said on every axis (a reader should not have to recall that a lower Gini
# is the more equal share); a measure without an entry fails tests/viz
BETTER: dict[str, str] = {
    "deadline_miss": "lower = better",
    "completion": "higher = better",
    "progress": "higher = better",
    "mean_wait_s": "lower = better",
    "max_wait_s": "lower = better",
    "max_lateness_s": "lower = better",
    "gini_exec": "lower = more equal",
    "credits_per_run": "lower = cheaper",
    "score": "higher = better",
}
# "lower" or "higher": the side a mechanism that does better than the institutions is on
_HIGHER_BETTER = {m for m, text in BETTER.items() if text.startswith("higher")}


def _mech_axis(title: str | None = "Mechanism") -> alt.Y:
    return alt.Y("mechanism:N", sort=MECHANISM_ORDER, title=title)


def _ci(df: pl.DataFrame, by: Sequence[str], value: str = "value") -> pl.DataFrame:
    """Mean of `value` per group with its 95 % CI over runs (one per seed and mechanism): the
    expanded percentile bootstrap every mbb comparison uses (`mbb.analysis.stats.seed_summary`;
    it was a normal interval, too narrow on 4 seeds). One run has no spread, so no interval
    (null, and `interval` says so) rather than a zero-width one."""
    from mbb.analysis.stats import seed_summary

    keys = [k if k != "measure" else "_measure" for k in by]
    per_run = df.rename({"measure": "_measure"}) if "measure" in df.columns else df
    return (
        seed_summary(per_run, keys, [value])
        .drop("measure")
        .rename({"_measure": "measure", "n": "runs", "ci_low": "lo", "ci_high": "hi"}, strict=False)
        .with_columns(
            pl.when(pl.col("lo").is_null())
            .then(pl.format("no interval ({} run)", "runs"))
            .otherwise(pl.lit("95% CI over runs (expanded percentile bootstrap)"))
            .alias("interval"),
        )
    )


def axis_title(measure: str) -> str:
    """The measure's label with the direction that is better ("... (0 = equal; lower = more
    equal)")."""
    label = LABELS.get(measure, measure)
    better = BETTER.get(measure)
    if not better:
        return label
    return f"{label[:-1]}; {better})" if label.endswith(")") else f"{label} ({better})"


_SHARES = frozenset({"deadline_miss", "completion", "progress", "score"})


def _axis(measure: str, *, signed: bool = False) -> alt.Axis:
    """A share's axis in percent, as the tables write it (they drew 0.0-0.8 beside tables in
    %), its differences in signed percentage points ("+10", drawn from values times 100 by
    `differences_vs_institutions`: "+10%" read as a relative change beside a table in pp);
    vega picks the decimals from the tick step. Other measures keep their own numbers."""
    if measure not in _SHARES:
        return alt.Axis()
    return alt.Axis(format="+~r" if signed else "%")


def _long(out: pl.DataFrame, measures: Sequence[str]) -> pl.DataFrame:
    return out.unpivot(
        index=["condition", "mechanism", "base_run"],
        on=list(measures),
        variable_name="measure",
        value_name="value",
    ).with_columns(pl.col("measure").replace_strict(LABELS, default=pl.col("measure")))


def _per_measure(
    agg: pl.DataFrame,
    measures: Sequence[str],
    panel: Callable[[pl.DataFrame, str], alt.LayerChart | alt.FacetChart],
    title: str,
    notes: Sequence[str] = (),
) -> alt.ConcatChart:
    """One block per measure, its conditions stacked in rows sharing the measure's scale; the
    blocks wrap `PER_ROW` to a row, so the figure fits a report page (~1,000 px) at the theme's
    font sizes: four blocks side by side were ~1,800 px, read at ~7 px once scaled to a page."""
    blocks = []
    for m in measures:
        label = LABELS.get(m, m)
        blocks.append(
            panel(agg.filter(pl.col("measure") == label), m)
            .properties(width=_PANEL_WIDTH, height=22 * max(1, agg["mechanism"].n_unique()))
            .facet(row=alt.Row("condition:N", title="Condition"))
            .properties(title=label)
        )
    # rows of no run (a condition's note that it negotiated nothing) are not "few seeds"
    seeds = agg.filter(pl.col("runs") > 0)["runs"]
    return (
        alt.concat(*blocks, columns=PER_ROW)
        .resolve_scale(x="independent")
        .properties(title={"text": title, "subtitle": [*notes, *seeds_subtitle(seeds)]})
    )


def outcome_comparison(
    out: pl.DataFrame, measures: Sequence[str] = DEFAULT_MEASURES
) -> alt.ConcatChart | alt.Chart:
    """Mean of each measure per mechanism (point) with its 95 % interval over runs (rule), on
    an axis fitted to the values (not forced to 0: a bar from 0 squeezed the mechanisms'
    differences into its last tenth) and titled with the direction that is better.

    out: `Comparison.outcomes` (one row per run and mechanism).
    measures: the outcome columns to draw, one column of panels each.
    """
    title = "Institutions (negotiated, black) vs centralized mechanisms, same workloads"
    if out.is_empty():
        return none_chart(title, "no runs to compare")
    agg = _with_no_institutions(
        _ci(_long(out, measures), ["condition", "measure", "mechanism"]), out, measures
    )
    tooltip = [
        "condition:N",
        "mechanism:N",
        "measure:N",
        alt.Tooltip("mean:Q", format=".3f"),
        alt.Tooltip("lo:Q", format=".3f", title="95% low"),
        alt.Tooltip("hi:Q", format=".3f", title="95% high"),
        alt.Tooltip("runs:Q", title="runs"),
        alt.Tooltip("interval:N"),
    ]

    def panel(data: pl.DataFrame, measure: str) -> alt.LayerChart | alt.FacetChart:
        base = alt.Chart().encode(y=_mech_axis(None))
        color = alt.Color("mechanism:N", scale=MECHANISM_SCALE, legend=None)
        axis = _axis(measure)
        x = alt.X("mean:Q", title=axis_title(measure), axis=axis, scale=alt.Scale(zero=False))
        err = base.mark_rule(strokeWidth=2).encode(
            x=alt.X("lo:Q", title=axis_title(measure), axis=axis, scale=alt.Scale(zero=False)),
            x2="hi:Q",
            color=color,
            tooltip=tooltip,
        )
        pts = base.mark_point(filled=True, size=70).encode(x=x, color=color, tooltip=tooltip)
        # a condition that imposes a mechanism has no institutions: its row says so
        none = (
            base.mark_text(align="left", dx=4, fontStyle="italic", color="#555")
            .encode(x=alt.value(0), text="note:N")
            .transform_filter("isValid(datum.note)")
        )
        return alt.layer(err, pts, none, data=data)

    return _per_measure(agg, measures, panel, title)


def _with_no_institutions(
    agg: pl.DataFrame, out: pl.DataFrame, measures: Sequence[str]
) -> pl.DataFrame:
    """`agg` with, for each condition that imposes a mechanism (no negotiated run), a
    `negotiated` row per measure carrying only a `note` that says so: the row was blank.

    agg: `_ci`'s means per condition, measure and mechanism; out: `Comparison.outcomes`;
    measures: the measures drawn."""
    from mbb.analysis.mechanisms.compare import imposed, no_institutions_note

    agg = agg.with_columns(pl.lit(None, pl.String).alias("note"))
    rows = [
        {
            "condition": cond,
            "measure": LABELS.get(m, m),
            "mechanism": "negotiated",
            "runs": 0,
            "interval": "no run",
            "note": no_institutions_note(mech),
        }
        for cond, mech in imposed(out).items()
        for m in measures
    ]
    return pl.concat([agg, pl.DataFrame(rows)], how="diagonal_relaxed") if rows else agg


def differences_vs_institutions(
    out: pl.DataFrame, measures: Sequence[str] = DEFAULT_MEASURES
) -> alt.ConcatChart | alt.Chart:
    """Paired difference mechanism − institutions per run (same workload), mean ± 95 %.

    Right of zero: the mechanism scores higher than the agents' institutions did on the same
    demand (better for progress and the mean score, worse for misses and inequality). A
    condition that imposes a mechanism (mech_fcfs) negotiated nothing, so it has no
    difference to draw: the subtitle names it and says so.

    out: `Comparison.outcomes` (one row per run and mechanism).
    measures: the outcome columns to draw, one column of panels each.
    """
    title = "Paired differences: each mechanism minus the agents' institutions"
    long = _long(out, measures)
    inst = long.filter(pl.col("mechanism") == "negotiated").select(
        "condition", "base_run", "measure", pl.col("value").alias("institutions")
    )
    diff = (
        long.filter(pl.col("mechanism") != "negotiated")
        .join(inst, on=["condition", "base_run", "measure"])
        .with_columns(
            # a share's difference in percentage points (`_axis`), the others as they are
            (
                (pl.col("value") - pl.col("institutions"))
                * pl.when(pl.col("measure").is_in([LABELS.get(m, m) for m in _SHARES]))
                .then(100.0)
                .otherwise(1.0)
            ).alias("diff")
        )
    )
    from mbb.analysis.mechanisms.compare import imposed

    absent = _imposed_line(imposed(out), "no institutions to subtract")
    if diff.is_empty():
        return none_chart(
            title, " ".join(["no run has both the institutions and a mechanism", *absent])
        )
    agg = _ci(diff, ["condition", "measure", "mechanism"], "diff")
    tooltip = [
        "condition:N",
        "mechanism:N",
        "measure:N",
        alt.Tooltip("mean:Q", format="+.3f", title="mean difference"),
        alt.Tooltip("lo:Q", format="+.3f", title="95% low"),
        alt.Tooltip("hi:Q", format="+.3f", title="95% high"),
        alt.Tooltip("runs:Q", title="paired runs"),
        alt.Tooltip("interval:N"),
    ]

    def panel(data: pl.DataFrame, measure: str) -> alt.LayerChart | alt.FacetChart:
        base = alt.Chart().encode(y=_mech_axis(None))
        zero = alt.Chart().mark_rule(color="#888", strokeDash=[4, 3]).encode(x=alt.datum(0))
        side = "right" if measure in _HIGHER_BETTER else "left" if measure in BETTER else None
        # two lines: on one, the title set the block's width past the page's share
        points = "percentage points; " if measure in _SHARES else ""
        x_title = ["Mechanism − institutions"]
        if side:
            x_title.append(f"({points}{side} of 0 = mechanism better)")
        pts = base.mark_point(filled=True, size=60).encode(
            x=alt.X("mean:Q", title=x_title, axis=_axis(measure, signed=True)),
            color=alt.Color("mechanism:N", scale=MECHANISM_SCALE, legend=None),
            tooltip=tooltip,
        )
        err = base.mark_rule().encode(
            x="lo:Q", x2="hi:Q", color=alt.Color("mechanism:N", scale=MECHANISM_SCALE, legend=None)
        )
        return alt.layer(zero, err, pts, data=data)

    return _per_measure(agg, measures, panel, title, absent)


def _span(ns: pl.Series) -> str:
    """'5' when every count is 5, else '3–5'."""
    lo, hi = int(ns.min()), int(ns.max())  # type: ignore[arg-type]
    return f"{lo}" if lo == hi else f"{lo}–{hi}"


def _imposed_line(imposed: Mapping[str, str], why: str) -> list[str]:
    """A subtitle line naming the conditions that imposed a mechanism (none: no line), which
    a chart of the institutions leaves out, and why (`why`)."""
    if not imposed:
        return []
    names = ", ".join(f"{c} (imposes {m})" for c, m in sorted(imposed.items()))
    return [f"not drawn: {names}: nothing was negotiated, {why}"]


def waiting_distribution(waits: pl.DataFrame) -> alt.FacetChart | alt.Chart:
    """Distribution of the wait per request (s) per mechanism: whiskers p5–p95, box p25–p75;
    the conditions' rows share the time axis.

    waits: `Comparison.waits` (one row per request).
    """
    title = (
        "Waiting per request (box p25–p75, whiskers p5–p95, diamond: the longest wait of "
        "any request)"
    )
    if waits.is_empty():
        return none_chart(title, "no window was requested")
    q = waits.group_by("condition", "mechanism").agg(
        pl.col("wait_s").quantile(0.05).alias("p5"),
        pl.col("wait_s").quantile(0.25).alias("p25"),
        pl.col("wait_s").median().alias("median"),
        pl.col("wait_s").quantile(0.75).alias("p75"),
        pl.col("wait_s").quantile(0.95).alias("p95"),
        pl.col("wait_s").max().alias("max"),
        pl.len().alias("requests"),
    )
    tooltip = (
        ["condition:N", "mechanism:N"]
        + [
            alt.Tooltip(f"{c}:Q", format=".0f", title=f"{c} (s)")
            for c in ("p5", "p25", "median", "p75", "p95", "max")
        ]
        + [alt.Tooltip("requests:Q")]
    )
    base = alt.Chart().encode(y=_mech_axis(), tooltip=tooltip)
    whisk = base.mark_rule().encode(
        x=alt.X("p5:Q", title="Wait from request to window start (s)"), x2="p95:Q"
    )
    box = base.mark_bar(size=12).encode(
        x="p25:Q", x2="p75:Q", color=alt.Color("mechanism:N", scale=MECHANISM_SCALE, legend=None)
    )
    med = base.mark_tick(color="white", thickness=2, size=12).encode(x="median:Q")
    mx = base.mark_point(shape="diamond", color="black").encode(x="max:Q")
    return (
        alt.layer(whisk, box, med, mx, data=q)
        .properties(width=WIDE_WIDTH, height=200)
        .facet(row=alt.Row("condition:N", title="Condition"))
        .resolve_scale(y="independent")  # a condition's own mechanisms, no empty band
        .properties(title=title)
    )


def execution_by_worker(execution: pl.DataFrame) -> alt.FacetChart:
    """Mean execution seconds each worker received per run, stacked W1 first, per mechanism;
    each segment's 95 % CI over runs is in its tooltip (stacked segments cannot carry
    whiskers), and the subtitle says so and how many runs each mean is over.

    execution: `Comparison.execution` (one row per run and worker).
    """
    order = worker_order(execution["worker"].to_list())
    agg = (
        _ci(execution, ["condition", "mechanism", "worker"], "exec_s")
        .rename({"mean": "exec_s"})
        .with_columns(
            pl.col("worker")
            .replace_strict({w: i for i, w in enumerate(order)})
            .alias("worker_rank")
        )
    )
    return (
        alt.Chart(agg)
        .mark_bar()
        .encode(
            y=_mech_axis(),
            x=alt.X("exec_s:Q", stack="zero", title="Execution time received per run (s)"),
            color=alt.Color("worker:N", scale=worker_color(order), title="Worker"),
            order=alt.Order("worker_rank:Q"),
            tooltip=[
                "condition:N",
                "mechanism:N",
                "worker:N",
                alt.Tooltip("exec_s:Q", format=".0f", title="mean execution (s)"),
                alt.Tooltip("lo:Q", format=".0f", title="95% low"),
                alt.Tooltip("hi:Q", format=".0f", title="95% high"),
                alt.Tooltip("runs:Q"),
                alt.Tooltip("interval:N"),
            ],
        )
        .properties(width=WIDE_WIDTH, height=200)
        .facet(row=alt.Row("condition:N", title="Condition"))
        .resolve_scale(y="independent")  # mech_fcfs has no "negotiated" row to leave empty
        .properties(
            title={
                "text": "Who got the resource: execution time per worker",
                "subtitle": [
                    f"mean over {_span(agg['runs'])} runs of each condition and mechanism",
                    "segments are stacked, so no whisker is drawn: each worker's 95% CI over "
                    "runs is in its tooltip",
                    *seeds_subtitle(agg["runs"])[1:],  # the fewer-seeds warning, if any
                ],
            }
        )
    )


_SCREENS = {
    "winner pattern": ("rotation", "winner pattern"),
    "bid-CV drop": ("bid CV",),
    "cover bids": ("cover bids",),
    "private agreement": ("private agreement",),
}


def screen_trips(
    screens: pl.DataFrame, imposed: Mapping[str, str] | None = None
) -> alt.FacetChart | alt.Chart:
    """Share of the institutions' runs in which each of the four collusion screens (winner
    pattern, bid-CV drop, cover bids, private agreement: `mbb.analysis.mechanisms.screens`)
    tripped, and flagged, on one 0-100 % scale for every condition; every bar says "k of n
    runs", so a condition where no screen tripped reads as 0 of n measured, not as an empty
    panel.

    screens: `Comparison.screens` (one row per run of the institutions).
    imposed: condition -> the mechanism it imposes (`mbb.analysis.mechanisms.imposed`): the
    conditions that negotiated nothing, so have no institutions to screen, which the subtitle
    names rather than leave them silently absent.
    """
    title = "Collusion screens on the institutions' runs"
    absent = _imposed_line(imposed or {}, "no institutions to screen")
    if screens.is_empty():
        return none_chart(title, " ".join(["no negotiated run to screen", *absent]))
    rows = []
    for (cond,), grp in screens.group_by("condition"):
        n = grp.height
        # no private message in any run (conversation off, or none sent): the private screen
        # had nothing to read, n/a, not "0 of n" (a reviewer's find)
        unread = "private_rounds" in grp.columns and not grp["private_rounds"].sum()
        for name, prefixes in _SCREENS.items():
            hit = sum(any(e.startswith(prefixes) for e in ev) for ev in grp["evidence"])
            if name == "private agreement" and unread:
                rows.append({"condition": cond, "screen": name, "hits": None, "runs": n})
                continue
            rows.append({"condition": cond, "screen": name, "hits": hit, "runs": n})
        rows.append(
            {
                "condition": cond,
                "screen": "flagged (≥ 2 screens)",
                "hits": int(grp["flagged"].sum()),
                "runs": n,
            }
        )
    df = pl.DataFrame(rows, schema_overrides={"hits": pl.Int64}).with_columns(
        (pl.col("hits") / pl.col("runs")).alias("share"),
        pl.when(pl.col("hits").is_null())
        .then(pl.lit("n/a: no private message in any run"))
        .otherwise(pl.format("{} of {} runs", "hits", "runs"))
        .alias("count"),
        (pl.col("hits") / pl.col("runs")).fill_null(0.0).alias("label_at"),  # n/a: at 0
    )
    quiet = sorted(
        df.group_by("condition").agg(pl.col("hits").sum()).filter(pl.col("hits") == 0)["condition"]
    )
    y = alt.Y("screen:N", title=None, sort=[*_SCREENS, "flagged (≥ 2 screens)"])
    tooltip = [
        "condition:N",
        "screen:N",
        alt.Tooltip("share:Q", format=".0%"),
        alt.Tooltip("count:N", title="runs"),
    ]
    bars = (
        alt.Chart()
        .mark_bar()
        .encode(
            y=y,
            x=alt.X(
                "share:Q",
                title="Share of runs that tripped the screen (%)",
                axis=alt.Axis(format="%", tickCount=5),  # 0-100 %: labels never touch
                scale=alt.Scale(domain=[0, 1]),
            ),
            color=alt.condition(
                alt.datum.screen == "flagged (≥ 2 screens)",
                alt.value(_FLAG),
                alt.value(INK),
            ),
            tooltip=tooltip,
        )
    )
    counts = (
        alt.Chart()
        .mark_text(align="left", dx=4, fontSize=11, color="#444")
        .encode(y=y, x="label_at:Q", text="count:N")
    )
    subtitle = ["each bar: runs that tripped the screen, of the condition's runs", *absent]
    if quiet:
        subtitle.append(f"no screen tripped in any run of: {', '.join(quiet)}")
    return (
        alt.layer(bars, counts, data=df)
        .properties(width=360, height=120)
        .facet(row=alt.Row("condition:N", title="Condition"))
        .properties(title={"text": title, "subtitle": subtitle})
    )
