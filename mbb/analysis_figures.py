"""Figures for the paper's analyses (`mbb.analysis`): altair charts aggregated in polars first.

Each function takes the tables dict (with `runs`/`workers` from `with_run_info`) or the tidy
output of one analysis, reduces it in polars to what is drawn (never more than a few hundred
rows, far below altair's 5,000-row limit), and returns a chart with a readable title, axis
titles with units and tooltips. Workers are ordered as in `mbb.figures` (W1, W2, ... W10);
models (the persona for scripted workers) get one consistent colour scale, `model_color`.

`condition_tables` runs the conditions an analysis notebook compares and returns one tables
dict, so notebooks stay one call per cell.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

import altair as alt
import polars as pl

from mbb import analysis as A
from mbb.figures import PALETTE, _worker_key
from mbb.taxonomy import CATEGORIES

__all__ = [
    "behaviour_drift_chart",
    "classifier_validation",
    "condition_tables",
    "contested_win_chart",
    "institutional_behaviours",
    "linguistic_drift_chart",
    "model_color",
    "prevalence_heatmap",
    "rich_worker_chart",
    "strategic_profile",
    "token_audit_chart",
    "tokens_per_credit_chart",
    "transmission_funnel",
    "transmission_rates_chart",
    "urgency_chart",
]

_TITLE = {c.name: f"{c.title} {c.symbol}".strip() for c in CATEGORIES}
_ORDER = [_TITLE[c.name] for c in CATEGORIES]
_CAT = pl.DataFrame(
    {
        "category": [c.name for c in CATEGORIES],
        "label": [_TITLE[c.name] for c in CATEGORIES],
        "family": [c.family for c in CATEGORIES],
        "marker": [c.marker for c in CATEGORIES],
    }
)
_MARKER_NAME = {"relational": "relational †", "non_relational": "non-relational ‡", "none": "none"}


def condition_tables(
    params_paths: Iterable[str | Path],
    *,
    runs: int,
    out_root: str | Path,
    overrides: Mapping[str, Any] | None = None,
    seed: int | None = None,
) -> dict[str, pl.DataFrame]:
    """Run each params file (same overrides, deep-merged) into `<out_root>/<condition>` and
    return one tables dict with `runs` and `workers`, as the analyses expect.

    Runs are always redone rather than read back, so a notebook's numbers never come from a
    stale folder left by another parameter set (a scripted run takes milliseconds).
    """
    from mbb.params import load_params
    from mbb.paths import user_path
    from mbb.runner import run_many
    from mbb.tables import concat_tables

    parts = []
    for p in params_paths:
        cond = load_params(p, overrides)
        out = user_path(out_root) / cond.name
        b = run_many(cond, seed=seed, runs=runs, out_dir=out).check()
        parts.append(A.with_run_info(b.tables, by_kind=b.by_kind))
    if not parts:
        raise ValueError("condition_tables needs at least one params path")
    t = concat_tables(parts)
    t["runs"] = pl.concat([p["runs"] for p in parts])
    t["workers"] = pl.concat([p["workers"] for p in parts])
    return t


def model_color(models: Sequence[str]) -> alt.Scale:
    """One colour per model (or persona), identical in every analysis figure."""
    domain = sorted(set(models))
    return alt.Scale(domain=domain, range=[PALETTE[i % len(PALETTE)] for i in range(len(domain))])


def _series(df: pl.DataFrame) -> pl.DataFrame:
    """`series` = "condition: group" — one line per starting-state group and condition."""
    return df.with_columns(pl.format("{}: {}", "condition", "group").alias("series"))


# --- taxonomy -------------------------------------------------------------------------------


def prevalence_heatmap(
    tables: Mapping[str, pl.DataFrame], wr_pred: pl.DataFrame, by: str = "model"
) -> alt.Chart:
    """Share of worker-rounds showing each category, per model, persona or condition — the
    paper's Fig. 6 grid; categories in taxonomy order, † relational, ‡ non-relational."""
    if by not in ("model", "persona", "condition"):
        raise ValueError(f"by must be 'model', 'persona' or 'condition', got {by!r}")
    wr = A.worker_rounds(tables)
    if by == "persona":
        wr = wr.join(
            A._frames.require(tables, "workers").select("run_id", "worker", "persona"),
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
            height=21 * 16,
            title=f"Behaviour prevalence by {by} (share of worker-rounds)",
        )
    )


def strategic_profile(tables: Mapping[str, pl.DataFrame], wr_pred: pl.DataFrame) -> alt.Chart:
    """Per model: share of worker-rounds using any category of each family (negotiation,
    rules) and each institution marker (relational †, non-relational ‡) — a model's style."""
    keys = ["run_id", "subrun", "round", "worker"]
    wr = A.worker_rounds(tables)
    p = wr_pred.select(*keys, "category").unique().join(_CAT, on="category")
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
        .properties(width=130, height=220, title="Strategic profile per model")
    )


def institutional_behaviours(inst: pl.DataFrame, pairs: pl.DataFrame) -> alt.HConcatChart:
    """Left: institutions per worker and run (self-discovered, forward-scoped, marked), by
    marker. Right: per (worker, peer), the share of runs with a forward-scoped relational
    behaviour in private messages, and how many of those are self-discovered."""
    n_runs = max(1, inst["run_id"].n_unique())
    per_worker = (
        inst.filter(pl.col("institutional"))
        .group_by("worker", "marker")
        .agg(
            (pl.len() / n_runs).alias("per_run"),
            pl.col("category").unique().sort().str.join(", ").alias("categories"),
        )
        .with_columns(pl.col("marker").replace_strict(_MARKER_NAME))
    )
    workers = sorted(inst["worker"].unique().to_list(), key=_worker_key)
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
                    domain=["relational †", "non-relational ‡"], range=["#e45756", "#4c78a8"]
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
    return alt.hconcat(left, right).properties(title=f"Institutional behaviours ({n_runs} run(s))")


def classifier_validation(prf: pl.DataFrame, kappa: pl.DataFrame | None = None) -> alt.HConcatChart:
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
        .mark_bar(color="#4c78a8")
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
                scale=alt.Scale(domain=["precision", "recall"], range=["#f58518", "#54a24b"]),
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
            .mark_bar(color="#b279a2")
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


def behaviour_drift_chart(drift: pl.DataFrame, tests: pl.DataFrame) -> alt.FacetChart:
    """Prevalence of each strategy group by subrun, one panel per model and condition; the
    chi-square test of change across subruns is in each line's tooltip, and the count of
    significant changes in the title."""
    keys = ["condition", "model", "group"]
    t = tests.select(*keys, "chi2", "dof", "p_value", "delta")
    d = drift.join(t, on=keys, how="left")
    n_sig = tests.filter(pl.col("p_value") < 0.05).height
    level = "subrun" if "subrun" in drift.columns else "round"
    return (
        alt.Chart(d)
        .mark_line(point=True)
        .encode(
            x=alt.X(f"{level}:O", title=level.capitalize()),
            y=alt.Y(
                "prevalence:Q",
                title="Share of worker-rounds",
                axis=alt.Axis(format="%"),
                scale=alt.Scale(domain=[0, 1]),
            ),
            color=alt.Color("group:N", title="Strategy group"),
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
                alt.Tooltip("delta:Q", format="+.1%", title="last minus first"),
            ],
        )
        .properties(width=130, height=150)
        .facet(
            column=alt.Column("model:N", title="Model"),
            row=alt.Row("condition:N", title="Condition"),
        )
        .properties(
            title=f"Behaviour drift over {level}s — chi-square test: {n_sig} of {tests.height} "
            "(model, group) series change at p < 0.05"
        )
    )


def linguistic_drift_chart(ling: pl.DataFrame) -> alt.FacetChart:
    """The four linguistic measures by subrun (means over workers), one line per model and
    condition: vocabulary renewal, similarity to the previous subrun, institutional talk."""
    measures = ["new_vocab_share", "bow_similarity", "trigram_similarity", "institutional_share"]
    long = ling.unpivot(
        index=["condition", "model", "subrun", "workers"],
        on=measures,
        variable_name="measure",
        value_name="value",
    ).drop_nulls("value")
    colors = model_color(long["model"].to_list())
    return (
        alt.Chart(long)
        .mark_line(point=True)
        .encode(
            x=alt.X("subrun:O", title="Subrun"),
            y=alt.Y("value:Q", title="Share / similarity (0-1)", scale=alt.Scale(domain=[0, 1])),
            color=alt.Color("model:N", scale=colors, title="Model / persona"),
            strokeDash=alt.StrokeDash("condition:N", title="Condition"),
            tooltip=[
                "condition:N",
                "model:N",
                "measure:N",
                "subrun:O",
                alt.Tooltip("value:Q", format=".3f"),
                alt.Tooltip("workers:Q", title="worker-subruns"),
            ],
        )
        .properties(width=160, height=180)
        .facet(column=alt.Column("measure:N", title=None, sort=measures))
        .properties(title="Linguistic drift across subruns (mean over workers)")
    )


# --- token audit ----------------------------------------------------------------------------


def token_audit_chart(audit: pl.DataFrame, by: str = "worker") -> alt.FacetChart:
    """Tokens per run, stacked by phase, per worker (or subrun / model), one panel per role;
    scripted runs are counted with the approximate tokenizer, which the title says."""
    if by not in ("worker", "subrun", "model"):
        raise ValueError(f"by must be 'worker', 'subrun' or 'model', got {by!r}")
    n_runs = max(1, audit["run_id"].drop_nulls().n_unique())
    agg = audit.group_by(by, "role", "phase").agg(
        (pl.col("total_tokens").sum() / n_runs).alias("tokens_per_run"),
        pl.col("calls").sum().alias("calls"),
        pl.col("cost_usd").sum().alias("cost_usd"),
    )
    approx = bool(audit["approximate"].all()) if audit.height else False
    sort = (
        sorted(agg[by].cast(pl.String).unique().to_list(), key=_worker_key)
        if by == "worker"
        else None
    )
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


# --- transmission ---------------------------------------------------------------------------

_STAGES = ["proposed", "accepted", "cited", "honoured", "broken"]


def transmission_funnel(rules: pl.DataFrame, commits: pl.DataFrame) -> alt.FacetChart:
    """Lifecycle funnel of rules and commitments by the subrun they were proposed in:
    proposed -> accepted -> cited later -> honoured or broken (counts per run)."""

    def stages(df: pl.DataFrame, kind: str, cited: pl.Expr) -> pl.DataFrame:
        return df.group_by("subrun").agg(
            pl.lit(kind).alias("kind"),
            pl.len().alias("proposed"),
            pl.col("accepted").sum().alias("accepted"),
            cited.sum().alias("cited"),
            (pl.col("status") == "honoured").sum().alias("honoured"),
            (pl.col("status") == "broken").sum().alias("broken"),
            pl.col("run_id").n_unique().alias("runs"),
        )

    parts = []
    if rules.height:
        parts.append(stages(rules, "rule", pl.col("citing_rounds") > 0))
    if commits.height:
        parts.append(stages(commits, "commitment", pl.col("claim_round").is_not_null()))
    schema = {"subrun": pl.Int64, "kind": pl.String, **{s: pl.UInt32 for s in _STAGES}}
    wide = (
        pl.concat([p.with_columns(pl.col(_STAGES).cast(pl.UInt32)) for p in parts])
        if parts
        else pl.DataFrame(schema={**schema, "runs": pl.UInt32})
    )
    n_runs = max(
        1,
        len(set(rules["run_id"].to_list()) | set(commits["run_id"].to_list())),
    )
    long = wide.unpivot(
        index=["subrun", "kind", "runs"], on=_STAGES, variable_name="stage", value_name="n"
    ).with_columns((pl.col("n") / n_runs).alias("per_run"))
    return (
        alt.Chart(long)
        .mark_bar()
        .encode(
            x=alt.X("stage:N", title=None, sort=_STAGES, axis=alt.Axis(labelAngle=-30)),
            y=alt.Y("per_run:Q", title="Count per run"),
            color=alt.Color(
                "stage:N",
                sort=_STAGES,
                title="Stage",
                scale=alt.Scale(
                    domain=_STAGES, range=["#bab0ac", "#4c78a8", "#72b7b2", "#54a24b", "#e45756"]
                ),
            ),
            tooltip=[
                "kind:N",
                alt.Tooltip("subrun:O", title="proposed in subrun"),
                "stage:N",
                alt.Tooltip("n:Q", title="count (all runs)"),
                alt.Tooltip("per_run:Q", format=".2f", title="per run"),
            ],
        )
        .properties(width=130, height=160)
        .facet(
            column=alt.Column("subrun:O", title="Subrun proposed in"),
            row=alt.Row("kind:N", title=None),
        )
        .resolve_scale(y="independent")
        .properties(title=f"Rule and commitment lifecycles ({n_runs} run(s))")
    )


def transmission_rates_chart(rates: pl.DataFrame) -> alt.Chart:
    """Share of institutions active in subrun s still cited in s+1, by kind, memory on vs
    off (scratch memory is what can carry them across the boundary)."""
    d = rates.with_columns(
        pl.when(pl.col("memory").is_null())
        .then(pl.lit("unknown"))
        .when(pl.col("memory"))
        .then(pl.lit("on"))
        .otherwise(pl.lit("off"))
        .alias("memory_label")
    )
    return (
        alt.Chart(d)
        .mark_bar()
        .encode(
            x=alt.X("kind:N", title="Institution"),
            xOffset=alt.XOffset("condition:N"),
            y=alt.Y(
                "transmission_rate:Q",
                title="Cited again in the next subrun (share)",
                axis=alt.Axis(format="%"),
                scale=alt.Scale(domain=[0, 1]),
            ),
            color=alt.Color(
                "memory_label:N",
                title="Scratch memory",
                scale=alt.Scale(
                    domain=["on", "off", "unknown"], range=["#4c78a8", "#f58518", "#bab0ac"]
                ),
            ),
            tooltip=[
                "condition:N",
                alt.Tooltip("memory_label:N", title="memory"),
                "kind:N",
                alt.Tooltip("transmission_rate:Q", format=".1%", title="transmission rate"),
                alt.Tooltip("institutions:Q", title="active in s (with s+1)"),
                alt.Tooltip("cited_next_subrun:Q", title="cited in s+1"),
                alt.Tooltip(
                    "mean_rounds_to_first_citation:Q", format=".2f", title="rounds to 1st citation"
                ),
            ],
        )
        .properties(width=260, height=220, title="Transmission across subruns: memory on vs off")
    )


# --- starting states ------------------------------------------------------------------------


def urgency_chart(premium: pl.DataFrame) -> alt.HConcatChart:
    """The urgent worker's mean bid and requested duration by subrun vs the others and the
    uniform baseline: a premium early (ratio > 1), a termination discount later (< 1)."""
    d = _series(premium)
    tip = [
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


def rich_worker_chart(rich: pl.DataFrame) -> alt.FacetChart:
    """The richest worker's spend, wins and win rate per subrun vs the others and the
    uniform-budget baseline (per worker, so groups of different size compare)."""
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
        .properties(title="Rich worker: spend, wins and win rate by subrun")
    )


def contested_win_chart(contested: pl.DataFrame) -> alt.Chart:
    """Win rate in contested rounds at full vs depleted budget, per starting-state group."""
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
