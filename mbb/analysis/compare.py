"""Put conditions side by side: load their runs' tables and summarise them (the charts are in
`mbb.viz.compare`). Analyses read runs that exist; running conditions is `mbb.batch`'s job."""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path

import polars as pl

from mbb.analysis._frames import seed_of
from mbb.analysis.text_measures import TEXT_MEASURE_LABELS
from mbb.analysis.tokens import total_cost
from mbb.core.paths import user_path
from mbb.core.tables import TABLES

__all__ = [
    "MEASURE_LABELS",
    "OUTCOME_MEASURES",
    "condition_table",
    "load_conditions",
    "measure_label",
    "model_table",
    "run_table",
]


def load_conditions(
    dirs: Iterable[str | Path], names: Iterable[str] | None = None
) -> dict[str, pl.DataFrame]:
    """Tables of several condition folders, concatenated with a `condition` column.

    Read from the runs' checked logs (`mbb.analysis.load_runs`: finished, valid runs only),
    never from the folders' `tables/*.parquet`, which anyone who had a folder could have
    rewritten (a red team's find: a forged evaluations table read as every task completed).

    dirs: condition folders (their run folders are read); names: the condition label of each
    folder, in order (default: the folder's name)."""
    from mbb.analysis.runs import load_runs

    folders = [user_path(d) for d in dirs]
    labels = list(names) if names is not None else [f.name for f in folders]
    if len(labels) != len(folders):
        raise ValueError(f"{len(labels)} names for {len(folders)} condition folders")
    parts: dict[str, list[pl.DataFrame]] = {n: [] for n in TABLES}
    for folder, label in zip(folders, labels, strict=True):
        tables = load_runs([folder])
        for name in TABLES:
            parts[name].append(tables[name].with_columns(pl.lit(label).alias("condition")))
    return {n: pl.concat(v, how="diagonal_relaxed") for n, v in parts.items() if v}


OUTCOME_MEASURES: tuple[str, ...] = (
    "completion",
    "deadline_miss",
    "progress",
    "score",
    "mean_bid",
    "rounds_per_subrun",
    "credits_per_run",
    "private_msgs_per_run",
    "cost_per_run_usd",
)
# how a measure is named where people read it (tables, forest plots, the report's columns), with
# its unit where it has one: the outcome measures here, the text measures beside their
# definitions (`mbb.analysis.text_measures.TEXT_MEASURE_LABELS`). One map: a measure compared
# without an entry shows its snake_case name, and a test fails on it.
MEASURE_LABELS: dict[str, str] = {
    "completion": "Completion rate",
    "deadline_miss": "Deadline-miss rate",
    "progress": "Mean progress",
    "score": "Mean score",
    "mean_bid": "Mean bid (credits)",
    "rounds_per_subrun": "Rounds per subrun",
    "credits_per_run": "Credits spent per run",
    "private_msgs_per_run": "Private messages per run",
    "cost_per_run_usd": "LLM cost per run (USD)",
    **TEXT_MEASURE_LABELS,
}


def measure_label(measure: str) -> str:
    """The readable name of `measure` (`MEASURE_LABELS`); a measure that has none (an extra
    per-run column a caller compares) keeps its own name, unchanged, so it is visibly
    unlabelled rather than dressed up as if it had been named on purpose."""
    return MEASURE_LABELS.get(measure, measure)


def run_table(
    tables: Mapping[str, pl.DataFrame], measures: Sequence[str] = OUTCOME_MEASURES
) -> pl.DataFrame:
    """One row per run (the seed is the unit a comparison resamples): condition, run_id, seed
    and `measures` (default `OUTCOME_MEASURES`), as `mbb.analysis.outcome.outcomes` defines
    them per run. tables: tables with a `condition` column (`load_conditions`)."""
    from mbb.analysis.outcome import outcomes

    return (
        outcomes(tables, ["condition", "run_id"])
        .with_columns(
            pl.col(*measures).cast(pl.Float64),
            seed_of(pl.col("run_id")).alias("seed"),
        )
        .select(
            "condition",
            "run_id",
            "seed",
            *measures,
            # why a cost is n/a (`mbb.table` shows it in the cell)
            *(["cost_per_run_usd_why"] if "cost_per_run_usd" in measures else []),
            *(["private_msgs_per_run_why"] if "private_msgs_per_run" in measures else []),
        )
        .sort("condition", "seed", "run_id")
    )


def condition_table(
    tables: Mapping[str, pl.DataFrame],
    baseline: str | None = None,
    *,
    measures: Sequence[str] = OUTCOME_MEASURES,
    per_run: pl.DataFrame | None = None,
    n_resamples: int = 2000,
) -> pl.DataFrame:
    """One row per condition and measure: n (seeds with a value), n_na (seeds of the
    condition whose value is n/a: the measure cannot be computed for that run, e.g. a rule
    carry-over in a run that stated no rule; counted, neither a seed with a value nor
    dropped), the mean over seeds with its 95 % percentile-bootstrap CI, and — against
    `baseline` — the difference, its bootstrap CI, the effect size and whether the CI
    excludes 0.

    tables: tables with a `condition` column (`load_conditions`). baseline: the reference
    condition (default `base` when present, else the first condition). measures: the
    outcome measures compared (default `OUTCOME_MEASURES`; the LLM cost only where some run
    made an LLM call, not "$0" for scripted runs). per_run: extra
    per-run measures to compare as well (one row per run with `condition`, `run_id`, `seed`,
    e.g. `mbb.analysis.text_measures_by_run`), joined to `run_table`'s. n_resamples:
    bootstrap resamples. A difference is paired (same seeds under both conditions, pairs
    resampled, effect size d_z) when every seed of the condition ran under the baseline too,
    else the seeds are resampled independently (effect size Hedges' g). `note` says which
    rows are the baseline's, why a difference is missing (a measure no seed of the
    condition, or of the baseline, has a value for; such a row claims no pairing and no
    verdict) and why an effect size is (0 in every seed of both conditions, or a difference
    that does not vary between seeds: no spread to standardise by)."""
    from mbb.analysis.stats import bootstrap_ci, condition_differences

    calls = tables.get("llm_calls")
    if calls is None or calls.is_empty():  # scripted runs make no API calls: no cost to compare
        measures = [m for m in measures if m != "cost_per_run_usd"]
    runs = run_table(tables, measures)
    measures = list(measures)
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
                    part.height - int(x.size),
                    float(x.mean()) if x.size else None,
                    ci[0] if ci else None,
                    ci[1] if ci else None,
                    bool(x.size) and bool((x == 0).all()),
                )
            )
    level = pl.DataFrame(
        rows,
        schema=["condition", "measure", "n", "n_na", "mean", "ci_low", "ci_high", "_zero"],
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
    base_n = level.filter(pl.col("condition") == baseline).select(
        "measure", pl.col("n").alias("_base_n"), pl.col("_zero").alias("_base_zero")
    )
    no_diff = pl.col("diff").is_null()
    no_effect = pl.col("diff").is_not_null() & pl.col("effect_size").is_null()
    return (
        level.join(diffs, on=["condition", "measure"], how="left")
        .join(base_n, on="measure", how="left")
        .with_columns(
            # a difference that could not be computed claims no pairing and no verdict
            *[
                pl.when(no_diff).then(None).otherwise(pl.col(c)).alias(c)
                for c in ("effect_size_kind", "paired", "excludes_zero")
            ],
            pl.when(pl.col("condition") == baseline)
            .then(pl.lit("baseline"))
            .when(no_diff & (pl.col("n") == 0))
            .then(pl.lit("no difference: no seed has a value"))
            .when(no_diff & (pl.col("_base_n") == 0))
            .then(pl.lit(f"no difference: no seed of {baseline} has a value"))
            .when(no_effect & pl.col("_zero") & pl.col("_base_zero"))
            .then(pl.lit(f"0 in every seed here and under {baseline}: nothing to compare"))
            .when(no_effect)
            .then(pl.lit("no effect size: the difference is the same in every seed (no spread)"))
            .alias("note"),
            pl.lit(baseline).alias("baseline"),
            pl.col("measure").replace_strict(order, return_dtype=pl.Int64).alias("_o"),
        )
        .sort("condition", "_o")
        .drop("_o", "_base_n", "_zero", "_base_zero")
    )


def model_table(tables: Mapping[str, pl.DataFrame]) -> pl.DataFrame:
    """One row per condition x model (the study's model axis): runs, completion, deadline misses,
    progress and LLM cost per run (`mbb.analysis.outcome.outcomes`), with the tokens and cost
    of all runs. A run's model is that of its LLM calls ('scripted' for none; see
    `mbb.analysis.tokens.run_models`)."""
    from mbb.analysis.outcome import outcomes
    from mbb.analysis.tokens import run_models

    models = run_models(tables)
    keys = ["condition", "model"] if "condition" in tables["evaluations"].columns else ["model"]
    out = outcomes(tables, keys, attributes=[models]).select(
        *keys, "runs", "completion", "deadline_miss", "progress", "cost_per_run_usd"
    )
    calls = tables.get("llm_calls")
    if calls is not None and not calls.is_empty():
        c = calls.join(models, on="run_id", how="left", suffix="_run")
        spend = c.group_by([k if k != "model" else "model_run" for k in keys]).agg(
            (pl.col("prompt_tokens") + pl.col("completion_tokens")).sum().alias("tokens"),
            pl.col("cached_tokens").sum(),
            total_cost(),
        )
        spend = spend.rename({"model_run": "model"})
        out = out.join(spend, on=keys, how="left")
    return out.sort(keys)
