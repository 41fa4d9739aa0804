"""Outcomes of any grouping of worker-subruns: the one outcome summary of mbb.

`outcomes(tables, by=...)` gives one row per group — per run, condition, mechanism, model,
subrun, worker (seat), persona, task, or any combination — with the same columns whatever the
grouping, so tables, comparisons, analyses, mechanism studies and the report all read one set
of names. Unit of account: a worker-subrun (one worker's task in one subrun, one `evaluation`
event).

Columns, besides the grouping keys (definitions; "share" = share of the group's worker-subruns):

- `runs`: distinct runs in the group.
- `worker_subruns`: worker-subruns in the group (evaluations).
- `completion`: share completed (all the task's work done).
- `deadline_miss`: share terminated at their deadline.
- `progress`: mean modeled progress (share of the task's work done), completed or not.
- `score`: mean evaluation score (fraction of hidden tests passed). This is also the
  utilitarian social welfare: payments are transfers to the operator and cancel out of a
  utilitarian sum (credits have no value outside the arena), so they are not subtracted.
- `resolved`: share whose evaluation says resolved.
- `mean_wait_s`, `max_wait_s`: over the group's requests, seconds from a request to the start
  of the window that served it; a request never served waits until its worker's termination,
  withdrawal or, failing both, the end of the subrun's last window (null when nobody
  requested: no wait to measure).
- `max_lateness_s`: max over worker-subruns of lateness = completion time − deadline for a
  completed task (negative: early); for one not completed, the execution it still lacked,
  (1 − progress) · work_s — the least it would have been late by running on without a break.
- `gini_exec`: Gini coefficient of execution seconds used across the workers of a run (0:
  everyone got the same time; → 1: one worker got it all), each worker's seconds summed over
  the group's worker-subruns of that run (a worker never served counts 0), then averaged over
  the group's runs where it is defined. Per run this is the run's Gini; it is null for a
  group of one worker per run and for runs where no window ran (no spread to measure).
- `credits_per_run`: credits paid to the operator by the group's workers, per run.
- `mean_bid`: mean declared bid (every declaration, revisions included), credits.
- `rounds_per_subrun`: negotiation rounds per subrun, over the (run, subrun) pairs the group
  covers (a subrun-free count, so conditions with different subrun counts compare).
- `private_msgs_per_run`: private (addressed) messages sent by the group's workers, per run;
  null (n/a) for a group none of whose runs sent any message (conversation off, a centralized
  mechanism: nothing could be sent, privately or not), never 0, with
  `private_msgs_per_run_why` saying so (`mbb.analysis._frames.measured_runs`).
- `cost_per_run_usd`: LLM cost per run of the calls made by the group's workers (null for
  scripted runs, which call no model: n/a, never "$0"; null, unknown, when a call's model has no
  price); `cost_per_run_usd_why` says which ("scripted: no API calls" or "unpriced"), and
  `mbb.table` shows it in the cell.

Grouping keys: `run_id`, `subrun`, `worker`, `task` (from `subrun_started`), `condition` (a
`condition` column already on the tables, else the `runs` table, else the run id without its
`-seedNNNN`), `mechanism` and `base_run` (see `mechanism_labels`), any column of the `runs` or
`workers` tables (`with_run_info`: e.g. `persona`, `label`, `memory`), and any column of the
frames passed as `attributes` (joined on the keys they share with the worker-subruns: e.g.
`mbb.analysis.tokens.run_models` for a run's model). A count that cannot be tied to a group's
keys (an LLM call with no worker, when grouping by worker) is left out of that group's counts.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence

import polars as pl

from mbb.analysis._frames import measured_runs
from mbb.analysis.tokens import NO_API_CALLS, total_cost

__all__ = [
    "OUTCOME_COLUMNS",
    "execution_by_worker",
    "gini",
    "mechanism_labels",
    "misses_complete_completion",
    "outcomes",
    "waits",
]

OUTCOME_COLUMNS = (
    "runs",
    "worker_subruns",
    "completion",
    "deadline_miss",
    "progress",
    "score",
    "resolved",
    "mean_wait_s",
    "max_wait_s",
    "max_lateness_s",
    "gini_exec",
    "credits_per_run",
    "mean_bid",
    "rounds_per_subrun",
    "private_msgs_per_run",
    "private_msgs_per_run_why",
    "cost_per_run_usd",
    "cost_per_run_usd_why",
)
_UNIT = ["run_id", "subrun", "worker"]
NO_MESSAGES = "no messages in its runs (none could be sent)"


def gini(values: Iterable[float]) -> float:
    """Gini coefficient of non-negative values: nan for fewer than two values or an all-zero
    list (no spread to measure: 0 would read as "perfectly equal").

    values: one amount per member (e.g. execution seconds per worker)."""
    xs = sorted(values)
    n, total = len(xs), sum(xs)
    if n < 2 or total <= 0:
        return math.nan
    return 2.0 * sum((i + 1) * x for i, x in enumerate(xs)) / (n * total) - (n + 1) / n


def mechanism_labels(tables: Mapping[str, pl.DataFrame]) -> pl.DataFrame:
    """One row per run: `mechanism` (`negotiated` for the agents' institutions, else the
    centralized rule that published its schedules, or the replay suffix of its id) and
    `base_run` (the original run a replay re-schedules, so mechanisms pair up on one workload)."""
    from mbb.protocol.scheduling.centralized import CENTRALIZED

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
    """One row per request: run_id, subrun, worker, requested (s), served (bool), wait_s
    (defined under `mean_wait_s` in the module docstring)."""
    req = tables["requests"].select(*_UNIT, pl.col("t").alias("requested")).sort("requested")
    ran = (
        tables["windows"]
        .filter(pl.col("status") == "ran")
        .select(*_UNIT, pl.col("start"))
        .sort("start")
    )
    served = req.join_asof(
        ran,
        left_on="requested",
        right_on="start",
        by=_UNIT,
        strategy="forward",
        check_sortedness=False,  # sorted globally above; polars cannot check within groups
    )
    stop = (
        pl.concat(
            [
                tables["terminations"].select(*_UNIT, "t"),
                tables["withdrawals"].select(*_UNIT, "t"),
            ]
        )
        .group_by(_UNIT)
        .agg(pl.col("t").min().alias("stopped"))
    )
    last = (
        tables["windows"]
        .filter(pl.col("status") == "ran")
        .group_by("run_id", "subrun")
        .agg(pl.col("end").max().alias("subrun_end"))
    )
    return (
        served.join(stop, on=_UNIT, how="left")
        .join(last, on=["run_id", "subrun"], how="left")
        .with_columns(
            pl.col("start").is_not_null().alias("served"),
            (pl.coalesce("start", "stopped", "subrun_end", "requested") - pl.col("requested"))
            .clip(lower_bound=0.0)
            .alias("wait_s"),
        )
        .select(*_UNIT, "requested", "served", "wait_s")
    )


def execution_by_worker(tables: Mapping[str, pl.DataFrame]) -> pl.DataFrame:
    """Execution seconds used and windows run per run and worker (all subruns), zero for a
    worker never served, with the run's `mechanism` and `base_run`."""
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
        .join(mechanism_labels(tables), on="run_id", how="left")
        .sort("run_id", "worker")
    )


def _units(tables: Mapping[str, pl.DataFrame], attributes: Sequence[pl.DataFrame]) -> pl.DataFrame:
    """One row per worker-subrun with its outcome, lateness and every grouping attribute."""
    ev = tables["evaluations"]
    keep = [*_UNIT, "outcome", "progress", "score", "resolved"]
    units = ev.select(*keep, *(["condition"] if "condition" in ev.columns else []))
    sw = tables["subrun_workers"].select(*_UNIT, "task", "work_s", "deadline_s")
    done = (
        tables["windows"]
        .filter(pl.col("reason") == "completed")
        .group_by(_UNIT)
        .agg(pl.col("end").max().alias("finished"))
    )
    units = (
        units.join(sw, on=_UNIT, how="left")
        .join(done, on=_UNIT, how="left")
        .with_columns(
            pl.when(pl.col("finished").is_not_null())
            .then(pl.col("finished") - pl.col("deadline_s"))
            .otherwise((1.0 - pl.col("progress")) * pl.col("work_s"))
            .alias("lateness_s")
        )
        .join(mechanism_labels(tables), on="run_id", how="left")
    )
    extra = [f for f in (tables.get("runs"), tables.get("workers")) if f is not None] + list(
        attributes
    )
    for frame in extra:
        on = [k for k in _UNIT if k in frame.columns]
        if "run_id" not in on:
            raise ValueError(f"an attributes frame needs a run_id column, got {frame.columns}")
        new = [c for c in frame.columns if c not in units.columns]
        if new:
            units = units.join(frame.select(*on, *new).unique(on), on=on, how="left")
    if "condition" not in units.columns:
        units = units.with_columns(
            pl.col("run_id").str.replace(r"-seed\d+.*$", "").alias("condition")
        )
    return units


def _tag(
    events: pl.DataFrame, units: pl.DataFrame, by: Sequence[str], on: Sequence[str]
) -> pl.DataFrame:
    """`events` with the group keys of the worker-subruns they belong to (joined on `on`); an
    event column named like a grouping key (an LLM call's own `model`) gives way to the key."""
    keys = units.select(*dict.fromkeys([*on, *by])).unique()
    own = [c for c in by if c in events.columns and c not in on]
    return events.drop(own).join(keys, on=list(on), how="inner")


def outcomes(
    tables: Mapping[str, pl.DataFrame],
    by: str | Sequence[str] = "run_id",
    *,
    attributes: Sequence[pl.DataFrame] = (),
) -> pl.DataFrame:
    """One row per group of worker-subruns with every column of `OUTCOME_COLUMNS`.

    tables: the event tables (`mbb.core.tables`), optionally with `runs`/`workers` and a
        `condition` column (`mbb.analysis.compare.load_conditions`).
    by: the grouping key or keys (see the module docstring for what can be grouped on).
    attributes: extra frames with a `run_id` column (and optionally `subrun`, `worker`) whose
        other columns become grouping keys, e.g. `mbb.analysis.tokens.run_models(tables)` for
        `model`.
    """
    by = [by] if isinstance(by, str) else list(by)
    if not by:
        raise ValueError("outcomes needs at least one grouping key")
    units = _units(tables, attributes)
    unknown = [k for k in by if k not in units.columns]
    if unknown:
        raise ValueError(
            f"cannot group outcomes by {unknown[0]!r}; known keys: "
            + ", ".join(c for c in units.columns if c not in ("outcome", "lateness_s"))
        )
    on = _join_keys(units, by)

    base = units.group_by(by).agg(
        pl.col("run_id").n_unique().alias("runs"),
        pl.len().alias("worker_subruns"),
        (pl.col("outcome") == "completed").mean().alias("completion"),
        (pl.col("outcome") == "terminated").mean().alias("deadline_miss"),
        pl.col("progress").mean().alias("progress"),
        pl.col("score").mean().alias("score"),
        pl.col("resolved").cast(pl.Float64).mean().alias("resolved"),
        pl.col("lateness_s").max().alias("max_lateness_s"),
    )
    w = (
        _tag(waits(tables), units, by, on)
        .group_by(by)
        .agg(
            pl.col("wait_s").mean().alias("mean_wait_s"), pl.col("wait_s").max().alias("max_wait_s")
        )
    )
    used = (
        tables["windows"]
        .filter(pl.col("status") == "ran")
        .group_by(_UNIT)
        .agg(pl.col("used").sum().alias("exec_s"))
    )
    exec_w = (
        units.select(*dict.fromkeys([*_UNIT, *by]))
        .join(used, on=_UNIT, how="left")
        .with_columns(pl.col("exec_s").fill_null(0.0))
        .group_by(*dict.fromkeys([*by, "run_id", "worker"]))
        .agg(pl.col("exec_s").sum())
    )
    g = pl.DataFrame(
        [
            {**dict(zip(by, key, strict=True)), "gini_exec": _mean_gini(grp)}
            for key, grp in exec_w.group_by(by)
        ],
        schema={**{k: units.schema[k] for k in by}, "gini_exec": pl.Float64},
    ).with_columns(pl.col("gini_exec").fill_nan(None))
    paid = (
        _tag(tables["payments"], units, by, on)
        .group_by(by)
        .agg(pl.col("amount").sum().alias("_credits"))
    )
    bids = (
        _tag(tables["declarations"], units, by, on)
        .group_by(by)
        .agg(pl.col("bid").mean().alias("mean_bid"))
    )
    msgs = (
        _tag(tables["messages"], units, by, on)
        .group_by(by)
        .agg(pl.col("to").is_not_null().sum().alias("_private"))
    )
    talked = (  # a group with a run that sent any message: its private count is measured
        units.select(*dict.fromkeys([*by, "run_id"]))
        .unique()
        .group_by(by)
        .agg(
            pl.col("run_id")
            .is_in(measured_runs(tables, "conversation").implode())
            .any()
            .alias("_talked")
        )
    )
    subruns = units.select(*dict.fromkeys([*by, "run_id", "subrun"])).unique()
    per_subrun = tables["rounds"].group_by("run_id", "subrun").agg(pl.len().alias("_rounds"))
    rounds = (
        subruns.join(per_subrun, on=["run_id", "subrun"], how="left")
        .with_columns(pl.col("_rounds").fill_null(0))
        .group_by(by)
        .agg(pl.col("_rounds").mean().alias("rounds_per_subrun"))
    )
    calls = tables.get("llm_calls")
    cost = (
        _tag(calls, units, by, on)
        .group_by(by)
        .agg(total_cost().alias("_cost"), pl.lit(True).alias("_llm"))
        if calls is not None and not calls.is_empty()
        else pl.DataFrame(
            schema={**{k: units.schema[k] for k in by}, "_cost": pl.Float64, "_llm": pl.Boolean}
        )
    )
    out = base
    for part in (w, g, paid, bids, msgs, talked, rounds, cost):
        out = out.join(part, on=by, how="left", nulls_equal=True)
    return (
        out.with_columns(
            (pl.col("_credits").fill_null(0) / pl.col("runs")).alias("credits_per_run"),
            pl.when(pl.col("_talked"))
            .then(pl.col("_private").fill_null(0) / pl.col("runs"))
            .alias("private_msgs_per_run"),
            pl.when(~pl.col("_talked").fill_null(False))
            .then(pl.lit(NO_MESSAGES))
            .alias("private_msgs_per_run_why"),
            # no call (scripted): n/a; a model without a price: unknown; null both, never $0
            (pl.col("_cost") / pl.col("runs")).alias("cost_per_run_usd"),
            pl.when(pl.col("_llm").is_null())
            .then(pl.lit(NO_API_CALLS))
            .when(pl.col("_cost").is_null())
            .then(pl.lit("unpriced"))
            .alias("cost_per_run_usd_why"),
        )
        .select(*by, *OUTCOME_COLUMNS)
        .sort(by, nulls_last=True)
    )


def _join_keys(units: pl.DataFrame, by: Sequence[str]) -> list[str]:
    """The coarsest unit keys on which every grouping key is constant, so an event joined on
    them belongs to exactly one group (run-level groupings count events with no worker)."""
    for on in (["run_id"], ["run_id", "subrun"], ["run_id", "worker"]):
        if all(_constant_within(units, k, on) for k in by):
            return on
    return list(_UNIT)


def _constant_within(units: pl.DataFrame, key: str, on: Sequence[str]) -> bool:
    if key in on:
        return True
    most = units.group_by(on).agg(pl.col(key).n_unique()).get_column(key).max()
    return most is None or int(most) <= 1  # type: ignore[arg-type]


def _mean_gini(grp: pl.DataFrame) -> float:
    per_run = [gini(r["exec_s"].to_list()) for _, r in grp.group_by("run_id")]
    defined = [g for g in per_run if not math.isnan(g)]
    return sum(defined) / len(defined) if defined else math.nan


def misses_complete_completion(per_run: pl.DataFrame) -> bool:
    """Whether the deadline-miss rate is 1 − the completion rate in every row of `per_run`
    (every worker-subrun completed or was terminated at its deadline: none withdrawn or
    unfinished), so a figure drawing both would show one fact twice.

    per_run: `outcomes` rows with `completion` and `deadline_miss`."""
    if per_run.is_empty():
        return False
    total = per_run.select((pl.col("completion") + pl.col("deadline_miss") - 1.0).abs().max())
    worst = total.item()
    return worst is not None and worst < 1e-9
