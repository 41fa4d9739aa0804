"""Outcome measures per run, from the event tables: did the allocation serve the collective?

One row per run (`run_id`), labelled with its `mechanism` (`negotiated` for the agents'
institutions, else the centralized rule that published its schedules) and its `base_run` (the
original run a replay re-schedules, so institutions and mechanisms pair up on one workload).
Unit of account: a worker-subrun (one worker's task in one subrun).

- `miss_rate`: share of worker-subruns terminated at their deadline.
- `completion`: share completed (all the task's work done).
- `progress`: mean modeled progress (share of the task's work done), completed or not.
- `mean_wait_s`, `max_wait_s`: per request, seconds from the request to the start of the window
  that served it; a request never served waits until its worker's termination, withdrawal or,
  failing both, the end of the subrun's last window.
- `max_lateness_s`: max over worker-subruns of lateness = completion time − deadline for a
  completed task (negative: early); for one not completed, the execution it still lacked,
  (1 − progress) · work_s — the least it would have been late by running on without a break.
- `gini_exec`: Gini coefficient of execution seconds used, per worker summed over the run
  (0: everyone got the same time; → 1: one worker got it all).
- `credits_spent`: credits paid to the operator.
- `welfare`: utilitarian social welfare = mean evaluation score (fraction of hidden tests passed)
  per worker-subrun. Payments are transfers from workers to the operator and cancel out of a
  utilitarian sum, so they are not subtracted (credits have no value outside the arena); they
  are reported as `credits_spent` so a reader can price them if they wish.
"""

from __future__ import annotations

from collections.abc import Mapping

import polars as pl

from mbb.scheduling.centralized import CENTRALIZED

__all__ = ["MEASURES", "execution_by_worker", "gini", "outcomes", "waits"]

MEASURES = (
    "miss_rate",
    "completion",
    "progress",
    "mean_wait_s",
    "max_wait_s",
    "max_lateness_s",
    "gini_exec",
    "credits_spent",
    "welfare",
)


def gini(values: list[float]) -> float:
    """Gini coefficient of non-negative values (0 for an empty or all-zero list)."""
    xs = sorted(values)
    n, total = len(xs), sum(xs)
    if n == 0 or total <= 0:
        return 0.0
    return 2.0 * sum((i + 1) * x for i, x in enumerate(xs)) / (n * total) - (n + 1) / n


def _labels(tables: Mapping[str, pl.DataFrame]) -> pl.DataFrame:
    runs = tables["evaluations"].select("run_id").unique()
    rule = tables["rounds"].sort("subrun", "round").group_by("run_id").agg(pl.col("rule").first())
    return (
        runs.join(rule, on="run_id", how="left")
        .with_columns(
            pl.when(pl.col("rule").is_in(list(CENTRALIZED)))
            .then(pl.col("rule"))
            .when(pl.col("run_id").str.contains("~"))
            .then(pl.col("run_id").str.split("~").list.last())
            .otherwise(pl.lit("negotiated"))
            .alias("mechanism"),
            pl.col("run_id").str.split("~").list.first().alias("base_run"),
        )
        .drop("rule")
    )


def waits(tables: Mapping[str, pl.DataFrame]) -> pl.DataFrame:
    """One row per request: run_id, subrun, worker, requested (s), served (bool), wait_s."""
    keys = ["run_id", "subrun", "worker"]
    req = tables["requests"].select(*keys, pl.col("t").alias("requested")).sort("requested")
    ran = (
        tables["windows"]
        .filter(pl.col("status") == "ran")
        .select(*keys, pl.col("start"))
        .sort("start")
    )
    served = req.join_asof(
        ran,
        left_on="requested",
        right_on="start",
        by=keys,
        strategy="forward",
        check_sortedness=False,  # sorted globally above; polars cannot check within groups
    )
    stop = (
        pl.concat(
            [
                tables["terminations"].select(*keys, "t"),
                tables["withdrawals"].select(*keys, "t"),
            ]
        )
        .group_by(keys)
        .agg(pl.col("t").min().alias("stopped"))
    )
    last = (
        tables["windows"]
        .filter(pl.col("status") == "ran")
        .group_by("run_id", "subrun")
        .agg(pl.col("end").max().alias("subrun_end"))
    )
    return (
        served.join(stop, on=keys, how="left")
        .join(last, on=["run_id", "subrun"], how="left")
        .with_columns(
            pl.col("start").is_not_null().alias("served"),
            (pl.coalesce("start", "stopped", "subrun_end", "requested") - pl.col("requested"))
            .clip(lower_bound=0.0)
            .alias("wait_s"),
        )
        .select(*keys, "requested", "served", "wait_s")
    )


def execution_by_worker(tables: Mapping[str, pl.DataFrame]) -> pl.DataFrame:
    """Execution seconds used per run and worker (all subruns), zero for a worker never served."""
    everyone = tables["subrun_workers"].select("run_id", "worker").unique()
    used = (
        tables["windows"]
        .filter(pl.col("status") == "ran")
        .group_by("run_id", "worker")
        .agg(pl.col("used").sum().alias("exec_s"), pl.len().alias("windows"))
    )
    return (
        everyone.join(used, on=["run_id", "worker"], how="left")
        .with_columns(pl.col("exec_s").fill_null(0.0), pl.col("windows").fill_null(0))
        .join(_labels(tables), on="run_id", how="left")
        .sort("run_id", "worker")
    )


def outcomes(tables: Mapping[str, pl.DataFrame]) -> pl.DataFrame:
    """One row per run with every measure in `MEASURES` (definitions in the module docstring)."""
    keys = ["run_id", "subrun", "worker"]
    ev = tables["evaluations"].select(*keys, "outcome", "progress", "score")
    sw = tables["subrun_workers"].select(*keys, "work_s", "deadline_s")
    done = (
        tables["windows"]
        .filter(pl.col("reason") == "completed")
        .select(*keys, pl.col("end").alias("finished"))
    )
    late = (
        ev.join(sw, on=keys, how="left")
        .join(done, on=keys, how="left")
        .with_columns(
            pl.when(pl.col("finished").is_not_null())
            .then(pl.col("finished") - pl.col("deadline_s"))
            .otherwise((1.0 - pl.col("progress")) * pl.col("work_s"))
            .alias("lateness_s")
        )
    )
    per_run = late.group_by("run_id").agg(
        pl.len().alias("worker_subruns"),
        (pl.col("outcome") == "terminated").mean().alias("miss_rate"),
        (pl.col("outcome") == "completed").mean().alias("completion"),
        pl.col("progress").mean().alias("progress"),
        pl.col("lateness_s").max().alias("max_lateness_s"),
        pl.col("score").mean().alias("welfare"),
    )
    w = (
        waits(tables)
        .group_by("run_id")
        .agg(
            pl.col("wait_s").mean().alias("mean_wait_s"), pl.col("wait_s").max().alias("max_wait_s")
        )
    )
    ex = execution_by_worker(tables)
    g = pl.DataFrame(
        [
            {"run_id": rid, "gini_exec": gini(grp["exec_s"].to_list())}
            for (rid,), grp in ex.group_by("run_id")
        ],
        schema={"run_id": pl.String, "gini_exec": pl.Float64},
    )
    paid = tables["payments"].group_by("run_id").agg(pl.col("amount").sum().alias("credits_spent"))
    return (
        per_run.join(w, on="run_id", how="left")
        .join(g, on="run_id", how="left")
        .join(paid, on="run_id", how="left")
        .with_columns(
            pl.col("credits_spent").fill_null(0),
            pl.col("mean_wait_s").fill_null(0.0),
            pl.col("max_wait_s").fill_null(0.0),
        )
        .join(_labels(tables), on="run_id", how="left")
        .select("run_id", "base_run", "mechanism", "worker_subruns", *MEASURES)
        .sort("base_run", "mechanism")
    )
