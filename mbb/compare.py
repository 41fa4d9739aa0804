"""Put finished conditions side by side: load their tables, summarise, draw."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from pathlib import Path

import altair as alt
import polars as pl

from mbb.paths import user_path
from mbb.tables import TABLES, load_tables

__all__ = [
    "OUTCOME_MEASURES",
    "bids_by_condition",
    "condition_table",
    "ensure_conditions",
    "load_conditions",
    "model_table",
    "outcomes_by_condition",
    "run_table",
]


def load_conditions(dirs: Iterable[str | Path]) -> dict[str, pl.DataFrame]:
    """Tables of several condition folders, concatenated with a `condition` column.

    A folder is a condition's output (`<dir>/tables/*.parquet`); its name is the condition.
    """
    parts: dict[str, list[pl.DataFrame]] = {n: [] for n in TABLES}
    for d in dirs:
        folder = user_path(d)
        tdir = folder / "tables"
        if not tdir.is_dir():
            raise FileNotFoundError(f"{folder}: no tables/ folder (run the condition first)")
        tables = load_tables(tdir)
        for name in TABLES:
            parts[name].append(tables[name].with_columns(pl.lit(folder.name).alias("condition")))
    return {n: pl.concat(v, how="diagonal_relaxed") for n, v in parts.items() if v}


OUTCOME_MEASURES: tuple[str, ...] = (
    "completion_rate",
    "deadline_miss_rate",
    "mean_progress",
    "mean_bid",
    "rounds_per_subrun",
    "paid_per_run",
    "private_msgs_per_run",
)


def run_table(tables: Mapping[str, pl.DataFrame]) -> pl.DataFrame:
    """One row per run (the seed is the unit a comparison resamples): condition, run_id, seed
    and the `OUTCOME_MEASURES` — completion and deadline-miss rates and mean progress over the
    run's worker-subruns, mean declared bid, rounds per subrun, credits paid and private
    messages. tables: tables with a `condition` column (`load_conditions`)."""
    from mbb.analysis.text_measures import seed_of

    e = (
        tables["evaluations"]
        .group_by("condition", "run_id")
        .agg(
            (pl.col("outcome") == "completed").mean().alias("completion_rate"),
            (pl.col("outcome") == "terminated").mean().alias("deadline_miss_rate"),
            pl.col("progress").mean().alias("mean_progress"),
            pl.col("subrun").n_unique().alias("_subruns"),
        )
    )
    parts = [
        tables["declarations"].group_by("run_id").agg(pl.col("bid").mean().alias("mean_bid")),
        tables["rounds"].group_by("run_id").agg(pl.len().alias("_rounds")),
        tables["payments"].group_by("run_id").agg(pl.col("amount").sum().alias("paid_per_run")),
        tables["messages"]
        .group_by("run_id")
        .agg(pl.col("to").is_not_null().sum().alias("private_msgs_per_run")),
    ]
    out = e
    for part in parts:
        out = out.join(part, on="run_id", how="left")
    return (
        out.with_columns(
            (pl.col("_rounds").fill_null(0) / pl.col("_subruns")).alias("rounds_per_subrun"),
            pl.col("paid_per_run", "private_msgs_per_run").fill_null(0).cast(pl.Float64),
            seed_of(pl.col("run_id")).alias("seed"),
        )
        .select("condition", "run_id", "seed", *OUTCOME_MEASURES)
        .sort("condition", "seed", "run_id")
    )


def condition_table(
    tables: Mapping[str, pl.DataFrame],
    baseline: str | None = None,
    *,
    per_run: pl.DataFrame | None = None,
    n_resamples: int = 2000,
) -> pl.DataFrame:
    """One row per condition and measure: n (seeds), the mean over seeds with its 95 %
    percentile-bootstrap CI, and — against `baseline` — the difference, its bootstrap CI,
    the effect size and whether the CI excludes 0.

    tables: tables with a `condition` column (`load_conditions`). baseline: the reference
    condition (default `base` when present, else the first condition). per_run: extra
    per-run measures to compare as well (one row per run with `condition`, `run_id`, `seed`,
    e.g. `mbb.analysis.text_measures_by_run`), joined to `run_table`'s. n_resamples:
    bootstrap resamples. A difference is paired (same seeds under both conditions, pairs
    resampled, effect size d_z) when every seed of the condition ran under the baseline too,
    else the seeds are resampled independently (effect size Hedges' g)."""
    from mbb.analysis.stats import bootstrap_ci, condition_differences

    runs = run_table(tables)
    measures = list(OUTCOME_MEASURES)
    if per_run is not None:
        extra = [c for c in per_run.columns if c not in ("condition", "run_id", "seed")]
        runs = runs.join(per_run.drop("condition", "seed", strict=False), on="run_id", how="left")
        measures += extra
    conditions = runs["condition"].unique(maintain_order=True).sort().to_list()
    if not conditions:
        raise ValueError("no runs to compare (are the tables empty?)")
    if baseline is None:
        baseline = "base" if "base" in conditions else conditions[0]
    elif baseline not in conditions:
        raise ValueError(f"baseline {baseline!r} is not among the conditions: {conditions}")
    rows = []
    for cond in conditions:
        part = runs.filter(pl.col("condition") == cond)
        for m in measures:
            x = part[m].drop_nulls().to_numpy()
            ci = bootstrap_ci(x, n_resamples=n_resamples)
            rows.append(
                (
                    cond,
                    m,
                    int(x.size),
                    float(x.mean()) if x.size else None,
                    ci[0] if ci else None,
                    ci[1] if ci else None,
                )
            )
    level = pl.DataFrame(
        rows,
        schema=["condition", "measure", "n", "mean", "ci_low", "ci_high"],
        orient="row",
    )
    diffs = condition_differences(runs, measures, baseline, n_resamples=n_resamples).select(
        "condition",
        "measure",
        "diff",
        pl.col("ci_low").alias("diff_ci_low"),
        pl.col("ci_high").alias("diff_ci_high"),
        "effect_size",
        "effect_size_kind",
        "paired",
        "excludes_zero",
    )
    order = {m: i for i, m in enumerate(measures)}
    return (
        level.join(diffs, on=["condition", "measure"], how="left")
        .with_columns(
            pl.lit(baseline).alias("baseline"),
            pl.col("measure").replace_strict(order, return_dtype=pl.Int64).alias("_o"),
        )
        .sort("condition", "_o")
        .drop("_o")
    )


def model_table(tables: Mapping[str, pl.DataFrame]) -> pl.DataFrame:
    """One row per condition x model (the study's model axis): runs, completion, deadline misses,
    progress, LLM tokens and cost per run. A run's model is that of its LLM calls ('scripted'
    for none; see `mbb.study.run_models`)."""
    from mbb.study import run_models

    models = run_models(tables)
    e = tables["evaluations"].join(models, on="run_id", how="left")
    keys = ["condition", "model"] if "condition" in e.columns else ["model"]
    out = e.group_by(keys).agg(
        pl.col("run_id").n_unique().alias("runs"),
        (pl.col("outcome") == "completed").mean().round(3).alias("completion_rate"),
        (pl.col("outcome") == "terminated").mean().round(3).alias("deadline_miss_rate"),
        pl.col("progress").mean().round(3).alias("mean_progress"),
    )
    calls = tables.get("llm_calls")
    if calls is not None and not calls.is_empty():
        c = calls.join(models, on="run_id", how="left", suffix="_run")
        spend = c.group_by([k if k != "model" else "model_run" for k in keys]).agg(
            (pl.col("prompt_tokens") + pl.col("completion_tokens")).sum().alias("tokens"),
            pl.col("cached_tokens").sum(),
            pl.col("cost_usd").sum(),
        )
        spend = spend.rename({"model_run": "model"})
        out = out.join(spend, on=keys, how="left").with_columns(
            (pl.col("cost_usd") / pl.col("runs")).alias("cost_per_run_usd")
        )
    return out.sort(keys)


def outcomes_by_condition(tables: Mapping[str, pl.DataFrame]) -> alt.Chart:
    e = (
        tables["evaluations"]
        .group_by("condition", "subrun")
        .agg(
            (pl.col("outcome") == "completed").mean().alias("completion"),
            (pl.col("outcome") == "terminated").mean().alias("deadline miss"),
            pl.col("progress").mean().alias("mean progress"),
        )
    )
    long = e.unpivot(
        index=["condition", "subrun"], variable_name="measure", value_name="value"
    ).sort("condition", "subrun")
    return (
        alt.Chart(long)
        .mark_line(point=True)
        .encode(
            x=alt.X("subrun:O", title="Subrun"),
            y=alt.Y("value:Q", title="Share of workers", axis=alt.Axis(format="%")),
            color=alt.Color("condition:N", title="Condition"),
            column=alt.Column("measure:N", title=None),
            tooltip=["condition:N", "subrun:O", "measure:N", alt.Tooltip("value:Q", format=".1%")],
        )
        .properties(width=200, height=200, title="Outcomes by condition and subrun")
    )


def bids_by_condition(tables: Mapping[str, pl.DataFrame]) -> alt.Chart:
    d = (
        tables["declarations"]
        .group_by("condition", "subrun")
        .agg(pl.col("bid").mean().alias("mean_bid"), pl.col("bid").std().alias("sd"))
        .sort("condition", "subrun")
    )
    return (
        alt.Chart(d)
        .mark_line(point=True)
        .encode(
            x=alt.X("subrun:O", title="Subrun"),
            y=alt.Y("mean_bid:Q", title="Mean declared bid (credits)"),
            color=alt.Color("condition:N", title="Condition"),
            tooltip=[
                "condition:N",
                "subrun:O",
                alt.Tooltip("mean_bid:Q", format=".1f", title="mean bid"),
                alt.Tooltip("sd:Q", format=".1f", title="sd"),
            ],
        )
        .properties(width=420, height=240, title="Mean bid by subrun and condition")
    )


def ensure_conditions(
    params_paths: Iterable[str | Path], *, runs: int, out_root: str | Path = "outputs"
) -> list[Path]:
    """Condition folders for these params files, running any whose tables are missing."""
    from mbb.params import load_params
    from mbb.runner import run_many

    dirs = []
    for p in params_paths:
        cond = load_params(p)
        folder = user_path(out_root) / cond.name
        if not (folder / "tables" / "evaluations.parquet").is_file():
            run_many(cond, runs=runs, out_dir=folder).check()
        dirs.append(folder)
    return dirs
