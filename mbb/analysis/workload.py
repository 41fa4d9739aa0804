"""Demand against capacity: how much work each subrun brought, how much resource time there
was, and how much of it was used — so an outcome can be read against the load that shaped it.

- demand_s: the subrun's total modeled work W (the sum over its workers, `subrun_workers`);
  0 on real tasks, whose work is not modeled.
- capacity_s: the resource time before the latest deadline among the subrun's workers.
- load: demand_s / capacity_s (what `tasks.load` sets in expectation).
- used_s: execution seconds of the windows that ran; utilisation: used_s / capacity_s.
- completion_rate: share of the subrun's workers who finished.

`workload(tables, by=...)` gives them per run and subrun (`by=("run_id", "subrun")`), per run
(`by="run_id"`), or per condition and subrun as means over seeds with a bootstrap CI
(`by=("condition", "subrun")`, the default), all from the per-run-and-subrun rows;
`mbb.viz.workload.workload_chart` draws them.
"""

from __future__ import annotations

from collections.abc import Mapping

import polars as pl

from mbb.analysis._frames import run_seeds
from mbb.analysis.measures import seed_bootstrap_ci

__all__ = ["workload"]

_KEYS = ["run_id", "subrun"]
# load and utilisation from demand, used time and capacity (per subrun, or summed over a run)
_RATIOS = (
    (pl.col("demand_s") / pl.col("capacity_s")).alias("load"),
    (pl.col("used_s") / pl.col("capacity_s")).alias("utilisation"),
)
# the groupings `workload` offers
_BY: tuple[tuple[str, ...], ...] = (
    ("condition", "subrun"),
    ("run_id", "subrun"),
    ("run_id",),
)


def workload(
    tables: Mapping[str, pl.DataFrame],
    *,
    by: str | tuple[str, ...] = ("condition", "subrun"),
    level: float = 0.95,
) -> pl.DataFrame:
    """Demand, capacity, load, used time, utilisation and completion rate (see the module
    docstring).

    by=("run_id", "subrun"): one row per run and subrun: condition, seed, run_id, subrun,
    workers and the measures.
    by="run_id": one row per run (the seed is the unit of a comparison): condition, seed,
    run_id, subruns, demand_s, capacity_s and used_s summed over the subruns, load and
    utilisation as ratios of those sums, and completion_rate over all the run's
    worker-subruns. Ratios of sums rather than means of the subruns' ratios (mbb's choice): a
    subrun counts by its capacity, so a short subrun does not weigh as much as a long one.
    by=("condition", "subrun"): per condition and subrun, the number of seeds n, and for load,
    utilisation and completion rate the mean over the runs' rows with a bootstrap CI over
    seeds (`<measure>_low/_high`, coverage `level`); mean demand_s, capacity_s and used_s;
    `seeds_without_completion`: the seeds whose subrun has no evaluation, left out of the
    completion rate's mean (0 for finished runs).

    `tables`: the tables of one or more conditions; `runs` (from `with_run_info`) supplies
    condition and seed, else they are read from the run id."""
    key = (by,) if isinstance(by, str) else tuple(by)
    if key not in _BY:
        raise ValueError(
            f"workload: by={by!r}; by is one of "
            + ", ".join(repr(k[0] if len(k) == 1 else k) for k in _BY)
        )
    per_subrun = _per_run_and_subrun(tables)
    if key == ("run_id", "subrun"):
        return per_subrun
    if key == ("run_id",):
        return _per_run(tables, per_subrun)
    return _per_condition(per_subrun, level)


def _per_run_and_subrun(tables: Mapping[str, pl.DataFrame]) -> pl.DataFrame:
    sw = (
        tables["subrun_workers"]
        .group_by(_KEYS)
        .agg(
            pl.len().alias("workers"),
            pl.col("work_s").sum().alias("demand_s"),
            pl.col("deadline_s").max().alias("capacity_s"),
        )
    )
    w = tables["windows"]
    used = w.filter(pl.col("status") == "ran").group_by(_KEYS).agg(pl.col("used").sum())
    done = (
        tables["evaluations"]
        .group_by(_KEYS)
        .agg((pl.col("outcome") == "completed").mean().alias("completion_rate"))
    )
    runs = run_seeds(tables, sw.select("run_id").unique())
    return (
        sw.join(used, on=_KEYS, how="left")
        .join(done, on=_KEYS, how="left")
        .join(runs, on="run_id", how="left")
        .with_columns(pl.col("used").fill_null(0.0).alias("used_s"))
        .with_columns(*_RATIOS)
        .select(
            "condition",
            "seed",
            "run_id",
            "subrun",
            "workers",
            "demand_s",
            "capacity_s",
            "load",
            "used_s",
            "utilisation",
            "completion_rate",
        )
        .sort("condition", "seed", "subrun")
    )


def _per_run(tables: Mapping[str, pl.DataFrame], per_subrun: pl.DataFrame) -> pl.DataFrame:
    done = (
        tables["evaluations"]
        .group_by("run_id")
        .agg((pl.col("outcome") == "completed").mean().alias("completion_rate"))
    )
    return (
        per_subrun.group_by("condition", "seed", "run_id")
        .agg(
            pl.len().alias("subruns"),
            pl.col("demand_s").sum(),
            pl.col("capacity_s").sum(),
            pl.col("used_s").sum(),
        )
        .join(done, on="run_id", how="left")
        .with_columns(*_RATIOS)
        .select(
            "condition",
            "seed",
            "run_id",
            "subruns",
            "demand_s",
            "capacity_s",
            "load",
            "used_s",
            "utilisation",
            "completion_rate",
        )
        .sort("condition", "seed")
    )


def _per_condition(per_subrun: pl.DataFrame, level: float) -> pl.DataFrame:
    rows = []
    for (cond, subrun), part in per_subrun.group_by("condition", "subrun", maintain_order=True):
        row: dict[str, object] = {
            "condition": cond,
            "subrun": subrun,
            "n": part.height,
            "demand_s": part["demand_s"].mean(),
            "capacity_s": part["capacity_s"].mean(),
            "used_s": part["used_s"].mean(),
        }
        for m in ("load", "utilisation", "completion_rate"):
            mean, low, high = seed_bootstrap_ci(part[m].to_numpy(), level=level)
            row |= {m: mean, f"{m}_low": low, f"{m}_high": high}
        # a run's subrun without an evaluation has no completion rate: its mean is over fewer
        row["seeds_without_completion"] = part["completion_rate"].null_count()
        rows.append(row)
    return pl.DataFrame(rows).sort("condition", "subrun")
