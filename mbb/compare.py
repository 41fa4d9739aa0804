"""Put finished conditions side by side: load their tables, summarise, draw."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from pathlib import Path

import altair as alt
import polars as pl

from mbb.paths import user_path
from mbb.tables import TABLES, load_tables

__all__ = [
    "bids_by_condition",
    "condition_table",
    "ensure_conditions",
    "load_conditions",
    "model_table",
    "outcomes_by_condition",
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


def condition_table(tables: Mapping[str, pl.DataFrame]) -> pl.DataFrame:
    """One row per condition: runs, completion, deadline misses, progress, bids, spend."""
    e = (
        tables["evaluations"]
        .group_by("condition")
        .agg(
            pl.col("run_id").n_unique().alias("runs"),
            (pl.col("outcome") == "completed").mean().round(3).alias("completion_rate"),
            (pl.col("outcome") == "terminated").mean().round(3).alias("deadline_miss_rate"),
            pl.col("progress").mean().round(3).alias("mean_progress"),
        )
    )
    d = (
        tables["declarations"]
        .group_by("condition")
        .agg(pl.col("bid").mean().round(1).alias("mean_bid"))
    )
    r = (
        tables["rounds"]
        .group_by("condition")
        .agg((pl.len() / pl.col("run_id").n_unique()).round(2).alias("rounds_per_run"))
    )
    p = (
        tables["payments"]
        .group_by("condition")
        .agg((pl.col("amount").sum() / pl.col("run_id").n_unique()).round(1).alias("paid_per_run"))
    )
    m = (
        tables["messages"]
        .group_by("condition")
        .agg(
            (pl.col("to").is_not_null().sum() / pl.col("run_id").n_unique())
            .round(1)
            .alias("private_msgs_per_run")
        )
    )
    out = e
    for other in (d, r, p, m):
        out = out.join(other, on="condition", how="left")
    return out.sort("condition")


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
