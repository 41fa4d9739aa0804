"""Demand against capacity: how much work each subrun brought, how much resource time there
was, and how much of it was used — so an outcome can be read against the load that shaped it.

- demand_s: the subrun's total modeled work W (the sum over its workers, `subrun_workers`);
  0 on real tasks, whose work is not modeled.
- capacity_s: the resource time before the latest deadline among the subrun's workers.
- load: demand_s / capacity_s (what `tasks.load` sets in expectation).
- used_s: execution seconds of the windows that ran; utilisation: used_s / capacity_s.
- completion_rate: share of the subrun's workers who finished.

Per seed first (`workload_by_seed`, one row per run and subrun; `workload_by_run`, one row per
run), then means with a bootstrap CI over seeds (`workload_table`);
`mbb.viz.workload.workload_chart` draws them.
"""

from __future__ import annotations

from collections.abc import Mapping

import polars as pl

from mbb.analysis._frames import run_seeds
from mbb.analysis.measures import seed_bootstrap_ci

__all__ = ["workload_by_run", "workload_by_seed", "workload_table"]

_KEYS = ["run_id", "subrun"]
# load and utilisation from demand, used time and capacity (per subrun, or summed over a run)
_RATIOS = (
    (pl.col("demand_s") / pl.col("capacity_s")).alias("load"),
    (pl.col("used_s") / pl.col("capacity_s")).alias("utilisation"),
)


def workload_by_seed(tables: Mapping[str, pl.DataFrame]) -> pl.DataFrame:
    """One row per run and subrun: condition, seed, workers, demand_s, capacity_s, load,
    used_s, utilisation and completion_rate (see the module docstring).

    `tables`: the tables of one or more conditions; `runs` (from `with_run_info`) supplies
    condition and seed, else they are read from the run id."""
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


def workload_by_run(tables: Mapping[str, pl.DataFrame]) -> pl.DataFrame:
    """One row per run (the seed is the unit of a comparison): condition, seed, run_id,
    subruns, demand_s, capacity_s and used_s summed over the subruns, load and utilisation as
    ratios of those sums, and completion_rate over all the run's worker-subruns.

    Ratios of sums rather than means of the subruns' ratios (mbb's choice): a subrun counts by
    its capacity, so a short subrun does not weigh as much as a long one. `tables`: as for
    `workload_by_seed`."""
    done = (
        tables["evaluations"]
        .group_by("run_id")
        .agg((pl.col("outcome") == "completed").mean().alias("completion_rate"))
    )
    return (
        workload_by_seed(tables)
        .group_by("condition", "seed", "run_id")
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


def workload_table(tables: Mapping[str, pl.DataFrame], level: float = 0.95) -> pl.DataFrame:
    """Per condition and subrun: the number of seeds n, and for load, utilisation and
    completion rate the mean over seeds with a bootstrap CI (`<measure>_low/_high`); mean
    demand_s, capacity_s and used_s.

    `tables`: as for `workload_by_seed`; `level`: coverage of the intervals."""
    per_seed = workload_by_seed(tables)
    rows = []
    for (cond, subrun), part in per_seed.group_by("condition", "subrun", maintain_order=True):
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
        rows.append(row)
    return pl.DataFrame(rows).sort("condition", "subrun")
